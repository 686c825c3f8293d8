// Plain views that paged-attention kernels read: a pool of K/V pages and the
// per-step batch metadata that says which pages each sequence owns. Kernels
// take these by value and never reach into whoever allocated the pages. The
// two views together are FlashInfer's paged_kv_t: strides for the pool, one
// CSR form for the batch, so a device kernel and the CPU kernel read the
// same description.
#ifndef FOLIO_KV_PAGED_VIEW_H_
#define FOLIO_KV_PAGED_VIEW_H_

#include <cstdint>
#include <span>
#include <vector>

#include "folio/core/dtype.h"
#include "folio/core/status.h"
#include "folio/kv/page_table.h"

namespace folio::kv {

// Which of a layer's two pools: keys or values.
enum class KvRole : uint8_t { kKey = 0, kValue = 1 };

// One layer's K and V page pools. Row (page, h, slot) -- the head_dim
// features of K/V head h at token slot `slot` of page `page` -- starts at
// element
//   page * stride_page + h * stride_h + slot * stride_n
// of key_pages (and of value_pages, which has the same layout); its
// features are contiguous. Strides count elements, not bytes. The dense
// constructor fills them for [num_pages, num_kv_heads, page_size, head_dim]
// (stride_page = num_kv_heads * page_size * head_dim, stride_h = page_size *
// head_dim, stride_n = head_dim: ScalarIndex with one batch lane), the
// layout PagedKvCache stores; another
// order ([num_pages, page_size, num_kv_heads, head_dim]) or padding between
// pages is the same view with other strides. Readers accept any strides
// whose axes nest without overlap (ValidatePagedAttention says exactly).
struct PagedKvView {
  const std::byte* key_pages = nullptr;    // rows addressed by the strides
  const std::byte* value_pages = nullptr;  // the same layout as key_pages
  DType dtype = DType::kF32;               // f32, bf16, f16, i8, f8e4m3 (f64 for reference use)
  uint64_t num_pages = 0;
  uint64_t num_kv_heads = 0;
  uint64_t page_size = 0;
  uint64_t head_dim = 0;
  uint64_t stride_page = 0;  // elements from page p to page p + 1
  uint64_t stride_h = 0;     // from head h to head h + 1
  uint64_t stride_n = 0;     // from slot n to slot n + 1
  // Quantized dtypes (i8, f8e4m3): one f32 scale per row, the pool without
  // its feature axis: row (page, h, slot) means its codes times
  // scales[RowIndex(page, h, slot) / head_dim]. For the dense layout that is
  // [num_pages, num_kv_heads, page_size]; any layout with scales needs
  // strides that are multiples of head_dim. Null for float dtypes.
  const float* key_scales = nullptr;
  const float* value_scales = nullptr;

  PagedKvView() = default;
  // The dense [num_pages, num_kv_heads, page_size, head_dim] pools.
  PagedKvView(const std::byte* keys, const std::byte* values, DType type, uint64_t pages,
              uint64_t heads, uint64_t slots, uint64_t dim, const float* kscales = nullptr,
              const float* vscales = nullptr)
      : key_pages(keys),
        value_pages(values),
        dtype(type),
        num_pages(pages),
        num_kv_heads(heads),
        page_size(slots),
        head_dim(dim),
        stride_page(heads * slots * dim),
        stride_h(slots * dim),
        stride_n(dim),
        key_scales(kscales),
        value_scales(vscales) {}

  // The first element of row (page, h, slot).
  uint64_t RowIndex(uint64_t page, uint64_t h, uint64_t slot) const {
    return page * stride_page + h * stride_h + slot * stride_n;
  }
  // Where row (page, h, slot)'s scale sits in key_scales / value_scales.
  uint64_t ScaleIndex(uint64_t page, uint64_t h, uint64_t slot) const {
    return RowIndex(page, h, slot) / head_dim;
  }
};

// An `indices` entry of a windowed layer group for a page wholly before the
// window of the sequence's first query row: the cache gave it back to its
// pool, and no reader may touch it.
inline constexpr int32_t kReleasedPage = -1;

// Which pages each sequence of a batch reads, once per step and layer
// group, in CSR form (FlashInfer's paged_kv_t): sequence s owns the
// logical pages indices[indptr[s] .. indptr[s + 1]), in order, and its last
// page holds last_page_len[s] tokens, so its context is
//   n = (pages - 1) * page_size + last_page_len[s]   (0 without pages;
//   PagedBatchView::context_len), this step's tokens included: the one
// source of a sequence's context, for the kernels and the decoder's
// positions alike. slot_mapping [num_new_tokens] gives, for every token
// written this step, its physical slot page * page_size + offset.
struct BatchMetadata {
  uint64_t batch = 0;
  std::vector<int32_t> indptr;         // [batch + 1]
  std::vector<int32_t> indices;        // [indptr[batch]], kReleasedPage allowed
  std::vector<int32_t> last_page_len;  // [batch], in [1, page_size] (0 if empty)
  std::vector<int32_t> query_indptr;   // [batch + 1], rows of new tokens
  std::vector<int64_t> slot_mapping;   // [query_indptr[batch]]
};

// The attention-side subset of BatchMetadata as spans, so callers that do
// not own vectors (Python, tests) can pass their own arrays. Sequence s's
// new query rows are [query_indptr[s], query_indptr[s + 1]), the last of
// its context.
struct PagedBatchView {
  std::span<const int32_t> indptr;         // [batch + 1]
  std::span<const int32_t> indices;        // [indptr[batch]]
  std::span<const int32_t> last_page_len;  // [batch]
  std::span<const int32_t> query_indptr;   // [batch + 1]

  uint64_t batch() const { return last_page_len.size(); }
  // Sequence s's pages in logical order. Needs a validated view.
  std::span<const int32_t> pages(uint64_t s) const {
    return indices.subspan(static_cast<size_t>(indptr[s]),
                           static_cast<size_t>(indptr[s + 1] - indptr[s]));
  }
  // Sequence s's keys: (pages - 1) * page_size + last_page_len[s], 0
  // without pages. Needs a validated view.
  uint64_t context_len(uint64_t s, uint64_t page_size) const {
    const auto pages = static_cast<uint64_t>(indptr[s + 1] - indptr[s]);
    return pages == 0 ? 0 : (pages - 1) * page_size + static_cast<uint64_t>(last_page_len[s]);
  }
};

inline PagedBatchView ViewOf(const BatchMetadata& m) {
  return {m.indptr, m.indices, m.last_page_len, m.query_indptr};
}

// Every sequence's context (PagedBatchView::context_len), after checking
// what that reads: indptr of batch + 1 entries, from 0, never decreasing,
// ending at indices.size(); last_page_len in [1, page_size] for a sequence
// with pages and 0 without; a context that fits 63 bits. InvalidArgument
// naming the field otherwise. The kernels' validation and the decoders'
// positions both start here, so the two cannot read different contexts.
Result<std::vector<uint64_t>> BatchContexts(const PagedBatchView& b, uint64_t page_size);

}  // namespace folio::kv

#endif  // FOLIO_KV_PAGED_VIEW_H_
