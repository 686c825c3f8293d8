#include "folio/kv/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "folio/core/splitmix64.h"

namespace folio::kv {
namespace {

constexpr uint64_t kPage = 4;

PagedKvCache Make(uint64_t num_pages) {
  return *PagedKvCache::Create({1, 1, 2, kPage, num_pages, DType::kF32, {}, 0});
}

// Appends n tokens to seq with one committed step (rows are zeros).
void Append(PagedKvCache& c, SeqId seq, uint64_t n) {
  std::vector<std::pair<SeqId, uint64_t>> req{{seq, n}};
  auto plan = c.PrepareAppend(req);
  ASSERT_TRUE(plan.ok() && plan->has_value());
  std::vector<float> rows(n * 2, 0.0f);
  ASSERT_TRUE(c.WriteRows(0, (*plan)->slot_mapping(), rows, rows).ok());
  c.Commit(**plan);
}

// Caches every full page of seq, whose tokens are `tokens`.
void InsertAll(PrefixCache& pc, PagedKvCache& c, SeqId seq, std::span<const int32_t> tokens) {
  PrefixCache::EntryId parent = PrefixCache::kRoot;
  uint64_t hash = PrefixCache::kRootHash;
  const auto table = c.block_table(seq);
  for (uint64_t i = 0; i < c.length(seq) / kPage; ++i) {
    auto r = pc.Insert(c, parent, hash, tokens.subspan(i * kPage, kPage), table[i]);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    parent = r->entry;
    hash = r->hash;
  }
}

std::vector<int32_t> Iota(size_t n, int32_t first) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(PrefixCacheTest, PageHashChainsParentAndTokens) {
  const std::vector<int32_t> a{1, 2, 3, 4}, b{1, 2, 3, 5};
  const uint64_t h = PrefixCache::PageHash(PrefixCache::kRootHash, a);
  EXPECT_EQ(h, PrefixCache::PageHash(PrefixCache::kRootHash, a));
  EXPECT_NE(h, PrefixCache::PageHash(PrefixCache::kRootHash, b));
  EXPECT_NE(h, PrefixCache::PageHash(h, a));
  EXPECT_NE(PrefixCache::PageHash(h, a),
            PrefixCache::PageHash(PrefixCache::PageHash(PrefixCache::kRootHash, b), a));
  EXPECT_NE(PrefixCache::PageHash(0, std::vector<int32_t>{0}),
            PrefixCache::PageHash(0, std::vector<int32_t>{0, 0}));
}

TEST(PrefixCacheTest, ReusesFullPagesOfTheLongestCachedPrefix) {
  PagedKvCache c = Make(16);
  PrefixCache pc(kPage);
  const auto tokens = Iota(10, 100);  // 2 full pages + 2 tokens
  const SeqId a = c.AddSequence();
  Append(c, a, tokens.size());
  InsertAll(pc, c, a, tokens);
  EXPECT_EQ(pc.size(), 2u);
  const std::vector<PageId> a_pages(c.block_table(a).begin(), c.block_table(a).begin() + 2);
  EXPECT_EQ(c.holds(a_pages[0]), 1u);
  EXPECT_EQ(c.pool().refcount(a_pages[0]), 2u);

  // Same first page, different second page: one page reused.
  auto other = tokens;
  other[5] = 7;
  PrefixCache::Match m = pc.Lookup(other, 100);
  EXPECT_EQ(m.tables[0], std::vector<PageId>{a_pages[0]});
  m = pc.Lookup(tokens, 100);
  EXPECT_EQ(m.tables[0], a_pages);
  m = pc.Lookup(tokens, 1);  // capped
  EXPECT_EQ(m.tables[0].size(), 1u);
  // A different first page hides everything after it.
  auto shifted = tokens;
  shifted[0] = 0;
  EXPECT_TRUE(pc.Lookup(shifted, 100).tables[0].empty());
  EXPECT_EQ(pc.stats().lookups, 4u);
  EXPECT_EQ(pc.stats().hit_pages, 1u + 2u + 1u);
  EXPECT_EQ(pc.stats().query_pages, 2u + 2u + 1u + 2u);
  // The keys a router computes outside the cache are the cache's own.
  const std::vector<uint64_t> chain = PrefixCache::ChainHashes(tokens, kPage);
  ASSERT_EQ(chain.size(), 2u);
  EXPECT_EQ(pc.Lookup(tokens, 100).last_hash, chain[1]);
  EXPECT_EQ(pc.Lookup(other, 100).last_hash, chain[0]);
  EXPECT_NE(PrefixCache::ChainHashes(other, kPage)[1], chain[1]);

  // A sequence built on the match shares the pages and appends after them.
  m = pc.Lookup(tokens, 2);
  auto b = c.AddSequence(m.tables[0]);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(c.length(*b), 8u);
  EXPECT_EQ(c.pool().refcount(a_pages[1]), 3u);
  Append(c, *b, 1);
  EXPECT_NE(c.block_table(*b)[2], c.block_table(a)[2]);
  ASSERT_TRUE(c.Release(*b).ok());
  ASSERT_TRUE(c.Release(a).ok());
  // Only the cache holds the two full pages now; a's tail page is free.
  EXPECT_EQ(c.pool().num_used(), 2u);
  EXPECT_EQ(pc.NumEvictable(c), 2u);
  EXPECT_EQ(c.Stats().pages_held_only, 2u);
  EXPECT_EQ(c.Stats().tail_slots_unwritten, 0u);
  ASSERT_TRUE(pc.Clear(c).ok());
  EXPECT_EQ(c.pool().num_free(), 16u);
  EXPECT_TRUE(c.pool().CheckInvariants().ok());
}

TEST(PrefixCacheTest, DuplicateKeysKeepTheFirstPage) {
  PagedKvCache c = Make(16);
  PrefixCache pc(kPage);
  const auto tokens = Iota(8, 1);
  const SeqId a = c.AddSequence(), b = c.AddSequence();
  Append(c, a, 8);
  Append(c, b, 8);
  InsertAll(pc, c, a, tokens);
  InsertAll(pc, c, b, tokens);  // same keys: nothing added
  EXPECT_EQ(pc.size(), 2u);
  EXPECT_EQ(pc.stats().inserted, 2u);
  EXPECT_EQ(c.holds(c.block_table(b)[0]), 0u);
  EXPECT_EQ(pc.Lookup(tokens, 2).tables[0][1], c.block_table(a)[1]);
  // A page cannot be cached under two keys.
  auto r =
      pc.Insert(c, PrefixCache::kRoot, PrefixCache::kRootHash, Iota(4, 50), c.block_table(a)[0]);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      pc.Insert(c, PrefixCache::kRoot, PrefixCache::kRootHash, Iota(3, 50), 0).status().code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(pc.Insert(c, 999, 0, Iota(4, 50), 5).status().code(), StatusCode::kNotFound);
}

TEST(PrefixCacheTest, EvictsLeastRecentlyUsedUnreferencedPagesDeepestFirst) {
  PagedKvCache c = Make(8);
  PrefixCache pc(kPage);
  const auto t1 = Iota(8, 1), t2 = Iota(8, 100);
  const SeqId a = c.AddSequence(), b = c.AddSequence();
  Append(c, a, 8);
  Append(c, b, 8);
  InsertAll(pc, c, a, t1);
  InsertAll(pc, c, b, t2);
  const std::vector<PageId> pa(c.block_table(a).begin(), c.block_table(a).end());
  const std::vector<PageId> pb(c.block_table(b).begin(), c.block_table(b).end());
  // b still runs: only a's pages are evictable once a is released.
  pc.Touch(pa);
  ASSERT_TRUE(c.Release(a).ok());
  EXPECT_EQ(pc.NumEvictable(c), 2u);
  auto ev = pc.EvictOne(c);
  ASSERT_TRUE(ev.ok() && *ev);
  EXPECT_FALSE(pc.Contains(pa[1]));  // the deeper page first
  EXPECT_TRUE(pc.Contains(pa[0]));
  EXPECT_EQ(pc.Lookup(t1, 2).tables[0], std::vector<PageId>{pa[0]});
  ev = pc.EvictOne(c);
  ASSERT_TRUE(ev.ok() && *ev);
  EXPECT_FALSE(pc.Contains(pa[0]));
  ev = pc.EvictOne(c);  // b's pages are in use
  ASSERT_TRUE(ev.ok());
  EXPECT_FALSE(*ev);
  EXPECT_EQ(pc.stats().evicted, 2u);

  // Least recently used goes first: release b, then use t2's first page.
  // (EvictOne found b's pages in use above and dropped them from the
  // candidates; Touch at their release makes them candidates again.)
  pc.Touch(pb);
  ASSERT_TRUE(c.Release(b).ok());
  const SeqId d = c.AddSequence();
  Append(c, d, 8);
  InsertAll(pc, c, d, t1);
  pc.Touch(c.block_table(d));
  ASSERT_TRUE(c.Release(d).ok());
  pc.Lookup(t2, 1);
  ASSERT_TRUE(*pc.EvictOne(c));
  EXPECT_TRUE(pc.Contains(pb[0]));   // just used
  EXPECT_FALSE(pc.Contains(pb[1]));  // untouched since b cached it
  EXPECT_EQ(pc.size(), 3u);
}

TEST(PrefixCacheTest, PagesInUseLeaveTheEvictionOrderUntilTouched) {
  PagedKvCache c = Make(8);
  PrefixCache pc(kPage);
  const auto t = Iota(8, 1);
  const SeqId a = c.AddSequence();
  Append(c, a, 8);
  InsertAll(pc, c, a, t);
  auto ev = pc.EvictOne(c);  // both pages in use: skipped, dropped from the order
  ASSERT_TRUE(ev.ok());
  EXPECT_FALSE(*ev);
  ASSERT_TRUE(c.Release(a).ok());
  EXPECT_EQ(pc.NumEvictable(c), 2u);
  EXPECT_FALSE(*pc.EvictOne(c));  // not candidates again yet
  pc.Touch(std::vector<PageId>{0, 1});
  EXPECT_TRUE(*pc.EvictOne(c));
  EXPECT_TRUE(*pc.EvictOne(c));
  EXPECT_EQ(pc.size(), 0u);
  EXPECT_EQ(c.pool().num_free(), 8u);
}

TEST(PrefixCacheTest, AddSequenceRejectsBadPrefixes) {
  PagedKvCache c = Make(4);
  const SeqId a = c.AddSequence();
  Append(c, a, 8);
  const PageId p0 = c.block_table(a)[0];
  EXPECT_EQ(c.AddSequence(std::vector<PageId>{p0, 9}).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(c.AddSequence(std::vector<PageId>{p0, p0}).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.AddSequence(std::vector<PageId>{3}).status().code(),
            StatusCode::kFailedPrecondition);  // free
  EXPECT_EQ(c.pool().refcount(p0), 1u);        // nothing changed
  EXPECT_EQ(c.DropPage(p0).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.HoldPage(3).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.HoldPage(-1).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(c.num_sequences(), 1u);
}

// Random interleavings of sequences that reuse, extend, cache and release
// pages: the pool stays consistent and no page is leaked once the cache is
// cleared.
TEST(PrefixCacheTest, RandomWorkloadKeepsThePoolConsistent) {
  PagedKvCache c = Make(24);
  PrefixCache pc(kPage);
  SplitMix64 rng(7);
  struct Live {
    SeqId seq;
    std::vector<int32_t> tokens;
  };
  std::vector<Live> live;
  uint64_t reused = 0;
  for (int step = 0; step < 2000; ++step) {
    const uint64_t op = rng.NextU64() % 3;
    if (op == 0 && live.size() < 4) {
      // A prompt drawn from a few shared stems.
      std::vector<int32_t> tokens =
          Iota(4 * (rng.NextU64() % 3), static_cast<int32_t>(rng.NextU64() % 2));
      for (uint64_t i = 0, n = 1 + rng.NextU64() % 9; i < n; ++i) {
        tokens.push_back(static_cast<int32_t>(rng.NextU64() % 3));
      }
      auto m = pc.Lookup(tokens, (tokens.size() - 1) / kPage);
      reused += m.tables[0].size();
      auto seq = c.AddSequence(m.tables[0]);
      ASSERT_TRUE(seq.ok());
      const uint64_t todo = tokens.size() - c.length(*seq);
      std::vector<std::pair<SeqId, uint64_t>> req{{*seq, todo}};
      auto plan = c.PrepareAppend(req);
      ASSERT_TRUE(plan.ok());
      while (!plan->has_value()) {
        auto ev = pc.EvictOne(c);
        ASSERT_TRUE(ev.ok());
        if (!*ev) break;
        plan = c.PrepareAppend(req);
      }
      if (!plan->has_value()) {
        ASSERT_TRUE(c.Release(*seq).ok());
        continue;
      }
      std::vector<float> rows(todo * 2, 0.0f);
      ASSERT_TRUE(c.WriteRows(0, (*plan)->slot_mapping(), rows, rows).ok());
      c.Commit(**plan);
      InsertAll(pc, c, *seq, tokens);
      live.push_back({*seq, tokens});
    } else if (op == 1 && !live.empty()) {
      const size_t i = rng.NextU64() % live.size();
      pc.Touch(c.block_table(live[i].seq));
      ASSERT_TRUE(c.Release(live[i].seq).ok());
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op == 2) {
      ASSERT_TRUE(pc.EvictOne(c).ok());
    }
    ASSERT_TRUE(c.pool().CheckInvariants().ok());
    uint64_t held_only = 0;
    for (PageId p = 0; p < 24; ++p) {
      held_only += c.holds(p) > 0 && c.holds(p) == c.pool().refcount(p);
    }
    ASSERT_EQ(c.pages_held_only(), held_only);  // the kept count is exact
    uint64_t refs = 0;
    for (PageId p = 0; p < 24; ++p) refs += c.pool().refcount(p);
    uint64_t expected = pc.size();
    for (const Live& l : live) expected += c.block_table(l.seq).size();
    ASSERT_EQ(refs, expected);
  }
  EXPECT_GT(reused, 100u);
  for (const Live& l : live) ASSERT_TRUE(c.Release(l.seq).ok());
  ASSERT_TRUE(pc.Clear(c).ok());
  EXPECT_EQ(c.pool().num_free(), 24u);
}

}  // namespace
}  // namespace folio::kv
