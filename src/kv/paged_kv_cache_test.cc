#include "folio/kv/paged_kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "folio/core/checked_math.h"
#include "folio/core/splitmix64.h"

namespace folio::kv {
namespace {

constexpr uint64_t kLayers = 2, kHeads = 2, kDim = 3;
using Requests = std::vector<std::pair<SeqId, uint64_t>>;

PagedKvCache Make(uint64_t page_size, uint64_t num_pages, DType dtype = DType::kF32) {
  return *PagedKvCache::Create({kLayers, kHeads, kDim, page_size, num_pages, dtype, {}, 0});
}

AppendPlan Prepare(PagedKvCache& c, const Requests& reqs) {
  auto r = c.PrepareAppend(reqs);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->has_value()) << "pool exhausted";
  return std::move(**r);
}

// Row content that names its sequence tag, position, layer, role and head,
// exact in f32.
float Val(float tag, uint64_t pos, uint64_t layer, KvRole role, uint64_t h, uint64_t f) {
  return tag * 1000 + static_cast<float>(pos) + 0.5f * layer + 0.25f * h + f / 8.0f +
         (role == KvRole::kValue ? 500 : 0);
}

// One step: every new token of `seq` gets Val(tag, ...) in every layer.
void Append(PagedKvCache& c, SeqId seq, uint64_t n, float tag) {
  AppendPlan plan = Prepare(c, {{seq, n}});
  for (uint64_t l = 0; l < kLayers; ++l) {
    std::vector<float> k, v;
    for (uint64_t pos = c.length(seq); pos < c.length(seq) + n; ++pos)
      for (uint64_t h = 0; h < kHeads; ++h)
        for (uint64_t f = 0; f < kDim; ++f) {
          k.push_back(Val(tag, pos, l, KvRole::kKey, h, f));
          v.push_back(Val(tag, pos, l, KvRole::kValue, h, f));
        }
    ASSERT_TRUE(c.WriteRows(l, plan.slot_mapping(), k, v).ok());
  }
  c.Commit(plan);
}

void ExpectRows(const PagedKvCache& c, SeqId seq, uint64_t begin, uint64_t end, float tag) {
  float row[kDim];
  for (uint64_t pos = begin; pos < end; ++pos)
    for (uint64_t l = 0; l < kLayers; ++l)
      for (KvRole role : {KvRole::kKey, KvRole::kValue})
        for (uint64_t h = 0; h < kHeads; ++h) {
          c.ReadRow(l, role, seq, pos, h, row);
          for (uint64_t f = 0; f < kDim; ++f) ASSERT_EQ(row[f], Val(tag, pos, l, role, h, f));
        }
}

// Everything PrepareAppend / Abort may touch.
struct State {
  std::vector<uint64_t> lengths;
  std::vector<std::vector<PageId>> tables;
  std::vector<uint32_t> refcounts;
  std::vector<PageId> free_list;
  bool operator==(const State&) const = default;
};

State Capture(const PagedKvCache& c, const std::vector<SeqId>& seqs) {
  State s;
  for (SeqId id : seqs) {
    s.lengths.push_back(c.length(id));
    s.tables.emplace_back(c.block_table(id).begin(), c.block_table(id).end());
  }
  for (uint64_t p = 0; p < c.pool().num_pages(); ++p) s.refcounts.push_back(c.pool().refcount(p));
  s.free_list = c.pool().free_list();
  return s;
}

using Table = std::vector<PageId>;
Table TableOf(const PagedKvCache& c, SeqId s) {
  return {c.block_table(s).begin(), c.block_table(s).end()};
}

TEST(PagedKvCache, CreateRejectsAZeroDimension) {
  EXPECT_EQ(PagedKvCache::Create({2, 0, 4, 16, 8, DType::kF32, {}, 0}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(PagedKvCache, CreateRejectsMorePagesThanInt32Ids) {
  EXPECT_EQ(PagedKvCache::Create({1, 1, 1, 1, 1ull << 31, DType::kF32, {}, 0}).status().code(),
            StatusCode::kOutOfRange);
}

// The pages kept after a sequence's tail grow with the sequence (as many
// as it holds, at least 4), and another sequence's pages come from past
// them; the keeper then grows into them.
TEST(PagedKvCache, KeptPagesGrowWithTheSequence) {
  auto c = Make(1, 40);
  const SeqId a = c.AddSequence(), b = c.AddSequence();
  Append(c, a, 8, 1);  // pages 0-7; 8-15 kept
  Append(c, b, 1, 2);  // page 16; 17-20 kept
  EXPECT_EQ(c.block_table(b)[0], 16);
  Append(c, a, 1, 1);  // page 8; 9-17 asked for, 9-15 still free and kept
  EXPECT_EQ(c.block_table(a)[8], 8);
  Append(c, b, 1, 2);
  EXPECT_EQ(c.block_table(b)[1], 17);
  EXPECT_EQ(c.Stats().adjacent_page_pairs, c.Stats().page_pairs);
  // Under pressure kept pages are still handed out: nothing is withheld.
  const SeqId big = c.AddSequence();
  Append(c, big, c.pool().num_free(), 3);
  EXPECT_EQ(c.pool().num_free(), 0u);
}

TEST(PagedKvCache, CreateRejectsAnOverflowingSize) {
  EXPECT_EQ(
      PagedKvCache::Create({1ull << 40, 1ull << 20, 64, 16, 8, DType::kF32, {}, 0}).status().code(),
      StatusCode::kOutOfRange);
}

// A fresh pool hands out 0, 1, 2, ...: one sequence growing alone gets
// adjacent pages, and so do two growing in turn, because each keeps the
// free pages after its tail for itself (pages 0, 1, 2 and 5, 6, 7).
TEST(PagedKvCache, StatsCountPhysicallyAdjacentPagePairs) {
  auto alone = Make(2, 8);
  const SeqId a = alone.AddSequence();
  Append(alone, a, 6, 1);  // pages 0, 1, 2
  EXPECT_EQ(alone.Stats().page_pairs, 2u);
  EXPECT_EQ(alone.Stats().adjacent_page_pairs, 2u);
  auto turns = Make(2, 8);
  const SeqId x = turns.AddSequence(), y = turns.AddSequence();
  for (int i = 0; i < 3; ++i) {
    Append(turns, x, 2, 1);
    Append(turns, y, 2, 2);
  }
  EXPECT_EQ(turns.block_table(x)[2], 2);
  EXPECT_EQ(turns.block_table(y)[0], 5);
  EXPECT_EQ(turns.Stats().page_pairs, 4u);
  EXPECT_EQ(turns.Stats().adjacent_page_pairs, 4u);
}

// ---- quantized pages ---------------------------------------------------------

constexpr uint64_t kQDim = 16;

// Random rows [n, kHeads, kQDim] in [-amp, amp), from a seed.
std::vector<float> RandomRows(uint64_t n, float amp, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> rows(n * kHeads * kQDim);
  for (float& x : rows) x = amp * static_cast<float>(2 * rng.NextUnit() - 1);
  return rows;
}

// Writes keys/values [n, kHeads, kQDim] as the next n tokens of seq in
// every layer, in steps of the given sizes.
void AppendRows(PagedKvCache& c, SeqId seq, const std::vector<float>& keys,
                const std::vector<float>& values, const std::vector<uint64_t>& steps) {
  uint64_t done = 0;
  for (const uint64_t n : steps) {
    AppendPlan plan = Prepare(c, {{seq, n}});
    const auto first = static_cast<std::ptrdiff_t>(done * kHeads * kQDim);
    const auto count = static_cast<std::ptrdiff_t>(n * kHeads * kQDim);
    const std::vector<float> k(keys.begin() + first, keys.begin() + first + count);
    const std::vector<float> v(values.begin() + first, values.begin() + first + count);
    for (uint64_t l = 0; l < kLayers; ++l) {
      const Status s = c.WriteRows(l, plan.slot_mapping(), k, v);
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    c.Commit(plan);
    done += n;
  }
}

PagedKvCache MakeQuantized(DType dtype, uint64_t page_size = 8, uint64_t num_pages = 12) {
  return *PagedKvCache::Create({kLayers, kHeads, kQDim, page_size, num_pages, dtype, {}, 0});
}

TEST(PagedKvCache, QuantizedPoolsStartWithNaNScalesAndCountThemInBytes) {
  for (DType dtype : {DType::kI8, DType::kF8E4M3}) {
    auto c = MakeQuantized(dtype);
    const PagedKvView v = c.View(1);
    ASSERT_NE(v.key_scales, nullptr);
    ASSERT_NE(v.value_scales, nullptr);
    for (size_t i = 0; i < 12 * kHeads * 8; ++i) {
      EXPECT_TRUE(std::isnan(v.key_scales[i]) && std::isnan(v.value_scales[i]));
    }
    EXPECT_EQ(c.scale_bytes(), 8 * kHeads * sizeof(float));
    EXPECT_EQ(c.Stats().kv_bytes_total, 12 * kLayers * 2 * (8 * kHeads * kQDim + 8 * kHeads * 4));
  }
  EXPECT_EQ(Make(4, 3).View(0).key_scales, nullptr);
  EXPECT_EQ(Make(4, 3).scale_bytes(), 0u);
}

// Every row has its own scale, its largest magnitude over the largest code
// (at View's (page * heads + head) * page_size + slot), and reads back
// within half a code step of what was written: a row 10x its page's others
// saturates nothing and costs them no resolution.
TEST(PagedKvCache, QuantizedRowsReadBackWithinTheirOwnStep) {
  for (DType dtype : {DType::kI8, DType::kF8E4M3}) {
    auto c = MakeQuantized(dtype);
    const SeqId seq = c.AddSequence();
    const uint64_t n = 37;
    auto keys = RandomRows(n, 1.0f, 1), values = RandomRows(n, 3.0f, 2);
    // Tokens 0 (the first slot) and 9 of key head 0 are 10x the rest.
    for (const uint64_t pos : {0, 9}) {
      for (uint64_t f = 0; f < kQDim; ++f) keys[(pos * kHeads) * kQDim + f] *= 10.0f;
    }
    AppendRows(c, seq, keys, values, {n});
    const bool i8 = dtype == DType::kI8;
    const float code_max = i8 ? 127.0f : 448.0f;
    float row[kQDim];
    for (uint64_t l = 0; l < kLayers; ++l) {
      const PagedKvView v = c.View(l);
      for (KvRole role : {KvRole::kKey, KvRole::kValue}) {
        const auto& src = role == KvRole::kKey ? keys : values;
        const float* scales = role == KvRole::kKey ? v.key_scales : v.value_scales;
        for (uint64_t pos = 0; pos < n; ++pos) {
          const auto page = static_cast<uint64_t>(c.block_table(seq)[pos / 8]);
          for (uint64_t h = 0; h < kHeads; ++h) {
            const float* x = src.data() + (pos * kHeads + h) * kQDim;
            float amax = 0;
            for (uint64_t f = 0; f < kQDim; ++f) amax = std::max(amax, std::abs(x[f]));
            const float scale = amax / code_max;
            ASSERT_EQ(scales[(page * kHeads + h) * 8 + pos % 8], scale) << pos << " " << h;
            c.ReadRow(l, role, seq, pos, h, row);
            for (uint64_t f = 0; f < kQDim; ++f) {
              // i8: half a step; f8e4m3: half an ulp of 3 mantissa bits
              // (relative 2^-4) or, below 2^-6, half the subnormal step.
              const double bound =
                  i8 ? scale * 0.5 * (1 + 1e-5)
                     : std::max(std::abs(x[f]) * 0x1.0p-4, scale * 0x1.0p-10) * (1 + 1e-5);
              ASSERT_LE(std::abs(double{row[f]} - x[f]), bound)
                  << DTypeName(dtype) << " pos " << pos << " head " << h << " f " << f;
            }
          }
        }
      }
    }
  }
}

// A row's codes and scale are a function of the row alone: the same rows
// written in steps of any size, into pages of any size, after other rows
// or alone, hold the same bits.
TEST(PagedKvCache, QuantizedRowsAreTheSameWhateverTheStepsPagesAndNeighbours) {
  for (DType dtype : {DType::kI8, DType::kF8E4M3}) {
    const auto keys = RandomRows(45, 2.0f, 3), values = RandomRows(45, 0.5f, 4);
    std::vector<std::vector<float>> seen;
    std::vector<std::vector<std::byte>> pages;
    for (const uint64_t page_size : {8, 5, 16}) {
      for (const std::vector<uint64_t>& steps : std::vector<std::vector<uint64_t>>{
               {45}, {1, 1, 1, 42}, {7, 1, 20, 12, 5}, {8, 8, 8, 8, 8, 5}}) {
        auto c = MakeQuantized(dtype, page_size, 16);
        // Another sequence's rows first, in the same pages' pool.
        AppendRows(c, c.AddSequence(), RandomRows(3, 9.0f, 5), RandomRows(3, 9.0f, 6), {3});
        const SeqId seq = c.AddSequence();
        AppendRows(c, seq, keys, values, steps);
        std::vector<float> rows;
        float row[kQDim];
        for (uint64_t l = 0; l < kLayers; ++l) {
          for (KvRole role : {KvRole::kKey, KvRole::kValue}) {
            for (uint64_t pos = 0; pos < 45; ++pos) {
              for (uint64_t h = 0; h < kHeads; ++h) {
                c.ReadRow(l, role, seq, pos, h, row);
                rows.insert(rows.end(), row, row + kQDim);
              }
            }
          }
        }
        seen.push_back(std::move(rows));
        if (page_size != 8) continue;
        // With one page size, the pages' bytes and scales too (the last
        // page's unwritten slots read as zeros with scale 1).
        std::vector<std::byte> bytes;
        for (uint64_t l = 0; l < kLayers; ++l) {
          for (KvRole role : {KvRole::kKey, KvRole::kValue}) {
            const std::span<const PageId> table = c.block_table(seq);
            for (size_t i = 0; i < table.size(); ++i) {
              const uint64_t live = std::min<uint64_t>(8, 45 - 8 * i);
              std::vector<std::byte> b(c.page_bytes());
              c.ReadPageTokenMajor(l, role, table[i], live, b);
              std::vector<float> sc(8 * kHeads);
              c.ReadPageScales(l, role, table[i], live, sc);
              for (size_t j = 0; j < sc.size(); ++j) {
                ASSERT_TRUE(j / kHeads < live || sc[j] == 1.0f) << j;
              }
              const auto* sb = reinterpret_cast<const std::byte*>(sc.data());
              bytes.insert(bytes.end(), b.begin(), b.end());
              bytes.insert(bytes.end(), sb, sb + sc.size() * sizeof(float));
            }
          }
        }
        pages.push_back(std::move(bytes));
      }
    }
    for (size_t i = 1; i < seen.size(); ++i) {
      ASSERT_EQ(std::memcmp(seen[i].data(), seen[0].data(), seen[0].size() * sizeof(float)), 0)
          << DTypeName(dtype) << " run " << i;
    }
    for (size_t i = 1; i < pages.size(); ++i) {
      EXPECT_EQ(pages[i], pages[0]) << DTypeName(dtype) << " split " << i;
    }
  }
}

// Copy-on-write takes the scales along.
TEST(PagedKvCache, QuantizedCopyOnWriteKeepsScales) {
  auto c = MakeQuantized(DType::kI8);
  const SeqId a = c.AddSequence();
  AppendRows(c, a, RandomRows(11, 1.0f, 5), RandomRows(11, 1.0f, 6), {11});
  const SeqId b = *c.Fork(a);
  AppendRows(c, b, RandomRows(1, 1.0f, 7), RandomRows(1, 1.0f, 8), {1});
  ASSERT_NE(c.block_table(a)[1], c.block_table(b)[1]);  // the tail was copied
  float ra[kQDim], rb[kQDim];
  for (uint64_t pos = 0; pos < 11; ++pos) {
    c.ReadRow(1, KvRole::kValue, a, pos, 1, ra);
    c.ReadRow(1, KvRole::kValue, b, pos, 1, rb);
    ASSERT_EQ(std::memcmp(ra, rb, sizeof ra), 0) << pos;
  }
}

// A row of zeros, or of subnormals whose scale would underflow, takes
// scale 1 and reads back as zeros; its neighbours keep their own step.
TEST(PagedKvCache, QuantizedTinyRowsReadBackAsZeros) {
  for (DType dtype : {DType::kI8, DType::kF8E4M3}) {
    for (const float first : {0.0f, 1e-44f}) {
      auto c = MakeQuantized(dtype);
      const SeqId seq = c.AddSequence();
      std::vector<float> rows(2 * kHeads * kQDim, first);
      for (size_t i = kHeads * kQDim; i < rows.size(); ++i) rows[i] = (i % 2 ? 0.0f : 0.25f);
      AppendRows(c, seq, rows, rows, {2});
      float row[kQDim];
      c.ReadRow(0, KvRole::kKey, seq, 0, 0, row);
      for (uint64_t f = 0; f < kQDim; ++f) EXPECT_EQ(row[f], 0.0f) << DTypeName(dtype);
      c.ReadRow(0, KvRole::kKey, seq, 1, 0, row);
      for (uint64_t f = 0; f < kQDim; ++f) {
        EXPECT_NEAR(row[f], rows[kHeads * kQDim + f], 0.25f / 127 / 2)
            << DTypeName(dtype) << " " << first;
      }
    }
  }
}

TEST(PagedKvCache, PageScalesRoundTripTokenMajorAndRefuseBadScalesAndSharedPages) {
  auto c = MakeQuantized(DType::kF8E4M3);
  auto pages = **c.HoldNewPages(1);
  std::vector<float> ok(8 * kHeads);
  for (size_t i = 0; i < ok.size(); ++i) ok[i] = 0.5f + static_cast<float>(i);
  EXPECT_TRUE(c.WritePageScales(0, KvRole::kKey, pages[0], ok).ok());
  std::vector<float> got(8 * kHeads);
  c.ReadPageScales(0, KvRole::kKey, pages[0], 8, got);
  EXPECT_EQ(got, ok);
  // Token-major in, [heads, page_size] in the pool.
  const float* pool = c.View(0).key_scales + static_cast<uint64_t>(pages[0]) * 8 * kHeads;
  EXPECT_EQ(pool[1 * 8 + 3], ok[3 * kHeads + 1]);
  c.ReadPageScales(0, KvRole::kKey, pages[0], 3, got);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], i < 3 * kHeads ? ok[i] : 1.0f) << i;
  for (const float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> in = ok;
    in[2 * kHeads + 1] = bad;
    const Status s = c.WritePageScales(0, KvRole::kValue, pages[0], in);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("slot 2 head 1 scale"), std::string::npos) << s.message();
  }
  ASSERT_TRUE(c.HoldPage(pages[0]).ok());
  EXPECT_EQ(c.WritePageScales(0, KvRole::kKey, pages[0], ok).code(),
            StatusCode::kFailedPrecondition);
}

TEST(PagedKvCache, UnwrittenSlotsStartAsNaN) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kF64}) {
    auto c = Make(4, 3, dtype);
    const PagedKvView v = c.View(1);
    for (size_t i = 0; i < 3 * kHeads * 4 * kDim; ++i) {
      ASSERT_TRUE(std::isnan(LoadElement<float>(dtype, v.key_pages, i)));
      ASSERT_TRUE(std::isnan(LoadElement<float>(dtype, v.value_pages, i)));
    }
  }
}

// The worked example's fixed table made literal: lane b's logical page lp
// is page table[lp] * batch + b, claimed only when the lane reaches it.
TEST(PagedKvCache, PlacedSequencesClaimTheirGivenPages) {
  PagedKvCache c = Make(3, 8);
  const std::vector<PageId> table = {2, 0, 3, 1};
  std::vector<SeqId> lanes;
  for (PageId b = 0; b < 2; ++b) {
    std::vector<PageId> placement;
    for (PageId lp : table) placement.push_back(lp * 2 + b);
    lanes.push_back(*c.AddPlacedSequence(placement));
  }
  auto plan = Prepare(c, {{lanes[0], 7}, {lanes[1], 4}});
  EXPECT_EQ(std::vector<int64_t>(plan.slot_mapping().begin(), plan.slot_mapping().end()),
            (std::vector<int64_t>{12, 13, 14, 0, 1, 2, 18, 15, 16, 17, 3}));
  c.Commit(plan);
  EXPECT_EQ(std::vector<PageId>(c.block_table(lanes[0]).begin(), c.block_table(lanes[0]).end()),
            (std::vector<PageId>{4, 0, 6}));
  EXPECT_EQ(std::vector<PageId>(c.block_table(lanes[1]).begin(), c.block_table(lanes[1]).end()),
            (std::vector<PageId>{5, 1}));
  // Lane 0's last page is 2 * 1 + 0 = 2, still free: another sequence
  // takes it first, and lane 0 cannot grow until it is given back.
  const SeqId other = c.AddSequence();
  c.Commit(Prepare(c, {{other, 3}}));
  EXPECT_EQ(c.block_table(other)[0], 2);
  auto blocked = c.PrepareAppend(Requests{{lanes[0], 3}});
  ASSERT_TRUE(blocked.ok());
  EXPECT_FALSE(blocked->has_value());
  ASSERT_TRUE(c.Release(other).ok());
  c.Commit(Prepare(c, {{lanes[0], 3}}));
  EXPECT_EQ(c.block_table(lanes[0]).back(), 2);
  // Beyond the placement is an error, not an exhausted pool.
  EXPECT_EQ(c.PrepareAppend(Requests{{lanes[0], 3}}).status().code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(c.pool().CheckInvariants().ok());
}

TEST(PagedKvCache, PlacedSequenceClaimsAreUndoneByAbortAndWinOverAllocations) {
  PagedKvCache c = Make(2, 4);
  const SeqId placed = *c.AddPlacedSequence({1, 0});
  const SeqId free_choice = c.AddSequence();
  const std::vector<PageId> before = c.pool().free_list();
  // The unplaced request comes first, but page 1 is the placed one's.
  auto plan = Prepare(c, {{free_choice, 2}, {placed, 3}});
  EXPECT_EQ(c.block_table(placed)[0], 1);
  EXPECT_EQ(c.block_table(placed)[1], 0);
  EXPECT_NE(c.block_table(free_choice)[0], 0);
  EXPECT_NE(c.block_table(free_choice)[0], 1);
  c.Abort(std::move(plan));
  EXPECT_EQ(c.pool().free_list(), before);
  EXPECT_TRUE(c.block_table(placed).empty());
  EXPECT_TRUE(c.pool().CheckInvariants().ok());
}

TEST(PagedKvCache, PlacementRejectsBadPages) {
  PagedKvCache c = Make(2, 4);
  EXPECT_EQ(c.AddPlacedSequence({0, 4}).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(c.AddPlacedSequence({0, -1}).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(c.AddPlacedSequence({1, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.num_sequences(), 0u);
}

TEST(PagedKvCache, DoubleRowsAreExactInAnF64CacheAndRefusedByQuantized) {
  PagedKvCache c = Make(2, 2, DType::kF64);
  const SeqId s = c.AddSequence();
  auto plan = Prepare(c, {{s, 1}});
  const double third = 1.0 / 3.0;
  std::vector<double> k(kHeads * kDim, third), v(kHeads * kDim, -third);
  ASSERT_TRUE(
      c.WriteRows(0, plan.slot_mapping(), std::span<const double>(k), std::span<const double>(v))
          .ok());
  k[1] = std::numeric_limits<double>::infinity();
  EXPECT_EQ(
      c.WriteRows(1, plan.slot_mapping(), std::span<const double>(k), std::span<const double>(v))
          .code(),
      StatusCode::kInvalidArgument);
  c.Commit(plan);
  const PagedKvView view = c.View(0);
  double got = 0;
  const auto slot = static_cast<uint64_t>(c.block_table(s)[0]);
  std::memcpy(&got, view.key_pages + 8 * (view.RowIndex(slot, 1, 0) + 2), sizeof got);
  EXPECT_EQ(got, third);
  PagedKvCache q = MakeQuantized(DType::kI8);
  const SeqId t = q.AddSequence();
  auto qplan = Prepare(q, {{t, 1}});
  const std::vector<double> row(kHeads * kQDim, 0.5);
  EXPECT_EQ(q.WriteRows(0, qplan.slot_mapping(), std::span<const double>(row),
                        std::span<const double>(row))
                .code(),
            StatusCode::kInvalidArgument);
  q.Abort(std::move(qplan));
}

TEST(PagedKvCache, AllocatesAPageOnlyWhenTheTailIsFull) {
  auto c = Make(4, 8);
  const SeqId s = c.AddSequence();
  std::vector<size_t> pages;
  for (int i = 0; i < 9; ++i) {
    Append(c, s, 1, 1);
    pages.push_back(c.block_table(s).size());
  }
  EXPECT_EQ(pages, (std::vector<size_t>{1, 1, 1, 1, 2, 2, 2, 2, 3}));
  EXPECT_EQ(TableOf(c, s), (Table{0, 1, 2}));
  EXPECT_EQ(c.pool().total_allocations(), 3u);
}

TEST(PagedKvCache, PrepareDoesNotAdvanceLengthsUntilCommit) {
  auto c = Make(4, 8);
  const SeqId s = c.AddSequence();
  AppendPlan plan = Prepare(c, {{s, 5}});
  EXPECT_EQ(c.length(s), 0u);
  EXPECT_EQ(c.block_table(s).size(), 2u);
  EXPECT_EQ(std::vector<int64_t>(plan.slot_mapping().begin(), plan.slot_mapping().end()),
            (std::vector<int64_t>{0, 1, 2, 3, 4}));
  c.Commit(plan);
  EXPECT_EQ(c.length(s), 5u);
}

TEST(PagedKvCache, ForkSharesEveryPage) {
  auto c = Make(4, 8);
  const SeqId a = c.AddSequence();
  Append(c, a, 6, 1);
  const SeqId b = *c.Fork(a);
  EXPECT_EQ(TableOf(c, b), TableOf(c, a));
  EXPECT_EQ(c.length(b), 6u);
  EXPECT_EQ(c.pool().refcount(0), 2u);
  EXPECT_EQ(c.pool().refcount(1), 2u);
  EXPECT_EQ(c.pool().num_used(), 2u);
  ExpectRows(c, b, 0, 6, 1);
}

TEST(PagedKvCache, AppendingToAForkCopiesItsSharedPartialTail) {
  auto c = Make(4, 8);
  const SeqId a = c.AddSequence();
  Append(c, a, 6, 1);
  const SeqId b = *c.Fork(a);
  Append(c, b, 1, 2);
  // The copy would follow page 0, which is taken; pages 2-5 are kept after
  // a's tail, so it is the list's front, 6.
  EXPECT_EQ(TableOf(c, a), (Table{0, 1}));
  EXPECT_EQ(TableOf(c, b), (Table{0, 6}));
  EXPECT_EQ(c.pool().refcount(0), 2u);
  EXPECT_EQ(c.pool().refcount(1), 1u);
  EXPECT_EQ(c.pool().refcount(6), 1u);
  ExpectRows(c, a, 0, 6, 1);
  ExpectRows(c, b, 0, 6, 1);  // copied in every layer and role
  ExpectRows(c, b, 6, 7, 2);
  // The parent's page never saw the fork's token: its slot 2 is still NaN.
  for (uint64_t l = 0; l < kLayers; ++l) {
    const PagedKvView v = c.View(l);
    const uint64_t i = v.RowIndex(1, 0, 2);
    EXPECT_TRUE(std::isnan(LoadElement<float>(v.dtype, v.key_pages, i)));
  }
}

TEST(PagedKvCache, AppendingToAForkWithAFullSharedTailAllocatesWithoutCopying) {
  auto c = Make(4, 8);
  const SeqId a = c.AddSequence();
  Append(c, a, 4, 1);
  const SeqId b = *c.Fork(a);
  Append(c, b, 1, 2);
  EXPECT_EQ(TableOf(c, a), (Table{0}));
  EXPECT_EQ(TableOf(c, b), (Table{0, 1}));
  EXPECT_EQ(c.pool().refcount(0), 2u);
  EXPECT_EQ(c.pool().total_allocations(), 2u);
}

TEST(PagedKvCache, TheLastSharerOfATailInOneStepWritesInPlace) {
  auto c = Make(4, 8);
  const SeqId a = c.AddSequence();
  Append(c, a, 2, 1);
  const SeqId b = *c.Fork(a);
  AppendPlan plan = Prepare(c, {{a, 1}, {b, 1}});
  EXPECT_EQ(TableOf(c, a), (Table{5}));  // a copied (1-4 are kept after page 0)
  EXPECT_EQ(TableOf(c, b), (Table{0}));  // b is then the only holder
  EXPECT_EQ(std::vector<int64_t>(plan.slot_mapping().begin(), plan.slot_mapping().end()),
            (std::vector<int64_t>{22, 2}));
  EXPECT_EQ(c.pool().num_used(), 2u);
  c.Commit(plan);
}

TEST(PagedKvCache, ExhaustionChangesNothing) {
  auto c = Make(4, 3);
  const SeqId a = c.AddSequence();
  Append(c, a, 6, 1);
  const SeqId b = *c.Fork(a);
  const State before = Capture(c, {a, b});
  // a copies its shared tail (1 page); b then owns page 1 and needs 1 more.
  auto r = c.PrepareAppend(Requests{{a, 1}, {b, 3}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  EXPECT_EQ(Capture(c, {a, b}), before);
  EXPECT_EQ(c.pool().total_allocations(), 2u);
  EXPECT_TRUE(c.PrepareAppend(Requests{{a, 1}})->has_value());  // no plan was left pending
}

TEST(PagedKvCache, AbortRestoresTablesRefcountsAndFreeListExactly) {
  auto c = Make(4, 12);
  const SeqId a = c.AddSequence(), tmp = c.AddSequence();
  Append(c, tmp, 8, 9);
  Append(c, a, 6, 1);
  ASSERT_TRUE(c.Release(tmp).ok());  // free list is no longer 0, 1, 2, ...
  const SeqId b = *c.Fork(a);
  const State before = Capture(c, {a, b});
  AppendPlan plan = Prepare(c, {{b, 7}, {a, 3}});  // b copies, both grow
  const std::vector<int64_t> slots(plan.slot_mapping().begin(), plan.slot_mapping().end());
  ASSERT_NE(Capture(c, {a, b}), before);
  c.Abort(std::move(plan));
  EXPECT_EQ(Capture(c, {a, b}), before);
  EXPECT_TRUE(c.pool().CheckInvariants().ok());
  ExpectRows(c, a, 0, 6, 1);
  // Deterministic: the same request gets the same slots again.
  AppendPlan again = Prepare(c, {{b, 7}, {a, 3}});
  EXPECT_EQ(std::vector<int64_t>(again.slot_mapping().begin(), again.slot_mapping().end()), slots);
  c.Abort(std::move(again));
}

TEST(PagedKvCache, APendingPlanBlocksForkReleaseAndPrepare) {
  auto c = Make(4, 8);
  const SeqId a = c.AddSequence();
  AppendPlan plan = Prepare(c, {{a, 1}});
  EXPECT_EQ(c.Fork(a).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.Release(a).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.PrepareAppend(Requests{{a, 1}}).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.AddSequence(), a + 1);
  c.Commit(plan);
}

TEST(PagedKvCache, UnknownOrRepeatedSequenceInPrepareIsAnError) {
  auto c = Make(4, 8);
  const SeqId a = c.AddSequence();
  EXPECT_EQ(c.PrepareAppend(Requests{{a, 1}, {a + 7, 1}}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c.PrepareAppend(Requests{{a, 1}, {a, 2}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(c.pool().num_used(), 0u);
  EXPECT_TRUE(c.PrepareAppend(Requests{{a, 1}})->has_value());
}

TEST(PagedKvCache, ReleaseReturnsEveryPageExactlyOnce) {
  auto c = Make(4, 8);
  const SeqId a = c.AddSequence();
  Append(c, a, 9, 1);  // pages 0, 1, 2
  const SeqId b = *c.Fork(a);
  Append(c, b, 1, 2);  // b copies page 2 to 3
  ASSERT_TRUE(c.Release(a).ok());
  EXPECT_EQ(c.pool().num_used(), 3u);  // 0 and 1 held by b, 2 freed
  EXPECT_EQ(c.pool().refcount(2), 0u);
  ExpectRows(c, b, 0, 9, 1);
  ASSERT_TRUE(c.Release(b).ok());
  EXPECT_EQ(c.pool().num_free(), c.pool().num_pages());
  EXPECT_TRUE(c.pool().CheckInvariants().ok());
  EXPECT_EQ(c.Release(b).code(), StatusCode::kNotFound);
}

TEST(PagedKvCache, BatchMetadataOnAHandWorkedExample) {
  auto c = Make(4, 16);
  const SeqId a = c.AddSequence(), b = c.AddSequence(), s = c.AddSequence();
  Append(c, a, 5, 1);                              // pages 0, 1 (2-5 kept for a)
  Append(c, s, 3, 2);                              // page 6 (7-10 kept for s)
  AppendPlan plan = Prepare(c, {{s, 2}, {a, 1}});  // s grows into page 7
  auto m = *c.BuildBatchMetadata(std::vector<SeqId>{a, b, s}, &plan);
  EXPECT_EQ(m.batch, 3u);
  EXPECT_EQ(*BatchContexts(ViewOf(m), c.config().page_size), (std::vector<uint64_t>{6, 0, 5}));
  EXPECT_EQ(m.indptr, (std::vector<int32_t>{0, 2, 2, 4}));
  EXPECT_EQ(m.indices, (std::vector<int32_t>{0, 1, 6, 7}));
  EXPECT_EQ(m.last_page_len, (std::vector<int32_t>{2, 0, 1}));
  EXPECT_EQ(m.query_indptr, (std::vector<int32_t>{0, 1, 1, 3}));
  EXPECT_EQ(m.slot_mapping, (std::vector<int64_t>{5, 27, 28}));  // listed order

  auto before = *c.BuildBatchMetadata(std::vector<SeqId>{a, b, s}, nullptr);
  EXPECT_EQ(before.indices, (std::vector<int32_t>{0, 1, 6}));
  EXPECT_EQ(*BatchContexts(ViewOf(before), c.config().page_size), (std::vector<uint64_t>{5, 0, 3}));
  EXPECT_EQ(before.indptr, (std::vector<int32_t>{0, 2, 2, 3}));
  EXPECT_EQ(before.last_page_len, (std::vector<int32_t>{1, 0, 3}));
  EXPECT_EQ(before.query_indptr, (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_TRUE(before.slot_mapping.empty());
  c.Commit(plan);
}

TEST(PagedKvCache, BatchMetadataRejectsAPlannedSequenceThatIsNotListed) {
  auto c = Make(4, 8);
  const SeqId a = c.AddSequence(), b = c.AddSequence();
  AppendPlan plan = Prepare(c, {{a, 1}, {b, 1}});
  EXPECT_EQ(c.BuildBatchMetadata(std::vector<SeqId>{a}, &plan).status().code(),
            StatusCode::kInvalidArgument);
  c.Commit(plan);
  EXPECT_EQ(c.BuildBatchMetadata(std::vector<SeqId>{a, b}, &plan).status().code(),
            StatusCode::kFailedPrecondition);  // stale plan
}

// Writes random rows to a fresh sequence and reads them back; `stored` is
// the value the dtype keeps of x.
template <typename Fn>
void RoundTrip(DType dtype, Fn stored) {
  auto c = Make(4, 8, dtype);
  const SeqId s = c.AddSequence();
  AppendPlan plan = Prepare(c, {{s, 6}});
  SplitMix64 rng(42);
  std::vector<std::vector<float>> k(kLayers), v(kLayers);
  for (uint64_t l = 0; l < kLayers; ++l) {
    for (size_t i = 0; i < 6 * kHeads * kDim; ++i) {
      k[l].push_back(static_cast<float>(rng.NextUnit() * 4 - 2));
      v[l].push_back(static_cast<float>(rng.NextUnit() * 4 - 2));
    }
    ASSERT_TRUE(c.WriteRows(l, plan.slot_mapping(), k[l], v[l]).ok());
  }
  c.Commit(plan);
  float row[kDim];
  for (uint64_t l = 0; l < kLayers; ++l)
    for (uint64_t pos = 0; pos < 6; ++pos)
      for (uint64_t h = 0; h < kHeads; ++h) {
        const size_t src = (pos * kHeads + h) * kDim;
        c.ReadRow(l, KvRole::kKey, s, pos, h, row);
        for (uint64_t f = 0; f < kDim; ++f) ASSERT_EQ(row[f], stored(k[l][src + f]));
        c.ReadRow(l, KvRole::kValue, s, pos, h, row);
        for (uint64_t f = 0; f < kDim; ++f) ASSERT_EQ(row[f], stored(v[l][src + f]));
      }
}

TEST(PagedKvCache, WriteRowsRoundTripsF32Exactly) {
  RoundTrip(DType::kF32, [](float x) { return x; });
}

TEST(PagedKvCache, WriteRowsRoundsBF16ToNearestEven) {
  RoundTrip(DType::kBF16, [](float x) { return BF16BitsToF32(F32ToBF16Bits(x)); });
}

TEST(PagedKvCache, WriteRowsRoundsF16ToNearestEven) {
  RoundTrip(DType::kF16, [](float x) { return F16BitsToF32(F32ToF16Bits(x)); });
}

TEST(PagedKvCache, WriteRowsRejectsTheWrongRowCount) {
  auto c = Make(4, 8);
  AppendPlan plan = Prepare(c, {{c.AddSequence(), 2}});
  std::vector<float> rows(2 * kHeads * kDim - 1, 0.f);
  EXPECT_EQ(c.WriteRows(0, plan.slot_mapping(), rows, rows).code(), StatusCode::kInvalidArgument);
  c.Commit(plan);
}

TEST(PagedKvCache, WriteRowsRejectsASlotOutsideThePool) {
  auto c = Make(4, 8);
  std::vector<float> rows(kHeads * kDim, 0.f);
  EXPECT_EQ(c.WriteRows(0, std::vector<int64_t>{32}, rows, rows).code(), StatusCode::kOutOfRange);
}

TEST(PagedKvCache, WriteRowsRefusesFreeAndSharedPages) {
  auto c = Make(4, 8);
  const SeqId a = c.AddSequence();
  Append(c, a, 2, 1);
  ASSERT_TRUE(c.Fork(a).ok());
  std::vector<float> rows(kHeads * kDim, 0.f);
  EXPECT_EQ(c.WriteRows(0, std::vector<int64_t>{2}, rows, rows).code(),
            StatusCode::kFailedPrecondition);  // page 0, shared
  EXPECT_EQ(c.WriteRows(0, std::vector<int64_t>{4}, rows, rows).code(),
            StatusCode::kFailedPrecondition);  // page 1, free
  ExpectRows(c, a, 0, 2, 1);
}

TEST(PagedKvCache, WriteRowsRejectsNonFiniteValuesAndWritesNothing) {
  auto c = Make(4, 8);
  const SeqId s = c.AddSequence();
  AppendPlan plan = Prepare(c, {{s, 2}});
  std::vector<float> k(2 * kHeads * kDim, 1.f), v = k;
  v.back() = std::numeric_limits<float>::infinity();
  EXPECT_EQ(c.WriteRows(0, plan.slot_mapping(), k, v).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(std::isnan(LoadElement<float>(DType::kF32, c.View(0).key_pages, 0)));
  c.Abort(std::move(plan));
}

TEST(PagedKvCache, StatsCountASharedTailOnce) {
  auto c = Make(4, 8);
  const SeqId a = c.AddSequence();
  Append(c, a, 6, 1);
  const SeqId b = *c.Fork(a);
  EXPECT_EQ(c.Stats().tail_slots_unwritten, 2u);
  Append(c, b, 1, 2);  // b's copy has 3 of 4 slots, a's tail still 2 of 4
  const PoolStats st = c.Stats();
  EXPECT_EQ(st.tail_slots_unwritten, 3u);
  EXPECT_EQ(st.pages_used, 3u);
  EXPECT_EQ(st.pages_free, 5u);
  EXPECT_EQ(st.peak_pages_used, 3u);
  const uint64_t page_bytes = kLayers * 2 * kHeads * 4 * kDim * sizeof(float);
  EXPECT_EQ(st.kv_bytes_total, 8 * page_bytes);
  EXPECT_EQ(st.kv_bytes_used, 3 * page_bytes);
}

// --- Property test: random traffic against a plain shadow model. ----------

constexpr uint64_t kRow = kLayers * 2 * kHeads * kDim;  // floats per position
using Shadow = std::map<SeqId, std::vector<float>>;     // [length, L, 2, H, d]

std::vector<SeqId> Ids(const Shadow& shadow) {
  std::vector<SeqId> ids;
  for (const auto& entry : shadow) ids.push_back(entry.first);
  return ids;
}

// Conservation, table sizes, refcount = number of table references plus
// holds, the kept count of hold-only pages, and every live row equal to
// what its sequence wrote.
void CheckAgainstShadow(const PagedKvCache& c, const Shadow& shadow,
                        const std::vector<PageId>& held) {
  const Status inv = c.pool().CheckInvariants();
  ASSERT_TRUE(inv.ok()) << inv.ToString();
  const uint64_t ps = c.config().page_size;
  std::vector<uint32_t> refs(c.pool().num_pages(), 0);
  for (const auto& [id, rows] : shadow) {
    const uint64_t len = rows.size() / kRow;
    ASSERT_EQ(c.length(id), len);
    ASSERT_EQ(c.block_table(id).size(), CeilDiv(len, ps));
    for (PageId p : c.block_table(id)) ++refs[static_cast<size_t>(p)];
    std::vector<float> got(rows.size());
    for (uint64_t pos = 0, i = 0; pos < len; ++pos)
      for (uint64_t l = 0; l < kLayers; ++l)
        for (KvRole role : {KvRole::kKey, KvRole::kValue})
          for (uint64_t h = 0; h < kHeads; ++h, i += kDim) c.ReadRow(l, role, id, pos, h, &got[i]);
    ASSERT_EQ(got, rows) << "sequence " << id;
  }
  std::vector<uint32_t> holds(refs.size(), 0);
  for (PageId p : held) ++holds[static_cast<size_t>(p)];
  uint64_t held_only = 0;
  for (uint64_t p = 0; p < refs.size(); ++p) {
    const auto page = static_cast<PageId>(p);
    ASSERT_EQ(c.pool().refcount(page), refs[p] + holds[p]) << p;
    ASSERT_EQ(c.holds(page), holds[p]) << p;
    held_only += holds[p] > 0 && refs[p] == 0;
  }
  ASSERT_EQ(c.pages_held_only(), held_only);
  ASSERT_EQ(c.Stats().pages_held_only, held_only);
}

void RunRandomTraffic(uint64_t page_size, uint64_t seed, int steps) {
  auto c = Make(page_size, 40);
  SplitMix64 rng(seed);
  auto pick = [&](uint64_t n) { return rng.NextU64() % n; };
  auto random_id = [&](const Shadow& s) { return std::next(s.begin(), pick(s.size()))->first; };
  Shadow shadow;
  std::vector<PageId> held;  // holds outside any sequence, as a prefix cache keeps
  int commits = 0, aborts = 0, exhausted = 0, shared_tails = 0, holds = 0;
  for (int step = 0; step < steps; ++step) {
    const uint64_t op = pick(12);
    if (op == 10 && !shadow.empty()) {
      // Hold any page of a sequence, tails included, so copy-on-write and
      // Abort also move hold-only pages.
      const auto table = c.block_table(random_id(shadow));
      if (!table.empty()) {
        held.push_back(table[pick(table.size())]);
        ASSERT_TRUE(c.HoldPage(held.back()).ok());
        ++holds;
      }
    } else if (op == 11 && !held.empty()) {
      const size_t i = pick(held.size());
      ASSERT_TRUE(c.DropPage(held[i]).ok());
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op == 0 || shadow.empty()) {
      shadow[c.AddSequence()];
    } else if (op == 1) {
      const SeqId parent = random_id(shadow);
      auto child = c.Fork(parent);
      ASSERT_TRUE(child.ok());
      shadow[*child] = shadow[parent];
    } else if (op == 2) {
      const SeqId id = random_id(shadow);
      ASSERT_TRUE(c.Release(id).ok());
      shadow.erase(id);
    } else {
      Requests reqs;
      for (const auto& entry : shadow)
        if (pick(2) == 0) reqs.push_back({entry.first, 1 + pick(20)});
      for (size_t i = reqs.size(); i > 1; --i) std::swap(reqs[i - 1], reqs[pick(i)]);
      for (const auto& [id, n] : reqs) {
        const auto t = c.block_table(id);
        shared_tails += c.length(id) % page_size != 0 && c.pool().refcount(t.back()) > 1;
      }
      const std::vector<SeqId> ids = Ids(shadow);
      const State before = Capture(c, ids);
      auto prepared = c.PrepareAppend(reqs);
      ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
      if (!prepared->has_value()) {
        ++exhausted;
        ASSERT_EQ(Capture(c, ids), before);
        const SeqId victim = random_id(shadow);  // make room, as a scheduler would
        ASSERT_TRUE(c.Release(victim).ok());
        shadow.erase(victim);
      } else {
        AppendPlan& plan = **prepared;
        const std::vector<int64_t> slots(plan.slot_mapping().begin(), plan.slot_mapping().end());
        // No two live writers: each slot is distinct and in a page only its
        // own sequence holds.
        ASSERT_EQ(std::set<int64_t>(slots.begin(), slots.end()).size(), slots.size());
        for (int64_t slot : slots)
          ASSERT_EQ(c.pool().refcount(static_cast<PageId>(slot / page_size)), 1u);
        std::vector<SeqId> batch;
        for (const auto& r : reqs) batch.push_back(r.first);
        auto meta = c.BuildBatchMetadata(batch, &plan);
        ASSERT_TRUE(meta.ok());
        ASSERT_EQ(meta->slot_mapping, slots);
        std::vector<float> rows(slots.size() * kRow);  // [token, L, 2, H, d]
        for (float& x : rows) x = static_cast<float>(rng.NextUnit() * 2 - 1);
        for (uint64_t l = 0; l < kLayers; ++l) {
          std::vector<float> k, v;
          for (size_t t = 0; t < slots.size(); ++t) {
            const float* row = &rows[t * kRow + l * 2 * kHeads * kDim];
            k.insert(k.end(), row, row + kHeads * kDim);
            v.insert(v.end(), row + kHeads * kDim, row + 2 * kHeads * kDim);
          }
          ASSERT_TRUE(c.WriteRows(l, slots, k, v).ok());
        }
        if (pick(5) == 0) {
          ++aborts;
          c.Abort(std::move(plan));
          ASSERT_EQ(Capture(c, ids), before);
        } else {
          ++commits;
          c.Commit(plan);
          size_t t = 0;
          for (const auto& [id, n] : reqs) {
            auto& dst = shadow[id];
            dst.insert(dst.end(), rows.begin() + t * kRow, rows.begin() + (t + n) * kRow);
            t += n;
          }
        }
      }
    }
    ASSERT_NO_FATAL_FAILURE(CheckAgainstShadow(c, shadow, held)) << "step " << step;
  }
  EXPECT_GT(commits, steps / 4);  // appends are 7 of 12 ops, 4 of 5 commit
  EXPECT_GT(aborts, steps / 40);
  EXPECT_GT(exhausted, steps / 100);
  if (page_size > 1) {
    EXPECT_GT(shared_tails, steps / 100);
  }
  EXPECT_GT(holds, steps / 40);
  for (const auto& entry : shadow) ASSERT_TRUE(c.Release(entry.first).ok());
  EXPECT_EQ(c.pages_held_only(), std::set<PageId>(held.begin(), held.end()).size());
  for (PageId p : held) ASSERT_TRUE(c.DropPage(p).ok());
  EXPECT_EQ(c.pages_held_only(), 0u);
  EXPECT_EQ(c.pool().num_free(), c.pool().num_pages());
  EXPECT_TRUE(c.pool().CheckInvariants().ok());
}

TEST(PagedKvCacheProperty, RandomTrafficMatchesAShadowModel) {
  for (uint64_t page_size : {1, 4, 7}) {
    SCOPED_TRACE(page_size);
    RunRandomTraffic(page_size, 1000 + page_size, 2000);
    if (HasFatalFailure()) return;
  }
}

// Import / export of whole pages: token-major bytes in, the same bytes out,
// and rows read back through a sequence built over the pages.
TEST(PagedKvCacheTest, PagesMoveInTokenMajorOrder) {
  PagedKvCache c = Make(3, 4, DType::kBF16);
  auto held = c.HoldNewPages(2);
  ASSERT_TRUE(held.ok() && held->has_value());
  EXPECT_FALSE(c.HoldNewPages(3)->has_value());  // only 2 left
  const std::vector<PageId> pages = **held;
  const uint64_t bytes = c.page_bytes();
  EXPECT_EQ(bytes, 3 * kHeads * kDim * 2);
  SplitMix64 rng(3);
  std::vector<std::vector<std::byte>> data(2 * kLayers * 2, std::vector<std::byte>(bytes));
  for (auto& d : data) {
    for (size_t i = 0; i < d.size(); i += 2) {
      // bf16 of a small finite value, so rows read as numbers
      const uint16_t v = static_cast<uint16_t>(0x3f80 | (rng.NextU64() & 0x7f));
      d[i] = static_cast<std::byte>(v & 0xff);
      d[i + 1] = static_cast<std::byte>(v >> 8);
    }
  }
  size_t k = 0;
  for (PageId p : pages) {
    for (uint64_t l = 0; l < kLayers; ++l) {
      for (KvRole role : {KvRole::kKey, KvRole::kValue}) {
        ASSERT_TRUE(c.WritePageTokenMajor(l, role, p, data[k++]).ok());
      }
    }
  }
  // 5 tokens over the two pages (page size 3).
  auto seq = c.AddSequence(pages, 5);
  ASSERT_TRUE(seq.ok()) << seq.status().ToString();
  EXPECT_EQ(c.AddSequence(pages, 7).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.AddSequence(pages, 3).status().code(), StatusCode::kInvalidArgument);
  for (PageId p : pages) ASSERT_TRUE(c.DropPage(p).ok());
  EXPECT_EQ(c.length(*seq), 5u);
  // Row (layer 1, value, position 4, head 1) is token 1 of page 1.
  float row[kDim];
  c.ReadRow(1, KvRole::kValue, *seq, 4, 1, row);
  const auto& page1_l1_value = data[2 * kLayers + 2 * 1 + 1];
  for (uint64_t f = 0; f < kDim; ++f) {
    EXPECT_EQ(row[f],
              LoadElement<float>(DType::kBF16, page1_l1_value.data(), (1 * kHeads + 1) * kDim + f));
  }
  // Reading back gives the bytes written, with slots past `live` zeroed.
  std::vector<std::byte> out(bytes);
  c.ReadPageTokenMajor(0, KvRole::kKey, pages[0], 3, out);
  EXPECT_EQ(out, data[0]);
  c.ReadPageTokenMajor(0, KvRole::kKey, pages[1], 2, out);
  const auto& page1_l0_key = data[2 * kLayers];
  const size_t live = 2 * kHeads * kDim * 2;
  EXPECT_TRUE(std::equal(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(live),
                         page1_l0_key.begin()));
  EXPECT_TRUE(std::all_of(out.begin() + static_cast<std::ptrdiff_t>(live), out.end(),
                          [](std::byte b) { return b == std::byte{0}; }));
  // A page someone else also references is not written.
  auto fork = c.Fork(*seq);
  ASSERT_TRUE(fork.ok());
  EXPECT_EQ(c.WritePageTokenMajor(0, KvRole::kKey, pages[0], data[0]).code(),
            StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c.Release(*fork).ok());
  ASSERT_TRUE(c.Release(*seq).ok());
  EXPECT_EQ(c.pool().num_free(), 4u);
}

}  // namespace
}  // namespace folio::kv

namespace folio::kv {
namespace {

TEST(PagedKvCache, TruncateReleasesPagesPastTheNewLengthAndKeepsTheRest) {
  PagedKvCache c = Make(4, 8);
  const SeqId s = c.AddSequence();
  Append(c, s, 6, 1);  // pages 0-1 hold tokens 0..5
  Append(c, s, 5, 2);  // a draft of 5: tokens 6..10, a third page
  const std::vector<PageId> before(c.block_table(s).begin(), c.block_table(s).end());
  ASSERT_EQ(before.size(), 3u);
  const uint64_t free_before = c.Stats().pages_free;
  ASSERT_TRUE(c.Truncate(s, 7).ok());  // keep one of the draft's tokens
  EXPECT_EQ(c.length(s), 7u);
  EXPECT_EQ(c.block_table(s).size(), 2u);
  EXPECT_EQ(c.Stats().pages_free, free_before + 1);
  EXPECT_EQ(c.Stats().tail_slots_unwritten, 1u);
  ExpectRows(c, s, 0, 6, 1);
  ExpectRows(c, s, 6, 7, 2);
  // The page released is the next one handed out, and appending continues
  // where the truncation left off.
  Append(c, s, 2, 3);
  EXPECT_EQ(c.block_table(s)[2], before[2]);
  ExpectRows(c, s, 7, 9, 3);
  ASSERT_TRUE(c.Truncate(s, 9).ok());  // its own length: nothing changes
  EXPECT_EQ(c.length(s), 9u);
}

TEST(PagedKvCache, TruncateRefusesGrowthUnknownSequencesAndPendingPlans) {
  PagedKvCache c = Make(4, 8);
  const SeqId s = c.AddSequence();
  Append(c, s, 3, 1);
  EXPECT_EQ(c.Truncate(s, 4).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(c.Truncate(s + 1, 0).code(), StatusCode::kNotFound);
  AppendPlan plan = Prepare(c, {{s, 1}});
  EXPECT_EQ(c.Truncate(s, 1).code(), StatusCode::kFailedPrecondition);
  c.Abort(std::move(plan));
  EXPECT_EQ(c.length(s), 3u);
  ASSERT_TRUE(c.Truncate(s, 0).ok());
  EXPECT_TRUE(c.block_table(s).empty());
  EXPECT_EQ(c.Stats().pages_used, 0u);
}

}  // namespace
}  // namespace folio::kv
