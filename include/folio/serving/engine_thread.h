// The engine's own thread, shared by every front end: `folio serve`'s HTTP
// handlers and the Python package (folio.LLM, folio.AsyncLLM) hand it
// requests, and it hands each request's events to that request's sink.
//
// engine::Engine is not thread-safe, so exactly one thread (started here)
// ever touches it. Callers name requests by their own 64-bit keys, so a
// request can be named before the thread has added it: Submit, Abort and
// Call travel through one queue, in order, and an abort right after a
// submit is handled after it.
//
// Events go to an EventSink given with each request (the server: the
// request's own channel; Python: one outbox with a wake-up pipe). The
// thread publishes its counters before it delivers a step's events, so a
// caller that sees its request finish sees the pages it freed too. It never
// calls into a caller's code but through the sink, the observer and Call's
// functions.
//
// The bound: requests handed over but not yet running (queued here plus the
// engine's waiting queue) may not exceed max_queue (0: no bound); past it
// Submit answers ResourceExhausted (the server's 429). Aborts are never
// refused. StopAccepting() refuses new requests (FailedPrecondition, the
// server's 503) while those in flight finish; Stop() aborts what is left
// and joins the thread.
#ifndef FOLIO_SERVING_ENGINE_THREAD_H_
#define FOLIO_SERVING_ENGINE_THREAD_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "folio/core/status.h"
#include "folio/engine/engine.h"

namespace folio::serving {

// One message from the engine thread about one request.
struct Event {
  enum class Kind {
    kAccepted,  // the engine took the request (AddRequest succeeded)
    kOutput,    // tokens and/or a finish
    kError,     // refused by the engine or failed; the last event
  };
  Kind kind = Kind::kOutput;
  uint64_t key = 0;  // the caller's name for the request
  std::vector<int32_t> tokens;
  std::string text;  // the text these tokens add (engine::StepOutput::text)
  std::vector<sampling::TokenLogprobs> logprobs;
  engine::FinishReason finish = engine::FinishReason::kNone;
  uint64_t index = 0;                // the parallel sample (choice) it belongs to
  std::optional<double> beam_score;  // a beam search's hypothesis (StepOutput)
  uint64_t rng_state = 0;            // the sample's random stream after it (StepOutput)
  std::vector<float> embedding;      // a pooled request's vector, with its finish (StepOutput)
  // kError: why. A kAbort finish from the thread stopping carries why too
  // (FailedPrecondition), so a front end may report an error instead.
  Status error;
  // kAccepted and every finishing event: the prompt's length in tokens;
  // finishing events: how many of them came from the prefix cache.
  uint64_t prompt_tokens = 0;
  uint64_t cached_prompt_tokens = 0;
  bool final = false;  // the request's last event (every sample finished)
};

// Where a request's events go, in order. Push runs on the engine thread,
// outside the thread's locks: it must only hand the event on (a queue, a
// wake-up), never wait for a reader.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void Push(Event e) = 0;
};

// What the engine thread reports as requests move, for metrics. Called on
// the engine thread; must not block.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void RequestAccepted(uint64_t prompt_tokens) = 0;
  // `count` new tokens of one request, `since` seconds after its previous
  // ones (first: after its arrival).
  virtual void TokensGenerated(uint64_t count, double since, bool first) = 0;
  // reason: stop, length, abort or error; `latency` seconds after arrival.
  virtual void RequestFinished(std::string_view reason, double latency) = 0;
};

// The engine's state after the thread's latest step; O(1) to gather.
struct EngineCounters {
  uint64_t running = 0;
  uint64_t waiting = 0;  // in the engine's queue
  uint64_t queued = 0;   // handed over, not yet given to the engine
  uint64_t pages_total = 0;
  uint64_t pages_used = 0;  // held by requests or the prefix cache
  uint64_t pages_free = 0;
  uint64_t pages_cached = 0;  // held only by the prefix cache
  uint64_t page_bytes = 0;    // one page: K and V of one layer group, scales included
  engine::EngineStats stats;
};

struct EngineThreadConfig {
  uint64_t max_queue = 0;  // requests waiting to run at most; 0 = no bound
  // Sleep after every step that ran (0 = none): lets tests and demos slow
  // a tiny model down to the pace of a real one.
  std::chrono::microseconds step_delay{0};
  EngineObserver* observer = nullptr;  // optional; must outlive the thread
};

class EngineThread {
 public:
  // engine must outlive the thread. Starts it.
  EngineThread(engine::Engine& engine, EngineThreadConfig config);
  ~EngineThread();  // Stop()
  EngineThread(const EngineThread&) = delete;
  EngineThread& operator=(const EngineThread&) = delete;

  struct Submission {
    uint64_t key = 0;
    std::vector<int32_t> prompt;
    engine::RequestParams params;
    std::shared_ptr<EventSink> sink;  // required
  };

  // Hands a request over; its events carry `key` and go to its sink. If
  // AddRequest refuses it, its one event is a final kError. Errors:
  // ResourceExhausted past max_queue; FailedPrecondition after
  // StopAccepting or Stop.
  Status Submit(Submission request);
  // Submits all at once (all or none): the thread adds them before its
  // next step, so a batch starts together.
  Status SubmitAll(std::vector<Submission> requests);
  // Ends a request early and frees its pages; its last event has finish
  // kAbort. A request that already finished is left alone.
  void Abort(uint64_t key);
  // Runs fn(engine) on the thread between two steps and waits for it.
  // Errors: FailedPrecondition after Stop.
  Status Call(const std::function<void(engine::Engine&)>& fn);
  // As Call, but fn runs right after the first step (or at once) when
  // ready(engine) holds, so it sees the engine at an exact point, e.g. when
  // every request of a batch has generated n tokens. `first` are submitted
  // together with the call, so no step runs between them.
  Status CallWhen(const std::function<bool(const engine::Engine&)>& ready,
                  const std::function<void(engine::Engine&)>& fn,
                  std::vector<Submission> first = {});
  // Registers engine request `id` (added inside a Call, e.g. by
  // ImportSnapshot) under `key`, so its events reach `sink`. Only inside a
  // Call.
  void Adopt(engine::RequestId id, uint64_t key, std::shared_ptr<EventSink> sink);
  // Aborts request `key` in the engine (its last event has finish kAbort).
  // Only inside a Call; false if it is not running.
  bool AbortNow(uint64_t key);
  // The engine's id for `key`; nullopt once it finished (or before the
  // thread added it). Only inside a Call.
  std::optional<engine::RequestId> IdOf(uint64_t key) const;

  void StopAccepting();
  bool accepting() const;
  // Requests submitted (or adopted) and not yet finished.
  uint64_t in_flight() const;
  EngineCounters counters() const;
  // Aborts every unfinished request (each gets a final kAbort event) and
  // joins the thread. Idempotent.
  void Stop();

 private:
  using Clock = std::chrono::steady_clock;
  struct Command {
    enum class Kind { kSubmit, kAbort, kCall };
    Kind kind = Kind::kSubmit;
    Submission request;  // kSubmit (kAbort: only its key)
    Clock::time_point arrival;
    std::function<bool(const engine::Engine&)> ready;  // kCall: run fn once it holds
    std::function<void(engine::Engine&)> fn;
    std::promise<bool>* done = nullptr;  // kCall: true once fn ran, false if dropped
  };
  struct Live {  // a request inside the engine
    engine::RequestId id = 0;
    std::shared_ptr<EventSink> sink;
    std::vector<bool> sample_done;  // [n]: each sample ends with one finish event
    uint64_t prompt_tokens = 0;
    uint64_t cached_prompt_tokens = 0;  // StepOutput's, once it says
    uint64_t generated = 0;
    Clock::time_point arrival, last_token;
  };

  // Queues submissions; mu_ held. Errors: stopped, or the queue bound.
  Status QueueLocked(std::vector<Submission>& requests);
  void Run();
  void Handle(Command& c);
  void Add(Command& c);
  // Runs the deferred calls whose condition holds.
  void RunReadyCalls();
  // One step's output for its request.
  void Output(engine::StepOutput& out, Clock::time_point now);
  // Ends request `key` with `proto` (an abort or an error) for each of its
  // samples that has not finished; the last of those events is final.
  void End(uint64_t key, const Event& proto, std::string_view reason);
  // Queues e for its request's sink; a final event forgets the request.
  void Emit(Live& live, Event e, std::string_view reason);
  // A request refused before it ran: its one, final event.
  void Refuse(const std::shared_ptr<EventSink>& sink, uint64_t key, Status error);
  void EndAll(const Event& proto, std::string_view reason);
  void Publish(uint64_t handled_submits);
  // Hands the staged events to their sinks.
  void Deliver();

  engine::Engine& engine_;
  const EngineThreadConfig config_;
  const uint64_t page_bytes_;  // one KV page's bytes, for EngineCounters

  mutable std::mutex mu_;  // guards everything below up to the thread's own
  std::condition_variable work_cv_;
  std::deque<Command> commands_;
  uint64_t queued_submits_ = 0;  // kSubmit commands not yet handled
  uint64_t in_flight_ = 0;
  bool accepting_ = true;
  bool stopping_ = false;
  EngineCounters counters_;

  // The thread's own.
  std::map<uint64_t, Live> live_;                 // by key
  std::map<engine::RequestId, uint64_t> key_of_;  // the engine's id -> key
  std::vector<std::pair<std::shared_ptr<EventSink>, Event>> staged_;
  std::vector<Command> deferred_;  // kCall commands waiting for their condition
  std::thread thread_;
};

}  // namespace folio::serving

#endif  // FOLIO_SERVING_ENGINE_THREAD_H_
