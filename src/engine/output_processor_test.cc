#include "folio/engine/output_processor.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "folio/tokenizer/byte_tokenizer.h"

namespace folio::engine {
namespace {

constexpr uint64_t kVocab = 258;  // the byte tokenizer's: byte b is id b + 2

// Logits that make greedy selection pick `id`.
std::vector<float> Peak(int32_t id) {
  std::vector<float> row(kVocab, 0.0f);
  row[static_cast<size_t>(id)] = 10.0f;
  return row;
}
int32_t Byte(char c) { return static_cast<unsigned char>(c) + 2; }

// Feeds the bytes of `text` greedily, the first as generated token number
// `first`; returns the outputs.
std::vector<StepOutput> Feed(OutputProcessor& p, RequestId id, const std::string& text,
                             uint64_t first = 1) {
  std::vector<StepOutput> out;
  for (const char c : text) {
    auto o = p.Process(id, Peak(Byte(c)), first + out.size());
    EXPECT_TRUE(o.ok()) << o.status().ToString();
    out.push_back(*o);
    if (o->finish != FinishReason::kNone) break;
  }
  return out;
}

TEST(OutputProcessor, MaxTokensEndsTheRequestWithLength) {
  OutputProcessor p(nullptr);
  RequestParams params;
  params.max_tokens = 2;
  p.Add(0, p.NewState(params));
  EXPECT_EQ(p.Process(0, Peak(5), 1)->finish, FinishReason::kNone);
  const StepOutput last = *p.Process(0, Peak(6), 2);
  EXPECT_EQ(last.finish, FinishReason::kLength);
  EXPECT_EQ(last.new_tokens, std::vector<int32_t>{6});
}

TEST(OutputProcessor, AStopTokenIsKeptAndEndsTheRequest) {
  OutputProcessor p(&tokenizer::ByteTokenizer::AsTokenizer());
  RequestParams params;
  params.stop_token_ids = {Byte('!')};
  p.Add(0, p.NewState(params));
  const auto out = Feed(p, 0, "hi!x");
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out.back().finish, FinishReason::kStop);
  EXPECT_EQ(out.back().new_tokens, std::vector<int32_t>{Byte('!')});
  EXPECT_EQ(out[0].text + out[1].text + out[2].text, "hi!");
}

TEST(OutputProcessor, TextThatMightStartAStopStringIsHeldBack) {
  OutputProcessor p(&tokenizer::ByteTokenizer::AsTokenizer());
  RequestParams params;
  params.max_tokens = 64;
  params.stop_strings = {"END"};
  p.Add(0, p.NewState(params));
  const auto out = Feed(p, 0, "abENxENDzz");
  std::string text;
  std::vector<std::string> pieces;
  for (const StepOutput& o : out) {
    text += o.text;
    pieces.push_back(o.text);
  }
  EXPECT_EQ(text, "abENx");  // cut before the stop string
  EXPECT_EQ(pieces[2], "");  // "E" might have started "END"
  EXPECT_EQ(pieces[4], "ENx");
  EXPECT_EQ(out.back().finish, FinishReason::kStop);
  EXPECT_EQ(out.size(), 8u);  // the token that completed it is included
}

TEST(OutputProcessor, TheSameSeedGivesTheSameTokens) {
  OutputProcessor p(nullptr);
  RequestParams params;
  params.sampling.temperature = 1.0;
  params.max_tokens = 100;
  params.seed = 99;
  p.Add(0, p.NewState(params));
  p.Add(1, p.NewState(params));
  params.seed = 100;
  p.Add(2, p.NewState(params));
  const std::vector<float> flat(kVocab, 0.0f);
  std::vector<int32_t> a, b, c;
  for (int i = 0; i < 32; ++i) {
    a.push_back(p.Process(0, flat, a.size() + 1)->new_tokens[0]);
    b.push_back(p.Process(1, flat, b.size() + 1)->new_tokens[0]);
    c.push_back(p.Process(2, flat, c.size() + 1)->new_tokens[0]);
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(OutputProcessor, ARestoredStateContinuesTheTextAndTheStream) {
  const tokenizer::Tokenizer& tok = tokenizer::ByteTokenizer::AsTokenizer();
  OutputProcessor p(&tok);
  RequestParams params;
  params.max_tokens = 5;
  params.stop_strings = {"xyz"};
  p.Add(0, p.NewState(params));
  const auto first = Feed(p, 0, "abx");
  ASSERT_EQ(first.back().text, "");  // "x" held back
  const OutputProcessor::State& s = p.state(0);
  auto restored = p.RestoredState(
      params, s.rng.state(), std::vector<int32_t>{Byte('a'), Byte('b'), Byte('x')}, s.text_sent);
  ASSERT_TRUE(restored.ok());
  p.Add(1, std::move(*restored));
  const auto a = Feed(p, 0, "yq", 4);
  const auto b = Feed(p, 1, "yq", 4);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(a[1].text, b[1].text);
  EXPECT_EQ(b[1].text, "xyq");
  EXPECT_EQ(b[1].finish, FinishReason::kLength);
  EXPECT_EQ(p.RestoredState(params, 0, {}, 1).status().code(), StatusCode::kInvalidArgument);
}

// A recomputed prompt (after a preemption) returns no position twice, and
// generated positions are never prompt logits.
TEST(OutputProcessor, PromptLogitsReturnEachPromptPositionOnce) {
  OutputProcessor p(nullptr);
  RequestParams params;
  params.prompt_logits = true;
  p.Add(0, p.NewState(params));
  const uint64_t vocab = 2;
  const std::vector<float> rows = {0, 1, 2, 3, 4, 5};  // positions 0, 1, 2
  StepOutput first;
  first.id = 0;
  p.AddPromptLogits(0, 0, 4, std::span(rows).first(4), vocab, first);
  EXPECT_EQ(first.prompt_logits, (std::vector<float>{0, 1, 2, 3}));
  StepOutput again;
  again.id = 0;
  p.AddPromptLogits(0, 0, 4, rows, vocab, again);  // recomputed from 0
  EXPECT_EQ(again.prompt_logits, (std::vector<float>{4, 5}));
  StepOutput beyond;
  beyond.id = 0;
  p.AddPromptLogits(0, 3, 4, rows, vocab, beyond);  // positions 3 (prompt), 4, 5 (output)
  EXPECT_EQ(beyond.prompt_logits, (std::vector<float>{0, 1}));
}

}  // namespace
}  // namespace folio::engine
