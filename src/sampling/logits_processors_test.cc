#include "folio/sampling/logits_processors.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "folio/core/splitmix64.h"

namespace folio::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> Row(size_t n, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> row(n);
  for (float& x : row) x = static_cast<float>(rng.NextUnit() * 8.0 - 4.0);
  return row;
}

// Bit equality, so that a -inf or a signed zero compares exactly.
bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  }
  return true;
}

TEST(RepetitionPenalty, DividesPositiveMultipliesNegativeOncePerDistinctToken) {
  std::vector<float> row = {2.0f, -2.0f, 3.0f, 0.0f, 1.0f};
  ProcessorScratch scratch;
  const std::vector<int32_t> window = {0, 1, 1, 1, 3, 0};
  ApplyRepetitionPenalty(2.0, window, row, scratch);
  EXPECT_EQ(row, (std::vector<float>{1.0f, -4.0f, 3.0f, 0.0f, 1.0f}));
  // The scratch is left clean: a second call on a fresh row does the same.
  std::vector<float> again = {2.0f, -2.0f, 3.0f, 0.0f, 1.0f};
  ApplyRepetitionPenalty(2.0, window, again, scratch);
  EXPECT_EQ(again, row);
}

TEST(PresenceFrequency, SubtractCountTimesFrequencyPlusPresence) {
  std::vector<float> row = {1.0f, 1.0f, 1.0f, 1.0f};
  ProcessorScratch scratch;
  const std::vector<int32_t> generated = {2, 0, 2, 2};
  ApplyPresenceFrequency(0.5, 0.25, generated, row, scratch);
  EXPECT_EQ(row[0], static_cast<float>(1.0 - 1 * 0.25 - 0.5));
  EXPECT_EQ(row[1], 1.0f);
  EXPECT_EQ(row[2], static_cast<float>(1.0 - 3 * 0.25 - 0.5));
  EXPECT_EQ(row[3], 1.0f);
}

TEST(LogitBias, AddsInFloatAndIgnoresIdsOutsideTheRow) {
  std::vector<float> row = {0.5f, 0.25f, -1.0f};
  ApplyLogitBias({{0, -100.0}, {2, 0.1}, {7, 5.0}}, row);
  EXPECT_EQ(row[0], 0.5f + static_cast<float>(-100.0));
  EXPECT_EQ(row[1], 0.25f);
  EXPECT_EQ(row[2], -1.0f + 0.1f);
}

TEST(BadWords, BanTheLastTokenWhenTheRestEndsTheHistory) {
  const std::vector<std::vector<int32_t>> words = {{4}, {1, 2, 3}, {0, 5}};
  std::vector<float> row(6, 1.0f);
  ApplyBadWords(words, std::vector<int32_t>{7, 1, 2}, row);
  EXPECT_EQ(row, (std::vector<float>{1, 1, 1, -kInf, -kInf, 1}));
  row.assign(6, 1.0f);
  ApplyBadWords(words, std::vector<int32_t>{1, 2, 7}, row);
  EXPECT_EQ(row, (std::vector<float>{1, 1, 1, 1, -kInf, 1}));
  // A prefix longer than the history never matches.
  row.assign(6, 1.0f);
  ApplyBadWords(words, std::vector<int32_t>{2}, row);
  EXPECT_EQ(row, (std::vector<float>{1, 1, 1, 1, -kInf, 1}));
  row.assign(6, 1.0f);
  ApplyBadWords(words, std::vector<int32_t>{0}, row);
  EXPECT_EQ(row[5], -kInf);
}

TEST(AllowedTokens, EveryOtherTokenIsBanned) {
  std::vector<float> row = {1, 2, 3, 4};
  ApplyAllowedTokens(std::vector<int32_t>{3, 1, 9}, row);
  EXPECT_EQ(row, (std::vector<float>{-kInf, 2, -kInf, 4}));
}

TEST(MinTokens, EndIdsAreBannedUntilEnoughWereGenerated) {
  std::vector<float> row = {1, 2, 3};
  ApplyMinTokens(2, 1, std::vector<int32_t>{2, 0}, row);
  EXPECT_EQ(row, (std::vector<float>{-kInf, 2, -kInf}));
  row = {1, 2, 3};
  ApplyMinTokens(2, 2, std::vector<int32_t>{2, 0}, row);
  EXPECT_EQ(row, (std::vector<float>{1, 2, 3}));
}

TEST(LogitsProcessors, OffLeavesTheRowBitForBit) {
  const std::vector<float> original = Row(100, 1);
  std::vector<float> row = original;
  ProcessorParams p;
  EXPECT_FALSE(p.active());
  ProcessorScratch scratch;
  const std::vector<int32_t> tokens = {1, 2, 3, 1};
  ApplyLogitsProcessors(p, {tokens, 2}, std::vector<int32_t>{5}, row, scratch);
  EXPECT_TRUE(SameBits(row, original));
}

// logit_bias comes before repetition_penalty (vLLM's order): a bias of 1
// on a logit of 1 then a penalty of 2 gives 1, not 1.5.
TEST(LogitsProcessors, BiasBeforePenalties) {
  std::vector<float> row = {1.0f, 1.0f};
  ProcessorParams p;
  p.logit_bias = {{0, 1.0}};
  p.repetition_penalty = 2.0;
  ProcessorScratch scratch;
  ApplyLogitsProcessors(p, {std::vector<int32_t>{0}, 1}, {}, row, scratch);
  EXPECT_EQ(row[0], 1.0f);
  EXPECT_EQ(row[1], 1.0f);
}

// penalty_last_n: the repetition penalty sees the window of prompt and
// output, presence and frequency only the window's generated tokens.
TEST(LogitsProcessors, PenaltyWindow) {
  const std::vector<int32_t> tokens = {0, 1, 2, 3, 1};  // prompt {0, 1, 2}, generated {3, 1}
  ProcessorScratch scratch;
  ProcessorParams p;
  p.repetition_penalty = 2.0;
  p.penalty_last_n = 3;  // {2, 3, 1}
  std::vector<float> row(5, 4.0f);
  ApplyLogitsProcessors(p, {tokens, 3}, {}, row, scratch);
  EXPECT_EQ(row, (std::vector<float>{4, 2, 2, 2, 4}));
  p = {};
  p.presence_penalty = 1.0;
  p.penalty_last_n = 1;  // {1}
  row.assign(5, 4.0f);
  ApplyLogitsProcessors(p, {tokens, 3}, {}, row, scratch);
  EXPECT_EQ(row, (std::vector<float>{4, 3, 4, 4, 4}));
  p.penalty_last_n = -1;  // generated {3, 1}
  row.assign(5, 4.0f);
  ApplyLogitsProcessors(p, {tokens, 3}, {}, row, scratch);
  EXPECT_EQ(row, (std::vector<float>{4, 3, 4, 3, 4}));
  p.penalty_last_n = 0;
  row.assign(5, 4.0f);
  ApplyLogitsProcessors(p, {tokens, 3}, {}, row, scratch);
  EXPECT_EQ(row, std::vector<float>(5, 4.0f));
}

TEST(LogitsProcessors, ABannedTokenStaysBanned) {
  std::vector<float> row = {1.0f, 1.0f, 1.0f};
  ProcessorParams p;
  p.allowed_token_ids = {1, 2};
  p.logit_bias = {{0, 100.0}};
  p.repetition_penalty = 0.5;
  p.frequency_penalty = -2.0;
  ProcessorScratch scratch;
  ApplyLogitsProcessors(p, {std::vector<int32_t>{0, 0}, 0}, {}, row, scratch);
  EXPECT_EQ(row[0], -kInf);
}

DryParams Dry() {
  DryParams d;
  d.multiplier = 0.8;
  d.base = 1.75;
  d.allowed_length = 2;
  return d;
}

// llama.cpp's own example: in "a b c c b c y a b c", emitting c would
// extend the repeat "a b c" (3 tokens), y the repeat "b c" (2).
TEST(Dry, PenalizesTheTokensThatExtendARepeat) {
  enum : int32_t { a, b, c, y, z };
  const std::vector<int32_t> tokens = {a, b, c, c, b, c, y, a, b, c};
  std::vector<float> row(5, 0.0f);
  ApplyDry(Dry(), {}, tokens, row);
  EXPECT_EQ(row[c], -static_cast<float>(0.8f * std::pow(1.75f, 1)));
  EXPECT_EQ(row[y], -0.8f);
  EXPECT_EQ(row[a], 0.0f);
  EXPECT_EQ(row[b], 0.0f);
  EXPECT_EQ(row[z], 0.0f);
}

TEST(Dry, ARepeatDoesNotReachBackPastABreaker) {
  enum : int32_t { a, b, c, e, n };
  const std::vector<int32_t> tokens = {a, b, c, e, a, b, c};
  std::vector<float> row(5, 0.0f);
  ApplyDry(Dry(), {}, tokens, row);
  EXPECT_EQ(row[e], -0.8f * 1.75f);  // "a b c" repeats: 3 tokens
  // b alone breaks: the repeat may only hold "c", shorter than allowed.
  row.assign(5, 0.0f);
  ApplyDry(Dry(), std::vector<DryBreaker>{{b, {}}}, tokens, row);
  EXPECT_EQ(row, std::vector<float>(5, 0.0f));
  // "a b" as head a and tail {b} breaks there too.
  row.assign(5, 0.0f);
  ApplyDry(Dry(), std::vector<DryBreaker>{{a, {b}}}, tokens, row);
  EXPECT_EQ(row, std::vector<float>(5, 0.0f));
  // A tail that does not follow its head breaks nothing.
  row.assign(5, 0.0f);
  ApplyDry(Dry(), std::vector<DryBreaker>{{a, {c}}}, tokens, row);
  EXPECT_EQ(row[e], -0.8f * 1.75f);
}

TEST(Dry, ASingleTokenBreakerIsNeverPenalized) {
  enum : int32_t { a, b, n };
  const std::vector<int32_t> tokens = {a, b, n, a, b};
  std::vector<float> row(3, 0.0f);
  ApplyDry(Dry(), {}, tokens, row);
  EXPECT_EQ(row[n], -0.8f);
  row.assign(3, 0.0f);
  ApplyDry(Dry(), std::vector<DryBreaker>{{n, {}}}, tokens, row);
  EXPECT_EQ(row[n], 0.0f);
}

TEST(Dry, OffOrShortHistoryChangesNothing) {
  const std::vector<int32_t> tokens = {0, 1, 0, 1, 0, 1};
  std::vector<float> row(2, 0.5f);
  DryParams d = Dry();
  d.multiplier = 0.0;
  ApplyDry(d, {}, tokens, row);
  d = Dry();
  d.penalty_last_n = 2;  // no longer than allowed_length
  ApplyDry(d, {}, tokens, row);
  EXPECT_EQ(row, std::vector<float>(2, 0.5f));
  d.penalty_last_n = 3;  // "1 0 1": "0 1" repeats... only once before the end
  ApplyDry(d, {}, tokens, row);
  EXPECT_EQ(row, std::vector<float>(2, 0.5f));
}

TEST(Dry, TheExponentIsCappedSoThePenaltyStaysFinite) {
  const std::vector<int32_t> tokens(400, 3);  // one token repeated: the longest repeat
  std::vector<float> row(4, 0.0f);
  DryParams d = Dry();
  d.base = 10.0;
  ApplyDry(d, {}, tokens, row);
  EXPECT_TRUE(std::isfinite(row[3])) << row[3];
  EXPECT_LT(row[3], -1e30f);
}

TEST(DryBreakersFromText, ContainingTokensBreakAloneAndPrefixesNeedTheirTail) {
  const std::vector<std::string> vocab = {"a", "b\n", ":", "x:", "ab", "", "cab", "ca"};
  // A toy tokenizer: each byte is the token of the same text, else 0.
  const auto tokenize = [&](std::string_view text) -> Result<std::vector<int32_t>> {
    std::vector<int32_t> ids;
    for (const char ch : text) {
      ids.push_back(ch == 'b' ? 9 : 0);
    }
    return ids;
  };
  const std::vector<std::string> breakers = {"\n", "ab"};
  Result<std::vector<DryBreaker>> out = DryBreakersFromText(breakers, vocab, tokenize);
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  const auto has = [&](int32_t head, std::vector<int32_t> tail) {
    for (const DryBreaker& b : *out) {
      if (b.head == head && b.tail == tail) return true;
    }
    return false;
  };
  EXPECT_TRUE(has(1, {}));   // "b\n" contains "\n"
  EXPECT_TRUE(has(4, {}));   // "ab"
  EXPECT_TRUE(has(6, {}));   // "cab"
  EXPECT_TRUE(has(0, {9}));  // "a" then "b"
  EXPECT_TRUE(has(7, {9}));  // "ca" ends with "a"
  EXPECT_EQ(out->size(), 5u);
  const std::vector<std::string> empty = {""};
  EXPECT_FALSE(DryBreakersFromText(empty, vocab, tokenize).ok());
}

}  // namespace
}  // namespace folio::sampling
