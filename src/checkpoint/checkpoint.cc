#include "folio/checkpoint/checkpoint.h"

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <system_error>
#include <vector>

#include "checkpoint/loaders.h"
#include "folio/checkpoint/gguf.h"
#include "folio/checkpoint/model_tokenizer.h"

namespace folio::checkpoint {

std::string FolderChatTemplate(const std::filesystem::path& dir) {
  if (std::ifstream file(dir / "chat_template.jinja"); file) {
    std::ostringstream text;
    text << file.rdbuf();
    return text.str();
  }
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

Result<std::string> FolderPooling(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::path config = dir / "1_Pooling" / "config.json";
  const auto modules_path = dir / "modules.json";
  if (std::filesystem::exists(modules_path, ec)) {
    std::ifstream in(modules_path);
    const nlohmann::json modules = nlohmann::json::parse(in, nullptr, false);
    if (!modules.is_array()) {
      return Status::Corruption(modules_path.string() + " is not a JSON array of modules");
    }
    config.clear();
    for (const nlohmann::json& m : modules) {
      if (m.is_object() && m.value("type", "") == "sentence_transformers.models.Pooling" &&
          m.contains("path") && m["path"].is_string()) {
        config = dir / m["path"].get<std::string>() / "config.json";
      }
    }
    if (config.empty()) return std::string();  // no pooling module
  }
  if (!std::filesystem::exists(config, ec)) return std::string();
  std::ifstream in(config);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) return Status::Corruption(config.string() + " is not a JSON object");
  std::vector<std::string> modes;
  for (const auto& [key, value] : j.items()) {
    if (key.starts_with("pooling_mode_") && value.is_boolean() && value.get<bool>()) {
      modes.push_back(key.substr(std::string_view("pooling_mode_").size()));
    }
  }
  if (j.contains("pooling_mode") && j["pooling_mode"].is_string()) {  // newer files
    modes = {j["pooling_mode"].get<std::string>()};
  }
  if (modes.size() != 1) {
    return Status::Unimplemented(config.string() + ": " + std::to_string(modes.size()) +
                                 " pooling modes (folio pools one way: mean, cls or lasttoken)");
  }
  const std::string& mode = modes[0];
  if (mode == "mean_tokens" || mode == "mean") return std::string("mean");
  if (mode == "cls_token" || mode == "cls") return std::string("cls");
  if (mode == "lasttoken") return std::string("last");
  return Status::Unimplemented(config.string() + ": pooling mode \"" + mode +
                               "\" (folio pools by mean, cls or lasttoken)");
}

namespace {

Result<std::string> GgufPooling(const GgufFile& f, const std::string& arch) {
  const std::string key = arch + ".pooling_type";
  if (!f.Has(key)) return std::string();
  FOLIO_ASSIGN_OR_RETURN(uint64_t type, f.GetUint(key));
  switch (type) {
    case 0:
      return std::string();
    case 1:
      return std::string("mean");
    case 2:
      return std::string("cls");
    case 3:
      return std::string("last");
    default:
      return Status::Unimplemented(key + " " + std::to_string(type) +
                                   " (folio pools by mean, cls or last)");
  }
}

}  // namespace

Result<Checkpoint> LoadCheckpoint(const std::filesystem::path& path,
                                  const std::optional<std::string>& pre_tokenizer) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    FOLIO_ASSIGN_OR_RETURN(Model model, LoadFolderModel(path));
    Checkpoint c{std::move(model), std::nullopt, "", ""};
    FOLIO_ASSIGN_OR_RETURN(c.tokenizer, LoadModelTokenizer(path, pre_tokenizer));
    c.chat_template = FolderChatTemplate(path);
    FOLIO_ASSIGN_OR_RETURN(c.pooling, FolderPooling(path));
    return c;
  }
  if (!std::filesystem::exists(path, ec)) {
    return Status::NotFound("no model at " + path.string());
  }
  FOLIO_ASSIGN_OR_RETURN(GgufFile opened, GgufFile::Open(path));
  auto file = std::make_shared<const GgufFile>(std::move(opened));
  FOLIO_ASSIGN_OR_RETURN(Model model, GgufModel(file, path));
  Checkpoint c{std::move(model), std::nullopt, "", ""};
  Result<tokenizer::Tokenizer> tok = GgufTokenizer(*file, pre_tokenizer);
  if (!tok) return tok.error().WithContext(path.string());
  c.tokenizer = std::move(*tok);
  if (Result<std::string> t = file->GetString("tokenizer.chat_template")) c.chat_template = *t;
  FOLIO_ASSIGN_OR_RETURN(std::string arch, file->GetString("general.architecture"));
  Result<std::string> pooling = GgufPooling(*file, arch);
  if (!pooling) return pooling.error().WithContext(path.string());
  c.pooling = std::move(*pooling);
  return c;
}

}  // namespace folio::checkpoint
