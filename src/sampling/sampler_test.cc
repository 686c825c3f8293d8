#include "folio/sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace folio::sampling {
namespace {

// A float row's candidates are ordered by a radix sort when many are kept;
// a double row's by the comparison sort. float -> double is exact and keeps
// the order, so both rows must give the same candidates, weights and total,
// bit for bit: checked on fresh random rows full of ties, signed zeros,
// bans and masks, at every size of cut.
TEST(SamplingCandidates, FloatRowsOrderExactlyAsTheComparisonSort) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> spread(0.0f, 4.0f);
  for (int trial = 0; trial < 32; ++trial) {
    const size_t n = 1025 + rng() % 60000;
    std::vector<float> f(n);
    for (float& x : f) {
      switch (rng() % 4) {
        case 0:  // few distinct values: many ties
          x = static_cast<float>(static_cast<int>(rng() % 81) - 40) / 4.0f;
          break;
        case 1:
          x = rng() % 2 == 0 ? 0.0f : -0.0f;
          break;
        default:
          x = spread(rng);
      }
    }
    for (int b = 0; b < trial % 3; ++b) f[rng() % n] = -std::numeric_limits<float>::infinity();
    const std::vector<double> d(f.begin(), f.end());
    std::vector<uint64_t> mask((n + 63) / 64, ~uint64_t{0});
    if (trial % 4 == 3) {
      for (uint64_t& w : mask) w = rng();
    }
    SamplingParams p;
    p.temperature = 0.3 + static_cast<double>(rng() % 20) / 10.0;
    const uint64_t cuts[] = {0, 257, 4096, n / 2, 40};
    p.top_k = cuts[trial % 5];
    p.top_p = trial % 3 == 0 ? 0.9 : 1.0;
    const TokenMask allowed = trial % 4 == 3 ? TokenMask(mask) : TokenMask();
    Result<Candidates> a = SamplingCandidates<float>(f, p, allowed);
    Result<Candidates> b = SamplingCandidates<double>(d, p, allowed);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->ids, b->ids) << "trial " << trial << ", n " << n << ", top_k " << p.top_k;
    ASSERT_EQ(a->weights, b->weights);
    ASSERT_EQ(a->total, b->total);
  }
}

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

// Allowed-token masks (structured output).
namespace folio::sampling {
namespace {

std::vector<uint64_t> MaskOf(size_t n, const std::vector<int32_t>& ids) {
  std::vector<uint64_t> mask(TokenMaskWords(n), 0);
  for (const int32_t t : ids) mask[static_cast<size_t>(t) / 64] |= uint64_t{1} << (t % 64);
  return mask;
}

// The scalar reference: the row cut down to its allowed tokens, in id
// order, sampled unmasked, the index mapped back to the token's id.
struct Compacted {
  std::vector<float> logits;
  std::vector<int32_t> ids;  // compact index -> token id
};
Compacted Compact(const std::vector<float>& logits, const std::vector<uint64_t>& mask) {
  Compacted c;
  for (size_t t = 0; t < logits.size(); ++t) {
    if (MaskAllows(mask, t)) {
      c.logits.push_back(logits[t]);
      c.ids.push_back(static_cast<int32_t>(t));
    }
  }
  return c;
}

// Random rows full of ties, with the largest logits often on forbidden
// tokens, random masks from one token to all, and random parameters
// (greedy among them).
struct MaskCase {
  std::vector<float> logits;
  std::vector<uint64_t> mask;
  SamplingParams params;
};
MaskCase RandomMaskCase(SplitMix64& rng) {
  static const size_t kSizes[] = {1, 2, 63, 64, 65, 127, 128, 129, 300};
  MaskCase c;
  const size_t n = kSizes[rng.NextU64() % std::size(kSizes)];
  c.logits.resize(n);
  for (float& x : c.logits) x = static_cast<float>(rng.NextU64() % 9) * 0.5f - 2.0f;
  std::vector<int32_t> allowed;
  const uint64_t density = 1 + rng.NextU64() % 4;  // about 1/density of the tokens
  for (size_t t = 0; t < n; ++t) {
    if (rng.NextU64() % density == 0) {
      allowed.push_back(static_cast<int32_t>(t));
    } else if (rng.NextU64() % 3 == 0) {
      c.logits[t] = 9.0f;  // a forbidden favourite
    }
  }
  if (allowed.empty()) allowed.push_back(static_cast<int32_t>(rng.NextU64() % n));
  c.mask = MaskOf(n, allowed);
  if (rng.NextU64() % 4 != 0) {
    c.params.temperature = 0.25 + static_cast<double>(rng.NextU64() % 8) * 0.25;
    c.params.top_k = rng.NextU64() % 3 == 0 ? 1 + rng.NextU64() % 10 : 0;
    c.params.top_p =
        rng.NextU64() % 3 == 0 ? 0.5 + static_cast<double>(rng.NextU64() % 5) * 0.1 : 1.0;
    c.params.min_p = rng.NextU64() % 3 == 0 ? static_cast<double>(rng.NextU64() % 4) * 0.1 : 0.0;
  }
  return c;
}

TEST(SelectToken, MaskedSelectionEqualsSelectionOverTheAllowedTokensAlone) {
  SplitMix64 gen(2024);
  for (int trial = 0; trial < 3000; ++trial) {
    const MaskCase c = RandomMaskCase(gen);
    const Compacted ref = Compact(c.logits, c.mask);
    const uint64_t seed = gen.NextU64();
    SplitMix64 rng(seed), ref_rng(seed);
    const Result<int32_t> got = SelectToken<float>(c.logits, c.params, rng, c.mask);
    const Result<int32_t> want = SelectToken<float>(ref.logits, c.params, ref_rng);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(*got, ref.ids[static_cast<size_t>(*want)]) << "trial " << trial;
    EXPECT_EQ(rng.state(), ref_rng.state()) << "trial " << trial;
  }
}

TEST(AcceptOrResample, MaskedResamplingEqualsResamplingOverTheAllowedTokensAlone) {
  SplitMix64 gen(77);
  for (int trial = 0; trial < 3000; ++trial) {
    const MaskCase c = RandomMaskCase(gen);
    const Compacted ref = Compact(c.logits, c.mask);
    const auto draft = static_cast<int32_t>(gen.NextU64() % c.logits.size());
    // The draft's compact index, or an id no compact row has when the mask
    // forbids it.
    const auto at = std::find(ref.ids.begin(), ref.ids.end(), draft);
    const int32_t ref_draft = at == ref.ids.end() ? -1 : static_cast<int32_t>(at - ref.ids.begin());
    const uint64_t seed = gen.NextU64();
    SplitMix64 rng(seed), ref_rng(seed);
    const Result<int32_t> got = AcceptOrResample<float>(c.logits, c.params, draft, rng, c.mask);
    const Result<int32_t> want = AcceptOrResample<float>(ref.logits, c.params, ref_draft, ref_rng);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(*got, ref.ids[static_cast<size_t>(*want)]) << "trial " << trial;
    EXPECT_EQ(rng.state(), ref_rng.state()) << "trial " << trial;
    EXPECT_TRUE(MaskAllows(c.mask, static_cast<uint64_t>(*got)));
  }
}

// Unconstrained requests keep their tokens and streams: a mask allowing
// everything changes nothing.
TEST(SelectToken, AMaskAllowingEveryTokenChangesNothing) {
  SplitMix64 gen(5);
  for (int trial = 0; trial < 500; ++trial) {
    MaskCase c = RandomMaskCase(gen);
    std::vector<int32_t> all(c.logits.size());
    std::iota(all.begin(), all.end(), 0);
    c.mask = MaskOf(c.logits.size(), all);
    const uint64_t seed = gen.NextU64();
    SplitMix64 a(seed), b(seed);
    EXPECT_EQ(*SelectToken<float>(c.logits, c.params, a, c.mask),
              *SelectToken<float>(c.logits, c.params, b));
    EXPECT_EQ(a.state(), b.state());
  }
}

TEST(SelectToken, GreedyTakesTheBestAllowedTokenNotTheArgmax) {
  const std::vector<float> logits = {5.0f, 1.0f, 3.0f, 3.0f, 9.0f};
  SplitMix64 rng(5);
  EXPECT_EQ(*SelectToken<float>(logits, {}, rng, MaskOf(5, {1, 2, 3})), 2);  // tie: lower id
  EXPECT_EQ(*SelectToken<float>(logits, {}, rng, MaskOf(5, {1})), 1);
  EXPECT_EQ(rng.state(), 5u);
}

// The forbidden tokens hold the row's largest logits by far. Weights are
// taken relative to the best allowed token, so at a low temperature the
// allowed ones keep their odds instead of underflowing to zero against
// the row's maximum (exp(-750) is 0 in double).
TEST(SelectToken, SamplingNeverReturnsAForbiddenTokenHoweverLikely) {
  const std::vector<float> logits = {100.0f, -50.0f, 100.0f, -50.1f};
  SplitMix64 rng(3);
  std::vector<int> counts(4, 0);
  for (int i = 0; i < 2000; ++i) {
    const int32_t t = *SelectToken<float>(logits, {0.2, 0}, rng, MaskOf(4, {1, 3}));
    ASSERT_TRUE(t == 1 || t == 3) << t;
    ++counts[static_cast<size_t>(t)];
  }
  // Odds 1 : exp(-0.5) ~ 0.61: token 3 takes about 38% of the draws.
  EXPECT_GT(counts[3], 500);
  EXPECT_GT(counts[1], counts[3]);
}

TEST(AcceptOrResample, ADraftTheMaskForbidsIsAlwaysRejected) {
  const std::vector<float> logits = {1.0f, 8.0f, 0.5f, 0.0f};
  SplitMix64 rng(9);
  for (int i = 0; i < 1000; ++i) {
    const int32_t t = *AcceptOrResample<float>(logits, {1.0, 0}, 1, rng, MaskOf(4, {0, 2, 3}));
    ASSERT_NE(t, 1);
  }
}

TEST(SelectToken, AMaskOfTheWrongSizeIsRefusedNamingBothSizes) {
  const std::vector<float> logits(65, 0.0f);
  SplitMix64 rng(1);
  const std::vector<uint64_t> one_word = {~uint64_t{0}};
  const Status s = SelectToken<float>(logits, {}, rng, one_word).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("has 1 words; a row of 65 logits needs 2"), std::string::npos)
      << s.ToString();
}

TEST(SelectToken, AMaskAllowingNoTokenIsRefused) {
  const std::vector<float> logits(65, 0.0f);
  SplitMix64 rng(1);
  // Bits past the row's end do not count.
  std::vector<uint64_t> mask(2, 0);
  mask[1] = uint64_t{1} << 5;
  for (const bool greedy : {true, false}) {
    const SamplingParams p{greedy ? 0.0 : 1.0, 0};
    const Status s = SelectToken<float>(logits, p, rng, mask).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("allows none"), std::string::npos) << s.ToString();
  }
}

// Masked log-probs are the log-softmax of the allowed tokens alone, bit
// for bit, with alternatives among them.
TEST(LogprobsTest, MaskedLogprobsEqualThoseOfTheAllowedTokensAlone) {
  SplitMix64 gen(31);
  for (int trial = 0; trial < 1000; ++trial) {
    const MaskCase c = RandomMaskCase(gen);
    const Compacted ref = Compact(c.logits, c.mask);
    const size_t pick = gen.NextU64() % ref.ids.size();
    const uint64_t top_n = gen.NextU64() % (kMaxTopLogprobs + 1);
    const Result<TokenLogprobs> got = ComputeLogprobs(c.logits, ref.ids[pick], top_n, c.mask);
    const Result<TokenLogprobs> want =
        ComputeLogprobs(ref.logits, static_cast<int32_t>(pick), top_n);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(got->token, ref.ids[pick]);
    EXPECT_EQ(got->logprob, want->logprob) << "trial " << trial;
    ASSERT_EQ(got->top.size(), want->top.size()) << "trial " << trial;
    for (size_t i = 0; i < want->top.size(); ++i) {
      EXPECT_EQ(got->top[i].first, ref.ids[static_cast<size_t>(want->top[i].first)]);
      EXPECT_EQ(got->top[i].second, want->top[i].second);
    }
  }
}

TEST(LogprobsTest, ATokenOutsideTheMaskIsRefused) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  const Status s = ComputeLogprobs(logits, 2, 1, MaskOf(3, {0, 1})).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("token 2"), std::string::npos) << s.ToString();
  EXPECT_EQ(LogNormalizer(logits, MaskOf(3, {})).status().code(), StatusCode::kInvalidArgument);
}

// A processor's ban (-inf) removes the token from the candidates; with
// every token banned nothing can be selected, and HasCandidate says so.
TEST(SelectToken, MinusInfinityIsNeverSelected) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {-inf, 0.0f, -inf, -30.0f};
  SplitMix64 rng(4);
  for (int i = 0; i < 500; ++i) {
    const int32_t t = *SelectToken<float>(logits, {5.0, 0}, rng);
    ASSERT_TRUE(t == 1 || t == 3) << t;
  }
  const std::vector<float> banned = {-inf, -inf};
  EXPECT_FALSE(HasCandidate<float>(banned));
  EXPECT_TRUE(HasCandidate<float>(logits));
  EXPECT_FALSE(HasCandidate<float>(logits, MaskOf(4, {0, 2})));
  EXPECT_EQ(SelectToken<float>(banned, {}, rng).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(SelectToken<float>(banned, {1.0, 0}, rng).status().code(),
            StatusCode::kFailedPrecondition);
}

// top_n_sigma keeps the logits at or above max - n * sigma: here mean 1,
// population sigma 1 (values 0, 0, 2, 2), so n = 0.5 keeps only the 2s.
TEST(SamplingCandidates, TopNSigmaKeepsWithinNSigmasOfTheMax) {
  const std::vector<double> logits = {0.0, 2.0, 0.0, 2.0};
  SamplingParams p{1.0, 0};
  p.top_n_sigma = 0.5;
  Result<Candidates> c = SamplingCandidates<double>(logits, p);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ids, (std::vector<int32_t>{1, 3}));
  p.top_n_sigma = 2.0;  // cut at 0: everything stays
  EXPECT_EQ(SamplingCandidates<double>(logits, p)->ids.size(), 4u);
}

// typical_p against the definition: entropy H of the candidates'
// distribution, scores |-log p - H|, the cheapest prefix reaching the mass.
TEST(SamplingCandidates, TypicalPKeepsTheMostTypicalMass) {
  // p = 0.5, 0.25, 0.125, 0.125: H = 1.75 ln 2; -log p = 1, 2, 3, 3 (x ln 2):
  // scores (x ln 2) 0.75, 0.25, 1.25, 1.25, so the order is 1, 0, 2, 3.
  const std::vector<double> logits = {std::log(4.0), std::log(2.0), 0.0, 0.0};
  SamplingParams p{1.0, 0};
  p.typical_p = 0.2;  // token 1 alone holds 0.25
  EXPECT_EQ(SamplingCandidates<double>(logits, p)->ids, (std::vector<int32_t>{1}));
  p.typical_p = 0.7;  // 1 then 0: 0.75; kept in logit order
  EXPECT_EQ(SamplingCandidates<double>(logits, p)->ids, (std::vector<int32_t>{0, 1}));
  p.typical_p = 0.8;  // tied scores of 2 and 3 are kept together
  EXPECT_EQ(SamplingCandidates<double>(logits, p)->ids, (std::vector<int32_t>{0, 1, 2, 3}));
  p.typical_p = 1.0;
  EXPECT_EQ(SamplingCandidates<double>(logits, p)->ids.size(), 4u);
}

// XTC with probability 1 removes every candidate at or above the threshold
// except the least likely of them; it draws once; with probability 0 it
// neither acts nor draws.
TEST(ApplyXtc, DropsTheTopChoicesButTheLast) {
  // Weights 1, 0.5, 0.25, 0.0625 over 1.8125: p = .55, .28, .14, .03.
  const std::vector<double> logits = {0.0, std::log(0.5), std::log(0.25), std::log(0.0625)};
  SamplingParams p{1.0, 0};
  p.xtc_probability = 1.0;
  p.xtc_threshold = 0.1;
  Candidates c = *SamplingCandidates<double>(logits, p);
  SplitMix64 rng(3);
  ApplyXtc(p, rng, c);
  EXPECT_EQ(c.ids, (std::vector<int32_t>{2, 3}));
  EXPECT_NE(rng.state(), 3u);
  p.xtc_probability = 0.0;
  c = *SamplingCandidates<double>(logits, p);
  SplitMix64 quiet(3);
  ApplyXtc(p, quiet, c);
  EXPECT_EQ(c.ids.size(), 4u);
  EXPECT_EQ(quiet.state(), 3u);
  p.xtc_probability = 1.0;
  p.xtc_threshold = 0.6;  // above 0.5: off
  EXPECT_FALSE(p.xtc());
}

TEST(SamplingParams, NewRangesAreCheckedByName) {
  for (const char* name : {"typical_p", "xtc_probability", "xtc_threshold", "top_n_sigma"}) {
    SamplingParams p;
    if (std::string(name) == "typical_p") p.typical_p = 1.5;
    if (std::string(name) == "xtc_probability") p.xtc_probability = -0.1;
    if (std::string(name) == "xtc_threshold") p.xtc_threshold = 2;
    if (std::string(name) == "top_n_sigma") p.top_n_sigma = -1;
    const Status s = p.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(name), std::string::npos) << s.ToString();
  }
}

}  // namespace
}  // namespace folio::sampling
