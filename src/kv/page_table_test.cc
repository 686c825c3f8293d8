#include "folio/kv/page_table.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace folio::kv {
namespace {

// The worked example: lane 0, head 0, first feature of positions 0..6,
// through the table [2, 0, 3, 1] with pages of 3.
TEST(ScalarIndex, ReproducesWorkedExample) {
  const uint64_t table[] = {2, 0, 3, 1};
  const LaneShape shape{1, 2, 2};
  const uint64_t expected[] = {24, 26, 28, 0, 2, 4, 36};
  for (uint64_t p = 0; p < 7; ++p) {
    EXPECT_EQ(ScalarIndex(shape, 3, table[p / 3], p % 3, 0, 0, 0), expected[p]) << p;
  }
}

// Every (b, h, pos, f) of a paged layout lands on a distinct slot inside the
// array, and contiguous indices are the dense [B, H, C, d] formula.
TEST(ScalarIndex, IsABijectionOntoLiveSlots) {
  const LaneShape shape{2, 3, 5};
  struct Layout {
    uint64_t page_size;
    std::vector<uint64_t> table;
  };
  for (const Layout& layout : {Layout{3, {1, 2, 0}}, Layout{7, {0}}}) {
    std::set<uint64_t> seen;
    const uint64_t size = layout.table.size() * layout.page_size * 2 * 3 * 5;
    const uint64_t p_size = layout.page_size;
    for (uint64_t b = 0; b < 2; ++b)
      for (uint64_t h = 0; h < 3; ++h)
        for (uint64_t p = 0; p < 7; ++p)
          for (uint64_t f = 0; f < 5; ++f) {
            const uint64_t i =
                ScalarIndex(shape, p_size, layout.table[p / p_size], p % p_size, b, h, f);
            EXPECT_LT(i, size);
            EXPECT_TRUE(seen.insert(i).second);
          }
  }
  EXPECT_EQ(ScalarIndex(shape, 7, 0, 4, 1, 2, 3), ((1 * 3 + 2) * 7 + 4) * 5 + 3);
}

TEST(AccountPayload, WorkedExampleAtSevenPositions) {
  auto a = *AccountPayload(12, 3, {1, 2, 2}, DType::kF64, 7);
  EXPECT_EQ(a.reserved_pages, 4u);
  EXPECT_EQ(a.active_pages, 3u);
  EXPECT_EQ(a.allocated_scalar_slots, 96u);
  EXPECT_EQ(a.allocated_payload_bytes, 768u);
  EXPECT_EQ(a.live_scalar_slots, 56u);
  EXPECT_EQ(a.live_payload_bytes, 448u);
  EXPECT_EQ(a.unused_scalar_slots, 40u);
  EXPECT_EQ(a.unused_payload_bytes, 320u);
  EXPECT_EQ(a.active_page_tail_scalar_slots, 16u);
  EXPECT_EQ(a.active_page_tail_payload_bytes, 128u);
  EXPECT_EQ(a.inactive_page_scalar_slots, 24u);
  EXPECT_EQ(a.inactive_page_payload_bytes, 192u);
}

TEST(AccountPayload, ConservesSlotsAtEveryLength) {
  for (uint64_t n = 0; n <= 10; ++n) {
    auto a = *AccountPayload(10, 3, {2, 2, 3}, DType::kF32, n);
    EXPECT_EQ(a.live_scalar_slots + a.unused_scalar_slots, a.allocated_scalar_slots);
    EXPECT_EQ(a.unused_scalar_slots,
              a.active_page_tail_scalar_slots + a.inactive_page_scalar_slots);
    EXPECT_EQ(a.allocated_payload_bytes, a.allocated_scalar_slots * 4);
    // At a page boundary there is no tail.
    if (n % 3 == 0) {
      EXPECT_EQ(a.active_page_tail_scalar_slots, 0u) << n;
    }
  }
  auto empty = *AccountPayload(10, 3, {1, 2, 2}, DType::kF64, 0);
  EXPECT_EQ(empty.reserved_pages, 4u);
  EXPECT_EQ(empty.active_pages, 0u);
  EXPECT_EQ(empty.inactive_page_scalar_slots, 96u);
}

TEST(AccountPayload, RejectsLengthBeyondCapacity) {
  auto r = AccountPayload(12, 3, {1, 2, 2}, DType::kF64, 13);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kOutOfRange);
}

TEST(AccountPayload, RejectsOverflow) {
  auto r = AccountPayload(1ULL << 40, 1ULL << 20, {1ULL << 10, 8, 128}, DType::kF64, 0);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kOutOfRange);
  // ceil(2^64-1 / 2^63) = 2 pages of 2^63 slots = 2^64: overflows.
  EXPECT_EQ(AccountPayload(~0ULL, 1ULL << 63, {1, 1, 1}, DType::kF64, 0).error().code(),
            StatusCode::kOutOfRange);
}

TEST(AccountPayload, RejectsZeroCapacityOrPageSize) {
  EXPECT_EQ(AccountPayload(0, 3, {1, 2, 2}, DType::kF64, 0).error().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(AccountPayload(12, 0, {1, 2, 2}, DType::kF64, 0).error().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace folio::kv
