#include "outbox.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "folio/core/check.h"

namespace folio::python {

Result<std::shared_ptr<Outbox>> Outbox::Create() {
  int fds[2];
  if (pipe(fds) != 0) {
    return Status::IoError(std::string("cannot create the engine's event pipe: ") +
                           std::strerror(errno));
  }
  for (const int fd : fds) {
    // Non-blocking both ways: the engine never waits for a reader, and Take
    // drains without blocking.
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  return std::shared_ptr<Outbox>(new Outbox(fds[0], fds[1]));
}

Outbox::~Outbox() {
  close(pipe_[0]);
  close(pipe_[1]);
}

void Outbox::Push(serving::Event e) {
  // Python reads outputs and errors only: an acceptance would cost a
  // wake-up of the reader per request and say nothing.
  if (e.kind == serving::Event::Kind::kAccepted) return;
  {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
    if (!signaled_) {
      const char byte = 1;
      // The pipe is empty whenever signaled_ is false, so one byte fits.
      FOLIO_CHECK(write(pipe_[1], &byte, 1) == 1, "event pipe: ", std::strerror(errno));
      signaled_ = true;
    }
  }
  cv_.notify_all();
}

std::vector<serving::Event> Outbox::Take() {
  std::vector<serving::Event> out;
  std::lock_guard lock(mu_);
  out.swap(events_);
  if (signaled_) {
    char buf[64];
    while (read(pipe_[0], buf, sizeof(buf)) > 0) {
    }
    signaled_ = false;
  }
  return out;
}

std::vector<serving::Event> Outbox::Wait(std::chrono::milliseconds timeout) {
  {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !events_.empty(); });
  }
  return Take();
}

}  // namespace folio::python
