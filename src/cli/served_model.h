// The model a serving command runs and the tokenizer that goes with it, in
// one place for `folio serve` and `folio kv`.
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
#ifndef FOLIO_CLI_SERVED_MODEL_H_
#define FOLIO_CLI_SERVED_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/status.h"
#include "folio/engine/engine.h"
#include "folio/model/model.h"
#include "folio/server/chat_format.h"
#include "folio/server/request.h"
#include "folio/tokenizer/tokenizer.h"

namespace CLI {
class App;
}

namespace folio::cli {

struct ServedModel {
  bool builtin = false;
  std::unique_ptr<model::Model> model;
  std::optional<tokenizer::Tokenizer> file_tokenizer;  // the model file's, if any
  std::string chat_template;  // the model file's Jinja source; empty if none

  // The file's tokenizer, or the byte-level one.
  const tokenizer::Tokenizer& tokenizer() const;
  bool byte_level() const { return !file_tokenizer.has_value(); }
  // Prompt ids: the begin token and the bytes (byte-level), or Encode with
  // special tokens.
  Result<std::vector<int32_t>> EncodePrompt(std::string_view text) const;
  // The chat format: the file at template_path (--chat-template) when
  // given, else the model's own template, else ChatML or plain
  // (server/chat_format.h). A template that does not parse is an error.
  Result<server::ChatFormat> MakeChatFormat(const std::optional<std::string>& template_path) const;
  // What the OpenAI request layer (server/request.h) needs of this model:
  // its tokenizer, special tokens and stop ids (byte-level: the begin
  // token first, no stop token, as `folio generate`), shape and name.
  // chat_format (required) must outlive the result. The caller sets
  // aliases, pool_positions and default_max_tokens.
  server::ModelInfo MakeModelInfo(const server::ChatFormat* chat_format, std::string name) const;
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
// tokenizer.ggml.pre (--tokenizer-pre); InvalidArgument for the built-in
// model or a folder, whose tokenizers name their own.
Result<ServedModel> LoadServedModel(const std::string& path, uint64_t builtin_positions,
                                    const std::optional<std::string>& tokenizer_pre = {});

// The name a served model answers to when none is given: "builtin", or
// the file's (a folder's) name.
std::string DefaultServedName(const std::string& path, bool builtin);

// Adds --tokenizer-pre NAME (generate, serve, tokenize) to `cmd`.
void AddTokenizerPreOption(CLI::App& cmd, std::optional<std::string>& value);
// --matmul-activations f32|q8 (ops::MatMulActivations), default f32.
void AddMatMulActivationsOption(CLI::App& cmd, std::string& value);
// Adds --chat-template FILE (serve, chat) to `cmd`.
void AddChatTemplateOption(CLI::App& cmd, std::optional<std::string>& value);
// --draft-model PATH: speculative decoding's drafts from a smaller model
// sharing the target's vocabulary (engine/draft_model_drafter.h).
void AddDraftModelOption(CLI::App& cmd, std::string& value);
// --speculative-acceptance exact|rejection (engine::DraftAcceptance).
void AddSpeculativeAcceptanceOption(CLI::App& cmd, std::string& value);
// Those two flags' values onto ec.speculative: the acceptance rule, and the
// draft model (none for ""), loaded into `draft`, which must outlive the
// engine. Errors name the flag.
Status ApplySpeculativeFlags(const std::string& acceptance, const std::string& draft_model,
                             uint64_t builtin_positions, engine::EngineConfig& ec,
                             std::optional<model::Model>& draft);

}  // namespace folio::cli

#endif  // FOLIO_CLI_SERVED_MODEL_H_
