// Logits processors in the engine (RequestParams::processors): a row's
// processed logits depend on the request's own tokens alone, so outputs
// are the same alone or batched, chunked, preempted, drafted or on two
// threads; parallel samples each see their own history; beams refuse them
// by name; min_tokens and a fully banned row end as documented.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"
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

const std::vector<int32_t> kShort = {0, 5, 6};

const tokenizer::Tokenizer& Tok() { return tokenizer::ByteTokenizer::AsTokenizer(); }

// Prompts that repeat, so prompt lookup drafts and the penalties have
// something to act on, plus the shared test prompts.
std::vector<std::vector<int32_t>> Prompts() {
  std::vector<std::vector<int32_t>> prompts = test_support::TestPrompts();
  for (int32_t period : {2, 3}) {
    std::vector<int32_t> p = {0};
    for (int32_t i = 0; i < 16; ++i) p.push_back(40 + (i % period) * 7);
    prompts.push_back(p);
  }
  return prompts;
}

// Every processor on. A low temperature, so that the test model's flat
// logits repeat (drafts get accepted) and the penalties matter.
RequestParams WithProcessors(bool greedy) {
  RequestParams p;
  p.sampling = greedy ? sampling::SamplingParams{0.0, 0, 1.0, 0.0}
                      : sampling::SamplingParams{0.05, 40, 0.95, 0.0};
  p.max_tokens = 30;
  p.seed = 41;
  p.logprobs = true;
  p.top_logprobs = 2;
  p.stop_token_ids = {1};
  sampling::ProcessorParams& q = p.processors;
  // Mild penalties over a short window and a strong bias: the output still
  // repeats (so prompt lookup drafts, and drafts are accepted), but not as
  // it would without them.
  q.repetition_penalty = 1.1;
  q.presence_penalty = 0.2;
  q.frequency_penalty = 0.05;
  q.penalty_last_n = 6;
  q.logit_bias = {{54, 6.0}, {61, 5.5}, {70, -2.0}};
  q.min_tokens = 4;
  q.dry.multiplier = 0.05;
  q.dry.allowed_length = 6;
  q.dry.penalty_last_n = 12;
  p.bad_words = {"zq"};
  if (!greedy) {
    p.sampling.typical_p = 0.95;
    p.sampling.top_n_sigma = 3.0;
    p.sampling.xtc_probability = 0.3;
    p.sampling.xtc_threshold = 0.05;
  }
  return p;
}

std::vector<Outcome> Alone(const std::vector<std::vector<int32_t>>& prompts,
                           const RequestParams& params) {
  EngineConfig solo;
  solo.prefix_caching = false;
  std::vector<Outcome> want;
  for (const auto& p : prompts) {
    auto e = *Engine::Create(TestModel(), solo, nullptr, &Tok());
    want.push_back(Drive(e, {p}, params, {0})[0]);
  }
  return want;
}

TEST(EngineProcessors, OutputDoesNotDependOnScheduleDraftsOrThreads) {
  const auto prompts = Prompts();
  ThreadPool two(2);
  EngineConfig chunks;
  chunks.page_size = 3;
  chunks.max_num_batched_tokens = 7;
  chunks.max_num_seqs = 3;
  EngineConfig tight;
  tight.page_size = 4;
  tight.num_pages = 24;
  EngineConfig drafting;
  drafting.speculative.num_draft_tokens = 4;
  EngineConfig drafting_tight = tight;
  drafting_tight.speculative.num_draft_tokens = 3;
  struct Variant {
    const char* name;
    EngineConfig config;
    ThreadPool* pool;
  };
  const std::vector<Variant> variants = {{"batched", {}, nullptr},
                                         {"chunks of 7, pages of 3", chunks, nullptr},
                                         {"preempting", tight, nullptr},
                                         {"drafting", drafting, nullptr},
                                         {"drafting and preempting", drafting_tight, nullptr},
                                         {"two threads", {}, &two}};
  for (const bool greedy : {true, false}) {
    const RequestParams params = WithProcessors(greedy);
    const std::vector<Outcome> want = Alone(prompts, params);
    // The processors change the output, so the comparison below means
    // something.
    RequestParams plain = params;
    plain.processors = {};
    plain.bad_words.clear();
    plain.sampling.typical_p = 1.0;
    plain.sampling.top_n_sigma = 0.0;
    plain.sampling.xtc_probability = 0.0;
    EXPECT_NE(Alone(prompts, plain), want);
    uint64_t accepted = 0;
    for (const Variant& v : variants) {
      SCOPED_TRACE(std::string(greedy ? "greedy, " : "sampled, ") + v.name);
      auto engine = *Engine::Create(TestModel(), v.config, v.pool, &Tok());
      EXPECT_EQ(Drive(engine, prompts, params, InOrder(prompts.size())), want);
      accepted += engine.stats().draft_accepted_tokens;
      ExpectNoLeak(engine);
    }
    // Drafts were accepted, so draft positions were processed.
    EXPECT_GT(accepted, 0u) << (greedy ? "greedy" : "sampled");
  }
}

TEST(EngineProcessors, EachParallelSampleHasItsOwnHistory) {
  const std::vector<int32_t> prompt = Prompts().back();
  RequestParams params = WithProcessors(false);
  params.sampling.temperature = 0.9;  // samples that differ
  params.n = 3;
  auto engine = *Engine::Create(TestModel(), {}, nullptr, &Tok());
  const RequestId id = *engine.AddRequest(prompt, params);
  std::vector<Outcome> got(3);
  while (engine.HasUnfinished()) {
    auto step = engine.Step();
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    for (const StepOutput& o : *step) {
      ASSERT_EQ(o.id, id);
      test_support::Record(o, got[o.index]);
    }
  }
  for (uint64_t i = 0; i < 3; ++i) {
    RequestParams one = params;
    one.n = 1;
    one.seed = SampleSeed(params.seed, i);
    EXPECT_EQ(got[i], Alone({prompt}, one)[0]) << "sample " << i;
  }
  EXPECT_NE(got[0].tokens, got[1].tokens);
}

TEST(EngineProcessors, BeamSearchRefusesThemByName) {
  auto engine = *Engine::Create(TestModel(), {}, nullptr, &Tok());
  RequestParams p;
  p.beam.num_beams = 2;
  p.max_tokens = 4;
  ASSERT_TRUE(engine.ValidateRequest(kShort, p).ok());
  const auto refused = [&](const char* name, const RequestParams& q) {
    const Status s = engine.ValidateRequest(kShort, q);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << name;
    EXPECT_NE(s.message().find(name), std::string::npos) << s.ToString();
  };
  RequestParams q = p;
  q.processors.repetition_penalty = 1.2;
  refused("repetition_penalty", q);
  q = p;
  q.processors.logit_bias = {{3, 1.0}};
  refused("logit_bias", q);
  q = p;
  q.bad_words = {"x"};
  refused("bad_words", q);
  q = p;
  q.sampling.typical_p = 0.5;
  refused("typical_p", q);
  q = p;
  q.processors.dry.multiplier = 0.5;
  refused("dry_multiplier", q);
  // What beams honour stays allowed.
  q = p;
  q.stop_token_ids = {3};
  q.ignore_eos = true;
  EXPECT_TRUE(engine.ValidateRequest(kShort, q).ok());
}

// min_tokens holds back the end ids: a request whose first greedy token is
// its end of sequence goes on until min_tokens tokens, then may end.
TEST(EngineProcessors, MinTokensHoldsBackTheEnd) {
  RequestParams p;
  p.max_tokens = 12;
  const std::vector<int32_t> prompt = Prompts()[0];
  const Outcome free = Alone({prompt}, p)[0];
  ASSERT_EQ(free.tokens.size(), 12u);
  p.eos_token_ids = {free.tokens[0]};
  EXPECT_EQ(Alone({prompt}, p)[0].tokens.size(), 1u);
  p.processors.min_tokens = 5;
  const Outcome held = Alone({prompt}, p)[0];
  ASSERT_GE(held.tokens.size(), 5u);
  for (size_t i = 0; i < 4; ++i) EXPECT_NE(held.tokens[i], free.tokens[0]) << i;
}

TEST(EngineProcessors, StopStringsWaitForMinTokensAndCanBeKept) {
  RequestParams p;
  p.max_tokens = 24;
  const std::vector<int32_t> prompt = Prompts()[0];
  const Outcome full = Alone({prompt}, p)[0];
  ASSERT_GE(full.text.size(), 12u);
  const std::string stop = full.text.substr(2, 2);
  const size_t at = full.text.find(stop);
  p.stop_strings = {stop};
  EXPECT_EQ(Alone({prompt}, p)[0].text, full.text.substr(0, at));
  p.include_stop_str_in_output = true;
  EXPECT_EQ(Alone({prompt}, p)[0].text, full.text.substr(0, at + stop.size()));
  // Before min_tokens a stop string does not end the text.
  p.include_stop_str_in_output = false;
  p.processors.min_tokens = static_cast<int64_t>(at + stop.size() + 1);
  const Outcome later = Alone({prompt}, p)[0];
  EXPECT_GT(later.text.size(), at);
}

TEST(EngineProcessors, ARowWithEveryTokenBannedAborts) {
  RequestParams p;
  p.max_tokens = 8;
  p.eos_token_ids = {7};
  p.processors.allowed_token_ids = {7};
  p.processors.min_tokens = 3;
  const Outcome o = Alone({Prompts()[0]}, p)[0];
  EXPECT_TRUE(o.tokens.empty());
  EXPECT_EQ(o.finish, FinishReason::kAbort);
}

TEST(EngineProcessors, TextParametersNeedATokenizer) {
  auto engine = *Engine::Create(TestModel(), {});
  RequestParams p;
  p.bad_words = {"x"};
  EXPECT_NE(engine.ValidateRequest(kShort, p).message().find("bad_words"), std::string::npos);
  p = {};
  p.processors.dry.multiplier = 0.5;
  EXPECT_NE(engine.ValidateRequest(kShort, p).message().find("DRY"), std::string::npos);
}

// bad_words: the word's tokens never complete it. With the byte tokenizer
// a word is its bytes; ban the greedy output's second byte after its
// first (this prompt's first two bytes are ASCII).
TEST(EngineProcessors, BadWordsAreNeverCompleted) {
  RequestParams p;
  p.max_tokens = 16;
  const std::vector<int32_t> prompt = Prompts()[0];
  const Outcome free = Alone({prompt}, p)[0];
  const std::string word = free.text.substr(0, 2);
  ASSERT_EQ(word.size(), 2u);
  ASSERT_NE(word[0], ' ');
  p.bad_words = {word};
  const Outcome banned = Alone({prompt}, p)[0];
  EXPECT_EQ(banned.text.find(word), std::string::npos) << banned.text;
  EXPECT_EQ(banned.text[0], word[0]);  // the first byte alone is allowed
}

}  // namespace
}  // namespace folio::engine
