// The engine on a mixture of experts (softmax routing, and dots1's
// DeepSeek-style router): routing looks at one row only and
// each expert's rows run as one matmul, so tokens and log-prob bits stay
// the same under every schedule — batching, chunked prefill, prefix
// caching, preemption, threads, speculative decoding (prompt lookup and a
// draft model) and parallel samples (n > 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"
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

// The routers under test: softmax-then-top-k (Qwen3-MoE's), and dots1's
// sigmoid scores with a selection bias, expert groups, a routed scale, a
// leading dense layer and ungated shared experts.
enum class Router : uint8_t { kSoftmax, kDeepSeek };

// The test model's shape with 6 experts of width 10, 2 per token; or
// test_support's DeepSeek-style mixture.
const model::Model& MakeExpertsModel(Router router) {
  static const model::Model* models[2] = {nullptr, nullptr};
  const model::Model*& m = models[static_cast<size_t>(router)];
  if (m == nullptr) {
    model::ModelConfig c = model::WorkedExampleConfig();
    if (router == Router::kDeepSeek) {
      c = test_support::DeepSeekMixtureConfig();
    } else {
      c.num_experts = 6;
      c.experts_per_token = 2;
      c.expert_ffn_size = 10;
    }
    c.max_positions = 128;
    m = new model::Model(*model::Model::FromSeed(c, 23));
  }
  return *m;
}

class Experts : public ::testing::TestWithParam<Router> {
 protected:
  const model::Model& ExpertsModel() const { return MakeExpertsModel(GetParam()); }

  std::vector<Outcome> Solo(const std::vector<std::vector<int32_t>>& prompts,
                            const RequestParams& params) const {
    EngineConfig solo;
    solo.prefix_caching = false;
    std::vector<Outcome> want;
    for (const auto& p : prompts) {
      auto e = *Engine::Create(ExpertsModel(), solo);
      want.push_back(Drive(e, {p}, params, {0})[0]);
    }
    return want;
  }
};

INSTANTIATE_TEST_SUITE_P(Routers, Experts, ::testing::Values(Router::kSoftmax, Router::kDeepSeek),
                         [](const ::testing::TestParamInfo<Router>& p) {
                           return p.param == Router::kSoftmax ? "Softmax" : "DeepSeek";
                         });

TEST_P(Experts, TokensAndLogprobsAreTheSameUnderEverySchedule) {
  const auto prompts = SharedStemPrompts();
  RequestParams params = SampledWithLogprobs();
  params.max_tokens = 16;
  const std::vector<Outcome> want = Solo(prompts, params);
  for (const Outcome& o : want) EXPECT_EQ(o.tokens.size(), 16u);
  std::vector<size_t> reversed = InOrder(prompts.size());
  std::reverse(reversed.begin(), reversed.end());
  const std::vector<size_t> in_order = InOrder(prompts.size());
  ThreadPool two(2);
  EngineConfig chunks;
  chunks.page_size = 3;
  chunks.max_num_batched_tokens = 5;
  chunks.max_num_seqs = 2;
  EngineConfig tight;
  tight.page_size = 4;
  tight.num_pages = 18;
  EngineConfig ngram;
  ngram.speculative.num_draft_tokens = 4;
  ngram.speculative.ngram_min = 1;
  EngineConfig drafted;
  drafted.speculative.num_draft_tokens = 3;
  drafted.speculative.draft_model = &ExpertsModel();
  test_support::ExpectSameUnderEverySchedule(ExpertsModel(), prompts, params, want,
                                             {{"batched", {}, in_order},
                                              {"chunks of 5, pages of 3", chunks, reversed},
                                              {"warm prefix cache", {}, in_order, nullptr, true},
                                              {"preempting", tight, in_order, nullptr, false, true},
                                              {"two threads", {}, reversed, &two},
                                              {"prompt-lookup drafts", ngram, in_order},
                                              {"an expert draft model", drafted, reversed}});
  // Greedy, the same weights as draft model are always right: drafts are
  // accepted (verified several rows at a time, routed as one batch) and
  // the tokens are plain decoding's.
  RequestParams greedy = params;
  greedy.sampling = {0.0, 0, 1.0, 0.0};
  auto speculative = *Engine::Create(ExpertsModel(), drafted);
  EXPECT_EQ(Drive(speculative, prompts, greedy, in_order), Solo(prompts, greedy));
  EXPECT_GT(speculative.stats().draft_accepted_tokens, 0u);
  ExpectNoLeak(speculative);
}

// Parallel samples: sample i of an n-sample request equals a one-sample
// request seeded SampleSeed(seed, i), its forks batched beside each other.
TEST_P(Experts, ParallelSamplesEqualOneSampleRequestsWithTheirSeeds) {
  const auto prompts = SharedStemPrompts();
  RequestParams params = SampledWithLogprobs();
  params.max_tokens = 10;
  params.sampling = {0.9, 0, 1.0, 0.0};
  constexpr uint64_t kSamples = 3;
  for (const auto& [name, config] :
       {std::pair{"batched", EngineConfig{}}, std::pair{"drafting", [] {
                                                          EngineConfig c;
                                                          c.speculative.num_draft_tokens = 3;
                                                          return c;
                                                        }()}}) {
    SCOPED_TRACE(name);
    auto engine = *Engine::Create(ExpertsModel(), config);
    RequestParams many = params;
    many.n = kSamples;
    std::map<RequestId, size_t> prompt_of;
    for (size_t i = 0; i < prompts.size(); ++i) {
      prompt_of[*engine.AddRequest(prompts[i], many)] = i;
    }
    std::map<std::pair<size_t, uint64_t>, Outcome> got;
    while (engine.HasUnfinished()) {
      auto step = engine.Step();
      ASSERT_TRUE(step.ok()) << step.status().ToString();
      for (const StepOutput& o : *step) {
        test_support::Record(o, got[{prompt_of.at(o.id), o.index}]);
      }
    }
    ASSERT_EQ(got.size(), prompts.size() * kSamples);
    for (uint64_t s = 0; s < kSamples; ++s) {
      RequestParams one = params;
      one.seed = SampleSeed(params.seed, s);
      const std::vector<Outcome> want = Solo(prompts, one);
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(got.at({i, s}), want[i]) << "prompt " << i << " sample " << s;
      }
    }
    ExpectNoLeak(engine);
  }
}

}  // namespace
}  // namespace folio::engine
