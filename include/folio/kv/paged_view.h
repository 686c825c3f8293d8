// Plain views that paged-attention kernels read: a pool of K/V pages and the
// per-step batch metadata that says which pages each sequence owns. Kernels
// take these by value and never reach into whoever allocated the pages.
#ifndef FOLIO_KV_PAGED_VIEW_H_
#define FOLIO_KV_PAGED_VIEW_H_

#include <cstdint>
#include <span>
#include <vector>

#include "folio/core/dtype.h"
#include "folio/kv/page_table.h"

namespace folio::kv {

// Which of a layer's two pools: keys or values.
enum class KvRole : uint8_t { kKey = 0, kValue = 1 };

// One layer's K and V page pools. Page `p` of head `h` is a contiguous
// [page_size, head_dim] block: the element (page, h, offset, f) sits at
// ScalarIndex(LaneShape{1, num_kv_heads, head_dim}, page_size, page, offset,
// 0, h, f) — the same formula as the fixed layout with one batch lane.
struct PagedKvView {
  const std::byte* key_pages;    // [num_pages, num_kv_heads, page_size, head_dim]
  const std::byte* value_pages;  // [num_pages, num_kv_heads, page_size, head_dim]
  DType dtype;                   // f32, bf16, f16, i8, f8e4m3 (f64 for reference use)
  uint64_t num_pages;
  uint64_t num_kv_heads;
  uint64_t page_size;
  uint64_t head_dim;
  // Quantized dtypes (i8, f8e4m3): [num_pages, num_kv_heads, page_size] f32
  // scales, one per row; element (page, h, offset, f) means its code times
  // the scale at (page * num_kv_heads + h) * page_size + offset. Null for
  // float dtypes.
  const float* key_scales = nullptr;
  const float* value_scales = nullptr;

  LaneShape lane_shape() const { return {1, num_kv_heads, head_dim}; }
};

// Which pages each sequence of a batch reads, in two equivalent forms.
// Padded: block_table [batch, max_pages] (entries past a row's live pages
// are -1) with context_lens [batch]. CSR (FlashInfer's paged_kv_t): indptr
// [batch + 1], indices [indptr[batch]] and last_page_len [batch].
// slot_mapping [num_new_tokens] gives, for every token written this step,
// its physical slot page * page_size + offset.
struct BatchMetadata {
  uint64_t batch = 0;
  uint64_t max_pages = 0;
  std::vector<int32_t> block_table;    // [batch, max_pages], -1 padded
  std::vector<int32_t> context_lens;   // [batch], after this step's tokens
  std::vector<int32_t> indptr;         // [batch + 1]
  std::vector<int32_t> indices;        // [indptr[batch]]
  std::vector<int32_t> last_page_len;  // [batch], in [1, page_size] (0 if empty)
  std::vector<int32_t> query_indptr;   // [batch + 1], rows of new tokens
  std::vector<int64_t> slot_mapping;   // [query_indptr[batch]]
};

// The attention-side subset of BatchMetadata as spans, so callers that do
// not own vectors (Python, tests) can pass their own arrays.
struct PagedBatchView {
  std::span<const int32_t> block_table;  // [batch, max_pages]
  uint64_t max_pages;
  std::span<const int32_t> context_lens;  // [batch]
  std::span<const int32_t> query_indptr;  // [batch + 1]
};

inline PagedBatchView ViewOf(const BatchMetadata& m) {
  return {m.block_table, m.max_pages, m.context_lens, m.query_indptr};
}

}  // namespace folio::kv

#endif  // FOLIO_KV_PAGED_VIEW_H_
