#include "folio/engine/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <vector>

namespace folio::engine {
namespace {

KvCacheManager Make(uint64_t num_pages, bool prefix_caching = true) {
  kv::PagedKvCacheConfig kc;
  kc.page_size = 4;
  kc.num_pages = num_pages;
  return *KvCacheManager::Create(kc, prefix_caching);
}

std::vector<int32_t> Tokens(int32_t n) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(100 + i);
  return t;
}

// Runs one step of n tokens for seq (with num_computed cached) and commits.
void Append(KvCacheManager& kv, kv::SeqId seq, uint64_t num_computed, uint64_t n) {
  const std::pair<kv::SeqId, uint64_t> req{seq, n};
  auto plan = kv.Allocate({&req, 1}, kv.NumNewPages(seq, num_computed, n));
  ASSERT_TRUE(plan.ok() && plan->has_value());
  kv.Commit(**plan);
}

TEST(KvCacheManager, StartsOnTheLongestCachedPrefixBeforeTheLastToken) {
  KvCacheManager kv = Make(8);
  const auto tokens = Tokens(12);
  auto first = kv.StartSequence(tokens);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->num_cached_tokens, 0u);
  Append(kv, first->seq, 0, 12);
  ASSERT_TRUE(kv.CacheFullPages(first->seq, tokens, 12).ok());
  kv.Free(first->seq);
  EXPECT_EQ(kv.num_cached_pages(), 3u);
  // The same 12 tokens: the last page is recomputed for the last token's logits.
  auto again = kv.StartSequence(tokens);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->num_cached_tokens, 8u);
  EXPECT_EQ(kv.num_cached_pages(), 1u);  // two now read by the sequence
  kv.Free(again->seq);
}

TEST(KvCacheManager, CachedPagesCountAsAvailableAndAreEvictedOnDemand) {
  KvCacheManager kv = Make(4);
  const auto tokens = Tokens(16);
  auto s = *kv.StartSequence(tokens);
  Append(kv, s.seq, 0, 16);
  ASSERT_TRUE(kv.CacheFullPages(s.seq, tokens, 16).ok());
  kv.Free(s.seq);
  EXPECT_EQ(kv.cache().pool().num_free(), 0u);
  EXPECT_EQ(kv.NumAvailablePages(), 4u);
  auto other = *kv.StartSequence(Tokens(1));
  Append(kv, other.seq, 0, 9);  // three pages: three evictions
  EXPECT_EQ(kv.num_evictions(), 3u);
  EXPECT_EQ(kv.num_cached_pages(), 1u);
}

TEST(KvCacheManager, AllocateIsNulloptWhenNothingMoreCanBeEvicted) {
  KvCacheManager kv = Make(2, /*prefix_caching=*/false);
  auto s = *kv.StartSequence(Tokens(1));
  const std::pair<kv::SeqId, uint64_t> req{s.seq, 12};
  auto plan = kv.Allocate({&req, 1}, 3);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->has_value());
  EXPECT_EQ(kv.cache().pool().num_free(), 2u);  // nothing changed
}

TEST(KvCacheManager, HoldNewPagesRefusesBeforeChangingAnything) {
  KvCacheManager kv = Make(3);
  auto s = *kv.StartSequence(Tokens(1));
  Append(kv, s.seq, 0, 8);
  const auto held = kv.HoldNewPages(2);
  EXPECT_EQ(held.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(kv.cache().pool().num_free(), 1u);
  auto one = kv.HoldNewPages(1);
  ASSERT_TRUE(one.ok());
  kv.DropPage(one->front());
  EXPECT_EQ(kv.cache().pool().num_free(), 1u);
}

TEST(KvCacheManager, ClearGivesEveryCachedPageBack) {
  KvCacheManager kv = Make(4);
  const auto tokens = Tokens(9);
  auto s = *kv.StartSequence(tokens);
  Append(kv, s.seq, 0, 9);
  ASSERT_TRUE(kv.CacheFullPages(s.seq, tokens, 9).ok());
  kv.Free(s.seq);
  EXPECT_EQ(kv.num_cached_pages(), 2u);
  ASSERT_TRUE(kv.ClearPrefixCache().ok());
  EXPECT_EQ(kv.cache().pool().num_free(), 4u);
}

}  // namespace
}  // namespace folio::engine
