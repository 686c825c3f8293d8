#include "folio/model/model.h"

#include <openssl/evp.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>

namespace folio::model {
namespace {

// Fills w ([out, in] row-major) from draws made row-major over [in, out].
void XavierUniform(SplitMix64& rng, uint64_t fan_in, uint64_t fan_out,
                   std::vector<double>& w) {
  const double limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  for (uint64_t i = 0; i < fan_in; ++i) {
    for (uint64_t o = 0; o < fan_out; ++o) {
      w[o * fan_in + i] = limit * (2.0 * rng.NextUnit() - 1.0);
    }
  }
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

}  // namespace

ModelWeights<double> InitializeWeights(const ModelConfig& c, SplitMix64& rng) {
  ModelWeights<double> w = AllocateWeights<double>(c);
  const uint64_t d = c.hidden_size;
  // The embedding is [vocab, hidden] both as drawn and as stored: row t is
  // token t, so it is filled directly rather than through XavierUniform's
  // transpose.
  const double limit = std::sqrt(6.0 / static_cast<double>(c.vocab_size + d));
  for (double& x : w.embedding) x = limit * (2.0 * rng.NextUnit() - 1.0);
  for (auto& l : w.layers) {
    XavierUniform(rng, d, c.q_size(), l.wq);
    XavierUniform(rng, d, c.kv_size(), l.wk);
    XavierUniform(rng, d, c.kv_size(), l.wv);
    XavierUniform(rng, c.q_size(), d, l.wo);
    XavierUniform(rng, d, c.ffn_size, l.w_gate);
    XavierUniform(rng, d, c.ffn_size, l.w_up);
    XavierUniform(rng, c.ffn_size, d, l.w_down);
    l.attn_norm.assign(d, 1.0);
    l.ffn_norm.assign(d, 1.0);
  }
  w.final_norm.assign(d, 1.0);
  if (!c.tie_embeddings) XavierUniform(rng, d, c.vocab_size, w.lm_head);
  return w;
}

std::string ComputeModelId(const ModelConfig& c, const ModelWeights<double>& w) {
  Sha256 h;
  h.Str("folio-model-id/1");
  for (uint64_t v : {c.hidden_size, c.num_heads, c.num_kv_heads, c.ffn_size,
                     c.num_layers, c.max_positions, c.vocab_size, c.window}) {
    h.U64(v);
  }
  h.U64(c.tie_embeddings ? 1 : 0);
  h.F64(c.rope_theta);
  h.F64(c.norm_eps);
  ForEachTensor(c, w, [&](const std::string& name, const std::vector<uint64_t>& shape,
                          const std::vector<double>& t) {
    h.Str(name);
    h.Str("f64");
    h.U64(shape.size());
    for (uint64_t s : shape) h.U64(s);
    h.U64(t.size());
    for (double x : t) h.F64(x);
  });
  return h.HexDigest();
}

Result<Model> Model::Create(ModelConfig config, ModelWeights<double> weights) {
  FOLIO_RETURN_IF_ERROR(config.Validate());
  if (weights.layers.size() != config.num_layers) {
    return Status::InvalidArgument("weights have " + std::to_string(weights.layers.size()) +
                                   " layers; config says " +
                                   std::to_string(config.num_layers));
  }
  Status status;
  ForEachTensor(config, weights, [&](const std::string& name,
                                     const std::vector<uint64_t>& shape,
                                     const std::vector<double>& t) {
    if (!status.ok()) return;
    uint64_t n = 1;
    for (uint64_t s : shape) n *= s;
    if (t.size() != n) {
      status = Status::InvalidArgument("tensor " + name + " has " + std::to_string(t.size()) +
                                       " values; expected " + std::to_string(n));
      return;
    }
    for (size_t i = 0; i < t.size(); ++i) {
      if (!std::isfinite(t[i])) {
        status = Status::InvalidArgument("tensor " + name + " value " + std::to_string(i) +
                                         " is not finite");
        return;
      }
    }
  });
  FOLIO_RETURN_IF_ERROR(status);
  if (config.tie_embeddings && !weights.lm_head.empty()) {
    return Status::InvalidArgument("tied model must not carry lm_head weights");
  }
  std::string id = ComputeModelId(config, weights);
  return Model(config, std::move(weights), std::move(id));
}

Result<Model> Model::FromSeed(const ModelConfig& config, uint64_t seed) {
  FOLIO_RETURN_IF_ERROR(config.Validate());
  SplitMix64 rng(seed);
  return Create(config, InitializeWeights(config, rng));
}

}  // namespace folio::model
