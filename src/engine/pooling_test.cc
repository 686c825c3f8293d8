// Pooled embeddings (RequestParams::pooling): a request's vector does not
// depend on what it is batched with, how its prompt is chunked, the page
// size, preemption or the prefix cache (contract 3, bit for bit); the
// features are cut and normalized as asked; and what a pooled request
// cannot honour is refused. Its values are checked against Hugging Face's
// models in tests/python/test_embeddings.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"
#include "testing/engine_drive.h"
#include "testing/test_model.h"

namespace folio::engine {
namespace {

using test_support::ExpectNoLeak;
using test_support::TestModel;

const std::vector<std::vector<int32_t>>& kPrompts = test_support::TestPrompts();

RequestParams Pooled(Pooling pooling) {
  RequestParams p;
  p.pooling = pooling;
  return p;
}

std::vector<uint32_t> Bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}

// Steps the engine to the end; the embedding request `id` finished with.
std::vector<float> EmbeddingOf(Engine& engine, RequestId id) {
  std::vector<float> out;
  while (engine.HasUnfinished()) {
    Result<std::vector<StepOutput>> step = engine.Step();
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    if (!step.ok()) break;
    for (const StepOutput& o : *step) {
      if (o.id == id && o.finish != FinishReason::kNone) out = o.embedding;
    }
  }
  return out;
}

// Each prompt's embedding, with `generate` generation requests added
// between them (they share the steps).
std::vector<std::vector<uint32_t>> Embed(const EngineConfig& config, const RequestParams& params,
                                         bool generate = false, EngineStats* stats = nullptr,
                                         const model::Model& model = TestModel(),
                                         ThreadPool* threads = nullptr) {
  auto engine = Engine::Create(model, config, threads);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  std::map<RequestId, size_t> index;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    index[*engine->AddRequest(kPrompts[i], params)] = i;
    if (generate) {
      RequestParams g;
      g.max_tokens = 6;
      EXPECT_TRUE(engine->AddRequest(kPrompts[(i + 1) % kPrompts.size()], g).ok());
    }
  }
  std::vector<std::vector<uint32_t>> out(kPrompts.size());
  while (engine->HasUnfinished()) {
    auto step = engine->Step();
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    if (!step.ok()) break;
    for (const StepOutput& o : *step) {
      auto it = index.find(o.id);
      if (it == index.end()) {
        EXPECT_TRUE(o.embedding.empty());
        continue;
      }
      EXPECT_TRUE(o.new_tokens.empty());  // nothing is generated
      if (o.finish != FinishReason::kNone) {
        EXPECT_EQ(o.finish, FinishReason::kStop);
        EXPECT_EQ(o.embedding.size(),
                  params.dimensions != 0 ? params.dimensions : model.config().hidden_size);
        out[it->second] = Bits(o.embedding);
      } else {
        EXPECT_TRUE(o.embedding.empty());
      }
    }
  }
  ExpectNoLeak(*engine);
  if (stats != nullptr) *stats = engine->stats();
  return out;
}

TEST(Pooling, EmbeddingsDoNotDependOnBatchChunkPagesOrPreemption) {
  for (Pooling pooling : {Pooling::kLast, Pooling::kMean, Pooling::kCls}) {
    SCOPED_TRACE(PoolingName(pooling));
    EngineConfig alone;
    alone.max_num_seqs = 1;
    const auto want = Embed(alone, Pooled(pooling));
    for (const auto& v : want) ASSERT_FALSE(v.empty());
    EngineConfig chunked;
    chunked.max_num_batched_tokens = 5;
    chunked.max_num_seqs = 2;
    chunked.page_size = 4;
    EXPECT_EQ(Embed(chunked, Pooled(pooling), /*generate=*/true), want);
    EngineConfig tight;
    tight.page_size = 4;
    tight.num_pages = 9;  // not every sequence fits at once
    EngineStats stats;
    EXPECT_EQ(Embed(tight, Pooled(pooling), /*generate=*/true, &stats), want);
    EXPECT_GT(stats.preemptions, 0u);
  }
}

TEST(Pooling, TheThreePoolingsDiffer) {
  const auto last = Embed({}, Pooled(Pooling::kLast));
  const auto mean = Embed({}, Pooled(Pooling::kMean));
  const auto cls = Embed({}, Pooled(Pooling::kCls));
  EXPECT_NE(last, mean);
  EXPECT_NE(mean, cls);
  // Every prompt starts with token 0, whose first row is the same whatever
  // follows (causal attention): one CLS vector for all.
  for (const auto& v : cls) EXPECT_EQ(v, cls[0]);
  EXPECT_NE(last[0], last[1]);
}

// Mean and CLS pooling need every row, so a pooled request never starts on
// cached pages; a prompt embedded twice gives the same bits either way.
TEST(Pooling, EveryRowIsComputedUnderThePrefixCache) {
  EngineConfig config;
  config.page_size = 4;
  config.prefix_caching = true;
  for (Pooling pooling : {Pooling::kMean, Pooling::kCls, Pooling::kLast}) {
    SCOPED_TRACE(PoolingName(pooling));
    auto engine = *Engine::Create(TestModel(), config);
    std::vector<std::vector<float>> got;
    for (int round = 0; round < 2; ++round) {
      Result<RequestId> id = engine.AddRequest(kPrompts[3], Pooled(pooling));
      ASSERT_TRUE(id.ok());
      got.push_back(EmbeddingOf(engine, *id));
    }
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(Bits(got[0]), Bits(got[1]));
    const EngineStats stats = engine.stats();
    if (pooling == Pooling::kLast) {
      EXPECT_GT(stats.prefix_hit_tokens, 0u);  // the last row is always computed
    } else {
      EXPECT_EQ(stats.prefix_hit_tokens, 0u);
    }
  }
}

TEST(Pooling, DimensionsCutThenNormalize) {
  RequestParams raw = Pooled(Pooling::kMean);
  raw.normalize = false;
  const auto full = Embed({}, raw);
  RequestParams cut = raw;
  cut.dimensions = 7;
  const auto seven = Embed({}, cut);
  RequestParams unit = cut;
  unit.normalize = true;
  auto engine = *Engine::Create(TestModel(), {});
  const std::vector<float> normalized = EmbeddingOf(engine, *engine.AddRequest(kPrompts[0], unit));
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    ASSERT_EQ(seven[i].size(), 7u);
    EXPECT_EQ(seven[i], std::vector<uint32_t>(full[i].begin(), full[i].begin() + 7));
  }
  ASSERT_EQ(normalized.size(), 7u);
  double squares = 0, dot = 0;
  std::vector<float> first(7);
  std::memcpy(first.data(), seven[0].data(), 7 * sizeof(float));
  for (size_t j = 0; j < 7; ++j) {
    squares += static_cast<double>(normalized[j]) * normalized[j];
    dot += static_cast<double>(normalized[j]) * first[j];
  }
  EXPECT_NEAR(squares, 1.0, 1e-6);
  double first_norm = 0;
  for (float x : first) first_norm += static_cast<double>(x) * x;
  EXPECT_NEAR(dot, std::sqrt(first_norm), 1e-5 * std::sqrt(first_norm));  // same direction
}

TEST(Pooling, WhatAPooledRequestCannotHonourIsRefused) {
  auto engine = *Engine::Create(TestModel(), {});
  const std::vector<int32_t> prompt = {0, 1, 2};
  RequestParams p = Pooled(Pooling::kMean);
  p.n = 2;
  EXPECT_EQ(engine.AddRequest(prompt, p).status().code(), StatusCode::kInvalidArgument);
  p = Pooled(Pooling::kLast);
  p.logprobs = true;
  EXPECT_EQ(engine.AddRequest(prompt, p).status().code(), StatusCode::kInvalidArgument);
  p = Pooled(Pooling::kLast);
  p.num_draft_tokens = 2;
  EXPECT_EQ(engine.AddRequest(prompt, p).status().code(), StatusCode::kInvalidArgument);
  p = Pooled(Pooling::kLast);
  p.dimensions = TestModel().config().hidden_size + 1;
  const Status too_wide = engine.AddRequest(prompt, p).status();
  EXPECT_EQ(too_wide.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_wide.message().find("dimensions"), std::string::npos) << too_wide.ToString();
  // max_tokens does not apply: a prompt that fills the context is fine.
  p = Pooled(Pooling::kLast);
  p.max_tokens = 1000;
  std::vector<int32_t> full(TestModel().config().max_positions, 5);
  EXPECT_TRUE(engine.AddRequest(full, p).ok());
  EXPECT_EQ(PoolingFromName("mean"), Pooling::kMean);
  EXPECT_FALSE(PoolingFromName("max"));
}

}  // namespace
}  // namespace folio::engine

namespace folio::engine {
namespace {

// A small BERT encoder (Block::kBert): its rows attend both ways, so each
// prompt is computed whole in one step.
const model::Model& Bert() {
  static const model::Model* m = [] {
    model::ModelConfig c;
    c.architecture = model::Architecture::kBert;
    c.block = model::Block::kBert;
    c.activation = model::Activation::kGelu;
    c.hidden_size = 16;
    c.num_heads = 4;
    c.num_kv_heads = 4;
    c.ffn_size = 24;
    c.num_layers = 2;
    c.max_positions = 64;
    c.vocab_size = 258;
    c.type_vocab_size = 2;
    c.tie_embeddings = false;
    return new model::Model(*model::Model::FromSeed(c, 43));
  }();
  return *m;
}

TEST(Pooling, AnEncodersEmbeddingsDoNotDependOnBatchPagesOrThreads) {
  for (Pooling pooling : {Pooling::kCls, Pooling::kMean, Pooling::kLast}) {
    SCOPED_TRACE(PoolingName(pooling));
    EngineConfig alone;
    alone.max_num_seqs = 1;
    const auto want = Embed(alone, Pooled(pooling), false, nullptr, Bert());
    for (const auto& v : want) ASSERT_FALSE(v.empty());
    // A budget of 20 tokens: the 13- and 19-token prompts never share a
    // step, and a prompt waits for a step that holds it whole.
    EngineConfig tight;
    tight.max_num_batched_tokens = 20;
    tight.max_num_seqs = 4;
    tight.page_size = 4;
    EXPECT_EQ(Embed(tight, Pooled(pooling), false, nullptr, Bert()), want);
    ThreadPool two(2);
    EngineConfig wide;
    wide.page_size = 1;
    EXPECT_EQ(Embed(wide, Pooled(pooling), false, nullptr, Bert(), &two), want);
  }
  // Unlike a decoder's, the first position's state depends on what follows.
  const auto cls = Embed({}, Pooled(Pooling::kCls), false, nullptr, Bert());
  EXPECT_NE(cls[0], cls[1]);
}

TEST(Pooling, AnEncoderGeneratesNothingAndTakesWholePrompts) {
  auto engine = Engine::Create(Bert(), {});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  RequestParams generate;
  generate.max_tokens = 4;
  const Result<RequestId> refused = engine->AddRequest(kPrompts[0], generate);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("encoder"), std::string::npos);
  EngineConfig small;
  small.max_num_batched_tokens = 16;
  auto budget = Engine::Create(Bert(), small);
  ASSERT_TRUE(budget.ok());
  const Result<RequestId> too_long = budget->AddRequest(kPrompts[3], Pooled(Pooling::kCls));
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.status().message().find("max_num_batched_tokens"), std::string::npos);
  EXPECT_FALSE(budget->HasUnfinished());
}

// Every prompt's pooled output under `config`, whatever its width.
std::vector<std::vector<float>> Outputs(const model::Model& model, const EngineConfig& config,
                                        const RequestParams& params) {
  auto engine = Engine::Create(model, config);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  std::map<RequestId, size_t> index;
  for (size_t i = 0; i < kPrompts.size(); ++i) index[*engine->AddRequest(kPrompts[i], params)] = i;
  std::vector<std::vector<float>> out(kPrompts.size());
  while (engine->HasUnfinished()) {
    auto step = engine->Step();
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    if (!step.ok()) break;
    for (const StepOutput& o : *step) {
      if (o.finish != FinishReason::kNone) out[index.at(o.id)] = o.embedding;
    }
  }
  return out;
}

// A decoder with a score head (Qwen3ForSequenceClassification's form):
// classify is the head on the last position's state, the same bits alone
// or batched and chunked, and the model generates nothing.
TEST(Pooling, ADecodersScoreHeadReadsTheLastPosition) {
  model::ModelConfig c = TestModel().config();
  c.num_labels = 1;
  const model::Model scorer = *model::Model::FromSeed(c, 53);
  RequestParams classify = Pooled(Pooling::kClassify);
  classify.normalize = false;
  EngineConfig alone;
  alone.max_num_seqs = 1;
  const auto want = Outputs(scorer, alone, classify);
  EngineConfig chunked;
  chunked.max_num_batched_tokens = 5;
  chunked.max_num_seqs = 2;
  chunked.page_size = 4;
  EXPECT_EQ(Outputs(scorer, chunked, classify), want);
  RequestParams last = Pooled(Pooling::kLast);
  last.normalize = false;
  const auto states = Outputs(scorer, alone, last);
  const model::Decoder dec(scorer);
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    ASSERT_EQ(want[i].size(), 1u);
    EXPECT_EQ(Bits(want[i]), Bits(*dec.Classify(states[i]))) << i;
  }
  auto engine = Engine::Create(scorer, {});
  RequestParams generate;
  generate.max_tokens = 2;
  const Result<RequestId> refused = engine->AddRequest(kPrompts[0], generate);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("sequence classifier"), std::string::npos);
}

TEST(Pooling, ClassifyAndTokenTypesAreRefusedWhereTheyCannotApply) {
  auto bert = Engine::Create(Bert(), {});
  ASSERT_TRUE(bert.ok());
  RequestParams classify = Pooled(Pooling::kClassify);
  classify.normalize = false;
  const Result<RequestId> no_head = bert->AddRequest(kPrompts[0], classify);
  EXPECT_EQ(no_head.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_head.status().message().find("classification head"), std::string::npos);
  RequestParams typed = Pooled(Pooling::kCls);
  typed.token_types.assign(kPrompts[1].size() + 1, 0);
  EXPECT_EQ(bert->AddRequest(kPrompts[1], typed).status().code(), StatusCode::kInvalidArgument);
  typed.token_types.assign(kPrompts[1].size(), 2);  // two types: 0 and 1
  EXPECT_EQ(bert->AddRequest(kPrompts[1], typed).status().code(), StatusCode::kOutOfRange);
  auto decoder = Engine::Create(TestModel(), {});
  typed.token_types.assign(kPrompts[1].size(), 0);
  EXPECT_EQ(decoder->AddRequest(kPrompts[1], typed).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(bert->HasUnfinished());
}

}  // namespace
}  // namespace folio::engine
