#include "folio/model/decoder.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "folio/attention/paged_attention.h"
#include "folio/backend/backend.h"
#include "folio/core/aligned_buffer.h"
#include "folio/core/checked_math.h"
#include "folio/ops/matmul.h"
#include "folio/ops/ops.h"
#include "model/decoder_internal.h"

namespace folio::model {

using decoder_internal::AddRowBias;
using decoder_internal::ApplyLinears;
using decoder_internal::Row;

namespace {

// Moves rows [batch, n, heads * head_dim] to [batch, heads, n, head_dim].
void SwapTokenAndHeadAxes(std::span<const float> in, std::span<float> out, uint64_t batch,
                          uint64_t n, uint64_t heads, uint64_t head_dim) {
  for (uint64_t b = 0; b < batch; ++b)
    for (uint64_t i = 0; i < n; ++i)
      for (uint64_t h = 0; h < heads; ++h) {
        std::copy_n(in.begin() + static_cast<ptrdiff_t>(((b * n + i) * heads + h) * head_dim),
                    head_dim,
                    out.begin() + static_cast<ptrdiff_t>(((b * heads + h) * n + i) * head_dim));
      }
}

}  // namespace

Decoder::Decoder(const Model& model, ThreadPool* pool)
    : Decoder(model, std::shared_ptr<backend::Backend>(
                         backend::MakeBackend(backend::BackendKind::kCpu, pool))) {}

Decoder::Decoder(const Model& model, std::shared_ptr<backend::Backend> backend)
    : backend_(std::move(backend)), config_(model.config()), model_id_(model.id()) {
  FOLIO_CHECK(backend_ != nullptr);
  weights_ = std::make_unique<const Weights>(model, backend_.get());
}

Decoder::~Decoder() = default;
Decoder::Decoder(Decoder&&) noexcept = default;

Status Decoder::CheckTokens(std::span<const int32_t> tokens, uint64_t batch) const {
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

namespace decoder_internal {

void RouteRow(const ModelConfig& c, std::span<const float> l, std::span<const float> selection_bias,
              RouterScratch& s, std::span<uint32_t> experts, std::span<float> weights) {
  const uint64_t n = c.num_experts, k = c.experts_per_token;
  s.scores.resize(n);
  s.choice.resize(n);
  s.order.resize(n);
  std::vector<float>& score = s.scores;
  switch (c.routing) {
    case Routing::kSoftmaxTopK: {
      const float top = *std::max_element(l.begin(), l.end());
      float sum = 0;
      for (uint64_t e = 0; e < n; ++e) sum += score[e] = std::exp(l[e] - top);
      for (uint64_t e = 0; e < n; ++e) score[e] /= sum;
      break;
    }
    case Routing::kSigmoidTopK:
      for (uint64_t e = 0; e < n; ++e) score[e] = 1.0f / (1.0f + std::exp(-l[e]));
      break;
    case Routing::kTopKSoftmax:  // rank by logit; the softmax over the chosen k comes below
      std::copy(l.begin(), l.end(), score.begin());
      break;
  }
  // The selection bias moves the choice, never the weights.
  for (uint64_t e = 0; e < n; ++e) {
    s.choice[e] = selection_bias.empty() ? score[e] : score[e] + selection_bias[e];
  }
  // Larger first, ties to the lower index.
  auto better = [](const std::vector<float>& values) {
    return [v = values.data()](uint32_t a, uint32_t b) {
      return v[a] > v[b] || (v[a] == v[b] && a < b);
    };
  };
  if (c.expert_groups > 1) {
    // A group's score is the sum of its two best choices; experts outside
    // the best expert_groups_used groups cannot be chosen.
    const uint64_t groups = c.expert_groups, per = n / groups;
    s.group_scores.resize(groups);
    s.group_order.resize(groups);
    for (uint64_t g = 0; g < groups; ++g) {
      float first = -INFINITY, second = -INFINITY;
      for (uint64_t e = g * per; e < (g + 1) * per; ++e) {
        const float x = s.choice[e];
        if (x > first) {
          second = first;
          first = x;
        } else if (x > second) {
          second = x;
        }
      }
      s.group_scores[g] = first + second;
    }
    std::iota(s.group_order.begin(), s.group_order.end(), 0u);
    std::sort(s.group_order.begin(), s.group_order.end(), better(s.group_scores));
    for (uint64_t r = c.expert_groups_used; r < groups; ++r) {
      const uint64_t g = s.group_order[r];
      std::fill_n(s.choice.begin() + static_cast<ptrdiff_t>(g * per), per, -INFINITY);
    }
  }
  std::vector<uint32_t>& order = s.order;
  std::iota(order.begin(), order.end(), 0u);
  std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(k), order.end(),
                    better(s.choice));
  if (c.routing == Routing::kTopKSoftmax) {  // gpt-oss: a softmax over the chosen k logits
    float top = -INFINITY;
    for (uint64_t i = 0; i < k; ++i) top = std::max(top, score[order[i]]);
    float sum = 0;
    for (uint64_t i = 0; i < k; ++i) sum += score[order[i]] = std::exp(score[order[i]] - top);
    for (uint64_t i = 0; i < k; ++i) score[order[i]] /= sum;
  }
  // The row's experts in increasing index: the order their outputs add.
  std::sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(k));
  float total = 0;
  for (uint64_t i = 0; i < k; ++i) total += score[order[i]];
  if (c.routing == Routing::kSigmoidTopK) total += 1e-20f;
  const bool normalise = c.norm_topk_prob && c.routing != Routing::kTopKSoftmax;
  const auto scale = static_cast<float>(c.routed_scale);
  for (uint64_t i = 0; i < k; ++i) {
    experts[i] = order[i];
    weights[i] = (normalise ? score[order[i]] / total : score[order[i]]) * scale;
  }
}

}  // namespace decoder_internal

// A mixture of experts on rows h [rows, hidden] into out [rows, hidden]:
// each row routed on its own (RouteRow); then, per expert (with its biases
// and the clamped SwiGLU where the config has them), the rows that chose
// it as one matrix product (llama.cpp's mul_mat_id), read once for the
// step; a row's output is the sum of its experts' outputs times their
// weights, in increasing expert order, then the shared expert's output
// (Qwen2-MoE: times sigmoid of its gate). Every row's bits depend on that
// row alone (the matmuls are row-independent), so batch composition,
// chunking and threads change nothing.
Status Decoder::Experts(const Weights& w, uint64_t layer, std::span<const float> h, uint64_t rows,
                        std::span<float> out) const {
  const Weights::Layer& lw = w.layers[layer];
  const ModelConfig& c = config_;
  backend::Backend* const be = backend_.get();
  const uint64_t n_exp = c.num_experts, k = c.experts_per_token, f = c.expert_ffn_size;
  const uint64_t d = c.hidden_size;
  std::vector<float> logits(rows * n_exp);
  FOLIO_RETURN_IF_ERROR(lw.router[0].Apply(h, rows, logits, be));
  if (!lw.router_bias.empty()) {
    for (uint64_t i = 0; i < logits.size(); ++i) logits[i] += lw.router_bias[i % n_exp];
  }
  std::vector<float> weight(rows * k);
  std::vector<uint32_t> chosen(k);
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> routed(n_exp);  // (row, slot)
  decoder_internal::RouterScratch scratch;
  for (uint64_t r = 0; r < rows; ++r) {
    decoder_internal::RouteRow(c, std::span<const float>(logits).subspan(r * n_exp, n_exp),
                               lw.selection_bias, scratch, chosen,
                               std::span<float>(weight).subspan(r * k, k));
    for (uint64_t s = 0; s < k; ++s) {
      routed[chosen[s]].emplace_back(static_cast<uint32_t>(r), static_cast<uint32_t>(s));
    }
  }
  std::vector<float> ys(rows * k * d);  // each (row, slot)'s expert output
  std::vector<float> xe, ge, ue, ye;
  for (uint64_t e = 0; e < n_exp; ++e) {
    const uint64_t n = routed[e].size();
    if (n == 0) continue;
    xe.resize(n * d);
    for (uint64_t i = 0; i < n; ++i) {
      std::copy_n(h.begin() + static_cast<ptrdiff_t>(routed[e][i].first * d), d,
                  xe.begin() + static_cast<ptrdiff_t>(i * d));
    }
    ge.resize(n * f);
    ue.resize(n * f);
    ye.resize(n * d);
    FOLIO_RETURN_IF_ERROR(ApplyLinears<2>({&lw.expert_gate[e], &lw.expert_up[e]}, xe, n,
                                          {std::span<float>(ge), std::span<float>(ue)}, be));
    if (!lw.expert_gate_bias.empty()) {
      AddRowBias(ge, lw.expert_gate_bias[e]);
      AddRowBias(ue, lw.expert_up_bias[e]);
    }
    if (c.swiglu_limit != 0) {
      be->SwiGluClamped(ge, ue, static_cast<float>(c.swiglu_alpha),
                        static_cast<float>(c.swiglu_limit));
    } else {
      be->SwiGlu(ge, ue);
    }
    FOLIO_RETURN_IF_ERROR(lw.expert_down[e].Apply(ge, n, ye, be));
    if (!lw.expert_down_bias.empty()) AddRowBias(ye, lw.expert_down_bias[e]);
    for (uint64_t i = 0; i < n; ++i) {
      const auto [r, s] = routed[e][i];
      std::copy_n(ye.begin() + static_cast<ptrdiff_t>(i * d), d,
                  ys.begin() + static_cast<ptrdiff_t>((r * k + s) * d));
    }
  }
  for (uint64_t r = 0; r < rows; ++r) {
    std::span<float> o = out.subspan(r * d, d);
    std::fill(o.begin(), o.end(), 0.0f);
    for (uint64_t s = 0; s < k; ++s) {
      const float wt = weight[r * k + s];
      const float* y = ys.data() + (r * k + s) * d;
      for (uint64_t i = 0; i < d; ++i) o[i] += y[i] * wt;
    }
  }
  if (!lw.shared_expert.empty()) {
    const uint64_t fs = c.SharedExpertFfnSize();
    ge.resize(rows * fs);
    ue.resize(rows * fs);
    ye.resize(rows * d);
    FOLIO_RETURN_IF_ERROR(ApplyLinears<2>({&lw.shared_expert[0], &lw.shared_expert[1]}, h, rows,
                                          {std::span<float>(ge), std::span<float>(ue)}, be));
    be->SwiGlu(ge, ue);
    FOLIO_RETURN_IF_ERROR(lw.shared_expert[2].Apply(ge, rows, ye, be));
    if (lw.shared_expert.size() == 3) {  // ungated (dots1): added as it is
      for (uint64_t i = 0; i < rows * d; ++i) out[i] += ye[i];
      return Status::Ok();
    }
    std::vector<float> gate(rows);
    FOLIO_RETURN_IF_ERROR(lw.shared_expert[3].Apply(h, rows, gate, be));
    for (uint64_t r = 0; r < rows; ++r) {
      // transformers: F.sigmoid(gate) * shared, added after the experts.
      const float s = 1.0f / (1.0f + std::exp(-gate[r]));
      for (uint64_t i = 0; i < d; ++i) out[r * d + i] += s * ye[r * d + i];
    }
  }
  return Status::Ok();
}

template <typename AttendFn>
Result<std::vector<float>> Decoder::Run(const RowPlan& plan, AttendFn&& attend,
                                        std::vector<float>* hidden) const {
  if (config_.IsEncoder()) return RunBert(plan, attend, hidden);
  const ModelConfig& c = config_;
  const Weights& w = *weights_;
  const uint64_t d = c.hidden_size, hd = c.head_dim(), half = c.RotaryDim() / 2;
  const uint64_t rows = plan.tokens.size(), qs = c.q_size(), kvs = c.kv_size();
  const auto eps = static_cast<float>(c.norm_eps);
  const bool neox = c.rope_style == RopeStyle::kNeox;

  // RoPE angles per row and table (half = the rotated pairs of a head), shared by the layers of
  // that table. Computed in double and rounded once, so this decoder and the float64 reference
  // rotate by the same angles.
  std::vector<std::vector<float>> cos(w.ropes.size()), sin(w.ropes.size());
  for (size_t t = 0; t < w.ropes.size(); ++t) {
    const std::vector<double>& inv_freq = w.ropes[t];
    const double scale = w.rope_scales[t];
    cos[t].resize(rows * half);
    sin[t].resize(rows * half);
    for (uint64_t r = 0; r < rows; ++r) {
      for (uint64_t p = 0; p < half; ++p) {
        const double theta = static_cast<double>(plan.positions[r]) * inv_freq[p];
        cos[t][r * half + p] = static_cast<float>(std::cos(theta) * scale);
        sin[t][r * half + p] = static_cast<float>(std::sin(theta) * scale);
      }
    }
  }

  // Every op on the backend; norms and RoPE work row by row.
  backend::Backend* const be = backend_.get();
  auto rms_norm = [&](std::span<const float> in, const std::vector<float>& gain,
                      std::span<float> out) { be->RmsNorm(in, gain, eps, out); };

  std::vector<float> x(rows * d);         // residual stream [rows, hidden]
  w.embedding.Embed(plan.tokens, x, be);  // CheckTokens bounded the ids
  if (c.scale_embedding) {
    // Gemma: times sqrt(hidden) rounded to f32, as its embedding module does.
    const auto scale = static_cast<float>(std::sqrt(static_cast<double>(d)));
    for (float& e : x) e *= scale;
  }
  std::vector<float> h(rows * d), q(rows * qs), k(rows * kvs), v(rows * kvs);
  std::vector<float> attn(q.size()), delta(rows * d);
  std::vector<float> gate(rows * c.ffn_size), up(rows * c.ffn_size);
  // An optional norm in place (q/k norms; the sandwich layout's post norms).
  auto norm_if = [&](std::vector<float>& y, const std::vector<float>& gain) {
    if (!gain.empty()) rms_norm(y, gain, y);
  };
  for (uint64_t layer = 0; layer < c.num_layers; ++layer) {
    const auto& lw = w.layers[layer];
    rms_norm(x, lw.attn_norm, h);
    const Status qkv =
        ApplyLinears<3>({&*lw.wq, &*lw.wk, &*lw.wv}, h, rows,
                        {std::span<float>(q), std::span<float>(k), std::span<float>(v)}, be);
    FOLIO_RETURN_IF_ERROR(qkv);
    AddRowBias(q, lw.bq);
    AddRowBias(k, lw.bk);
    AddRowBias(v, lw.bv);
    norm_if(q, lw.q_norm);
    norm_if(k, lw.k_norm);
    be->Rope(q, rows, hd, cos[lw.rope], sin[lw.rope], neox);
    be->Rope(k, rows, hd, cos[lw.rope], sin[lw.rope], neox);
    FOLIO_RETURN_IF_ERROR(attend(layer, lw.window, std::span<const float>(q),
                                 std::span<const float>(k), std::span<const float>(v),
                                 std::span<float>(attn)));
    FOLIO_RETURN_IF_ERROR(lw.wo->Apply(attn, rows, delta, be));
    AddRowBias(delta, lw.bo);
    norm_if(delta, lw.post_attn_norm);
    for (uint64_t i = 0; i < x.size(); ++i) x[i] += delta[i];
    rms_norm(x, lw.ffn_norm, h);
    if (c.IsMoeLayer(layer)) {
      FOLIO_RETURN_IF_ERROR(Experts(w, layer, h, rows, delta));
    } else {
      const Status gate_up = ApplyLinears<2>({&lw.mlp[0], &lw.mlp[1]}, h, rows,
                                             {std::span<float>(gate), std::span<float>(up)}, be);
      FOLIO_RETURN_IF_ERROR(gate_up);
      switch (c.activation) {
        case Activation::kSilu:
          be->SwiGlu(gate, up);
          break;
        case Activation::kGeluTanh:
          be->GeGlu(gate, up);
          break;
        case Activation::kGelu:  // a plain MLP: BERT's block only (Validate)
          FOLIO_CHECK(false, "a decoder block with a plain GELU MLP");
          break;
      }
      FOLIO_RETURN_IF_ERROR(lw.mlp[2].Apply(gate, rows, delta, be));
    }
    norm_if(delta, lw.post_ffn_norm);
    for (uint64_t i = 0; i < x.size(); ++i) x[i] += delta[i];
  }
  // Final hidden states for the rows asked for (the head's input, normed
  // the same way).
  if (!plan.hidden_rows.empty()) {
    if (hidden == nullptr) {
      return Status::InvalidArgument("hidden rows asked for without a buffer for them");
    }
    hidden->assign(plan.hidden_rows.size() * d, 0.0f);
    for (uint64_t o = 0; o < plan.hidden_rows.size(); ++o) {
      rms_norm(Row(x, plan.hidden_rows[o], d), w.final_norm, Row(*hidden, o, d));
    }
  }
  // The output head only for the rows asked for.
  const uint64_t out_rows = plan.logit_rows.size();
  if (out_rows == 0) return std::vector<float>();
  if (!w.head) {
    return Status::InvalidArgument(
        "a sequence classifier has a score head, not an output head: it returns hidden states, "
        "not logits");
  }
  std::vector<float> hn(out_rows * d);
  for (uint64_t o = 0; o < out_rows; ++o) {
    rms_norm(Row(x, plan.logit_rows[o], d), w.final_norm, Row(hn, o, d));
  }
  std::vector<float> logits(out_rows * c.vocab_size);
  FOLIO_RETURN_IF_ERROR(w.head->Apply(hn, out_rows, logits, be));
  if (c.final_logit_softcap != 0) {
    // cap * tanh(logit / cap), in f32 and in that order (Gemma 2).
    const auto cap = static_cast<float>(c.final_logit_softcap);
    for (float& l : logits) l = std::tanh(l / cap) * cap;
  }
  for (uint64_t o = 0; o < out_rows; ++o) {
    for (float value : Row(logits, o, c.vocab_size)) {
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
  std::vector<uint64_t> positions, logit_rows, hidden_rows;
  LanePlan(uint64_t batch, uint64_t n, uint64_t start, LogitRows rows) {
    for (uint64_t b = 0; b < batch; ++b) {
      for (uint64_t i = 0; i < n; ++i) {
        positions.push_back(start + i);
        if (rows == LogitRows::kHidden) {
          hidden_rows.push_back(b * n + i);
        } else if (rows == LogitRows::kAll || i == n - 1) {
          logit_rows.push_back(b * n + i);
        }
      }
    }
  }
};

}  // namespace

Result<std::vector<float>> Decoder::Forward(std::span<const int32_t> tokens, uint64_t batch) const {
  FOLIO_RETURN_IF_ERROR(CheckTokens(tokens, batch));
  const uint64_t n = tokens.size() / batch;
  if (n > config_.max_positions) {
    return Status::OutOfRange(std::to_string(n) + " positions exceed max_positions " +
                              std::to_string(config_.max_positions));
  }
  const LanePlan lanes(batch, n, 0, config_.IsEncoder() ? LogitRows::kHidden : LogitRows::kAll);
  // Lane b's K and V of the current layer are page b of a pool of `batch`
  // pages of n slots ([batch, kv_heads, n, head_dim]), written straight
  // from the rows: no cache object is involved.
  const uint64_t hd = config_.head_dim(), kv_heads = config_.num_kv_heads;
  if (batch > INT32_MAX || n > INT32_MAX) {
    return Status::OutOfRange("forward pass of " + std::to_string(batch) + " lanes of " +
                              std::to_string(n) + " tokens exceeds int32 metadata");
  }
  std::vector<float> keys(batch * n * config_.kv_size()), values(keys.size());
  std::vector<int32_t> block_table(batch), context(batch, static_cast<int32_t>(n)),
      indptr(batch + 1);
  for (uint64_t b = 0; b < batch; ++b) {
    block_table[b] = static_cast<int32_t>(b);
    indptr[b + 1] = static_cast<int32_t>((b + 1) * n);
  }
  attention::PagedAttentionParams p;
  p.num_q_heads = config_.num_heads;
  p.scale = config_.AttentionScale();
  p.softcap = config_.attn_logit_softcap;
  p.causal = !config_.IsEncoder();
  const kv::PagedKvView pool{reinterpret_cast<const std::byte*>(keys.data()),
                             reinterpret_cast<const std::byte*>(values.data()),
                             DType::kF32,
                             batch,
                             kv_heads,
                             n,
                             hd};
  auto attend = [&](uint64_t layer, uint64_t window, std::span<const float> q,
                    std::span<const float> k, std::span<const float> v,
                    std::span<float> out) -> Status {
    p.window = window;
    SwapTokenAndHeadAxes(k, keys, batch, n, kv_heads, hd);
    SwapTokenAndHeadAxes(v, values, batch, n, kv_heads, hd);
    FOLIO_ASSIGN_OR_RETURN(
        std::unique_ptr<backend::AttentionPlan> plan,
        backend_->PlanAttention(p, q, out, pool, {block_table, 1, context, indptr}));
    return plan->Run(q, pool, out, weights_->layers[layer].sinks);
  };
  if (config_.IsEncoder()) {
    std::vector<float> hidden;
    FOLIO_RETURN_IF_ERROR(
        Run(RowPlan{tokens, lanes.positions, {}, lanes.hidden_rows, {}}, attend, &hidden).status());
    return hidden;
  }
  return Run(RowPlan{tokens, lanes.positions, lanes.logit_rows, {}, {}}, attend);
}

Result<std::vector<float>> Decoder::Step(kv::PagedKvCache& cache,
                                         std::span<const kv::BatchMetadata> metas,
                                         std::span<const int32_t> tokens,
                                         std::span<const LogitRows> rows, PagedAttentionPath* path,
                                         std::vector<float>* hidden,
                                         std::span<const int32_t> token_types) const {
  {
    const kv::PagedKvCacheConfig& kc = cache.config();
    if (kc.num_layers != config_.num_layers || kc.num_kv_heads != config_.num_kv_heads ||
        kc.head_dim != config_.head_dim()) {
      return Status::InvalidArgument(
          "paged cache shape (layers, kv heads, head dim) differs "
          "from the model's");
    }
    if (metas.size() != cache.num_groups()) {
      return Status::InvalidArgument("batch metadata for " + std::to_string(metas.size()) +
                                     " layer groups; the cache has " +
                                     std::to_string(cache.num_groups()));
    }
    const kv::BatchMetadata& meta = metas[0];
    for (const kv::BatchMetadata& m : metas) {
      if (m.batch != meta.batch || m.context_lens != meta.context_lens ||
          m.query_indptr != meta.query_indptr ||
          m.slot_mapping.size() != meta.slot_mapping.size()) {
        return Status::InvalidArgument("the layer groups' batch metadata disagree");
      }
    }
    for (uint64_t l = 0; l < config_.num_layers; ++l) {
      const uint64_t window = cache.groups()[cache.group_of(l)].window;
      if (window != 0 && window != config_.Layer(l).window) {
        return Status::InvalidArgument("layer " + std::to_string(l) + " has window " +
                                       std::to_string(config_.Layer(l).window) +
                                       "; its cache group keeps " + std::to_string(window));
      }
    }
    FOLIO_RETURN_IF_ERROR(CheckTokens(tokens, 1));
    if (!token_types.empty()) {
      if (!config_.IsEncoder() || token_types.size() != tokens.size()) {
        return Status::InvalidArgument("token types are an encoder's, one per token (got " +
                                       std::to_string(token_types.size()) + " for " +
                                       std::to_string(tokens.size()) + ")");
      }
      for (size_t i = 0; i < token_types.size(); ++i) {
        if (token_types[i] < 0 ||
            static_cast<uint64_t>(token_types[i]) >= config_.type_vocab_size) {
          return Status::OutOfRange("token " + std::to_string(i) + " has type " +
                                    std::to_string(token_types[i]) + " outside [0, " +
                                    std::to_string(config_.type_vocab_size) + ")");
        }
      }
    }
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
    std::vector<uint64_t> positions(tokens.size()), logit_rows, hidden_rows;
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
      const LogitRows want = rows[rows.size() == 1 ? 0 : s];
      if (config_.IsEncoder() && (last - first != context || want != LogitRows::kHidden)) {
        return Status::InvalidArgument("sequence " + std::to_string(s) +
                                       ": an encoder computes a whole prompt in one step (rows " +
                                       std::to_string(last - first) + ", context " +
                                       std::to_string(context) +
                                       ") and returns hidden states, not logits");
      }
      for (uint64_t r = first; r < last; ++r) {
        positions[r] = context - (last - first) + (r - first);
        if (want == LogitRows::kHidden) {
          hidden_rows.push_back(r);
        } else if (want == LogitRows::kAll || r + 1 == last) {
          logit_rows.push_back(r);
        }
      }
    }
    attention::PagedAttentionParams p;
    p.num_q_heads = config_.num_heads;
    p.scale = config_.AttentionScale();
    p.softcap = config_.attn_logit_softcap;
    p.causal = !config_.IsEncoder();
    // Every layer has its group's metadata and reuses the q/out buffers:
    // one plan per (group, window), made at the first layer with it, runs
    // them all.
    using PlanKey = std::pair<uint64_t, uint64_t>;
    std::vector<std::pair<PlanKey, std::unique_ptr<backend::AttentionPlan>>> plans;
    auto attend = [&](uint64_t layer, uint64_t window, std::span<const float> q,
                      std::span<const float> k, std::span<const float> v,
                      std::span<float> out) -> Status {
      const uint64_t group = cache.group_of(layer);
      const kv::BatchMetadata& m = metas[group];
      FOLIO_RETURN_IF_ERROR(backend_->WriteKv(cache, layer, m.slot_mapping, k, v)
                                .WithContext("layer " + std::to_string(layer)));
      p.window = window;
      p.sinks = weights_->layers[layer].sinks;  // plans take them per run
      if (path != nullptr) return path->Attend(p, q, cache, layer, m, out);
      const PlanKey key{group, window};
      auto it =
          std::find_if(plans.begin(), plans.end(), [&](const auto& e) { return e.first == key; });
      if (it == plans.end()) {
        FOLIO_ASSIGN_OR_RETURN(
            std::unique_ptr<backend::AttentionPlan> plan,
            backend_->PlanAttention(p, q, out, cache.View(layer), kv::ViewOf(m)));
        plans.emplace_back(key, std::move(plan));
        it = plans.end() - 1;
      }
      return it->second->Run(q, cache.View(layer), out, weights_->layers[layer].sinks);
    };
    return Run(RowPlan{tokens, positions, logit_rows, hidden_rows, token_types}, attend, hidden);
  }
}

Result<std::vector<float>> Decoder::Classify(std::span<const float> cls) const {
  const ModelConfig& c = config_;
  const Weights& w = *weights_;
  if (!w.classifier) {
    return Status::FailedPrecondition(
        "the model has no classification head (a *ForSequenceClassification checkpoint has one)");
  }
  if (cls.size() != c.hidden_size) {
    return Status::InvalidArgument("a hidden state of " + std::to_string(cls.size()) +
                                   " features; the model has " + std::to_string(c.hidden_size));
  }
  backend::Backend* const be = backend_.get();
  std::vector<float> pooled(cls.begin(), cls.end()), logits(c.num_labels);
  if (w.pooler) {  // BERT's; a decoder's score head reads the state as it is
    FOLIO_RETURN_IF_ERROR(w.pooler->Apply(cls, 1, pooled, be));
    AddRowBias(pooled, w.pooler_bias);
    for (float& v : pooled) v = std::tanh(v);
  }
  FOLIO_RETURN_IF_ERROR(w.classifier->Apply(pooled, 1, logits, be));
  AddRowBias(logits, w.classifier_bias);
  return logits;
}

}  // namespace folio::model
