#include "folio/serving/served_model.h"

#include <filesystem>

#include "folio/checkpoint/checkpoint.h"
#include "folio/checkpoint/model_io.h"
#include "folio/core/file_bytes.h"
#include "folio/tokenizer/byte_tokenizer.h"

namespace folio::serving {

const tokenizer::Tokenizer& ServedModel::tokenizer() const {
  return file_tokenizer ? *file_tokenizer : tokenizer::ByteTokenizer::AsTokenizer();
}

Result<std::vector<int32_t>> ServedModel::EncodePrompt(std::string_view text) const {
  if (byte_level()) return tokenizer::ByteTokenizer::Encode(text, /*add_begin=*/true, false);
  return file_tokenizer->Encode(text, /*add_special_tokens=*/true);
}

std::vector<int32_t> ServedModel::StopTokenIds() const {
  if (byte_level()) return {};
  if (std::optional<int32_t> eos = file_tokenizer->eos_id()) return {*eos};
  return {};
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

namespace {

// The constraints compiled for a model: token references resolve in its
// vocabulary (ids below the model's vocab_size, text by the tokenizer's
// vocabulary strings).
std::shared_ptr<grammar::GrammarCache> ModelGrammars(const tokenizer::Tokenizer& tokenizer,
                                                     uint64_t vocab_size) {
  grammar::TokenVocabulary vocabulary;
  vocabulary.size = vocab_size;
  // A copy of the tokenizer: it shares the tables, and outlives the move of
  // the ServedModel that holds the original.
  vocabulary.find = [tokenizer](std::string_view text) { return tokenizer.TokenId(text); };
  return std::make_shared<grammar::GrammarCache>(
      128, grammar::GrammarLimits{}, grammar::JsonSchemaOptions{}, std::move(vocabulary));
}

}  // namespace

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
    s.grammars = ModelGrammars(s.tokenizer(), s.model->config().vocab_size);
    return s;
  }
  FOLIO_ASSIGN_OR_RETURN(checkpoint::Checkpoint c, checkpoint::LoadCheckpoint(path, tokenizer_pre));
  s.model = std::make_unique<model::Model>(std::move(c.model));
  s.file_tokenizer = std::move(c.tokenizer);
  s.chat_template = std::move(c.chat_template);
  if (!c.pooling.empty()) s.file_pooling = engine::PoolingFromName(c.pooling);
  if (!s.file_tokenizer && s.model->config().vocab_size != tokenizer::ByteTokenizer::kVocabSize) {
    return Status::NotFound("no tokenizer beside " + path +
                            ", and its vocabulary is not folio's byte-level one");
  }
  s.grammars = ModelGrammars(s.tokenizer(), s.model->config().vocab_size);
  return s;
}

engine::Pooling ServedModel::DefaultPooling() const {
  if (file_pooling) return *file_pooling;
  return model->config().IsEncoder() ? engine::Pooling::kCls : engine::Pooling::kLast;
}

Result<ChatFormat> ServedModel::MakeChatFormat(
    const std::optional<std::string>& template_path) const {
  std::optional<std::string> file_text;
  if (template_path) {
    FOLIO_ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::Map(*template_path));
    const std::span<const std::byte> b = bytes.bytes();
    file_text.emplace(reinterpret_cast<const char*>(b.data()), b.size());
  }
  return ChatFormat::Create(chat_template, file_text, byte_level() ? nullptr : &*file_tokenizer);
}

std::string DefaultServedName(const std::string& path, bool builtin) {
  if (builtin) return "builtin";
  std::string name = std::filesystem::path(path).filename().string();
  if (name.empty()) name = std::filesystem::path(path).parent_path().filename().string();
  return name;
}

}  // namespace folio::serving
