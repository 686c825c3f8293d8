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

using backend::DeviceBuffer;
using backend::DeviceSpan;
using decoder_internal::AddRowBias;
using decoder_internal::ApplyLinears;

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

// A mixture layer on rows h [rows, hidden] into out [rows, hidden]: the
// routed experts (Backend::Experts, by the router's logits), then the
// shared expert's output (Qwen2-MoE: times sigmoid of its gate; dots1:
// as it is), added.
Status Decoder::Experts(const Weights& w, uint64_t layer, DeviceSpan<const float> h, uint64_t rows,
                        DeviceSpan<float> out) const {
  const Weights::Layer& lw = w.layers[layer];
  const ModelConfig& c = config_;
  backend::Backend* const be = backend_.get();
  const uint64_t d = c.hidden_size;
  {
    const DeviceBuffer<float> logits = be->Allocate<float>(rows * c.num_experts);
    FOLIO_RETURN_IF_ERROR(lw.router[0].Apply(h, rows, logits, be));
    AddRowBias(logits, lw.router_bias, be);
    backend::Mixture mixture;
    mixture.router = c.Router();
    mixture.selection_bias = lw.selection_bias;
    mixture.experts = lw.experts;
    if (c.swiglu_limit != 0) {
      mixture.swiglu_alpha = static_cast<float>(c.swiglu_alpha);
      mixture.swiglu_limit = static_cast<float>(c.swiglu_limit);
    }
    FOLIO_RETURN_IF_ERROR(be->Experts(mixture, logits, h, rows, out));
  }
  if (lw.shared_expert.empty()) return Status::Ok();
  const uint64_t fs = c.SharedExpertFfnSize();
  const DeviceBuffer<float> gs = be->Allocate<float>(rows * fs),
                            us = be->Allocate<float>(rows * fs);
  const DeviceBuffer<float> ys = be->Allocate<float>(rows * d);
  FOLIO_RETURN_IF_ERROR(
      ApplyLinears<2>({&lw.shared_expert[0], &lw.shared_expert[1]}, h, rows, {gs, us}, be));
  be->SwiGlu(gs, us);
  FOLIO_RETURN_IF_ERROR(lw.shared_expert[2].Apply(gs, rows, ys, be));
  if (lw.shared_expert.size() == 3) {  // ungated (dots1): added as it is
    be->Add(out, ys);
    return Status::Ok();
  }
  const DeviceBuffer<float> gate = be->Allocate<float>(rows);
  FOLIO_RETURN_IF_ERROR(lw.shared_expert[3].Apply(h, rows, gate, be));
  // transformers: F.sigmoid(gate) * shared, added after the experts.
  be->Sigmoid(gate);
  be->AddScaledRows(out, ys, gate);
  return Status::Ok();
}

DeviceBuffer<float> Decoder::SelectRows(DeviceSpan<const float> x, std::span<const uint64_t> rows,
                                        bool norm) const {
  backend::Backend* const be = backend_.get();
  const uint64_t d = config_.hidden_size;
  std::vector<int32_t> idx(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) idx[i] = static_cast<int32_t>(rows[i]);
  DeviceBuffer<float> out = be->Allocate<float>(rows.size() * d);
  be->GatherRows(x, be->ToDevice<int32_t>(idx), out);
  if (norm) be->RmsNorm(out, weights_->final_norm, static_cast<float>(config_.norm_eps), out);
  return out;
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
  if (!plan.hidden_rows.empty() && hidden == nullptr) {
    return Status::InvalidArgument("hidden rows asked for without a buffer for them");
  }
  if (!plan.logit_rows.empty() && !w.head) {
    return Status::InvalidArgument(
        "a sequence classifier has a score head, not an output head: it returns hidden states, "
        "not logits");
  }
  // Every op runs on the backend, on buffers in its memory: what crosses
  // per step is the tokens, RoPE angles and logit rows going up and the
  // logits (or hidden states) coming down.
  backend::Backend* const be = backend_.get();

  // RoPE angles per row and table (half = the rotated pairs of a head), shared by the layers of
  // that table. Computed in double and rounded once, so this decoder and the float64 reference
  // rotate by the same angles.
  std::vector<DeviceBuffer<float>> cos(w.ropes.size()), sin(w.ropes.size());
  {
    std::vector<float> cos_t(rows * half), sin_t(rows * half);
    for (size_t t = 0; t < w.ropes.size(); ++t) {
      const std::vector<double>& inv_freq = w.ropes[t];
      const double scale = w.rope_scales[t];
      for (uint64_t r = 0; r < rows; ++r) {
        for (uint64_t p = 0; p < half; ++p) {
          const double theta = static_cast<double>(plan.positions[r]) * inv_freq[p];
          cos_t[r * half + p] = static_cast<float>(std::cos(theta) * scale);
          sin_t[r * half + p] = static_cast<float>(std::sin(theta) * scale);
        }
      }
      cos[t] = be->ToDevice<float>(cos_t);
      sin[t] = be->ToDevice<float>(sin_t);
    }
  }

  const DeviceBuffer<float> x = be->Allocate<float>(rows * d);   // residual stream [rows, hidden]
  w.embedding.Embed(be->ToDevice<int32_t>(plan.tokens), x, be);  // CheckTokens bounded the ids
  if (c.scale_embedding) {
    // Gemma: times sqrt(hidden) rounded to f32, as its embedding module does.
    be->Scale(x, static_cast<float>(std::sqrt(static_cast<double>(d))));
  }
  const DeviceBuffer<float> h = be->Allocate<float>(rows * d), q = be->Allocate<float>(rows * qs);
  const DeviceBuffer<float> k = be->Allocate<float>(rows * kvs),
                            v = be->Allocate<float>(rows * kvs);
  const DeviceBuffer<float> attn = be->Allocate<float>(rows * qs);
  const DeviceBuffer<float> delta = be->Allocate<float>(rows * d);
  const DeviceBuffer<float> gate = be->Allocate<float>(rows * c.ffn_size);
  const DeviceBuffer<float> up = be->Allocate<float>(rows * c.ffn_size);
  // An optional norm in place (q/k norms; the sandwich layout's post norms).
  auto norm_if = [&](DeviceSpan<float> y, const DeviceBuffer<float>& gain) {
    if (!gain.empty()) be->RmsNorm(y, gain, eps, y);
  };
  for (uint64_t layer = 0; layer < c.num_layers; ++layer) {
    const auto& lw = w.layers[layer];
    be->RmsNorm(x, lw.attn_norm, eps, h);
    FOLIO_RETURN_IF_ERROR(ApplyLinears<3>({&*lw.wq, &*lw.wk, &*lw.wv}, h, rows, {q, k, v}, be));
    AddRowBias(q, lw.bq, be);
    AddRowBias(k, lw.bk, be);
    AddRowBias(v, lw.bv, be);
    norm_if(q, lw.q_norm);
    norm_if(k, lw.k_norm);
    be->Rope(q, rows, hd, cos[lw.rope], sin[lw.rope], neox);
    be->Rope(k, rows, hd, cos[lw.rope], sin[lw.rope], neox);
    FOLIO_RETURN_IF_ERROR(attend(layer, lw.window, DeviceSpan<const float>(q),
                                 DeviceSpan<const float>(k), DeviceSpan<const float>(v),
                                 DeviceSpan<float>(attn)));
    FOLIO_RETURN_IF_ERROR(lw.wo->Apply(attn, rows, delta, be));
    AddRowBias(delta, lw.bo, be);
    norm_if(delta, lw.post_attn_norm);
    be->Add(x, delta);
    be->RmsNorm(x, lw.ffn_norm, eps, h);
    if (c.IsMoeLayer(layer)) {
      FOLIO_RETURN_IF_ERROR(Experts(w, layer, h, rows, delta));
    } else {
      FOLIO_RETURN_IF_ERROR(ApplyLinears<2>({&lw.mlp[0], &lw.mlp[1]}, h, rows, {gate, up}, be));
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
    be->Add(x, delta);
  }
  // Final hidden states for the rows asked for (the head's input, normed
  // the same way).
  if (!plan.hidden_rows.empty()) {
    *hidden = be->ToHost<float>(SelectRows(x, plan.hidden_rows, /*norm=*/true));
  }
  // The output head only for the rows asked for.
  const uint64_t out_rows = plan.logit_rows.size();
  if (out_rows == 0) return std::vector<float>();
  const DeviceBuffer<float> hn = SelectRows(x, plan.logit_rows, /*norm=*/true);
  const DeviceBuffer<float> logits = be->Allocate<float>(out_rows * c.vocab_size);
  FOLIO_RETURN_IF_ERROR(w.head->Apply(hn, out_rows, logits, be));
  if (c.final_logit_softcap != 0) {
    // cap * tanh(logit / cap), in f32 and in that order (Gemma 2).
    be->SoftCap(logits, static_cast<float>(c.final_logit_softcap));
  }
  if (const std::optional<uint64_t> bad = be->FindNonFinite(logits)) {
    const uint64_t row = plan.logit_rows[*bad / c.vocab_size];
    return Status::InvalidArgument("non-finite logit at row " + std::to_string(row) +
                                   ", position " + std::to_string(plan.positions[row]));
  }
  return be->ToHost<float>(logits);
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
  if (batch * n > INT32_MAX) {
    return Status::OutOfRange("forward pass of " + std::to_string(batch) + " lanes of " +
                              std::to_string(n) + " tokens exceeds int32 metadata");
  }
  // Lane b's K and V of the current layer are page b of a one-layer pool
  // of `batch` pages of n slots, which every layer overwrites: no sequence
  // is involved, only a page each lane holds.
  kv::PagedKvCacheConfig kc;
  kc.num_kv_heads = config_.num_kv_heads;
  kc.head_dim = config_.head_dim();
  kc.page_size = n;
  kc.num_pages = batch;
  FOLIO_ASSIGN_OR_RETURN(kv::PagedKvCache pool, backend_->CreateKvPool(kc));
  FOLIO_ASSIGN_OR_RETURN(std::optional<std::vector<kv::PageId>> pages, pool.HoldNewPages(batch));
  FOLIO_CHECK(pages.has_value());  // a new pool has every page free
  // Lane b owns one page, holding all n of its tokens.
  std::vector<int32_t> pages_indptr(batch + 1), lane_pages(batch),
      last_page_len(batch, static_cast<int32_t>(n)), indptr(batch + 1);
  std::vector<int64_t> slots(batch * n);
  for (uint64_t b = 0; b < batch; ++b) {
    pages_indptr[b + 1] = static_cast<int32_t>(b + 1);
    lane_pages[b] = (*pages)[b];
    indptr[b + 1] = static_cast<int32_t>((b + 1) * n);
    for (uint64_t i = 0; i < n; ++i) {
      slots[b * n + i] = static_cast<int64_t>(static_cast<uint64_t>((*pages)[b]) * n + i);
    }
  }
  attention::PagedAttentionParams p;
  p.num_q_heads = config_.num_heads;
  p.scale = config_.AttentionScale();
  p.softcap = config_.attn_logit_softcap;
  p.causal = !config_.IsEncoder();
  auto attend = [&](uint64_t layer, uint64_t window, DeviceSpan<const float> q,
                    DeviceSpan<const float> k, DeviceSpan<const float> v,
                    DeviceSpan<float> out) -> Status {
    p.window = window;
    FOLIO_RETURN_IF_ERROR(
        backend_->WriteKv(pool, 0, slots, k, v).WithContext("layer " + std::to_string(layer)));
    FOLIO_ASSIGN_OR_RETURN(
        std::unique_ptr<backend::AttentionPlan> plan,
        backend_->PlanAttention(p, q, out, pool.View(0),
                                {pages_indptr, lane_pages, last_page_len, indptr}));
    return plan->Run(q, pool.View(0), out, weights_->layers[layer].sinks);
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
      if (m.batch != meta.batch || m.last_page_len != meta.last_page_len ||
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
    FOLIO_ASSIGN_OR_RETURN(const std::vector<uint64_t> contexts,
                           kv::BatchContexts(kv::ViewOf(meta), kc.page_size));
    if (contexts.size() != batch) {
      return Status::InvalidArgument("last_page_len has " + std::to_string(contexts.size()) +
                                     " entries; the batch has " + std::to_string(batch));
    }
    std::vector<uint64_t> positions(tokens.size()), logit_rows, hidden_rows;
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
    auto attend = [&](uint64_t layer, uint64_t window, DeviceSpan<const float> q,
                      DeviceSpan<const float> k, DeviceSpan<const float> v,
                      DeviceSpan<float> out) -> Status {
      const uint64_t group = cache.group_of(layer);
      const kv::BatchMetadata& m = metas[group];
      FOLIO_RETURN_IF_ERROR(backend_->WriteKv(cache, layer, m.slot_mapping, k, v)
                                .WithContext("layer " + std::to_string(layer)));
      p.window = window;
      if (path != nullptr) {  // a host-only baseline: sees the buffers in place
        const std::vector<float> sinks =
            backend_->ToHost<float>(weights_->layers[layer].sinks.span());
        p.sinks = sinks;
        const Status attended =
            path->Attend(p, backend_->HostView(q), cache, layer, m, backend_->HostView(out));
        p.sinks = {};
        return attended;
      }
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
  DeviceBuffer<float> pooled = be->ToDevice<float>(cls);
  const DeviceBuffer<float> logits = be->Allocate<float>(c.num_labels);
  if (w.pooler) {  // BERT's; a decoder's score head reads the state as it is
    const DeviceBuffer<float> state = std::move(pooled);
    pooled = be->Allocate<float>(c.hidden_size);
    FOLIO_RETURN_IF_ERROR(w.pooler->Apply(state, 1, pooled, be));
    AddRowBias(pooled, w.pooler_bias, be);
    be->SoftCap(pooled, 1.0f);  // tanh: tanh(x / 1) * 1 rounds as tanh(x)
  }
  FOLIO_RETURN_IF_ERROR(w.classifier->Apply(pooled, 1, logits, be));
  AddRowBias(logits, w.classifier_bias, be);
  return be->ToHost<float>(logits);
}

}  // namespace folio::model
