// One generation's events, from the engine thread (serving/engine_thread.h)
// to the HTTP session that answers the request.
#ifndef FOLIO_SERVER_CHANNEL_H_
#define FOLIO_SERVER_CHANNEL_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "folio/serving/engine_thread.h"

namespace folio::server {

using serving::Event;

// A request's events, in order. Written by the engine thread (it is the
// request's EventSink), read by one reader: a thread blocking in Wait, or
// an event-driven one that sets a notify callback and takes events with
// TryTake when woken.
class Channel : public serving::EventSink {
 public:
  void Push(Event e) override;
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

}  // namespace folio::server

#endif  // FOLIO_SERVER_CHANNEL_H_
