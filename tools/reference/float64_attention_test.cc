#include "reference/float64_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "folio/core/splitmix64.h"

namespace folio::reference {
namespace {

using attention::PagedAttentionParams;

std::vector<double> Random(size_t count, SplitMix64& rng) {
  std::vector<double> v(count);
  for (auto& x : v) x = 2 * rng.NextUnit() - 1;
  return v;
}

// Straight from the definition, over dense [B, H_kv, n, d] K/V and
// token-major [B, L, Hq, d] queries.
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
        const uint64_t row = ((b * L + i) * Hq + h) * d;
        std::vector<double> s;
        std::vector<uint64_t> js;
        for (uint64_t j = 0; j <= pos; ++j) {
          if (window > 0 && pos - j >= window) continue;
          double dot = 0;
          for (uint64_t f = 0; f < d; ++f) dot += q[row + f] * k[((b * Hkv + g) * n + j) * d + f];
          s.push_back(dot / std::sqrt(static_cast<double>(d)));
          js.push_back(j);
        }
        double m = -INFINITY, sum = 0;
        for (double x : s) m = std::max(m, x);
        for (double& x : s) sum += (x = std::exp(x - m));
        for (size_t t = 0; t < js.size(); ++t)
          for (uint64_t f = 0; f < d; ++f)
            out[row + f] += s[t] / sum * v[((b * Hkv + g) * n + js[t]) * d + f];
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

// Dense [B, H_kv, n, d] K/V as a paged pool: sequence b's logical page lp is
// page table[lp] * B + b; every other slot is NaN, so a stray read shows.
struct Pool {
  std::vector<double> keys, values;    // [num_pages, H_kv, P, d]
  std::vector<int32_t> indptr{0};      // [B + 1]
  std::vector<int32_t> indices;        // [B * pages]
  std::vector<int32_t> last_page_len;  // [B]
  uint64_t pages, num_pages;
};

Pool Place(const Case& c, const std::vector<double>& k, const std::vector<double>& v,
           uint64_t page_size, const std::vector<uint64_t>& table) {
  Pool p;
  p.pages = table.size();
  p.num_pages = p.pages * c.batch;
  const uint64_t size = p.num_pages * c.kv_heads * page_size * c.head_dim;
  p.keys.assign(size, std::numeric_limits<double>::quiet_NaN());
  p.values = p.keys;
  const kv::LaneShape shape{1, c.kv_heads, c.head_dim};
  for (uint64_t b = 0; b < c.batch; ++b) {
    for (uint64_t lp = 0; lp < p.pages; ++lp) {
      p.indices.push_back(static_cast<int32_t>(table[lp] * c.batch + b));
    }
    p.indptr.push_back(static_cast<int32_t>(p.indices.size()));
    p.last_page_len.push_back(static_cast<int32_t>((c.context - 1) % page_size + 1));
    for (uint64_t h = 0; h < c.kv_heads; ++h)
      for (uint64_t j = 0; j < c.context; ++j)
        for (uint64_t f = 0; f < c.head_dim; ++f) {
          const uint64_t page = table[j / page_size] * c.batch + b;
          const uint64_t at = kv::ScalarIndex(shape, page_size, page, j % page_size, 0, h, f);
          const uint64_t from = ((b * c.kv_heads + h) * c.context + j) * c.head_dim + f;
          p.keys[at] = k[from];
          p.values[at] = v[from];
        }
  }
  return p;
}

std::vector<double> Attend(const Case& c, const Pool& p, uint64_t page_size,
                           const std::vector<double>& q) {
  const kv::PagedKvView view{reinterpret_cast<const std::byte*>(p.keys.data()),
                             reinterpret_cast<const std::byte*>(p.values.data()),
                             DType::kF64,
                             p.num_pages,
                             c.kv_heads,
                             page_size,
                             c.head_dim};
  std::vector<int32_t> indptr(c.batch + 1);
  for (uint64_t b = 0; b <= c.batch; ++b) indptr[b] = static_cast<int32_t>(b * c.query_len);
  PagedAttentionParams params;
  params.num_q_heads = c.q_heads;
  params.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  params.window = c.window;
  std::vector<double> out(q.size());
  const Status s =
      Float64PagedAttention(params, q, view, {p.indptr, p.indices, p.last_page_len, indptr}, out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

class Float64AttentionSweep : public ::testing::TestWithParam<Case> {};

TEST_P(Float64AttentionSweep, MatchesDenseDefinitionAndIsLayoutInvariant) {
  const Case c = GetParam();
  SplitMix64 rng(c.context * 131 + c.q_heads * 7 + c.window);
  const uint64_t kv_count = c.batch * c.kv_heads * c.context * c.head_dim;
  const auto k = Random(kv_count, rng);
  const auto v = Random(kv_count, rng);
  const auto q = Random(c.batch * c.q_heads * c.query_len * c.head_dim, rng);

  // A shuffled page table, and the contiguous layout (one page of n slots).
  const uint64_t pages = (c.context + c.page_size - 1) / c.page_size;
  std::vector<uint64_t> table(pages);
  for (uint64_t i = 0; i < pages; ++i) table[i] = (i * 5 + 3) % pages;
  if (pages % 5 == 0) std::iota(table.begin(), table.end(), uint64_t{0});
  std::reverse(table.begin(), table.end());
  const auto out_paged = Attend(c, Place(c, k, v, c.page_size, table), c.page_size, q);
  const auto out_dense = Attend(c, Place(c, k, v, c.context, {0}), c.context, q);
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

INSTANTIATE_TEST_SUITE_P(Grid, Float64AttentionSweep,
                         ::testing::Values(Case{1, 4, 4, 8, 1, 1, 3, 0},    // MHA, one token
                                           Case{2, 4, 4, 8, 7, 7, 3, 0},    // batched MHA prefill
                                           Case{2, 4, 2, 2, 7, 1, 3, 0},    // GQA 2, decode
                                           Case{3, 8, 1, 6, 16, 5, 4, 0},   // GQA 8 (MQA)
                                           Case{2, 4, 2, 4, 11, 11, 3, 4},  // windowed prefill
                                           Case{1, 6, 3, 5, 10, 2, 1, 3},   // odd head dim, page 1
                                           Case{2, 8, 2, 4, 9, 3, 9, 2}));  // one page, windowed

TEST(Float64PagedAttention, RejectsHeadsNotAMultipleAndBadScale) {
  std::vector<double> pool(1 * 2 * 2 * 2, 0.5);
  const kv::PagedKvView view{reinterpret_cast<const std::byte*>(pool.data()),
                             reinterpret_cast<const std::byte*>(pool.data()),
                             DType::kF64,
                             1,
                             2,
                             2,
                             2};
  const std::vector<int32_t> pages_indptr = {0, 1}, pages = {0}, last_page_len = {2},
                             indptr = {0, 1};
  std::vector<double> q(3 * 2), out(3 * 2);
  PagedAttentionParams p;
  p.num_q_heads = 3;
  EXPECT_EQ(
      Float64PagedAttention(p, q, view, {pages_indptr, pages, last_page_len, indptr}, out).code(),
      StatusCode::kInvalidArgument);
  p.num_q_heads = 2;
  std::vector<double> q2(2 * 2), out2(2 * 2);
  for (double scale : {std::numeric_limits<double>::quiet_NaN(), -1.0}) {
    p.scale = scale;
    EXPECT_FALSE(
        Float64PagedAttention(p, q2, view, {pages_indptr, pages, last_page_len, indptr}, out2)
            .ok());
  }
}

}  // namespace
}  // namespace folio::reference
