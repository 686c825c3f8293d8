// Everything a model file carries, each file read once: the model, its
// tokenizer and its chat template's source. `folio serve` loads this; a
// GGUF file is opened and parsed once for all three.
#ifndef FOLIO_CHECKPOINT_CHECKPOINT_H_
#define FOLIO_CHECKPOINT_CHECKPOINT_H_

#include <filesystem>
#include <optional>
#include <string>

#include "folio/core/status.h"
#include "folio/model/model.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::checkpoint {

struct Checkpoint {
  model::Model model;
  // A folder's tokenizer.json or a GGUF file's tokenizer.ggml.* metadata;
  // nullopt for a folder without tokenizer.json (folio's byte-level models).
  std::optional<tokenizer::Tokenizer> tokenizer;
  // The Jinja chat template: a folder's tokenizer_config.json
  // "chat_template" (a string, or a list of named templates, "default"
  // preferred) or GGUF's tokenizer.chat_template. Empty when there is none
  // or it cannot be read (a chat template is optional).
  std::string chat_template;
  // How the file says its embeddings are pooled: "mean", "cls" or "last";
  // empty when it does not say. A folder's sentence-transformers Pooling
  // module (modules.json names its folder, else 1_Pooling/config.json), or
  // GGUF's <architecture>.pooling_type (1 mean, 2 cls, 3 last; 0 none).
  std::string pooling;
};

// FolderPooling / GGUF pooling_type as above. Errors: a malformed file
// (kCorruption), a pooling folio does not compute — max, mean of square
// roots, weighted mean, rank (kUnimplemented, naming it).
Result<std::string> FolderPooling(const std::filesystem::path& dir);

// A folder or .gguf file, as LoadModel (model_io.h) and LoadModelTokenizer
// (model_tokenizer.h) read it, with the same errors, in that order;
// pre_tokenizer overrides a GGUF file's tokenizer.ggml.pre as there.
Result<Checkpoint> LoadCheckpoint(const std::filesystem::path& path,
                                  const std::optional<std::string>& pre_tokenizer = std::nullopt);

}  // namespace folio::checkpoint

#endif  // FOLIO_CHECKPOINT_CHECKPOINT_H_
