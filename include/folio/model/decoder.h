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
#include <span>
#include <string>
#include <vector>

#include "folio/core/dtype.h"
#include "folio/core/thread_pool.h"
#include "folio/core/status.h"
#include "folio/kv/layer_cache.h"
#include "folio/kv/page_table.h"
#include "folio/model/model.h"

namespace folio::model {

class DecoderCache {
 public:
  // Errors: layout capacity != model max_positions; zero batch; invalid KV
  // dtype.
  static Result<DecoderCache> Create(const Model& model,
                                     const kv::PageTableLayout& layout,
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

// Computes in T (double for the worked example, float in production) with
// the model's weights rounded once to T. With T = float and f32/bf16/f16 K/V,
// attention is the paged SIMD kernel (attention/paged_attention.h), spread
// over `pool` when given; results do not depend on the pool's size.
template <typename T>
class Decoder {
 public:
  explicit Decoder(const Model& model, ThreadPool* pool = nullptr);

  const ModelConfig& config() const { return config_; }
  const std::string& model_id() const { return model_id_; }

  // Appends tokens [batch, n] (n >= 1) and returns logits [batch, n, vocab].
  // Errors: a cache bound to another model; tokens.size() not a multiple of
  // the batch; a token id outside the vocabulary; length + n > capacity;
  // a non-finite K/V row or logit. The cache is unchanged on any error.
  Result<std::vector<T>> Prefill(DecoderCache& cache,
                                 std::span<const int32_t> tokens) const;
  // One token per lane, [batch]; returns logits [batch, vocab].
  Result<std::vector<T>> Decode(DecoderCache& cache,
                                std::span<const int32_t> tokens) const;

  // The full-prefix forward pass with no cache: tokens [batch, n] at
  // positions 0..n-1, logits [batch, n, vocab].
  Result<std::vector<T>> Forward(std::span<const int32_t> tokens,
                                 uint64_t batch) const;

 private:
  struct StepShape {
    uint64_t batch;
    uint64_t n;      // new positions per lane
    uint64_t start;  // logical position of each lane's first new token
  };
  Status CheckTokens(std::span<const int32_t> tokens, uint64_t batch) const;
  // Runs every layer over x [batch * n, hidden] and returns the logits.
  // `store(layer, keys, values)` places the layer's new K/V rows
  // ([batch, kv_heads, n, head_dim]) and returns views of the whole context.
  template <typename StoreFn>
  Result<std::vector<T>> Run(std::span<const int32_t> tokens, StepShape shape,
                             StoreFn&& store) const;

  ThreadPool* pool_;
  ModelConfig config_;
  std::string model_id_;
  ModelWeights<T> weights_;
};

extern template class Decoder<float>;
extern template class Decoder<double>;

}  // namespace folio::model

#endif  // FOLIO_MODEL_DECODER_H_
