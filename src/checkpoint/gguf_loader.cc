// LoadModel for GGUF files: llama, qwen2 and qwen3 architectures with the
// tensor types WeightTypeOf maps (F64, F32, F16, BF16, Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL and IQ4_XS),
// memory-mapped in place.
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "checkpoint/loaders.h"
#include "folio/checkpoint/gguf.h"
#include "folio/ops/block_scales.h"

namespace folio::checkpoint {

std::string GgufTensorName(const std::string& hf) {
  static const std::vector<std::pair<std::string, std::string>> kLayer = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"}};
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const std::string prefix = "model.layers.";
  const size_t dot = hf.find('.', prefix.size());
  const std::string index = hf.substr(prefix.size(), dot - prefix.size());
  const std::string rest = hf.substr(dot + 1);
  for (const auto& [from, to] : kLayer) {
    if (rest == from) return "blk." + index + "." + to;
  }
  return hf;
}

namespace {

// "a, b and c": the GGUF architectures folio loads, in table order.
std::string GgufNameList() {
  std::vector<std::string_view> names;
  for (const ArchitectureTraits& t : model::kArchitectureTraits) {
    if (!t.gguf_name.empty()) names.push_back(t.gguf_name);
  }
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) list += i + 1 == names.size() ? " and " : ", ";
    list += names[i];
  }
  return list;
}

Result<ModelConfig> ConfigFromGguf(const GgufFile& f) {
  FOLIO_ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  const std::optional<Architecture> known = model::ArchitectureFromGgufName(arch);
  if (!known) {
    return Status::Unimplemented("general.architecture \"" + arch + "\" (folio loads " +
                                 GgufNameList() + ")");
  }
  const ArchitectureTraits& t = model::TraitsOf(*known);
  auto key = [&](const char* k) { return arch + "." + k; };
  ModelConfig c;
  c.architecture = *known;
  c.rope_style = t.gguf_rope_style;
  c.attention_bias = t.attention_bias == Fixed::kAlways;
  c.qk_norm = t.qk_norm == Fixed::kAlways;
  FOLIO_ASSIGN_OR_RETURN(c.max_positions, f.GetUint(key("context_length")));
  FOLIO_ASSIGN_OR_RETURN(c.hidden_size, f.GetUint(key("embedding_length")));
  FOLIO_ASSIGN_OR_RETURN(c.num_layers, f.GetUint(key("block_count")));
  FOLIO_ASSIGN_OR_RETURN(c.ffn_size, f.GetUint(key("feed_forward_length")));
  FOLIO_ASSIGN_OR_RETURN(c.num_heads, f.GetUint(key("attention.head_count")));
  c.num_kv_heads = c.num_heads;
  if (f.Has(key("attention.head_count_kv"))) {
    FOLIO_ASSIGN_OR_RETURN(c.num_kv_heads, f.GetUint(key("attention.head_count_kv")));
  }
  FOLIO_ASSIGN_OR_RETURN(c.norm_eps, f.GetFloat(key("attention.layer_norm_rms_epsilon")));
  c.rope_theta = 10000.0;
  if (f.Has(key("rope.freq_base"))) {
    FOLIO_ASSIGN_OR_RETURN(c.rope_theta, f.GetFloat(key("rope.freq_base")));
  }
  if (f.Has(key("attention.key_length"))) {
    FOLIO_ASSIGN_OR_RETURN(c.explicit_head_dim, f.GetUint(key("attention.key_length")));
    if (c.num_heads != 0 && c.explicit_head_dim * c.num_heads == c.hidden_size) {
      c.explicit_head_dim = 0;
    }
  }
  if (f.Has(key("rope.dimension_count"))) {
    FOLIO_ASSIGN_OR_RETURN(uint64_t rot, f.GetUint(key("rope.dimension_count")));
    if (c.num_heads != 0 && rot != c.head_dim()) {
      return Status::Unimplemented(key("rope.dimension_count") + " = " + std::to_string(rot) +
                                   ": partial rotary embeddings");
    }
  }
  if (f.Has(key("rope.scaling.type"))) {
    FOLIO_ASSIGN_OR_RETURN(std::string type, f.GetString(key("rope.scaling.type")));
    if (type == "linear") {
      c.rope_scaling.type = RopeScaling::Type::kLinear;
      FOLIO_ASSIGN_OR_RETURN(c.rope_scaling.factor, f.GetFloat(key("rope.scaling.factor")));
    } else if (type != "none") {
      return Status::Unimplemented(key("rope.scaling.type") + " \"" + type + "\"");
    }
  }
  if (f.Has(key("attention.sliding_window"))) {
    FOLIO_ASSIGN_OR_RETURN(c.window, f.GetUint(key("attention.sliding_window")));
  }
  const GgufFile::TensorInfo* embd = f.Find("token_embd.weight");
  if (embd == nullptr) return Status::NotFound("missing tensor token_embd.weight");
  if (embd->dims.size() != 2) return Status::InvalidArgument("token_embd.weight must be 2-D");
  c.vocab_size = embd->dims[1];
  c.tie_embeddings = f.Find("output.weight") == nullptr;
  if (f.Find("rope_freqs.weight") != nullptr) {
    return Status::Unimplemented("rope_freqs.weight (per-frequency RoPE factors)");
  }
  FOLIO_RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace

Result<Model> LoadGgufModel(const std::filesystem::path& path) {
  FOLIO_ASSIGN_OR_RETURN(GgufFile opened, GgufFile::Open(path));
  return GgufModel(std::make_shared<const GgufFile>(std::move(opened)), path);
}

Result<Model> GgufModel(std::shared_ptr<const GgufFile> file, const std::filesystem::path& path) {
  Result<ModelConfig> config = ConfigFromGguf(*file);
  if (!config) return config.error().WithContext(path.string());

  std::map<std::string, const GgufFile::TensorInfo*> unused;
  for (const auto& info : file->tensors()) unused.emplace(info.name, &info);
  ModelWeights weights;
  weights.layers.resize(config->num_layers);
  Status status;
  ForEachTensor(
      *config, weights, [&](const std::string& hf_name, const std::vector<uint64_t>&, Tensor& t) {
        if (!status.ok()) return;
        const std::string name = GgufTensorName(hf_name);
        auto it = unused.find(name);
        if (it == unused.end()) {
          status = Status::NotFound(path.string() + ": missing tensor " + name);
          return;
        }
        const GgufFile::TensorInfo& info = *it->second;
        Result<TensorType> type = WeightTypeOf(info);
        if (!type) {
          status = type.error().WithContext(path.string());
          return;
        }
        t.type = *type;
        t.shape.assign(info.dims.rbegin(), info.dims.rend());  // ggml lists innermost first
        t.bytes = file->Data(info);
        if (Status s = ops::CheckBlockScales(t.type, t.bytes); !s.ok()) {
          status = s.WithContext(path.string() + ": tensor " + name);
          return;
        }
        t.owner = file;
        unused.erase(it);
      });
  FOLIO_RETURN_IF_ERROR(status);
  if (!unused.empty()) {
    return Status::InvalidArgument(path.string() + ": unexpected tensor " + unused.begin()->first);
  }
  Result<Model> model = Model::Create(*config, std::move(weights), /*check_finite=*/false);
  if (!model) return model.error().WithContext(path.string());
  return model;
}

}  // namespace folio::checkpoint
