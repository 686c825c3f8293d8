#include "folio/kv/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

#include "folio/core/splitmix64.h"

namespace folio::kv {
namespace {

TEST(BlockPool, FreshPoolHandsOutPagesInOrder) {
  BlockPool pool(3);
  EXPECT_EQ(pool.TryAllocate(), 0);
  EXPECT_EQ(pool.TryAllocate(), 1);
  EXPECT_EQ(pool.TryAllocate(), 2);
}

TEST(BlockPool, ClaimTakesTheNamedFreePageAndRollsBack) {
  BlockPool pool(4);
  const std::vector<PageId> before = pool.free_list();
  pool.BeginJournal();
  EXPECT_EQ(pool.TryClaim(2), 2);
  EXPECT_EQ(pool.TryClaim(2), std::nullopt);  // in use
  EXPECT_EQ(pool.refcount(2), 1u);
  EXPECT_EQ(pool.free_list(), (std::vector<PageId>{0, 1, 3}));
  EXPECT_EQ(pool.TryAllocate(), 0);
  pool.RollBack();
  EXPECT_EQ(pool.free_list(), before);
  EXPECT_EQ(pool.refcount(2), 0u);
  EXPECT_TRUE(pool.CheckInvariants().ok());
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

TEST(BlockPool, AllocateAfterTakesTheNextPageWhenFree) {
  BlockPool pool(6);
  ASSERT_TRUE(pool.TryAllocate(2).has_value());  // 0, 1
  EXPECT_EQ(pool.TryAllocateAfter(3), 4);        // free: taken from the middle
  EXPECT_EQ(pool.TryAllocateAfter(0), 2);        // 1 is used: the front
  EXPECT_EQ(pool.TryAllocateAfter(-1), 3);       // no previous page: the front
  EXPECT_EQ(pool.TryAllocateAfter(5), 5);        // 6 is past the end: the front
  EXPECT_EQ(pool.TryAllocateAfter(0), std::nullopt);
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

TEST(BlockPool, DeprioritizedPagesAreHandedOutLastButStillHandedOut) {
  BlockPool pool(5);
  EXPECT_TRUE(pool.Deprioritize(1));
  EXPECT_TRUE(pool.Deprioritize(0));
  EXPECT_FALSE(pool.Deprioritize(0));  // already last
  EXPECT_FALSE(pool.Deprioritize(9));  // out of range
  EXPECT_EQ(pool.free_list(), (std::vector<PageId>{2, 3, 4, 1, 0}));
  EXPECT_EQ(pool.TryAllocate(5), (std::vector<PageId>{2, 3, 4, 1, 0}));
  EXPECT_FALSE(pool.Deprioritize(3));  // in use
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

// Whatever a journal saw (allocations from the front and the middle,
// moves, retains and releases of used pages), RollBack restores the free
// list's order and every refcount exactly. Random traffic, many seeds.
TEST(BlockPool, RollBackRestoresTheListAndRefcountsExactly) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SplitMix64 rng(seed);
    BlockPool pool(12);
    // Some history first, so the list is not in page order.
    std::vector<PageId> held;
    for (int i = 0; i < 20; ++i) {
      if (held.empty() || rng.NextU64() % 2 == 0) {
        if (auto p = pool.TryAllocateAfter(static_cast<PageId>(rng.NextU64() % 12))) {
          held.push_back(*p);
        }
      } else {
        const size_t k = rng.NextU64() % held.size();
        ASSERT_TRUE(pool.Release(held[k]).ok());
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
      }
      pool.Deprioritize(static_cast<PageId>(rng.NextU64() % 12));
    }
    const std::vector<PageId> list = pool.free_list();
    std::vector<uint32_t> refs;
    for (PageId p = 0; p < 12; ++p) refs.push_back(pool.refcount(p));
    pool.BeginJournal();
    for (int i = 0; i < 8; ++i) {
      switch (rng.NextU64() % 4) {
        case 0:
          (void)pool.TryAllocate();
          break;
        case 1:
          (void)pool.TryAllocateAfter(static_cast<PageId>(rng.NextU64() % 12));
          break;
        case 2:
          pool.Deprioritize(static_cast<PageId>(rng.NextU64() % 12));
          break;
        default:
          if (!held.empty()) {  // a retain and a release that keeps it in use
            ASSERT_TRUE(pool.Retain(held[0]).ok());
            ASSERT_TRUE(pool.Release(held[0]).ok());
          }
      }
      ASSERT_TRUE(pool.CheckInvariants().ok()) << seed;
    }
    pool.RollBack();
    ASSERT_TRUE(pool.CheckInvariants().ok()) << seed;
    EXPECT_EQ(pool.free_list(), list) << seed;
    for (PageId p = 0; p < 12; ++p) EXPECT_EQ(pool.refcount(p), refs[p]) << seed << " " << p;
    // EndJournal keeps what it saw.
    pool.BeginJournal();
    const std::optional<PageId> kept = pool.TryAllocate();
    pool.EndJournal();
    if (kept) {
      EXPECT_EQ(pool.refcount(*kept), 1u);
    }
  }
}

}  // namespace
}  // namespace folio::kv
