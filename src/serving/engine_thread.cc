#include "folio/serving/engine_thread.h"

#include <algorithm>

#include "folio/core/check.h"

namespace folio::serving {

EngineThread::EngineThread(engine::Engine& engine, EngineThreadConfig config)
    : engine_(engine),
      config_(config),
      page_bytes_(kv::PagedKvCache::BytesPerPage(engine.cache().config())) {
  Publish(0);
  thread_ = std::thread([this] { Run(); });
}

EngineThread::~EngineThread() { Stop(); }

Status EngineThread::Submit(Submission request) {
  std::vector<Submission> one;
  one.push_back(std::move(request));
  return SubmitAll(std::move(one));
}

Status EngineThread::SubmitAll(std::vector<Submission> requests) {
  {
    std::lock_guard lock(mu_);
    FOLIO_RETURN_IF_ERROR(QueueLocked(requests));
  }
  work_cv_.notify_one();
  return Status::Ok();
}

Status EngineThread::QueueLocked(std::vector<Submission>& requests) {
  if (stopping_) return Status::FailedPrecondition("the engine was shut down");
  if (!accepting_) {
    return Status::FailedPrecondition("the engine is shutting down and takes no new requests");
  }
  if (config_.max_queue != 0 &&
      queued_submits_ + counters_.waiting + requests.size() > config_.max_queue) {
    return Status::ResourceExhausted("the request queue is full (" +
                                     std::to_string(config_.max_queue) +
                                     " requests waiting); retry later");
  }
  const Clock::time_point now = Clock::now();
  for (Submission& r : requests) {
    FOLIO_CHECK(r.sink != nullptr, "request ", r.key, " has no event sink");
    Command c;
    c.kind = Command::Kind::kSubmit;
    c.request = std::move(r);
    c.arrival = now;
    commands_.push_back(std::move(c));
  }
  queued_submits_ += requests.size();
  in_flight_ += requests.size();
  counters_.queued = queued_submits_;
  return Status::Ok();
}

void EngineThread::Abort(uint64_t key) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;  // Stop() aborts everything anyway
    Command c;
    c.kind = Command::Kind::kAbort;
    c.request.key = key;
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
    if (!first.empty()) FOLIO_RETURN_IF_ERROR(QueueLocked(first));
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

void EngineThread::Adopt(engine::RequestId id, uint64_t key, std::shared_ptr<EventSink> sink) {
  FOLIO_CHECK(std::this_thread::get_id() == thread_.get_id(), "Adopt outside a Call");
  FOLIO_CHECK(sink != nullptr, "request ", key, " has no event sink");
  FOLIO_CHECK(key_of_.emplace(id, key).second, "request ", id, " adopted twice");
  const Clock::time_point now = Clock::now();
  Live& live = live_[key];
  live.id = id;
  live.sink = std::move(sink);
  live.sample_done.assign(1, false);
  live.arrival = live.last_token = now;
  std::lock_guard lock(mu_);
  ++in_flight_;
}

bool EngineThread::AbortNow(uint64_t key) {
  FOLIO_CHECK(std::this_thread::get_id() == thread_.get_id(), "AbortNow outside a Call");
  auto it = live_.find(key);
  if (it == live_.end()) return false;
  const Status s = engine_.Abort(it->second.id);
  FOLIO_CHECK(s.ok(), s.ToString());  // every live request is unfinished in the engine
  Event e;
  e.finish = engine::FinishReason::kAbort;
  End(key, e, "abort");
  return true;
}

std::optional<engine::RequestId> EngineThread::IdOf(uint64_t key) const {
  FOLIO_CHECK(std::this_thread::get_id() == thread_.get_id(), "IdOf outside a Call");
  auto it = live_.find(key);
  if (it == live_.end()) return std::nullopt;
  return it->second.id;
}

void EngineThread::StopAccepting() {
  std::lock_guard lock(mu_);
  accepting_ = false;
}

bool EngineThread::accepting() const {
  std::lock_guard lock(mu_);
  return accepting_ && !stopping_;
}

uint64_t EngineThread::in_flight() const {
  std::lock_guard lock(mu_);
  return in_flight_;
}

EngineCounters EngineThread::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

void EngineThread::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void EngineThread::Emit(Live& live, Event e, std::string_view reason) {
  const uint64_t key = e.key;
  if (e.finish != engine::FinishReason::kNone || e.kind == Event::Kind::kError) {
    if (e.index >= live.sample_done.size()) live.sample_done.resize(e.index + 1, false);
    live.sample_done[e.index] = true;
    e.prompt_tokens = live.prompt_tokens;
    e.cached_prompt_tokens = live.cached_prompt_tokens;
    e.final = std::find(live.sample_done.begin(), live.sample_done.end(), false) ==
              live.sample_done.end();
  }
  staged_.emplace_back(live.sink, std::move(e));
  if (!staged_.back().second.final) return;
  if (config_.observer != nullptr) {
    config_.observer->RequestFinished(
        reason, std::chrono::duration<double>(Clock::now() - live.arrival).count());
  }
  key_of_.erase(live.id);
  live_.erase(key);
  std::lock_guard lock(mu_);
  --in_flight_;
}

void EngineThread::End(uint64_t key, const Event& proto, std::string_view reason) {
  auto it = live_.find(key);
  FOLIO_CHECK(it != live_.end(), "no live request ", key);
  Live& live = it->second;
  std::vector<uint64_t> open;
  for (uint64_t i = 0; i < live.sample_done.size(); ++i) {
    if (!live.sample_done[i]) open.push_back(i);
  }
  for (const uint64_t i : open) {
    Event e = proto;
    e.key = key;
    e.index = i;
    Emit(live, std::move(e), reason);  // the last one forgets `live`
  }
}

void EngineThread::Refuse(const std::shared_ptr<EventSink>& sink, uint64_t key, Status error) {
  Event e;
  e.kind = Event::Kind::kError;
  e.key = key;
  e.error = std::move(error);
  e.final = true;
  staged_.emplace_back(sink, std::move(e));
  std::lock_guard lock(mu_);
  --in_flight_;
}

void EngineThread::Add(Command& c) {
  Submission& r = c.request;
  const uint64_t prompt_tokens = r.prompt.size();
  const uint64_t samples = std::max<uint64_t>(r.params.n, 1);
  if (live_.count(r.key) != 0) {
    Refuse(r.sink, r.key,
           Status::InvalidArgument("request key " + std::to_string(r.key) + " is already running"));
    return;
  }
  Result<engine::RequestId> id = engine_.AddRequest(std::move(r.prompt), std::move(r.params));
  if (!id) {
    Refuse(r.sink, r.key, id.error());
    return;
  }
  Live& live = live_[r.key];
  live.id = *id;
  live.sink = r.sink;
  live.sample_done.assign(samples, false);
  live.prompt_tokens = prompt_tokens;
  live.arrival = live.last_token = c.arrival;
  key_of_[*id] = r.key;
  if (config_.observer != nullptr) config_.observer->RequestAccepted(prompt_tokens);
  Event e;
  e.kind = Event::Kind::kAccepted;
  e.key = r.key;
  e.prompt_tokens = prompt_tokens;
  staged_.emplace_back(live.sink, std::move(e));
}

void EngineThread::Handle(Command& c) {
  switch (c.kind) {
    case Command::Kind::kSubmit:
      Add(c);
      return;
    case Command::Kind::kAbort:
      if (live_.count(c.request.key) != 0) AbortNow(c.request.key);
      return;  // else finished (or refused) already
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

void EngineThread::Output(engine::StepOutput& out, Clock::time_point now) {
  auto key = key_of_.find(out.id);
  FOLIO_CHECK(key != key_of_.end(), "no key for request ", out.id);
  Live& live = live_.at(key->second);
  if (!out.new_tokens.empty()) {
    if (config_.observer != nullptr) {
      const bool first = live.generated == 0;
      const double since =
          std::chrono::duration<double>(now - (first ? live.arrival : live.last_token)).count();
      config_.observer->TokensGenerated(out.new_tokens.size(), since, first);
    }
    live.generated += out.new_tokens.size();
    live.last_token = now;
  }
  live.cached_prompt_tokens = std::max(live.cached_prompt_tokens, out.cached_prompt_tokens);
  Event e;
  e.key = key->second;
  e.tokens = std::move(out.new_tokens);
  e.text = std::move(out.text);
  e.logprobs = std::move(out.logprobs);
  e.finish = out.finish;
  e.index = out.index;
  e.beam_score = out.beam_score;
  e.rng_state = out.rng_state;
  e.embedding = std::move(out.embedding);
  Emit(live, std::move(e), engine::FinishReasonName(out.finish));
}

void EngineThread::Run() {
  for (;;) {
    std::deque<Command> commands;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || !commands_.empty() || !live_.empty(); });
      if (stopping_) break;
      commands.swap(commands_);
    }
    uint64_t submits = 0;
    for (Command& c : commands) {
      if (c.kind == Command::Kind::kSubmit) ++submits;
      Handle(c);
    }
    const bool stepping = engine_.HasUnfinished();
    if (stepping) {
      Result<std::vector<engine::StepOutput>> step = engine_.Step();
      if (!step) {
        // Not expected (every request was validated): fail them all rather
        // than leave a caller waiting.
        Event e;
        e.kind = Event::Kind::kError;
        e.error = step.error();
        EndAll(e, "error");
      } else {
        const Clock::time_point now = Clock::now();
        for (engine::StepOutput& out : *step) Output(out, now);
      }
    }
    RunReadyCalls();
    Publish(submits);
    Deliver();
    if (stepping && config_.step_delay.count() > 0) std::this_thread::sleep_for(config_.step_delay);
  }
  // Stopping: every unfinished request ends with an abort, queued calls
  // are dropped (their callers get FailedPrecondition), and every request
  // not yet added gets an answer.
  Event aborted;
  aborted.finish = engine::FinishReason::kAbort;
  // Why, for front ends that report it as an error rather than a finish
  // (OpenAI's API has no "abort" finish_reason).
  aborted.error = Status::FailedPrecondition("the server stopped before the request finished");
  EndAll(aborted, "abort");
  std::deque<Command> left;
  {
    std::lock_guard lock(mu_);
    left.swap(commands_);
  }
  for (Command& c : deferred_) c.done->set_value(false);
  deferred_.clear();
  uint64_t submits = 0;
  for (Command& c : left) {
    if (c.kind == Command::Kind::kCall) {
      c.done->set_value(false);
    } else if (c.kind == Command::Kind::kSubmit) {
      ++submits;
      Refuse(c.request.sink, c.request.key, Status::FailedPrecondition("the engine was shut down"));
    }
  }
  Publish(submits);
  Deliver();
}

void EngineThread::EndAll(const Event& proto, std::string_view reason) {
  std::vector<uint64_t> keys;  // End erases from live_
  for (const auto& [key, live] : live_) keys.push_back(key);
  for (const uint64_t key : keys) {
    (void)engine_.Abort(live_.at(key).id);
    End(key, proto, reason);
  }
}

void EngineThread::Publish(uint64_t handled_submits) {
  // O(1) counters only: this runs every step (PagedKvCache::Stats would
  // walk every page and table).
  const kv::BlockPool& pool = engine_.cache().pool();
  EngineCounters c;
  c.running = engine_.num_running();
  c.waiting = engine_.num_waiting();
  c.pages_total = pool.num_pages();
  c.pages_used = pool.num_used();
  c.pages_free = pool.num_free();
  c.pages_cached = engine_.cached_pages();
  c.page_bytes = page_bytes_;
  c.stats = engine_.stats();
  std::lock_guard lock(mu_);
  queued_submits_ -= handled_submits;
  c.queued = queued_submits_;
  counters_ = c;
}

void EngineThread::Deliver() {
  for (auto& [sink, event] : staged_) sink->Push(std::move(event));
  staged_.clear();
}

}  // namespace folio::serving
