// The tokenizer that travels with a model file.
#ifndef FOLIO_CHECKPOINT_MODEL_TOKENIZER_H_
#define FOLIO_CHECKPOINT_MODEL_TOKENIZER_H_

#include <filesystem>
#include <optional>

#include "folio/core/status.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::checkpoint {

// A Hugging Face folder's tokenizer.json, or a GGUF file's tokenizer.ggml.*
// metadata (gpt2-style BPE or llama SentencePiece). nullopt for a folder
// without tokenizer.json (folio's byte-level models use ByteTokenizer).
// Errors name the file and the key.
Result<std::optional<tokenizer::Tokenizer>> LoadModelTokenizer(
    const std::filesystem::path& model_path);

}  // namespace folio::checkpoint

#endif  // FOLIO_CHECKPOINT_MODEL_TOKENIZER_H_
