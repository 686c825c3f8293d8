#include "bench/gather.h"

#include <algorithm>
#include <cstring>

#include "folio/core/checked_math.h"
#include "folio/core/status.h"

namespace folio::bench {

uint64_t GatherToDense(const kv::PagedKvView& src, const kv::PagedBatchView& batch,
                       uint64_t max_context, std::byte* dense_keys, std::byte* dense_values,
                       ThreadPool* pool) {
  const uint64_t num_seqs = batch.batch();
  const uint64_t heads = src.num_kv_heads, page = src.page_size;
  const size_t es = DTypeSize(src.dtype);
  const uint64_t row_bytes = src.head_dim * es;
  FOLIO_CHECK(batch.indptr.size() == num_seqs + 1, "indptr of ", batch.indptr.size());
  uint64_t rows_total = 0;
  for (uint64_t b = 0; b < num_seqs; ++b) {
    const uint64_t n = batch.context_len(b, page);
    FOLIO_CHECK(n <= max_context, "sequence ", b, " context ", n);
    rows_total += n;
  }
  // One task unit is one (sequence, logical page), an entry of indices: per
  // K/V head it copies the page's live rows, one [rows, head_dim] block when
  // the pool's slots are contiguous rows.
  const auto units = static_cast<uint64_t>(batch.indptr[num_seqs]);
  auto copy = [&](uint64_t lo, uint64_t hi) {
    for (uint64_t unit = lo; unit < hi; ++unit) {
      const auto b = static_cast<uint64_t>(
          std::upper_bound(batch.indptr.begin(), batch.indptr.end(), static_cast<int32_t>(unit)) -
          batch.indptr.begin() - 1);
      const uint64_t logical = unit - static_cast<uint64_t>(batch.indptr[b]);
      const uint64_t n = batch.context_len(b, page);
      const int32_t entry = batch.indices[unit];
      if (entry == kv::kReleasedPage) continue;  // before the window: never read
      const auto phys = static_cast<uint64_t>(entry);
      FOLIO_CHECK(phys < src.num_pages, "page ", phys);
      const uint64_t rows = std::min(page, n - logical * page);
      for (uint64_t h = 0; h < heads; ++h) {
        const uint64_t to = ((b * heads + h) * max_context + logical * page) * row_bytes;
        if (src.stride_n == src.head_dim) {
          const uint64_t from = src.RowIndex(phys, h, 0) * es;
          std::memcpy(dense_keys + to, src.key_pages + from, rows * row_bytes);
          std::memcpy(dense_values + to, src.value_pages + from, rows * row_bytes);
          continue;
        }
        for (uint64_t r = 0; r < rows; ++r) {
          const uint64_t from = src.RowIndex(phys, h, r) * es;
          std::memcpy(dense_keys + to + r * row_bytes, src.key_pages + from, row_bytes);
          std::memcpy(dense_values + to + r * row_bytes, src.value_pages + from, row_bytes);
        }
      }
    }
  };
  const uint64_t threads = pool != nullptr ? pool->num_threads() : 1;
  const uint64_t parts = std::max<uint64_t>(1, std::min(units, 8 * threads));
  const uint64_t step = units == 0 ? 1 : CeilDiv(units, parts);
  if (pool == nullptr || parts == 1) {
    copy(0, units);
  } else {
    pool->ParallelFor(CeilDiv(units, step),
                      [&](size_t i) { copy(i * step, std::min(units, (i + 1) * step)); });
  }
  return 2 * rows_total * heads * row_bytes;
}

}  // namespace folio::bench
