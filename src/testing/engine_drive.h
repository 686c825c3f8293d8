// Test support: drive an engine to the end and record, per prompt, what a
// caller saw, so two schedules (or two engines) compare with ==.
#ifndef FOLIO_TESTING_ENGINE_DRIVE_H_
#define FOLIO_TESTING_ENGINE_DRIVE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "folio/core/splitmix64.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"

namespace folio::test_support {

// What a run produced per prompt: tokens, log-prob bits (the token's, then
// each alternative's id and bits), text and finish reason.
struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<uint32_t> logprob_bits;
  std::string text;
  engine::FinishReason finish = engine::FinishReason::kNone;
  bool operator==(const Outcome&) const = default;
};

inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Appends what one step gave a request to its outcome.
inline void Record(const engine::StepOutput& o, Outcome& r) {
  r.tokens.insert(r.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
  r.text += o.text;
  for (const auto& lp : o.logprobs) {
    r.logprob_bits.push_back(Bits(lp.logprob));
    for (const auto& [id, v] : lp.top) {
      r.logprob_bits.push_back(static_cast<uint32_t>(id));
      r.logprob_bits.push_back(Bits(v));
    }
  }
  if (o.finish != engine::FinishReason::kNone) r.finish = o.finish;
}

// Adds prompts in `order` (indices into prompts) and steps to the end.
inline std::vector<Outcome> Drive(engine::Engine& engine,
                                  const std::vector<std::vector<int32_t>>& prompts,
                                  const engine::RequestParams& params,
                                  const std::vector<size_t>& order) {
  std::map<engine::RequestId, size_t> index;
  for (size_t i : order) index[*engine.AddRequest(prompts[i], params)] = i;
  std::vector<Outcome> out(prompts.size());
  while (engine.HasUnfinished()) {
    auto step = engine.Step();
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    if (!step.ok()) break;
    for (const engine::StepOutput& o : *step) {
      EXPECT_EQ(o.logprobs.size(), params.logprobs ? o.new_tokens.size() : 0u);
      Record(o, out[index.at(o.id)]);
    }
  }
  return out;
}

// After every request finished or was aborted: the only pages in use are
// the prefix cache's, clearing it gives every page back, no sequence is
// left and the pool's refcounts are consistent.
inline void ExpectNoLeak(engine::Engine& engine) {
  const kv::PoolStats st = engine.cache().Stats();
  EXPECT_EQ(st.pages_used, st.pages_held_only);
  ASSERT_TRUE(engine.ClearPrefixCache().ok());
  EXPECT_EQ(engine.cache().Stats().pages_used, 0u);
  EXPECT_TRUE(engine.cache().pool().CheckInvariants().ok());
  EXPECT_EQ(engine.cache().num_sequences(), 0u);
  // Every request record is forgotten once its last sequence finished.
  EXPECT_EQ(engine.num_requests(), 0u);
}

// Sampled requests of 12 tokens (seed 1234), with log-probs and 3
// alternatives each, so a comparison covers the log-prob bits too.
inline engine::RequestParams SampledWithLogprobs() {
  engine::RequestParams p;
  p.sampling = {0.8, 40, 0.95, 0.0};
  p.max_tokens = 12;
  p.seed = 1234;
  p.logprobs = true;
  p.top_logprobs = 3;
  return p;
}

// The logits that follow `tokens` (the last row of their prompt logits),
// from a fresh engine: no fork, no shared page, no batch.
inline std::vector<float> NextTokenLogits(const model::Model& model,
                                          const std::vector<int32_t>& tokens) {
  engine::EngineConfig solo;
  solo.prefix_caching = false;
  engine::Engine e = *engine::Engine::Create(model, solo);
  engine::RequestParams p;
  p.max_tokens = 1;
  p.prompt_logits = true;
  EXPECT_TRUE(e.AddRequest(tokens, p).ok());
  std::vector<float> logits;
  while (e.HasUnfinished()) {
    Result<std::vector<engine::StepOutput>> step = e.Step();
    EXPECT_TRUE(step.ok());
    if (!step.ok()) break;
    for (const engine::StepOutput& o : *step) {
      logits.insert(logits.end(), o.prompt_logits.begin(), o.prompt_logits.end());
    }
  }
  const uint64_t vocab = model.config().vocab_size;
  return std::vector<float>(logits.end() - static_cast<ptrdiff_t>(vocab), logits.end());
}

// Steps to the end, handing every output to `record`. Between steps, one
// time in `abort_one_in` (a draw from rng), aborts the first of `ids` still
// unfinished. After every step the pool must be conserved and consistent.
// Returns the ids aborted.
inline std::set<engine::RequestId> DriveWithAborts(
    engine::Engine& engine, SplitMix64& rng, uint64_t abort_one_in,
    const std::vector<engine::RequestId>& ids,
    const std::function<void(const engine::StepOutput&)>& record) {
  std::set<engine::RequestId> aborted;
  while (engine.HasUnfinished()) {
    Result<std::vector<engine::StepOutput>> step = engine.Step();
    if (!step.ok()) {
      ADD_FAILURE() << step.status().ToString();
      break;
    }
    for (const engine::StepOutput& o : *step) record(o);
    if (rng.NextU64() % abort_one_in == 0) {
      for (const engine::RequestId id : ids) {
        if (aborted.count(id) == 0 && engine.Abort(id).ok()) {
          aborted.insert(id);
          break;
        }
      }
    }
    const kv::PoolStats st = engine.cache().Stats();
    EXPECT_EQ(st.pages_used + st.pages_free, st.pages_total);
    if (!engine.cache().pool().CheckInvariants().ok()) {
      ADD_FAILURE() << "pool invariants broken";
      break;
    }
  }
  return aborted;
}

inline std::vector<size_t> InOrder(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// One way to run a set of prompts, and what it must be seen to do.
struct Schedule {
  const char* name;
  engine::EngineConfig config;
  std::vector<size_t> order;  // the prompts' admission order
  ThreadPool* pool = nullptr;
  bool warm = false;      // run everything once first, so the prefix cache is full
  bool preempts = false;  // its pool is tight enough to preempt
};

// Runs the prompts on `model` under every schedule and expects each run to
// equal `want` (usually each prompt alone in a fresh engine) bit for bit.
// A warm schedule must hit the prefix cache, a preempting one must preempt,
// a speculative one must draft; no page may leak.
inline void ExpectSameUnderEverySchedule(const model::Model& model,
                                         const std::vector<std::vector<int32_t>>& prompts,
                                         const engine::RequestParams& params,
                                         const std::vector<Outcome>& want,
                                         const std::vector<Schedule>& schedules) {
  for (const Schedule& s : schedules) {
    SCOPED_TRACE(s.name);
    auto engine = *engine::Engine::Create(model, s.config, s.pool);
    if (s.warm) Drive(engine, prompts, params, s.order);
    const engine::EngineStats before = engine.stats();
    EXPECT_EQ(Drive(engine, prompts, params, s.order), want);
    const engine::EngineStats st = engine.stats();
    if (s.warm) {
      EXPECT_GT(st.prefix_hit_tokens - before.prefix_hit_tokens, 0u);
    }
    if (s.preempts) {
      EXPECT_GT(st.preemptions, 0u);
    }
    if (s.config.speculative.num_draft_tokens != 0) {
      EXPECT_GT(st.draft_tokens - before.draft_tokens, 0u);
    }
    ExpectNoLeak(engine);
  }
}

}  // namespace folio::test_support

#endif  // FOLIO_TESTING_ENGINE_DRIVE_H_
