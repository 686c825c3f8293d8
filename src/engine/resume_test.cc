// Engine::ResumeRequest: a request whose engine is gone (a replica that
// died) continues elsewhere from nothing but its tokens, its random
// stream's state and the bytes of text already returned, and ends exactly
// as if it had never stopped.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

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
using test_support::SampledWithLogprobs;
using test_support::SharedStemPrompts;
using test_support::TestModel;

// What a client holds of one request: what it was told so far, and the
// last random-stream state it saw.
struct Seen {
  Outcome outcome;
  uint64_t rng_state = 0;
  bool any = false;
};

struct Case {
  std::string name;
  RequestParams params;
  EngineConfig sender;
  EngineConfig resumer;  // another chunk size, pool and KV placement
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  EngineConfig a;
  a.page_size = 4;
  a.max_num_batched_tokens = 24;  // the long prompt still prefills at the cut
  EngineConfig b;
  b.page_size = 4;
  b.max_num_batched_tokens = 9;
  b.num_pages = 300;

  RequestParams sampled = SampledWithLogprobs();
  sampled.stop_strings = {"zz"};  // text held back across the cut
  cases.push_back({"sampled", sampled, a, b});

  RequestParams greedy = SampledWithLogprobs();
  greedy.sampling = {};
  cases.push_back({"greedy", greedy, a, b});

  // Verified drafts: several tokens per step, each drawn from the stream.
  // (Rejection sampling is left out: its tokens depend on when drafting
  // paused, which a resumed request, like an imported one, starts afresh.)
  EngineConfig spec = a;
  spec.speculative.num_draft_tokens = 3;
  spec.speculative.draft_model = &TestModel();
  EngineConfig spec_b = b;
  spec_b.speculative = spec.speculative;
  RequestParams peaked = sampled;
  peaked.sampling.temperature = 0.1;  // the target's argmax, the draft, is often drawn
  cases.push_back({"speculative", peaked, spec, spec_b});

  EngineConfig i8 = a;
  i8.kv_dtype = DType::kI8;
  EngineConfig i8_b = b;
  i8_b.kv_dtype = DType::kI8;
  cases.push_back({"i8 pages", sampled, i8, i8_b});
  return cases;
}

// Runs prompts on a sender for `cut` steps, drops it, resumes every
// unfinished request on a fresh engine from what its client saw, and
// returns what each client saw in the end.
std::vector<Outcome> CutAndResume(const Case& c, const std::vector<std::vector<int32_t>>& prompts,
                                  int cut) {
  const tokenizer::Tokenizer& tok = tokenizer::ByteTokenizer::AsTokenizer();
  std::vector<Seen> seen(prompts.size());
  {
    auto sender = *Engine::Create(TestModel(), c.sender, nullptr, &tok);
    std::map<RequestId, size_t> index;
    for (size_t i = 0; i < prompts.size(); ++i) {
      index[*sender.AddRequest(prompts[i], c.params)] = i;
    }
    for (int step = 0; step < cut && sender.HasUnfinished(); ++step) {
      auto outs = sender.Step();
      EXPECT_TRUE(outs.ok()) << outs.status().ToString();
      if (!outs.ok()) break;
      for (const StepOutput& o : *outs) {
        Seen& s = seen[index.at(o.id)];
        test_support::Record(o, s.outcome);
        s.rng_state = o.rng_state;
        s.any = true;
      }
    }
  }  // the sender is gone
  auto resumer = *Engine::Create(TestModel(), c.resumer, nullptr, &tok);
  std::map<RequestId, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Seen& s = seen[i];
    if (s.outcome.finish != FinishReason::kNone) continue;
    // Nothing seen yet: the request starts over on its own seed's stream.
    const uint64_t rng = s.any ? s.rng_state : c.params.seed;
    auto id =
        resumer.ResumeRequest(prompts[i], s.outcome.tokens, c.params, rng, s.outcome.text.size());
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    if (id.ok()) index[*id] = i;
  }
  while (resumer.HasUnfinished()) {
    auto outs = resumer.Step();
    EXPECT_TRUE(outs.ok()) << outs.status().ToString();
    if (!outs.ok()) break;
    for (const StepOutput& o : *outs) test_support::Record(o, seen[index.at(o.id)].outcome);
  }
  ExpectNoLeak(resumer);
  std::vector<Outcome> out;
  for (const Seen& s : seen) out.push_back(s.outcome);
  return out;
}

TEST(EngineResume, ContinuesBitIdenticallyWhereverItWasCut) {
  const tokenizer::Tokenizer& tok = tokenizer::ByteTokenizer::AsTokenizer();
  const auto prompts = SharedStemPrompts();
  for (const Case& c : Cases()) {
    auto reference = *Engine::Create(TestModel(), c.sender, nullptr, &tok);
    const std::vector<Outcome> want = Drive(reference, prompts, c.params, InOrder(prompts.size()));
    if (c.sender.speculative.num_draft_tokens != 0) {
      const EngineStats st = reference.stats();
      EXPECT_GT(st.draft_accepted_tokens, 0u);
      EXPECT_LT(st.draft_accepted_tokens, st.draft_tokens);
    }
    for (const int cut : {0, 1, 3, 6, 9}) {
      const std::vector<Outcome> got = CutAndResume(c, prompts, cut);
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(got[i], want[i]) << c.name << ", cut after step " << cut << ", prompt " << i;
      }
    }
  }
}

void ExpectRefused(const std::vector<int32_t>& output, const RequestParams& params,
                   uint64_t text_sent, StatusCode code, const std::string& needle) {
  const tokenizer::Tokenizer& tok = tokenizer::ByteTokenizer::AsTokenizer();
  auto e = *Engine::Create(TestModel(), EngineConfig{}, nullptr, &tok);
  const Status st =
      e.ResumeRequest(test_support::TestPrompts()[0], output, params, 7, text_sent).status();
  EXPECT_EQ(st.code(), code) << st.ToString();
  EXPECT_NE(st.ToString().find(needle), std::string::npos) << st.ToString();
  EXPECT_FALSE(e.HasUnfinished());
}

TEST(EngineResume, RefusesWhatCannotContinueAndAddsNothing) {
  RequestParams p = SampledWithLogprobs();
  const uint64_t vocab = TestModel().config().vocab_size;
  ExpectRefused({5, static_cast<int32_t>(vocab)}, p, 0, StatusCode::kOutOfRange, "output token 1");
  ExpectRefused({5, -1}, p, 0, StatusCode::kOutOfRange, "output token 1");
  ExpectRefused(std::vector<int32_t>(p.max_tokens, 5), p, 0, StatusCode::kInvalidArgument,
                "already has its 12 tokens");
  ExpectRefused({70, 71}, p, 3, StatusCode::kInvalidArgument, "text_sent");
  RequestParams n2 = p;
  n2.n = 2;
  ExpectRefused({5}, n2, 0, StatusCode::kFailedPrecondition, "n > 1");
  RequestParams bad = p;
  bad.sampling.temperature = -1;
  ExpectRefused({5}, bad, 0, StatusCode::kInvalidArgument, "temperature");
}

}  // namespace
}  // namespace folio::engine
