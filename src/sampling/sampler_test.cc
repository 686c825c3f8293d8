#include "folio/sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace folio::sampling {
namespace {

TEST(SelectToken, GreedyTakesLowestIdOnTiesAndDrawsNothing) {
  const std::vector<double> logits = {0.1, 0.7, 0.7, -3};
  SplitMix64 rng(5);
  EXPECT_EQ(*SelectToken<double>(logits, {}, rng), 1);
  EXPECT_EQ(rng.state(), 5u);
}

TEST(SelectToken, TopOneIsGreedyButDrawsOnce) {
  const std::vector<float> logits = {0.1f, 0.2f, 0.9f, 0.3f};
  SplitMix64 rng(5);
  EXPECT_EQ(*SelectToken<float>(logits, {0.8, 1}, rng), 2);
  EXPECT_NE(rng.state(), 5u);
}

TEST(SelectToken, TopKNeverPicksOutsideTheTopK) {
  const std::vector<double> logits = {3, 2.5, 2.9, -1, 0, 2.8};
  SplitMix64 rng(11);
  for (int i = 0; i < 2000; ++i) {
    const int32_t t = *SelectToken<double>(logits, {5.0, 3}, rng);
    ASSERT_TRUE(t == 0 || t == 2 || t == 5) << t;
  }
}

// With a huge temperature all candidates are nearly equally likely; the
// frequencies over 30000 draws stay within 5 standard deviations of 1/4.
TEST(SelectToken, HighTemperatureIsNearlyUniform) {
  const std::vector<double> logits = {0, 1, 2, 3};
  SplitMix64 rng(3);
  std::vector<int> counts(4, 0);
  const int draws = 30000;
  for (int i = 0; i < draws; ++i)
    ++counts[static_cast<size_t>(*SelectToken<double>(logits, {1e9, 0}, rng))];
  const double sd = std::sqrt(draws * 0.25 * 0.75);
  for (int c : counts) EXPECT_NEAR(c, draws / 4.0, 5 * sd);
}

TEST(SelectToken, SameSeedSameTokens) {
  const std::vector<double> logits = {0.5, 0.4, 0.3, 0.2, 0.1};
  SplitMix64 a(99), b(99);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(*SelectToken<double>(logits, {0.7, 4}, a), *SelectToken<double>(logits, {0.7, 4}, b));
  }
}

TEST(SelectToken, TinyTopPKeepsOnlyTheBest) {
  const std::vector<double> logits = {1.0, 3.0, 2.9, 0.5};
  SplitMix64 rng(8);
  for (int i = 0; i < 200; ++i) {
    SamplingParams p{1.0, 0, 0.01, 0.0};
    ASSERT_EQ(*SelectToken<double>(logits, p, rng), 1);
  }
}

TEST(SelectToken, TopPKeepsTheSmallestPrefixReachingTheMass) {
  // Weights at temperature 1: e^0, e^-0.1, e^-5 ~ 1, 0.905, 0.0067. top_p 0.9
  // needs the first two; the third never appears.
  const std::vector<double> logits = {5.0, 4.9, 0.0};
  SplitMix64 rng(9);
  bool saw_second = false;
  for (int i = 0; i < 2000; ++i) {
    const int32_t t = *SelectToken<double>(logits, {1.0, 0, 0.9, 0.0}, rng);
    ASSERT_NE(t, 2);
    saw_second |= t == 1;
  }
  EXPECT_TRUE(saw_second);
}

TEST(SelectToken, MinPDropsUnlikelyTokens) {
  const std::vector<double> logits = {2.0, 1.9, -3.0, -4.0};
  SplitMix64 rng(10);
  for (int i = 0; i < 2000; ++i) {
    const int32_t t = *SelectToken<double>(logits, {1.0, 0, 1.0, 0.1}, rng);
    ASSERT_TRUE(t == 0 || t == 1) << t;
  }
}

TEST(SelectToken, RejectsBadInput) {
  SplitMix64 rng(1);
  EXPECT_FALSE(SelectToken<double>(std::vector<double>{}, {}, rng).ok());
  EXPECT_FALSE(SelectToken<double>(std::vector<double>{1, NAN}, {}, rng).ok());
  EXPECT_FALSE(SelectToken<double>(std::vector<double>{1}, {-1.0, 0}, rng).ok());
  EXPECT_FALSE(SelectToken<double>(std::vector<double>{1}, {INFINITY, 0}, rng).ok());
  EXPECT_FALSE(SelectToken<double>(std::vector<double>{1}, {1.0, 0, 0.0, 0.0}, rng).ok());
  EXPECT_FALSE(SelectToken<double>(std::vector<double>{1}, {1.0, 0, 1.5, 0.0}, rng).ok());
  EXPECT_FALSE(SelectToken<double>(std::vector<double>{1}, {1.0, 0, 1.0, -0.1}, rng).ok());
}

}  // namespace
}  // namespace folio::sampling

namespace folio::sampling {
namespace {

TEST(AcceptOrResample, GreedyIsTheArgmaxWithoutADraw) {
  const std::vector<float> logits = {0.1f, 0.7f, 0.7f, -3};
  SplitMix64 rng(5);
  EXPECT_EQ(*AcceptOrResample<float>(logits, {}, 3, rng), 1);
  EXPECT_EQ(*AcceptOrResample<float>(logits, {}, 1, rng), 1);
  EXPECT_EQ(rng.state(), 5u);
}

// A draft outside the candidates (here: cut by top_k) is never kept; one
// that is the only candidate always is; in between it is kept at its
// probability and the others keep their relative odds.
TEST(AcceptOrResample, KeepsTheDraftAtItsProbability) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f, -5.0f};
  SplitMix64 rng(9);
  for (int i = 0; i < 500; ++i) EXPECT_NE(*AcceptOrResample<float>(logits, {1.0, 3}, 3, rng), 3);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(*AcceptOrResample<float>(logits, {1.0, 1}, 0, rng), 0);
  const Candidates c = *SamplingCandidates<float>(logits, {1.0, 3});
  std::vector<double> counts(4, 0.0);
  constexpr int kDraws = 40000;
  for (int i = 0; i < kDraws; ++i) ++counts[*AcceptOrResample<float>(logits, {1.0, 3}, 1, rng)];
  for (size_t i = 0; i < c.ids.size(); ++i) {
    const double p = c.weights[i] / c.total;
    const double sd = std::sqrt(kDraws * p * (1 - p));
    EXPECT_NEAR(counts[static_cast<size_t>(c.ids[i])], kDraws * p, 5 * sd) << "token " << c.ids[i];
  }
  EXPECT_EQ(counts[3], 0.0);
}

TEST(LogprobsTest, LogSoftmaxOfRawLogitsWithTopAlternatives) {
  const std::vector<float> logits{1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  auto r = ComputeLogprobs(logits, 2, 3);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  double z = 0.0;
  for (float x : logits) z += std::exp(static_cast<double>(x));
  EXPECT_EQ(r->token, 2);
  EXPECT_NEAR(r->logprob, -2.0 - std::log(z), 1e-6);
  ASSERT_EQ(r->top.size(), 3u);
  EXPECT_EQ(r->top[0].first, 1);  // tie with 3: lower id first
  EXPECT_EQ(r->top[1].first, 3);
  EXPECT_EQ(r->top[2].first, 0);
  EXPECT_EQ(r->top[0].second, r->top[1].second);
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    total +=
        std::exp(static_cast<double>(ComputeLogprobs(logits, static_cast<int32_t>(i), 0)->logprob));
  }
  EXPECT_NEAR(total, 1.0, 1e-6);
  // More alternatives than tokens: all of them.
  EXPECT_EQ(ComputeLogprobs(logits, 0, 20)->top.size(), 5u);
}

// The one-pass selection against a full sort, on rows full of ties.
TEST(LogprobsTest, TopAlternativesMatchAFullSort) {
  SplitMix64 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits(1 + rng.NextU64() % 300);
    for (float& x : logits) x = static_cast<float>(rng.NextU64() % 7) - 3.0f;
    const uint64_t n = rng.NextU64() % 21;
    std::vector<int32_t> ids(logits.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
      return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
    });
    ids.resize(std::min<size_t>(n, ids.size()));
    auto r = ComputeLogprobs(logits, 0, n);
    ASSERT_TRUE(r.ok());
    std::vector<int32_t> got;
    for (const auto& [id, lp] : r->top) got.push_back(id);
    EXPECT_EQ(got, ids) << "trial " << trial;
  }
}

TEST(LogprobsTest, RejectsBadInput) {
  const std::vector<float> logits{0.0f, std::nanf("")};
  EXPECT_EQ(ComputeLogprobs(logits, 0, 0).status().code(), StatusCode::kInvalidArgument);
  const std::vector<float> ok{0.0f, 1.0f};
  EXPECT_EQ(ComputeLogprobs(ok, 2, 0).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(ComputeLogprobs(ok, -1, 0).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(ComputeLogprobs(ok, 0, 21).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeLogprobs(std::span<const float>(), 0, 0).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace folio::sampling
