#include "engine_thread.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "folio/core/check.h"

namespace folio::python {

Result<std::unique_ptr<EngineThread>> EngineThread::Start(engine::Engine& engine,
                                                          std::chrono::microseconds step_delay) {
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
  return std::unique_ptr<EngineThread>(new EngineThread(engine, fds[0], fds[1], step_delay));
}

EngineThread::EngineThread(engine::Engine& engine, int read_fd, int write_fd,
                           std::chrono::microseconds step_delay)
    : engine_(engine), pipe_{read_fd, write_fd}, step_delay_(step_delay) {
  Publish();
  thread_ = std::thread([this] { Run(); });
}

EngineThread::~EngineThread() {
  Stop();
  close(pipe_[0]);
  close(pipe_[1]);
}

Status EngineThread::Submit(uint64_t key, std::vector<int32_t> prompt,
                            engine::RequestParams params) {
  std::vector<Submission> one;
  one.push_back({key, std::move(prompt), std::move(params)});
  return SubmitAll(std::move(one));
}

Status EngineThread::SubmitAll(std::vector<Submission> requests) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Status::FailedPrecondition("the engine was shut down");
    QueueLocked(requests);
  }
  work_cv_.notify_one();
  return Status::Ok();
}

void EngineThread::QueueLocked(std::vector<Submission>& requests) {
  for (Submission& r : requests) {
    Command c;
    c.kind = Command::Kind::kSubmit;
    c.key = r.key;
    c.prompt = std::move(r.prompt);
    c.params = std::move(r.params);
    commands_.push_back(std::move(c));
  }
  queued_submits_ += requests.size();
  in_flight_ += requests.size();
  counters_.waiting += requests.size();
}

void EngineThread::Abort(uint64_t key) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;  // Stop() aborts everything anyway
    Command c;
    c.kind = Command::Kind::kAbort;
    c.key = key;
    commands_.push_back(std::move(c));
  }
  work_cv_.notify_one();
}

Status EngineThread::Call(const std::function<void(engine::Engine&)>& fn) {
  return CallWhen(nullptr, fn);
}

Status EngineThread::CallWhen(const std::function<bool(const engine::Engine&)>& ready,
                              const std::function<void(engine::Engine&)>& fn,
                              std::vector<Submission> first) {
  std::promise<bool> done;
  std::future<bool> ran = done.get_future();
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Status::FailedPrecondition("the engine was shut down");
    QueueLocked(first);
    Command c;
    c.kind = Command::Kind::kCall;
    c.ready = ready;
    c.fn = fn;
    c.done = &done;
    commands_.push_back(std::move(c));
  }
  work_cv_.notify_one();
  if (!ran.get()) return Status::FailedPrecondition("the engine was shut down");
  return Status::Ok();
}

void EngineThread::Adopt(engine::RequestId id, uint64_t key) {
  FOLIO_CHECK(std::this_thread::get_id() == thread_.get_id(), "Adopt outside a Call");
  FOLIO_CHECK(by_id_.emplace(id, key).second, "request ", id, " adopted twice");
  by_key_[key] = id;
  std::lock_guard lock(mu_);
  ++in_flight_;
}

bool EngineThread::AbortNow(uint64_t key) {
  FOLIO_CHECK(std::this_thread::get_id() == thread_.get_id(), "AbortNow outside a Call");
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return false;
  const Status s = engine_.Abort(it->second);
  FOLIO_CHECK(s.ok(), s.ToString());  // every known request is unfinished
  RequestEvent e;
  e.finish = engine::FinishReason::kAbort;
  End(key, e);
  return true;
}

std::optional<engine::RequestId> EngineThread::IdOf(uint64_t key) const {
  FOLIO_CHECK(std::this_thread::get_id() == thread_.get_id(), "IdOf outside a Call");
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return std::nullopt;
  return it->second;
}

std::vector<RequestEvent> EngineThread::Take() {
  std::vector<RequestEvent> out;
  std::lock_guard lock(mu_);
  out.swap(outbox_);
  if (signaled_) {
    char buf[64];
    while (read(pipe_[0], buf, sizeof(buf)) > 0) {
    }
    signaled_ = false;
  }
  return out;
}

std::vector<RequestEvent> EngineThread::Wait(std::chrono::milliseconds timeout) {
  {
    std::unique_lock lock(mu_);
    events_cv_.wait_for(lock, timeout, [&] { return !outbox_.empty(); });
  }
  return Take();
}

EngineCounters EngineThread::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

uint64_t EngineThread::in_flight() const {
  std::lock_guard lock(mu_);
  return in_flight_;
}

void EngineThread::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void EngineThread::End(uint64_t key, const RequestEvent& proto) {
  std::vector<uint64_t> open;
  if (auto it = finished_samples_.find(key); it != finished_samples_.end()) {
    for (uint64_t i = 0; i < it->second.size(); ++i) {
      if (!it->second[i]) open.push_back(i);
    }
  }
  if (open.empty()) open.push_back(0);
  for (size_t j = 0; j < open.size(); ++j) {
    RequestEvent e = proto;
    e.key = key;
    e.index = open[j];
    Emit(std::move(e), j + 1 == open.size());
  }
}

void EngineThread::Emit(RequestEvent e, bool final) {
  e.final = final;
  if (final) {
    auto it = by_key_.find(e.key);
    if (it != by_key_.end()) {
      by_id_.erase(it->second);
      by_key_.erase(it);
    }
    finished_samples_.erase(e.key);
    std::lock_guard lock(mu_);
    --in_flight_;
  }
  staged_.push_back(std::move(e));
}

void EngineThread::Handle(Command& c) {
  switch (c.kind) {
    case Command::Kind::kSubmit: {
      const uint64_t samples = std::max<uint64_t>(c.params.n, 1);
      Result<engine::RequestId> id = engine_.AddRequest(std::move(c.prompt), std::move(c.params));
      if (!id) {
        RequestEvent e;
        e.key = c.key;
        e.error = id.error();
        Emit(std::move(e), /*final=*/true);
        return;
      }
      by_key_[c.key] = *id;
      by_id_[*id] = c.key;
      finished_samples_[c.key].assign(samples, false);
      return;
    }
    case Command::Kind::kAbort:
      AbortNow(c.key);  // false: finished (or refused) already
      return;
    case Command::Kind::kCall:
      deferred_.push_back(std::move(c));
      RunReadyCalls();
      return;
  }
}

void EngineThread::RunReadyCalls() {
  for (size_t i = 0; i < deferred_.size();) {
    Command& c = deferred_[i];
    if (c.ready && !c.ready(engine_)) {
      ++i;
      continue;
    }
    c.fn(engine_);
    c.done->set_value(true);
    deferred_.erase(deferred_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void EngineThread::Run() {
  for (;;) {
    std::deque<Command> commands;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || !commands_.empty() || !by_key_.empty(); });
      if (stopping_) break;
      commands.swap(commands_);
      queued_submits_ = 0;  // from here on they count in the engine's queue
    }
    for (Command& c : commands) Handle(c);
    const bool stepping = engine_.HasUnfinished();
    if (stepping) {
      Result<std::vector<engine::StepOutput>> step = engine_.Step();
      if (!step) {
        // Not expected (every request was validated): fail them all rather
        // than leave a caller waiting.
        std::vector<uint64_t> keys;
        for (const auto& [key, id] : by_key_) keys.push_back(key);
        for (const uint64_t key : keys) {
          (void)engine_.Abort(by_key_.at(key));
          RequestEvent e;
          e.error = step.error();
          End(key, e);
        }
      } else {
        for (engine::StepOutput& out : *step) {
          auto it = by_id_.find(out.id);
          FOLIO_CHECK(it != by_id_.end(), "no key for request ", out.id);
          RequestEvent e;
          e.key = it->second;
          e.tokens = std::move(out.new_tokens);
          e.text = std::move(out.text);
          e.logprobs = std::move(out.logprobs);
          e.finish = out.finish;
          e.index = out.index;
          e.beam_score = out.beam_score;
          e.rng_state = out.rng_state;
          bool final = out.finish != engine::FinishReason::kNone;
          if (final) {
            std::vector<bool>& done = finished_samples_[e.key];
            if (done.size() <= out.index) done.resize(out.index + 1, false);
            done[out.index] = true;
            final = std::find(done.begin(), done.end(), false) == done.end();
          }
          Emit(std::move(e), final);
        }
      }
    }
    RunReadyCalls();
    // Counters first, then events: a caller that sees its request finish
    // sees the pages it freed too.
    Publish();
    Deliver();
    if (stepping && step_delay_.count() > 0) std::this_thread::sleep_for(step_delay_);
  }
  // Stopping: every unfinished request ends with an abort; queued calls
  // are dropped (their callers get FailedPrecondition).
  AbortAll();
  std::deque<Command> left;
  {
    std::lock_guard lock(mu_);
    left.swap(commands_);
  }
  for (Command& c : deferred_) c.done->set_value(false);
  deferred_.clear();
  for (Command& c : left) {
    if (c.kind == Command::Kind::kCall) {
      c.done->set_value(false);
    } else if (c.kind == Command::Kind::kSubmit) {
      RequestEvent e;
      e.key = c.key;
      e.error = Status::FailedPrecondition("the engine was shut down");
      Emit(std::move(e), /*final=*/true);
    }
  }
  Publish();
  Deliver();
}

void EngineThread::AbortAll() {
  std::vector<uint64_t> keys;
  for (const auto& [key, id] : by_key_) keys.push_back(key);
  for (const uint64_t key : keys) AbortNow(key);
}

void EngineThread::Publish() {
  // O(1) counters only: this runs every step.
  const kv::BlockPool& pool = engine_.cache().pool();
  EngineCounters c;
  c.running = engine_.num_running();
  c.pages_total = pool.num_pages();
  c.pages_used = pool.num_used();
  c.pages_free = pool.num_free();
  c.pages_cached = engine_.cached_pages();
  c.stats = engine_.stats();
  std::lock_guard lock(mu_);
  c.waiting = engine_.num_waiting() + queued_submits_;
  counters_ = c;
}

void EngineThread::Deliver() {
  if (staged_.empty()) return;
  {
    std::lock_guard lock(mu_);
    for (RequestEvent& e : staged_) outbox_.push_back(std::move(e));
    if (!signaled_) {
      const char byte = 1;
      // The pipe is empty whenever signaled_ is false, so one byte fits.
      FOLIO_CHECK(write(pipe_[1], &byte, 1) == 1, "event pipe: ", std::strerror(errno));
      signaled_ = true;
    }
  }
  staged_.clear();
  events_cv_.notify_all();
}

}  // namespace folio::python
