// The engine's own thread, and how HTTP handler threads talk to it.
//
// engine::Engine is not thread-safe, so exactly one thread (started here)
// ever touches it. Handler threads Submit a request into a bounded handover
// queue and read what it produces from the request's own Channel; Abort
// travels through the same queue, so it is ordered after the request's
// submission and always handled by the engine thread.
//
// The bound: requests handed over but not yet running (handover queue plus
// the engine's waiting queue) may not exceed max_queue; past it Submit
// answers ResourceExhausted (the server's 429). Aborts are never refused.
//
// Shutdown: StopAccepting() refuses new requests (FailedPrecondition, the
// server's 503) while the ones in flight finish; Stop() aborts what is left
// and joins the thread.
#ifndef FOLIO_SERVER_ENGINE_LOOP_H_
#define FOLIO_SERVER_ENGINE_LOOP_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "folio/core/status.h"
#include "folio/engine/engine.h"
#include "folio/server/metrics.h"

namespace folio::server {

// One message from the engine thread to a request's handler.
struct Event {
  enum class Kind {
    kAccepted,  // the engine took the request (AddRequest succeeded)
    kOutput,    // tokens and/or a finish
    kError,     // refused by the engine or failed; the last event
  };
  Kind kind = Kind::kOutput;
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<sampling::TokenLogprobs> logprobs;
  engine::FinishReason finish = engine::FinishReason::kNone;
  uint64_t index = 0;                // kOutput: the parallel sample (choice) it belongs to
  std::optional<double> beam_score;  // kOutput of a beam search: the hypothesis' score
  Status error;
  // kAccepted and the finishing kOutput: the prompt's length in tokens.
  uint64_t prompt_tokens = 0;
};

// A request's events, in order. Written by the engine thread, read by one
// reader: a thread blocking in Wait, or an event-driven one that sets a
// notify callback and takes events with TryTake when woken.
class Channel {
 public:
  void Push(Event e);
  // Moves every queued event into out (appending); waits up to timeout for
  // the first. False when nothing arrived.
  bool Wait(std::vector<Event>& out, std::chrono::milliseconds timeout);
  // Moves every queued event into out without waiting. False when none.
  bool TryTake(std::vector<Event>& out);
  // Called after each Push, on the pushing (engine) thread and outside the
  // channel's lock, so it must only schedule work, never do it. Events
  // pushed before the callback was set are not announced: call TryTake
  // once after setting it.
  void SetNotify(std::function<void()> notify);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  std::function<void()> notify_;
};

struct EngineLoopConfig {
  uint64_t max_queue = 32;
  // Sleep after every step (0 = none): lets tests and demos slow a tiny
  // model down to the pace of a real one.
  std::chrono::microseconds step_delay{0};
};

class EngineLoop {
 public:
  // engine and metrics must outlive the loop. Starts the thread.
  EngineLoop(engine::Engine& engine, EngineLoopConfig config, Metrics& metrics);
  ~EngineLoop();  // Stop()
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Hands a request over. Errors: ResourceExhausted when max_queue requests
  // are already waiting; FailedPrecondition after StopAccepting().
  Result<std::shared_ptr<Channel>> Submit(std::vector<int32_t> prompt,
                                          engine::RequestParams params);
  // Ends a request early and frees its pages (a client went away). A
  // request that already finished is left alone.
  void Abort(const std::shared_ptr<Channel>& channel);
  void StopAccepting();
  bool accepting() const;
  // Requests submitted and not yet finished.
  uint64_t in_flight() const;
  // Aborts every unfinished request (each gets a final kAbort output) and
  // joins the engine thread. Idempotent.
  void Stop();
  EngineSnapshot snapshot() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Command {
    std::shared_ptr<Channel> channel;
    bool abort = false;
    std::vector<int32_t> prompt;
    engine::RequestParams params;
    Clock::time_point arrival;
  };
  struct Live {  // a request inside the engine
    std::shared_ptr<Channel> channel;
    std::vector<bool> sample_done;  // [n]: each sample ends with one finish event
    uint64_t prompt_tokens = 0;
    uint64_t generated = 0;
    Clock::time_point arrival, last_token;
  };
  void Run();
  void Handle(Command& c);
  // Ends a request: `e` goes out as the finish of every sample that has
  // none yet (for the last sample to finish, that is the one).
  void Finish(engine::RequestId id, Event e, std::string_view reason);
  // Aborts every live request in the engine and finishes each with a copy
  // of `last`.
  void FinishAll(const Event& last, std::string_view reason);
  void Publish(uint64_t handled_adds);
  // Hands the outbox's events to their channels. Events wait until the
  // snapshot is published, so a client that sees its request finish sees
  // the metrics after it too.
  void Deliver();

  engine::Engine& engine_;
  const EngineLoopConfig config_;
  Metrics& metrics_;

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::deque<Command> commands_;
  uint64_t queued_adds_ = 0;  // Submit commands in commands_
  uint64_t in_flight_ = 0;
  bool accepting_ = true;
  bool stopping_ = false;
  EngineSnapshot snapshot_;

  // Engine thread only.
  std::map<engine::RequestId, Live> live_;
  std::map<const Channel*, engine::RequestId> by_channel_;
  std::vector<std::pair<std::shared_ptr<Channel>, Event>> outbox_;
  std::thread thread_;
};

}  // namespace folio::server

#endif  // FOLIO_SERVER_ENGINE_LOOP_H_
