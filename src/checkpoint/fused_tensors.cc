// Projections a family stores fused (Phi-3's qkv_proj and gate_up_proj;
// gpt-oss's experts, in f32/bf16 or MXFP4), split into the tensors
// ForEachTensor names.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
  if (model::TraitsOf(c.architecture).hf_gpt_oss) {  // the router is mlp.router
    for (const char* role : {".mlp.gate.weight", ".mlp.gate.bias"}) {
      if (hf_name.ends_with(role)) {
        const std::string_view r(role);
        return hf_name.substr(0, hf_name.size() - r.size()) + ".mlp.router" +
               std::string(r.substr(std::string_view(".mlp.gate").size()));
      }
    }
    return hf_name;
  }
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
    return GgufPart{GgufTensorName(f->stored, c), f->first_row, f->rows, FusedRows(c, *f)};
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
  // Biases (gpt-oss): row j of [experts, n].
  for (const char* r : {"gate", "up", "down"}) {
    if (role == std::string(r) + "_proj.bias") {
      return GgufPart{blk + "ffn_" + r + "_exps.bias", j, 1, e, /*vector=*/true};
    }
  }
  return std::nullopt;
}

std::optional<GptOssExpertPart> GptOssExpertPartOf(const ModelConfig& c,
                                                   const std::string& hf_name) {
  if (!model::TraitsOf(c.architecture).hf_gpt_oss) return std::nullopt;
  const std::string experts = ".mlp.experts.";
  const size_t at = hf_name.find(experts);
  if (!hf_name.starts_with("model.layers.") || at == std::string::npos) return std::nullopt;
  const size_t j0 = at + experts.size(), j1 = hf_name.find('.', j0);
  if (j1 == std::string::npos) return std::nullopt;
  const std::string base = hf_name.substr(0, j0);  // model.layers.{i}.mlp.experts.
  const uint64_t j = std::stoull(hf_name.substr(j0, j1 - j0));
  const std::string role = hf_name.substr(j1 + 1);
  using Role = GptOssExpertPart::Role;
  for (const auto& [suffix, r] :
       {std::pair{"gate_proj", Role::kGate}, std::pair{"up_proj", Role::kUp},
        std::pair{"down_proj", Role::kDown}}) {
    const std::string stored = base + (r == Role::kDown ? "down_proj" : "gate_up_proj");
    if (role == std::string(suffix) + ".weight") return GptOssExpertPart{stored, j, r, false};
    if (role == std::string(suffix) + ".bias") {
      return GptOssExpertPart{stored + "_bias", j, r, true};
    }
  }
  return std::nullopt;
}

Result<Tensor> GptOssExpertTensor(const ModelConfig& c, const Tensor& stored,
                                  const GptOssExpertPart& part, const std::string& name) {
  using Role = GptOssExpertPart::Role;
  const uint64_t e = c.num_experts, d = c.hidden_size, f = c.expert_ffn_size;
  const bool fused = part.role != Role::kDown;
  std::vector<uint64_t> want;
  if (part.bias) {
    want = {e, fused ? 2 * f : d};
  } else {
    want = fused ? std::vector<uint64_t>{e, d, 2 * f} : std::vector<uint64_t>{e, f, d};
  }
  if (stored.shape != want) {
    std::string m = "tensor " + part.stored + " (holding " + name + ") has shape [";
    for (size_t i = 0; i < stored.shape.size(); ++i) {
      if (i > 0) m.push_back(',');
      m.append(std::to_string(stored.shape[i]));
    }
    m.append("], expected [");
    for (size_t i = 0; i < want.size(); ++i) {
      if (i > 0) m.push_back(',');
      m.append(std::to_string(want[i]));
    }
    return Status::InvalidArgument(m + "]");
  }
  const ops::WeightType type = stored.type;
  if (type != ops::WeightType::kF32 && type != ops::WeightType::kF16 &&
      type != ops::WeightType::kBF16 && type != ops::WeightType::kF64) {
    return Status::Unimplemented("tensor " + part.stored + " of type " +
                                 std::string(model::TensorTypeName(type)) +
                                 " (gpt-oss experts are read from f32, f16, bf16 or f64)");
  }
  // Expert part.expert's slice, widened (the stored tensor's bytes are
  // whole elements, checked by the loader against its shape).
  const uint64_t per_expert = stored.num_elements() / e;
  const uint64_t elem_bytes = stored.bytes.size() / stored.num_elements();
  Tensor slice = stored;
  slice.shape = {per_expert};
  slice.bytes =
      stored.bytes.subspan(part.expert * per_expert * elem_bytes, per_expert * elem_bytes);
  const std::vector<double> x = slice.ToDoubles();
  // Column 2r (gate) or 2r + 1 (up) of the fused tensor is output r.
  const uint64_t offset = part.role == Role::kUp ? 1 : 0;
  std::vector<uint64_t> shape;
  auto values = std::make_shared<std::vector<float>>();
  if (part.bias) {
    shape = {fused ? f : d};
    for (uint64_t r = 0; r < shape[0]; ++r) {
      values->push_back(static_cast<float>(x[fused ? 2 * r + offset : r]));
    }
  } else if (fused) {  // [hidden, 2f] -> [f, hidden]
    shape = {f, d};
    for (uint64_t r = 0; r < f; ++r) {
      for (uint64_t i = 0; i < d; ++i)
        values->push_back(static_cast<float>(x[i * 2 * f + 2 * r + offset]));
    }
  } else {  // [f, hidden] -> [hidden, f]
    shape = {d, f};
    for (uint64_t o = 0; o < d; ++o) {
      for (uint64_t r = 0; r < f; ++r) values->push_back(static_cast<float>(x[r * d + o]));
    }
  }
  Tensor out;
  out.type = ops::WeightType::kF32;
  out.shape = std::move(shape);
  out.bytes = std::as_bytes(std::span<const float>(*values));
  out.owner = std::move(values);
  return out;
}

namespace {
std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string m = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) m.push_back(',');
    m.append(std::to_string(shape[i]));
  }
  return m + "]";
}
}  // namespace

Result<Tensor> GptOssMxfp4ExpertTensor(const ModelConfig& c, const StoredBytes& blocks,
                                       const StoredBytes& scales, const GptOssExpertPart& part) {
  using Role = GptOssExpertPart::Role;
  const uint64_t e = c.num_experts, d = c.hidden_size, f = c.expert_ffn_size;
  const bool fused = part.role != Role::kDown;
  const uint64_t stored_rows = fused ? 2 * f : d, cols = fused ? d : f;
  if (cols % 32 != 0) {
    return Status::InvalidArgument("tensor " + blocks.name + ": MXFP4 rows of " +
                                   std::to_string(cols) + " elements are not whole blocks of 32");
  }
  const uint64_t num_blocks = cols / 32;
  const std::vector<uint64_t> want_blocks = {e, stored_rows, num_blocks, 16};
  const std::vector<uint64_t> want_scales = {e, stored_rows, num_blocks};
  for (const auto& [t, want] :
       {std::pair{&blocks, &want_blocks}, std::pair{&scales, &want_scales}}) {
    if (t->shape != *want) {
      return Status::InvalidArgument("tensor " + t->name + " has shape " + ShapeText(t->shape) +
                                     ", expected " + ShapeText(*want) + " (with " + blocks.name +
                                     " " + ShapeText(blocks.shape) + " and " + scales.name + " " +
                                     ShapeText(scales.shape) + ")");
    }
  }
  // The loader sized the bytes from the shapes; a mismatch is a broken
  // invariant, not a bad file.
  FOLIO_CHECK(blocks.bytes.size() == e * stored_rows * num_blocks * 16 &&
                  scales.bytes.size() == e * stored_rows * num_blocks,
              "MXFP4 tensors of ", blocks.bytes.size(), " and ", scales.bytes.size(), " bytes");
  const uint64_t rows = fused ? f : d;
  constexpr uint64_t kBlockBytes = 17;  // block_mxfp4: e, qs[16]
  auto packed = std::make_shared<std::vector<std::byte>>(rows * num_blocks * kBlockBytes);
  for (uint64_t r = 0; r < rows; ++r) {
    // Gate is stored row 2r, up row 2r + 1 (as columns in the f32 form).
    const uint64_t from = fused ? 2 * r + (part.role == Role::kUp ? 1 : 0) : r;
    const uint64_t at = (part.expert * stored_rows + from) * num_blocks;
    for (uint64_t b = 0; b < num_blocks; ++b) {
      const std::byte scale = scales.bytes[at + b];
      if (scale == std::byte{0xff}) {
        return Status::InvalidArgument("tensor " + scales.name + ": expert " +
                                       std::to_string(part.expert) + " row " +
                                       std::to_string(from) + " block " + std::to_string(b) +
                                       " has the E8M0 scale 0xff (NaN in OCP MX)");
      }
      const std::byte* in = blocks.bytes.data() + (at + b) * 16;
      std::byte* out = packed->data() + (r * num_blocks + b) * kBlockBytes;
      out[0] = scale;
      // Element k is nibble k % 2 of in[k / 2]; ggml puts element j (< 16)
      // in the low nibble of qs[j] and element j + 16 in its high nibble.
      const auto code = [in](uint64_t k) {
        const auto byte = std::to_integer<uint32_t>(in[k / 2]);
        return k % 2 == 0 ? byte & 0x0f : byte >> 4;
      };
      for (uint64_t j = 0; j < 16; ++j) {
        out[1 + j] = static_cast<std::byte>(code(j) | code(j + 16) << 4);
      }
    }
  }
  Tensor out;
  out.type = ops::WeightType::kMXFP4;
  out.shape = {rows, cols};
  out.bytes = std::span<const std::byte>(*packed);
  out.owner = std::move(packed);
  return out;
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
