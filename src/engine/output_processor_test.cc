#include "folio/engine/output_processor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "folio/grammar/grammar.h"
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
std::vector<StepOutput> Feed(OutputProcessor& p, OutputProcessor::State& s, const std::string& text,
                             uint64_t first = 1) {
  std::vector<StepOutput> out;
  for (const char c : text) {
    auto o = p.Process(s, Peak(Byte(c)), first + out.size());
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
  OutputProcessor::State s0 = *p.NewState(params);
  EXPECT_EQ(p.Process(s0, Peak(5), 1)->finish, FinishReason::kNone);
  const StepOutput last = *p.Process(s0, Peak(6), 2);
  EXPECT_EQ(last.finish, FinishReason::kLength);
  EXPECT_EQ(last.new_tokens, std::vector<int32_t>{6});
}

TEST(OutputProcessor, AStopTokenIsKeptAndEndsTheRequest) {
  OutputProcessor p(&tokenizer::ByteTokenizer::AsTokenizer());
  RequestParams params;
  params.stop_token_ids = {Byte('!')};
  OutputProcessor::State s0 = *p.NewState(params);
  const auto out = Feed(p, s0, "hi!x");
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
  OutputProcessor::State s0 = *p.NewState(params);
  const auto out = Feed(p, s0, "abENxENDzz");
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
  OutputProcessor::State s0 = *p.NewState(params);
  OutputProcessor::State s1 = *p.NewState(params);
  params.seed = 100;
  OutputProcessor::State s2 = *p.NewState(params);
  const std::vector<float> flat(kVocab, 0.0f);
  std::vector<int32_t> a, b, c;
  for (int i = 0; i < 32; ++i) {
    a.push_back(p.Process(s0, flat, a.size() + 1)->new_tokens[0]);
    b.push_back(p.Process(s1, flat, b.size() + 1)->new_tokens[0]);
    c.push_back(p.Process(s2, flat, c.size() + 1)->new_tokens[0]);
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
  OutputProcessor::State s0 = *p.NewState(params);
  const auto first = Feed(p, s0, "abx");
  ASSERT_EQ(first.back().text, "");  // "x" held back
  auto restored = p.RestoredState(
      params, s0.rng.state(), std::vector<int32_t>{Byte('a'), Byte('b'), Byte('x')}, s0.text_sent);
  ASSERT_TRUE(restored.ok());
  OutputProcessor::State s1 = std::move(*restored);
  const auto a = Feed(p, s0, "yq", 4);
  const auto b = Feed(p, s1, "yq", 4);
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
  OutputProcessor::State s0 = *p.NewState(params);
  const uint64_t vocab = 2;
  const std::vector<float> rows = {0, 1, 2, 3, 4, 5};  // positions 0, 1, 2
  StepOutput first;
  first.id = 0;
  OutputProcessor::AddPromptLogits(s0, 0, 4, std::span(rows).first(4), vocab, first);
  EXPECT_EQ(first.prompt_logits, (std::vector<float>{0, 1, 2, 3}));
  StepOutput again;
  again.id = 0;
  OutputProcessor::AddPromptLogits(s0, 0, 4, rows, vocab, again);  // recomputed from 0
  EXPECT_EQ(again.prompt_logits, (std::vector<float>{4, 5}));
  StepOutput beyond;
  beyond.id = 0;
  OutputProcessor::AddPromptLogits(s0, 3, 4, rows, vocab,
                                   beyond);  // positions 3 (prompt), 4, 5 (output)
  EXPECT_EQ(beyond.prompt_logits, (std::vector<float>{0, 1}));
}

// Structured output.

std::shared_ptr<const grammar::Grammar> Gbnf(const std::string& text) {
  auto g = grammar::Grammar::FromGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

RequestParams Constrained(const std::string& gbnf) {
  RequestParams params;
  params.max_tokens = 16;
  params.eos_token_ids = {tokenizer::ByteTokenizer::kEnd};
  params.grammar = Gbnf(gbnf);
  return params;
}

// Byte-fallback tokens are their one byte, special and control tokens
// nothing (never allowed), ids past the tokenizer's vocabulary nothing.
TEST(GrammarTokenBytes, ByteFallbackIsItsByteAndSpecialTokensAreEmpty) {
  tokenizer::TokenizerSpec spec;
  spec.model = tokenizer::TokenizerSpec::Model::kSentencePiece;
  spec.tokens = {"<unk>", "<s>", "</s>", "<0x41>", "<0xE2>", "\xE2\x96\x81hi", "hi"};
  spec.token_types = {2, 3, 3, 6, 6, 1, 1};
  spec.scores = {0, 0, 0, 0, 0, -1, -2};
  spec.unk_id = 0;
  spec.bos_id = 1;
  spec.eos_id = 2;
  auto tok = tokenizer::Tokenizer::FromSpec(spec);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const std::vector<std::string> bytes = GrammarTokenBytes(*tok, 9);
  EXPECT_EQ(bytes, (std::vector<std::string>{"", "", "", "A", "\xE2", " hi", "hi", "", ""}));
  EXPECT_EQ(GrammarTokenBytes(*tok, 4).size(),
            4u);  // a model vocabulary smaller than the tokenizer's
}

// skip_special_tokens false writes special tokens as their text, the one
// the request stops on too (a harmony chat's parser reads them); by
// default they are left out.
TEST(OutputProcessor, SpecialTokensAreTextWhenNotSkipped) {
  tokenizer::TokenizerSpec spec;
  spec.model = tokenizer::TokenizerSpec::Model::kSentencePiece;
  spec.tokens = {"<unk>", "<|channel|>", "<|return|>", "hi"};
  spec.token_types = {2, 3, 3, 1};
  spec.scores = {0, 0, 0, -1};
  spec.unk_id = 0;
  spec.add_space_prefix = false;
  auto tok = tokenizer::Tokenizer::FromSpec(spec);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  OutputProcessor p(&*tok, 4);
  for (const bool skip : {true, false}) {
    RequestParams params;
    params.max_tokens = 8;
    params.eos_token_ids = {2};
    params.skip_special_tokens = skip;
    OutputProcessor::State s = *p.NewState(params);
    std::string text;
    uint64_t n = 0;
    for (const int32_t t : {1, 3, 2}) {
      std::vector<float> row(4, 0.0f);
      row[static_cast<size_t>(t)] = 10.0f;
      auto o = p.Process(s, row, ++n);
      ASSERT_TRUE(o.ok()) << o.status().ToString();
      text += o->text;
      EXPECT_EQ(o->finish, t == 2 ? FinishReason::kStop : FinishReason::kNone);
    }
    EXPECT_EQ(text, skip ? "hi" : "<|channel|>hi<|return|>");
    // Beam search's text, made whole at its end, says the same.
    EXPECT_EQ(p.Text(std::vector<int32_t>{1, 3, 2}, skip), text);
  }
}

// A grammar that names special tokens (token references): they are the
// only tokens allowed where named, and an end-of-sequence id the grammar
// names (harmony's <|call|>) is allowed before the grammar is complete,
// where another end id is not. A restored state replays them.
TEST(OutputProcessor, AGrammarRequiresTheSpecialTokensItNames) {
  tokenizer::TokenizerSpec spec;
  spec.model = tokenizer::TokenizerSpec::Model::kSentencePiece;
  spec.tokens = {"<unk>", "<|channel|>", "<|call|>", "hi", "<|return|>"};
  spec.token_types = {2, 3, 3, 1, 3};
  spec.scores = {0, 0, 0, -1, 0};
  spec.unk_id = 0;
  spec.add_space_prefix = false;
  auto tok = tokenizer::Tokenizer::FromSpec(spec);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  OutputProcessor p(&*tok, 5);
  grammar::TokenVocabulary vocabulary;
  vocabulary.size = 5;
  vocabulary.find = [&](std::string_view text) { return tok->TokenId(text); };
  auto g = grammar::Grammar::FromGbnf(R"(root ::= <|channel|> "hi" <|call|> "hi")", {}, vocabulary);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  RequestParams params;
  params.max_tokens = 8;
  params.eos_token_ids = {2, 4};
  params.skip_special_tokens = false;
  params.grammar = *g;
  const auto peak = [](int32_t t) {
    std::vector<float> row(5, 0.0f);
    row[static_cast<size_t>(t)] = 10.0f;
    return row;
  };
  OutputProcessor::State s = *p.NewState(params);
  // The model wants "hi", then to end with <|return|>: the grammar says
  // <|channel|>, "hi", then <|call|> (an end id, named), not <|return|>.
  EXPECT_EQ(p.Process(s, peak(3), 1)->new_tokens, std::vector<int32_t>{1});
  EXPECT_EQ(p.Process(s, peak(4), 2)->new_tokens, std::vector<int32_t>{3});
  const StepOutput last = *p.Process(s, peak(4), 3);
  EXPECT_EQ(last.new_tokens, std::vector<int32_t>{2});
  EXPECT_EQ(last.finish, FinishReason::kStop);
  EXPECT_EQ(s.text, "<|channel|>hi<|call|>");
  // Replayed: the special token and the text.
  auto restored = p.RestoredState(params, 0, std::vector<int32_t>{1, 3}, 0);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(p.Process(*restored, peak(4), 3)->new_tokens, std::vector<int32_t>{2});
  EXPECT_EQ(p.RestoredState(params, 0, std::vector<int32_t>{3}, 0).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(OutputProcessor, TheTokenTrieIsBuiltOnceAndShared) {
  OutputProcessor p(&tokenizer::ByteTokenizer::AsTokenizer(), kVocab);
  const auto trie = p.token_trie();
  EXPECT_EQ(trie->vocab_size(), kVocab);
  EXPECT_EQ(p.token_trie(), trie);
  EXPECT_EQ(trie->token_bytes(Byte('q')), "q");
  EXPECT_EQ(trie->token_bytes(tokenizer::ByteTokenizer::kEnd), "");
}

// Greedy picks the best allowed token, not the row's argmax; the
// end-of-sequence id is refused until the text is a sentence, then taken.
TEST(OutputProcessor, AGrammarOverridesTheArgmaxAndEndOfSequenceWaitsForASentence) {
  OutputProcessor p(&tokenizer::ByteTokenizer::AsTokenizer(), kVocab);
  OutputProcessor::State s0 = *p.NewState(Constrained(R"(root ::= "yes" | "yesno")"));
  std::vector<float> row = Peak(tokenizer::ByteTokenizer::kEnd);  // the model wants to stop
  row[static_cast<size_t>(Byte('y'))] = 1.0f;
  auto o = p.Process(s0, row, 1);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->new_tokens, std::vector<int32_t>{Byte('y')});
  EXPECT_EQ(o->finish, FinishReason::kNone);
  // Every token has logit 0 but the end: "e" is the only one allowed.
  EXPECT_EQ(p.Process(s0, Peak(tokenizer::ByteTokenizer::kEnd), 2)->new_tokens,
            std::vector<int32_t>{Byte('e')});
  EXPECT_EQ(p.Process(s0, Peak(Byte('x')), 3)->new_tokens, std::vector<int32_t>{Byte('s')});
  // "yes" is a sentence: now the end may come, and ends the request.
  o = p.Process(s0, Peak(tokenizer::ByteTokenizer::kEnd), 4);
  EXPECT_EQ(o->new_tokens, std::vector<int32_t>{tokenizer::ByteTokenizer::kEnd});
  EXPECT_EQ(o->finish, FinishReason::kStop);
  EXPECT_EQ(s0.text, "yes");
}

TEST(OutputProcessor, AGrammarThatIsDoneEndsTheRequestWithStop) {
  OutputProcessor p(&tokenizer::ByteTokenizer::AsTokenizer(), kVocab);
  OutputProcessor::State s0 = *p.NewState(Constrained(R"(root ::= "no")"));
  EXPECT_EQ(p.Process(s0, Peak(Byte('n')), 1)->finish, FinishReason::kNone);
  const StepOutput last = *p.Process(s0, Peak(Byte('o')), 2);
  EXPECT_EQ(last.finish, FinishReason::kStop);
  EXPECT_EQ(last.text, "o");
}

// Speculative decoding's rejection sampling: a draft the grammar forbids
// is rejected, whatever its logit, and the token comes from the allowed
// ones.
TEST(OutputProcessor, ADraftOutsideTheGrammarIsRejectedAndResampledFromItsMask) {
  OutputProcessor p(&tokenizer::ByteTokenizer::AsTokenizer(), kVocab);
  RequestParams params = Constrained(R"(root ::= "a" | "b")");
  params.sampling.temperature = 1.0;
  for (RequestId id = 0; id < 200; ++id) {
    params.seed = id;
    OutputProcessor::State s = *p.NewState(params);
    std::vector<float> row(kVocab, 0.0f);
    row[static_cast<size_t>(Byte('c'))] = 30.0f;  // the draft: forbidden
    auto o = p.Process(s, row, 1, {}, Byte('c'));
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    ASSERT_TRUE(o->new_tokens[0] == Byte('a') || o->new_tokens[0] == Byte('b')) << o->new_tokens[0];
  }
}

// n samples: each fork advances its own copy of the matcher.
TEST(OutputProcessor, ForkedStatesFollowTheGrammarIndependently) {
  OutputProcessor p(&tokenizer::ByteTokenizer::AsTokenizer(), kVocab);
  RequestParams params = Constrained(R"(root ::= "yes" | "no")");
  params.n = 2;
  OutputProcessor::State s0 = *p.NewState(params);
  OutputProcessor::State fork = OutputProcessor::ForkState(s0, 1);
  EXPECT_EQ(fork.params.n, 1u);
  EXPECT_EQ(fork.params.seed, SampleSeed(params.seed, 1));
  OutputProcessor::State s1 = std::move(fork);
  EXPECT_EQ(p.Process(s0, Peak(Byte('y')), 1)->new_tokens, std::vector<int32_t>{Byte('y')});
  EXPECT_EQ(p.Process(s1, Peak(Byte('n')), 1)->new_tokens, std::vector<int32_t>{Byte('n')});
  // Each continues from its own text: "e" for the first, "o" for the second.
  const std::vector<float> flat(kVocab, 0.0f);
  EXPECT_EQ(p.Process(s0, flat, 2)->new_tokens, std::vector<int32_t>{Byte('e')});
  EXPECT_EQ(p.Process(s1, flat, 2)->new_tokens, std::vector<int32_t>{Byte('o')});
  EXPECT_EQ(s1.text, "no");
}

TEST(OutputProcessor, ARestoredConstrainedStateReplaysItsOutput) {
  OutputProcessor p(&tokenizer::ByteTokenizer::AsTokenizer(), kVocab);
  const RequestParams params = Constrained(R"(root ::= "yes" | "yo")");
  auto restored = p.RestoredState(params, 0, std::vector<int32_t>{Byte('y')}, 0);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  OutputProcessor::State s0 = std::move(*restored);
  EXPECT_EQ(p.Process(s0, Peak(Byte('x')), 2)->new_tokens[0], Byte('e'));  // 'e' < 'o': lower id
  const Status bad =
      p.RestoredState(params, 0, std::vector<int32_t>{Byte('y'), Byte('x')}, 0).status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("output token 1"), std::string::npos) << bad.ToString();
  const Status done =
      p.RestoredState(params, 0, std::vector<int32_t>{Byte('y'), Byte('o'), Byte('o')}, 0).status();
  EXPECT_EQ(done.code(), StatusCode::kInvalidArgument);
}

// Log-probs of a constrained request: the masked distribution.
TEST(OutputProcessor, ConstrainedLogprobsAreThoseOfTheAllowedTokens) {
  OutputProcessor p(&tokenizer::ByteTokenizer::AsTokenizer(), kVocab);
  RequestParams params = Constrained(R"(root ::= "yes" | "no")");
  params.logprobs = true;
  params.top_logprobs = 5;
  OutputProcessor::State s0 = *p.NewState(params);
  std::vector<float> row(kVocab, 0.0f);
  row[static_cast<size_t>(Byte('x'))] = 20.0f;  // forbidden, and the model's favourite
  const StepOutput o = *p.Process(s0, row, 1);
  ASSERT_EQ(o.logprobs.size(), 1u);
  // "y" and "n" alone, equally likely: log(1/2) each.
  EXPECT_EQ(o.logprobs[0].token, Byte('n'));
  EXPECT_FLOAT_EQ(o.logprobs[0].logprob, -std::log(2.0f));
  ASSERT_EQ(o.logprobs[0].top.size(), 2u);
  EXPECT_EQ(o.logprobs[0].top[0].first, Byte('n'));
  EXPECT_EQ(o.logprobs[0].top[1].first, Byte('y'));
}

}  // namespace
}  // namespace folio::engine
