#include "folio/checkpoint/checkpoint.h"

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <system_error>

#include "checkpoint/loaders.h"
#include "folio/checkpoint/gguf.h"
#include "folio/checkpoint/model_tokenizer.h"

namespace folio::checkpoint {

std::string FolderChatTemplate(const std::filesystem::path& dir) {
  std::ifstream in(dir / "tokenizer_config.json");
  if (!in) return "";
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) return "";
  auto t = j.find("chat_template");
  if (t == j.end()) return "";
  if (t->is_string()) return t->get<std::string>();
  if (t->is_array()) {
    std::string first;
    for (const nlohmann::json& named : *t) {
      if (!named.is_object() || !named.contains("template") || !named["template"].is_string()) {
        continue;
      }
      const std::string text = named["template"].get<std::string>();
      if (named.value("name", "") == "default") return text;
      if (first.empty()) first = text;
    }
    return first;
  }
  return "";
}

Result<Checkpoint> LoadCheckpoint(const std::filesystem::path& path,
                                  const std::optional<std::string>& pre_tokenizer) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    FOLIO_ASSIGN_OR_RETURN(Model model, LoadFolderModel(path));
    Checkpoint c{std::move(model), std::nullopt, ""};
    FOLIO_ASSIGN_OR_RETURN(c.tokenizer, LoadModelTokenizer(path, pre_tokenizer));
    c.chat_template = FolderChatTemplate(path);
    return c;
  }
  if (!std::filesystem::exists(path, ec)) {
    return Status::NotFound("no model at " + path.string());
  }
  FOLIO_ASSIGN_OR_RETURN(GgufFile opened, GgufFile::Open(path));
  auto file = std::make_shared<const GgufFile>(std::move(opened));
  FOLIO_ASSIGN_OR_RETURN(Model model, GgufModel(file, path));
  Checkpoint c{std::move(model), std::nullopt, ""};
  Result<tokenizer::Tokenizer> tok = GgufTokenizer(*file, pre_tokenizer);
  if (!tok) return tok.error().WithContext(path.string());
  c.tokenizer = std::move(*tok);
  if (Result<std::string> t = file->GetString("tokenizer.chat_template")) c.chat_template = *t;
  return c;
}

}  // namespace folio::checkpoint
