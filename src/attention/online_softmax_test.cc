#include "folio/attention/online_softmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "folio/core/splitmix64.h"

namespace folio::attention {
namespace {

// The state over scores s[lo, hi) with values v (head_dim 3), the naive way.
void StateOf(const std::vector<float>& s, const std::vector<float>& v, size_t lo, size_t hi,
             SoftmaxState& st, float* acc) {
  st = {};
  for (int f = 0; f < 3; ++f) acc[f] = 0;
  for (size_t j = lo; j < hi; ++j) st.max = std::fmax(st.max, s[j]);
  for (size_t j = lo; j < hi; ++j) {
    const float p = std::exp(s[j] - st.max);
    st.sum += p;
    for (int f = 0; f < 3; ++f) acc[f] += p * v[j * 3 + f];
  }
}

TEST(OnlineSoftmax, MergedHalvesEqualTheWhole) {
  SplitMix64 rng(4);
  std::vector<float> s(40), v(120);
  for (auto& x : s) x = static_cast<float>(8 * rng.NextUnit() - 4);
  for (auto& x : v) x = static_cast<float>(2 * rng.NextUnit() - 1);
  for (size_t cut : {1, 7, 20, 39}) {
    SoftmaxState whole, a, b;
    float acc_whole[3], acc_a[3], acc_b[3], out_whole[3], out_merged[3];
    StateOf(s, v, 0, 40, whole, acc_whole);
    StateOf(s, v, 0, cut, a, acc_a);
    StateOf(s, v, cut, 40, b, acc_b);
    MergeInto(a, acc_a, b, acc_b, 3);
    Finalize(whole, acc_whole, out_whole, 3);
    Finalize(a, acc_a, out_merged, 3);
    // 40 terms, each rounding at 2^-24 relative; outputs are means of |v| <= 1.
    for (int f = 0; f < 3; ++f) EXPECT_NEAR(out_whole[f], out_merged[f], 64 * 0x1.0p-24) << cut;
  }
}

TEST(OnlineSoftmax, MergingEmptyIsExactIdentity) {
  SoftmaxState st{1.5f, 2.25f};
  float acc[2] = {0.3f, -0.7f};
  const SoftmaxState empty;
  const float none[2] = {0, 0};
  MergeInto(st, acc, empty, none, 2);
  EXPECT_EQ(st.max, 1.5f);
  EXPECT_EQ(st.sum, 2.25f);
  EXPECT_EQ(acc[1], -0.7f);

  SoftmaxState fresh;
  float acc2[2] = {0, 0};
  MergeInto(fresh, acc2, st, acc, 2);
  EXPECT_EQ(fresh.max, 1.5f);
  EXPECT_EQ(fresh.sum, 2.25f);
  EXPECT_EQ(acc2[0], 0.3f);
}

TEST(OnlineSoftmax, EmptyStateFinalizesToZeros) {
  float out[2] = {1, 1};
  const float acc[2] = {5, 5};
  Finalize(SoftmaxState{}, acc, out, 2);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
}

}  // namespace
}  // namespace folio::attention
