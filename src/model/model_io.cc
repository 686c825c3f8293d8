// SaveModel / LoadModel: config.json + model.safetensors.
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <system_error>

#include "folio/model/model.h"
#include "folio/model/safetensors.h"

namespace folio::model {
namespace {

using nlohmann::json;

constexpr const char* kArchitecture = "FolioForCausalLM";
constexpr size_t kMaxConfigBytes = 1 << 20;

json ConfigToJson(const ModelConfig& c) {
  return json{
      {"architectures", {kArchitecture}},
      {"model_type", "folio"},
      {"hidden_size", c.hidden_size},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"intermediate_size", c.ffn_size},
      {"num_hidden_layers", c.num_layers},
      {"max_position_embeddings", c.max_positions},
      {"vocab_size", c.vocab_size},
      {"rope_theta", c.rope_theta},
      {"rope_style", "interleaved"},
      {"rms_norm_eps", c.norm_eps},
      {"tie_word_embeddings", c.tie_embeddings},
      {"sliding_window", c.window == 0 ? json(nullptr) : json(c.window)},
      {"hidden_act", "silu"},
      {"bos_token_id", 0},
      {"eos_token_id", 1},
      {"torch_dtype", "float64"},
  };
}

Status ReadU64(const json& j, const char* key, uint64_t& out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::NotFound(std::string("missing key \"") + key + "\"");
  if (!it->is_number_unsigned()) {
    return Status::InvalidArgument(std::string("\"") + key +
                                   "\" must be a non-negative integer (got " + it->dump() + ")");
  }
  out = it->get<uint64_t>();
  return Status::Ok();
}

Status ReadF64(const json& j, const char* key, double& out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::NotFound(std::string("missing key \"") + key + "\"");
  if (!it->is_number()) {
    return Status::InvalidArgument(std::string("\"") + key + "\" must be a number (got " +
                                   it->dump() + ")");
  }
  out = it->get<double>();
  return Status::Ok();
}

Result<ModelConfig> ConfigFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("config is not a JSON object");
  auto arch = j.find("architectures");
  if (arch == j.end() || !arch->is_array() || arch->size() != 1 ||
      *arch != json{kArchitecture}) {
    return Status::Unimplemented("architectures must be [\"" + std::string(kArchitecture) +
                                 "\"] (got " + (arch == j.end() ? "nothing" : arch->dump()) +
                                 ")");
  }
  auto style = j.find("rope_style");
  if (style == j.end() || *style != "interleaved") {
    return Status::Unimplemented("rope_style must be \"interleaved\"");
  }
  ModelConfig c;
  FOLIO_RETURN_IF_ERROR(ReadU64(j, "hidden_size", c.hidden_size));
  FOLIO_RETURN_IF_ERROR(ReadU64(j, "num_attention_heads", c.num_heads));
  FOLIO_RETURN_IF_ERROR(ReadU64(j, "num_key_value_heads", c.num_kv_heads));
  FOLIO_RETURN_IF_ERROR(ReadU64(j, "intermediate_size", c.ffn_size));
  FOLIO_RETURN_IF_ERROR(ReadU64(j, "num_hidden_layers", c.num_layers));
  FOLIO_RETURN_IF_ERROR(ReadU64(j, "max_position_embeddings", c.max_positions));
  FOLIO_RETURN_IF_ERROR(ReadU64(j, "vocab_size", c.vocab_size));
  FOLIO_RETURN_IF_ERROR(ReadF64(j, "rope_theta", c.rope_theta));
  FOLIO_RETURN_IF_ERROR(ReadF64(j, "rms_norm_eps", c.norm_eps));
  auto tie = j.find("tie_word_embeddings");
  if (tie == j.end() || !tie->is_boolean()) {
    return Status::InvalidArgument("\"tie_word_embeddings\" must be true or false");
  }
  c.tie_embeddings = tie->get<bool>();
  auto window = j.find("sliding_window");
  if (window != j.end() && !window->is_null()) {
    FOLIO_RETURN_IF_ERROR(ReadU64(j, "sliding_window", c.window));
  }
  FOLIO_RETURN_IF_ERROR(c.Validate());
  return c;
}

Status WriteFileAtomically(const std::filesystem::path& path, const std::string& data) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) return Status::IoError("cannot write " + tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::IoError("cannot rename " + tmp.string() + ": " + ec.message());
  return Status::Ok();
}

Result<std::string> ReadSmallFile(const std::filesystem::path& path, size_t limit) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return Status::NotFound("cannot read " + path.string() + ": " + ec.message());
  if (size > limit) {
    return Status::InvalidArgument(path.string() + " is " + std::to_string(size) +
                                   " bytes; the limit is " + std::to_string(limit));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  if (!in) return Status::IoError("cannot read " + path.string());
  return s.str();
}

}  // namespace

Status SaveModel(const Model& model, const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create " + dir.string() + ": " + ec.message());
  std::vector<TensorToWrite> tensors;
  ForEachTensor(model.config(), model.weights(),
                [&](const std::string& name, const std::vector<uint64_t>& shape,
                    const std::vector<double>& t) {
                  tensors.push_back({name, DType::kF64, shape,
                                     std::as_bytes(std::span<const double>(t))});
                });
  const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                       {"folio_model_id", model.id()}};
  FOLIO_RETURN_IF_ERROR(WriteSafetensors(dir / "model.safetensors", tensors, metadata));
  return WriteFileAtomically(dir / "config.json", ConfigToJson(model.config()).dump(2) + "\n");
}

Result<Model> LoadModel(const std::filesystem::path& dir) {
  const auto config_path = dir / "config.json";
  FOLIO_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(config_path, kMaxConfigBytes));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Corruption(config_path.string() + ": not valid JSON");
  Result<ModelConfig> config = ConfigFromJson(j);
  if (!config) return config.error().WithContext(config_path.string());

  const auto weights_path = dir / "model.safetensors";
  FOLIO_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(weights_path));
  ModelWeights<double> weights = AllocateWeights<double>(*config);
  Status status;
  std::set<std::string> expected;
  ForEachTensor(*config, weights, [&](const std::string& name,
                                      const std::vector<uint64_t>& shape,
                                      std::vector<double>& t) {
    expected.insert(name);
    if (!status.ok()) return;
    const TensorInfo* info = file.Find(name);
    if (info == nullptr) {
      status = Status::NotFound(weights_path.string() + ": missing tensor " + name);
      return;
    }
    if (info->shape != shape) {
      std::string want, got;
      for (uint64_t s : shape) want += std::to_string(s) + ",";
      for (uint64_t s : info->shape) got += std::to_string(s) + ",";
      status = Status::InvalidArgument(weights_path.string() + ": tensor " + name +
                                       " has shape [" + got + "], expected [" + want + "]");
      return;
    }
    if (info->dtype == DType::kI8) {
      status = Status::Unimplemented(weights_path.string() + ": tensor " + name +
                                     " is i8; model weights must be a float type");
      return;
    }
    const std::span<const std::byte> data = file.Data(*info);
    for (size_t i = 0; i < t.size(); ++i) t[i] = LoadElement<double>(info->dtype, data.data(), i);
  });
  FOLIO_RETURN_IF_ERROR(status);
  for (const TensorInfo& info : file.tensors()) {
    if (!expected.count(info.name)) {
      return Status::InvalidArgument(weights_path.string() + ": unexpected tensor " + info.name);
    }
  }
  Result<Model> model = Model::Create(*config, std::move(weights));
  if (!model) return model.error().WithContext(dir.string());
  return model;
}

}  // namespace folio::model
