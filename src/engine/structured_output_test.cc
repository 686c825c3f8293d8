// Structured output in the engine (RequestParams::grammar): every output is
// a sentence of its grammar, whatever the sampling, the schedule, the forks
// or the drafts; a grammar the vocabulary cannot continue aborts the
// request; what cannot honour a grammar refuses it by name.
//
// The test model speaks the byte tokenizer's vocabulary (byte b is token
// b + 2, 0 and 1 are its begin and end), so its text is its tokens' bytes.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"
#include "folio/engine/request_params.h"
#include "folio/grammar/grammar.h"
#include "folio/tokenizer/byte_tokenizer.h"
#include "testing/engine_drive.h"
#include "testing/test_model.h"

namespace folio::engine {
namespace {

using test_support::Drive;
using test_support::ExpectNoLeak;
using test_support::InOrder;
using test_support::Outcome;
using test_support::TestModel;
using tokenizer::ByteTokenizer;

const std::vector<std::vector<int32_t>>& kPrompts = test_support::TestPrompts();

std::shared_ptr<const grammar::Grammar> Gbnf(const std::string& text) {
  Result<std::shared_ptr<const grammar::Grammar>> g = grammar::Grammar::FromGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

// A choice, and a small JSON-ish grammar with nesting, a bounded number
// and bounded whitespace.
const char kChoice[] = R"(root ::= "yes" | "no" | "maybe so")";
const char kJsonish[] = R"(
root   ::= "{" ws "\"ok\":" ws bool "," ws "\"n\":" ws num ws "}"
bool   ::= "true" | "false"
num    ::= "-"? [0-9]{1,3}
ws     ::= [ \n]{0,2}
)";

RequestParams Constrained(const std::shared_ptr<const grammar::Grammar>& g, double temperature,
                          uint64_t seed) {
  RequestParams p;
  p.sampling.temperature = temperature;
  p.max_tokens = 40;
  p.seed = seed;
  p.eos_token_ids = {ByteTokenizer::kEnd};
  p.grammar = g;
  return p;
}

Engine MakeEngine(const EngineConfig& config = {},
                  const tokenizer::Tokenizer* tok = &ByteTokenizer::AsTokenizer()) {
  Result<Engine> e = Engine::Create(TestModel(), config, nullptr, tok);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return std::move(*e);
}

// The output text (an end-of-sequence token adds none) is a whole sentence
// and the request ended because of it.
void ExpectSentence(const grammar::Grammar& g, const Outcome& o, const std::string& what) {
  EXPECT_TRUE(g.Matches(o.text)) << what << ": \"" << o.text << "\"";
  EXPECT_EQ(o.finish, FinishReason::kStop) << what << ": \"" << o.text << "\"";
}

TEST(StructuredOutput, GreedyOutputIsASentenceOfTheGrammar) {
  for (const char* text : {kChoice, kJsonish}) {
    const auto g = Gbnf(text);
    ASSERT_NE(g, nullptr);
    Engine e = MakeEngine();
    const std::vector<Outcome> out = Drive(e, kPrompts, Constrained(g, 0.0, 0), InOrder(4));
    for (size_t i = 0; i < out.size(); ++i) {
      ExpectSentence(*g, out[i], std::string(text) + " prompt " + std::to_string(i));
    }
    ExpectNoLeak(e);
  }
}

TEST(StructuredOutput, SampledOutputIsASentenceOfTheGrammarForEverySeed) {
  for (const char* text : {kChoice, kJsonish}) {
    const auto g = Gbnf(text);
    ASSERT_NE(g, nullptr);
    std::set<std::string> texts;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      Engine e = MakeEngine();
      RequestParams p = Constrained(g, 1.5, seed);
      p.sampling.top_p = 0.95;
      const std::vector<Outcome> out = Drive(e, kPrompts, p, InOrder(4));
      for (size_t i = 0; i < out.size(); ++i) {
        ExpectSentence(*g, out[i], "seed " + std::to_string(seed) + " prompt " + std::to_string(i));
        texts.insert(out[i].text);
      }
    }
    // Sampling explores the grammar rather than repeating one sentence.
    EXPECT_GT(texts.size(), 1u) << text;
  }
}

// Contract 3 holds for constrained requests: tokens, log-prob bits, text
// and finish reasons are the same alone or batched, in any order, with any
// chunk or page size, across preemption and with two threads.
TEST(StructuredOutput, OutputsDoNotDependOnBatchChunkPageSizeOrPreemption) {
  const auto g = Gbnf(kJsonish);
  ASSERT_NE(g, nullptr);
  RequestParams p = Constrained(g, 0.9, 77);
  p.logprobs = true;
  p.top_logprobs = 2;
  Engine base = MakeEngine();
  const std::vector<Outcome> want = Drive(base, kPrompts, p, InOrder(4));
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    Engine alone = MakeEngine();
    EXPECT_EQ(Drive(alone, {kPrompts[i]}, p, {0})[0], want[i]) << "prompt " << i << " alone";
  }
  ThreadPool two(2);
  EngineConfig chunks;
  chunks.page_size = 3;
  chunks.max_num_batched_tokens = 5;
  chunks.max_num_seqs = 2;
  EngineConfig tight;  // too few pages for all four: preemption and recompute
  tight.page_size = 4;
  tight.num_pages = 16;
  tight.prefix_caching = false;
  for (const auto& [name, config] : {std::pair<const char*, EngineConfig>{"chunks", chunks},
                                     std::pair<const char*, EngineConfig>{"tight", tight}}) {
    Engine e = MakeEngine(config);
    EXPECT_EQ(Drive(e, kPrompts, p, {3, 1, 0, 2}), want) << name;
    if (std::string(name) == "tight") {
      EXPECT_GT(e.stats().preemptions, 0u);
    }
    ExpectNoLeak(e);
  }
  Result<Engine> threaded = Engine::Create(TestModel(), {}, &two, &ByteTokenizer::AsTokenizer());
  ASSERT_TRUE(threaded.ok());
  EXPECT_EQ(Drive(*threaded, kPrompts, p, InOrder(4)), want) << "two threads";
}

// Each fork of an n-sample request advances its own matcher: every sample
// follows the grammar, and sample i equals a one-sample request seeded
// SampleSeed(seed, i), as without a grammar.
TEST(StructuredOutput, EachOfNSamplesFollowsTheGrammar) {
  const auto g = Gbnf(kJsonish);
  ASSERT_NE(g, nullptr);
  RequestParams p = Constrained(g, 1.2, 31);
  p.n = 3;
  Engine e = MakeEngine();
  ASSERT_TRUE(e.AddRequest(kPrompts[2], p).ok());
  std::map<uint64_t, Outcome> samples;
  while (e.HasUnfinished()) {
    Result<std::vector<StepOutput>> step = e.Step();
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    for (const StepOutput& o : *step) test_support::Record(o, samples[o.index]);
  }
  ASSERT_EQ(samples.size(), 3u);
  std::set<std::string> texts;
  for (const auto& [index, o] : samples) {
    ExpectSentence(*g, o, "sample " + std::to_string(index));
    RequestParams one = p;
    one.n = 1;
    one.seed = SampleSeed(p.seed, index);
    Engine solo = MakeEngine();
    EXPECT_EQ(Drive(solo, {kPrompts[2]}, one, {0})[0], o) << "sample " << index;
    texts.insert(o.text);
  }
  EXPECT_GT(texts.size(), 1u);  // the samples differ: each has its own stream and matcher
  ExpectNoLeak(e);
}

// A prompt that repeats "ab" makes the prompt-lookup drafter propose the
// prompt's continuation, which the grammar partly forbids ("ab" must go on
// with "c" or end).
const char kAbc[] = R"(root ::= ("ab" | "abc"){1,8})";
std::vector<int32_t> AbPrompt() {
  return ByteTokenizer::Encode("ab ab ab ab ab ab Zab ab ab", /*add_begin=*/true, false);
}

// Exact acceptance keeps plain decoding's tokens bit for bit under a
// grammar: each draft position is sampled with the mask of the tokens
// before it, and the matcher only ever advances over sampled tokens.
TEST(StructuredOutput, ExactSpeculativeDecodingEqualsPlainDecoding) {
  const auto g = Gbnf(kAbc);
  ASSERT_NE(g, nullptr);
  for (const double temperature : {0.0, 1.0}) {
    RequestParams p = Constrained(g, temperature, 5);
    p.logprobs = true;
    Engine plain = MakeEngine();
    const Outcome want = Drive(plain, {AbPrompt()}, p, {0})[0];
    ExpectSentence(*g, want, "plain");
    EngineConfig drafting;
    drafting.speculative.num_draft_tokens = 4;
    Engine spec = MakeEngine(drafting);
    EXPECT_EQ(Drive(spec, {AbPrompt()}, p, {0})[0], want) << "temperature " << temperature;
    EXPECT_GT(spec.stats().draft_tokens, 0u);
    ExpectNoLeak(spec);
  }
}

// Rejection sampling draws the resample from the masked distribution: a
// draft token the grammar forbids is rejected, and the output still
// follows the grammar.
TEST(StructuredOutput, RejectionSamplingRejectsDraftTokensTheGrammarForbids) {
  const auto g = Gbnf(kAbc);
  ASSERT_NE(g, nullptr);
  EngineConfig drafting;
  drafting.speculative.num_draft_tokens = 4;
  drafting.speculative.acceptance = DraftAcceptance::kRejection;
  uint64_t drafted = 0, accepted = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    Engine e = MakeEngine(drafting);
    const Outcome o = Drive(e, {AbPrompt()}, Constrained(g, 1.0, seed), {0})[0];
    ExpectSentence(*g, o, "seed " + std::to_string(seed));
    drafted += e.stats().draft_tokens;
    accepted += e.stats().draft_accepted_tokens;
  }
  EXPECT_GT(drafted, 0u);
  EXPECT_LT(accepted, drafted);  // " " and "Z" drafts are never accepted
}

// The byte vocabulary without a token that starts with "z" alone: byte z's
// token is replaced by "zz", so after "a" the grammar "az" can go nowhere.
const tokenizer::Tokenizer& NoZTokenizer() {
  static const tokenizer::Tokenizer* t = [] {
    const tokenizer::Tokenizer& bytes = ByteTokenizer::AsTokenizer();
    tokenizer::TokenizerSpec spec;
    spec.pre_tokenizer = "gpt-2";
    for (int32_t id = 0; id < ByteTokenizer::kVocabSize; ++id) {
      spec.tokens.push_back(bytes.TokenText(id));
      spec.token_types.push_back(id < 2 ? 3 : 1);
    }
    spec.tokens[static_cast<size_t>(ByteTokenizer::Encode("z", false, false)[0])] = "zz";
    spec.bos_id = ByteTokenizer::kBegin;
    spec.eos_id = ByteTokenizer::kEnd;
    Result<tokenizer::Tokenizer> made = tokenizer::Tokenizer::FromSpec(std::move(spec));
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    return new tokenizer::Tokenizer(std::move(*made));
  }();
  return *t;
}

TEST(StructuredOutput, AGrammarNoTokenCanContinueAbortsTheRequestWithoutFailingTheStep) {
  const auto g = Gbnf(R"(root ::= "az")");
  ASSERT_NE(g, nullptr);
  Engine e = MakeEngine({}, &NoZTokenizer());
  RequestParams unconstrained;
  unconstrained.max_tokens = 6;
  const RequestId other = *e.AddRequest(kPrompts[0], unconstrained);
  const RequestId stuck = *e.AddRequest(kPrompts[1], Constrained(g, 0.0, 0));
  std::map<RequestId, Outcome> out;
  while (e.HasUnfinished()) {
    Result<std::vector<StepOutput>> step = e.Step();
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    for (const StepOutput& o : *step) test_support::Record(o, out[o.id]);
  }
  EXPECT_EQ(out[stuck].tokens, ByteTokenizer::Encode("a", false, false));
  EXPECT_EQ(out[stuck].text, "a");
  EXPECT_EQ(out[stuck].finish, FinishReason::kAbort);
  EXPECT_EQ(out[other].tokens.size(), 6u);  // its neighbour runs on
  ExpectNoLeak(e);
}

// Where the grammar may end but no token continues it, the end-of-sequence
// id is allowed, so the request finishes normally.
TEST(StructuredOutput, AGrammarThatCanOnlyEndAllowsEndOfSequence) {
  const auto g = Gbnf(R"(root ::= "a" | "az")");
  ASSERT_NE(g, nullptr);
  Engine e = MakeEngine({}, &NoZTokenizer());
  const Outcome o = Drive(e, {kPrompts[1]}, Constrained(g, 0.0, 0), {0})[0];
  std::vector<int32_t> want = ByteTokenizer::Encode("a", false, false);
  want.push_back(ByteTokenizer::kEnd);
  EXPECT_EQ(o.tokens, want);
  EXPECT_EQ(o.text, "a");
  EXPECT_EQ(o.finish, FinishReason::kStop);
}

TEST(StructuredOutput, MaxTokensCutsADocumentShortWithLength) {
  const auto g = Gbnf(kJsonish);
  ASSERT_NE(g, nullptr);
  RequestParams p = Constrained(g, 0.0, 0);
  p.max_tokens = 3;
  Engine e = MakeEngine();
  const Outcome o = Drive(e, {kPrompts[0]}, p, {0})[0];
  EXPECT_EQ(o.tokens.size(), 3u);
  EXPECT_EQ(o.finish, FinishReason::kLength);
  EXPECT_EQ(o.text.substr(0, 1), "{");
}

// A request resumed from its tokens (Engine::ResumeRequest) replays its
// output through a new matcher and continues bit-identically.
TEST(StructuredOutput, AResumedRequestContinuesInItsGrammar) {
  const auto g = Gbnf(kJsonish);
  ASSERT_NE(g, nullptr);
  const RequestParams p = Constrained(g, 1.0, 9);
  Engine first = MakeEngine();
  const RequestId id = *first.AddRequest(kPrompts[0], p);
  std::vector<int32_t> head;
  uint64_t rng_state = 0;
  Outcome whole;
  for (int steps = 0; first.HasUnfinished(); ++steps) {
    Result<std::vector<StepOutput>> step = first.Step();
    ASSERT_TRUE(step.ok());
    for (const StepOutput& o : *step) {
      ASSERT_EQ(o.id, id);
      test_support::Record(o, whole);
      if (steps < 4) {
        head.insert(head.end(), o.new_tokens.begin(), o.new_tokens.end());
        rng_state = o.rng_state;
      }
    }
  }
  ExpectSentence(*g, whole, "whole");
  ASSERT_LT(head.size(), whole.tokens.size());
  Engine second = MakeEngine();
  Result<RequestId> resumed = second.ResumeRequest(kPrompts[0], head, p, rng_state, 0);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  Outcome tail;
  while (second.HasUnfinished()) {
    Result<std::vector<StepOutput>> step = second.Step();
    ASSERT_TRUE(step.ok());
    for (const StepOutput& o : *step) test_support::Record(o, tail);
  }
  EXPECT_EQ(tail.tokens,
            std::vector<int32_t>(whole.tokens.begin() + static_cast<ptrdiff_t>(head.size()),
                                 whole.tokens.end()));
  EXPECT_EQ(tail.finish, whole.finish);
}

TEST(StructuredOutput, ResumingAnOutputOutsideTheGrammarIsRefusedNamingTheToken) {
  const auto g = Gbnf(kChoice);
  ASSERT_NE(g, nullptr);
  Engine e = MakeEngine();
  const Status s = e.ResumeRequest(kPrompts[0], ByteTokenizer::Encode("yo", false, false),
                                   Constrained(g, 0.0, 0), 0, 0)
                       .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("output token 1"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("grammar"), std::string::npos) << s.ToString();
}

// What cannot honour a grammar refuses it by name.
TEST(StructuredOutput, BeamSearchWithAGrammarIsRefused) {
  RequestParams p = Constrained(Gbnf(kChoice), 0.0, 0);
  p.beam.num_beams = 2;
  Engine e = MakeEngine();
  const Status s = e.AddRequest(kPrompts[0], p).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("grammar"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("beam search"), std::string::npos) << s.ToString();
}

TEST(StructuredOutput, AGrammarWithoutATokenizerIsRefused) {
  Result<Engine> e = Engine::Create(TestModel(), {});
  ASSERT_TRUE(e.ok());
  const Status s = e->AddRequest(kPrompts[0], Constrained(Gbnf(kChoice), 0.0, 0)).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("grammar"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("tokenizer"), std::string::npos) << s.ToString();
}

TEST(StructuredOutput, ExportingAConstrainedRequestsSnapshotIsRefused) {
  Engine e = MakeEngine();
  RequestParams plain;
  plain.max_tokens = 8;
  const RequestId free_id = *e.AddRequest(kPrompts[0], plain);
  const RequestId constrained = *e.AddRequest(kPrompts[2], Constrained(Gbnf(kJsonish), 0.0, 0));
  ASSERT_TRUE(e.Step().ok());
  EXPECT_TRUE(e.ExportSnapshot(std::vector<RequestId>{free_id}).ok());
  const Status s = e.ExportSnapshot(std::vector<RequestId>{free_id, constrained}).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("grammar"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("request " + std::to_string(constrained)), std::string::npos)
      << s.ToString();
}

// The cluster's front end hands requests on in this JSON form; a grammar
// it cannot write is refused, never dropped.
TEST(StructuredOutput, TheJsonFormRefusesAGrammarByName) {
  RequestParams p;
  EXPECT_TRUE(RequestParamsToJson(p).ok());
  p.grammar = Gbnf(kChoice);
  const Status s = RequestParamsToJson(p).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("grammar"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace folio::engine
