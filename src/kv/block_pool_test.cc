#include "folio/kv/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace folio::kv {
namespace {

TEST(BlockPool, FreshPoolHandsOutPagesInOrder) {
  BlockPool pool(3);
  EXPECT_EQ(pool.TryAllocate(), 0);
  EXPECT_EQ(pool.TryAllocate(), 1);
  EXPECT_EQ(pool.TryAllocate(), 2);
}

TEST(BlockPool, AllocateUntilExhaustedThenNullopt) {
  BlockPool pool(4);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(pool.TryAllocate().has_value());
  EXPECT_FALSE(pool.CanAllocate(1));
  EXPECT_EQ(pool.TryAllocate(), std::nullopt);
  EXPECT_EQ(pool.num_free(), 0u);
  EXPECT_EQ(pool.num_used(), 4u);
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

TEST(BlockPool, MultiAllocateIsAllOrNothing) {
  BlockPool pool(5);
  ASSERT_TRUE(pool.TryAllocate(2).has_value());
  EXPECT_EQ(pool.TryAllocate(4), std::nullopt);
  EXPECT_EQ(pool.num_free(), 3u);
  EXPECT_EQ(pool.total_allocations(), 2u);
  EXPECT_EQ(pool.TryAllocate(3), (std::vector<PageId>{2, 3, 4}));
  EXPECT_EQ(pool.TryAllocate(0), std::vector<PageId>{});
}

TEST(BlockPool, ReleasedPageIsHandedOutNext) {
  BlockPool pool(4);
  ASSERT_TRUE(pool.TryAllocate(3).has_value());
  ASSERT_TRUE(pool.Release(1).ok());
  EXPECT_EQ(pool.TryAllocate(), 1);
  EXPECT_EQ(pool.TryAllocate(), 3);
}

TEST(BlockPool, SharedPageIsFreedByItsLastRelease) {
  BlockPool pool(2);
  const PageId page = *pool.TryAllocate();
  ASSERT_TRUE(pool.Retain(page).ok());
  EXPECT_EQ(pool.refcount(page), 2u);
  ASSERT_TRUE(pool.Release(page).ok());
  EXPECT_EQ(pool.num_free(), 1u);
  ASSERT_TRUE(pool.Release(page).ok());
  EXPECT_EQ(pool.refcount(page), 0u);
  EXPECT_EQ(pool.num_free(), 2u);
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

TEST(BlockPool, ReleaseTwiceIsAnError) {
  BlockPool pool(8);
  ASSERT_TRUE(pool.TryAllocate(6).has_value());
  ASSERT_TRUE(pool.Release(5).ok());
  const Status s = pool.Release(5);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("page 5"), std::string::npos) << s.message();
  EXPECT_EQ(pool.num_free(), 3u);  // not pushed twice
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

TEST(BlockPool, RetainOfAFreePageIsAnError) {
  BlockPool pool(2);
  EXPECT_EQ(pool.Retain(1).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(pool.refcount(1), 0u);
}

TEST(BlockPool, OutOfRangeIdsAreErrors) {
  BlockPool pool(2);
  EXPECT_EQ(pool.Retain(2).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(pool.Release(-1).code(), StatusCode::kOutOfRange);
}

TEST(BlockPool, PeakUsedRemembersTheHighWaterMark) {
  BlockPool pool(4);
  const auto pages = *pool.TryAllocate(3);
  for (const PageId p : pages) ASSERT_TRUE(pool.Release(p).ok());
  ASSERT_TRUE(pool.TryAllocate().has_value());
  EXPECT_EQ(pool.num_used(), 1u);
  EXPECT_EQ(pool.peak_used(), 3u);
  EXPECT_EQ(pool.total_allocations(), 4u);
}

TEST(BlockPool, InvariantsHoldThroughMixedTraffic) {
  BlockPool pool(6);
  const auto pages = *pool.TryAllocate(4);
  ASSERT_TRUE(pool.Retain(pages[1]).ok());
  ASSERT_TRUE(pool.Release(pages[0]).ok());
  ASSERT_TRUE(pool.Release(pages[1]).ok());
  ASSERT_TRUE(pool.TryAllocate().has_value());
  const Status s = pool.CheckInvariants();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(pool.num_free() + pool.num_used(), pool.num_pages());
}

}  // namespace
}  // namespace folio::kv
