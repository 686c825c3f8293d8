// Projections a family stores fused (Phi-3's qkv_proj and gate_up_proj),
// split by rows into the tensors ForEachTensor names.
#include <string>
#include <string_view>
#include <utility>

#include "checkpoint/loaders.h"
#include "folio/core/checked_math.h"

namespace folio::checkpoint {

std::optional<FusedPart> FusedPartOf(const ModelConfig& c, const std::string& hf_name) {
  if (!model::TraitsOf(c.architecture).fused_projections) return std::nullopt;
  const std::string prefix = "model.layers.";
  if (!hf_name.starts_with(prefix)) return std::nullopt;
  const size_t dot = hf_name.find('.', prefix.size());
  if (dot == std::string::npos) return std::nullopt;
  const std::string layer = hf_name.substr(0, dot + 1);
  const std::string rest = hf_name.substr(dot + 1);
  const uint64_t q = c.q_size(), kv = c.kv_size(), f = c.ffn_size;
  const std::string qkv = layer + "self_attn.qkv_proj.weight";
  const std::string gate_up = layer + "mlp.gate_up_proj.weight";
  if (rest == "self_attn.q_proj.weight") return FusedPart{qkv, 0, q};
  if (rest == "self_attn.k_proj.weight") return FusedPart{qkv, q, kv};
  if (rest == "self_attn.v_proj.weight") return FusedPart{qkv, q + kv, kv};
  if (rest == "mlp.gate_proj.weight") return FusedPart{gate_up, 0, f};
  if (rest == "mlp.up_proj.weight") return FusedPart{gate_up, f, f};
  return std::nullopt;
}

std::string HfStoredName(const ModelConfig& c, const std::string& hf_name) {
  if (!model::TraitsOf(c.architecture).hf_mixtral_names) return hf_name;
  const size_t at = hf_name.find(".mlp.");
  if (at == std::string::npos) return hf_name;
  std::string out = hf_name.substr(0, at) + ".block_sparse_moe." + hf_name.substr(at + 5);
  for (const auto& [from, to] :
       {std::pair{".gate_proj.weight", ".w1.weight"}, std::pair{".up_proj.weight", ".w3.weight"},
        std::pair{".down_proj.weight", ".w2.weight"}}) {
    if (out.ends_with(from)) return out.substr(0, out.size() - std::string_view(from).size()) + to;
  }
  return out;  // the router: block_sparse_moe.gate.weight
}

std::optional<GgufPart> GgufPartOf(const ModelConfig& c, const std::string& hf_name) {
  if (const std::optional<FusedPart> f = FusedPartOf(c, hf_name)) {
    return GgufPart{GgufTensorName(f->stored, c.norm_layout), f->first_row, f->rows,
                    FusedRows(c, *f)};
  }
  if (!c.IsMoe()) return std::nullopt;
  // model.layers.{i}.mlp.experts.{j}.{gate,up,down}_proj.weight -> expert
  // j's rows of blk.{i}.ffn_{gate,up,down}_exps.weight.
  const std::string prefix = "model.layers.";
  const size_t dot = hf_name.find('.', prefix.size());
  const std::string experts = ".mlp.experts.";
  if (!hf_name.starts_with(prefix) || dot == std::string::npos ||
      hf_name.compare(dot, experts.size(), experts) != 0) {
    return std::nullopt;
  }
  const std::string layer = hf_name.substr(prefix.size(), dot - prefix.size());
  const size_t j0 = dot + experts.size(), j1 = hf_name.find('.', j0);
  if (j1 == std::string::npos) return std::nullopt;
  const uint64_t j = std::stoull(hf_name.substr(j0, j1 - j0));
  const std::string role = hf_name.substr(j1 + 1);
  const uint64_t e = c.num_experts, f = c.expert_ffn_size, d = c.hidden_size;
  const std::string blk = "blk." + layer + ".";
  if (role == "gate_proj.weight") return GgufPart{blk + "ffn_gate_exps.weight", j * f, f, e * f};
  if (role == "up_proj.weight") return GgufPart{blk + "ffn_up_exps.weight", j * f, f, e * f};
  if (role == "down_proj.weight") return GgufPart{blk + "ffn_down_exps.weight", j * d, d, e * d};
  return std::nullopt;
}

Result<Tensor> RowSlice(const Tensor& t, const FusedPart& part, uint64_t total_rows,
                        const std::string& name) {
  // A 3-D tensor (GGUF's stacked experts, [experts, rows, cols]) is its
  // experts' rows one after another.
  uint64_t leading = 1;
  for (size_t i = 0; i + 1 < t.shape.size(); ++i) leading *= t.shape[i];
  if (t.shape.size() < 2 || t.shape.size() > 3 || leading != total_rows) {
    // Built by appending (g++ 12 misreports `"," + std::string` as an
    // overlapping memcpy).
    std::string m = "tensor " + name + " has shape [";
    for (size_t i = 0; i < t.shape.size(); ++i) {
      if (i > 0) m.push_back(',');
      m.append(std::to_string(t.shape[i]));
    }
    m.append("], expected [").append(std::to_string(total_rows)).append(", ...]");
    return Status::InvalidArgument(std::move(m));
  }
  const uint64_t cols = t.shape.back();
  const std::optional<uint64_t> row_bytes = model::TensorBytes(t.type, {{cols}});
  if (!row_bytes || *row_bytes * total_rows != t.bytes.size()) {
    return Status::InvalidArgument("tensor " + name + " has " + std::to_string(t.bytes.size()) +
                                   " bytes, which does not match its shape");
  }
  Tensor out = t;
  out.shape = {part.rows, cols};
  out.bytes = t.bytes.subspan(part.first_row * *row_bytes, part.rows * *row_bytes);
  return out;
}

}  // namespace folio::checkpoint
