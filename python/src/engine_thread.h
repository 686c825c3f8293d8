// The engine's own thread for the Python package (folio.LLM, folio.AsyncLLM).
//
// engine::Engine is not thread-safe, so exactly one C++ thread (started
// here) ever touches it, as in `folio serve` (server/engine_loop.h, which
// this mirrors). Python threads hand it commands (submit, abort, or any
// function to run between two steps) and take what it produced from one
// outbox shared by every request. The thread never calls into Python: it
// signals new events through a condition variable (Wait, for the blocking
// LLM.generate) and a pipe whose read end becomes readable while events
// wait (notify_fd, for an asyncio loop's add_reader), so the interpreter's
// lock is never needed on this side.
//
// Requests are named by the caller's 64-bit keys, not the engine's ids, so
// a caller can name a request before the thread has added it (an abort
// right after a submit is ordered after it through the same queue).
#ifndef FOLIO_PYTHON_ENGINE_THREAD_H_
#define FOLIO_PYTHON_ENGINE_THREAD_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "folio/core/status.h"
#include "folio/engine/engine.h"

namespace folio::python {

// What the thread produced for one request since the last Take.
struct RequestEvent {
  uint64_t key = 0;
  std::vector<int32_t> tokens;
  std::string text;  // the text these tokens add (engine::StepOutput::text)
  std::vector<sampling::TokenLogprobs> logprobs;
  engine::FinishReason finish = engine::FinishReason::kNone;
  Status error;                      // not ok: the request failed
  uint64_t index = 0;                // the parallel sample (RequestParams::n)
  bool final = false;                // the request's last event (every sample finished)
  std::optional<double> beam_score;  // a beam search's hypothesis (StepOutput)
  uint64_t rng_state = 0;            // the sample's random stream after it (StepOutput)
};

// Counters published after every step, read without waiting for the thread.
struct EngineCounters {
  uint64_t running = 0;
  uint64_t waiting = 0;  // the engine's waiting queue plus submits not yet handled
  uint64_t pages_total = 0;
  uint64_t pages_used = 0;
  uint64_t pages_free = 0;
  uint64_t pages_cached = 0;  // held only by the prefix cache
  engine::EngineStats stats;
};

class EngineThread {
 public:
  // engine must outlive this. Starts the thread; it sleeps step_delay after
  // each step that ran (tests and demos: a slower model, as folio serve's
  // --step-delay-us). Errors: the pipe.
  static Result<std::unique_ptr<EngineThread>> Start(
      engine::Engine& engine, std::chrono::microseconds step_delay = std::chrono::microseconds(0));
  ~EngineThread();  // Stop()
  EngineThread(const EngineThread&) = delete;
  EngineThread& operator=(const EngineThread&) = delete;

  struct Submission {
    uint64_t key = 0;
    std::vector<int32_t> prompt;
    engine::RequestParams params;
  };

  // Hands a request over; its events carry `key`. The request should have
  // passed Engine::ValidateRequest; if AddRequest still refuses it, its one
  // event carries the error. Errors: FailedPrecondition after Stop.
  Status Submit(uint64_t key, std::vector<int32_t> prompt, engine::RequestParams params);
  // Submits all at once: the thread adds them before its next step, so a
  // batch starts together (LLM.generate).
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
  // ImportSnapshot) under `key`, so its events reach the caller. Only
  // inside a Call.
  void Adopt(engine::RequestId id, uint64_t key);
  // Aborts request `key` in the engine (its last event has finish kAbort).
  // Only inside a Call; false if it is not running.
  bool AbortNow(uint64_t key);
  // The engine's id for `key`; nullopt once it finished (or before the
  // thread added it). Only inside a Call.
  std::optional<engine::RequestId> IdOf(uint64_t key) const;

  // Every event waiting, in order (possibly none). Never blocks.
  std::vector<RequestEvent> Take();
  // As Take, but waits up to `timeout` for the first event.
  std::vector<RequestEvent> Wait(std::chrono::milliseconds timeout);
  // Readable while events wait; Take empties it.
  int notify_fd() const { return pipe_[0]; }

  EngineCounters counters() const;
  // Requests submitted (or adopted) and not yet finished.
  uint64_t in_flight() const;

  // Aborts every unfinished request (each gets a final kAbort event) and
  // joins the thread. Idempotent.
  void Stop();

 private:
  struct Command {
    enum class Kind { kSubmit, kAbort, kCall };
    Kind kind = Kind::kSubmit;
    uint64_t key = 0;
    std::vector<int32_t> prompt;
    engine::RequestParams params;
    std::function<bool(const engine::Engine&)> ready;  // kCall: run fn once it holds
    std::function<void(engine::Engine&)> fn;
    std::promise<bool>* done = nullptr;  // kCall: true once fn ran, false if dropped
  };

  EngineThread(engine::Engine& engine, int read_fd, int write_fd,
               std::chrono::microseconds step_delay);
  void Run();
  void Handle(Command& c);
  // Queues submissions; mu_ held.
  void QueueLocked(std::vector<Submission>& requests);
  // Runs the deferred calls whose condition holds.
  void RunReadyCalls();
  // Queues e for the caller; the request is finished when final.
  void Emit(RequestEvent e, bool final);
  // Ends request `key` with `proto` (an abort or an error) for each of its
  // samples that has not finished; the last of those events is final.
  void End(uint64_t key, const RequestEvent& proto);
  void AbortAll();
  void Publish();
  // Moves the staged events to the outbox and wakes the readers.
  void Deliver();

  engine::Engine& engine_;
  int pipe_[2];

  mutable std::mutex mu_;              // guards everything below up to the thread's own
  std::condition_variable work_cv_;    // the thread waits for commands
  std::condition_variable events_cv_;  // Wait waits for events
  std::deque<Command> commands_;
  uint64_t queued_submits_ = 0;
  uint64_t in_flight_ = 0;
  bool stopping_ = false;
  bool signaled_ = false;  // the pipe holds a byte
  std::vector<RequestEvent> outbox_;
  EngineCounters counters_;

  // The thread's own.
  std::map<uint64_t, engine::RequestId> by_key_;
  std::map<engine::RequestId, uint64_t> by_id_;
  std::map<uint64_t, std::vector<bool>> finished_samples_;  // key -> [n]
  std::vector<RequestEvent> staged_;
  std::chrono::microseconds step_delay_{0};
  std::vector<Command> deferred_;  // kCall commands waiting for their condition
  std::thread thread_;
};

}  // namespace folio::python

#endif  // FOLIO_PYTHON_ENGINE_THREAD_H_
