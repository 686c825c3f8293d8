// Parallel samples (RequestParams::n): one prefill, n forks sharing its
// pages, sample i equal bit for bit to a one-sample request seeded
// SampleSeed(seed, i), under every schedule.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>

#include "folio/core/checked_math.h"
#include "folio/core/splitmix64.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"
#include "testing/engine_drive.h"
#include "testing/test_model.h"

namespace folio::engine {
namespace {

using test_support::Drive;
using test_support::ExpectNoLeak;
using test_support::Outcome;
using test_support::TestModel;

RequestParams Params(uint64_t n, uint64_t seed) {
  RequestParams p;
  p.sampling = {0.9, 0, 1.0, 0.0};
  p.max_tokens = 20;
  p.seed = seed;
  p.logprobs = true;
  p.top_logprobs = 2;
  p.stop_token_ids = {3};
  p.n = n;
  return p;
}

// Steps to the end; outcomes by (request, sample).
std::map<std::pair<RequestId, uint64_t>, Outcome> RunToEnd(Engine& engine) {
  std::map<std::pair<RequestId, uint64_t>, Outcome> out;
  while (engine.HasUnfinished()) {
    auto step = engine.Step();
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    if (!step.ok()) break;
    for (const StepOutput& o : *step) test_support::Record(o, out[{o.id, o.index}]);
  }
  return out;
}

struct Job {
  std::vector<int32_t> prompt;
  uint64_t n;
  uint64_t seed;
};

const std::vector<Job>& Jobs() {
  static const std::vector<Job> jobs = [] {
    std::vector<Job> j;
    const auto& prompts = test_support::TestPrompts();
    for (size_t i = 0; i < prompts.size(); ++i) j.push_back({prompts[i], 1 + i % 4, 100 + i});
    std::vector<int32_t> long_prompt = {0};
    for (int32_t t = 0; t < 30; ++t) long_prompt.push_back(2 + (t * 13) % 200);
    j.push_back({long_prompt, 4, 7});
    return j;
  }();
  return jobs;
}

TEST(ParallelSamples, EachSampleEqualsAOneSampleRequestWithItsSeed) {
  // Reference: every sample alone, as n = 1 with the derived seed.
  EngineConfig solo;
  solo.prefix_caching = false;
  std::map<std::pair<size_t, uint64_t>, Outcome> want;
  for (size_t j = 0; j < Jobs().size(); ++j) {
    for (uint64_t i = 0; i < Jobs()[j].n; ++i) {
      auto e = *Engine::Create(TestModel(), solo);
      want[{j, i}] = Drive(e, {Jobs()[j].prompt}, Params(1, SampleSeed(Jobs()[j].seed, i)), {0})[0];
    }
  }
  ThreadPool two(2);
  EngineConfig chunks;
  chunks.page_size = 3;
  chunks.max_num_batched_tokens = 6;
  chunks.max_num_seqs = 5;
  EngineConfig tight;
  tight.page_size = 4;
  tight.num_pages = 20;
  EngineConfig drafting;
  drafting.speculative.num_draft_tokens = 3;
  struct Variant {
    const char* name;
    EngineConfig config;
    ThreadPool* pool;
  };
  const std::vector<Variant> variants = {{"batched", {}, nullptr},
                                         {"chunks of 6, pages of 3, 5 slots", chunks, nullptr},
                                         {"preempting", tight, nullptr},
                                         {"drafting", drafting, nullptr},
                                         {"two threads", {}, &two}};
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    auto engine = *Engine::Create(TestModel(), v.config, v.pool);
    std::map<RequestId, size_t> job_of;
    for (size_t j = 0; j < Jobs().size(); ++j) {
      job_of[*engine.AddRequest(Jobs()[j].prompt, Params(Jobs()[j].n, Jobs()[j].seed))] = j;
    }
    const auto got = RunToEnd(engine);
    size_t samples = 0;
    for (const auto& [key, outcome] : got) {
      const size_t j = job_of.at(key.first);
      ASSERT_LT(key.second, Jobs()[j].n);
      EXPECT_EQ(outcome, want.at(std::pair<size_t, uint64_t>{j, key.second}))
          << "job " << j << " sample " << key.second;
      ++samples;
    }
    EXPECT_EQ(samples, want.size());
    if (std::string(v.name) == "preempting") {
      EXPECT_GT(engine.stats().preemptions, 0u);
    }
    ExpectNoLeak(engine);
  }
}

TEST(ParallelSamples, ForksShareThePromptsPagesAndCopyOnlyTheTail) {
  EngineConfig config;
  config.page_size = 4;
  config.prefix_caching = false;
  auto engine = *Engine::Create(TestModel(), config);
  const std::vector<int32_t>& prompt = Jobs().back().prompt;  // 31 tokens: 8 pages, tail of 3
  ASSERT_TRUE(engine.AddRequest(prompt, Params(4, 1)).ok());
  auto first = engine.Step();  // the prefill, the fork, four first tokens
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->size(), 4u);
  EXPECT_EQ(engine.num_running(), 4u);
  EXPECT_EQ(engine.cache().Stats().pages_used, CeilDiv(prompt.size(), 4));  // all shared
  ASSERT_TRUE(engine.Step().ok());  // each writes its first token into the tail page
  // Three samples copied the shared tail; the last one writes in place.
  EXPECT_EQ(engine.cache().Stats().pages_used, CeilDiv(prompt.size(), 4) + 3);
  // Four separate requests would hold four copies of every prompt page.
  ASSERT_TRUE(engine.Abort(0).ok());  // every sample at once
  EXPECT_FALSE(engine.HasUnfinished());
  EXPECT_EQ(engine.Abort(0).code(), StatusCode::kNotFound);
  ExpectNoLeak(engine);
}

// The engine keeps one record per request, however many sequences it
// runs: a group of samples and a beam search each count once, their forked
// sequences are no requests of their own (not abortable or exportable by
// their sequence ids), and every record is gone once its last sequence
// finished, whatever finished it.
TEST(ParallelSamples, OneRecordPerRequestWhateverItsSequences) {
  EngineConfig config;
  config.max_num_seqs = 8;
  auto engine = *Engine::Create(TestModel(), config);
  const RequestId samples = *engine.AddRequest(Jobs()[0].prompt, Params(3, 1));
  RequestParams beams;
  beams.max_tokens = 6;
  beams.beam.num_beams = 3;
  const RequestId search = *engine.AddRequest(Jobs()[1].prompt, beams);
  RequestParams one = Params(1, 5);
  one.num_draft_tokens = 2;
  const RequestId single = *engine.AddRequest(Jobs()[2].prompt, one);
  RequestParams pooled;
  pooled.pooling = Pooling::kMean;
  ASSERT_TRUE(engine.AddRequest(Jobs()[3].prompt, pooled).ok());
  EXPECT_EQ(engine.num_requests(), 4u);
  ASSERT_TRUE(engine.Step().ok());  // the prompts: samples fork, beams fork, the pool ends
  ASSERT_TRUE(engine.Step().ok());
  EXPECT_GT(engine.num_running(), 3u);  // forked sequences run
  EXPECT_EQ(engine.num_requests(), 3u);
  // The sequences forked off a request have ids of their own, past the
  // requests'; none of them names a request.
  for (RequestId seq = single + 2; seq < single + 2 + 8; ++seq) {
    EXPECT_EQ(engine.Abort(seq).code(), StatusCode::kNotFound) << seq;
    const std::vector<RequestId> ids = {seq};
    EXPECT_EQ(engine.ExportSnapshot(ids).status().code(), StatusCode::kNotFound) << seq;
  }
  ASSERT_TRUE(engine.Abort(samples).ok());
  EXPECT_EQ(engine.num_requests(), 2u);
  RunToEnd(engine);
  EXPECT_EQ(engine.Abort(search).code(), StatusCode::kNotFound);
  ExpectNoLeak(engine);
}

TEST(ParallelSamples, SamplesTakeTheirSlotsFromAdmission) {
  EngineConfig config;
  config.max_num_seqs = 4;
  auto engine = *Engine::Create(TestModel(), config);
  ASSERT_TRUE(engine.AddRequest(Jobs()[0].prompt, Params(3, 1)).ok());
  ASSERT_TRUE(engine.AddRequest(Jobs()[1].prompt, Params(2, 2)).ok());
  ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(engine.num_running(), 3u);  // the second group waits: 3 + 2 > 4 slots
  EXPECT_EQ(engine.num_waiting(), 1u);
  RunToEnd(engine);
  ExpectNoLeak(engine);
}

// Samples share pages, so preempting one alone would free almost nothing:
// a group is preempted whole, and still ends as plain sampling would.
TEST(ParallelSamples, AGroupIsPreemptedWhole) {
  EngineConfig config;
  config.page_size = 4;
  config.num_pages = 12;  // 3 samples of 8 + 20 tokens need up to 21
  config.prefix_caching = false;
  auto engine = *Engine::Create(TestModel(), config);
  const std::vector<int32_t> prompt = {0, 9, 8, 7, 6, 5, 4, 3};
  RequestParams p = Params(3, 5);
  p.stop_token_ids.clear();
  const RequestId id = *engine.AddRequest(prompt, p);
  std::vector<uint64_t> deltas;
  std::map<uint64_t, Outcome> got;
  while (engine.HasUnfinished()) {
    const uint64_t before = engine.stats().preemptions;
    auto step = engine.Step();
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    for (const StepOutput& o : *step) {
      ASSERT_EQ(o.id, id);
      test_support::Record(o, got[o.index]);
    }
    if (engine.stats().preemptions != before) deltas.push_back(engine.stats().preemptions - before);
  }
  ASSERT_FALSE(deltas.empty());
  EXPECT_EQ(deltas.front(), 3u);  // all three samples at once
  EngineConfig solo;
  solo.prefix_caching = false;
  for (uint64_t i = 0; i < 3; ++i) {
    RequestParams one = p;
    one.n = 1;
    one.seed = SampleSeed(p.seed, i);
    auto e = *Engine::Create(TestModel(), solo);
    EXPECT_EQ(got[i], Drive(e, {prompt}, one, {0})[0]) << "sample " << i;
  }
  ExpectNoLeak(engine);
}

// Random workloads: random n, draft lengths, pool sizes (so forks are
// copied on write and groups preempted), chunk budgets and aborts between
// steps. Every sample of every request not aborted ends as its one-sample
// request would; the pool is conserved at every step and empty at the end.
TEST(ParallelSamples, RandomWorkloadsKeepThePoolAndEverySample) {
  SplitMix64 rng(77);
  EngineConfig solo;
  solo.prefix_caching = false;
  uint64_t preemptions = 0, aborts = 0;
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    EngineConfig config;
    config.page_size = 2 + rng.NextU64() % 4;
    config.max_num_seqs = 4 + rng.NextU64() % 4;
    config.num_pages = 52 / config.page_size + 2 + rng.NextU64() % 16;  // tight: preempts
    config.max_num_batched_tokens = config.max_num_seqs + rng.NextU64() % 24;
    config.prefix_caching = rng.NextU64() % 2 == 0;
    auto engine = *Engine::Create(TestModel(), config);
    std::map<RequestId, std::pair<size_t, RequestParams>> jobs;
    for (size_t j = 0; j < Jobs().size(); ++j) {
      RequestParams p = Params(1 + rng.NextU64() % 4, 1000 + rng.NextU64() % 1000);
      p.num_draft_tokens = rng.NextU64() % 4;
      jobs[*engine.AddRequest(Jobs()[j].prompt, p)] = {j, p};
    }
    std::map<std::pair<RequestId, uint64_t>, Outcome> got;
    std::vector<RequestId> ids;
    for (const auto& [id, job] : jobs) ids.push_back(id);
    const std::set<RequestId> aborted =
        test_support::DriveWithAborts(engine, rng, 12, ids, [&](const StepOutput& o) {
          test_support::Record(o, got[{o.id, o.index}]);
        });
    for (const auto& [id, job] : jobs) {
      if (aborted.count(id) != 0) continue;
      for (uint64_t i = 0; i < job.second.n; ++i) {
        RequestParams one = job.second;
        one.n = 1;
        one.seed = SampleSeed(job.second.seed, i);
        auto e = *Engine::Create(TestModel(), solo);
        EXPECT_EQ((got[{id, i}]), Drive(e, {Jobs()[job.first].prompt}, one, {0})[0])
            << "job " << job.first << " sample " << i;
      }
    }
    preemptions += engine.stats().preemptions;
    aborts += aborted.size();
    ExpectNoLeak(engine);
  }
  EXPECT_GT(preemptions, 0u);  // the paths this test is for were taken
  EXPECT_GT(aborts, 0u);
}

TEST(ParallelSamples, BadRequestsAreRefused) {
  EngineConfig config;
  config.max_num_seqs = 4;
  auto engine = *Engine::Create(TestModel(), config);
  EXPECT_EQ(engine.AddRequest({0, 5}, Params(0, 1)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.AddRequest({0, 5}, Params(5, 1)).status().code(), StatusCode::kInvalidArgument);
  RequestParams p = Params(2, 1);
  p.prompt_logits = true;
  EXPECT_EQ(engine.AddRequest({0, 5}, p).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.Generate({{0, 5}}, Params(2, 1)).status().code(), StatusCode::kInvalidArgument);
  const RequestId id = *engine.AddRequest({0, 5, 6}, Params(2, 1));
  ASSERT_TRUE(engine.Step().ok());
  const std::vector<RequestId> ids = {id};
  EXPECT_EQ(engine.ExportSnapshot(ids).status().code(), StatusCode::kFailedPrecondition);
}

TEST(ParallelSamples, SampleSeedKeepsSampleZeroAndSpreadsTheRest) {
  EXPECT_EQ(SampleSeed(42, 0), 42u);
  EXPECT_NE(SampleSeed(42, 1), SampleSeed(42, 2));
  EXPECT_NE(SampleSeed(42, 1), SampleSeed(43, 1));
  EXPECT_NE(SampleSeed(42, 1), 42u);
}

}  // namespace
}  // namespace folio::engine
