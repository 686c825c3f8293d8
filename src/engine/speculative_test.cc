// Speculative decoding's contract: with drafts verified, every request's
// tokens, log-prob bits, text and finish are plain decoding's, under every
// schedule; rejected drafts leave no page behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "folio/core/splitmix64.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/draft_model_drafter.h"
#include "folio/engine/engine.h"
#include "testing/engine_drive.h"
#include "testing/test_model.h"

namespace folio::engine {
namespace {

using test_support::Drive;
using test_support::ExpectNoLeak;
using test_support::InOrder;
using test_support::Outcome;
using test_support::TestModel;

// Prompts that repeat themselves, so the n-gram drafter has something to
// propose, and the shared test prompts, where it mostly has not.
std::vector<std::vector<int32_t>> Prompts() {
  std::vector<std::vector<int32_t>> prompts = test_support::TestPrompts();
  for (int32_t period : {2, 3, 5}) {
    std::vector<int32_t> p = {0};
    for (int32_t i = 0; i < 18; ++i) p.push_back(40 + (i % period) * 7);
    prompts.push_back(p);
  }
  return prompts;
}

// temperature: of the sampled case. The test model's logits are flat: only
// a low one makes its sampled output repeat enough for prompt lookup to
// propose and have drafts accepted; a draft model proposes at any.
RequestParams Params(bool greedy, uint64_t k, double temperature = 0.05) {
  RequestParams p;
  p.sampling = greedy ? sampling::SamplingParams{0.0, 0, 1.0, 0.0}
                      : sampling::SamplingParams{temperature, 40, 0.95, 0.0};
  p.max_tokens = 40;
  p.seed = 77;
  p.logprobs = true;
  p.top_logprobs = 2;
  p.stop_token_ids = {1};
  p.num_draft_tokens = k;
  return p;
}

// Plain decoding, each prompt alone.
std::vector<Outcome> Reference(const std::vector<std::vector<int32_t>>& prompts,
                               const RequestParams& params) {
  EngineConfig solo;
  solo.prefix_caching = false;
  std::vector<Outcome> want;
  for (const auto& p : prompts) {
    auto e = *Engine::Create(TestModel(), solo);
    want.push_back(Drive(e, {p}, params, {0})[0]);
  }
  return want;
}

// The schedules every speculative run must not notice: batched, chunks of
// 7 with pages of 3, a tight pool (preempts, and drafts get dropped to make
// room) and two threads.
struct Variant {
  const char* name;
  EngineConfig config;
  ThreadPool* pool;
};
std::vector<Variant> Schedules(ThreadPool* two) {
  EngineConfig chunks;
  chunks.page_size = 3;
  chunks.max_num_batched_tokens = 7;
  chunks.max_num_seqs = 3;
  EngineConfig tight;
  tight.page_size = 4;
  tight.num_pages = 24;
  return {{"batched", {}, nullptr},
          {"chunks of 7, pages of 3", chunks, nullptr},
          {"preempting", tight, nullptr},
          {"two threads", {}, two}};
}

TEST(Speculative, OutputIsPlainDecodingsUnderEveryDraftLengthAndSchedule) {
  const auto prompts = Prompts();
  ThreadPool two(2);
  const std::vector<Variant> variants = Schedules(&two);
  for (const bool greedy : {true, false}) {
    uint64_t drafted = 0, accepted = 0;
    const std::vector<Outcome> want = Reference(prompts, Params(greedy, 0));
    for (const uint64_t k : {uint64_t{1}, uint64_t{3}, kMaxDraftTokens}) {
      for (const Variant& v : variants) {
        SCOPED_TRACE(std::string(greedy ? "greedy, " : "sampled, ") + "k=" + std::to_string(k) +
                     ", " + v.name);
        auto engine = *Engine::Create(TestModel(), v.config, v.pool);
        EXPECT_EQ(Drive(engine, prompts, Params(greedy, k), InOrder(prompts.size())), want);
        const EngineStats st = engine.stats();
        drafted += st.draft_tokens;
        accepted += st.draft_accepted_tokens;
        for (uint64_t i = 0; i + 1 < kMaxDraftTokens; ++i) {
          EXPECT_LE(st.accepted_at[i], st.drafted_at[i]);
          EXPECT_GE(st.accepted_at[i], st.accepted_at[i + 1]);
          EXPECT_GE(st.drafted_at[i], st.drafted_at[i + 1]);
        }
        if (k < kMaxDraftTokens) {
          EXPECT_EQ(st.drafted_at[k], 0u);
        }
        ExpectNoLeak(engine);
      }
    }
    // Both paths were taken: drafts accepted and drafts rejected.
    EXPECT_GT(accepted, 0u) << (greedy ? "greedy" : "sampled");
    EXPECT_LT(accepted, drafted) << (greedy ? "greedy" : "sampled");
  }
}

// One request, step by step: each draft is no longer than the length rule
// allows (NextDraftLength over the drafts before it, from
// kFirstDraftLength), and a copied run lets drafts grow past the first
// length.
TEST(Speculative, DraftsStartShortAndGrowWhileAcceptedWhole) {
  std::vector<int32_t> prompt = {0};
  for (int32_t i = 0; i < 30; ++i) prompt.push_back(40 + (i % 3) * 7);
  auto engine = *Engine::Create(TestModel(), EngineConfig{});
  RequestParams p = Params(true, kMaxDraftTokens);
  p.max_tokens = 60;
  ASSERT_TRUE(engine.AddRequest(prompt, p).ok());
  uint64_t length = kFirstDraftLength, longest = 0, verifications = 0;
  EngineStats before = engine.stats();
  while (engine.HasUnfinished()) {
    ASSERT_TRUE(engine.Step().ok());
    const EngineStats after = engine.stats();
    if (after.draft_verifications != before.draft_verifications) {
      const uint64_t drafted = after.draft_tokens - before.draft_tokens;
      const uint64_t accepted = after.draft_accepted_tokens - before.draft_accepted_tokens;
      EXPECT_LE(drafted, length) << "verification " << verifications;
      length = NextDraftLength(length, drafted, accepted, kMaxDraftTokens);
      longest = std::max(longest, drafted);
      ++verifications;
    }
    before = after;
  }
  EXPECT_GT(verifications, 2u);
  EXPECT_GT(longest, kFirstDraftLength);
  ExpectNoLeak(engine);
}

TEST(Speculative, RequestsWithAndWithoutDraftsShareSteps) {
  const auto prompts = Prompts();
  const std::vector<Outcome> want = Reference(prompts, Params(true, 0));
  EngineConfig config;
  config.speculative.num_draft_tokens = 4;  // the engine's default; half opt out
  auto engine = *Engine::Create(TestModel(), config);
  std::map<RequestId, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestParams p = Params(true, 0);
    if (i % 2 == 0) p.num_draft_tokens.reset();
    index[*engine.AddRequest(prompts[i], p)] = i;
  }
  std::vector<Outcome> got(prompts.size());
  while (engine.HasUnfinished()) {
    auto step = engine.Step();
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    for (const StepOutput& o : *step) test_support::Record(o, got[index.at(o.id)]);
  }
  EXPECT_EQ(got, want);
  EXPECT_GT(engine.stats().draft_verifications, 0u);
  ExpectNoLeak(engine);
}

// Random workloads: random draft lengths per request, random pool sizes
// (preemption), random aborts between steps. Every request that was not
// aborted ends as plain decoding would have it; no page is ever lost.
TEST(Speculative, RandomWorkloadsKeepThePoolAndTheOutput) {
  const auto prompts = Prompts();
  SplitMix64 rng(2026);
  for (int round = 0; round < 12; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const bool greedy = rng.NextU64() % 2 == 0;
    const std::vector<Outcome> want = Reference(prompts, Params(greedy, 0));
    EngineConfig config;
    config.page_size = 2 + rng.NextU64() % 4;
    config.num_pages = 70 / config.page_size + rng.NextU64() % 40;
    config.max_num_seqs = 1 + rng.NextU64() % 5;
    config.max_num_batched_tokens = config.max_num_seqs + rng.NextU64() % 24;
    auto engine = *Engine::Create(TestModel(), config);
    std::map<RequestId, size_t> index;
    for (size_t i = 0; i < prompts.size(); ++i) {
      index[*engine.AddRequest(prompts[i], Params(greedy, rng.NextU64() % (kMaxDraftTokens + 1)))] =
          i;
    }
    std::vector<Outcome> got(prompts.size());
    std::vector<RequestId> ids;
    for (const auto& [id, i] : index) ids.push_back(id);
    const std::set<RequestId> aborted = test_support::DriveWithAborts(
        engine, rng, 16, ids,
        [&](const StepOutput& o) { test_support::Record(o, got[index.at(o.id)]); });
    for (const auto& [id, i] : index) {
      if (aborted.count(id) == 0) {
        EXPECT_EQ(got[i], want[i]) << "prompt " << i;
      }
    }
    ExpectNoLeak(engine);
  }
}

// Pages cached while drafts came and went serve later requests exactly:
// the prefix cache only ever saw accepted tokens.
TEST(Speculative, ThePrefixCacheHoldsOnlyAcceptedTokens) {
  const auto prompts = Prompts();
  const RequestParams params = Params(true, 5);
  const std::vector<Outcome> want = Reference(prompts, Params(true, 0));
  EngineConfig config;
  config.page_size = 3;
  auto engine = *Engine::Create(TestModel(), config);
  EXPECT_EQ(Drive(engine, prompts, params, InOrder(prompts.size())), want);
  ASSERT_GT(engine.stats().draft_accepted_tokens, 0u);
  ASSERT_LT(engine.stats().draft_accepted_tokens, engine.stats().draft_tokens);
  // Each prompt followed by its own continuation: the cache holds the
  // pages of both, and the continuation's must be the accepted tokens'.
  std::vector<std::vector<int32_t>> again;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int32_t> p = prompts[i];
    p.insert(p.end(), want[i].tokens.begin(), want[i].tokens.end() - 1);
    if (p.size() + params.max_tokens <= TestModel().config().max_positions) again.push_back(p);
  }
  ASSERT_FALSE(again.empty());
  const EngineStats before = engine.stats();
  const std::vector<Outcome> warm = Drive(engine, again, Params(true, 0), InOrder(again.size()));
  EXPECT_GT(engine.stats().prefix_hit_tokens, before.prefix_hit_tokens);
  EXPECT_EQ(warm, Reference(again, Params(true, 0)));
  ExpectNoLeak(engine);
}

// A draft model: the target itself (its greedy drafts are the target's
// own tokens, so nearly all are accepted) and another model of the same
// shape (mostly rejected). Either way every request ends as plain decoding
// has it, under every schedule, also when the draft pool is too small for
// every request at once; the draft pool is empty once they finish.
TEST(Speculative, ADraftModelLeavesTheOutputAsPlainDecodings) {
  const auto prompts = Prompts();
  const model::Model other = *model::Model::FromSeed(TestModel().config(), 99);
  ThreadPool two(2);
  std::vector<Variant> variants = Schedules(&two);
  EngineConfig small_draft_pool;
  small_draft_pool.page_size = 4;
  small_draft_pool.speculative.draft_num_pages = 14;  // one long request's worth
  variants.push_back({"small draft pool", small_draft_pool, nullptr});
  for (const bool greedy : {true, false}) {
    const std::vector<Outcome> want = Reference(prompts, Params(greedy, 0, 0.8));
    for (const model::Model* draft : {&TestModel(), &other}) {
      uint64_t drafted = 0, accepted = 0;
      for (const Variant& v : variants) {
        SCOPED_TRACE(std::string(greedy ? "greedy, " : "sampled, ") +
                     (draft == &other ? "other draft, " : "self draft, ") + v.name);
        EngineConfig config = v.config;
        config.speculative.draft_model = draft;
        auto engine = *Engine::Create(TestModel(), config, v.pool);
        EXPECT_EQ(Drive(engine, prompts, Params(greedy, 4, 0.8), InOrder(prompts.size())), want);
        drafted += engine.stats().draft_tokens;
        accepted += engine.stats().draft_accepted_tokens;
        const auto& drafter = dynamic_cast<const DraftModelDrafter&>(engine.drafter());
        EXPECT_EQ(drafter.num_sequences(), 0u);
        EXPECT_EQ(drafter.cache().Stats().pages_used, 0u);
        EXPECT_TRUE(drafter.cache().pool().CheckInvariants().ok());
        ExpectNoLeak(engine);
      }
      EXPECT_GT(drafted, 0u);
      if (greedy && draft == &TestModel()) {
        // Only drafts cut short by a stop token or max_tokens go unaccepted.
        EXPECT_GT(static_cast<double>(accepted), 0.9 * static_cast<double>(drafted));
      } else {
        EXPECT_LT(accepted, drafted);
      }
    }
  }
}

// Rejection sampling keeps the distribution. Each request (temperature
// 0.1) samples its first token, then verifies a one-token draft for its
// second: the target's own argmax (kept a fifth of the time) or another
// model's greedy token (almost never). The second tokens of 6000 requests with fixed
// seeds follow the exact marginal sum_t1 p(t1) p(t2 | t1), computed from
// the model's logits: a chi-square test at significance 1e-4 (fixed seeds,
// so the verdict is reproducible; keeping the draft 3x too often, or
// resampling with the draft still in, fails it by far). Greedy requests get
// plain decoding's tokens.
TEST(Speculative, RejectionSamplingKeepsTheDistribution) {
  const std::vector<int32_t> prompt = {0, 50, 60, 70};
  const uint64_t vocab = TestModel().config().vocab_size;
  constexpr double kTemperature = 0.1;  // peaked: the target's argmax is often kept
  auto softmax = [](const std::vector<float>& logits) {
    const double m = *std::max_element(logits.begin(), logits.end());
    std::vector<double> p(logits.size());
    double total = 0;
    for (size_t i = 0; i < p.size(); ++i) total += p[i] = std::exp((logits[i] - m) / kTemperature);
    for (double& x : p) x /= total;
    return p;
  };
  const std::vector<double> first = softmax(test_support::NextTokenLogits(TestModel(), prompt));
  std::vector<double> marginal(vocab, 0.0);
  for (uint64_t t1 = 0; t1 < vocab; ++t1) {
    std::vector<int32_t> tokens = prompt;
    tokens.push_back(static_cast<int32_t>(t1));
    const std::vector<double> second = softmax(test_support::NextTokenLogits(TestModel(), tokens));
    for (uint64_t t2 = 0; t2 < vocab; ++t2) marginal[t2] += first[t1] * second[t2];
  }

  const model::Model other = *model::Model::FromSeed(TestModel().config(), 99);
  for (const model::Model* draft : {&TestModel(), &other}) {
    SCOPED_TRACE(draft == &other ? "another model drafts" : "the target drafts");
    EngineConfig config;
    config.max_num_seqs = 64;
    config.max_num_batched_tokens = 256;
    config.speculative.draft_model = draft;
    config.speculative.acceptance = DraftAcceptance::kRejection;
    auto engine = *Engine::Create(TestModel(), config);
    constexpr uint64_t kRequests = 6000;
    std::map<RequestId, std::vector<int32_t>> tokens;
    for (uint64_t i = 0; i < kRequests; ++i) {
      RequestParams p;
      p.sampling = {kTemperature, 0, 1.0, 0.0};
      p.max_tokens = 3;  // room for a one-token draft after the first
      p.seed = 5000 + i;
      p.num_draft_tokens = 1;
      tokens[*engine.AddRequest(prompt, p)];
    }
    while (engine.HasUnfinished()) {
      auto step = engine.Step();
      ASSERT_TRUE(step.ok()) << step.status().ToString();
      for (const StepOutput& o : *step) {
        tokens[o.id].insert(tokens[o.id].end(), o.new_tokens.begin(), o.new_tokens.end());
      }
    }
    const EngineStats st = engine.stats();
    EXPECT_EQ(st.draft_tokens, kRequests);  // every second token went through the rule
    EXPECT_GT(st.draft_accepted_tokens, 0u);
    EXPECT_LT(st.draft_accepted_tokens, st.draft_tokens);
    std::vector<double> counts(vocab, 0.0);
    for (const auto& [id, t] : tokens) {
      ASSERT_EQ(t.size(), 3u);
      counts[static_cast<size_t>(t[1])] += 1;
    }
    // Bins expecting at least 5; the rest pooled.
    double chi2 = 0, pooled_count = 0, pooled_expected = 0;
    uint64_t bins = 0;
    for (uint64_t t = 0; t < vocab; ++t) {
      const double expected = marginal[t] * kRequests;
      if (expected < 5) {
        pooled_count += counts[t];
        pooled_expected += expected;
        continue;
      }
      chi2 += (counts[t] - expected) * (counts[t] - expected) / expected;
      ++bins;
    }
    if (pooled_expected > 0) {
      chi2 += (pooled_count - pooled_expected) * (pooled_count - pooled_expected) / pooled_expected;
      ++bins;
    }
    // The chi-square quantile at 1 - 1e-4 (Wilson-Hilferty; z = 3.719).
    const double df = static_cast<double>(bins - 1);
    const double h = 2.0 / (9.0 * df);
    const double critical = df * std::pow(1.0 - h + 3.719 * std::sqrt(h), 3.0);
    EXPECT_GT(bins, 10u);
    EXPECT_LT(chi2, critical) << bins << " bins, acceptance "
                              << static_cast<double>(st.draft_accepted_tokens) / kRequests;
  }

  // Greedy: the argmax stands or is taken, as plain decoding's.
  const auto prompts = Prompts();
  EngineConfig greedy_config;
  greedy_config.speculative.acceptance = DraftAcceptance::kRejection;
  auto greedy = *Engine::Create(TestModel(), greedy_config);
  EXPECT_EQ(Drive(greedy, prompts, Params(true, 4), InOrder(prompts.size())),
            Reference(prompts, Params(true, 0)));
  EXPECT_GT(greedy.stats().draft_accepted_tokens, 0u);
}

TEST(Speculative, ADraftModelMustShareTheVocabulary) {
  model::ModelConfig c = TestModel().config();
  c.vocab_size += 4;
  const model::Model wider = *model::Model::FromSeed(c, 5);
  EngineConfig config;
  config.speculative.draft_model = &wider;
  const Result<Engine> e = Engine::Create(TestModel(), config);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("vocabulary"), std::string::npos);
}

TEST(Speculative, BadSettingsAreRefused) {
  EngineConfig config;
  config.speculative.num_draft_tokens = kMaxDraftTokens + 1;
  EXPECT_EQ(Engine::Create(TestModel(), config).status().code(), StatusCode::kInvalidArgument);
  config.speculative = {2, 3, 2};
  EXPECT_EQ(Engine::Create(TestModel(), config).status().code(), StatusCode::kInvalidArgument);
  auto engine = *Engine::Create(TestModel(), {});
  RequestParams p = Params(true, kMaxDraftTokens + 1);
  EXPECT_EQ(engine.AddRequest({0, 5}, p).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace folio::engine
