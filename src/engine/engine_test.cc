#include "folio/engine/engine.h"

#include <gtest/gtest.h>

#include "folio/engine/generate.h"

namespace folio::engine {
namespace {

const model::Model& TestModel() {
  static const model::Model* m = [] {
    model::ModelConfig c = model::WorkedExampleConfig();
    c.max_positions = 96;
    return new model::Model(*model::Model::FromSeed(c, 11));
  }();
  return *m;
}

const std::vector<std::vector<int32_t>> kPrompts = {
    {0, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110},
    {0, 7},
    {0, 50, 60, 70, 80, 90},
    {0, 200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215, 216, 217},
};

RequestParams Sampled() {
  RequestParams p;
  p.sampling = {0.8, 40, 0.95, 0.0};
  p.max_tokens = 12;
  p.seed = 1234;
  return p;
}

std::vector<std::vector<int32_t>> RunEngine(const EngineConfig& config,
                                      const std::vector<std::vector<int32_t>>& prompts,
                                      const RequestParams& params, EngineStats* stats = nullptr) {
  auto engine = Engine::Create(TestModel(), config);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  auto out = engine->Generate(prompts, params);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(engine->cache().Stats().pages_used, 0u);  // nothing leaked
  if (stats) *stats = engine->stats();
  return *out;
}

// Contract 3: a request's tokens do not depend on what it is batched with.
TEST(Engine, BatchedTokensEqualSoloTokens) {
  const auto batched = RunEngine({}, kPrompts, Sampled());
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    EXPECT_EQ(RunEngine({}, {kPrompts[i]}, Sampled())[0], batched[i]) << "prompt " << i;
    EXPECT_EQ(batched[i].size(), 12u);
  }
}

TEST(Engine, ChunkSizeAndPageSizeDoNotChangeTokens) {
  const auto want = RunEngine({}, kPrompts, Sampled());
  EngineConfig small;
  small.max_num_batched_tokens = 4;  // prompts arrive in 4-token chunks
  small.max_num_seqs = 2;
  small.page_size = 3;
  EXPECT_EQ(RunEngine(small, kPrompts, Sampled()), want);
}

TEST(Engine, PreemptedRequestsFinishWithTheSameTokens) {
  const auto want = RunEngine({}, kPrompts, Sampled());
  EngineConfig tight;
  tight.page_size = 4;
  tight.num_pages = 9;  // cannot hold all four sequences at full length
  EngineStats stats;
  EXPECT_EQ(RunEngine(tight, kPrompts, Sampled(), &stats), want);
  EXPECT_GT(stats.preemptions, 0u);
}

TEST(Engine, GreedyMatchesSingleSequenceGeneration) {
  RequestParams p;
  p.max_tokens = 10;
  const auto engine_tokens = RunEngine({}, {kPrompts[0]}, p)[0];
  auto cache = *model::DecoderCache::Create(TestModel(), *kv::PageTableLayout::Identity(96, 16),
                                            1, DType::kF32);
  GenerationParams g;
  g.max_new_tokens = 10;
  g.end_token = std::nullopt;
  SplitMix64 rng(0);
  auto r = Generate<float>(model::Decoder<float>(TestModel()), cache, kPrompts[0], g, rng);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(engine_tokens, r->tokens);
}

TEST(Engine, StopTokenFinishesAndAbortFreesPages) {
  auto engine = *Engine::Create(TestModel(), {});
  RequestParams p = Sampled();
  const auto first = RunEngine({}, {kPrompts[1]}, p)[0];
  p.stop_token_ids = {first[2]};
  const RequestId stopping = *engine.AddRequest(kPrompts[1], p);
  const RequestId aborted = *engine.AddRequest(kPrompts[3], Sampled());
  FinishReason stop_reason = FinishReason::kNone;
  std::vector<int32_t> got;
  for (int step = 0; step < 6 && engine.HasUnfinished(); ++step) {
    auto outputs = engine.Step();
    ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
    for (const StepOutput& o : *outputs) {
      if (o.id != stopping) continue;
      got.insert(got.end(), o.new_tokens.begin(), o.new_tokens.end());
      if (o.finish != FinishReason::kNone) stop_reason = o.finish;
    }
  }
  EXPECT_EQ(stop_reason, FinishReason::kStop);
  EXPECT_EQ(got, std::vector<int32_t>(first.begin(), first.begin() + 3));
  EXPECT_GT(engine.cache().Stats().pages_used, 0u);
  ASSERT_TRUE(engine.Abort(aborted).ok());
  EXPECT_EQ(engine.cache().Stats().pages_used, 0u);
  EXPECT_EQ(engine.Abort(aborted).code(), StatusCode::kNotFound);
  EXPECT_FALSE(engine.HasUnfinished());
}

TEST(Engine, RejectsBadRequests) {
  auto engine = *Engine::Create(TestModel(), {});
  EXPECT_EQ(engine.AddRequest({}, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.AddRequest({0, 258}, {}).status().code(), StatusCode::kOutOfRange);
  RequestParams long_run;
  long_run.max_tokens = 96;
  EXPECT_EQ(engine.AddRequest({0, 1}, long_run).status().code(), StatusCode::kOutOfRange);
  EngineConfig tiny;
  tiny.num_pages = 1;
  auto small = *Engine::Create(TestModel(), tiny);
  RequestParams p;
  p.max_tokens = 20;
  EXPECT_EQ(small.AddRequest({0, 1}, p).status().code(), StatusCode::kResourceExhausted);
  EXPECT_FALSE(Engine::Create(TestModel(), {16, 8, DType::kF32, 2, 4}).ok());
}

}  // namespace
}  // namespace folio::engine
