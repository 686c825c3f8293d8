// Scheduler scenarios, without a model: the KV manager holds a one-layer,
// one-head, one-dimension pool, and a step "runs" by committing its plan
// and appending a token to every sequence that needs one.
#include "folio/engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "folio/core/checked_math.h"
#include "folio/core/splitmix64.h"

namespace folio::engine {
namespace {

// Admits everything: makes the scheduler's own room-making visible.
class AdmitAll final : public AdmissionPolicy {
 public:
  bool CanAdmit(const AdmissionQuery&) const override { return true; }
};

// Counts admissions and releases, per sequence, around another policy.
class Counting final : public AdmissionPolicy {
 public:
  explicit Counting(std::shared_ptr<AdmissionPolicy> inner) : inner_(std::move(inner)) {}
  bool CanAdmit(const AdmissionQuery& q) const override { return inner_->CanAdmit(q); }
  void OnAdmit(const Sequence& s) override {
    EXPECT_TRUE(held_.insert(s.id).second) << "admitted twice: " << s.id;
    ++admits;
  }
  void OnRelease(const Sequence& s) override {
    EXPECT_EQ(held_.erase(s.id), 1u) << "released without admission: " << s.id;
    ++releases;
  }
  uint64_t admits = 0, releases = 0;

 private:
  std::shared_ptr<AdmissionPolicy> inner_;
  std::set<RequestId> held_;
};

// A prompt of n tokens; different `salt`s give different prompts.
std::vector<int32_t> Prompt(uint64_t n, int32_t salt) {
  std::vector<int32_t> p(n);
  for (uint64_t i = 0; i < n; ++i) p[i] = salt * 1000 + static_cast<int32_t>(i);
  return p;
}

class SchedulerTest : public ::testing::Test {
 protected:
  struct Options {
    uint64_t num_pages = 16;
    uint64_t page_size = 4;
    uint64_t max_num_batched_tokens = 64;
    uint64_t max_num_seqs = 4;
    uint64_t watermark_pages = 0;
    bool prefix_caching = true;
    std::shared_ptr<AdmissionPolicy> policy = nullptr;  // default: WatermarkAdmission
  };

  void Make(Options o) {
    kv::PagedKvCacheConfig kc;
    kc.num_layers = 1;
    kc.num_kv_heads = 1;
    kc.head_dim = 1;
    kc.page_size = o.page_size;
    kc.num_pages = o.num_pages;
    kv_ = std::make_unique<KvCacheManager>(*KvCacheManager::Create(kc, o.prefix_caching));
    auto inner = o.policy ? o.policy : std::make_shared<WatermarkAdmission>(o.watermark_pages);
    policy_ = std::make_shared<Counting>(inner);
    sched_ = std::make_unique<Scheduler>(SchedulerConfig{o.max_num_batched_tokens, o.max_num_seqs},
                                         kv_.get(), policy_);
  }

  RequestId Add(std::vector<int32_t> prompt, uint64_t max_tokens) {
    Sequence s;
    s.id = next_id_++;
    s.num_prompt_tokens = prompt.size();
    s.max_tokens = max_tokens;
    s.tokens = std::move(prompt);
    sched_->AddWaiting(std::move(s));
    return next_id_ - 1;
  }

  // Plans and commits one step; every sequence whose tokens are all in the
  // cache gets a token, and those at max_tokens finish (their ids go to
  // finished_). Returns the plan, without its AppendPlan.
  SchedulerOutput Step() {
    Result<SchedulerOutput> out = sched_->Schedule();
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok()) return {};
    EXPECT_TRUE(sched_->Commit(*out).ok());
    for (const ScheduledSequence& p : out->scheduled) {
      const Sequence& s = sched_->sequence(p.id);
      if (s.num_pending() != 0) continue;
      sched_->AppendToken(p.id, static_cast<int32_t>(7 + s.num_output_tokens()));
      if (sched_->sequence(p.id).num_output_tokens() == s.max_tokens) {
        sched_->Finish(p.id);
        finished_.push_back(p.id);
      }
    }
    out->plan.reset();
    CheckConservation();
    return std::move(*out);
  }

  void RunToEnd() {
    for (int i = 0; i < 1000 && sched_->HasUnfinished(); ++i) Step();
    EXPECT_FALSE(sched_->HasUnfinished());
  }

  // Running sequences hold pages, waiting ones none; the pool holds
  // exactly the running sequences' pages and the cached ones.
  void CheckConservation() {
    const kv::PagedKvCache& cache = kv_->cache();
    ASSERT_TRUE(cache.pool().CheckInvariants().ok());
    std::set<kv::PageId> pages;
    for (const RequestId id : sched_->running()) {
      const Sequence& s = sched_->sequence(id);
      ASSERT_TRUE(s.seq.has_value()) << "running request " << id << " holds no pages";
      const auto table = cache.block_table(*s.seq);
      pages.insert(table.begin(), table.end());
      EXPECT_EQ(cache.length(*s.seq), s.num_computed);
    }
    for (const RequestId id : sched_->waiting()) {
      EXPECT_FALSE(sched_->sequence(id).seq.has_value()) << "waiting request " << id;
    }
    EXPECT_EQ(cache.pool().num_used(), pages.size() + kv_->num_cached_pages());
    EXPECT_EQ(cache.num_sequences(), sched_->num_running());
  }

  static std::vector<RequestId> Ids(const SchedulerOutput& out) {
    std::vector<RequestId> ids;
    for (const ScheduledSequence& p : out.scheduled) ids.push_back(p.id);
    return ids;
  }
  static uint64_t TokensOf(const SchedulerOutput& out, RequestId id) {
    for (const ScheduledSequence& p : out.scheduled) {
      if (p.id == id) return p.num_tokens;
    }
    return 0;
  }
  uint64_t Free() const { return kv_->cache().pool().num_free(); }

  // Two requests of 7 tokens and 12 outputs in a pool of 5 pages of 4: both
  // are admitted (2 pages each) and, at position 8, both need a third; the
  // younger is preempted. Returns the plans of the steps until then.
  struct TwoRequests {
    RequestId old, young;
    std::vector<RequestId> preempted;  // by the step that preempted
  };
  TwoRequests RunUntilPreempted() {
    Make({.num_pages = 5, .prefix_caching = false});
    TwoRequests t{Add(Prompt(7, 1), 12), Add(Prompt(7, 2), 12), {}};
    Step();
    EXPECT_EQ(sched_->num_running(), 2u);
    for (int i = 0; i < 12 && t.preempted.empty(); ++i) t.preempted = Step().preempted;
    return t;
  }

  std::unique_ptr<KvCacheManager> kv_;
  std::shared_ptr<Counting> policy_;
  std::unique_ptr<Scheduler> sched_;
  std::vector<RequestId> finished_;
  RequestId next_id_ = 0;
};

TEST_F(SchedulerTest, NothingWaitingPlansNothing) {
  Make({});
  Result<SchedulerOutput> out = sched_->Schedule();
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->empty());
  EXPECT_FALSE(out->plan.has_value());
  EXPECT_EQ(Free(), 16u);
}

TEST_F(SchedulerTest, AShortPromptIsPrefilledInOneStep) {
  Make({});
  const RequestId a = Add(Prompt(6, 1), 3);
  const SchedulerOutput out = Step();
  ASSERT_EQ(Ids(out), std::vector<RequestId>{a});
  EXPECT_TRUE(out.scheduled[0].admitted_now);
  EXPECT_EQ(out.scheduled[0].num_tokens, 6u);
  EXPECT_EQ(out.token_ids, Prompt(6, 1));
  EXPECT_EQ(sched_->sequence(a).num_output_tokens(), 1u);
  EXPECT_EQ(sched_->num_running(), 1u);
  EXPECT_EQ(Free(), 16u - 2u);
}

TEST_F(SchedulerTest, DecodeStepsFeedTheLastGeneratedToken) {
  Make({});
  const RequestId a = Add(Prompt(3, 1), 3);
  Step();
  const SchedulerOutput out = Step();
  ASSERT_EQ(Ids(out), std::vector<RequestId>{a});
  EXPECT_EQ(out.scheduled[0].num_tokens, 1u);
  EXPECT_FALSE(out.scheduled[0].admitted_now);
  EXPECT_EQ(out.token_ids, std::vector<int32_t>{7});
}

TEST_F(SchedulerTest, RequestFinishesAtMaxTokensAndFreesItsPagesThatStep) {
  Make({.prefix_caching = false});
  const RequestId a = Add(Prompt(5, 1), 2);
  Step();
  EXPECT_LT(Free(), 16u);
  Step();
  EXPECT_EQ(finished_, std::vector<RequestId>{a});
  EXPECT_FALSE(sched_->HasUnfinished());
  EXPECT_EQ(Free(), 16u);
}

TEST_F(SchedulerTest, LongPromptIsChunkedAtTheTokenBudget) {
  Make({.max_num_batched_tokens = 8});
  const RequestId a = Add(Prompt(20, 1), 2);
  std::vector<uint64_t> chunks;
  std::vector<int32_t> fed;
  for (int i = 0; i < 3; ++i) {
    const SchedulerOutput out = Step();
    chunks.push_back(TokensOf(out, a));
    fed.insert(fed.end(), out.token_ids.begin(), out.token_ids.end());
  }
  EXPECT_EQ(chunks, (std::vector<uint64_t>{8, 8, 4}));
  EXPECT_EQ(fed, Prompt(20, 1));  // each chunk resumes where the last stopped
  EXPECT_EQ(sched_->sequence(a).num_output_tokens(), 1u);  // only after the last chunk
}

TEST_F(SchedulerTest, NoTokenIsSampledBeforeThePromptIsIn) {
  Make({.max_num_batched_tokens = 4});
  const RequestId a = Add(Prompt(9, 1), 2);
  Step();
  EXPECT_EQ(sched_->sequence(a).num_output_tokens(), 0u);
  EXPECT_EQ(sched_->sequence(a).num_computed, 4u);
  Step();
  EXPECT_EQ(sched_->sequence(a).num_output_tokens(), 0u);
  Step();
  EXPECT_EQ(sched_->sequence(a).num_output_tokens(), 1u);
}

TEST_F(SchedulerTest, DecodesComeFirstThenPromptChunksThenAdmissions) {
  Make({.max_num_batched_tokens = 8});
  const RequestId decoding = Add(Prompt(2, 1), 10);
  Step();
  const RequestId chunked = Add(Prompt(12, 2), 10);
  Step();  // decoding: 1 token; chunked: 7 of its 12
  const RequestId fresh = Add(Prompt(3, 3), 10);
  const SchedulerOutput out = Step();
  EXPECT_EQ(Ids(out), (std::vector<RequestId>{decoding, chunked, fresh}));
  EXPECT_EQ(TokensOf(out, decoding), 1u);
  EXPECT_EQ(TokensOf(out, chunked), 5u);
  EXPECT_EQ(TokensOf(out, fresh), 2u);  // what the budget leaves
}

TEST_F(SchedulerTest, TheBudgetBoundsEveryStep) {
  Make({.max_num_batched_tokens = 6, .max_num_seqs = 4});
  for (int32_t i = 0; i < 4; ++i) Add(Prompt(5, i + 1), 4);
  while (sched_->HasUnfinished()) {
    const SchedulerOutput out = Step();
    uint64_t tokens = 0;
    for (const ScheduledSequence& p : out.scheduled) tokens += p.num_tokens;
    EXPECT_LE(tokens, 6u);
    EXPECT_EQ(tokens, out.token_ids.size());
  }
}

TEST_F(SchedulerTest, MaxNumSeqsCapsTheRunningSet) {
  Make({.max_num_seqs = 2});
  for (int32_t i = 0; i < 4; ++i) Add(Prompt(3, i + 1), 5);
  Step();
  EXPECT_EQ(sched_->num_running(), 2u);
  EXPECT_EQ(sched_->num_waiting(), 2u);
  while (sched_->HasUnfinished()) {
    Step();
    EXPECT_LE(sched_->num_running(), 2u);
  }
  EXPECT_EQ(sched_->stats().peak_running, 2u);
}

TEST_F(SchedulerTest, WaitingRequestsAreAdmittedFirstComeFirstServed) {
  Make({.max_num_seqs = 1});
  const RequestId a = Add(Prompt(3, 1), 1);
  const RequestId b = Add(Prompt(3, 2), 1);
  const RequestId c = Add(Prompt(3, 3), 1);
  RunToEnd();
  EXPECT_EQ(finished_, (std::vector<RequestId>{a, b, c}));
}

TEST_F(SchedulerTest, TheHeadOfTheQueueIsNeverOvertaken) {
  Make({.num_pages = 8, .prefix_caching = false});
  const RequestId running = Add(Prompt(16, 1), 8);  // 4 pages now, 6 at the end
  Step();
  const RequestId big = Add(Prompt(20, 2), 1);   // 5 pages: does not fit yet
  const RequestId small = Add(Prompt(2, 3), 1);  // 1 page: would fit
  const SchedulerOutput out = Step();
  EXPECT_EQ(Ids(out), std::vector<RequestId>{running});
  EXPECT_EQ(sched_->waiting().front(), big);
  EXPECT_EQ(sched_->waiting().back(), small);
  RunToEnd();
  EXPECT_LT(std::find(finished_.begin(), finished_.end(), big),
            std::find(finished_.begin(), finished_.end(), small));
}

TEST_F(SchedulerTest, AdmissionWaitsUntilTheWholePendingPrefillFits) {
  // A 24-token prompt needs 6 pages, fed 4 tokens a step: admitted on its
  // first chunk alone it would be preempted as the other grows.
  Make({.num_pages = 8, .max_num_batched_tokens = 4, .prefix_caching = false});
  Add(Prompt(8, 1), 3);  // 2 pages
  Step();
  Step();
  const RequestId big = Add(Prompt(24, 2), 1);
  const SchedulerOutput out = Step();
  EXPECT_EQ(TokensOf(out, big), 0u);
  EXPECT_EQ(sched_->waiting().front(), big);
}

TEST_F(SchedulerTest, ARequestAloneIsAdmittedWhateverTheWatermark) {
  Make({.num_pages = 4, .watermark_pages = 4});
  const RequestId a = Add(Prompt(10, 1), 2);
  const SchedulerOutput out = Step();
  EXPECT_EQ(Ids(out), std::vector<RequestId>{a});
}

TEST_F(SchedulerTest, TheWatermarkKeepsFreePagesBackFromAdmission) {
  for (const uint64_t watermark : {0u, 6u}) {
    SCOPED_TRACE(watermark);
    finished_.clear();
    Make({.num_pages = 10, .watermark_pages = watermark, .prefix_caching = false});
    Add(Prompt(8, 1), 4);  // 2 pages
    Step();
    const RequestId second = Add(Prompt(8, 2), 4);  // 2 more: leaves 6 free
    const SchedulerOutput out = Step();
    EXPECT_EQ(TokensOf(out, second), watermark == 0 ? 8u : 0u);
  }
}

TEST_F(SchedulerTest, APrefixHitStartsAfterTheCachedPages) {
  Make({});
  Add(Prompt(10, 1), 1);  // caches pages [0, 4) and [4, 8)
  RunToEnd();
  std::vector<int32_t> p = Prompt(10, 1);
  p.push_back(99);
  const RequestId b = Add(p, 1);
  const SchedulerOutput out = Step();
  EXPECT_EQ(TokensOf(out, b), 3u);
  EXPECT_EQ(out.scheduled[0].prefix_hit_tokens, 8u);
  EXPECT_EQ(out.scheduled[0].prefix_query_tokens, 8u);
  EXPECT_EQ(out.token_ids, (std::vector<int32_t>{1008, 1009, 99}));
}

TEST_F(SchedulerTest, APrefixHitNeverCoversTheLastToken) {
  Make({});
  Add(Prompt(8, 1), 1);  // two full pages
  RunToEnd();
  const RequestId b = Add(Prompt(8, 1), 1);  // the same prompt again
  const SchedulerOutput out = Step();
  // The last token must be computed for its logits, so only the first page
  // is reused.
  EXPECT_EQ(out.scheduled[0].prefix_hit_tokens, 4u);
  EXPECT_EQ(TokensOf(out, b), 4u);
}

TEST_F(SchedulerTest, WithoutPrefixCachingNothingIsReused) {
  Make({.prefix_caching = false});
  Add(Prompt(10, 1), 1);
  RunToEnd();
  EXPECT_EQ(Free(), 16u);
  const RequestId b = Add(Prompt(10, 1), 1);
  const SchedulerOutput out = Step();
  EXPECT_EQ(TokensOf(out, b), 10u);
  EXPECT_EQ(out.scheduled[0].prefix_hit_tokens, 0u);
}

TEST_F(SchedulerTest, PrefixStatsCountQueryAndHitTokensAtAdmission) {
  Make({});
  Add(Prompt(9, 1), 1);
  RunToEnd();
  Add(Prompt(9, 1), 1);
  RunToEnd();
  // Each query is the whole pages before the last token: 8 tokens; the
  // second hit both pages.
  EXPECT_EQ(sched_->stats().prefix_query_tokens, 16u);
  EXPECT_EQ(sched_->stats().prefix_hit_tokens, 8u);
  EXPECT_EQ(sched_->stats().prompt_tokens_computed, 9u + 1u);
}

TEST_F(SchedulerTest, FinishedRequestsLeaveTheirFullPagesCached) {
  Make({});
  Add(Prompt(10, 1), 1);
  RunToEnd();
  EXPECT_EQ(kv_->num_cached_pages(), 2u);  // the tail page was partial
  EXPECT_EQ(Free(), 14u);
  EXPECT_EQ(kv_->NumAvailablePages(), 16u);
}

TEST_F(SchedulerTest, CachedPagesAreEvictedBeforeAnythingIsPreempted) {
  Make({.num_pages = 8});
  Add(Prompt(16, 1), 1);  // leaves 4 cached pages
  RunToEnd();
  ASSERT_EQ(kv_->num_cached_pages(), 4u);
  Add(Prompt(8, 2), 2);  // 2 pages, then 3
  Add(Prompt(4, 3), 2);  // 1 page, then 2: the second step must evict
  RunToEnd();
  EXPECT_EQ(sched_->stats().preemptions, 0u);
  EXPECT_GT(kv_->num_evictions(), 0u);
}

// A beam search's group waits whole (as after its preemption): room for
// one member is not enough; it is admitted when there is room for both.
TEST_F(SchedulerTest, ALockstepGroupIsAdmittedWholeOrNotAtAll) {
  Make({.num_pages = 5, .prefix_caching = false});
  const RequestId plain = Add(Prompt(11, 9), 2);  // 3 pages, done after two steps
  Step();
  std::vector<RequestId> group;
  for (int32_t salt : {1, 2}) {
    Sequence s;
    s.id = next_id_++;
    s.tokens = Prompt(8, salt);  // 2 pages each
    s.num_prompt_tokens = 7;
    s.max_tokens = 2;  // done once recomputed: a group that fits the pool
    s.lockstep = true;
    if (!group.empty()) s.group = group.front();
    group.push_back(s.id);
    sched_->AddWaiting(std::move(s));
  }
  // Two pages are free: one member would fit, so neither is admitted.
  EXPECT_EQ(Ids(Step()), std::vector<RequestId>{plain});
  EXPECT_EQ(sched_->num_waiting(), 2u);
  ASSERT_EQ(finished_, std::vector<RequestId>{plain});
  EXPECT_EQ(Ids(Step()), group);  // the plain request's pages came back: both at once
  RunToEnd();
}

TEST_F(SchedulerTest, PreemptionTakesTheMostRecentlyAdmittedFirst) {
  const auto [old, young, preempted] = RunUntilPreempted();
  EXPECT_EQ(preempted, std::vector<RequestId>{young});
  EXPECT_EQ(sched_->waiting().front(), young);
  EXPECT_EQ(sched_->running().front(), old);
  EXPECT_EQ(sched_->stats().preemptions, 1u);
}

TEST_F(SchedulerTest, APreemptedRequestRecomputesItsGeneratedTokensToo) {
  const RequestId young = RunUntilPreempted().young;
  ASSERT_GT(sched_->stats().preemptions, 0u);
  const Sequence& s = sched_->sequence(young);
  EXPECT_EQ(s.num_computed, 0u);
  EXPECT_GT(s.num_output_tokens(), 0u);
  EXPECT_EQ(s.num_pending(), s.tokens.size());  // prompt and output alike
  RunToEnd();
  EXPECT_EQ(finished_.size(), 2u);
}

TEST_F(SchedulerTest, APreemptedRequestComesBackThroughThePrefixCache) {
  // Both take 3 pages of 7; at position 12 both need a fourth, and the
  // young one is preempted with its three full pages cached.
  Make({.num_pages = 7});
  Add(Prompt(9, 1), 6);
  const RequestId young = Add(Prompt(9, 2), 14);
  Step();
  SchedulerOutput out;
  for (int i = 0; i < 14 && out.preempted.empty(); ++i) out = Step();
  ASSERT_EQ(out.preempted, std::vector<RequestId>{young});
  const uint64_t hits = sched_->stats().prefix_hit_tokens;
  RunToEnd();
  EXPECT_GT(sched_->stats().prefix_hit_tokens, hits);
}

TEST_F(SchedulerTest, NewAdmissionsAreShedBeforeRunningSequencesArePreempted) {
  // A policy that admits everything over-commits; the scheduler undoes the
  // newest admissions rather than preempting.
  Make({.num_pages = 4, .prefix_caching = false, .policy = std::make_shared<AdmitAll>()});
  const RequestId a = Add(Prompt(7, 1), 4);  // 2 pages; its next token fits
  Step();
  const RequestId b = Add(Prompt(8, 2), 4);  // 2 pages: fits
  const RequestId c = Add(Prompt(8, 3), 4);  // does not
  const SchedulerOutput out = Step();
  EXPECT_EQ(Ids(out), (std::vector<RequestId>{a, b}));
  EXPECT_TRUE(out.preempted.empty());
  EXPECT_EQ(sched_->waiting().front(), c);
  EXPECT_FALSE(sched_->sequence(c).seq.has_value());
  EXPECT_EQ(policy_->admits - policy_->releases, 2u);
}

TEST_F(SchedulerTest, AbandonLeavesEveryQueueAndPageAsBefore) {
  Make({.max_num_batched_tokens = 8});
  const RequestId a = Add(Prompt(12, 1), 4);
  Step();  // a: 8 of 12
  const RequestId b = Add(Prompt(3, 2), 4);
  const uint64_t free_before = Free();
  const std::vector<kv::PageId> free_list = kv_->cache().pool().free_list();
  Result<SchedulerOutput> out = sched_->Schedule();
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(Ids(*out), (std::vector<RequestId>{a, b}));
  sched_->Abandon(std::move(*out));
  EXPECT_EQ(Free(), free_before);
  EXPECT_TRUE(free_list == kv_->cache().pool().free_list());
  EXPECT_EQ(sched_->sequence(a).num_computed, 8u);
  EXPECT_EQ(sched_->waiting().front(), b);
  EXPECT_FALSE(sched_->sequence(b).seq.has_value());
  EXPECT_EQ(policy_->admits - policy_->releases, 1u);
  CheckConservation();
  // And the same step can then run.
  const SchedulerOutput again = Step();
  EXPECT_EQ(Ids(again), (std::vector<RequestId>{a, b}));
}

TEST_F(SchedulerTest, AbortingAWaitingRequestRemovesIt) {
  Make({.max_num_seqs = 1});
  Add(Prompt(3, 1), 4);
  const RequestId b = Add(Prompt(3, 2), 4);
  Step();
  sched_->Finish(b);
  EXPECT_FALSE(sched_->Contains(b));
  EXPECT_EQ(sched_->num_waiting(), 0u);
  CheckConservation();
}

TEST_F(SchedulerTest, AbortingARunningRequestFreesItsPagesAtOnce) {
  Make({.prefix_caching = false});
  const RequestId a = Add(Prompt(9, 1), 10);
  Step();
  Step();
  EXPECT_EQ(Free(), 13u);
  sched_->Finish(a);
  EXPECT_EQ(Free(), 16u);
  EXPECT_FALSE(sched_->HasUnfinished());
  EXPECT_EQ(policy_->admits, policy_->releases);
}

TEST_F(SchedulerTest, AbortingMidPrefillFreesThePartialPrompt) {
  Make({.max_num_batched_tokens = 4, .prefix_caching = false});
  const RequestId a = Add(Prompt(14, 1), 2);
  Step();
  Step();
  ASSERT_EQ(sched_->sequence(a).num_computed, 8u);
  sched_->Finish(a);
  EXPECT_EQ(Free(), 16u);
  CheckConservation();
}

TEST_F(SchedulerTest, AbortingAPreemptedRequestReleasesItOnce) {
  const auto [old, young, preempted] = RunUntilPreempted();
  ASSERT_EQ(preempted, std::vector<RequestId>{young});
  sched_->Finish(young);
  EXPECT_EQ(sched_->num_waiting(), 0u);
  RunToEnd();
  EXPECT_EQ(policy_->admits, policy_->releases);
  EXPECT_EQ(Free(), 5u);
}

TEST_F(SchedulerTest, PagesFreedByAFinishAreAdmittedTheNextStep) {
  Make({.num_pages = 3, .prefix_caching = false});
  const RequestId a = Add(Prompt(8, 1), 2);  // 2 pages, then 3
  const RequestId b = Add(Prompt(8, 2), 1);  // 2 pages
  Step();
  EXPECT_EQ(sched_->num_waiting(), 1u);
  Step();  // a finishes here
  EXPECT_EQ(finished_, std::vector<RequestId>{a});
  const SchedulerOutput out = Step();
  EXPECT_EQ(Ids(out), std::vector<RequestId>{b});
}

TEST_F(SchedulerTest, ImportedSequencesJoinAsTheMostRecentlyAdmitted) {
  Make({.prefix_caching = false});
  const RequestId a = Add(Prompt(5, 1), 4);
  Step();
  Result<std::vector<kv::PageId>> pages = kv_->HoldNewPages(2);
  ASSERT_TRUE(pages.ok());
  Sequence imported;
  imported.id = 100;
  imported.tokens = Prompt(6, 2);
  imported.num_prompt_tokens = 6;
  imported.max_tokens = 3;
  imported.num_computed = 5;
  imported.seq = *kv_->AdoptSequence(std::vector<std::vector<kv::PageId>>{*pages}, 5);
  for (const kv::PageId p : *pages) kv_->DropPage(p);
  sched_->AddRunning(std::move(imported));
  EXPECT_EQ(sched_->running().back(), 100u);
  const SchedulerOutput out = Step();
  EXPECT_EQ(Ids(out), (std::vector<RequestId>{a, 100u}));
  EXPECT_EQ(TokensOf(out, 100), 1u);
  RunToEnd();
  EXPECT_EQ(Free(), 16u);
}

TEST_F(SchedulerTest, StatsSeparatePromptTokensFromDecodeTokens) {
  Make({.prefix_caching = false});
  Add(Prompt(6, 1), 4);
  Add(Prompt(3, 2), 2);
  RunToEnd();
  EXPECT_EQ(sched_->stats().prompt_tokens_computed, 9u);
  EXPECT_EQ(sched_->stats().decode_tokens, 3u + 1u);  // the first token comes with the prompt
}

TEST_F(SchedulerTest, EveryAdmissionIsReleasedExactlyOnce) {
  Make({.num_pages = 6, .max_num_batched_tokens = 5, .max_num_seqs = 3});
  for (int32_t i = 0; i < 6; ++i) Add(Prompt(4 + static_cast<uint64_t>(i), i % 2 + 1), 6);
  RunToEnd();
  EXPECT_GT(sched_->stats().preemptions, 0u);
  EXPECT_EQ(policy_->admits, policy_->releases);
  EXPECT_EQ(finished_.size(), 6u);
}

// Property: random arrivals, lengths, aborts and pool sizes; conservation
// holds after every step (CheckConservation), every request ends, and the
// pool is whole again once the prefix cache is cleared.
TEST_F(SchedulerTest, RandomWorkloadsConservePagesAndFinish) {
  SplitMix64 rng(42);
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE(trial);
    finished_.clear();
    const uint64_t page_size = 1 + rng.NextU64() % 5;
    const uint64_t max_len = 24;
    Make({.num_pages = CeilDiv(max_len, page_size) + rng.NextU64() % 12,
          .page_size = page_size,
          .max_num_batched_tokens = 4 + rng.NextU64() % 16,
          .max_num_seqs = 1 + rng.NextU64() % 4,
          .watermark_pages = rng.NextU64() % 2,
          .prefix_caching = rng.NextU64() % 2 == 0});
    uint64_t added = 0, aborted = 0;
    for (int step = 0; step < 3000 && (added < 12 || sched_->HasUnfinished()); ++step) {
      if (added < 12 && rng.NextU64() % 2 == 0) {
        const uint64_t len = 1 + rng.NextU64() % 12;
        Add(Prompt(len, static_cast<int32_t>(rng.NextU64() % 3)),
            1 + rng.NextU64() % (max_len - len));
        ++added;
      }
      if (sched_->HasUnfinished() && rng.NextU64() % 10 == 0) {
        const bool from_running = sched_->num_running() > 0 && rng.NextU64() % 2 == 0;
        if (from_running || sched_->num_waiting() > 0) {
          sched_->Finish(from_running ? sched_->running()[rng.NextU64() % sched_->num_running()]
                                      : sched_->waiting().back());
          ++aborted;
          CheckConservation();
        }
      }
      if (sched_->HasUnfinished()) Step();
    }
    EXPECT_FALSE(sched_->HasUnfinished());
    EXPECT_EQ(finished_.size() + aborted, added);
    EXPECT_EQ(policy_->admits, policy_->releases);
    ASSERT_TRUE(kv_->ClearPrefixCache().ok());
    EXPECT_EQ(Free(), kv_->num_pages());
  }
}

}  // namespace
}  // namespace folio::engine
