#include "bench/gather.h"

#include <algorithm>
#include <cstring>

#include "folio/core/checked_math.h"
#include "folio/core/status.h"

namespace folio::bench {

uint64_t GatherToDense(const kv::PagedKvView& src, const kv::PagedBatchView& batch,
                       uint64_t max_context, std::byte* dense_keys, std::byte* dense_values,
                       ThreadPool* pool) {
  const uint64_t num_seqs = batch.context_lens.size();
  const uint64_t heads = src.num_kv_heads, page = src.page_size;
  const uint64_t row_bytes = src.head_dim * DTypeSize(src.dtype);
  uint64_t rows_total = 0;
  for (uint64_t b = 0; b < num_seqs; ++b) {
    const auto n = static_cast<uint64_t>(batch.context_lens[b]);
    FOLIO_CHECK(n <= max_context && CeilDiv(n, page) <= batch.max_pages, "sequence ", b,
                " context ", n);
    rows_total += n;
  }
  // One task unit is one (sequence, logical page): per K/V head it copies
  // the page's live rows, one contiguous [rows, head_dim] block.
  const uint64_t units = num_seqs * batch.max_pages;
  auto copy = [&](uint64_t lo, uint64_t hi) {
    for (uint64_t unit = lo; unit < hi; ++unit) {
      const uint64_t b = unit / batch.max_pages, logical = unit % batch.max_pages;
      const auto n = static_cast<uint64_t>(batch.context_lens[b]);
      if (logical * page >= n) continue;
      const auto phys = static_cast<uint64_t>(batch.block_table[unit]);
      FOLIO_CHECK(phys < src.num_pages, "page ", phys);
      const uint64_t rows = std::min(page, n - logical * page);
      for (uint64_t h = 0; h < heads; ++h) {
        const uint64_t from = (phys * heads + h) * page * row_bytes;
        const uint64_t to = ((b * heads + h) * max_context + logical * page) * row_bytes;
        std::memcpy(dense_keys + to, src.key_pages + from, rows * row_bytes);
        std::memcpy(dense_values + to, src.value_pages + from, rows * row_bytes);
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
