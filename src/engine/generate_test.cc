#include "folio/engine/generate.h"

#include <gtest/gtest.h>

namespace folio::engine {
namespace {

using kv::PageTableLayout;
using model::Decoder;
using model::DecoderCache;
using model::Model;

const Model& WorkedModel() {
  static const Model* m = new Model(*Model::FromSeed(model::WorkedExampleConfig(), 20));
  return *m;
}

template <typename T>
GenerationResult RunGeneration(const PageTableLayout& layout, const GenerationParams& params,
                               SplitMix64& rng, DType kv = DType::kF64,
                               std::vector<int32_t> prompt = {0, 99}) {
  auto cache = *DecoderCache::Create(WorkedModel(), layout, 1, kv);
  auto r = Generate<T>(Decoder<T>(WorkedModel()), cache, prompt, params, rng);
  EXPECT_TRUE(r.has_value()) << r.status().ToString();
  EXPECT_EQ(cache.length(), r->prefill_tokens + r->decode_tokens);
  return *r;
}

// The page-table chapter's published result.
TEST(Generate, WorkedExampleGreedyTokens) {
  GenerationParams p;
  p.max_new_tokens = 4;
  for (auto layout :
       {*PageTableLayout::Create(12, 3, {2, 0, 3, 1}), *PageTableLayout::Contiguous(12)}) {
    SplitMix64 rng(20);
    const GenerationResult r = RunGeneration<double>(layout, p, rng);
    EXPECT_EQ(r.tokens, (std::vector<int32_t>{70, 56, 216, 6}));
    EXPECT_EQ(r.stop_reason, StopReason::kMaxTokens);
    EXPECT_EQ(r.prefill_tokens, 2u);
    EXPECT_EQ(r.decode_tokens, 3u);  // m + k - 1 = 5 cached positions
    EXPECT_EQ(r.steps.size(), 4u);
    EXPECT_EQ(rng.state(), 20u);  // greedy draws nothing
  }
}

// The float32 production path selects the same tokens (the winning logit
// leads by >= 0.015 at every step).
TEST(Generate, WorkedExampleFloat32SameTokens) {
  GenerationParams p;
  p.max_new_tokens = 4;
  SplitMix64 rng(20);
  EXPECT_EQ(RunGeneration<float>(*PageTableLayout::Create(12, 3, {2, 0, 3, 1}), p, rng, DType::kF32)
                .tokens,
            (std::vector<int32_t>{70, 56, 216, 6}));
}

TEST(Generate, SampledTokensIdenticalAcrossLayouts) {
  GenerationParams p;
  p.max_new_tokens = 9;
  p.sampling = {0.9, 20};
  p.end_token = std::nullopt;
  SplitMix64 rng_a(1234), rng_b(1234);
  const auto a = RunGeneration<double>(*PageTableLayout::Create(12, 3, {2, 0, 3, 1}), p, rng_a);
  const auto b = RunGeneration<double>(*PageTableLayout::Identity(12, 1), p, rng_b);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.tokens.size(), 9u);
  EXPECT_EQ(rng_a, rng_b);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) EXPECT_EQ(a.steps[i].logit, b.steps[i].logit);
}

TEST(Generate, StopsAtCapacity) {
  GenerationParams p;
  p.max_new_tokens = 100;
  p.end_token = std::nullopt;
  SplitMix64 rng(3);
  const auto r = RunGeneration<double>(*PageTableLayout::Identity(12, 4), p, rng);
  EXPECT_EQ(r.stop_reason, StopReason::kCapacity);
  EXPECT_EQ(r.prefill_tokens + r.decode_tokens, 12u);
  EXPECT_EQ(r.tokens.size(), 11u);  // the 11th selection found the cache full
}

TEST(Generate, StopsOnEndToken) {
  // Find which token greedy picks first, then declare it the end token.
  GenerationParams p;
  p.max_new_tokens = 4;
  p.end_token = 70;
  SplitMix64 rng(20);
  const auto r = RunGeneration<double>(*PageTableLayout::Identity(12, 3), p, rng);
  EXPECT_EQ(r.stop_reason, StopReason::kEndToken);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(r.steps.size(), 1u);
  EXPECT_EQ(r.steps[0].token, 70);
}

TEST(Generate, RejectsBadRequests) {
  auto cache =
      *DecoderCache::Create(WorkedModel(), *PageTableLayout::Identity(12, 3), 1, DType::kF64);
  const Decoder<double> dec(WorkedModel());
  SplitMix64 rng(1);
  GenerationParams p;
  EXPECT_FALSE(Generate<double>(dec, cache, std::vector<int32_t>{}, p, rng).has_value());
  EXPECT_FALSE(Generate<double>(dec, cache, std::vector<int32_t>(13, 2), p, rng).has_value());
  p.max_new_tokens = 0;
  EXPECT_FALSE(Generate<double>(dec, cache, std::vector<int32_t>{0}, p, rng).has_value());
  p.max_new_tokens = 1;
  p.sampling.temperature = -1;
  EXPECT_FALSE(Generate<double>(dec, cache, std::vector<int32_t>{0}, p, rng).has_value());
  EXPECT_EQ(cache.length(), 0u);
}

}  // namespace
}  // namespace folio::engine
