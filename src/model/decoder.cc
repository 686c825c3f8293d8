#include "folio/model/decoder.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "folio/attention/paged_attention.h"
#include "folio/attention/reference.h"
#include "folio/core/checked_math.h"
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
void SwapTokenAndHeadAxes(std::span<const T> in, std::span<T> out, uint64_t batch,
                          uint64_t n, uint64_t heads, uint64_t head_dim,
                          bool inverse) {
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

// One layer's attention; q and out are token-major [batch * n, num_heads *
// head_dim]. float compute over f32/bf16/f16 K/V runs the paged SIMD kernel;
// everything else (the float64 worked example, f64 K/V) the scalar reference.
// Both read K/V only through the cache's table, so results never depend on
// page placement.
template <typename T>
Status Attend(const attention::AttentionParams& ap, uint64_t batch,
              std::span<const T> q, const KvArrayView& k, const KvArrayView& v,
              std::span<T> out, ThreadPool* pool) {
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
      const kv::PagedKvView pool_view{k.data, v.data, k.dtype, k.num_pages * batch,
                                      k.shape.num_kv_heads, k.page_size, hd};
      return attention::PagedAttention(p, q, pool_view, {block_table, pages, context, indptr},
                                       out, pool);
    }
  }
  std::vector<T> qh(q.size()), attn(q.size());
  SwapTokenAndHeadAxes<T>(q, qh, batch, n, ap.num_q_heads, hd, false);
  FOLIO_RETURN_IF_ERROR(attention::AttendReference<T>(ap, qh, k, v, attn));
  SwapTokenAndHeadAxes<T>(attn, out, batch, n, ap.num_q_heads, hd, true);
  return Status::Ok();
}

}  // namespace

Result<DecoderCache> DecoderCache::Create(const Model& model,
                                          const kv::PageTableLayout& layout,
                                          uint64_t batch, DType kv_dtype) {
  const ModelConfig& c = model.config();
  if (layout.capacity() != c.max_positions) {
    return Status::InvalidArgument(
        "cache layout capacity " + std::to_string(layout.capacity()) +
        " differs from the model's max_positions " + std::to_string(c.max_positions));
  }
  std::vector<kv::LayerCache> layers;
  layers.reserve(c.num_layers);
  for (uint64_t l = 0; l < c.num_layers; ++l) {
    FOLIO_ASSIGN_OR_RETURN(kv::LayerCache layer,
                           kv::LayerCache::Create(layout, {batch, c.num_kv_heads, c.head_dim()},
                                                  kv_dtype));
    layers.push_back(std::move(layer));
  }
  return DecoderCache(model.id(), std::move(layers));
}

void DecoderCache::Reset() {
  for (auto& l : layers_) l.Reset();
}

template <typename T>
Decoder<T>::Decoder(const Model& model, ThreadPool* pool)
    : pool_(pool),
      config_(model.config()),
      model_id_(model.id()),
      weights_(ConvertWeights<T>(model.config(), model.weights())) {}

template <typename T>
Status Decoder<T>::CheckTokens(std::span<const int32_t> tokens,
                               uint64_t batch) const {
  if (batch == 0 || tokens.empty() || tokens.size() % batch != 0) {
    return Status::InvalidArgument("tokens must be [batch=" + std::to_string(batch) +
                                   ", n >= 1] (got " + std::to_string(tokens.size()) +
                                   " ids)");
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
template <typename StoreFn>
Result<std::vector<T>> Decoder<T>::Run(std::span<const int32_t> tokens,
                                       StepShape s, StoreFn&& store) const {
  const ModelConfig& c = config_;
  const uint64_t d = c.hidden_size, hd = c.head_dim(), rows = s.batch * s.n;
  const T eps = static_cast<T>(c.norm_eps);
  std::vector<T> x(rows * d);  // residual stream [batch * n, hidden]
  for (uint64_t r = 0; r < rows; ++r) {
    const auto tok = static_cast<uint64_t>(tokens[r]);
    std::copy_n(weights_.embedding.begin() + static_cast<ptrdiff_t>(tok * d), d,
                x.begin() + static_cast<ptrdiff_t>(r * d));
  }
  std::vector<T> h(d), q(rows * c.q_size()), k(rows * c.kv_size()), v(rows * c.kv_size());
  std::vector<T> kh(k.size()), vh(v.size()), attn_rows(q.size());
  std::vector<T> gate(c.ffn_size), up(c.ffn_size), delta(d);
  attention::AttentionParams ap{c.num_heads, s.n, 1.0 / std::sqrt(static_cast<double>(hd)),
                                c.window};
  for (uint64_t layer = 0; layer < c.num_layers; ++layer) {
    const LayerWeights<T>& w = weights_.layers[layer];
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t pos = s.start + r % s.n;
      ops::RmsNorm<T>(Row(x, r, d), w.attn_norm, eps, h);
      ops::MatVec<T>(w.wq, h, Row(q, r, c.q_size()));
      ops::MatVec<T>(w.wk, h, Row(k, r, c.kv_size()));
      ops::MatVec<T>(w.wv, h, Row(v, r, c.kv_size()));
      ops::RopeInterleaved<T>(Row(q, r, c.q_size()), hd, pos, c.rope_theta);
      ops::RopeInterleaved<T>(Row(k, r, c.kv_size()), hd, pos, c.rope_theta);
    }
    SwapTokenAndHeadAxes<T>(k, kh, s.batch, s.n, c.num_kv_heads, hd, false);
    SwapTokenAndHeadAxes<T>(v, vh, s.batch, s.n, c.num_kv_heads, hd, false);
    FOLIO_ASSIGN_OR_RETURN(auto views, store(layer, std::span<const T>(kh),
                                             std::span<const T>(vh)));
    FOLIO_RETURN_IF_ERROR(Attend<T>(ap, s.batch, q, views.first, views.second, attn_rows,
                                    pool_));
    for (uint64_t r = 0; r < rows; ++r) {
      auto xr = Row(x, r, d);
      ops::MatVec<T>(w.wo, Row(attn_rows, r, c.q_size()), delta);
      for (uint64_t i = 0; i < d; ++i) xr[i] += delta[i];
      ops::RmsNorm<T>(xr, w.ffn_norm, eps, h);
      ops::MatVec<T>(w.w_gate, h, gate);
      ops::MatVec<T>(w.w_up, h, up);
      ops::SwiGlu<T>(gate, up);
      ops::MatVec<T>(w.w_down, gate, delta);
      for (uint64_t i = 0; i < d; ++i) xr[i] += delta[i];
    }
  }
  const std::vector<T>& head = c.tie_embeddings ? weights_.embedding : weights_.lm_head;
  std::vector<T> logits(rows * c.vocab_size);
  for (uint64_t r = 0; r < rows; ++r) {
    ops::RmsNorm<T>(Row(x, r, d), weights_.final_norm, eps, h);
    ops::MatVec<T>(head, h, Row(logits, r, c.vocab_size));
    for (T value : Row(logits, r, c.vocab_size)) {
      if (!std::isfinite(value)) {
        return Status::InvalidArgument("non-finite logit at lane " +
                                       std::to_string(r / s.n) + ", position " +
                                       std::to_string(s.start + r % s.n));
      }
    }
  }
  return logits;
}

template <typename T>
Result<std::vector<T>> Decoder<T>::Prefill(DecoderCache& cache,
                                           std::span<const int32_t> tokens) const {
  if (cache.model_id() != model_id_) {
    return Status::FailedPrecondition("cache is bound to model " + cache.model_id() +
                                      ", not " + model_id_);
  }
  FOLIO_RETURN_IF_ERROR(CheckTokens(tokens, cache.batch()));
  const StepShape s{cache.batch(), tokens.size() / cache.batch(), cache.length()};
  if (s.start + s.n > cache.capacity()) {
    return Status::ResourceExhausted("step of " + std::to_string(s.n) +
                                     " positions at length " + std::to_string(s.start) +
                                     " exceeds cache capacity " +
                                     std::to_string(cache.capacity()));
  }
  auto stage = [&](uint64_t layer, std::span<const T> keys, std::span<const T> values)
      -> Result<std::pair<KvArrayView, KvArrayView>> {
    kv::LayerCache& lc = cache.layer(layer);
    FOLIO_RETURN_IF_ERROR(lc.Stage(keys, values, s.n).WithContext("layer " + std::to_string(layer)));
    return std::pair{lc.View(KvRole::kKey), lc.View(KvRole::kValue)};
  };
  Result<std::vector<T>> logits = Run(tokens, s, stage);
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
    return Status::InvalidArgument("decode takes one token per lane: " +
                                   std::to_string(cache.batch()) + " (got " +
                                   std::to_string(tokens.size()) + ")");
  }
  return Prefill(cache, tokens);
}

template <typename T>
Result<std::vector<T>> Decoder<T>::Forward(std::span<const int32_t> tokens,
                                           uint64_t batch) const {
  FOLIO_RETURN_IF_ERROR(CheckTokens(tokens, batch));
  const StepShape s{batch, tokens.size() / batch, 0};
  if (s.n > config_.max_positions) {
    return Status::OutOfRange(std::to_string(s.n) + " positions exceed max_positions " +
                              std::to_string(config_.max_positions));
  }
  // Dense [batch, kv_heads, n, head_dim] K and V of the current layer, seen
  // through a one-page table: no cache object is involved.
  std::vector<T> keys, values;
  const uint64_t table[1] = {0};
  const kv::LaneShape lanes{batch, config_.num_kv_heads, config_.head_dim()};
  auto keep = [&](uint64_t, std::span<const T> k, std::span<const T> v)
      -> Result<std::pair<KvArrayView, KvArrayView>> {
    keys.assign(k.begin(), k.end());
    values.assign(v.begin(), v.end());
    auto view = [&](const std::vector<T>& a) {
      return KvArrayView{reinterpret_cast<const std::byte*>(a.data()), DTypeOf<T>(), table,
                         1, s.n, lanes, s.n};
    };
    return std::pair{view(keys), view(values)};
  };
  return Run(tokens, s, keep);
}

template class Decoder<float>;
template class Decoder<double>;

}  // namespace folio::model
