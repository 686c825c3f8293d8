// Projections a family stores fused (Phi-3's qkv_proj and gate_up_proj),
// split by rows into the tensors ForEachTensor names.
#include <string>
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

Result<Tensor> RowSlice(const Tensor& t, const FusedPart& part, uint64_t total_rows,
                        const std::string& name) {
  if (t.shape.size() != 2 || t.shape[0] != total_rows) {
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
  const std::optional<uint64_t> row_bytes = model::TensorBytes(t.type, {{t.shape[1]}});
  if (!row_bytes || *row_bytes * total_rows != t.bytes.size()) {
    return Status::InvalidArgument("tensor " + name + " has " + std::to_string(t.bytes.size()) +
                                   " bytes, which does not match its shape");
  }
  Tensor out = t;
  out.shape = {part.rows, t.shape[1]};
  out.bytes = t.bytes.subspan(part.first_row * *row_bytes, part.rows * *row_bytes);
  return out;
}

}  // namespace folio::checkpoint
