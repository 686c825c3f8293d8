// The engine on a model with sliding-window layers, whose KV pages go back
// to the pool as requests grow (kv::PagedKvCache, "Layer groups"): tokens
// and log-probs stay the same bits under every schedule, prefix caching,
// preemption, speculative decoding and snapshots, while the windowed
// layers hold only their windows.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "folio/core/checked_math.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"
#include "folio/format/kv_snapshot.h"
#include "testing/engine_drive.h"
#include "testing/test_model.h"

namespace folio::engine {
namespace {

using test_support::Drive;
using test_support::ExpectNoLeak;
using test_support::ExpectSameUnderEverySchedule;
using test_support::InOrder;
using test_support::Outcome;
using test_support::SampledWithLogprobs;
using test_support::SharedStemPrompts;

constexpr uint64_t kWindow = 5;

// The test model's shape with four layers: windowed, global, windowed,
// global (two layer groups of two layers), each kind with its RoPE base.
const model::Model& WindowedModel() {
  static const model::Model* m = [] {
    model::ModelConfig c = model::WorkedExampleConfig();
    c.max_positions = 128;
    c.num_layers = 4;
    c.window = kWindow;
    const model::LayerConfig local{kWindow, 10.0, {}}, global{0, 10000.0, {}};
    c.layers = {local, global, local, global};
    return new model::Model(*model::Model::FromSeed(c, 17));
  }();
  return *m;
}

std::vector<StepOutput> StepOk(Engine& engine) {
  Result<std::vector<StepOutput>> outs = engine.Step();
  EXPECT_TRUE(outs.ok()) << outs.status().ToString();
  return outs.ok() ? std::move(*outs) : std::vector<StepOutput>();
}

TEST(SlidingWindow, TokensAndLogprobsAreTheSameUnderEverySchedule) {
  const auto prompts = SharedStemPrompts();
  RequestParams params = SampledWithLogprobs();
  params.max_tokens = 20;
  EngineConfig solo;
  solo.prefix_caching = false;
  solo.page_size = 2;
  std::vector<Outcome> want;
  for (const auto& p : prompts) {
    auto e = *Engine::Create(WindowedModel(), solo);
    EXPECT_EQ(e.cache().num_groups(), 2u);
    want.push_back(Drive(e, {p}, params, {0})[0]);
    EXPECT_EQ(want.back().tokens.size(), 20u);
  }
  std::vector<size_t> reversed = InOrder(prompts.size());
  std::reverse(reversed.begin(), reversed.end());
  ThreadPool two(2);
  EngineConfig base;
  base.page_size = 2;
  EngineConfig chunks = base;
  chunks.page_size = 3;
  chunks.max_num_batched_tokens = 5;
  chunks.max_num_seqs = 2;
  EngineConfig tight = base;
  tight.num_pages = 56;
  tight.max_num_batched_tokens = 8;  // a windowed group then holds at most 13 pages
  EngineConfig ngram = base;
  ngram.speculative.num_draft_tokens = 4;
  ngram.speculative.ngram_min = 1;
  EngineConfig drafted = base;
  drafted.speculative.num_draft_tokens = 3;
  drafted.speculative.draft_model = &WindowedModel();  // drafts every token right
  const std::vector<size_t> in_order = InOrder(prompts.size());
  ExpectSameUnderEverySchedule(WindowedModel(), prompts, params, want,
                               {{"batched", base, in_order},
                                {"chunks of 5, pages of 3", chunks, reversed},
                                {"warm prefix cache", base, in_order, nullptr, true},
                                {"warm, chunks of 5", chunks, reversed, nullptr, true},
                                {"preempting", tight, in_order, nullptr, false, true},
                                {"two threads", base, reversed, &two},
                                {"prompt-lookup drafts", ngram, in_order},
                                {"a windowed draft model", drafted, reversed}});
  // Greedy, a windowed draft model of the same weights is always right: its
  // drafts are accepted, and the tokens are plain decoding's.
  RequestParams greedy = params;
  greedy.sampling = {0.0, 0, 1.0, 0.0};
  auto plain = *Engine::Create(WindowedModel(), solo);
  auto speculative = *Engine::Create(WindowedModel(), drafted);
  EXPECT_EQ(Drive(speculative, prompts, greedy, InOrder(prompts.size())),
            Drive(plain, prompts, greedy, InOrder(prompts.size())));
  EXPECT_GT(speculative.stats().draft_accepted_tokens, 0u);
  ExpectNoLeak(speculative);
}

// One long request: after every step its windowed group holds at most the
// window's pages (plus the steps' tokens), the global group all of them.
TEST(SlidingWindow, WindowedLayersHoldOnlyTheirWindowsPages) {
  EngineConfig config;
  config.page_size = 2;
  config.max_num_batched_tokens = 8;
  auto engine = *Engine::Create(WindowedModel(), config);
  std::vector<int32_t> prompt;
  for (int32_t t = 0; t < 60; ++t) prompt.push_back(2 + (t * 29) % 250);
  RequestParams params = SampledWithLogprobs();
  params.max_tokens = 40;
  ASSERT_TRUE(engine.AddRequest(prompt, params).ok());
  const uint64_t window_pages = CeilDiv(kWindow + 2 * 8, 2) + 2;
  uint64_t most = 0, last = 0;
  while (engine.HasUnfinished()) {
    ASSERT_TRUE(engine.Step().ok());
    const kv::PoolStats st = engine.cache().Stats();
    if (engine.HasUnfinished()) last = st.pages_used - st.pages_held_only;  // the request's
    most = std::max(most, last);
  }
  // At most 99 tokens: 50 global pages, and the window's few; with every
  // layer global it would be 2 * 50.
  EXPECT_LE(most, 50 + window_pages);
  EXPECT_GE(last, 49u);
  ExpectNoLeak(engine);
}

// A snapshot of windowed requests: the window's released pages leave as
// zeros and are not taken back on import, and the requests continue with
// the same bits.
TEST(SlidingWindow, SnapshotsMoveWindowedRequestsBitIdentically) {
  auto prompts = SharedStemPrompts();
  RequestParams params = SampledWithLogprobs();
  params.max_tokens = 16;
  EngineConfig config;
  config.page_size = 2;
  config.max_num_batched_tokens = 16;
  auto reference = *Engine::Create(WindowedModel(), config);
  const std::vector<Outcome> want = Drive(reference, prompts, params, InOrder(prompts.size()));

  auto sender = *Engine::Create(WindowedModel(), config);
  std::vector<RequestId> ids;
  std::map<RequestId, size_t> sender_index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ids.push_back(*sender.AddRequest(prompts[i], params));
    sender_index[ids.back()] = i;
  }
  std::vector<Outcome> got(prompts.size());
  for (int step = 0; step < 8; ++step) {
    for (const StepOutput& o : StepOk(sender)) test_support::Record(o, got[sender_index[o.id]]);
  }
  std::vector<RequestId> moving;
  std::vector<size_t> moving_index;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (got[i].finish == FinishReason::kNone &&
        sender.ExportSnapshot(std::vector<RequestId>{ids[i]}).ok()) {
      moving.push_back(ids[i]);
      moving_index.push_back(i);
    }
  }
  ASSERT_GE(moving.size(), 3u);
  auto snapshot = sender.ExportSnapshot(moving);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
  auto decoded = format::DecodeSnapshot(format::EncodeSnapshot(*snapshot));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EngineConfig other = config;
  other.num_pages = 300;
  auto receiver = *Engine::Create(WindowedModel(), other);
  const uint64_t free_before = receiver.cache().pool().num_free();
  auto imported = receiver.ImportSnapshot(*decoded);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  // Fewer pages than the snapshot's pages in every group: the window's
  // early ones stay in the pool.
  EXPECT_LT(free_before - receiver.cache().pool().num_free(),
            decoded->num_pages * receiver.cache().num_groups());
  std::map<RequestId, size_t> receiver_index;
  for (size_t k = 0; k < moving.size(); ++k) {
    receiver_index[(*imported)[k]] = moving_index[k];
    ASSERT_TRUE(sender.Abort(moving[k]).ok());
  }
  while (receiver.HasUnfinished()) {
    for (const StepOutput& o : StepOk(receiver)) {
      test_support::Record(o, got[receiver_index.at(o.id)]);
    }
  }
  while (sender.HasUnfinished()) {
    for (const StepOutput& o : StepOk(sender)) test_support::Record(o, got[sender_index[o.id]]);
  }
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], want[i]) << "prompt " << i;
  ExpectNoLeak(sender);
  ExpectNoLeak(receiver);
}

}  // namespace
}  // namespace folio::engine
