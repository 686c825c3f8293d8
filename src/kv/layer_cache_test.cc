#include "folio/kv/layer_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "folio/core/splitmix64.h"

namespace folio::kv {
namespace {

std::vector<double> RandomRows(uint64_t count, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<double> v(count);
  for (auto& x : v) x = 2 * rng.NextUnit() - 1;
  return v;
}

LayerCache MakeCache(PageTableLayout layout, DType dtype = DType::kF64) {
  return *LayerCache::Create(std::move(layout), {2, 3, 4}, dtype);
}

// 8-bit dtypes need row scales, which only PagedKvCache keeps.
TEST(LayerCache, QuantizedDtypesAreRefusedByName) {
  for (DType dtype : {DType::kI8, DType::kF8E4M3}) {
    auto c = LayerCache::Create(*PageTableLayout::Identity(4, 2), {1, 1, 2}, dtype);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(c.status().message().find(DTypeName(dtype)), std::string::npos);
  }
}

TEST(LayerCache, SnapshotReturnsRowsInLogicalOrder) {
  for (DType dtype : {DType::kF64, DType::kF32}) {
    auto paged = MakeCache(*PageTableLayout::Create(9, 2, {4, 0, 3, 1, 2}), dtype);
    auto dense = MakeCache(*PageTableLayout::Contiguous(9), dtype);
    // Three appends of 3, 1 and 2 positions: [B=2, H=3, n, d=4] each.
    for (uint64_t n : {3, 1, 2}) {
      auto k = RandomRows(2 * 3 * n * 4, n);
      auto v = RandomRows(2 * 3 * n * 4, n + 100);
      ASSERT_TRUE(paged.Append<double>(k, v, n).ok());
      ASSERT_TRUE(dense.Append<double>(k, v, n).ok());
    }
    auto a = paged.Snapshot<double>();
    auto b = dense.Snapshot<double>();
    EXPECT_EQ(a.length, 6u);
    EXPECT_EQ(a.keys, b.keys);
    EXPECT_EQ(a.values, b.values);
    // Lane 1, head 2, position 3 came from the second append (n = 1).
    auto k1 = RandomRows(2 * 3 * 1 * 4, 1);
    double row[4];
    paged.ReadRow(KvRole::kKey, 1, 2, 3, row);
    for (int f = 0; f < 4; ++f) {
      const double x = k1[(1 * 3 + 2) * 4 + f];
      EXPECT_EQ(row[f], dtype == DType::kF32 ? static_cast<double>(static_cast<float>(x)) : x);
    }
  }
}

TEST(LayerCache, AppendBeyondCapacityChangesNothing) {
  auto cache = MakeCache(*PageTableLayout::Identity(4, 2));
  ASSERT_TRUE(cache.Append<double>(RandomRows(72, 1), RandomRows(72, 2), 3).ok());
  auto before = cache.Snapshot<double>();
  Status s = cache.Append<double>(RandomRows(48, 3), RandomRows(48, 4), 2);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(cache.length(), 3u);
  EXPECT_EQ(cache.Snapshot<double>().keys, before.keys);
}

TEST(LayerCache, AppendRejectsWrongShape) {
  auto cache = MakeCache(*PageTableLayout::Identity(4, 2));
  Status s = cache.Append<double>(RandomRows(23, 1), RandomRows(24, 2), 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("got keys 23"), std::string::npos);
  EXPECT_EQ(cache.length(), 0u);
}

TEST(LayerCache, AppendRejectsNonFiniteAndKeepsBytes) {
  auto cache = MakeCache(*PageTableLayout::Identity(4, 2));
  const auto bytes_before =
      std::vector<std::byte>(cache.Bytes(KvRole::kKey).begin(), cache.Bytes(KvRole::kKey).end());
  auto v = RandomRows(24, 2);
  v[17] = std::numeric_limits<double>::infinity();
  Status s = cache.Append<double>(RandomRows(24, 1), v, 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("value element 17"), std::string::npos);
  EXPECT_EQ(cache.length(), 0u);
  EXPECT_EQ(std::memcmp(bytes_before.data(), cache.Bytes(KvRole::kKey).data(), bytes_before.size()),
            0);
}

TEST(LayerCache, StagedRowsAreVisibleButNotLive) {
  auto cache = MakeCache(*PageTableLayout::Identity(6, 4));
  ASSERT_TRUE(cache.Append<double>(RandomRows(24, 1), RandomRows(24, 2), 1).ok());
  ASSERT_TRUE(cache.Stage<double>(RandomRows(48, 3), RandomRows(48, 4), 2).ok());
  EXPECT_EQ(cache.length(), 1u);
  EXPECT_EQ(cache.View(KvRole::kKey).visible_length, 3u);
  EXPECT_EQ(cache.Snapshot<double>().length, 1u);
  // A second stage before commit/discard is refused.
  EXPECT_EQ(cache.Stage<double>(RandomRows(24, 5), RandomRows(24, 6), 1).code(),
            StatusCode::kFailedPrecondition);
  cache.Discard();
  EXPECT_EQ(cache.View(KvRole::kKey).visible_length, 1u);
  ASSERT_TRUE(cache.Stage<double>(RandomRows(48, 3), RandomRows(48, 4), 2).ok());
  cache.Commit();
  EXPECT_EQ(cache.length(), 3u);
}

TEST(LayerCache, ResetKeepsBuffersAndNeverRevivesRows) {
  auto cache = MakeCache(*PageTableLayout::Create(6, 2, {2, 0, 1}));
  ASSERT_TRUE(cache.Append<double>(RandomRows(96, 1), RandomRows(96, 2), 4).ok());
  const std::byte* data_before = cache.Bytes(KvRole::kKey).data();
  cache.Reset();
  EXPECT_EQ(cache.length(), 0u);
  EXPECT_EQ(cache.Snapshot<double>().keys.size(), 0u);
  EXPECT_EQ(cache.Bytes(KvRole::kKey).data(), data_before);
  EXPECT_EQ(cache.layout().table()[0], 2u);
  // One new position: the snapshot holds exactly it, not the old rows.
  auto k = RandomRows(24, 9);
  ASSERT_TRUE(cache.Append<double>(k, RandomRows(24, 10), 1).ok());
  EXPECT_EQ(cache.Snapshot<double>().keys, k);
}

TEST(LayerCache, UnwrittenSlotsArePoisoned) {
  auto cache = MakeCache(*PageTableLayout::Identity(3, 2), DType::kF32);
  auto bytes = cache.Bytes(KvRole::kValue);
  for (size_t i = 0; i < bytes.size() / 4; ++i) {
    ASSERT_TRUE(std::isnan(LoadElement<float>(DType::kF32, bytes.data(), i)));
  }
}

}  // namespace
}  // namespace folio::kv
