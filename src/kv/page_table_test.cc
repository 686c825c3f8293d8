#include "folio/kv/page_table.h"

#include <gtest/gtest.h>

#include <set>

namespace folio::kv {
namespace {

TEST(PageTableLayout, RejectsZeroCapacity) {
  auto r = PageTableLayout::Create(0, 3, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find("capacity"), std::string::npos);
}

TEST(PageTableLayout, RejectsZeroPageSize) {
  auto r = PageTableLayout::Create(12, 0, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("page_size"), std::string::npos);
}

TEST(PageTableLayout, RejectsWrongTableLength) {
  auto r = PageTableLayout::Create(12, 3, {0, 1, 2});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("needs 4"), std::string::npos);
}

TEST(PageTableLayout, RejectsPageOutOfRange) {
  auto r = PageTableLayout::Create(12, 3, {0, 1, 2, 4});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kOutOfRange);
  EXPECT_NE(r.error().message().find("physical page 4"), std::string::npos);
}

TEST(PageTableLayout, RejectsAliasing) {
  auto r = PageTableLayout::Create(12, 3, {2, 0, 2, 1});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("aliases physical page 2 (entries 0 and 2)"),
            std::string::npos);
}

TEST(PageTableLayout, RejectsRoundedCapacityOverflow) {
  // ceil(2^64-1 / 2^63) = 2 pages of 2^63 slots = 2^64: overflows.
  auto r = PageTableLayout::Create(~0ULL, 1ULL << 63, {0, 1});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kOutOfRange);
}

TEST(PageTableLayout, ResolvesThroughTheTable) {
  auto layout = *PageTableLayout::Create(12, 3, {2, 0, 3, 1});
  EXPECT_EQ(layout.num_pages(), 4u);
  EXPECT_EQ(*layout.Resolve(0), (Address{0, 0, 2, 0}));
  EXPECT_EQ(*layout.Resolve(4), (Address{4, 1, 0, 1}));
  EXPECT_EQ(*layout.Resolve(11), (Address{11, 3, 1, 2}));
  EXPECT_FALSE(layout.Resolve(12).has_value());
}

TEST(PageTableLayout, RoundedSlotsAreNotAddressable) {
  auto layout = *PageTableLayout::Create(10, 3, {0, 1, 2, 3});
  EXPECT_EQ(layout.reserved_positions(), 12u);
  EXPECT_TRUE(layout.Resolve(9).has_value());
  EXPECT_FALSE(layout.Resolve(10).has_value());
  EXPECT_FALSE(layout.Resolve(11).has_value());
}

// The worked example: lane 0, head 0, first feature of positions 0..6.
TEST(ScalarIndex, ReproducesWorkedExample) {
  auto layout = *PageTableLayout::Create(12, 3, {2, 0, 3, 1});
  const LaneShape shape{1, 2, 2};
  const uint64_t expected[] = {24, 26, 28, 0, 2, 4, 36};
  for (uint64_t p = 0; p < 7; ++p) {
    EXPECT_EQ(layout.ScalarIndexOf(shape, p, 0, 0, 0), expected[p]) << p;
  }
}

// Every (b, h, pos, f) of a paged layout lands on a distinct slot inside the
// array, and contiguous indices are the dense [B, H, C, d] formula.
TEST(ScalarIndex, IsABijectionOntoLiveSlots) {
  const LaneShape shape{2, 3, 5};
  for (auto layout : {*PageTableLayout::Create(7, 3, {1, 2, 0}), *PageTableLayout::Contiguous(7)}) {
    std::set<uint64_t> seen;
    const uint64_t size = layout.reserved_positions() * 2 * 3 * 5;
    for (uint64_t b = 0; b < 2; ++b)
      for (uint64_t h = 0; h < 3; ++h)
        for (uint64_t p = 0; p < 7; ++p)
          for (uint64_t f = 0; f < 5; ++f) {
            const uint64_t i = layout.ScalarIndexOf(shape, p, b, h, f);
            EXPECT_LT(i, size);
            EXPECT_TRUE(seen.insert(i).second);
          }
  }
  auto dense = *PageTableLayout::Contiguous(7);
  EXPECT_EQ(dense.ScalarIndexOf(shape, 4, 1, 2, 3), ((1 * 3 + 2) * 7 + 4) * 5 + 3);
}

TEST(AccountPayload, WorkedExampleAtSevenPositions) {
  auto layout = *PageTableLayout::Create(12, 3, {2, 0, 3, 1});
  auto a = *AccountPayload(layout, {1, 2, 2}, DType::kF64, 7);
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
  auto layout = *PageTableLayout::Create(10, 3, {3, 1, 0, 2});
  for (uint64_t n = 0; n <= 10; ++n) {
    auto a = *AccountPayload(layout, {2, 2, 3}, DType::kF32, n);
    EXPECT_EQ(a.live_scalar_slots + a.unused_scalar_slots, a.allocated_scalar_slots);
    EXPECT_EQ(a.unused_scalar_slots,
              a.active_page_tail_scalar_slots + a.inactive_page_scalar_slots);
    EXPECT_EQ(a.allocated_payload_bytes, a.allocated_scalar_slots * 4);
    // At a page boundary there is no tail.
    if (n % 3 == 0) {
      EXPECT_EQ(a.active_page_tail_scalar_slots, 0u) << n;
    }
  }
  auto empty = *AccountPayload(layout, {1, 2, 2}, DType::kF64, 0);
  EXPECT_EQ(empty.active_pages, 0u);
  EXPECT_EQ(empty.inactive_page_scalar_slots, 96u);
}

TEST(AccountPayload, RejectsLengthBeyondCapacity) {
  auto layout = *PageTableLayout::Identity(12, 3);
  auto r = AccountPayload(layout, {1, 2, 2}, DType::kF64, 13);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kOutOfRange);
}

TEST(AccountPayload, RejectsOverflow) {
  auto layout = *PageTableLayout::Identity(1ULL << 40, 1ULL << 20);
  auto r = AccountPayload(layout, {1ULL << 10, 8, 128}, DType::kF64, 0);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace folio::kv
