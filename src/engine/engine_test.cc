#include "folio/engine/engine.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "folio/core/thread_pool.h"
#include "folio/format/kv_snapshot.h"
#include "folio/sampling/sampler.h"
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

const std::vector<std::vector<int32_t>>& kPrompts = test_support::TestPrompts();

RequestParams Sampled() {
  RequestParams p;
  p.sampling = {0.8, 40, 0.95, 0.0};
  p.max_tokens = 12;
  p.seed = 1234;
  return p;
}

std::vector<std::vector<int32_t>> RunEngine(const EngineConfig& config,
                                            const std::vector<std::vector<int32_t>>& prompts,
                                            const RequestParams& params,
                                            EngineStats* stats = nullptr) {
  auto engine = Engine::Create(TestModel(), config);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  auto out = engine->Generate(prompts, params);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  ExpectNoLeak(*engine);
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

// Quantized KV pages keep contract 3: a row's scale comes from the row
// alone, so batch company, prefill chunk size, preemption (recomputation),
// prefix-cache reuse and the page size leave every token as it was.
TEST(Engine, QuantizedKvTokensDoNotDependOnBatchChunkOrPreemption) {
  for (DType dtype : {DType::kI8, DType::kF8E4M3}) {
    EngineConfig base;
    base.kv_dtype = dtype;
    base.page_size = 4;
    const auto want = RunEngine(base, kPrompts, Sampled());
    for (size_t i = 0; i < kPrompts.size(); ++i) {
      EXPECT_EQ(RunEngine(base, {kPrompts[i]}, Sampled())[0], want[i]) << DTypeName(dtype);
      EXPECT_EQ(want[i].size(), 12u);
    }
    EngineConfig chunked = base;
    chunked.max_num_batched_tokens = 3;
    chunked.max_num_seqs = 2;
    chunked.prefix_caching = false;
    EXPECT_EQ(RunEngine(chunked, kPrompts, Sampled()), want) << DTypeName(dtype);
    EngineConfig tight = base;
    tight.num_pages = 9;
    EngineStats stats;
    EXPECT_EQ(RunEngine(tight, kPrompts, Sampled(), &stats), want) << DTypeName(dtype);
    EXPECT_GT(stats.preemptions, 0u);
    EngineConfig pages = base;
    pages.page_size = 16;
    EXPECT_EQ(RunEngine(pages, kPrompts, Sampled()), want) << DTypeName(dtype);
  }
}

// A model wide enough for 32-element blocks (the worked example is 8 wide),
// its matrices in `type`.
const model::Model& QuantizedModel(ops::WeightType type) {
  static std::map<ops::WeightType, std::unique_ptr<model::Model>> models;
  std::unique_ptr<model::Model>& m = models[type];
  if (!m) {
    model::ModelConfig c = model::WorkedExampleConfig();
    c.hidden_size = 64;
    c.ffn_size = 96;
    c.max_positions = 96;
    const model::Model f32 = *model::Model::FromSeed(c, 11);
    Result<model::ModelWeights> w = model::QuantizeMatrices(f32.weights(), type);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    m = std::make_unique<model::Model>(*model::Model::Create(c, std::move(*w)));
  }
  return *m;
}

// q8 activations (the packed integer kernel) keep contract 3: tokens and
// log-prob bits do not depend on batch company, chunk size, preemption or
// thread count; and the mode is really on (its log-probs differ from f32's).
TEST(Engine, Q8ActivationsKeepTokensAndLogprobsIndependentOfSchedule) {
  const RequestParams params = SampledWithLogprobs();
  ThreadPool two(2);
  for (ops::WeightType type : {ops::WeightType::kQ4_1, ops::WeightType::kQ8_0}) {
    SCOPED_TRACE(ops::WeightTypeName(type));
    const model::Model& m = QuantizedModel(type);
    EngineStats stats;
    const auto run = [&](EngineConfig config, const std::vector<std::vector<int32_t>>& prompts,
                         ThreadPool* pool) {
      auto e = Engine::Create(m, config, pool);
      EXPECT_TRUE(e.ok()) << e.status().ToString();
      auto out = Drive(*e, prompts, params, InOrder(prompts.size()));
      ExpectNoLeak(*e);
      stats = e->stats();
      return out;
    };
    EngineConfig q8;
    q8.matmul_activations = ops::MatMulActivations::kQ8;
    q8.page_size = 4;
    const auto want = run(q8, kPrompts, nullptr);
    for (size_t i = 0; i < kPrompts.size(); ++i) {
      EXPECT_EQ(run(q8, {kPrompts[i]}, &two)[0], want[i]) << "prompt " << i << " alone";
      EXPECT_EQ(want[i].tokens.size(), 12u);
    }
    EngineConfig chunked = q8;
    chunked.max_num_batched_tokens = 5;
    chunked.max_num_seqs = 2;
    EXPECT_EQ(run(chunked, kPrompts, &two), want);
    EngineConfig tight = q8;
    tight.num_pages = 9;
    EXPECT_EQ(run(tight, kPrompts, nullptr), want);
    EXPECT_GT(stats.preemptions, 0u);
    EngineConfig f32 = q8;
    f32.matmul_activations = ops::MatMulActivations::kF32;
    EXPECT_NE(run(f32, kPrompts, nullptr)[0].logprob_bits, want[0].logprob_bits);
  }
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
  // The oracle: greedy selection over the cache-free full forward pass of
  // the growing sequence, one pass per token.
  const model::Decoder decoder(TestModel());
  std::vector<int32_t> seq(kPrompts[0].begin(), kPrompts[0].end()), tokens;
  const uint64_t vocab = TestModel().config().vocab_size;
  SplitMix64 rng(0);
  while (tokens.size() < 10) {
    auto logits = decoder.Forward(seq, 1);
    ASSERT_TRUE(logits.ok()) << logits.status().ToString();
    auto token = sampling::SelectToken<float>(std::span<const float>(*logits).last(vocab), {}, rng);
    ASSERT_TRUE(token.ok());
    tokens.push_back(*token);
    seq.push_back(*token);
  }
  EXPECT_EQ(engine_tokens, tokens);
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
  EXPECT_GT(engine.cache().Stats().pages_used, engine.cache().Stats().pages_held_only);
  ASSERT_TRUE(engine.Abort(aborted).ok());
  EXPECT_EQ(engine.cache().Stats().pages_used, engine.cache().Stats().pages_held_only);
  EXPECT_EQ(engine.Abort(aborted).code(), StatusCode::kNotFound);
  EXPECT_FALSE(engine.HasUnfinished());
}

// Prompt logits (what `folio logits` prints) come chunk by chunk, each
// position once, and equal the cache-free full forward pass bit for bit.
TEST(Engine, PromptLogitsEqualTheFullForwardPass) {
  const std::vector<int32_t>& prompt = kPrompts[3];
  const std::vector<float> want = *model::Decoder(TestModel()).Forward(prompt, 1);
  EngineConfig config;
  config.prefix_caching = false;
  config.max_num_batched_tokens = 5;  // four chunks
  config.max_num_seqs = 2;
  auto engine = *Engine::Create(TestModel(), config);
  RequestParams p;
  p.max_tokens = 3;
  p.prompt_logits = true;
  const RequestId id = *engine.AddRequest(prompt, p);
  ASSERT_TRUE(engine.AddRequest(kPrompts[0], Sampled()).ok());  // shares the steps
  std::vector<float> got;
  while (engine.HasUnfinished()) {
    auto step = engine.Step();
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    for (const StepOutput& o : *step) {
      if (o.id == id) {
        got.insert(got.end(), o.prompt_logits.begin(), o.prompt_logits.end());
      } else {
        EXPECT_TRUE(o.prompt_logits.empty());
      }
    }
  }
  EXPECT_EQ(got, want);
}

TEST(Engine, PromptLogitsNeedAnEngineWithoutPrefixCaching) {
  auto engine = *Engine::Create(TestModel(), {});
  RequestParams p;
  p.prompt_logits = true;
  EXPECT_EQ(engine.AddRequest({0, 1}, p).status().code(), StatusCode::kInvalidArgument);
}

// The backend seam, proved on real generations: the same requests through
// the cpu kernels and through their scalar references (double-accumulating
// matmul, float64 attention). They round differently, so logits differ:
// tests/python/test_models.py holds the cpu path within 1e-4 of the
// logits' scale of a float64 forward pass, and the reference is closer
// still, so the two are within 2e-4 of that scale of each other. Greedy
// tokens agree, and each backend keeps contract 3 on its own: a request's
// bits alone equal its bits batched.
TEST(EngineBackends, TheReferenceBackendAgreesWithTheCpuBackend) {
  struct Run {
    std::vector<std::vector<int32_t>> tokens;
    std::vector<std::vector<float>> logits;  // prompt logits per request
  };
  auto run = [&](backend::BackendKind kind, const std::vector<std::vector<int32_t>>& prompts) {
    EngineConfig config;
    config.prefix_caching = false;
    config.backend = kind;
    config.max_num_batched_tokens = 9;  // chunked prefill too
    auto engine = *Engine::Create(TestModel(), config);
    RequestParams p;
    p.max_tokens = 8;
    p.prompt_logits = true;
    std::map<RequestId, size_t> index;
    for (size_t i = 0; i < prompts.size(); ++i) index[*engine.AddRequest(prompts[i], p)] = i;
    Run r{std::vector<std::vector<int32_t>>(prompts.size()),
          std::vector<std::vector<float>>(prompts.size())};
    while (engine.HasUnfinished()) {
      auto step = engine.Step();
      EXPECT_TRUE(step.ok()) << step.status().ToString();
      if (!step.ok()) break;
      for (const StepOutput& o : *step) {
        const size_t i = index.at(o.id);
        r.tokens[i].insert(r.tokens[i].end(), o.new_tokens.begin(), o.new_tokens.end());
        r.logits[i].insert(r.logits[i].end(), o.prompt_logits.begin(), o.prompt_logits.end());
      }
    }
    return r;
  };
  const Run cpu = run(backend::BackendKind::kCpu, kPrompts);
  const Run ref = run(backend::BackendKind::kReference, kPrompts);
  EXPECT_EQ(ref.tokens, cpu.tokens);
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    ASSERT_EQ(ref.logits[i].size(), cpu.logits[i].size());
    float scale = 1.0f;
    for (const float v : cpu.logits[i]) scale = std::max(scale, std::abs(v));
    for (size_t j = 0; j < cpu.logits[i].size(); ++j) {
      ASSERT_NEAR(ref.logits[i][j], cpu.logits[i][j], 2e-4 * scale) << "prompt " << i << " " << j;
    }
  }
  // Alone equals batched, bit for bit, on the reference backend too.
  const Run alone = run(backend::BackendKind::kReference, {kPrompts[2]});
  EXPECT_EQ(alone.tokens[0], ref.tokens[2]);
  EXPECT_EQ(alone.logits[0], ref.logits[2]);
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

// Contract 3 in full: tokens and log-prob bits per request do not depend on
// batch, arrival order, chunk size, page size, prefix-cache state,
// preemption or thread count.
TEST(Engine, TokensAndLogprobsAreTheSameUnderEverySchedule) {
  const auto prompts = SharedStemPrompts();
  const RequestParams params = SampledWithLogprobs();
  // Reference: each prompt alone in a fresh engine without prefix caching.
  EngineConfig solo;
  solo.prefix_caching = false;
  std::vector<Outcome> want;
  for (const auto& p : prompts) {
    auto e = *Engine::Create(TestModel(), solo);
    want.push_back(Drive(e, {p}, params, {0})[0]);
    EXPECT_EQ(want.back().tokens.size(), 12u);
    EXPECT_EQ(want.back().logprob_bits.size(), 12u * 7);
  }
  std::vector<size_t> reversed = InOrder(prompts.size());
  std::reverse(reversed.begin(), reversed.end());

  ThreadPool two(2);
  EngineConfig chunks;
  chunks.page_size = 3;
  chunks.max_num_batched_tokens = 5;
  chunks.max_num_seqs = 2;
  EngineConfig tight;
  tight.page_size = 4;
  tight.num_pages = 18;  // the longest request needs 16
  EngineConfig big_pages;
  big_pages.page_size = 32;
  const std::vector<size_t> in_order = InOrder(prompts.size());
  test_support::ExpectSameUnderEverySchedule(
      TestModel(), prompts, params, want,
      {{"batched", {}, in_order},
       {"reversed", {}, reversed},
       {"chunks of 5, pages of 3", chunks, reversed},
       {"warm prefix cache", {}, in_order, nullptr, true},
       {"warm, pages of 3", chunks, reversed, nullptr, true},
       {"preempting", tight, in_order, nullptr, false, true},
       {"pages of 32, two threads", big_pages, reversed, &two}});
}

TEST(Engine, PrefixCacheSkipsTheSharedStem) {
  const auto prompts = SharedStemPrompts();
  const std::vector<std::vector<int32_t>> stems(prompts.end() - 3, prompts.end());
  RequestParams p;
  p.max_tokens = 2;
  EngineConfig config;
  config.page_size = 4;
  config.max_num_seqs = 1;  // one at a time: each finds the last one's pages
  auto engine = *Engine::Create(TestModel(), config);
  ASSERT_TRUE(engine.Generate(stems, p).ok());
  const EngineStats st = engine.stats();
  // The first request computes everything; the next two reuse the 20
  // stem tokens in whole pages.
  EXPECT_EQ(st.prefix_hit_tokens, 2u * 20u);
  uint64_t prompt_tokens = 0;
  for (const auto& s : stems) prompt_tokens += s.size();
  EXPECT_EQ(st.prompt_tokens_computed, prompt_tokens - 2u * 20u);
  EXPECT_GT(st.prefix_hit_rate(), 0.0);
  // Each request's own count (StepOutput::cached_prompt_tokens), on every
  // output of the request: a prompt seen before, its whole pages before the
  // last token.
  const RequestId id = *engine.AddRequest(stems[0], p);
  while (engine.HasUnfinished()) {
    Result<std::vector<StepOutput>> step = engine.Step();
    ASSERT_TRUE(step.ok());
    for (const StepOutput& o : *step) {
      EXPECT_EQ(o.id, id);
      EXPECT_EQ(o.cached_prompt_tokens, (stems[0].size() - 1) / 4 * 4);
    }
  }
  ExpectNoLeak(engine);
}

TEST(Engine, StopStringsEndTheTextBeforeThem) {
  const tokenizer::Tokenizer& tok = tokenizer::ByteTokenizer::AsTokenizer();
  RequestParams p;
  p.max_tokens = 24;
  auto plain = *Engine::Create(TestModel(), {}, nullptr, &tok);
  const Outcome full = Drive(plain, {kPrompts[0]}, p, {0})[0];
  EXPECT_EQ(full.finish, FinishReason::kLength);
  EXPECT_EQ(full.text, *tok.Decode(full.tokens, true));
  ASSERT_GE(full.text.size(), 12u);

  const std::string stop = full.text.substr(6, 3);
  const size_t at = full.text.find(stop);
  p.stop_strings = {"never there", stop};
  auto stopping = *Engine::Create(TestModel(), {}, nullptr, &tok);
  const RequestId id = *stopping.AddRequest(kPrompts[0], p);
  std::string streamed;
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::kNone;
  while (stopping.HasUnfinished()) {
    auto step = stopping.Step();
    ASSERT_TRUE(step.ok());
    for (const StepOutput& o : *step) {
      ASSERT_EQ(o.id, id);
      streamed += o.text;
      tokens.insert(tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      // Nothing of the stop string is ever sent.
      EXPECT_EQ(streamed, full.text.substr(0, streamed.size()));
      EXPECT_LE(streamed.size(), at);
      if (o.finish != FinishReason::kNone) finish = o.finish;
    }
  }
  EXPECT_EQ(finish, FinishReason::kStop);
  EXPECT_EQ(streamed, full.text.substr(0, at));
  // The tokens stop at the one that completed the stop string.
  ASSERT_LT(tokens.size(), full.tokens.size());
  EXPECT_EQ(tokens,
            std::vector<int32_t>(full.tokens.begin(),
                                 full.tokens.begin() + static_cast<std::ptrdiff_t>(tokens.size())));
  EXPECT_NE(tok.Decode(tokens, true)->find(stop), std::string::npos);
  tokens.pop_back();
  EXPECT_EQ(tok.Decode(tokens, true)->find(stop), std::string::npos);
}

TEST(Engine, RejectsBadStopAndLogprobRequests) {
  auto no_tokenizer = *Engine::Create(TestModel(), {});
  RequestParams p;
  p.stop_strings = {"x"};
  EXPECT_EQ(no_tokenizer.AddRequest({0, 1}, p).status().code(), StatusCode::kInvalidArgument);
  auto engine = *Engine::Create(TestModel(), {}, nullptr, &tokenizer::ByteTokenizer::AsTokenizer());
  p.stop_strings = {"x", ""};
  EXPECT_EQ(engine.AddRequest({0, 1}, p).status().code(), StatusCode::kInvalidArgument);
  p.stop_strings = {};
  p.top_logprobs = 21;
  EXPECT_EQ(engine.AddRequest({0, 1}, p).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(engine.HasUnfinished());
  EngineConfig bad;
  bad.watermark = 1.0;
  EXPECT_EQ(Engine::Create(TestModel(), bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(Engine, WatermarkHoldsBackAdmissionButNeverStarves) {
  const std::vector<std::vector<int32_t>> prompts = {kPrompts[0], kPrompts[3]};  // 4 + 5 pages
  RequestParams p;
  p.max_tokens = 3;
  for (const double watermark : {0.0, 0.6}) {
    SCOPED_TRACE(watermark);
    EngineConfig config;
    config.page_size = 4;
    config.num_pages = 20;
    config.watermark = watermark;  // 0.6: 12 pages kept free
    auto engine = *Engine::Create(TestModel(), config);
    for (const auto& prompt : prompts) ASSERT_TRUE(engine.AddRequest(prompt, p).ok());
    ASSERT_TRUE(engine.Step().ok());
    // The first request is admitted alone whatever the watermark; the
    // second only if 4 + 5 pages leave the watermark free.
    EXPECT_EQ(engine.num_running(), watermark == 0.0 ? 2u : 1u);
    while (engine.HasUnfinished()) ASSERT_TRUE(engine.Step().ok());
    ExpectNoLeak(engine);
  }
}

// Prefill here, decode there: requests exported mid-flight (one still in
// prefill, others decoding, two sharing prefix pages) and imported into an
// engine with another page layout finish with the same tokens, log-prob
// bits and text as in an engine that never exported.
TEST(EngineSnapshot, ImportedRequestsContinueBitIdentically) {
  const tokenizer::Tokenizer& tok = tokenizer::ByteTokenizer::AsTokenizer();
  auto prompts = SharedStemPrompts();
  RequestParams params = SampledWithLogprobs();
  params.stop_strings = {"zz"};
  EngineConfig config;
  config.page_size = 4;
  config.max_num_batched_tokens = 24;  // so the long prompt is still prefilling
  auto reference = *Engine::Create(TestModel(), config, nullptr, &tok);
  const std::vector<Outcome> want = Drive(reference, prompts, params, InOrder(prompts.size()));

  auto sender = *Engine::Create(TestModel(), config, nullptr, &tok);
  std::vector<RequestId> ids;
  for (const auto& p : prompts) ids.push_back(*sender.AddRequest(p, params));
  std::vector<Outcome> got(prompts.size());
  auto collect = [&](const std::vector<StepOutput>& outs,
                     const std::map<RequestId, size_t>& index) {
    for (const StepOutput& o : outs) test_support::Record(o, got[index.at(o.id)]);
  };
  std::map<RequestId, size_t> sender_index;
  for (size_t i = 0; i < ids.size(); ++i) sender_index[ids[i]] = i;
  for (int step = 0; step < 4; ++step) collect(*sender.Step(), sender_index);
  // Export every request that holds pages, as the prefill worker would.
  std::vector<RequestId> moving;
  std::vector<size_t> moving_index;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (got[i].finish != FinishReason::kNone) continue;
    if (sender.ExportSnapshot(std::vector<RequestId>{ids[i]}).ok()) {
      moving.push_back(ids[i]);
      moving_index.push_back(i);
    }
  }
  ASSERT_GE(moving.size(), 3u);
  auto snapshot = sender.ExportSnapshot(moving);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
  uint64_t references = 0;
  for (const auto& q : snapshot->sequences) references += q.block_table.size();
  EXPECT_LT(snapshot->num_pages, references);  // the stem's pages travel once
  // Through the wire format.
  auto decoded = format::DecodeSnapshot(format::EncodeSnapshot(*snapshot));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();

  EngineConfig other = config;
  other.num_pages = 300;  // a different pool, pages placed elsewhere
  auto receiver = *Engine::Create(TestModel(), other, nullptr, &tok);
  ASSERT_TRUE(receiver.AddRequest(kPrompts[3], Sampled()).ok());  // occupies pages first
  ASSERT_TRUE(receiver.Step().ok());
  auto imported = receiver.ImportSnapshot(*decoded);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  ASSERT_EQ(imported->size(), moving.size());
  std::map<RequestId, size_t> receiver_index;
  for (size_t k = 0; k < moving.size(); ++k) {
    receiver_index[(*imported)[k]] = moving_index[k];
    ASSERT_TRUE(sender.Abort(moving[k]).ok());
  }
  while (receiver.HasUnfinished()) {
    auto outs = receiver.Step();
    ASSERT_TRUE(outs.ok()) << outs.status().ToString();
    std::vector<StepOutput> mine;
    for (const StepOutput& o : *outs) {
      if (receiver_index.count(o.id)) mine.push_back(o);
    }
    collect(mine, receiver_index);
  }
  while (sender.HasUnfinished()) collect(*sender.Step(), sender_index);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << "prompt " << i;
  }
  ExpectNoLeak(sender);
  ExpectNoLeak(receiver);
}

TEST(EngineSnapshot, RefusesMismatchesAndChangesNothing) {
  EngineConfig config;
  config.page_size = 4;
  auto sender = *Engine::Create(TestModel(), config);
  const RequestId id = *sender.AddRequest(kPrompts[0], Sampled());
  const RequestId waiting = *sender.AddRequest(kPrompts[1], Sampled());
  EXPECT_EQ(sender.ExportSnapshot(std::vector<RequestId>{id}).status().code(),
            StatusCode::kFailedPrecondition);  // nothing ran yet
  ASSERT_TRUE(sender.Step().ok());
  (void)waiting;
  EXPECT_EQ(sender.ExportSnapshot(std::vector<RequestId>{id, id}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(sender.ExportSnapshot(std::vector<RequestId>{99}).status().code(),
            StatusCode::kNotFound);
  const format::KvSnapshot snap = *sender.ExportSnapshot(std::vector<RequestId>{id});

  auto expect_refusal = [&](Engine& e, const format::KvSnapshot& s, StatusCode code,
                            const std::string& needle) {
    const uint64_t free_before = e.cache().pool().num_free();
    const Status st = e.ImportSnapshot(s).status();
    EXPECT_EQ(st.code(), code) << st.ToString();
    EXPECT_NE(st.ToString().find(needle), std::string::npos) << st.ToString();
    EXPECT_EQ(e.cache().pool().num_free(), free_before);
    EXPECT_FALSE(e.HasUnfinished());
  };
  EngineConfig pages8 = config;
  pages8.page_size = 8;
  auto wrong_pages = *Engine::Create(TestModel(), pages8);
  expect_refusal(wrong_pages, snap, StatusCode::kInvalidArgument, "page size 4");
  EngineConfig bf16 = config;
  bf16.kv_dtype = DType::kBF16;
  auto wrong_dtype = *Engine::Create(TestModel(), bf16);
  expect_refusal(wrong_dtype, snap, StatusCode::kInvalidArgument, "KV dtype");
  model::ModelConfig mc = model::WorkedExampleConfig();
  mc.max_positions = 96;
  const model::Model other_model = *model::Model::FromSeed(mc, 12);
  auto wrong_model = *Engine::Create(other_model, config);
  expect_refusal(wrong_model, snap, StatusCode::kInvalidArgument, "model id");
  EngineConfig tiny = config;
  tiny.num_pages = 8;
  auto small = *Engine::Create(TestModel(), tiny);
  ASSERT_TRUE(small.AddRequest(kPrompts[3], Sampled()).ok());
  ASSERT_TRUE(small.Step().ok());  // 5 of 8 pages in use; the snapshot needs 4
  const uint64_t free_before = small.cache().pool().num_free();
  EXPECT_EQ(small.ImportSnapshot(snap).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(small.cache().pool().num_free(), free_before);

  auto fresh = *Engine::Create(TestModel(), config);
  format::KvSnapshot bad = snap;
  bad.sequences[0].request["prompt"][1] = 258;
  expect_refusal(fresh, bad, StatusCode::kOutOfRange, "outside the vocabulary");
  bad = snap;
  bad.sequences[0].request["params"]["temperature"] = "hot";
  expect_refusal(fresh, bad, StatusCode::kInvalidArgument, "temperature");
  bad = snap;
  bad.sequences[0].request["output"].push_back(5);  // K/V no longer cover it
  expect_refusal(fresh, bad, StatusCode::kInvalidArgument, "tokens with K/V");
  EXPECT_TRUE(fresh.ImportSnapshot(snap).ok());
}

}  // namespace
}  // namespace folio::engine
