// The tokenizer that travels with a model file.
#ifndef FOLIO_CHECKPOINT_MODEL_TOKENIZER_H_
#define FOLIO_CHECKPOINT_MODEL_TOKENIZER_H_

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "folio/checkpoint/gguf_writer.h"
#include "folio/core/status.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::checkpoint {

// A Hugging Face folder's tokenizer.json, or a GGUF file's tokenizer.ggml.*
// metadata (gpt2-style BPE, llama SentencePiece or bert WordPiece, with
// llama.cpp's defaults for the keys a file leaves out). nullopt for a folder
// without tokenizer.json (folio's byte-level models use ByteTokenizer).
// Errors name the file and the key.
//
// pre_tokenizer, when given, replaces a GGUF file's tokenizer.ggml.pre (one
// of Tokenizer::KnownPreTokenizers(), else kUnimplemented listing them); a
// tokenizer.json carries its own pre-tokenizer, so it is refused there
// (kInvalidArgument).
Result<std::optional<tokenizer::Tokenizer>> LoadModelTokenizer(
    const std::filesystem::path& model_path,
    const std::optional<std::string>& pre_tokenizer = std::nullopt);

// The tokenizer.ggml.* keys for a gpt2-style BPE spec (Tokenizer::ToGgufSpec):
// model "gpt2", pre, tokens, token_type, merges, the bos/eos/unk/padding ids
// it has and add_bos_token/add_eos_token, as llama.cpp writes them; the GGUF
// loader above reads them back into the same spec.
std::vector<GgufKeyValue> GgufTokenizerKeys(const tokenizer::TokenizerSpec& spec);

}  // namespace folio::checkpoint

#endif  // FOLIO_CHECKPOINT_MODEL_TOKENIZER_H_
