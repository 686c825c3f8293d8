// Page-table addressing: the one translation from a token's logical
// position to where its key/value rows live.
//
//   logical position p -> logical page p / P, offset p % P
//                      -> physical page table[p / P]
//                      -> scalar index (ScalarIndex below)
//
// PageTableLayout is the fixed-capacity form: every one of the
// N = ceil(C / P) physical pages is reserved up front and the table is a
// permutation of 0..N-1, checked at construction. A contiguous cache is the
// same thing with one page of C slots, so contiguous and paged storage share
// every line of address arithmetic. The dynamic block pool (kv/block_pool.h,
// later) fills tables differently and reuses ScalarIndex.
#ifndef FOLIO_KV_PAGE_TABLE_H_
#define FOLIO_KV_PAGE_TABLE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "folio/core/dtype.h"
#include "folio/core/status.h"

namespace folio::kv {

// Where one logical position lives.
struct Address {
  uint64_t logical_position;
  uint64_t logical_page;
  uint64_t physical_page;
  uint64_t offset_in_page;
  friend bool operator==(const Address&, const Address&) = default;
};

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
// is in range (the layout and cache constructors check the total fits).
constexpr uint64_t ScalarIndex(const LaneShape& s, uint64_t page_size, uint64_t physical_page,
                               uint64_t offset_in_page, uint64_t b, uint64_t h, uint64_t f) {
  return (((physical_page * s.batch + b) * s.num_kv_heads + h) * page_size + offset_in_page) *
             s.head_dim +
         f;
}

class PageTableLayout {
 public:
  // Validates: capacity > 0, page_size > 0, ceil(capacity / page_size) * page_size
  // does not overflow, table has exactly that many pages, every entry is a
  // page id < N, and no physical page appears twice (no aliasing).
  static Result<PageTableLayout> Create(uint64_t capacity, uint64_t page_size,
                                        std::vector<uint64_t> table);
  // Identity table 0..N-1.
  static Result<PageTableLayout> Identity(uint64_t capacity, uint64_t page_size);
  // One page of `capacity` slots: the dense [B, H_kv, C, d] layout.
  static Result<PageTableLayout> Contiguous(uint64_t capacity);

  uint64_t capacity() const { return capacity_; }
  uint64_t page_size() const { return page_size_; }
  uint64_t num_pages() const { return table_.size(); }
  // Positions backed by physical storage: num_pages * page_size >= capacity.
  uint64_t reserved_positions() const { return num_pages() * page_size_; }
  std::span<const uint64_t> table() const { return table_; }

  // nullopt for pos >= capacity, even where a rounded-up page has a slot.
  std::optional<Address> Resolve(uint64_t pos) const;

  // Scalar index of (b, h, pos, f); pos must be < capacity (checked).
  uint64_t ScalarIndexOf(const LaneShape& s, uint64_t pos, uint64_t b, uint64_t h,
                         uint64_t f) const;

 private:
  PageTableLayout(uint64_t capacity, uint64_t page_size, std::vector<uint64_t> table)
      : capacity_(capacity), page_size_(page_size), table_(std::move(table)) {}

  uint64_t capacity_;
  uint64_t page_size_;
  std::vector<uint64_t> table_;  // [num_pages] logical page -> physical page
};

// Payload accounting for one layer, K and V together, at live length n.
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

// Errors: n > capacity, a zero lane dimension, or any product overflowing
// uint64.
Result<PayloadAccounting> AccountPayload(const PageTableLayout& layout, const LaneShape& shape,
                                         DType dtype, uint64_t live_length);

}  // namespace folio::kv

#endif  // FOLIO_KV_PAGE_TABLE_H_
