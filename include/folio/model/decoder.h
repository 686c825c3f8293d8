// The decoder forward pass, with a KV cache (prefill, decode) or without
// (the full-prefix reference).
//
// DecoderCache holds one LayerCache per layer, all with the same page table,
// and is bound to the model id it was built for. A step is atomic: every
// layer's new K/V rows are staged, the logits are computed and checked, and
// only then are all layers committed; any failure — bad tokens, capacity,
// non-finite values in any layer or in the logits — discards every staged
// row and leaves every layer exactly as it was.
//
// Batch lanes run in lockstep: tokens are [batch, n] row-major, lane b's
// row i sits at logical position length + i, and logits come back as
// [batch, n, vocab].
#ifndef FOLIO_MODEL_DECODER_H_
#define FOLIO_MODEL_DECODER_H_

#include <cstdint>
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
#include "folio/kv/layer_cache.h"
#include "folio/kv/page_table.h"
#include "folio/kv/paged_kv_cache.h"
#include "folio/model/model.h"

namespace folio::model {

class DecoderCache {
 public:
  // Errors: layout capacity beyond the model's max_positions (a shorter
  // cache is fine: real models train for far longer contexts than a run
  // needs); zero batch; invalid KV dtype.
  static Result<DecoderCache> Create(const Model& model, const kv::PageTableLayout& layout,
                                     uint64_t batch, DType kv_dtype);

  const std::string& model_id() const { return model_id_; }
  uint64_t batch() const { return layers_.front().shape().batch; }
  uint64_t capacity() const { return layers_.front().layout().capacity(); }
  uint64_t length() const { return layers_.front().length(); }
  DType kv_dtype() const { return layers_.front().dtype(); }
  size_t num_layers() const { return layers_.size(); }
  const kv::LayerCache& layer(size_t i) const { return layers_.at(i); }
  kv::LayerCache& layer(size_t i) { return layers_.at(i); }

  // Empties every layer; keeps buffers and tables.
  void Reset();

 private:
  DecoderCache(std::string model_id, std::vector<kv::LayerCache> layers)
      : model_id_(std::move(model_id)), layers_(std::move(layers)) {}
  std::string model_id_;
  std::vector<kv::LayerCache> layers_;
};

// Which rows' logits a step returns: every new position's, or only each
// lane's last (what generation needs; skips the output head elsewhere).
enum class LogitRows : uint8_t { kAll, kLast };

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

// Computes in T (double for the worked example, float in production).
// T = double widens every weight to float64 once and runs the scalar ops.
// T = float runs every op on a compute backend (backend/backend.h): weights
// are uploaded once as stored (f32, f16, bf16 and Q8_0; the kernels widen
// them as they read; f64 weights are rounded to f32 once), and each paged
// step plans its attention once and runs the plan for every layer. The
// cpu backend's results never depend on its pool's size.
template <typename T>
class Decoder {
 public:
  // T = float: the cpu backend over `pool`.
  explicit Decoder(const Model& model, ThreadPool* pool = nullptr);
  // T = float: any backend (not null). T = double ignores it.
  Decoder(const Model& model, std::shared_ptr<backend::Backend> backend);
  ~Decoder();
  Decoder(Decoder&&) noexcept;

  const ModelConfig& config() const { return config_; }
  const std::string& model_id() const { return model_id_; }

  // Appends tokens [batch, n] (n >= 1) and returns logits [batch, n, vocab]
  // (kAll) or [batch, vocab] (kLast). Errors: a cache bound to another model;
  // tokens.size() not a multiple of the batch; a token id outside the
  // vocabulary; length + n > capacity; a non-finite K/V row or logit. The
  // cache is unchanged on any error.
  Result<std::vector<T>> Prefill(DecoderCache& cache, std::span<const int32_t> tokens,
                                 LogitRows rows = LogitRows::kAll) const;
  // One token per lane, [batch]; returns logits [batch, vocab].
  Result<std::vector<T>> Decode(DecoderCache& cache, std::span<const int32_t> tokens) const;

  // The full-prefix forward pass with no cache: tokens [batch, n] at
  // positions 0..n-1, logits [batch, n, vocab].
  Result<std::vector<T>> Forward(std::span<const int32_t> tokens, uint64_t batch) const;

  // One continuous-batching step over sequences of a PagedKvCache (float
  // only). `meta` comes from cache.BuildBatchMetadata with the step's plan:
  // sequence s contributes rows [query_indptr[s], query_indptr[s + 1]) of
  // `tokens`, at logical positions context_lens[s] - L_s + i. K/V rows are
  // written through meta.slot_mapping and attention reads the pages through
  // the block tables, never a dense copy. Returns the logits of each
  // sequence's last row ([batch, vocab]; kLast) or of every row (kAll).
  // The caller commits or aborts the cache's plan. `path` replaces the
  // direct page reads (null: direct).
  Result<std::vector<T>> Step(kv::PagedKvCache& cache, const kv::BatchMetadata& meta,
                              std::span<const int32_t> tokens, LogitRows rows = LogitRows::kLast,
                              PagedAttentionPath* path = nullptr) const {
    return Step(cache, meta, tokens, std::span<const LogitRows>(&rows, 1), path);
  }
  // The same with each sequence's own choice of logit rows: rows holds one
  // entry per sequence (or one for all). Logits come back sequence by
  // sequence, [sum over sequences of 1 (kLast) or L_s (kAll), vocab].
  Result<std::vector<T>> Step(kv::PagedKvCache& cache, const kv::BatchMetadata& meta,
                              std::span<const int32_t> tokens, std::span<const LogitRows> rows,
                              PagedAttentionPath* path = nullptr) const;

 private:
  struct Weights;  // the model's weights prepared for compute type T
  // The rows of one forward pass: token ids, their logical positions, and
  // which rows need logits.
  struct RowPlan {
    std::span<const int32_t> tokens;       // [rows]
    std::span<const uint64_t> positions;   // [rows]
    std::span<const uint64_t> logit_rows;  // indices into [rows], ascending
  };
  Status CheckTokens(std::span<const int32_t> tokens, uint64_t batch) const;
  // Runs every layer over the plan's rows and returns the logits of
  // plan.logit_rows, [logit_rows, vocab]. attend(layer, q, k, v, out) stores
  // the layer's new K/V rows (token-major [rows, kv_heads * head_dim]) and
  // writes attention of q ([rows, num_heads * head_dim]) into out.
  template <typename AttendFn>
  Result<std::vector<T>> Run(const RowPlan& plan, AttendFn&& attend) const;

  std::shared_ptr<backend::Backend> backend_;  // float only
  ModelConfig config_;
  std::string model_id_;
  std::unique_ptr<const Weights> weights_;
};

extern template class Decoder<float>;
extern template class Decoder<double>;

}  // namespace folio::model

#endif  // FOLIO_MODEL_DECODER_H_
