// Page-table addressing: the one translation from a token's logical
// position to where its key/value rows live.
//
//   logical position p -> logical page p / P, offset p % P
//                      -> physical page table[p / P]
//                      -> scalar index (ScalarIndex below)
//
// The engine's paged cache (kv/paged_kv_cache.h) fills block tables from its
// block pool and addresses its pages with ScalarIndex (one batch lane). A
// contiguous cache is the same thing with one page of C slots, so contiguous
// and paged storage share every line of address arithmetic.
#ifndef FOLIO_KV_PAGE_TABLE_H_
#define FOLIO_KV_PAGE_TABLE_H_

#include <cstdint>

#include "folio/core/dtype.h"
#include "folio/core/status.h"

namespace folio::kv {

// The per-position geometry of a K or V array: batch lanes, shared K/V heads,
// features per head. One position holds batch * num_kv_heads * head_dim
// scalars in each of K and V.
struct LaneShape {
  uint64_t batch = 1;
  uint64_t num_kv_heads = 1;
  uint64_t head_dim = 1;
};

// Scalar index of (lane b, head h, feature f) at `offset` inside
// `physical_page`, for arrays shaped [N, B, H_kv, P, d]:
//   (((page * B + b) * H_kv + h) * P + offset) * d + f.
// The only place this formula is written. Callers guarantee every argument
// is in range (the cache's constructor checks the total fits).
constexpr uint64_t ScalarIndex(const LaneShape& s, uint64_t page_size, uint64_t physical_page,
                               uint64_t offset_in_page, uint64_t b, uint64_t h, uint64_t f) {
  return (((physical_page * s.batch + b) * s.num_kv_heads + h) * page_size + offset_in_page) *
             s.head_dim +
         f;
}

// Payload accounting for one layer, K and V together, at live length n, of a
// cache that reserves every one of its N = ceil(C / P) pages up front (C =
// capacity, P = page size; a contiguous cache is P = C, one page).
// U = 2 * B * H_kv * d scalar slots per position.
struct PayloadAccounting {
  uint64_t live_length = 0;
  uint64_t reserved_pages = 0;
  uint64_t active_pages = 0;  // ceil(n / P)
  uint64_t element_bytes = 0;
  uint64_t allocated_scalar_slots = 0;         // reserved_pages * P * U
  uint64_t live_scalar_slots = 0;              // n * U
  uint64_t unused_scalar_slots = 0;            // allocated - live = tail + inactive
  uint64_t active_page_tail_scalar_slots = 0;  // (active_pages * P - n) * U
  uint64_t inactive_page_scalar_slots = 0;     // (reserved - active) * P * U
  uint64_t allocated_payload_bytes = 0;
  uint64_t live_payload_bytes = 0;
  uint64_t unused_payload_bytes = 0;
  uint64_t active_page_tail_payload_bytes = 0;
  uint64_t inactive_page_payload_bytes = 0;
};

// Errors: capacity or page_size 0, n > capacity, a zero lane dimension, or
// any product overflowing uint64.
Result<PayloadAccounting> AccountPayload(uint64_t capacity, uint64_t page_size,
                                         const LaneShape& shape, DType dtype, uint64_t live_length);

}  // namespace folio::kv

#endif  // FOLIO_KV_PAGE_TABLE_H_
