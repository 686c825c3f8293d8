#include "folio/model/model.h"

#include <openssl/evp.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "folio/core/str_cat.h"
#include "folio/ops/quantize.h"

namespace folio::model {
namespace {

// [out, in] row-major weights from draws made row-major over [in, out].
Tensor XavierUniform(SplitMix64& rng, uint64_t fan_in, uint64_t fan_out) {
  const double limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  std::vector<double> w(fan_in * fan_out);
  for (uint64_t i = 0; i < fan_in; ++i) {
    for (uint64_t o = 0; o < fan_out; ++o) {
      w[o * fan_in + i] = limit * (2.0 * rng.NextUnit() - 1.0);
    }
  }
  return Tensor::FromDoubles({fan_out, fan_in}, std::move(w));
}

// "[12,8]". Built by appending: g++ 12 misreports `"[" + std::string` as an
// overlapping memcpy (-Wrestrict) here.
std::string ShapeString(const std::vector<uint64_t>& shape) {
  std::string out(1, '[');
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(std::to_string(shape[i]));
  }
  out.push_back(']');
  return out;
}

// n values uniform in [-limit, limit].
Tensor Uniform(SplitMix64& rng, uint64_t n, double limit) {
  std::vector<double> v(n);
  for (double& x : v) x = limit * (2.0 * rng.NextUnit() - 1.0);
  return Tensor::FromDoubles({n}, std::move(v));
}

Tensor Filled(uint64_t n, double value) {
  return Tensor::FromDoubles({n}, std::vector<double>(n, value));
}

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    FOLIO_CHECK(ctx_ && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1);
  }
  void Update(const void* data, size_t size) {
    FOLIO_CHECK(EVP_DigestUpdate(ctx_.get(), data, size) == 1);
  }
  void U64(uint64_t v) {  // little-endian
    std::array<unsigned char, 8> b;
    for (size_t i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    Update(b.data(), b.size());
  }
  void F64(double v) { U64(std::bit_cast<uint64_t>(v)); }
  void Str(const std::string& s) {
    U64(s.size());
    Update(s.data(), s.size());
  }
  std::string HexDigest() {
    std::array<unsigned char, 32> md;
    unsigned int len = 0;
    FOLIO_CHECK(EVP_DigestFinal_ex(ctx_.get(), md.data(), &len) == 1 && len == 32);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : md) {
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
    return out;
  }

 private:
  struct Free {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx_;
};

// A RoPE scaling: its type and parameters, then longrope's factors only for
// longrope and yarn's own parameters only for yarn (so older ids stand).
void HashRopeScaling(Sha256& h, const RopeScaling& s) {
  h.U64(static_cast<uint64_t>(s.type));
  h.F64(s.factor);
  h.F64(s.low_freq_factor);
  h.F64(s.high_freq_factor);
  h.U64(s.original_max_positions);
  if (s.type == RopeScaling::Type::kYarn) {
    h.Str("yarn/1");
    h.F64(s.beta_fast);
    h.F64(s.beta_slow);
    h.U64(s.truncate ? 1 : 0);
    h.F64(s.attention_factor);
    return;
  }
  if (s.type != RopeScaling::Type::kLongRope) return;
  h.Str("longrope/1");
  for (const std::vector<double>* f : {&s.short_factor, &s.long_factor}) {
    h.U64(f->size());
    for (double x : *f) h.F64(x);
  }
  h.F64(s.attention_factor);
  h.U64(s.use_long ? 1 : 0);
}

}  // namespace

namespace {

// A BERT block's weights: Xavier matrices, the position and type tables
// drawn like the embedding, and small random biases and gains near 1, so
// that tests see every tensor.
ModelWeights InitializeBertWeights(const ModelConfig& c, SplitMix64& rng) {
  ModelWeights w;
  const uint64_t d = c.hidden_size, f = c.ffn_size;
  auto table = [&](uint64_t rows) {
    std::vector<double> t(rows * d);
    const double limit = std::sqrt(6.0 / static_cast<double>(rows + d));
    for (double& x : t) x = limit * (2.0 * rng.NextUnit() - 1.0);
    return Tensor::FromDoubles({rows, d}, std::move(t));
  };
  auto gain = [&] {
    std::vector<double> g(d);
    for (double& x : g) x = 1.0 + 0.2 * (2.0 * rng.NextUnit() - 1.0);
    return Tensor::FromDoubles({d}, std::move(g));
  };
  w.embedding = table(c.vocab_size);
  w.position_embedding = table(c.max_positions);
  w.token_type_embedding = table(c.type_vocab_size);
  w.embedding_norm = gain();
  w.embedding_norm_bias = Uniform(rng, d, 0.2);
  w.layers.resize(c.num_layers);
  for (auto& l : w.layers) {
    l.wq = XavierUniform(rng, d, c.q_size());
    l.bq = Uniform(rng, c.q_size(), 0.2);
    l.wk = XavierUniform(rng, d, c.kv_size());
    l.bk = Uniform(rng, c.kv_size(), 0.2);
    l.wv = XavierUniform(rng, d, c.kv_size());
    l.bv = Uniform(rng, c.kv_size(), 0.2);
    l.wo = XavierUniform(rng, c.q_size(), d);
    l.bo = Uniform(rng, d, 0.2);
    l.attn_norm = gain();
    l.attn_norm_bias = Uniform(rng, d, 0.2);
    l.w_up = XavierUniform(rng, d, f);
    l.b_up = Uniform(rng, f, 0.2);
    l.w_down = XavierUniform(rng, f, d);
    l.b_down = Uniform(rng, d, 0.2);
    l.ffn_norm = gain();
    l.ffn_norm_bias = Uniform(rng, d, 0.2);
  }
  if (c.num_labels != 0) {
    w.pooler = XavierUniform(rng, d, d);
    w.pooler_bias = Uniform(rng, d, 0.2);
    w.classifier = XavierUniform(rng, d, c.num_labels);
    w.classifier_bias = Uniform(rng, c.num_labels, 0.2);
  }
  return w;
}

}  // namespace

ModelWeights InitializeWeights(const ModelConfig& c, SplitMix64& rng) {
  if (c.block == Block::kBert) return InitializeBertWeights(c, rng);
  ModelWeights w;
  const uint64_t d = c.hidden_size;
  // The embedding is [vocab, hidden] both as drawn and as stored: row t is
  // token t, so it is filled directly rather than through XavierUniform's
  // transpose.
  const double limit = std::sqrt(6.0 / static_cast<double>(c.vocab_size + d));
  std::vector<double> embedding(c.vocab_size * d);
  for (double& x : embedding) x = limit * (2.0 * rng.NextUnit() - 1.0);
  w.embedding = Tensor::FromDoubles({c.vocab_size, d}, std::move(embedding));
  w.layers.resize(c.num_layers);
  for (uint64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w.layers[i];
    l.wq = XavierUniform(rng, d, c.q_size());
    l.wk = XavierUniform(rng, d, c.kv_size());
    l.wv = XavierUniform(rng, d, c.kv_size());
    l.wo = XavierUniform(rng, c.q_size(), d);
    if (c.IsMoeLayer(i)) {
      l.router = XavierUniform(rng, d, c.num_experts);
      for (uint64_t e = 0; e < c.num_experts; ++e) {
        l.expert_gate.push_back(XavierUniform(rng, d, c.expert_ffn_size));
        l.expert_up.push_back(XavierUniform(rng, d, c.expert_ffn_size));
        l.expert_down.push_back(XavierUniform(rng, c.expert_ffn_size, d));
      }
      if (const uint64_t fs = c.SharedExpertFfnSize(); fs != 0) {
        l.shared_gate = XavierUniform(rng, d, fs);
        l.shared_up = XavierUniform(rng, d, fs);
        l.shared_down = XavierUniform(rng, fs, d);
        if (c.shared_expert_ffn_size != 0) l.shared_expert_gate = XavierUniform(rng, d, 1);
      }
      // A selection bias of the sigmoid scores' order of magnitude, so that
      // it changes which experts run.
      if (c.router_selection_bias) l.router_selection_bias = Uniform(rng, c.num_experts, 0.5);
      if (c.moe_bias) {  // small random biases, so that tests see them
        l.router_bias = Uniform(rng, c.num_experts, 0.5);
        for (uint64_t e = 0; e < c.num_experts; ++e) {
          l.expert_gate_bias.push_back(Uniform(rng, c.expert_ffn_size, 0.2));
          l.expert_up_bias.push_back(Uniform(rng, c.expert_ffn_size, 0.2));
          l.expert_down_bias.push_back(Uniform(rng, d, 0.2));
        }
      }
    } else {
      l.w_gate = XavierUniform(rng, d, c.ffn_size);
      l.w_up = XavierUniform(rng, d, c.ffn_size);
      l.w_down = XavierUniform(rng, c.ffn_size, d);
    }
    // A unit gain: 1, or 0 where gains are stored as an offset from 1.
    const double unit = c.norm_unit_offset ? 0.0 : 1.0;
    l.attn_norm = Filled(d, unit);
    l.ffn_norm = Filled(d, unit);
    if (c.norm_layout == NormLayout::kSandwich) {
      l.post_attn_norm = Filled(d, unit);
      l.post_ffn_norm = Filled(d, unit);
    }
    if (c.attention_bias) {
      l.bq = Filled(c.q_size(), 0.0);
      l.bk = Filled(c.kv_size(), 0.0);
      l.bv = Filled(c.kv_size(), 0.0);
    }
    if (c.qk_norm) {
      l.q_norm = Filled(c.head_dim(), unit);
      l.k_norm = Filled(c.head_dim(), unit);
    }
    if (c.output_bias) l.bo = Uniform(rng, d, 0.2);
    if (c.attention_sinks) l.sinks = Uniform(rng, c.num_heads, 2.0);
  }
  w.final_norm = Filled(d, c.norm_unit_offset ? 0.0 : 1.0);
  if (c.num_labels != 0) {
    w.classifier = XavierUniform(rng, d, c.num_labels);
  } else if (!c.tie_embeddings) {
    w.lm_head = XavierUniform(rng, d, c.vocab_size);
  }
  return w;
}

std::string ComputeModelId(const ModelConfig& c, const ModelWeights& w) {
  Sha256 h;
  h.Str("folio-model-id/2");
  h.Str(std::string(ArchitectureName(c.architecture)));
  for (uint64_t v : {c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim(), c.ffn_size,
                     c.num_layers, c.max_positions, c.vocab_size, c.window}) {
    h.U64(v);
  }
  h.U64(c.tie_embeddings ? 1 : 0);
  h.U64(c.attention_bias ? 1 : 0);
  h.U64(c.qk_norm ? 1 : 0);
  h.U64(static_cast<uint64_t>(c.rope_style));
  h.F64(c.rope_theta);
  h.F64(c.norm_eps);
  HashRopeScaling(h, c.rope_scaling);
  if (c.HasFamilyOptions()) {  // absent before families had options: older ids stand
    h.Str("family-options/1");
    h.U64(c.layers.size());
    for (const LayerConfig& l : c.layers) {
      h.U64(l.window);
      h.F64(l.rope_theta);
      HashRopeScaling(h, l.rope_scaling);
    }
    h.U64(static_cast<uint64_t>(c.activation));
    h.U64(static_cast<uint64_t>(c.norm_layout));
    h.U64(c.norm_unit_offset ? 1 : 0);
    h.U64(c.scale_embedding ? 1 : 0);
    h.F64(c.attention_scale);
    h.F64(c.final_logit_softcap);
    h.F64(c.attn_logit_softcap);
    if (c.rotary_dim != 0) {  // later than the block: only where set
      h.Str("rotary_dim");
      h.U64(c.rotary_dim);
    }
    if (c.num_experts != 0) {
      h.Str("experts");
      for (uint64_t v : {c.num_experts, c.experts_per_token, c.expert_ffn_size}) h.U64(v);
      h.U64(c.norm_topk_prob ? 1 : 0);
    }
    if (c.shared_expert_ffn_size != 0) {  // later than the experts: only where set
      h.Str("shared-expert/1");
      h.U64(c.shared_expert_ffn_size);
    }
    // kTopKSoftmax was the only other routing when this section came: it
    // alone is gpt-oss's (the later routings hash theirs in "router/1").
    if (c.routing == Routing::kTopKSoftmax || c.moe_bias || c.swiglu_limit != 0 || c.output_bias ||
        c.attention_sinks) {
      h.Str("gpt-oss/1");
      h.U64(static_cast<uint64_t>(c.routing));
      h.U64(c.moe_bias ? 1 : 0);
      h.F64(c.swiglu_limit);
      h.F64(c.swiglu_alpha);
      h.U64(c.output_bias ? 1 : 0);
      h.U64(c.attention_sinks ? 1 : 0);
    }
    if (c.routing == Routing::kSigmoidTopK || c.router_selection_bias || c.expert_groups != 1 ||
        c.expert_groups_used != 1 || c.routed_scale != 1.0 || c.leading_dense_layers != 0 ||
        c.num_shared_experts != 0) {  // later than gpt-oss's: only where set
      h.Str("router/1");
      h.U64(static_cast<uint64_t>(c.routing));
      h.U64(c.router_selection_bias ? 1 : 0);
      for (uint64_t v : {c.expert_groups, c.expert_groups_used}) h.U64(v);
      h.F64(c.routed_scale);
      for (uint64_t v : {c.leading_dense_layers, c.num_shared_experts}) h.U64(v);
    }
    if (c.block != Block::kDecoder) {
      h.Str("block/1");
      h.U64(static_cast<uint64_t>(c.block));
      h.U64(c.type_vocab_size);
      h.U64(c.num_labels);
    } else if (c.num_labels != 0) {
      h.Str("score-head/1");
      h.U64(c.num_labels);
    }
  }
  ForEachTensor(c, w, [&](const std::string& name, const std::vector<uint64_t>&, const Tensor& t) {
    h.Str(name);
    h.Str(std::string(TensorTypeName(t.type)));
    h.U64(t.shape.size());
    for (uint64_t s : t.shape) h.U64(s);
    h.U64(t.bytes.size());
    h.Update(t.bytes.data(), t.bytes.size());
  });
  return h.HexDigest();
}

const std::string& Model::id() const {
  std::call_once(id_->once, [this] { id_->id = ComputeModelId(config_, weights_); });
  return id_->id;
}

Result<Model> Model::Create(ModelConfig config, ModelWeights weights, bool check_finite) {
  FOLIO_RETURN_IF_ERROR(config.Validate());
  if (weights.layers.size() != config.num_layers) {
    return Status::InvalidArgument("weights have " + std::to_string(weights.layers.size()) +
                                   " layers; config says " + std::to_string(config.num_layers));
  }
  Status status;
  ForEachTensor(config, weights,
                [&](const std::string& name, const std::vector<uint64_t>& shape, const Tensor& t) {
                  if (!status.ok()) return;
                  if (t.empty()) {
                    status = Status::NotFound("missing tensor " + name);
                    return;
                  }
                  if (t.shape != shape) {
                    std::string m = "tensor ";
                    m.append(name).append(" has shape ").append(ShapeString(t.shape));
                    m.append(", expected ").append(ShapeString(shape));
                    status = Status::InvalidArgument(std::move(m));
                    return;
                  }
                  const auto bytes = TensorBytes(t.type, t.shape);
                  if (!bytes || *bytes != t.bytes.size()) {
                    status = Status::InvalidArgument("tensor " + name + " of type " +
                                                     std::string(TensorTypeName(t.type)) + " has " +
                                                     std::to_string(t.bytes.size()) +
                                                     " bytes, which does not match its shape");
                    return;
                  }
                  if (!check_finite) return;
                  const std::vector<double> values = t.ToDoubles();
                  for (size_t i = 0; i < values.size(); ++i) {
                    if (!std::isfinite(values[i])) {
                      status = Status::InvalidArgument("tensor " + name + " value " +
                                                       std::to_string(i) + " is not finite");
                      return;
                    }
                  }
                });
  FOLIO_RETURN_IF_ERROR(status);
  if (config.tie_embeddings && !weights.lm_head.empty()) {
    return Status::InvalidArgument("tied model must not carry lm_head weights");
  }
  return Model(std::move(config), std::move(weights));
}

Result<Model> Model::FromSeed(const ModelConfig& config, uint64_t seed) {
  FOLIO_RETURN_IF_ERROR(config.Validate());
  SplitMix64 rng(seed);
  return Create(config, InitializeWeights(config, rng));
}

Result<ModelWeights> QuantizeMatrices(const ModelWeights& w, ops::WeightType type,
                                      ThreadPool* pool) {
  if (!ops::HasQuantizer(type)) {
    return Status::Unimplemented(
        StrCat("folio cannot write ", ops::WeightTypeName(type), " weights (ops::QuantizeRow)"));
  }
  ModelWeights out = w;
  Status status;
  std::mutex mu;
  const auto convert = [&](Tensor& t) {
    if (t.shape.size() != 2 || !status.ok()) return;
    const uint64_t rows = t.shape[0], cols = t.shape[1];
    const uint64_t in_row = ops::WeightRowBytes(t.type, cols);
    const uint64_t out_row = ops::WeightRowBytes(type, cols);
    if (out_row == 0) {
      status = Status::InvalidArgument(
          StrCat("a row of ", cols, " is not whole ", ops::WeightTypeName(type), " blocks"));
      return;
    }
    auto data = std::make_shared<std::vector<std::byte>>(rows * out_row);
    const auto one = [&](size_t r) {
      std::vector<float> row(cols);
      ops::DequantizeRow(t.type, t.bytes.data() + r * in_row, row);
      Status s = ops::QuantizeRow(type, row, data->data() + r * out_row);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (status.ok()) status = s;
      }
    };
    if (pool != nullptr) {
      pool->ParallelFor(rows, one);
    } else {
      for (uint64_t r = 0; r < rows; ++r) one(r);
    }
    t.type = type;
    t.bytes = std::span<const std::byte>(data->data(), data->size());
    t.owner = std::move(data);
  };
  for (LayerWeights& l : out.layers) {
    for (Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router,
                      &l.shared_gate, &l.shared_up, &l.shared_down}) {
      if (!t->empty()) convert(*t);
    }
    for (std::vector<Tensor>* experts : {&l.expert_gate, &l.expert_up, &l.expert_down}) {
      for (Tensor& t : *experts) convert(t);
    }
  }
  convert(out.embedding);
  if (!out.lm_head.empty()) convert(out.lm_head);
  FOLIO_RETURN_IF_ERROR(status);
  return out;
}

}  // namespace folio::model
