// Beam search: the round rules on hand-made candidates, and the engine's
// beams (forked sequences on shared pages) against a driver that computes
// every beam's logits afresh from its whole token list, with no forks,
// sharing or batching, under batching, chunking, preemption, prefix caching
// and threads.
#include "folio/engine/beam_search.h"

#include <gtest/gtest.h>

#include <bit>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "folio/core/checked_math.h"
#include "folio/core/splitmix64.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"
#include "testing/engine_drive.h"
#include "testing/test_model.h"

namespace folio::engine {
namespace {

using test_support::ExpectNoLeak;
using test_support::NextTokenLogits;
using test_support::TestModel;

using Top = std::vector<std::pair<int32_t, double>>;

TEST(BeamSearch, RoundTakesTheBestCandidatesAndEndsHypothesesByRank) {
  BeamSearch search({2, 1.0, EarlyStopping::kHeuristic}, 8, {9});
  EXPECT_EQ(search.num_candidates(), 4u);
  const std::vector<int32_t> none;
  std::vector<BeamSearch::Beam> root = {{none, 0.0, Top{{9, -0.1}, {5, -0.5}, {6, -1}, {7, -2}}}};
  // Rank 0 is the end token: a hypothesis of one token; 5 and 6 go on.
  std::vector<BeamSearch::Next> next = search.Step(root);
  ASSERT_EQ(next.size(), 2u);
  EXPECT_EQ(next[0].token, 5);
  EXPECT_EQ(next[1].token, 6);
  EXPECT_EQ(next[1].score, -1.0);
  EXPECT_FALSE(search.done());

  const std::vector<int32_t> five = {5}, six = {6};
  std::vector<BeamSearch::Beam> beams = {{five, -0.5, Top{{1, -0.1}, {9, -0.2}}},
                                         {six, -1.0, Top{{9, -0.01}, {2, -3}}}};
  // Ranked: (0, 1) -0.6 goes on; (0, 9) -0.7 ends at rank 1; (1, 9) -1.01
  // is an end token at rank 2 >= num_beams: skipped; (1, 2) -4 goes on.
  next = search.Step(beams);
  ASSERT_EQ(next.size(), 2u);
  EXPECT_EQ(next[0].parent, 0u);
  EXPECT_EQ(next[0].token, 1);
  EXPECT_EQ(next[1].parent, 1u);
  EXPECT_EQ(next[1].token, 2);
  // Kept: -0.1 and -0.7 / 2. The best candidate, -0.6 at length 2, could
  // still reach -0.3 > -0.35: not done.
  EXPECT_FALSE(search.done());

  // At the end the live beams compete: [5, 1] (-0.6 / 2) displaces [5, 9]
  // (-0.35); [6, 2] (-4 / 2) does not get in.
  const std::vector<int32_t> a = {5, 1}, b = {6, 2};
  const std::vector<BeamSearch::Beam> live = {{a, -0.6, {}}, {b, -4.0, {}}};
  const std::vector<BeamSearch::Hypothesis> best = search.Finish(live, 2);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].output, std::vector<int32_t>{9});
  EXPECT_TRUE(best[0].ended);
  EXPECT_EQ(best[0].score, -0.1);
  EXPECT_EQ(best[1].output, a);
  EXPECT_FALSE(best[1].ended);
  EXPECT_EQ(best[1].score, -0.6 / 2);
}

TEST(BeamSearch, EarlyStoppingModesAndLengthPenalty) {
  // Beams of 3 tokens (max_tokens 8); two end tokens tie for the first
  // ranks, so num_beams = 2 hypotheses of length 4 are kept at once, both
  // scoring -1.6 / 4 = -0.4.
  const std::vector<int32_t> three = {1, 2, 3};
  const std::vector<BeamSearch::Beam> beams = {
      {three, -1.5, Top{{9, -0.1}, {8, -0.1}, {5, -0.5}, {6, -1}, {7, -2}, {4, -3}}}};
  for (const auto& [mode, done] : std::vector<std::pair<EarlyStopping, bool>>{
           {EarlyStopping::kTrue, true},
           // The best candidate (-1.6) at length 4 reaches -0.4 at most.
           {EarlyStopping::kHeuristic, true},
           // ... but at max_tokens it could reach -0.2.
           {EarlyStopping::kNever, false}}) {
    BeamSearch search({2, 1.0, mode}, 8, {9, 8});
    EXPECT_EQ(search.num_candidates(), 6u);
    const std::vector<BeamSearch::Next> next = search.Step(beams);
    EXPECT_EQ(search.done(), done) << EarlyStoppingName(mode);
    EXPECT_EQ(next.empty(), done);
  }
  // With a negative length penalty a longer hypothesis only scores lower,
  // so "never" bounds by the current length: -1.6 * 4 reached.
  BeamSearch search({2, -1.0, EarlyStopping::kNever}, 8, {9, 8});
  EXPECT_TRUE(search.Step(beams).empty());
  EXPECT_TRUE(search.done());
}

// ------------------------------------------------------------- engine

struct Hypothesis {
  std::vector<int32_t> tokens;
  uint64_t score_bits = 0;
  FinishReason finish = FinishReason::kNone;
  bool operator==(const Hypothesis&) const = default;
};

uint64_t Bits(double d) { return std::bit_cast<uint64_t>(d); }

// The same search, every beam recomputed from its whole token list.
std::vector<Hypothesis> Reference(const std::vector<int32_t>& prompt, const RequestParams& params) {
  BeamSearch search(params.beam, params.max_tokens, params.stop_token_ids);
  std::vector<std::vector<int32_t>> outputs = {{}};
  std::vector<double> scores = {0.0};
  std::vector<BeamSearch::Hypothesis> best;
  for (;;) {
    std::vector<BeamSearch::Beam> beams;
    for (size_t b = 0; b < outputs.size(); ++b) {
      std::vector<int32_t> tokens = prompt;
      tokens.insert(tokens.end(), outputs[b].begin(), outputs[b].end());
      beams.push_back(
          {outputs[b], scores[b], *search.TopCandidates(NextTokenLogits(TestModel(), tokens))});
    }
    const std::vector<BeamSearch::Next> next = search.Step(beams);
    if (next.empty()) {
      best = search.Finish(beams, params.n);
      break;
    }
    std::vector<std::vector<int32_t>> grown;
    scores.clear();
    for (const BeamSearch::Next& x : next) {
      grown.push_back(outputs[x.parent]);
      grown.back().push_back(x.token);
      scores.push_back(x.score);
    }
    outputs = std::move(grown);
    if (outputs[0].size() == params.max_tokens) {
      std::vector<BeamSearch::Beam> live;
      for (size_t b = 0; b < outputs.size(); ++b) live.push_back({outputs[b], scores[b], {}});
      best = search.Finish(live, params.n);
      break;
    }
  }
  std::vector<Hypothesis> out;
  for (const BeamSearch::Hypothesis& h : best) {
    out.push_back({h.output, Bits(h.score), h.ended ? FinishReason::kStop : FinishReason::kLength});
  }
  return out;
}

struct BeamJob {
  std::vector<int32_t> prompt;
  RequestParams params;
};

// Beam requests over the test prompts, each ending on a token its greedy
// continuation reaches, so that hypotheses end both ways.
const std::vector<BeamJob>& BeamJobs() {
  static const std::vector<BeamJob> jobs = [] {
    std::vector<BeamJob> j;
    const auto& prompts = test_support::SharedStemPrompts();
    const EarlyStopping modes[] = {EarlyStopping::kHeuristic, EarlyStopping::kTrue,
                                   EarlyStopping::kNever};
    for (size_t i = 0; i < prompts.size(); ++i) {
      Engine greedy = *Engine::Create(TestModel(), {});
      RequestParams g;
      g.max_tokens = 4;
      const std::vector<int32_t> cont = (*greedy.Generate({prompts[i]}, g))[0];
      RequestParams p;
      p.max_tokens = 10;
      p.stop_token_ids = {cont[1 + i % 3]};
      p.beam = {2 + i % 3, i % 2 == 0 ? 1.0 : 0.5, modes[i % 3]};
      p.n = 1 + i % p.beam.num_beams;
      j.push_back({prompts[i], p});
    }
    return j;
  }();
  return jobs;
}

std::map<std::pair<RequestId, uint64_t>, Hypothesis> RunToEnd(Engine& engine) {
  std::map<std::pair<RequestId, uint64_t>, Hypothesis> out;
  while (engine.HasUnfinished()) {
    auto step = engine.Step();
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    if (!step.ok()) break;
    for (const StepOutput& o : *step) {
      if (!o.beam_score) continue;  // a plain request beside the beams
      EXPECT_NE(o.finish, FinishReason::kNone);
      const bool fresh = out.emplace(std::pair{o.id, o.index},
                                     Hypothesis{o.new_tokens, Bits(*o.beam_score), o.finish})
                             .second;
      EXPECT_TRUE(fresh) << "request " << o.id << " returned hypothesis " << o.index << " twice";
    }
  }
  return out;
}

TEST(BeamSearchEngine, BeamsEqualARecomputedSearchUnderEverySchedule) {
  std::vector<std::vector<Hypothesis>> want;
  bool ended = false, cut = false;
  for (const BeamJob& j : BeamJobs()) {
    want.push_back(Reference(j.prompt, j.params));
    ASSERT_EQ(want.back().size(), j.params.n);
    for (const Hypothesis& h : want.back()) {
      ended |= h.finish == FinishReason::kStop;
      cut |= h.finish == FinishReason::kLength;
    }
  }
  EXPECT_TRUE(ended && cut) << "the jobs should end hypotheses both ways";

  ThreadPool two(2);
  EngineConfig chunks;
  chunks.page_size = 3;
  chunks.max_num_batched_tokens = 6;
  chunks.max_num_seqs = 5;
  EngineConfig tight;
  tight.page_size = 4;
  tight.num_pages = 40;
  tight.max_num_seqs = 12;
  // Recomputed beams in chunks: a group's members finish their prefill in
  // different steps, and a round must wait for the last.
  EngineConfig tight_chunks = tight;
  tight_chunks.max_num_batched_tokens = 12;
  EngineConfig uncached;
  uncached.prefix_caching = false;
  struct Variant {
    const char* name;
    EngineConfig config;
    ThreadPool* pool;
    bool with_plain;  // plain sampled requests in the same batches
  };
  const std::vector<Variant> variants = {
      {"alone in turn", {}, nullptr, false},
      {"batched with plain requests", {}, nullptr, true},
      {"chunks of 6, pages of 3, 5 slots", chunks, nullptr, true},
      {"preempting", tight, nullptr, true},
      {"preempting, chunks of 12", tight_chunks, nullptr, true},
      {"no prefix cache", uncached, nullptr, false},
      {"two threads", {}, &two, true}};
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    auto engine = *Engine::Create(TestModel(), v.config, v.pool);
    std::map<RequestId, size_t> job_of;
    for (size_t j = 0; j < BeamJobs().size(); ++j) {
      job_of[*engine.AddRequest(BeamJobs()[j].prompt, BeamJobs()[j].params)] = j;
      if (v.with_plain) {
        ASSERT_TRUE(
            engine
                .AddRequest(test_support::TestPrompts()[j % 4], test_support::SampledWithLogprobs())
                .ok());
      }
      if (std::string(v.name) == "alone in turn") {
        const auto got = RunToEnd(engine);
        for (const auto& [key, h] : got) {
          EXPECT_EQ(h, want[job_of.at(key.first)].at(key.second)) << "job " << j;
        }
        EXPECT_EQ(got.size(), want[j].size());
      }
    }
    const auto got = RunToEnd(engine);
    if (std::string(v.name) != "alone in turn") {
      size_t count = 0;
      for (const auto& [key, h] : got) {
        const size_t j = job_of.at(key.first);
        EXPECT_EQ(h, want[j].at(key.second)) << "job " << j << " hypothesis " << key.second;
        ++count;
      }
      size_t expected = 0;
      for (const auto& w : want) expected += w.size();
      EXPECT_EQ(count, expected);
    }
    if (std::string(v.name).starts_with("preempting")) {
      EXPECT_GT(engine.stats().preemptions, 0u);
    }
    ExpectNoLeak(engine);
  }
}

// Random workloads: beam requests beside plain ones in tight pools (forks
// copied on write, groups preempted and recomputed in chunks) with aborts
// between steps. Every beam request not aborted ends as the recomputed
// search does; the pool is conserved at every step and empty at the end.
TEST(BeamSearchEngine, RandomWorkloadsKeepThePoolAndEveryHypothesis) {
  std::vector<std::vector<Hypothesis>> want;
  for (const BeamJob& j : BeamJobs()) want.push_back(Reference(j.prompt, j.params));
  SplitMix64 rng(91);
  uint64_t preemptions = 0, aborts = 0;
  for (int round = 0; round < 16; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    EngineConfig config;
    config.page_size = 2 + rng.NextU64() % 4;
    config.max_num_seqs = 4 + rng.NextU64() % 8;
    // The largest job (4 beams of 39 positions) just fits, so groups wait
    // for each other and are preempted.
    config.num_pages = 4 * CeilDiv(39, config.page_size) + rng.NextU64() % 12;
    config.max_num_batched_tokens = config.max_num_seqs + rng.NextU64() % 24;
    config.prefix_caching = rng.NextU64() % 2 == 0;
    auto engine = *Engine::Create(TestModel(), config);
    std::map<RequestId, size_t> job_of;
    for (size_t j = 0; j < BeamJobs().size(); ++j) {
      job_of[*engine.AddRequest(BeamJobs()[j].prompt, BeamJobs()[j].params)] = j;
      if (rng.NextU64() % 2 == 0) {
        ASSERT_TRUE(
            engine
                .AddRequest(test_support::TestPrompts()[j % 4], test_support::SampledWithLogprobs())
                .ok());
      }
    }
    std::map<std::pair<RequestId, uint64_t>, Hypothesis> got;
    std::vector<RequestId> ids;
    for (const auto& [id, j] : job_of) ids.push_back(id);
    const std::set<RequestId> aborted =
        test_support::DriveWithAborts(engine, rng, 16, ids, [&](const StepOutput& o) {
          if (o.beam_score) got[{o.id, o.index}] = {o.new_tokens, Bits(*o.beam_score), o.finish};
        });
    for (const auto& [id, j] : job_of) {
      if (aborted.count(id) != 0) continue;
      for (uint64_t i = 0; i < want[j].size(); ++i) {
        EXPECT_EQ((got[{id, i}]), want[j][i]) << "job " << j << " hypothesis " << i;
      }
    }
    preemptions += engine.stats().preemptions;
    aborts += aborted.size();
    ExpectNoLeak(engine);
  }
  EXPECT_GT(preemptions, 0u);  // the paths this test is for were taken
  EXPECT_GT(aborts, 0u);
}

TEST(BeamSearchEngine, BeamsSharePagesAndCopyOnlyTheTail) {
  // 30 prompt tokens in pages of 4: 8 pages, the last half full.
  std::vector<int32_t> prompt = {0};
  for (int32_t t = 0; t < 29; ++t) prompt.push_back(2 + (t * 13) % 200);
  EngineConfig c;
  c.page_size = 4;
  c.prefix_caching = false;
  auto engine = *Engine::Create(TestModel(), c);
  RequestParams p;
  p.max_tokens = 6;
  p.beam = {4, 1.0, EarlyStopping::kHeuristic};
  ASSERT_TRUE(engine.AddRequest(prompt, p).ok());
  ASSERT_TRUE(engine.Step().ok());  // the prefill, and the first round's forks
  EXPECT_EQ(engine.cache().num_sequences(), 4u);
  EXPECT_EQ(engine.cache().Stats().pages_used, 8u);
  ASSERT_TRUE(engine.Step().ok());  // each beam writes into the shared tail
  // Writes into the shared tail copied it (at least once, at most three
  // times); four beams alone would hold 32 pages.
  EXPECT_GT(engine.cache().Stats().pages_used, 8u);
  EXPECT_LE(engine.cache().Stats().pages_used, 11u);
  EXPECT_EQ(engine.cache().num_sequences(), 4u);
  while (engine.HasUnfinished()) ASSERT_TRUE(engine.Step().ok());
  ExpectNoLeak(engine);
}

TEST(BeamSearchEngine, AbortMidSearchFreesEveryBeam) {
  auto engine = *Engine::Create(TestModel(), {});
  RequestParams p;
  p.max_tokens = 12;
  p.beam = {3, 1.0, EarlyStopping::kNever};
  const RequestId id = *engine.AddRequest(test_support::TestPrompts()[3], p);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(engine.Step().ok());
  EXPECT_EQ(engine.cache().num_sequences(), 3u);
  EXPECT_FALSE(engine.ExportSnapshot(std::vector<RequestId>{id}).ok());
  ASSERT_TRUE(engine.Abort(id).ok());
  EXPECT_FALSE(engine.HasUnfinished());
  EXPECT_EQ(engine.Abort(id).code(), StatusCode::kNotFound);
  ExpectNoLeak(engine);
}

TEST(BeamSearchEngine, RefusesWhatBeamSearchCannotHonour) {
  EngineConfig c;
  c.max_num_seqs = 4;
  c.num_pages = 12;
  auto engine = *Engine::Create(TestModel(), c);
  const std::vector<int32_t> prompt = {0, 5, 6};
  auto refused = [&](auto edit, const std::string& words) {
    RequestParams p;
    p.beam = {2, 1.0, EarlyStopping::kHeuristic};
    edit(p);
    const Result<RequestId> r = engine.AddRequest(prompt, p);
    ASSERT_FALSE(r.ok()) << words;
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().ToString();
  };
  refused([](RequestParams& p) { p.beam.num_beams = 5; }, "max_num_seqs");
  refused([](RequestParams& p) { p.n = 3; }, "at most num_beams");
  refused([](RequestParams& p) { p.sampling.temperature = 0.7; }, "temperature");
  refused([](RequestParams& p) { p.logprobs = true; }, "logprobs");
  refused([](RequestParams& p) { p.num_draft_tokens = 2; }, "draft");
  refused([](RequestParams& p) { p.beam.length_penalty = std::nan(""); }, "length_penalty");
  // 12 pages of 16 hold 3 beams of 60 positions, not 4.
  refused(
      [](RequestParams& p) {
        p.beam.num_beams = 4;
        p.max_tokens = 58;
      },
      "for its beams");
  EXPECT_FALSE(engine.HasUnfinished());
}

}  // namespace
}  // namespace folio::engine
