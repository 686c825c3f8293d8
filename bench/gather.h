// The dense copy a paged engine makes when its attention kernel cannot read
// pages: every sequence's live K/V rows, gathered into
//
//   dense [batch, num_kv_heads, max_context, head_dim]   (the pool's dtype)
//
// Sequence b's rows land at [b, h, 0 .. n_b), n_b its context
// (PagedBatchView::context_len); the rest of its rows, and those of pages a
// window released, are left as they were. Kept as the baseline that direct paged
// attention is measured against (folio bench attention, folio bench serve),
// never on the engine's direct path.
#ifndef FOLIO_BENCH_GATHER_H_
#define FOLIO_BENCH_GATHER_H_

#include <cstddef>
#include <cstdint>

#include "folio/core/thread_pool.h"
#include "folio/kv/paged_view.h"

namespace folio::bench {

// Returns the bytes copied, K and V together. dense_keys and dense_values
// hold batch * num_kv_heads * max_context * head_dim elements; every
// context is <= max_context (checked) and the batch is valid
// (attention::ValidatePagedAttention).
// Spread over pool when given.
uint64_t GatherToDense(const kv::PagedKvView& src, const kv::PagedBatchView& batch,
                       uint64_t max_context, std::byte* dense_keys, std::byte* dense_values,
                       ThreadPool* pool);

}  // namespace folio::bench

#endif  // FOLIO_BENCH_GATHER_H_
