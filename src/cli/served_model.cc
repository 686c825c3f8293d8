#include "cli/served_model.h"

#include <CLI/CLI.hpp>
#include <filesystem>

#include "folio/checkpoint/checkpoint.h"
#include "folio/checkpoint/model_io.h"
#include "folio/core/file_bytes.h"
#include "folio/tokenizer/byte_tokenizer.h"

namespace folio::cli {

const tokenizer::Tokenizer& ServedModel::tokenizer() const {
  return file_tokenizer ? *file_tokenizer : tokenizer::ByteTokenizer::AsTokenizer();
}

Result<std::vector<int32_t>> ServedModel::EncodePrompt(std::string_view text) const {
  if (byte_level()) return tokenizer::ByteTokenizer::Encode(text, /*add_begin=*/true, false);
  return file_tokenizer->Encode(text, /*add_special_tokens=*/true);
}

Result<model::Model> BuiltinModel(uint64_t positions) {
  model::ModelConfig c = model::WorkedExampleConfig();
  c.max_positions = positions;
  return model::Model::FromSeed(c, 20);
}

Result<model::Model> LoadModelOrBuiltin(const std::string& path, uint64_t builtin_positions) {
  if (path.empty() || path == "builtin") return BuiltinModel(builtin_positions);
  return checkpoint::LoadModel(path);
}

Result<ServedModel> LoadServedModel(const std::string& path, uint64_t builtin_positions,
                                    const std::optional<std::string>& tokenizer_pre) {
  ServedModel s;
  if (path.empty() || path == "builtin") {
    if (tokenizer_pre) {
      return Status::InvalidArgument(
          "--tokenizer-pre applies to a GGUF file; the built-in model is byte-level");
    }
    FOLIO_ASSIGN_OR_RETURN(model::Model m, BuiltinModel(builtin_positions));
    s.builtin = true;
    s.model = std::make_unique<model::Model>(std::move(m));
    return s;
  }
  FOLIO_ASSIGN_OR_RETURN(checkpoint::Checkpoint c, checkpoint::LoadCheckpoint(path, tokenizer_pre));
  s.model = std::make_unique<model::Model>(std::move(c.model));
  s.file_tokenizer = std::move(c.tokenizer);
  s.chat_template = std::move(c.chat_template);
  if (!s.file_tokenizer && s.model->config().vocab_size != tokenizer::ByteTokenizer::kVocabSize) {
    return Status::NotFound("no tokenizer beside " + path +
                            ", and its vocabulary is not folio's byte-level one");
  }
  return s;
}

Result<server::ChatFormat> ServedModel::MakeChatFormat(
    const std::optional<std::string>& template_path) const {
  std::optional<std::string> file_text;
  if (template_path) {
    FOLIO_ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::Map(*template_path));
    const std::span<const std::byte> b = bytes.bytes();
    file_text.emplace(reinterpret_cast<const char*>(b.data()), b.size());
  }
  return server::ChatFormat::Create(chat_template, file_text,
                                    byte_level() ? nullptr : &*file_tokenizer);
}

std::string DefaultServedName(const std::string& path, bool builtin) {
  if (builtin) return "builtin";
  std::string name = std::filesystem::path(path).filename().string();
  if (name.empty()) name = std::filesystem::path(path).parent_path().filename().string();
  return name;
}

server::ModelInfo ServedModel::MakeModelInfo(const server::ChatFormat* chat_format,
                                             std::string name) const {
  server::ModelInfo info;
  info.tokenizer = &tokenizer();
  if (byte_level()) {
    info.add_special_tokens = false;
    info.prepend_id = tokenizer::ByteTokenizer::kBegin;
  } else if (std::optional<int32_t> eos = file_tokenizer->eos_id()) {
    info.stop_token_ids.push_back(*eos);
  }
  info.chat_format = chat_format;
  info.name = std::move(name);
  info.vocab_size = model->config().vocab_size;
  info.max_positions = model->config().max_positions;
  return info;
}

void AddDraftModelOption(CLI::App& cmd, std::string& value) {
  cmd.add_option("--draft-model", value,
                 "a smaller model (folder, .gguf or 'builtin') with the same vocabulary that "
                 "drafts for --speculative-tokens instead of prompt lookup; the output never "
                 "changes");
}

void AddSpeculativeAcceptanceOption(CLI::App& cmd, std::string& value) {
  cmd.add_option("--speculative-acceptance", value,
                 "exact (default: a draft token stands only where plain decoding would draw "
                 "it, so the output never changes) or rejection (standard speculative "
                 "sampling: plain decoding's distribution, not its random stream; more drafts "
                 "accepted when sampling)");
}

Status ApplySpeculativeFlags(const std::string& acceptance, const std::string& draft_model,
                             uint64_t builtin_positions, engine::EngineConfig& ec,
                             std::optional<model::Model>& draft) {
  Result<engine::DraftAcceptance> rule = engine::ParseDraftAcceptance(acceptance);
  if (!rule) return rule.error().WithContext("--speculative-acceptance");
  ec.speculative.acceptance = *rule;
  if (draft_model.empty()) return Status::Ok();
  Result<model::Model> d = LoadModelOrBuiltin(draft_model, builtin_positions);
  if (!d) return d.error().WithContext("--draft-model");
  draft = std::move(*d);
  ec.speculative.draft_model = &*draft;
  return Status::Ok();
}

void AddChatTemplateOption(CLI::App& cmd, std::optional<std::string>& value) {
  cmd.add_option("--chat-template", value,
                 "a Jinja chat template file to use instead of the model's own");
}

void AddTokenizerPreOption(CLI::App& cmd, std::optional<std::string>& value) {
  cmd.add_option("--tokenizer-pre", value,
                 "pre-tokenizer name replacing the GGUF file's tokenizer.ggml.pre "
                 "(a name llama.cpp knows, e.g. llama-bpe, qwen2, gpt-4o)");
}

void AddMatMulActivationsOption(CLI::App& cmd, std::string& value) {
  cmd.add_option("--matmul-activations", value,
                 "quantized weights: f32 (default; exact products of the dequantized weights) or "
                 "q8 (8-bit activations and integer dot products, as ggml: 2-3x faster matmuls, "
                 "logits about a logit away)");
}

}  // namespace folio::cli
