#include "folio/model/decoder.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "folio/attention/paged_attention.h"
#include "folio/attention/reference.h"
#include "folio/backend/backend.h"
#include "folio/core/aligned_buffer.h"
#include "folio/core/checked_math.h"
#include "folio/ops/matmul.h"
#include "folio/ops/ops.h"

namespace folio::model {

using kv::KvArrayView;
using kv::KvRole;

namespace {

template <typename T>
constexpr DType DTypeOf() {
  return sizeof(T) == 8 ? DType::kF64 : DType::kF32;
}

// Moves rows [batch, n, heads * head_dim] to [batch, heads, n, head_dim], or
// back with `inverse`.
template <typename T>
void SwapTokenAndHeadAxes(std::span<const T> in, std::span<T> out, uint64_t batch, uint64_t n,
                          uint64_t heads, uint64_t head_dim, bool inverse) {
  for (uint64_t b = 0; b < batch; ++b)
    for (uint64_t i = 0; i < n; ++i)
      for (uint64_t h = 0; h < heads; ++h) {
        const uint64_t token_major = ((b * n + i) * heads + h) * head_dim;
        const uint64_t head_major = ((b * heads + h) * n + i) * head_dim;
        const uint64_t from = inverse ? head_major : token_major;
        const uint64_t to = inverse ? token_major : head_major;
        std::copy_n(in.begin() + static_cast<ptrdiff_t>(from), head_dim,
                    out.begin() + static_cast<ptrdiff_t>(to));
      }
}

template <typename T>
std::span<const T> Row(const std::vector<T>& v, uint64_t row, uint64_t width) {
  return std::span<const T>(v).subspan(row * width, width);
}
template <typename T>
std::span<T> Row(std::vector<T>& v, uint64_t row, uint64_t width) {
  return std::span<T>(v).subspan(row * width, width);
}

// One layer's attention over a fixed-layout cache view; q and out are
// token-major [batch * n, num_heads *
// head_dim]. float compute over f32/bf16/f16 K/V runs the paged SIMD kernel;
// everything else (the float64 worked example, f64 K/V) the scalar reference.
// Both read K/V only through the cache's table, so results never depend on
// page placement.
template <typename T>
Status Attend(const attention::AttentionParams& ap, uint64_t batch, std::span<const T> q,
              const KvArrayView& k, const KvArrayView& v, std::span<T> out,
              backend::Backend* backend) {
  const uint64_t n = ap.query_len, hd = k.shape.head_dim;
  if constexpr (std::is_same_v<T, float>) {
    if (k.dtype != DType::kF64) {
      // The fixed layout [N, B, H_kv, P, d] is a pool of N * B pages shaped
      // [H_kv, P, d]: lane b's logical page lp is pool page table[lp] * B + b.
      const uint64_t pages = CeilDiv(k.visible_length, k.page_size);
      if (k.num_pages * batch > INT32_MAX) {
        return Status::OutOfRange("cache has more than 2^31 pages across lanes");
      }
      std::vector<int32_t> block_table(batch * pages);
      std::vector<int32_t> context(batch, static_cast<int32_t>(k.visible_length));
      std::vector<int32_t> indptr(batch + 1);
      for (uint64_t b = 0; b < batch; ++b) {
        for (uint64_t lp = 0; lp < pages; ++lp) {
          block_table[b * pages + lp] = static_cast<int32_t>(k.table[lp] * batch + b);
        }
        indptr[b + 1] = static_cast<int32_t>((b + 1) * n);
      }
      attention::PagedAttentionParams p;
      p.num_q_heads = ap.num_q_heads;
      p.scale = ap.scale;
      p.window = ap.window;
      const kv::PagedKvView pool_view{
          k.data, v.data, k.dtype, k.num_pages * batch, k.shape.num_kv_heads, k.page_size, hd};
      FOLIO_ASSIGN_OR_RETURN(
          std::unique_ptr<backend::AttentionPlan> plan,
          backend->PlanAttention(p, q, out, pool_view, {block_table, pages, context, indptr}));
      return plan->Run(q, pool_view, out);
    }
  }
  std::vector<T> qh(q.size()), attn(q.size());
  SwapTokenAndHeadAxes<T>(q, qh, batch, n, ap.num_q_heads, hd, false);
  FOLIO_RETURN_IF_ERROR(attention::AttendReference<T>(ap, qh, k, v, attn));
  SwapTokenAndHeadAxes<T>(attn, out, batch, n, ap.num_q_heads, hd, true);
  return Status::Ok();
}

// A linear layer's weights prepared for compute type T: y = W x per row.
template <typename T>
class Linear;

// float64: every weight widened once; the scalar reference matvec.
template <>
class Linear<double> {
 public:
  Linear(const Tensor& t, backend::Backend*)
      : values_(t.ToDoubles()), rows_(t.shape.at(0)), cols_(t.shape.at(1)) {}
  void Apply(std::span<const double> x, uint64_t num_rows, std::span<double> y,
             backend::Backend*) const {
    for (uint64_t r = 0; r < num_rows; ++r) {
      ops::MatVec<double>(values_, x.subspan(r * cols_, cols_), y.subspan(r * rows_, rows_));
    }
  }
  // out [ids.size(), cols]: the rows named by ids (checked by the caller).
  void Embed(std::span<const int32_t> ids, std::span<double> out, backend::Backend*) const {
    for (size_t r = 0; r < ids.size(); ++r) {
      std::copy_n(values_.begin() + static_cast<ptrdiff_t>(static_cast<uint64_t>(ids[r]) * cols_),
                  cols_, out.begin() + static_cast<ptrdiff_t>(r * cols_));
    }
  }

 private:
  std::vector<double> values_;  // [rows, cols]
  uint64_t rows_, cols_;
};

// float32: weights stay as stored, uploaded once to the backend, whose
// kernels widen them as they read; a type without a matmul kernel (f64) is
// decoded to f32 once first.
template <>
class Linear<float> {
 public:
  Linear(const Tensor& t, backend::Backend* backend) : owner_(t.owner) {
    const uint64_t rows = t.shape.at(0), cols = t.shape.at(1);
    ops::WeightView view{t.bytes.data(), t.type, rows, cols};
    if (!ops::TraitsOf(t.type).has_matmul) {
      converted_.resize(rows * cols);
      ops::DequantizeRow(t.type, t.bytes.data(), converted_);
      view = {reinterpret_cast<const std::byte*>(converted_.data()), ops::WeightType::kF32, rows,
              cols};
    }
    Result<backend::Weight> w = backend->Upload(view);
    FOLIO_CHECK(w.ok(), w.status().ToString());  // the model validated its tensors
    weight_ = *w;
  }
  Status Apply(std::span<const float> x, uint64_t num_rows, std::span<float> y,
               backend::Backend* backend) const {
    const ops::WeightView& v = weight_.host;
    return backend->MatMul(weight_, x.first(num_rows * v.cols), num_rows,
                           y.first(num_rows * v.rows));
  }
  void Embed(std::span<const int32_t> ids, std::span<float> out, backend::Backend* backend) const {
    backend->Embed(weight_, ids, out);
  }
  const backend::Weight& weight() const { return weight_; }

 private:
  std::shared_ptr<const void> owner_;  // keeps a mapped file alive
  std::vector<float> converted_;
  backend::Weight weight_{};
};

template <typename T>
std::vector<T> Values(const Tensor& t) {
  if (t.empty()) return {};
  const std::vector<double> wide = t.ToDoubles();
  return std::vector<T>(wide.begin(), wide.end());
}

// Status-returning apply for both specialisations.
template <typename T>
Status ApplyLinear(const Linear<T>& l, std::span<const T> x, uint64_t rows, std::span<T> y,
                   backend::Backend* backend) {
  if constexpr (std::is_same_v<T, double>) {
    l.Apply(x, rows, y, backend);
    return Status::Ok();
  } else {
    return l.Apply(x, rows, y, backend);
  }
}

// Several linear layers on one input (q/k/v, gate/up): one backend call, so that
// the backend can share the work on x (Backend::MatMuls).
template <typename T, size_t N>
Status ApplyLinears(const std::array<const Linear<T>*, N>& ls, std::span<const T> x, uint64_t rows,
                    const std::array<std::span<T>, N>& ys, backend::Backend* backend) {
  if constexpr (std::is_same_v<T, double>) {
    for (size_t i = 0; i < N; ++i) ls[i]->Apply(x, rows, ys[i], backend);
    return Status::Ok();
  } else {
    std::array<const backend::Weight*, N> ws;
    std::array<std::span<float>, N> outs;
    for (size_t i = 0; i < N; ++i) {
      ws[i] = &ls[i]->weight();
      outs[i] = ys[i].first(rows * ws[i]->host.rows);
    }
    return backend->MatMuls(ws, x.first(rows * ws[0]->host.cols), rows, outs);
  }
}

}  // namespace

Result<DecoderCache> DecoderCache::Create(const Model& model, const kv::PageTableLayout& layout,
                                          uint64_t batch, DType kv_dtype) {
  const ModelConfig& c = model.config();
  if (layout.capacity() > c.max_positions) {
    return Status::InvalidArgument("cache layout capacity " + std::to_string(layout.capacity()) +
                                   " exceeds the model's max_positions " +
                                   std::to_string(c.max_positions));
  }
  std::vector<kv::LayerCache> layers;
  layers.reserve(c.num_layers);
  for (uint64_t l = 0; l < c.num_layers; ++l) {
    FOLIO_ASSIGN_OR_RETURN(
        kv::LayerCache layer,
        kv::LayerCache::Create(layout, {batch, c.num_kv_heads, c.head_dim()}, kv_dtype));
    layers.push_back(std::move(layer));
  }
  return DecoderCache(model.id(), std::move(layers));
}

void DecoderCache::Reset() {
  for (auto& l : layers_) l.Reset();
}

template <typename T>
struct Decoder<T>::Weights {
  struct Layer {
    std::vector<T> attn_norm, ffn_norm, bq, bk, bv, q_norm, k_norm;
    Linear<T> wq, wk, wv, wo, gate, up, down;
  };
  Linear<T> embedding;
  std::vector<Layer> layers;
  std::vector<T> final_norm;
  Linear<T> head;                // the embedding again when tied
  std::vector<double> inv_freq;  // RoPE, one per rotated pair

  Weights(const Model& m, backend::Backend* b)
      : embedding(m.weights().embedding, b),
        final_norm(Values<T>(m.weights().final_norm)),
        head(m.config().tie_embeddings ? m.weights().embedding : m.weights().lm_head, b),
        inv_freq(RopeInverseFrequencies(m.config())) {
    for (const LayerWeights& l : m.weights().layers) {
      layers.push_back(Layer{Values<T>(l.attn_norm), Values<T>(l.ffn_norm), Values<T>(l.bq),
                             Values<T>(l.bk), Values<T>(l.bv), Values<T>(l.q_norm),
                             Values<T>(l.k_norm), Linear<T>(l.wq, b), Linear<T>(l.wk, b),
                             Linear<T>(l.wv, b), Linear<T>(l.wo, b), Linear<T>(l.w_gate, b),
                             Linear<T>(l.w_up, b), Linear<T>(l.w_down, b)});
    }
  }
};

template <typename T>
Decoder<T>::Decoder(const Model& model, ThreadPool* pool)
    : Decoder(model, std::is_same_v<T, float>
                         ? std::shared_ptr<backend::Backend>(
                               backend::MakeBackend(backend::BackendKind::kCpu, pool))
                         : nullptr) {}

template <typename T>
Decoder<T>::Decoder(const Model& model, std::shared_ptr<backend::Backend> backend)
    : backend_(std::move(backend)),
      config_(model.config()),
      model_id_(model.id()),
      weights_(std::make_unique<const Weights>(model, backend_.get())) {
  if constexpr (std::is_same_v<T, float>) FOLIO_CHECK(backend_ != nullptr);
}

template <typename T>
Decoder<T>::~Decoder() = default;
template <typename T>
Decoder<T>::Decoder(Decoder&&) noexcept = default;

template <typename T>
Status Decoder<T>::CheckTokens(std::span<const int32_t> tokens, uint64_t batch) const {
  if (batch == 0 || tokens.empty() || tokens.size() % batch != 0) {
    return Status::InvalidArgument("tokens must be [batch=" + std::to_string(batch) +
                                   ", n >= 1] (got " + std::to_string(tokens.size()) + " ids)");
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || static_cast<uint64_t>(tokens[i]) >= config_.vocab_size) {
      return Status::OutOfRange("token " + std::to_string(i) + " has id " +
                                std::to_string(tokens[i]) + " outside vocabulary [0, " +
                                std::to_string(config_.vocab_size) + ")");
    }
  }
  return Status::Ok();
}

template <typename T>
template <typename AttendFn>
Result<std::vector<T>> Decoder<T>::Run(const RowPlan& plan, AttendFn&& attend) const {
  const ModelConfig& c = config_;
  const Weights& w = *weights_;
  const uint64_t d = c.hidden_size, hd = c.head_dim(), half = hd / 2;
  const uint64_t rows = plan.tokens.size(), qs = c.q_size(), kvs = c.kv_size();
  const T eps = static_cast<T>(c.norm_eps);
  const bool neox = c.rope_style == RopeStyle::kNeox;

  // RoPE angles per row, shared by every layer. Computed in double and
  // rounded once, so float and double decoders rotate by the same angles.
  const std::vector<double>& inv_freq = w.inv_freq;
  std::vector<T> cos(rows * half), sin(rows * half);
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t p = 0; p < half; ++p) {
      const double theta = static_cast<double>(plan.positions[r]) * inv_freq[p];
      cos[r * half + p] = static_cast<T>(std::cos(theta));
      sin[r * half + p] = static_cast<T>(std::sin(theta));
    }
  }

  // The ops, on the backend for float (double, the worked example, runs
  // the scalar ops directly). Norms and RoPE work row by row.
  backend::Backend* const be = backend_.get();
  auto rms_norm = [&](std::span<const T> in, const std::vector<T>& gain, std::span<T> out) {
    if constexpr (std::is_same_v<T, float>) {
      be->RmsNorm(in, gain, eps, out);
    } else {
      for (uint64_t off = 0; off < in.size(); off += gain.size()) {
        ops::RmsNorm<T>(in.subspan(off, gain.size()), gain, eps, out.subspan(off, gain.size()));
      }
    }
  };
  auto rope = [&](std::vector<T>& y) {
    if constexpr (std::is_same_v<T, float>) {
      be->Rope(y, rows, hd, cos, sin, neox);
    } else {
      const uint64_t width = y.size() / rows;
      for (uint64_t r = 0; r < rows; ++r) {
        ops::Rope<T>(Row(y, r, width), hd, std::span<const T>(cos).subspan(r * half, half),
                     std::span<const T>(sin).subspan(r * half, half), neox);
      }
    }
  };

  std::vector<T> x(rows * d);             // residual stream [rows, hidden]
  w.embedding.Embed(plan.tokens, x, be);  // CheckTokens bounded the ids
  std::vector<T> h(rows * d), q(rows * qs), k(rows * kvs), v(rows * kvs);
  std::vector<T> attn(q.size()), delta(rows * d);
  std::vector<T> gate(rows * c.ffn_size), up(rows * c.ffn_size);
  auto add_bias = [](std::vector<T>& y, const std::vector<T>& bias) {
    if (bias.empty()) return;
    for (uint64_t i = 0; i < y.size(); ++i) y[i] += bias[i % bias.size()];
  };
  auto head_norm = [&](std::vector<T>& y, const std::vector<T>& gain) {
    if (!gain.empty()) rms_norm(y, gain, y);
  };
  for (uint64_t layer = 0; layer < c.num_layers; ++layer) {
    const auto& lw = w.layers[layer];
    rms_norm(x, lw.attn_norm, h);
    const Status qkv = ApplyLinears<T, 3>({&lw.wq, &lw.wk, &lw.wv}, h, rows,
                                          {std::span<T>(q), std::span<T>(k), std::span<T>(v)}, be);
    FOLIO_RETURN_IF_ERROR(qkv);
    add_bias(q, lw.bq);
    add_bias(k, lw.bk);
    add_bias(v, lw.bv);
    head_norm(q, lw.q_norm);
    head_norm(k, lw.k_norm);
    rope(q);
    rope(k);
    FOLIO_RETURN_IF_ERROR(attend(layer, std::span<const T>(q), std::span<const T>(k),
                                 std::span<const T>(v), std::span<T>(attn)));
    FOLIO_RETURN_IF_ERROR(ApplyLinear<T>(lw.wo, attn, rows, delta, be));
    for (uint64_t i = 0; i < x.size(); ++i) x[i] += delta[i];
    rms_norm(x, lw.ffn_norm, h);
    const Status gate_up =
        ApplyLinears<T, 2>({&lw.gate, &lw.up}, h, rows, {std::span<T>(gate), std::span<T>(up)}, be);
    FOLIO_RETURN_IF_ERROR(gate_up);
    if constexpr (std::is_same_v<T, float>) {
      be->SwiGlu(gate, up);
    } else {
      ops::SwiGlu<T>(gate, up);
    }
    FOLIO_RETURN_IF_ERROR(ApplyLinear<T>(lw.down, gate, rows, delta, be));
    for (uint64_t i = 0; i < x.size(); ++i) x[i] += delta[i];
  }
  // The output head only for the rows asked for.
  const uint64_t out_rows = plan.logit_rows.size();
  std::vector<T> hn(out_rows * d);
  for (uint64_t o = 0; o < out_rows; ++o) {
    rms_norm(Row(x, plan.logit_rows[o], d), w.final_norm, Row(hn, o, d));
  }
  std::vector<T> logits(out_rows * c.vocab_size);
  FOLIO_RETURN_IF_ERROR(ApplyLinear<T>(w.head, hn, out_rows, logits, be));
  for (uint64_t o = 0; o < out_rows; ++o) {
    for (T value : Row(logits, o, c.vocab_size)) {
      if (!std::isfinite(value)) {
        return Status::InvalidArgument("non-finite logit at row " +
                                       std::to_string(plan.logit_rows[o]) + ", position " +
                                       std::to_string(plan.positions[plan.logit_rows[o]]));
      }
    }
  }
  return logits;
}

namespace {

// Rows of `batch` lanes of n tokens each, lane-major, at positions
// start..start+n-1, with logits for every row or each lane's last.
struct LanePlan {
  std::vector<uint64_t> positions, logit_rows;
  LanePlan(uint64_t batch, uint64_t n, uint64_t start, LogitRows rows) {
    for (uint64_t b = 0; b < batch; ++b) {
      for (uint64_t i = 0; i < n; ++i) {
        positions.push_back(start + i);
        if (rows == LogitRows::kAll || i == n - 1) logit_rows.push_back(b * n + i);
      }
    }
  }
};

}  // namespace

template <typename T>
Result<std::vector<T>> Decoder<T>::Prefill(DecoderCache& cache, std::span<const int32_t> tokens,
                                           LogitRows rows) const {
  if (cache.model_id() != model_id_) {
    return Status::FailedPrecondition("cache is bound to model " + cache.model_id() + ", not " +
                                      model_id_);
  }
  FOLIO_RETURN_IF_ERROR(CheckTokens(tokens, cache.batch()));
  const uint64_t batch = cache.batch(), n = tokens.size() / batch, start = cache.length();
  if (start + n > cache.capacity()) {
    return Status::ResourceExhausted("step of " + std::to_string(n) + " positions at length " +
                                     std::to_string(start) + " exceeds cache capacity " +
                                     std::to_string(cache.capacity()));
  }
  const LanePlan lanes(batch, n, start, rows);
  const attention::AttentionParams ap{config_.num_heads, n,
                                      1.0 / std::sqrt(static_cast<double>(config_.head_dim())),
                                      config_.window};
  const uint64_t hd = config_.head_dim(), kv_heads = config_.num_kv_heads;
  std::vector<T> kh(batch * n * config_.kv_size()), vh(kh.size());
  auto attend = [&](uint64_t layer, std::span<const T> q, std::span<const T> k,
                    std::span<const T> v, std::span<T> out) -> Status {
    SwapTokenAndHeadAxes<T>(k, kh, batch, n, kv_heads, hd, false);
    SwapTokenAndHeadAxes<T>(v, vh, batch, n, kv_heads, hd, false);
    kv::LayerCache& lc = cache.layer(layer);
    FOLIO_RETURN_IF_ERROR(lc.Stage(std::span<const T>(kh), std::span<const T>(vh), n)
                              .WithContext("layer " + std::to_string(layer)));
    return Attend<T>(ap, batch, q, lc.View(KvRole::kKey), lc.View(KvRole::kValue), out,
                     backend_.get());
  };
  Result<std::vector<T>> logits = Run(RowPlan{tokens, lanes.positions, lanes.logit_rows}, attend);
  for (size_t l = 0; l < cache.num_layers(); ++l) {
    if (logits.has_value()) {
      cache.layer(l).Commit();
    } else {
      cache.layer(l).Discard();
    }
  }
  return logits;
}

template <typename T>
Result<std::vector<T>> Decoder<T>::Decode(DecoderCache& cache,
                                          std::span<const int32_t> tokens) const {
  if (tokens.size() != cache.batch()) {
    return Status::InvalidArgument(
        "decode takes one token per lane: " + std::to_string(cache.batch()) + " (got " +
        std::to_string(tokens.size()) + ")");
  }
  return Prefill(cache, tokens, LogitRows::kLast);
}

template <typename T>
Result<std::vector<T>> Decoder<T>::Forward(std::span<const int32_t> tokens, uint64_t batch) const {
  FOLIO_RETURN_IF_ERROR(CheckTokens(tokens, batch));
  const uint64_t n = tokens.size() / batch;
  if (n > config_.max_positions) {
    return Status::OutOfRange(std::to_string(n) + " positions exceed max_positions " +
                              std::to_string(config_.max_positions));
  }
  const LanePlan lanes(batch, n, 0, LogitRows::kAll);
  const attention::AttentionParams ap{config_.num_heads, n,
                                      1.0 / std::sqrt(static_cast<double>(config_.head_dim())),
                                      config_.window};
  // Dense [batch, kv_heads, n, head_dim] K and V of the current layer, seen
  // through a one-page table: no cache object is involved.
  const uint64_t hd = config_.head_dim(), kv_heads = config_.num_kv_heads;
  std::vector<T> keys(batch * n * config_.kv_size()), values(keys.size());
  const uint64_t table[1] = {0};
  const kv::LaneShape shape{batch, kv_heads, hd};
  auto attend = [&](uint64_t, std::span<const T> q, std::span<const T> k, std::span<const T> v,
                    std::span<T> out) -> Status {
    SwapTokenAndHeadAxes<T>(k, keys, batch, n, kv_heads, hd, false);
    SwapTokenAndHeadAxes<T>(v, values, batch, n, kv_heads, hd, false);
    auto view = [&](const std::vector<T>& a) {
      return KvArrayView{
          reinterpret_cast<const std::byte*>(a.data()), DTypeOf<T>(), table, 1, n, shape, n};
    };
    return Attend<T>(ap, batch, q, view(keys), view(values), out, backend_.get());
  };
  return Run(RowPlan{tokens, lanes.positions, lanes.logit_rows}, attend);
}

template <typename T>
Result<std::vector<T>> Decoder<T>::Step(kv::PagedKvCache& cache, const kv::BatchMetadata& meta,
                                        std::span<const int32_t> tokens,
                                        std::span<const LogitRows> rows,
                                        PagedAttentionPath* path) const {
  if constexpr (!std::is_same_v<T, float>) {
    return Status::Unimplemented("paged-cache steps run in float32");
  } else {
    const kv::PagedKvCacheConfig& kc = cache.config();
    if (kc.num_layers != config_.num_layers || kc.num_kv_heads != config_.num_kv_heads ||
        kc.head_dim != config_.head_dim()) {
      return Status::InvalidArgument(
          "paged cache shape (layers, kv heads, head dim) differs "
          "from the model's");
    }
    FOLIO_RETURN_IF_ERROR(CheckTokens(tokens, 1));
    const uint64_t batch = meta.batch;
    if (meta.query_indptr.size() != batch + 1 ||
        static_cast<uint64_t>(meta.query_indptr.back()) != tokens.size() ||
        meta.slot_mapping.size() != tokens.size()) {
      return Status::InvalidArgument("tokens, query_indptr and slot_mapping disagree");
    }
    if (rows.size() != 1 && rows.size() != batch) {
      return Status::InvalidArgument("logit rows for " + std::to_string(rows.size()) +
                                     " sequences, the batch has " + std::to_string(batch));
    }
    std::vector<uint64_t> positions(tokens.size()), logit_rows;
    for (uint64_t s = 0; s < batch; ++s) {
      const auto first = static_cast<uint64_t>(meta.query_indptr[s]);
      const auto last = static_cast<uint64_t>(meta.query_indptr[s + 1]);
      const auto context = static_cast<uint64_t>(meta.context_lens[s]);
      if (last - first > context) {
        return Status::InvalidArgument("sequence " + std::to_string(s) +
                                       " has more new tokens than context");
      }
      if (context > config_.max_positions) {
        return Status::OutOfRange("sequence " + std::to_string(s) + " context " +
                                  std::to_string(context) + " exceeds max_positions " +
                                  std::to_string(config_.max_positions));
      }
      for (uint64_t r = first; r < last; ++r) {
        positions[r] = context - (last - first) + (r - first);
        if (rows[rows.size() == 1 ? 0 : s] == LogitRows::kAll || r + 1 == last) {
          logit_rows.push_back(r);
        }
      }
    }
    attention::PagedAttentionParams p;
    p.num_q_heads = config_.num_heads;
    p.scale = 1.0 / std::sqrt(static_cast<double>(config_.head_dim()));
    p.window = config_.window;
    std::unique_ptr<backend::AttentionPlan> plan;
    auto attend = [&](uint64_t layer, std::span<const float> q, std::span<const float> k,
                      std::span<const float> v, std::span<float> out) -> Status {
      FOLIO_RETURN_IF_ERROR(backend_->WriteKv(cache, layer, meta.slot_mapping, k, v)
                                .WithContext("layer " + std::to_string(layer)));
      if (path != nullptr) return path->Attend(p, q, cache, layer, meta, out);
      // Every layer has the step's metadata and reuses the q/out buffers:
      // one plan, made at the first layer, runs them all.
      if (!plan) {
        FOLIO_ASSIGN_OR_RETURN(
            plan, backend_->PlanAttention(p, q, out, cache.View(layer), kv::ViewOf(meta)));
      }
      return plan->Run(q, cache.View(layer), out);
    };
    return Run(RowPlan{tokens, positions, logit_rows}, attend);
  }
}

template class Decoder<float>;
template class Decoder<double>;

}  // namespace folio::model
