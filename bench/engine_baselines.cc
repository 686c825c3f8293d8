#include "bench/engine_baselines.h"

#include <algorithm>
#include <vector>

#include "bench/gather.h"

namespace folio::bench {

Status GatherAttention::Attend(const attention::PagedAttentionParams& params,
                               std::span<const float> q, const kv::PagedKvCache& cache,
                               uint64_t layer, const kv::BatchMetadata& meta,
                               std::span<float> out) {
  ThreadPool* const pool = pool_;
  const kv::PagedKvCacheConfig& kc = cache.config();
  const uint64_t batch = meta.batch;
  FOLIO_ASSIGN_OR_RETURN(const std::vector<uint64_t> contexts,
                         kv::BatchContexts(kv::ViewOf(meta), kc.page_size));
  uint64_t max_context = 0;
  for (const uint64_t n : contexts) max_context = std::max(max_context, n);
  const size_t bytes = batch * kc.num_kv_heads * max_context * kc.head_dim * DTypeSize(kc.dtype);
  if (keys_.size() < bytes) {
    keys_ = AlignedBuffer(bytes);
    values_ = AlignedBuffer(bytes);
  }
  kv_copy_bytes_ += GatherToDense(cache.View(layer), kv::ViewOf(meta), max_context, keys_.data(),
                                  values_.data(), pool);
  // Sequence b's whole context in page b, as long as the longest context
  // (no page for an empty one).
  std::vector<int32_t> dense_indptr{0}, dense_pages, last_page_len(batch);
  for (uint64_t b = 0; b < batch; ++b) {
    last_page_len[b] = static_cast<int32_t>(contexts[b]);
    if (contexts[b] > 0) dense_pages.push_back(static_cast<int32_t>(b));
    dense_indptr.push_back(static_cast<int32_t>(dense_pages.size()));
  }
  const kv::PagedKvView dense{keys_.data(),    values_.data(), kc.dtype,   batch,
                              kc.num_kv_heads, max_context,    kc.head_dim};
  return attention::PagedAttention(
      params, q, dense, {dense_indptr, dense_pages, last_page_len, meta.query_indptr}, out, pool);
}

void MaxLengthReservation::OnAdmit(const engine::Sequence& s) {
  reserved_pages_ += Reservation(s);
  peak_reserved_pages_ = std::max(peak_reserved_pages_, reserved_pages_);
}

}  // namespace folio::bench
