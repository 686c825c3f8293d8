#include "folio/serving/engine_thread.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "folio/tokenizer/byte_tokenizer.h"
#include "testing/test_model.h"

namespace folio::serving {
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

engine::RequestParams Params(uint64_t max_tokens, uint64_t n = 1) {
  engine::RequestParams p;
  p.sampling = {0.8, 40, 0.95, 0.0};
  p.max_tokens = max_tokens;
  p.seed = 99;
  p.n = n;
  return p;
}

const std::vector<int32_t> kPrompt = {0, 99, 100, 101, 102, 103, 104};

// A sink a test thread reads, blocking.
class Collector : public EventSink {
 public:
  void Push(Event e) override {
    {
      std::lock_guard lock(mu_);
      events_.push_back(std::move(e));
    }
    cv_.notify_all();
  }
  // Every event up to the request's final one.
  std::vector<Event> UntilFinal() {
    std::unique_lock lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, milliseconds(10000),
                             [&] { return !events_.empty() && events_.back().final; }));
    return events_;
  }
  // Waits for kAccepted and one output: the request is running.
  void UntilRunning() {
    std::unique_lock lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, milliseconds(10000), [&] { return events_.size() >= 2; }));
    ASSERT_EQ(events_[0].kind, Event::Kind::kAccepted);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
};

// Counts what the thread reports, by finish reason.
class CountingObserver : public EngineObserver {
 public:
  void RequestAccepted(uint64_t prompt_tokens) override { accepted_tokens += prompt_tokens; }
  void TokensGenerated(uint64_t count, double since, bool first) override {
    EXPECT_GE(since, 0.0);
    generated += count;
    firsts += first ? 1 : 0;
  }
  void RequestFinished(std::string_view reason, double latency) override {
    EXPECT_GE(latency, 0.0);
    finished[std::string(reason)] += 1;
  }
  std::atomic<uint64_t> accepted_tokens{0}, generated{0}, firsts{0};
  std::map<std::string, uint64_t> finished;  // read after Stop()
};

EngineThread::Submission Request(uint64_t key, std::shared_ptr<EventSink> sink,
                                 engine::RequestParams params) {
  return {key, kPrompt, std::move(params), std::move(sink)};
}

std::vector<int32_t> Tokens(const std::vector<Event>& events, uint64_t index = 0) {
  std::vector<int32_t> out;
  for (const Event& e : events) {
    if (e.index == index) out.insert(out.end(), e.tokens.begin(), e.tokens.end());
  }
  return out;
}

TEST(EngineThread, TokensMatchTheEngineRunDirectly) {
  engine::Engine direct = MakeEngine();
  auto want = direct.Generate({kPrompt}, Params(10));
  ASSERT_TRUE(want.ok());

  engine::Engine e = MakeEngine();
  CountingObserver observer;
  EngineThread thread(e, {.observer = &observer});
  auto sink = std::make_shared<Collector>();
  ASSERT_TRUE(thread.Submit(Request(7, sink, Params(10))).ok());
  std::vector<Event> events = sink->UntilFinal();
  ASSERT_EQ(events.front().kind, Event::Kind::kAccepted);
  EXPECT_EQ(events.front().prompt_tokens, kPrompt.size());
  for (const Event& ev : events) EXPECT_EQ(ev.key, 7u);
  EXPECT_EQ(Tokens(events), (*want)[0]);
  EXPECT_EQ(events.back().finish, engine::FinishReason::kLength);
  EXPECT_EQ(events.back().prompt_tokens, kPrompt.size());
  EXPECT_EQ(thread.in_flight(), 0u);
  thread.Stop();
  EXPECT_EQ(observer.accepted_tokens, kPrompt.size());
  EXPECT_EQ(observer.generated, 10u);
  EXPECT_EQ(observer.firsts, 1u);
  EXPECT_EQ(observer.finished["length"], 1u);
}

TEST(EngineThread, ParallelSamplesEachFinishOnceAndOnlyTheLastIsFinal) {
  engine::Engine direct = MakeEngine();
  engine::Engine e = MakeEngine();
  EngineThread thread(e, {});
  auto sink = std::make_shared<Collector>();
  ASSERT_TRUE(thread.Submit(Request(1, sink, Params(6, /*n=*/3))).ok());
  std::vector<Event> events = sink->UntilFinal();
  std::vector<int> finishes(3, 0);
  uint64_t finals = 0;
  for (const Event& ev : events) {
    if (ev.finish != engine::FinishReason::kNone) ++finishes[ev.index];
    finals += ev.final ? 1 : 0;
  }
  EXPECT_EQ(finishes, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(finals, 1u);
  for (uint64_t i = 0; i < 3; ++i) {
    // Sample i is the one-sample request seeded SampleSeed(99, i).
    engine::RequestParams one = Params(6);
    one.seed = engine::SampleSeed(99, i);
    auto want = direct.Generate({kPrompt}, one);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(Tokens(events, i), (*want)[0]) << "sample " << i;
  }
}

TEST(EngineThread, FullQueueIsResourceExhausted) {
  engine::Engine e = MakeEngine(/*max_num_seqs=*/1);
  EngineThread thread(e, {.max_queue = 1, .step_delay = milliseconds(5)});
  auto running = std::make_shared<Collector>();
  ASSERT_TRUE(thread.Submit(Request(1, running, Params(80))).ok());
  running->UntilRunning();
  auto waiting = std::make_shared<Collector>();
  ASSERT_TRUE(thread.Submit(Request(2, waiting, Params(4))).ok());
  const Status refused = thread.Submit(Request(3, std::make_shared<Collector>(), Params(4)));
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  thread.Abort(1);
  EXPECT_EQ(waiting->UntilFinal().back().finish, engine::FinishReason::kLength);
}

TEST(EngineThread, SubmitAllPastTheBoundSubmitsNothing) {
  engine::Engine e = MakeEngine();
  EngineThread thread(e, {.max_queue = 2});
  std::vector<EngineThread::Submission> three;
  for (uint64_t k = 0; k < 3; ++k)
    three.push_back(Request(k, std::make_shared<Collector>(), Params(2)));
  EXPECT_EQ(thread.SubmitAll(std::move(three)).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(thread.in_flight(), 0u);
}

TEST(EngineThread, AbortFreesEveryPageTheRequestHeld) {
  engine::Engine e = MakeEngine();
  CountingObserver observer;
  EngineThread thread(e, {.max_queue = 8, .step_delay = milliseconds(2), .observer = &observer});
  auto sink = std::make_shared<Collector>();
  ASSERT_TRUE(thread.Submit(Request(5, sink, Params(80))).ok());
  sink->UntilRunning();
  thread.Abort(5);
  EXPECT_EQ(sink->UntilFinal().back().finish, engine::FinishReason::kAbort);
  const EngineCounters c = thread.counters();
  EXPECT_EQ(c.running, 0u);
  EXPECT_EQ(c.pages_used, c.pages_cached);
  EXPECT_EQ(thread.in_flight(), 0u);
  thread.Stop();
  EXPECT_EQ(observer.finished["abort"], 1u);
}

TEST(EngineThread, AbortAfterFinishIsHarmlessAndTheKeyIsFreeAgain) {
  engine::Engine e = MakeEngine();
  EngineThread thread(e, {});
  auto sink = std::make_shared<Collector>();
  ASSERT_TRUE(thread.Submit(Request(1, sink, Params(3))).ok());
  sink->UntilFinal();
  thread.Abort(1);
  auto again = std::make_shared<Collector>();
  ASSERT_TRUE(thread.Submit(Request(1, again, Params(3))).ok());
  EXPECT_EQ(again->UntilFinal().back().finish, engine::FinishReason::kLength);
}

TEST(EngineThread, AKeyStillRunningIsRefused) {
  engine::Engine e = MakeEngine();
  EngineThread thread(e, {.step_delay = milliseconds(2)});
  auto first = std::make_shared<Collector>();
  ASSERT_TRUE(thread.Submit(Request(4, first, Params(40))).ok());
  first->UntilRunning();
  auto second = std::make_shared<Collector>();
  ASSERT_TRUE(thread.Submit(Request(4, second, Params(2))).ok());
  std::vector<Event> events = second->UntilFinal();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Event::Kind::kError);
  EXPECT_NE(events[0].error.message().find("already running"), std::string::npos);
  thread.Abort(4);
  EXPECT_EQ(first->UntilFinal().back().finish, engine::FinishReason::kAbort);
}

TEST(EngineThread, EngineRefusalIsOneFinalErrorEvent) {
  engine::Engine e = MakeEngine(4, /*num_pages=*/2);
  EngineThread thread(e, {});
  auto sink = std::make_shared<Collector>();
  ASSERT_TRUE(thread.Submit(Request(1, sink, Params(20))).ok());  // 26 positions > 8 slots
  std::vector<Event> events = sink->UntilFinal();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Event::Kind::kError);
  EXPECT_EQ(events[0].error.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(thread.in_flight(), 0u);
}

TEST(EngineThread, CallWhenRunsBetweenTheStepsItWaitsFor) {
  engine::Engine e = MakeEngine();
  EngineThread thread(e, {});
  auto sink = std::make_shared<Collector>();
  std::vector<EngineThread::Submission> first;
  first.push_back(Request(9, sink, Params(20)));
  uint64_t seen = 0;
  const Status called = thread.CallWhen(
      [&](const engine::Engine& eng) {
        const std::optional<engine::RequestId> id = thread.IdOf(9);
        return !id || eng.scheduler().sequence(*id).output().size() >= 3;
      },
      [&](engine::Engine& eng) {
        seen = eng.scheduler().sequence(*thread.IdOf(9)).output().size();
        EXPECT_TRUE(thread.AbortNow(9));
        EXPECT_FALSE(thread.AbortNow(9));
      },
      std::move(first));
  ASSERT_TRUE(called.ok());
  EXPECT_EQ(seen, 3u);
  std::vector<Event> events = sink->UntilFinal();
  EXPECT_EQ(events.back().finish, engine::FinishReason::kAbort);
  EXPECT_EQ(Tokens(events).size(), 3u);
}

TEST(EngineThread, DrainRefusesNewWorkAndStopAbortsTheRest) {
  engine::Engine e = MakeEngine();
  EngineThread thread(e, {.max_queue = 8, .step_delay = milliseconds(2)});
  auto sink = std::make_shared<Collector>();
  ASSERT_TRUE(thread.Submit(Request(1, sink, Params(80))).ok());
  sink->UntilRunning();
  thread.StopAccepting();
  EXPECT_FALSE(thread.accepting());
  EXPECT_EQ(thread.Submit(Request(2, sink, Params(2))).code(), StatusCode::kFailedPrecondition);
  thread.Stop();
  EXPECT_EQ(sink->UntilFinal().back().finish, engine::FinishReason::kAbort);
  EXPECT_EQ(thread.in_flight(), 0u);
  const EngineCounters c = thread.counters();
  EXPECT_EQ(c.pages_used, c.pages_cached);
  EXPECT_EQ(thread.Call([](engine::Engine&) {}).code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace folio::serving
