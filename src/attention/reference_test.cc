#include "folio/attention/reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "folio/core/splitmix64.h"

namespace folio::attention {
namespace {

using kv::KvRole;
using kv::LayerCache;
using kv::PageTableLayout;

std::vector<double> Random(size_t count, SplitMix64& rng) {
  std::vector<double> v(count);
  for (auto& x : v) x = 2 * rng.NextUnit() - 1;
  return v;
}

// Straight from the definition, over dense [B, H_kv, n, d] arrays.
std::vector<double> DenseAttention(const std::vector<double>& q, const std::vector<double>& k,
                                   const std::vector<double>& v, uint64_t B, uint64_t Hq,
                                   uint64_t Hkv, uint64_t L, uint64_t n, uint64_t d,
                                   uint64_t window) {
  std::vector<double> out(B * Hq * L * d, 0.0);
  for (uint64_t b = 0; b < B; ++b)
    for (uint64_t h = 0; h < Hq; ++h)
      for (uint64_t i = 0; i < L; ++i) {
        const uint64_t g = h / (Hq / Hkv);
        const uint64_t pos = n - L + i;
        std::vector<double> s;
        std::vector<uint64_t> js;
        for (uint64_t j = 0; j <= pos; ++j) {
          if (window > 0 && pos - j >= window) continue;
          double dot = 0;
          for (uint64_t f = 0; f < d; ++f)
            dot += q[((b * Hq + h) * L + i) * d + f] * k[((b * Hkv + g) * n + j) * d + f];
          s.push_back(dot / std::sqrt(static_cast<double>(d)));
          js.push_back(j);
        }
        double m = -INFINITY, sum = 0;
        for (double x : s) m = std::max(m, x);
        for (double& x : s) sum += (x = std::exp(x - m));
        for (size_t t = 0; t < js.size(); ++t)
          for (uint64_t f = 0; f < d; ++f)
            out[((b * Hq + h) * L + i) * d + f] +=
                s[t] / sum * v[((b * Hkv + g) * n + js[t]) * d + f];
      }
  return out;
}

struct Case {
  uint64_t batch, q_heads, kv_heads, head_dim, context, query_len, page_size, window;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "b" << c.batch << "_hq" << c.q_heads << "_hkv" << c.kv_heads << "_d" << c.head_dim << "_n"
      << c.context << "_l" << c.query_len << "_p" << c.page_size << "_w" << c.window;
}

class AttendReferenceSweep : public ::testing::TestWithParam<Case> {};

TEST_P(AttendReferenceSweep, MatchesDenseDefinitionAndIsLayoutInvariant) {
  const Case c = GetParam();
  SplitMix64 rng(c.context * 131 + c.q_heads * 7 + c.window);
  const uint64_t kv_count = c.batch * c.kv_heads * c.context * c.head_dim;
  const auto k = Random(kv_count, rng);
  const auto v = Random(kv_count, rng);
  const auto q = Random(c.batch * c.q_heads * c.query_len * c.head_dim, rng);

  // Shuffled page table for the paged cache.
  const uint64_t pages = (c.context + c.page_size - 1) / c.page_size;
  std::vector<uint64_t> table(pages);
  for (uint64_t i = 0; i < pages; ++i) table[i] = (i * 5 + 3) % pages;
  if (pages % 5 == 0) std::iota(table.begin(), table.end(), uint64_t{0});
  std::reverse(table.begin(), table.end());

  const kv::LaneShape shape{c.batch, c.kv_heads, c.head_dim};
  auto paged = *LayerCache::Create(*PageTableLayout::Create(c.context, c.page_size, table), shape,
                                   DType::kF64);
  auto dense = *LayerCache::Create(*PageTableLayout::Contiguous(c.context), shape, DType::kF64);
  ASSERT_TRUE(paged.Append<double>(k, v, c.context).ok());
  ASSERT_TRUE(dense.Append<double>(k, v, c.context).ok());

  const AttentionParams params{c.q_heads, c.query_len,
                               1.0 / std::sqrt(static_cast<double>(c.head_dim)), c.window};
  std::vector<double> out_paged(q.size()), out_dense(q.size());
  ASSERT_TRUE(AttendReference<double>(params, q, paged.View(KvRole::kKey),
                                      paged.View(KvRole::kValue), out_paged)
                  .ok());
  ASSERT_TRUE(AttendReference<double>(params, q, dense.View(KvRole::kKey),
                                      dense.View(KvRole::kValue), out_dense)
                  .ok());
  EXPECT_EQ(out_paged, out_dense);  // bits, not a tolerance

  const auto expected = DenseAttention(q, k, v, c.batch, c.q_heads, c.kv_heads, c.query_len,
                                       c.context, c.head_dim, c.window);
  // Softmax-weighted means of values in [-1, 1]: absolute error grows with
  // the reduction length n and head_dim, each step adding ~eps.
  const double tol =
      8 * std::numeric_limits<double>::epsilon() * static_cast<double>(c.context + c.head_dim);
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(out_paged[i], expected[i], tol) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, AttendReferenceSweep,
                         ::testing::Values(Case{1, 4, 4, 8, 1, 1, 3, 0},    // MHA, one token
                                           Case{2, 4, 4, 8, 7, 7, 3, 0},    // batched MHA prefill
                                           Case{2, 4, 2, 2, 7, 1, 3, 0},    // GQA 2, decode
                                           Case{3, 8, 1, 6, 16, 5, 4, 0},   // GQA 8 (MQA)
                                           Case{2, 4, 2, 4, 11, 11, 3, 4},  // windowed prefill
                                           Case{1, 6, 3, 5, 10, 2, 1, 3},   // odd head dim, page 1
                                           Case{2, 8, 2, 4, 9, 3, 9, 2}));  // one page, windowed

TEST(AttendReference, RejectsHeadsNotAMultiple) {
  auto cache = *LayerCache::Create(*PageTableLayout::Identity(4, 2), {1, 2, 2}, DType::kF64);
  std::vector<double> kv(8, 0.5);
  ASSERT_TRUE(cache.Append<double>(kv, kv, 2).ok());
  std::vector<double> q(3 * 2), out(3 * 2);
  Status s = AttendReference<double>({3, 1, 0.5, 0}, q, cache.View(KvRole::kKey),
                                     cache.View(KvRole::kValue), out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("num_q_heads 3"), std::string::npos);
}

TEST(AttendReference, RejectsQueryLongerThanContextAndBadScale) {
  auto cache = *LayerCache::Create(*PageTableLayout::Identity(4, 2), {1, 1, 2}, DType::kF64);
  std::vector<double> kv(4, 0.5);
  ASSERT_TRUE(cache.Append<double>(kv, kv, 2).ok());
  std::vector<double> q(6), out(6);
  EXPECT_FALSE(AttendReference<double>({1, 3, 0.5, 0}, q, cache.View(KvRole::kKey),
                                       cache.View(KvRole::kValue), out)
                   .ok());
  std::vector<double> q1(2), out1(2);
  EXPECT_FALSE(AttendReference<double>({1, 1, NAN, 0}, q1, cache.View(KvRole::kKey),
                                       cache.View(KvRole::kValue), out1)
                   .ok());
  EXPECT_FALSE(AttendReference<double>({1, 1, -1.0, 0}, q1, cache.View(KvRole::kKey),
                                       cache.View(KvRole::kValue), out1)
                   .ok());
}

}  // namespace
}  // namespace folio::attention
