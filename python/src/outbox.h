// Where the engine thread (serving/engine_thread.h) leaves every request's
// events for the Python package: one outbox shared by all requests, which
// Python threads empty. The engine thread never calls into Python: it
// signals new events through a condition variable (Wait, for the blocking
// LLM.generate) and a pipe whose read end is readable while events wait
// (notify_fd, for an asyncio loop's add_reader), so the interpreter's lock
// is never needed on its side.
#ifndef FOLIO_PYTHON_OUTBOX_H_
#define FOLIO_PYTHON_OUTBOX_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "folio/core/status.h"
#include "folio/serving/engine_thread.h"

namespace folio::python {

class Outbox : public serving::EventSink {
 public:
  // Errors: the pipe.
  static Result<std::shared_ptr<Outbox>> Create();
  ~Outbox() override;
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  // The engine thread's side: queues e (but kAccepted, which Python does
  // not read) and wakes the readers.
  void Push(serving::Event e) override;
  // Every event waiting, in order (possibly none). Never blocks.
  std::vector<serving::Event> Take();
  // As Take, but waits up to `timeout` for the first event.
  std::vector<serving::Event> Wait(std::chrono::milliseconds timeout);
  // Readable while events wait; Take empties it.
  int notify_fd() const { return pipe_[0]; }

 private:
  Outbox(int read_fd, int write_fd) : pipe_{read_fd, write_fd} {}

  int pipe_[2];
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<serving::Event> events_;
  bool signaled_ = false;  // the pipe holds a byte
};

}  // namespace folio::python

#endif  // FOLIO_PYTHON_OUTBOX_H_
