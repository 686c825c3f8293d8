#include "reference/float64_decoder.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>

#include "folio/attention/paged_attention.h"
#include "folio/core/check.h"
#include "folio/ops/ops.h"
#include "reference/float64_attention.h"

namespace folio::reference {
namespace {

using model::LogitRows;

std::span<double> Row(std::vector<double>& v, uint64_t row, uint64_t width) {
  return std::span<double>(v).subspan(row * width, width);
}

// A linear layer widened to float64 once: y = W x per row, the scalar
// matvec.
class Linear {
 public:
  // An empty tensor (a mixture's absent dense MLP) gives an empty layer.
  explicit Linear(const model::Tensor& t)
      : values_(t.empty() ? std::vector<double>() : t.ToDoubles()),
        rows_(t.empty() ? 0 : t.shape.at(0)),
        cols_(t.empty() ? 0 : t.shape.at(1)) {}
  void Apply(std::span<const double> x, uint64_t num_rows, std::span<double> y) const {
    for (uint64_t r = 0; r < num_rows; ++r) {
      ops::MatVec<double>(values_, x.subspan(r * cols_, cols_), y.subspan(r * rows_, rows_));
    }
  }
  // out [ids.size(), cols]: the rows named by ids (checked by the caller).
  void Embed(std::span<const int32_t> ids, std::span<double> out) const {
    for (size_t r = 0; r < ids.size(); ++r) {
      std::copy_n(values_.begin() + static_cast<ptrdiff_t>(static_cast<uint64_t>(ids[r]) * cols_),
                  cols_, out.begin() + static_cast<ptrdiff_t>(r * cols_));
    }
  }

 private:
  std::vector<double> values_;  // [rows, cols]
  uint64_t rows_, cols_;
};

// Rows of `batch` lanes of n tokens each, lane-major, at positions 0..n-1,
// with logits for every row.
struct LanePlan {
  std::vector<uint64_t> positions, logit_rows;
  LanePlan(uint64_t batch, uint64_t n) {
    for (uint64_t b = 0; b < batch; ++b) {
      for (uint64_t i = 0; i < n; ++i) {
        positions.push_back(i);
        logit_rows.push_back(b * n + i);
      }
    }
  }
};

}  // namespace

struct Float64Decoder::Weights {
  struct Layer {
    std::vector<double> attn_norm, post_attn_norm, ffn_norm, post_ffn_norm, bq, bk, bv, q_norm,
        k_norm;
    Linear wq, wk, wv, wo, gate, up, down;
    std::vector<double> inv_freq;  // the layer's RoPE
    double rope_scale;             // cos and sin times this (longrope)
    std::vector<Linear> router, expert_gate, expert_up, expert_down;  // a mixture of experts
    std::vector<double> selection_bias;                               // [num_experts] or empty
    // gate, up, down, and its gate when gated (Qwen2-MoE; dots1's has none)
    std::vector<Linear> shared_expert;
  };
  Linear embedding;
  std::vector<Layer> layers;
  std::vector<double> final_norm;
  Linear head;  // the embedding again when tied

  explicit Weights(const model::Model& m)
      : embedding(m.weights().embedding),
        final_norm(Norm(m.config(), m.weights().final_norm)),
        head(m.config().tie_embeddings ? m.weights().embedding : m.weights().lm_head) {
    const model::ModelConfig& c = m.config();
    auto values = [](const model::Tensor& t) {
      return t.empty() ? std::vector<double>() : t.ToDoubles();
    };
    for (uint64_t i = 0; i < c.num_layers; ++i) {
      const model::LayerWeights& l = m.weights().layers[i];
      const model::LayerConfig lc = c.Layer(i);
      layers.push_back(
          Layer{Norm(c, l.attn_norm),
                Norm(c, l.post_attn_norm),
                Norm(c, l.ffn_norm),
                Norm(c, l.post_ffn_norm),
                values(l.bq),
                values(l.bk),
                values(l.bv),
                Norm(c, l.q_norm),
                Norm(c, l.k_norm),
                Linear(l.wq),
                Linear(l.wk),
                Linear(l.wv),
                Linear(l.wo),
                Linear(l.w_gate),
                Linear(l.w_up),
                Linear(l.w_down),
                model::RopeInverseFrequencies(c.RotaryDim(), lc.rope_theta, lc.rope_scaling),
                model::RopeAttentionFactor(lc.rope_scaling),
                {},
                {},
                {},
                {},
                {},
                {}});
      if (c.IsMoeLayer(i)) {
        Layer& layer = layers.back();
        layer.router.emplace_back(l.router);
        for (uint64_t e = 0; e < c.num_experts; ++e) {
          layer.expert_gate.emplace_back(l.expert_gate[e]);
          layer.expert_up.emplace_back(l.expert_up[e]);
          layer.expert_down.emplace_back(l.expert_down[e]);
        }
        layer.selection_bias = values(l.router_selection_bias);
        for (const model::Tensor* t :
             {&l.shared_gate, &l.shared_up, &l.shared_down, &l.shared_expert_gate}) {
          if (!t->empty()) layer.shared_expert.emplace_back(*t);
        }
      }
    }
  }

  // Gains as they multiply: 1 + w where the family stores w.
  static std::vector<double> Norm(const model::ModelConfig& c, const model::Tensor& t) {
    std::vector<double> g = t.empty() ? std::vector<double>() : t.ToDoubles();
    if (c.norm_unit_offset) {
      for (double& x : g) x += 1.0;
    }
    return g;
  }
};

namespace {
// gpt-oss's and BERT's blocks are checked against transformers, not
// modelled here: refuse them (before any weight is read) rather than drop
// their options.
const model::Model& Modelled(const model::Model& model) {
  const model::ModelConfig& c = model.config();
  FOLIO_CHECK(c.routing != model::Routing::kTopKSoftmax && !c.moe_bias && c.swiglu_limit == 0 &&
                  !c.output_bias && !c.attention_sinks,
              "the float64 reference does not model gpt-oss's block");
  FOLIO_CHECK(c.block == model::Block::kDecoder, "the float64 reference models decoders only");
  return model;
}
}  // namespace

Float64Decoder::Float64Decoder(const model::Model& model)
    : config_(Modelled(model).config()),
      model_id_(model.id()),
      weights_(std::make_unique<const Weights>(model)) {}
Float64Decoder::~Float64Decoder() = default;
Float64Decoder::Float64Decoder(Float64Decoder&&) noexcept = default;

Status Float64Decoder::CheckTokens(std::span<const int32_t> tokens, uint64_t batch) const {
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

template <typename AttendFn>
Result<std::vector<double>> Float64Decoder::Run(const RowPlan& plan, AttendFn&& attend) const {
  const model::ModelConfig& c = config_;
  const Weights& w = *weights_;
  const uint64_t d = c.hidden_size, hd = c.head_dim(), half = c.RotaryDim() / 2;
  const uint64_t rows = plan.tokens.size(), qs = c.q_size(), kvs = c.kv_size();
  const double eps = c.norm_eps;
  const bool neox = c.rope_style == model::RopeStyle::kNeox;

  // RoPE angles per row and layer, as model::Decoder computes them (in
  // double).
  auto rope = [&](std::vector<double>& y, const std::vector<double>& inv_freq, double scale) {
    const uint64_t width = y.size() / rows;
    std::vector<double> cos(half), sin(half);
    for (uint64_t r = 0; r < rows; ++r) {
      for (uint64_t p = 0; p < half; ++p) {
        const double theta = static_cast<double>(plan.positions[r]) * inv_freq[p];
        cos[p] = std::cos(theta) * scale;
        sin[p] = std::sin(theta) * scale;
      }
      ops::Rope<double>(Row(y, r, width), hd, cos, sin, neox);
    }
  };
  auto rms_norm = [&](std::span<const double> in, const std::vector<double>& gain,
                      std::span<double> out) {
    for (uint64_t off = 0; off < in.size(); off += gain.size()) {
      ops::RmsNorm<double>(in.subspan(off, gain.size()), gain, eps, out.subspan(off, gain.size()));
    }
  };

  std::vector<double> x(rows * d);    // residual stream [rows, hidden]
  w.embedding.Embed(plan.tokens, x);  // CheckTokens bounded the ids
  if (c.scale_embedding) {
    const double scale = std::sqrt(static_cast<double>(d));
    for (double& e : x) e *= scale;
  }
  std::vector<double> h(rows * d), q(rows * qs), k(rows * kvs), v(rows * kvs);
  std::vector<double> attn(q.size()), delta(rows * d);
  std::vector<double> gate(rows * c.ffn_size), up(rows * c.ffn_size);
  auto add_bias = [](std::vector<double>& y, const std::vector<double>& bias) {
    if (bias.empty()) return;
    for (uint64_t i = 0; i < y.size(); ++i) y[i] += bias[i % bias.size()];
  };
  auto norm_if = [&](std::vector<double>& y, const std::vector<double>& gain) {
    if (!gain.empty()) rms_norm(y, gain, y);
  };
  for (uint64_t layer = 0; layer < c.num_layers; ++layer) {
    const auto& lw = w.layers[layer];
    rms_norm(x, lw.attn_norm, h);
    lw.wq.Apply(h, rows, q);
    lw.wk.Apply(h, rows, k);
    lw.wv.Apply(h, rows, v);
    add_bias(q, lw.bq);
    add_bias(k, lw.bk);
    add_bias(v, lw.bv);
    norm_if(q, lw.q_norm);
    norm_if(k, lw.k_norm);
    rope(q, lw.inv_freq, lw.rope_scale);
    rope(k, lw.inv_freq, lw.rope_scale);
    FOLIO_RETURN_IF_ERROR(attend(layer, std::span<const double>(q), std::span<const double>(k),
                                 std::span<const double>(v), std::span<double>(attn)));
    lw.wo.Apply(attn, rows, delta);
    norm_if(delta, lw.post_attn_norm);
    for (uint64_t i = 0; i < x.size(); ++i) x[i] += delta[i];
    rms_norm(x, lw.ffn_norm, h);
    if (c.IsMoeLayer(layer)) {
      // Row by row: the scores (a softmax, or each logit's sigmoid); the
      // best experts_per_token by score plus the selection bias, within
      // the best groups by their two best such sums when grouped (ties to
      // the lower index); their outputs summed in increasing expert order,
      // weighted by their scores (over their sum when norm_topk_prob) times
      // the routed scale; then the shared expert's output.
      const uint64_t n_exp = c.num_experts, top_k = c.experts_per_token, f = c.expert_ffn_size;
      const uint64_t groups = c.expert_groups, per = n_exp / groups;
      std::vector<double> score(n_exp), choice(n_exp), group_score(groups), g(f), u(f), y(d);
      std::vector<uint32_t> order(n_exp), group_order(groups);
      auto ranked = [](const std::vector<double>& by, std::vector<uint32_t>& idx, uint64_t first) {
        for (uint32_t e = 0; e < idx.size(); ++e) idx[e] = e;
        std::partial_sort(
            idx.begin(), idx.begin() + static_cast<ptrdiff_t>(first), idx.end(),
            [&](uint32_t a, uint32_t b) { return by[a] > by[b] || (by[a] == by[b] && a < b); });
      };
      for (uint64_t r = 0; r < rows; ++r) {
        const std::span<const double> hr = Row(h, r, d);
        lw.router[0].Apply(hr, 1, score);
        if (c.routing == model::Routing::kSigmoidTopK) {
          for (double& l : score) l = 1.0 / (1.0 + std::exp(-l));
        } else {
          const double top = *std::max_element(score.begin(), score.end());
          double sum = 0;
          for (double& l : score) sum += (l = std::exp(l - top));
          for (double& l : score) l /= sum;
        }
        for (uint64_t e = 0; e < n_exp; ++e) {
          choice[e] = score[e] + (lw.selection_bias.empty() ? 0.0 : lw.selection_bias[e]);
        }
        if (groups > 1) {
          for (uint64_t gi = 0; gi < groups; ++gi) {
            std::vector<double> members(choice.begin() + static_cast<ptrdiff_t>(gi * per),
                                        choice.begin() + static_cast<ptrdiff_t>((gi + 1) * per));
            std::sort(members.begin(), members.end(), std::greater<>());
            group_score[gi] = members[0] + members[1];
          }
          ranked(group_score, group_order, groups);
          for (uint64_t rank = c.expert_groups_used; rank < groups; ++rank) {
            for (uint64_t e = group_order[rank] * per; e < (group_order[rank] + 1) * per; ++e) {
              choice[e] = -std::numeric_limits<double>::infinity();
            }
          }
        }
        ranked(choice, order, top_k);
        std::sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(top_k));
        double total = 0;
        for (uint64_t s = 0; s < top_k; ++s) total += score[order[s]];
        std::span<double> o = Row(delta, r, d);
        std::fill(o.begin(), o.end(), 0.0);
        for (uint64_t s = 0; s < top_k; ++s) {
          const uint32_t e = order[s];
          lw.expert_gate[e].Apply(hr, 1, g);
          lw.expert_up[e].Apply(hr, 1, u);
          ops::SwiGlu<double>(g, u);
          lw.expert_down[e].Apply(g, 1, y);
          const double wt = (c.norm_topk_prob ? score[e] / total : score[e]) * c.routed_scale;
          for (uint64_t i = 0; i < d; ++i) o[i] += wt * y[i];
        }
        if (!lw.shared_expert.empty()) {
          const uint64_t fs = c.SharedExpertFfnSize();
          std::vector<double> sg(fs), su(fs), gate_logit(1);
          lw.shared_expert[0].Apply(hr, 1, sg);
          lw.shared_expert[1].Apply(hr, 1, su);
          ops::SwiGlu<double>(sg, su);
          lw.shared_expert[2].Apply(sg, 1, y);
          double s = 1.0;                      // ungated (dots1)
          if (lw.shared_expert.size() == 4) {  // Qwen2-MoE's sigmoid gate
            lw.shared_expert[3].Apply(hr, 1, gate_logit);
            s = 1.0 / (1.0 + std::exp(-gate_logit[0]));
          }
          for (uint64_t i = 0; i < d; ++i) o[i] += s * y[i];
        }
      }
      norm_if(delta, lw.post_ffn_norm);
      for (uint64_t i = 0; i < x.size(); ++i) x[i] += delta[i];
      continue;
    }
    lw.gate.Apply(h, rows, gate);
    lw.up.Apply(h, rows, up);
    switch (c.activation) {
      case model::Activation::kSilu:
        ops::SwiGlu<double>(gate, up);
        break;
      case model::Activation::kGeluTanh:
        ops::GeGlu<double>(gate, up);
        break;
      case model::Activation::kGelu:  // BERT's plain MLP: refused above
        FOLIO_CHECK(false, "a plain GELU MLP");
    }
    lw.down.Apply(gate, rows, delta);
    norm_if(delta, lw.post_ffn_norm);
    for (uint64_t i = 0; i < x.size(); ++i) x[i] += delta[i];
  }
  // The output head only for the rows asked for.
  const uint64_t out_rows = plan.logit_rows.size();
  std::vector<double> hn(out_rows * d);
  for (uint64_t o = 0; o < out_rows; ++o) {
    rms_norm(Row(x, plan.logit_rows[o], d), w.final_norm, Row(hn, o, d));
  }
  std::vector<double> logits(out_rows * c.vocab_size);
  w.head.Apply(hn, out_rows, logits);
  if (c.final_logit_softcap != 0) {
    for (double& l : logits) l = std::tanh(l / c.final_logit_softcap) * c.final_logit_softcap;
  }
  for (uint64_t o = 0; o < out_rows; ++o) {
    for (double value : Row(logits, o, c.vocab_size)) {
      if (!std::isfinite(value)) {
        return Status::InvalidArgument("non-finite logit at row " +
                                       std::to_string(plan.logit_rows[o]) + ", position " +
                                       std::to_string(plan.positions[plan.logit_rows[o]]));
      }
    }
  }
  return logits;
}

Result<std::vector<double>> Float64Decoder::Forward(std::span<const int32_t> tokens,
                                                    uint64_t batch) const {
  FOLIO_RETURN_IF_ERROR(CheckTokens(tokens, batch));
  const uint64_t n = tokens.size() / batch;
  if (n > config_.max_positions) {
    return Status::OutOfRange(std::to_string(n) + " positions exceed max_positions " +
                              std::to_string(config_.max_positions));
  }
  if (batch > INT32_MAX || n > INT32_MAX) {
    return Status::OutOfRange("forward pass of " + std::to_string(batch) + " lanes of " +
                              std::to_string(n) + " tokens exceeds int32 metadata");
  }
  const LanePlan lanes(batch, n);
  // Lane b's K and V of the current layer are page b of a float64 pool of
  // `batch` pages of n slots: no cache object is involved.
  const uint64_t hd = config_.head_dim(), kv_heads = config_.num_kv_heads;
  std::vector<double> keys(batch * n * config_.kv_size()), values(keys.size());
  // Lane b owns page b, holding all n of its tokens.
  std::vector<int32_t> pages_indptr(batch + 1), lane_pages(batch),
      last_page_len(batch, static_cast<int32_t>(n)), indptr(batch + 1);
  for (uint64_t b = 0; b < batch; ++b) {
    pages_indptr[b + 1] = static_cast<int32_t>(b + 1);
    lane_pages[b] = static_cast<int32_t>(b);
    indptr[b + 1] = static_cast<int32_t>((b + 1) * n);
  }
  attention::PagedAttentionParams p;
  p.num_q_heads = config_.num_heads;
  p.scale = config_.AttentionScale();
  p.softcap = config_.attn_logit_softcap;
  const kv::PagedKvView pool{reinterpret_cast<const std::byte*>(keys.data()),
                             reinterpret_cast<const std::byte*>(values.data()),
                             DType::kF64,
                             batch,
                             kv_heads,
                             n,
                             hd};
  // Token-major [batch, n, kv_heads, head_dim] rows to the pool's
  // [batch, kv_heads, n, head_dim].
  auto store = [&](std::span<const double> rows, std::vector<double>& pages) {
    for (uint64_t b = 0; b < batch; ++b)
      for (uint64_t i = 0; i < n; ++i)
        for (uint64_t h = 0; h < kv_heads; ++h) {
          std::copy_n(rows.begin() + static_cast<ptrdiff_t>(((b * n + i) * kv_heads + h) * hd), hd,
                      pages.begin() + static_cast<ptrdiff_t>(((b * kv_heads + h) * n + i) * hd));
        }
  };
  auto attend = [&](uint64_t layer, std::span<const double> q, std::span<const double> k,
                    std::span<const double> v, std::span<double> out) -> Status {
    p.window = config_.Layer(layer).window;
    store(k, keys);
    store(v, values);
    return Float64PagedAttention(p, q, pool, {pages_indptr, lane_pages, last_page_len, indptr},
                                 out);
  };
  return Run(RowPlan{tokens, lanes.positions, lanes.logit_rows}, attend);
}

Result<std::vector<double>> Float64Decoder::Step(kv::PagedKvCache& cache,
                                                 const kv::BatchMetadata& meta,
                                                 std::span<const int32_t> tokens,
                                                 LogitRows rows) const {
  const kv::PagedKvCacheConfig& kc = cache.config();
  if (kc.num_layers != config_.num_layers || kc.num_kv_heads != config_.num_kv_heads ||
      kc.head_dim != config_.head_dim()) {
    return Status::InvalidArgument(
        "paged cache shape (layers, kv heads, head dim) differs from the model's");
  }
  FOLIO_RETURN_IF_ERROR(CheckTokens(tokens, 1));
  const uint64_t batch = meta.batch;
  if (meta.query_indptr.size() != batch + 1 ||
      static_cast<uint64_t>(meta.query_indptr.back()) != tokens.size() ||
      meta.slot_mapping.size() != tokens.size()) {
    return Status::InvalidArgument("tokens, query_indptr and slot_mapping disagree");
  }
  FOLIO_ASSIGN_OR_RETURN(const std::vector<uint64_t> contexts,
                         kv::BatchContexts(kv::ViewOf(meta), kc.page_size));
  if (contexts.size() != batch) {
    return Status::InvalidArgument("last_page_len has " + std::to_string(contexts.size()) +
                                   " entries; the batch has " + std::to_string(batch));
  }
  std::vector<uint64_t> positions(tokens.size()), logit_rows;
  for (uint64_t s = 0; s < batch; ++s) {
    const auto first = static_cast<uint64_t>(meta.query_indptr[s]);
    const auto last = static_cast<uint64_t>(meta.query_indptr[s + 1]);
    const uint64_t context = contexts[s];
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
      if (rows == LogitRows::kAll || r + 1 == last) logit_rows.push_back(r);
    }
  }
  attention::PagedAttentionParams p;
  p.num_q_heads = config_.num_heads;
  p.scale = config_.AttentionScale();
  p.softcap = config_.attn_logit_softcap;
  auto attend = [&](uint64_t layer, std::span<const double> q, std::span<const double> k,
                    std::span<const double> v, std::span<double> out) -> Status {
    p.window = config_.Layer(layer).window;
    FOLIO_RETURN_IF_ERROR(cache.WriteRows(layer, meta.slot_mapping, k, v)
                              .WithContext("layer " + std::to_string(layer)));
    return Float64PagedAttention(p, q, cache.View(layer), kv::ViewOf(meta), out);
  };
  return Run(RowPlan{tokens, positions, logit_rows}, attend);
}

}  // namespace folio::reference
