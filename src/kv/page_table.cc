#include "folio/kv/page_table.h"

#include <numeric>
#include <string>

#include "folio/core/checked_math.h"

namespace folio::kv {

Result<PageTableLayout> PageTableLayout::Create(uint64_t capacity, uint64_t page_size,
                                                std::vector<uint64_t> table) {
  if (capacity == 0) {
    return Status::InvalidArgument("capacity must be > 0 (got 0)");
  }
  if (page_size == 0) {
    return Status::InvalidArgument("page_size must be > 0 (got 0)");
  }
  const uint64_t num_pages = CeilDiv(capacity, page_size);
  if (!CheckedMul(num_pages, page_size)) {
    return Status::OutOfRange("capacity " + std::to_string(capacity) + " rounded up to pages of " +
                              std::to_string(page_size) + " overflows uint64");
  }
  if (table.size() != num_pages) {
    return Status::InvalidArgument("page table has " + std::to_string(table.size()) +
                                   " entries; capacity " + std::to_string(capacity) +
                                   " with page_size " + std::to_string(page_size) + " needs " +
                                   std::to_string(num_pages));
  }
  std::vector<uint64_t> seen_at(num_pages, UINT64_MAX);
  for (uint64_t i = 0; i < num_pages; ++i) {
    const uint64_t phys = table[i];
    if (phys >= num_pages) {
      return Status::OutOfRange("page table entry " + std::to_string(i) + " is physical page " +
                                std::to_string(phys) + ", but there are only " +
                                std::to_string(num_pages) + " pages");
    }
    if (seen_at[phys] != UINT64_MAX) {
      return Status::InvalidArgument("page table aliases physical page " + std::to_string(phys) +
                                     " (entries " + std::to_string(seen_at[phys]) + " and " +
                                     std::to_string(i) + ")");
    }
    seen_at[phys] = i;
  }
  return PageTableLayout(capacity, page_size, std::move(table));
}

Result<PageTableLayout> PageTableLayout::Identity(uint64_t capacity, uint64_t page_size) {
  if (page_size == 0) {
    return Status::InvalidArgument("page_size must be > 0 (got 0)");
  }
  std::vector<uint64_t> table(CeilDiv(capacity, page_size));
  std::iota(table.begin(), table.end(), uint64_t{0});
  return Create(capacity, page_size, std::move(table));
}

Result<PageTableLayout> PageTableLayout::Contiguous(uint64_t capacity) {
  return Create(capacity, capacity, {0});
}

std::optional<Address> PageTableLayout::Resolve(uint64_t pos) const {
  if (pos >= capacity_) return std::nullopt;
  const uint64_t page = pos / page_size_;
  return Address{pos, page, table_[page], pos % page_size_};
}

uint64_t PageTableLayout::ScalarIndexOf(const LaneShape& s, uint64_t pos, uint64_t b, uint64_t h,
                                        uint64_t f) const {
  FOLIO_CHECK(pos < capacity_, "pos=", pos, " capacity=", capacity_);
  return ScalarIndex(s, page_size_, table_[pos / page_size_], pos % page_size_, b, h, f);
}

Result<PayloadAccounting> AccountPayload(const PageTableLayout& layout, const LaneShape& shape,
                                         DType dtype, uint64_t live_length) {
  if (live_length > layout.capacity()) {
    return Status::OutOfRange("live length " + std::to_string(live_length) + " exceeds capacity " +
                              std::to_string(layout.capacity()));
  }
  if (shape.batch == 0 || shape.num_kv_heads == 0 || shape.head_dim == 0) {
    return Status::InvalidArgument("batch, num_kv_heads and head_dim must be > 0");
  }
  const uint64_t page = layout.page_size();
  const auto per_position = CheckedProduct({2, shape.batch, shape.num_kv_heads, shape.head_dim});
  const uint64_t reserved_positions = layout.reserved_positions();
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
  a.reserved_pages = layout.num_pages();
  a.active_pages = active_pages;
  a.element_bytes = e;
  a.allocated_scalar_slots = *allocated;
  a.live_scalar_slots = live_length * u;
  a.unused_scalar_slots = a.allocated_scalar_slots - a.live_scalar_slots;
  a.active_page_tail_scalar_slots = (active_pages * page - live_length) * u;
  a.inactive_page_scalar_slots = (layout.num_pages() - active_pages) * page * u;
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
