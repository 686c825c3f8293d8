#include "folio/server/engine_loop.h"

#include <gtest/gtest.h>

#include "folio/tokenizer/byte_tokenizer.h"
#include "testing/test_model.h"

namespace folio::server {
namespace {

using std::chrono::milliseconds;

using test_support::TestModel;

engine::Engine MakeEngine(uint64_t max_num_seqs = 4, uint64_t num_pages = 32) {
  engine::EngineConfig c;
  c.page_size = 4;
  c.num_pages = num_pages;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = 32;
  return *engine::Engine::Create(TestModel(), c, nullptr, &tokenizer::ByteTokenizer::AsTokenizer());
}

engine::RequestParams Params(uint64_t max_tokens) {
  engine::RequestParams p;
  p.sampling = {0.8, 40, 0.95, 0.0};
  p.max_tokens = max_tokens;
  p.seed = 99;
  return p;
}

const std::vector<int32_t> kPrompt = {0, 99, 100, 101, 102, 103, 104};

// Events until one finishes the request (or fails it).
std::vector<Event> UntilDone(Channel& ch) {
  std::vector<Event> all;
  for (;;) {
    std::vector<Event> got;
    EXPECT_TRUE(ch.Wait(got, milliseconds(10000)));
    for (Event& e : got) {
      const bool last = e.kind == Event::Kind::kError || e.finish != engine::FinishReason::kNone;
      all.push_back(std::move(e));
      if (last) return all;
    }
  }
}

// Waits for kAccepted and one output: the request is running.
void UntilRunning(Channel& ch, std::vector<Event>& seen) {
  while (seen.size() < 2) ASSERT_TRUE(ch.Wait(seen, milliseconds(10000)));
  ASSERT_EQ(seen[0].kind, Event::Kind::kAccepted);
}

TEST(Channel, NotifyAfterEachPushAndTryTakeNeverWaits) {
  Channel ch;
  std::vector<Event> got;
  EXPECT_FALSE(ch.TryTake(got));
  ch.Push(Event{});  // before the callback: not announced
  int notified = 0;
  ch.SetNotify([&] { ++notified; });
  ch.Push(Event{});
  ch.Push(Event{});
  EXPECT_EQ(notified, 2);
  EXPECT_TRUE(ch.TryTake(got));
  EXPECT_EQ(got.size(), 3u);
  EXPECT_FALSE(ch.TryTake(got));
  ch.SetNotify(nullptr);
  ch.Push(Event{});
  EXPECT_EQ(notified, 2);
}

TEST(EngineLoop, TokensMatchTheEngineRunDirectly) {
  engine::Engine direct = MakeEngine();
  auto want = direct.Generate({kPrompt}, Params(10));
  ASSERT_TRUE(want.ok());

  engine::Engine e = MakeEngine();
  Metrics metrics;
  EngineLoop loop(e, {}, metrics);
  auto ch = loop.Submit(kPrompt, Params(10));
  ASSERT_TRUE(ch.ok());
  std::vector<Event> events = UntilDone(**ch);
  ASSERT_EQ(events.front().kind, Event::Kind::kAccepted);
  EXPECT_EQ(events.front().prompt_tokens, kPrompt.size());
  std::vector<int32_t> tokens;
  for (const Event& ev : events) tokens.insert(tokens.end(), ev.tokens.begin(), ev.tokens.end());
  EXPECT_EQ(tokens, (*want)[0]);
  EXPECT_EQ(events.back().finish, engine::FinishReason::kLength);
  EXPECT_EQ(events.back().prompt_tokens, kPrompt.size());
  EXPECT_EQ(loop.in_flight(), 0u);
}

TEST(EngineLoop, FullQueueIsResourceExhausted) {
  engine::Engine e = MakeEngine(/*max_num_seqs=*/1);
  Metrics metrics;
  EngineLoop loop(e, {.max_queue = 1, .step_delay = milliseconds(5)}, metrics);
  auto running = loop.Submit(kPrompt, Params(80));
  ASSERT_TRUE(running.ok());
  std::vector<Event> seen;
  UntilRunning(**running, seen);
  auto waiting = loop.Submit(kPrompt, Params(4));
  ASSERT_TRUE(waiting.ok());
  auto refused = loop.Submit(kPrompt, Params(4));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), StatusCode::kResourceExhausted);
  loop.Abort(*running);
  EXPECT_EQ(UntilDone(**waiting).back().finish, engine::FinishReason::kLength);
}

TEST(EngineLoop, AbortFreesEveryPageTheRequestHeld) {
  engine::Engine e = MakeEngine();
  Metrics metrics;
  EngineLoop loop(e, {.max_queue = 8, .step_delay = milliseconds(2)}, metrics);
  auto ch = loop.Submit(kPrompt, Params(80));
  ASSERT_TRUE(ch.ok());
  std::vector<Event> seen;
  UntilRunning(**ch, seen);
  loop.Abort(*ch);
  EXPECT_EQ(UntilDone(**ch).back().finish, engine::FinishReason::kAbort);
  const EngineSnapshot s = loop.snapshot();
  EXPECT_EQ(s.running, 0u);
  EXPECT_EQ(s.pages_used, s.pages_cached);
  EXPECT_EQ(loop.in_flight(), 0u);
  EXPECT_NE(metrics.Render(s).find("folio_requests_finished_total{reason=\"abort\"} 1"),
            std::string::npos);
}

TEST(EngineLoop, AbortAfterFinishIsHarmless) {
  engine::Engine e = MakeEngine();
  Metrics metrics;
  EngineLoop loop(e, {}, metrics);
  auto ch = loop.Submit(kPrompt, Params(3));
  ASSERT_TRUE(ch.ok());
  UntilDone(**ch);
  loop.Abort(*ch);
  auto again = loop.Submit(kPrompt, Params(3));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(UntilDone(**again).back().finish, engine::FinishReason::kLength);
}

TEST(EngineLoop, EngineRefusalIsAnErrorEvent) {
  engine::Engine e = MakeEngine(4, /*num_pages=*/2);
  Metrics metrics;
  EngineLoop loop(e, {}, metrics);
  auto ch = loop.Submit(kPrompt, Params(20));  // 26 positions > 8 slots
  ASSERT_TRUE(ch.ok());
  std::vector<Event> events = UntilDone(**ch);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Event::Kind::kError);
  EXPECT_EQ(events[0].error.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(loop.in_flight(), 0u);
}

TEST(EngineLoop, DrainRefusesNewWorkAndStopAbortsTheRest) {
  engine::Engine e = MakeEngine();
  Metrics metrics;
  EngineLoop loop(e, {.max_queue = 8, .step_delay = milliseconds(2)}, metrics);
  auto ch = loop.Submit(kPrompt, Params(80));
  ASSERT_TRUE(ch.ok());
  std::vector<Event> seen;
  UntilRunning(**ch, seen);
  loop.StopAccepting();
  EXPECT_FALSE(loop.accepting());
  auto refused = loop.Submit(kPrompt, Params(2));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), StatusCode::kFailedPrecondition);
  loop.Stop();
  EXPECT_EQ(UntilDone(**ch).back().finish, engine::FinishReason::kAbort);
  EXPECT_EQ(loop.in_flight(), 0u);
  const EngineSnapshot s = loop.snapshot();
  EXPECT_EQ(s.pages_used, s.pages_cached);
}

}  // namespace
}  // namespace folio::server
