// The model a front end serves and the tokenizer that goes with it, loaded
// one way for `folio serve`, `folio generate`, `folio chat`, `folio kv`
// and the Python package.
//
//   "builtin" (or "")  the worked example's weights (seed 20) with
//                      `builtin_positions` positions, byte-level;
//   a folder / .gguf   checkpoint::LoadCheckpoint: the model, the file's
//                      tokenizer and chat template, each file read once; a
//                      byte-level model without a tokenizer uses
//                      ByteTokenizer::AsTokenizer().
//
// Byte-level prompts start with the begin token and stop on nothing, as
// `folio generate` does; other prompts get the tokenizer's special tokens.
#ifndef FOLIO_SERVING_SERVED_MODEL_H_
#define FOLIO_SERVING_SERVED_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/status.h"
#include "folio/engine/request.h"
#include "folio/grammar/structured_output.h"
#include "folio/model/model.h"
#include "folio/serving/chat_format.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::serving {

struct ServedModel {
  bool builtin = false;
  std::unique_ptr<model::Model> model;
  std::optional<tokenizer::Tokenizer> file_tokenizer;  // the model file's, if any
  std::string chat_template;  // the model file's Jinja source; empty if none
  // Structured-output constraints compiled for this model's requests,
  // shared by its front ends (thread-safe); a GBNF token reference
  // resolves in the model's vocabulary (LoadServedModel sets it up).
  std::shared_ptr<grammar::GrammarCache> grammars = std::make_shared<grammar::GrammarCache>();
  // The pooling the model file names (checkpoint::Checkpoint::pooling), if any.
  std::optional<engine::Pooling> file_pooling;

  // The file's tokenizer, or the byte-level one.
  const tokenizer::Tokenizer& tokenizer() const;
  bool byte_level() const { return !file_tokenizer.has_value(); }
  // Prompt ids: the begin token and the bytes (byte-level), or Encode with
  // special tokens.
  Result<std::vector<int32_t>> EncodePrompt(std::string_view text) const;
  // The ids every request stops on: the tokenizer's end-of-sequence id, or
  // none for a byte-level model (it stops on nothing, as `folio generate`).
  std::vector<int32_t> StopTokenIds() const;
  // How an embedding request that names no pooling is pooled: the file's
  // own pooling, else the first position's (cls) for an encoder (BERT's
  // convention), else the last position's (a decoder's only position that
  // has seen the whole prompt).
  engine::Pooling DefaultPooling() const;
  // The chat format: the file at template_path (--chat-template) when
  // given, else the model's own template, else ChatML or plain
  // (chat_format.h). A template that does not parse is an error.
  Result<ChatFormat> MakeChatFormat(const std::optional<std::string>& template_path) const;
};

// folio's built-in model (the worked example's shape, weights from seed 20,
// the same for any number of positions): what serve, generate, chat and
// logits run without --model.
Result<model::Model> BuiltinModel(uint64_t positions);
// The model at path (a folder or .gguf file), or the built-in one for ""
// or "builtin"; no tokenizer. Errors: the checkpoint's.
Result<model::Model> LoadModelOrBuiltin(const std::string& path, uint64_t builtin_positions);

// Errors: the model's; NotFound for a model with neither a tokenizer nor
// folio's byte-level vocabulary. tokenizer_pre overrides a GGUF file's
// tokenizer.ggml.pre; InvalidArgument for the built-in model or a folder,
// whose tokenizers name their own.
Result<ServedModel> LoadServedModel(const std::string& path, uint64_t builtin_positions,
                                    const std::optional<std::string>& tokenizer_pre = {});

// The name a served model answers to when none is given: "builtin", or
// the file's (a folder's) name.
std::string DefaultServedName(const std::string& path, bool builtin);

}  // namespace folio::serving

#endif  // FOLIO_SERVING_SERVED_MODEL_H_
