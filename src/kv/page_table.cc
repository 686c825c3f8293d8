#include "folio/kv/page_table.h"

#include <string>

#include "folio/core/checked_math.h"

namespace folio::kv {

Result<PayloadAccounting> AccountPayload(uint64_t capacity, uint64_t page_size,
                                         const LaneShape& shape, DType dtype,
                                         uint64_t live_length) {
  if (capacity == 0 || page_size == 0) {
    return Status::InvalidArgument("capacity and page_size must be > 0");
  }
  if (live_length > capacity) {
    return Status::OutOfRange("live length " + std::to_string(live_length) + " exceeds capacity " +
                              std::to_string(capacity));
  }
  if (shape.batch == 0 || shape.num_kv_heads == 0 || shape.head_dim == 0) {
    return Status::InvalidArgument("batch, num_kv_heads and head_dim must be > 0");
  }
  const uint64_t page = page_size;
  const uint64_t num_pages = CeilDiv(capacity, page);
  const auto per_position = CheckedProduct({2, shape.batch, shape.num_kv_heads, shape.head_dim});
  const auto reserved = CheckedMul(num_pages, page);
  if (!reserved) {
    return Status::OutOfRange("capacity " + std::to_string(capacity) + " rounded up to pages of " +
                              std::to_string(page) + " overflows uint64");
  }
  const uint64_t reserved_positions = *reserved;
  const uint64_t active_pages = CeilDiv(live_length, page);
  // Every other count is <= allocated, so one checked product bounds them all;
  // the byte counts are bounded by allocated bytes.
  const auto allocated =
      per_position ? CheckedMul(reserved_positions, *per_position) : std::nullopt;
  const auto allocated_bytes = allocated ? CheckedMul(*allocated, DTypeSize(dtype)) : std::nullopt;
  if (!allocated_bytes) {
    return Status::OutOfRange("payload of " + std::to_string(reserved_positions) +
                              " positions overflows uint64 bytes");
  }
  const uint64_t u = *per_position;
  const uint64_t e = DTypeSize(dtype);
  PayloadAccounting a;
  a.live_length = live_length;
  a.reserved_pages = num_pages;
  a.active_pages = active_pages;
  a.element_bytes = e;
  a.allocated_scalar_slots = *allocated;
  a.live_scalar_slots = live_length * u;
  a.unused_scalar_slots = a.allocated_scalar_slots - a.live_scalar_slots;
  a.active_page_tail_scalar_slots = (active_pages * page - live_length) * u;
  a.inactive_page_scalar_slots = (num_pages - active_pages) * page * u;
  a.allocated_payload_bytes = a.allocated_scalar_slots * e;
  a.live_payload_bytes = a.live_scalar_slots * e;
  a.unused_payload_bytes = a.unused_scalar_slots * e;
  a.active_page_tail_payload_bytes = a.active_page_tail_scalar_slots * e;
  a.inactive_page_payload_bytes = a.inactive_page_scalar_slots * e;
  FOLIO_CHECK(a.unused_scalar_slots ==
              a.active_page_tail_scalar_slots + a.inactive_page_scalar_slots);
  return a;
}

}  // namespace folio::kv
