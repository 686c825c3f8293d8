// The decoder forward pass in float32 on a compute backend: one
// continuous-batching step over sequences of the engine's paged KV cache
// (Step), or the cache-free full-prefix pass (Forward), the reference that
// cached steps must equal bit for bit.
//
// The float64 forward pass that checks the worked example is not here: it
// lives with the tools (tools/reference/float64_decoder.h), on the same
// paged cache.
#ifndef FOLIO_MODEL_DECODER_H_
#define FOLIO_MODEL_DECODER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "folio/attention/paged_attention.h"
#include "folio/backend/backend.h"
#include "folio/core/aligned_buffer.h"
#include "folio/core/dtype.h"
#include "folio/core/status.h"
#include "folio/core/thread_pool.h"
#include "folio/kv/paged_kv_cache.h"
#include "folio/model/model.h"

namespace folio::model {

// Which rows' logits a step returns: every new position's, or only each
// lane's last (what generation needs; skips the output head elsewhere). A
// kHidden sequence gets no logits: every row's final hidden state (after
// the final norm, the output head's input) goes to Step's `hidden`
// instead, for pooled embeddings.
enum class LogitRows : uint8_t { kAll, kLast, kHidden };

// How a paged-cache step's attention reads K/V. Decoder::Step's own path
// reads the pages straight through the block tables (the backend's paged
// attention); a benchmark plugs a baseline in here (the dense gather of
// bench/engine_baselines.h). An implementation writes attention of q
// ([rows, num_heads * head_dim]) over the cache's layer into out, and must
// give the same bits as the direct path.
class PagedAttentionPath {
 public:
  virtual ~PagedAttentionPath() = default;
  virtual Status Attend(const attention::PagedAttentionParams& params, std::span<const float> q,
                        const kv::PagedKvCache& cache, uint64_t layer,
                        const kv::BatchMetadata& meta, std::span<float> out) = 0;
};

// Runs every op on a compute backend (backend/backend.h): weights are
// uploaded once as stored (f32, f16, bf16 and Q8_0; the kernels widen them
// as they read; f64 weights are rounded to f32 once), and each paged step
// plans its attention once and runs the plan for every layer. The cpu
// backend's results never depend on its pool's size.
class Decoder {
 public:
  // The cpu backend over `pool`.
  explicit Decoder(const Model& model, ThreadPool* pool = nullptr);
  // Any backend (not null).
  Decoder(const Model& model, std::shared_ptr<backend::Backend> backend);
  ~Decoder();
  Decoder(Decoder&&) noexcept;

  const ModelConfig& config() const { return config_; }
  const std::string& model_id() const { return model_id_; }

  // The full-prefix forward pass with no cache: tokens [batch, n] at
  // positions 0..n-1, logits [batch, n, vocab] — for an encoder
  // (ModelConfig::IsEncoder), which has no output head, the final hidden
  // states [batch, n, hidden] instead. Errors: tokens.size() not a
  // multiple of the batch, a token id outside the vocabulary, n beyond
  // max_positions, a non-finite logit.
  Result<std::vector<float>> Forward(std::span<const int32_t> tokens, uint64_t batch) const;

  // One continuous-batching step over sequences of a PagedKvCache. `meta` comes from
  // cache.BuildBatchMetadata with the step's plan: sequence s contributes rows [query_indptr[s],
  // query_indptr[s + 1]) of `tokens`, at logical positions n_s - L_s + i, n_s its context
  // (kv::PagedBatchView::context_len). K/V rows are written through meta.slot_mapping and
  // attention reads the pages through the block tables, never a dense copy. Returns the logits of
  // each sequence's last row ([batch, vocab]; kLast) or of every row (kAll). The caller commits or
  // aborts the cache's plan. `path` replaces the direct page reads (null: direct).
  Result<std::vector<float>> Step(kv::PagedKvCache& cache, const kv::BatchMetadata& meta,
                                  std::span<const int32_t> tokens,
                                  LogitRows rows = LogitRows::kLast,
                                  PagedAttentionPath* path = nullptr) const {
    return Step(cache, meta, tokens, std::span<const LogitRows>(&rows, 1), path);
  }
  // The same with each sequence's own choice of logit rows: rows holds one
  // entry per sequence (or one for all). Logits come back sequence by
  // sequence, [sum over sequences of 1 (kLast), L_s (kAll) or 0 (kHidden),
  // vocab]; the kHidden sequences' rows, sequence by sequence, go to
  // *hidden ([sum of their L_s, hidden_size]; needed when one is kHidden).
  // A cache of one layer group only (else InvalidArgument).
  Result<std::vector<float>> Step(kv::PagedKvCache& cache, const kv::BatchMetadata& meta,
                                  std::span<const int32_t> tokens, std::span<const LogitRows> rows,
                                  PagedAttentionPath* path = nullptr,
                                  std::vector<float>* hidden = nullptr) const {
    return Step(cache, std::span<const kv::BatchMetadata>(&meta, 1), tokens, rows, path, hidden);
  }
  // An encoder's sequences are bidirectional: each must bring every row of
  // its context in the step (its context = its rows; else
  // InvalidArgument), and take kHidden rows.
  // The same over a cache of any number of layer groups: metas[g] is
  // cache.BuildBatchMetadata(seqs, plan, g), one per group, and layer l
  // reads and writes its group's pages (kv::PagedKvCache, "Layer groups").
  // token_types: an encoder's token-type id per row ([tokens.size()], each
  // < type_vocab_size), for text pairs; empty: every row is type 0.
  Result<std::vector<float>> Step(kv::PagedKvCache& cache, std::span<const kv::BatchMetadata> metas,
                                  std::span<const int32_t> tokens, std::span<const LogitRows> rows,
                                  PagedAttentionPath* path = nullptr,
                                  std::vector<float>* hidden = nullptr,
                                  std::span<const int32_t> token_types = {}) const;

  // A sequence-classification head (ModelConfig::num_labels > 0): its
  // num_labels logits from a pooled final hidden state ([hidden]) — an
  // encoder's first position: classifier(tanh(pooler h)), as
  // BertForSequenceClassification computes them; a decoder's last
  // position: score h, as Qwen3ForSequenceClassification does.
  // FailedPrecondition for a model without a head; InvalidArgument for a
  // row of the wrong width.
  Result<std::vector<float>> Classify(std::span<const float> cls) const;

 private:
  struct Weights;  // the model's weights uploaded to the backend
  // The rows of one forward pass: token ids, their logical positions, and
  // which rows need logits.
  struct RowPlan {
    std::span<const int32_t> tokens;        // [rows]
    std::span<const uint64_t> positions;    // [rows]
    std::span<const uint64_t> logit_rows;   // indices into [rows], ascending
    std::span<const uint64_t> hidden_rows;  // the same, for final hidden states
    std::span<const int32_t> token_types;   // [rows], or empty: all type 0 (encoders)
  };
  Status CheckTokens(std::span<const int32_t> tokens, uint64_t batch) const;
  // Runs every layer over the plan's rows and returns the logits of
  // plan.logit_rows, [logit_rows, vocab], and the final hidden states of
  // plan.hidden_rows into *hidden. attend(layer, window, q, k, v,
  // out) stores the layer's new K/V rows (token-major [rows, kv_heads *
  // head_dim]) and writes attention of q ([rows, num_heads * head_dim]),
  // within the layer's sliding window (0 = global), into out.
  template <typename AttendFn>
  Result<std::vector<float>> Run(const RowPlan& plan, AttendFn&& attend,
                                 std::vector<float>* hidden = nullptr) const;
  // The BERT block's Run (bert_block.cc): every row's final hidden state
  // into *hidden; logit rows are refused (no output head).
  using Attend =
      std::function<Status(uint64_t layer, uint64_t window, backend::DeviceSpan<const float> q,
                           backend::DeviceSpan<const float> k, backend::DeviceSpan<const float> v,
                           backend::DeviceSpan<float> out)>;
  Result<std::vector<float>> RunBert(const RowPlan& plan, const Attend& attend,
                                     std::vector<float>* hidden) const;
  // A layer's mixture of experts on rows h into out (decoder.cc).
  Status Experts(const Weights& w, uint64_t layer, backend::DeviceSpan<const float> h,
                 uint64_t rows, backend::DeviceSpan<float> out) const;
  // The final hidden states of `rows` of x ([rows of the plan, hidden]),
  // normed by the final norm when `norm`, into a new buffer [rows, hidden].
  backend::DeviceBuffer<float> SelectRows(backend::DeviceSpan<const float> x,
                                          std::span<const uint64_t> rows, bool norm) const;

  std::shared_ptr<backend::Backend> backend_;
  ModelConfig config_;
  std::string model_id_;
  std::unique_ptr<const Weights> weights_;
};

}  // namespace folio::model

#endif  // FOLIO_MODEL_DECODER_H_
