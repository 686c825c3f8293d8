// Layer groups (paged_kv_cache.h, "Layer groups"): how layers are grouped,
// the pages a window gives back, and that every other rule of the cache
// (copy-on-write, Abort, Truncate, conservation) holds per group; and the
// prefix cache over several groups (prefix_cache.h, "Layer groups").
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "folio/core/checked_math.h"
#include "folio/core/splitmix64.h"
#include "folio/kv/paged_kv_cache.h"
#include "folio/kv/prefix_cache.h"

namespace folio::kv {
namespace {

using Requests = std::vector<std::pair<SeqId, uint64_t>>;

PagedKvCacheConfig Config(std::vector<uint64_t> windows, uint64_t page_size, uint64_t num_pages) {
  PagedKvCacheConfig c;
  c.num_layers = windows.size();
  c.num_kv_heads = 1;
  c.head_dim = 2;
  c.page_size = page_size;
  c.num_pages = num_pages;
  c.layer_windows = std::move(windows);
  return c;
}

// One committed step of n tokens for seq; every layer's rows name the
// position, so that reads can check them. Returns Commit's released pages.
std::vector<PageId> Step(PagedKvCache& c, SeqId seq, uint64_t n,
                         std::optional<uint64_t> num_revocable = std::nullopt) {
  auto plan = c.PrepareAppend(Requests{{seq, n}});
  EXPECT_TRUE(plan.ok() && plan->has_value());
  for (uint64_t l = 0; l < c.config().num_layers; ++l) {
    std::vector<float> k, v;
    for (uint64_t pos = c.length(seq); pos < c.length(seq) + n; ++pos) {
      k.insert(k.end(), {static_cast<float>(pos), static_cast<float>(l)});
      v.insert(v.end(), {-static_cast<float>(pos), static_cast<float>(l)});
    }
    const Status w = c.WriteRows(l, (*plan)->slot_mapping(c.group_of(l)), k, v);
    EXPECT_TRUE(w.ok()) << w.ToString();
  }
  if (!num_revocable) return c.Commit(**plan);
  return c.Commit(**plan, std::vector<uint64_t>{*num_revocable});
}

uint64_t PagesHeld(const PagedKvCache& c, SeqId seq) {
  uint64_t n = 0;
  for (uint64_t g = 0; g < c.num_groups(); ++g) {
    for (const PageId p : c.block_table(seq, g)) n += p != -1 ? 1 : 0;
  }
  return n;
}

TEST(LayerGroups, GlobalFirstThenWindowsInGroupsOfTheFewestLayers) {
  // Gemma 3's pattern: five local layers, then a global one.
  std::vector<uint64_t> gemma3;
  for (uint64_t l = 0; l < 18; ++l) gemma3.push_back(l % 6 == 5 ? 0 : 512);
  const std::vector<LayerGroup> g = GroupLayers(Config(gemma3, 16, 1));
  ASSERT_EQ(g.size(), 6u);
  EXPECT_EQ(g[0].window, 0u);
  EXPECT_EQ(g[0].layers, (std::vector<uint64_t>{5, 11, 17}));
  EXPECT_EQ(g[1].window, 512u);
  EXPECT_EQ(g[1].layers, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(g[5].layers, (std::vector<uint64_t>{14, 15, 16}));
  // Uneven counts: a kind's last group is short.
  const std::vector<LayerGroup> uneven = GroupLayers(Config({8, 0, 8, 0, 8, 8, 8}, 4, 1));
  ASSERT_EQ(uneven.size(), 4u);
  EXPECT_EQ(uneven[0].layers, (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(uneven[3].layers, (std::vector<uint64_t>{6}));
  // No window: one group, every layer, as before groups existed.
  PagedKvCacheConfig none = Config({0, 0, 0}, 4, 1);
  none.layer_windows.clear();
  EXPECT_EQ(GroupLayers(none).size(), 1u);
  EXPECT_EQ(GroupLayers(none)[0].layers.size(), 3u);
  // A page costs one group's layers.
  EXPECT_EQ(PagedKvCache::BytesPerPage(Config(gemma3, 16, 1)) * 6,
            PagedKvCache::BytesPerPage(Config(std::vector<uint64_t>(18, 0), 16, 1)));
}

TEST(LayerGroups, AWindowGivesItsPagesBackAsTheSequenceGrows) {
  constexpr uint64_t kPage = 4, kWindow = 8;
  PagedKvCache c = *PagedKvCache::Create(Config({kWindow, 0}, kPage, 64));
  const SeqId s = c.AddSequence();
  for (uint64_t length = 0; length < 60; ++length) {
    const std::vector<PageId> released = Step(c, s, 1);
    // After the step from `length`, group 1 holds the pages from the one
    // of position length + 1 - W on.
    const uint64_t first = length + 1 > kWindow ? length + 1 - kWindow : 0;
    const auto local = c.block_table(s, 1);
    for (uint64_t lp = 0; lp < local.size(); ++lp) {
      EXPECT_EQ(local[lp] == -1, lp < first / kPage) << "length " << length << " page " << lp;
    }
    EXPECT_EQ(c.block_table(s, 0).size(), CeilDiv(length + 1, kPage));
    EXPECT_EQ(std::count(c.block_table(s, 0).begin(), c.block_table(s, 0).end(), -1), 0);
    for (const PageId p : released) EXPECT_EQ(c.pool().refcount(p), 0u);
    // Conservation: the pool's used pages are the sequence's.
    EXPECT_EQ(c.pool().num_used(), PagesHeld(c, s));
    EXPECT_LE(PagesHeld(c, s), PagedKvCache::MaxPagesHeld(c.config(), length + 1, 1));
  }
  // The window's rows still read back; the global layer's from position 0.
  float row[2];
  c.ReadRow(0, KvRole::kKey, s, 59, 0, row);
  EXPECT_EQ(row[0], 59.0f);
  c.ReadRow(1, KvRole::kValue, s, 0, 0, row);
  EXPECT_EQ(row[0], -0.0f);
  EXPECT_TRUE(c.Release(s).ok());
  EXPECT_EQ(c.pool().num_used(), 0u);
}

TEST(LayerGroups, TruncateRefusesToCutBelowWhatTheWindowReleased) {
  PagedKvCache c = *PagedKvCache::Create(Config({8, 0}, 4, 64));
  const SeqId s = c.AddSequence();
  Step(c, s, 20);
  Step(c, s, 4);  // from 20: releases the pages before position 13
  const auto before = std::vector<PageId>(c.block_table(s, 1).begin(), c.block_table(s, 1).end());
  // Cutting to 20 (the last step's start) is fine; to 11, whose next query
  // sees position 4, is not.
  EXPECT_EQ(c.Truncate(s, 11).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.length(s), 24u);
  EXPECT_EQ(std::vector<PageId>(c.block_table(s, 1).begin(), c.block_table(s, 1).end()), before);
  EXPECT_TRUE(c.Truncate(s, 20).ok());
  EXPECT_EQ(c.pool().num_used(), PagesHeld(c, s));
}

TEST(LayerGroups, AStepThatCannotBeTakenBackReleasesAtItsEnd) {
  // Told that none of a step's tokens can be taken back, Commit releases
  // what the query at the new length no longer sees, one step sooner.
  PagedKvCache c = *PagedKvCache::Create(Config({8, 0}, 4, 64));
  const SeqId s = c.AddSequence();
  Step(c, s, 20, 0);
  // From 20: the next query (position 20) sees 13 on, so pages 0-2 go.
  EXPECT_EQ(c.block_table(s, 1)[2], -1);
  EXPECT_NE(c.block_table(s, 1)[3], -1);
  EXPECT_EQ(c.Truncate(s, 15).code(), StatusCode::kFailedPrecondition);  // sees 8
  // A step of 1 + 3 drafts: only the drafts may go, so it keeps what a
  // query at 21 sees (14 on: page 3 on) and Truncate to 21 works.
  const std::vector<PageId> released = Step(c, s, 4, 3);
  EXPECT_TRUE(released.empty());
  EXPECT_NE(c.block_table(s, 1)[3], -1);
  EXPECT_TRUE(c.Truncate(s, 21).ok());
  EXPECT_EQ(c.pool().num_used(), PagesHeld(c, s));
  // Against the default (every token revocable), a step of 12 prompt
  // tokens from 21 keeps the window's pages from 26 / 4 = 6 on, not from
  // (21 + 1 - 8) / 4 = 3 on.
  PagedKvCache d = *PagedKvCache::Create(Config({8, 0}, 4, 64));
  const SeqId t = d.AddSequence();
  Step(d, t, 21);
  Step(d, t, 12);
  Step(c, s, 12, 0);
  EXPECT_EQ(PagesHeld(c, s) + 3, PagesHeld(d, t));
}

TEST(LayerGroups, AMarginKeepsPositionsForTruncate) {
  PagedKvCacheConfig cfg = Config({8, 0}, 4, 64);
  cfg.window_margin = 5;
  PagedKvCache c = *PagedKvCache::Create(cfg);
  const SeqId s = c.AddSequence();
  Step(c, s, 20);
  Step(c, s, 4);
  EXPECT_EQ(c.block_table(s, 1)[1], -1);  // before 20 + 1 - 8 - 5 = 8
  EXPECT_NE(c.block_table(s, 1)[2], -1);
  EXPECT_TRUE(c.Truncate(s, 15).ok());  // its next query sees position 8
}

// A windowed group's batch metadata lists every logical page, the ones the
// window gave back as kReleasedPage, so the CSR form still gives the
// context: (pages - 1) * page_size + last_page_len.
TEST(LayerGroups, BatchMetadataMarksReleasedPages) {
  PagedKvCache c = *PagedKvCache::Create(Config({8, 0}, 4, 64));
  const SeqId s = c.AddSequence();
  // One token a step, so that each commit gives back what the window left
  // behind: the next query, position 21, sees 14..21, so pages 0-2 are gone.
  for (int i = 0; i < 21; ++i) Step(c, s, 1);
  auto plan = c.PrepareAppend(Requests{{s, 1}});
  ASSERT_TRUE(plan.ok() && plan->has_value());
  const uint64_t windowed = c.group_of(0);
  ASSERT_NE(c.groups()[windowed].window, 0u);
  const BatchMetadata m = *c.BuildBatchMetadata(std::vector<SeqId>{s}, &**plan, windowed);
  EXPECT_EQ(m.indptr, (std::vector<int32_t>{0, 6}));
  EXPECT_EQ(m.last_page_len, (std::vector<int32_t>{2}));
  EXPECT_EQ(*BatchContexts(ViewOf(m), 4), (std::vector<uint64_t>{22}));
  ASSERT_EQ(m.indices.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    if (i < 3) {
      EXPECT_EQ(m.indices[i], kReleasedPage) << i;
    } else {
      EXPECT_GE(m.indices[i], 0) << i;
    }
  }
  c.Abort(std::move(**plan));
}

TEST(LayerGroups, ForkCopiesEachGroupsSharedTailAndAbortRestoresEveryTable) {
  PagedKvCache c = *PagedKvCache::Create(Config({8, 0, 8, 0}, 4, 64));
  const SeqId a = c.AddSequence();
  Step(c, a, 14);
  const SeqId b = *c.Fork(a);
  const uint64_t used = c.pool().num_used();
  auto plan = c.PrepareAppend(Requests{{a, 1}, {b, 1}});
  ASSERT_TRUE(plan.ok() && plan->has_value());
  // a copies both groups' shared tails; b, the last sharer, writes in place.
  EXPECT_EQ(c.pool().num_used(), used + 2);
  EXPECT_NE(c.block_table(a, 0).back(), c.block_table(b, 0).back());
  EXPECT_NE(c.block_table(a, 1).back(), c.block_table(b, 1).back());
  c.Abort(std::move(**plan));
  EXPECT_EQ(c.pool().num_used(), used);
  EXPECT_EQ(c.block_table(a, 1).back(), c.block_table(b, 1).back());
  EXPECT_TRUE(c.Release(a).ok());
  EXPECT_TRUE(c.Release(b).ok());
  EXPECT_EQ(c.pool().num_used(), 0u);
}

TEST(LayerGroups, AddSequenceTakesMinusOneOnlyBeforeTheWindow) {
  PagedKvCache c = *PagedKvCache::Create(Config({8, 0}, 4, 64));
  const SeqId a = c.AddSequence();
  Step(c, a, 16);
  const auto g0 = c.block_table(a, 0), g1 = c.block_table(a, 1);
  // 16 tokens: the next query sees positions 9..16, so pages 0 and 1 of
  // the window's group may be missing.
  std::vector<std::vector<PageId>> tables = {{g0.begin(), g0.end()}, {-1, -1, g1[2], g1[3]}};
  const auto b = c.AddSequence(tables, 16);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(c.pool().refcount(g1[2]), 2u);
  tables[1] = {-1, -1, -1, g1[3]};
  EXPECT_EQ(c.AddSequence(tables, 16).status().code(), StatusCode::kInvalidArgument);
  tables[1] = {g1[0], -1, g1[2], g1[3]};
  EXPECT_EQ(c.AddSequence(tables, 16).status().code(), StatusCode::kInvalidArgument);
  tables = {{g0.begin(), g0.end()}, {g0.begin(), g0.end()}};  // a page in two groups
  EXPECT_EQ(c.AddSequence(tables, 16).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.AddSequence(g0, 16).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.AddPlacedSequence({0, 1}).status().code(), StatusCode::kFailedPrecondition);
}

// Random steps of random sequences: conservation at every step, and no
// sequence ever holds more than MaxPagesHeld says.
TEST(LayerGroups, RandomTrafficConservesPagesWithinTheBound) {
  constexpr uint64_t kMaxStep = 7;
  PagedKvCache c = *PagedKvCache::Create(Config({6, 0, 6, 6, 0, 6}, 3, 4096));
  SplitMix64 rng(5);
  std::vector<SeqId> live;
  for (int round = 0; round < 400; ++round) {
    const uint64_t r = rng.NextU64() % 10;
    if (live.empty() || r == 0) {
      live.push_back(c.AddSequence());
    } else if (r == 1) {
      const size_t i = rng.NextU64() % live.size();
      ASSERT_TRUE(c.Release(live[i]).ok());
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (r == 2 && c.length(live[0]) > 0) {
      live.push_back(*c.Fork(live[0]));
    } else {
      const SeqId s = live[rng.NextU64() % live.size()];
      Step(c, s, 1 + rng.NextU64() % kMaxStep);
      EXPECT_LE(PagesHeld(c, s), PagedKvCache::MaxPagesHeld(c.config(), c.length(s), kMaxStep));
    }
    const PoolStats st = c.Stats();
    ASSERT_EQ(st.pages_used + st.pages_free, st.pages_total);
  }
  for (const SeqId s : live) ASSERT_TRUE(c.Release(s).ok());
  EXPECT_EQ(c.pool().num_used(), 0u);
}

// The prefix cache over a global group and a window of 8 (pages of 4).
TEST(LayerGroupsPrefixCache, AHitNeedsOnlyTheWindowsPages) {
  PagedKvCache c = *PagedKvCache::Create(Config({0, 8}, 4, 64));
  PrefixCache pc(4);
  const std::vector<uint64_t> windows = {0, 8};
  std::vector<int32_t> tokens(25);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i * 7 % 50);
  const SeqId a = c.AddSequence();
  PrefixCache::EntryId entry = PrefixCache::kRoot;
  uint64_t hash = PrefixCache::kRootHash;
  Step(c, a, 24);
  for (uint64_t lp = 0; lp < 6; ++lp) {
    const std::vector<PageId> pages = {c.block_table(a, 0)[lp], c.block_table(a, 1)[lp]};
    auto in = pc.Insert(c, entry, hash, std::span(tokens).subspan(lp * 4, 4), pages);
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    entry = in->entry;
    hash = in->hash;
  }
  Step(c, a, 1);  // releases window pages 0..3 (before 24 + 1 - 8 = 17)
  EXPECT_EQ(c.block_table(a, 1)[3], -1);
  // The cache still holds them, and a hit takes only the window's: 6 pages
  // (24 tokens), next query at 24 sees 17..24, pages 4 and 5.
  PrefixCache::Match m = pc.Lookup(tokens, 6, windows);
  ASSERT_EQ(m.num_pages, 6u);
  EXPECT_EQ(m.tables[0].size(), 6u);
  EXPECT_EQ(m.tables[1],
            (std::vector<PageId>{-1, -1, -1, -1, c.block_table(a, 1)[4], c.block_table(a, 1)[5]}));
  const auto b = c.AddSequence(m.tables, 24);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(c.Release(*b).ok());
  ASSERT_TRUE(c.Release(a).ok());
  // Evict until the window's page 4 is gone (deepest, least recent first):
  // the global group's pages stay, and the hit shrinks to where the window
  // finds its pages again.
  const PageId local4 = m.tables[1][4];
  while (pc.Contains(local4)) ASSERT_TRUE(*pc.EvictOne(c));
  m = pc.Lookup(tokens, 6, windows);
  for (uint64_t lp = 0; lp < m.num_pages; ++lp) EXPECT_NE(m.tables[0][lp], -1);
  EXPECT_LT(m.num_pages, 5u);
  for (uint64_t lp = 0; lp < m.num_pages; ++lp) {
    const uint64_t next = m.num_pages * 4;
    EXPECT_EQ(m.tables[1][lp] == -1, next + 1 > 8 && lp < (next + 1 - 8) / 4);
  }
  ASSERT_TRUE(pc.Clear(c).ok());
  EXPECT_EQ(c.pool().num_used(), 0u);
  EXPECT_EQ(pc.size(), 0u);
}

TEST(LayerGroupsPrefixCache, EvictingOneGroupsPageKeepsTheChainForTheOthers) {
  PagedKvCache c = *PagedKvCache::Create(Config({0, 8}, 4, 64));
  PrefixCache pc(4);
  const std::vector<uint64_t> windows = {0, 8};
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const SeqId a = c.AddSequence();
  Step(c, a, 8);
  auto first = pc.Insert(c, PrefixCache::kRoot, PrefixCache::kRootHash, std::span(tokens).first(4),
                         std::vector<PageId>{c.block_table(a, 0)[0], c.block_table(a, 1)[0]});
  ASSERT_TRUE(first.ok());
  auto second = pc.Insert(c, first->entry, first->hash, std::span(tokens).subspan(4, 4),
                          std::vector<PageId>{c.block_table(a, 0)[1], -1});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(pc.size(), 3u);
  // Page 1 has no window page cached: a hit of 2 pages would need it.
  EXPECT_EQ(pc.Lookup(tokens, 2, windows).num_pages, 1u);
  // Offering it later fills the entry in.
  auto again = pc.Insert(c, first->entry, first->hash, std::span(tokens).subspan(4, 4),
                         std::vector<PageId>{c.block_table(a, 0)[1], c.block_table(a, 1)[1]});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->added);
  EXPECT_EQ(pc.Lookup(tokens, 2, windows).num_pages, 2u);
  ASSERT_TRUE(c.Release(a).ok());
  // Evicting everything leaves no entry behind.
  while (*pc.EvictOne(c)) {
  }
  EXPECT_EQ(pc.size(), 0u);
  EXPECT_FALSE(pc.HasEntry(first->entry));
  EXPECT_EQ(c.pool().num_used(), 0u);
}

}  // namespace
}  // namespace folio::kv
