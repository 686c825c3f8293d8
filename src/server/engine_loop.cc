#include "folio/server/engine_loop.h"

namespace folio::server {

void Channel::Push(Event e) {
  std::function<void()> notify;
  {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
    notify = notify_;
  }
  cv_.notify_one();
  if (notify) notify();
}

bool Channel::TryTake(std::vector<Event>& out) {
  std::lock_guard lock(mu_);
  if (events_.empty()) return false;
  for (Event& e : events_) out.push_back(std::move(e));
  events_.clear();
  return true;
}

void Channel::SetNotify(std::function<void()> notify) {
  std::lock_guard lock(mu_);
  notify_ = std::move(notify);
}

bool Channel::Wait(std::vector<Event>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
  for (Event& e : events_) out.push_back(std::move(e));
  events_.clear();
  return true;
}

EngineLoop::EngineLoop(engine::Engine& engine, EngineLoopConfig config, Metrics& metrics)
    : engine_(engine), config_(config), metrics_(metrics) {
  Publish(0);
  thread_ = std::thread([this] { Run(); });
}

EngineLoop::~EngineLoop() { Stop(); }

Result<std::shared_ptr<Channel>> EngineLoop::Submit(std::vector<int32_t> prompt,
                                                    engine::RequestParams params) {
  auto channel = std::make_shared<Channel>();
  {
    std::lock_guard lock(mu_);
    if (!accepting_ || stopping_) {
      return Status::FailedPrecondition("the server is shutting down");
    }
    if (queued_adds_ + snapshot_.waiting >= config_.max_queue) {
      return Status::ResourceExhausted("the request queue is full (" +
                                       std::to_string(config_.max_queue) +
                                       " requests waiting); retry later");
    }
    commands_.push_back(
        Command{channel, false, std::move(prompt), std::move(params), Clock::now()});
    ++queued_adds_;
    ++in_flight_;
    snapshot_.queued = queued_adds_;
  }
  cv_.notify_one();
  return channel;
}

void EngineLoop::Abort(const std::shared_ptr<Channel>& channel) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;  // Stop() aborts everything anyway
    commands_.push_back(Command{channel, true, {}, {}, Clock::now()});
  }
  cv_.notify_one();
}

void EngineLoop::StopAccepting() {
  std::lock_guard lock(mu_);
  accepting_ = false;
}

bool EngineLoop::accepting() const {
  std::lock_guard lock(mu_);
  return accepting_ && !stopping_;
}

uint64_t EngineLoop::in_flight() const {
  std::lock_guard lock(mu_);
  return in_flight_;
}

EngineSnapshot EngineLoop::snapshot() const {
  std::lock_guard lock(mu_);
  return snapshot_;
}

void EngineLoop::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void EngineLoop::Finish(engine::RequestId id, Event e, std::string_view reason) {
  auto it = live_.find(id);
  FOLIO_CHECK(it != live_.end());
  e.prompt_tokens = it->second.prompt_tokens;
  metrics_.CountFinished(reason);
  metrics_.ObserveRequestLatency(
      std::chrono::duration<double>(Clock::now() - it->second.arrival).count());
  const std::vector<bool>& done = it->second.sample_done;
  for (uint64_t i = 0; i < done.size(); ++i) {
    if (done[i] || i == e.index) continue;
    Event other;
    other.kind = e.kind;
    other.finish = e.finish;
    other.error = e.error;
    other.prompt_tokens = e.prompt_tokens;
    other.index = i;
    outbox_.emplace_back(it->second.channel, std::move(other));
  }
  if (e.index >= done.size() || !done[e.index])
    outbox_.emplace_back(it->second.channel, std::move(e));
  by_channel_.erase(it->second.channel.get());
  live_.erase(it);
  std::lock_guard lock(mu_);
  --in_flight_;
}

void EngineLoop::Handle(Command& c) {
  if (c.abort) {
    auto it = by_channel_.find(c.channel.get());
    if (it == by_channel_.end()) return;  // finished (or refused) already
    const engine::RequestId id = it->second;
    Status s = engine_.Abort(id);
    FOLIO_CHECK(s.ok());  // every live request is unfinished in the engine
    Event e;
    e.finish = engine::FinishReason::kAbort;
    Finish(id, std::move(e), "abort");
    return;
  }
  const uint64_t prompt_tokens = c.prompt.size();
  const uint64_t samples = std::max<uint64_t>(c.params.n, 1);
  Result<engine::RequestId> id = engine_.AddRequest(std::move(c.prompt), std::move(c.params));
  if (!id) {
    Event e;
    e.kind = Event::Kind::kError;
    e.error = id.error();
    outbox_.emplace_back(c.channel, std::move(e));
    std::lock_guard lock(mu_);
    --in_flight_;
    return;
  }
  live_[*id] =
      Live{c.channel, std::vector<bool>(samples, false), prompt_tokens, 0, c.arrival, c.arrival};
  by_channel_[c.channel.get()] = *id;
  metrics_.CountTokens(prompt_tokens, 0);
  Event e;
  e.kind = Event::Kind::kAccepted;
  e.prompt_tokens = prompt_tokens;
  outbox_.emplace_back(c.channel, std::move(e));
}

void EngineLoop::Publish(uint64_t handled_adds) {
  // O(1) counters only: this runs every step (PagedKvCache::Stats would
  // walk every page and table).
  const kv::BlockPool& pool = engine_.cache().pool();
  const engine::EngineStats st = engine_.stats();
  std::lock_guard lock(mu_);
  queued_adds_ -= handled_adds;
  snapshot_.running = engine_.num_running();
  snapshot_.waiting = engine_.num_waiting();
  snapshot_.queued = queued_adds_;
  snapshot_.pages_total = pool.num_pages();
  snapshot_.pages_used = pool.num_used();
  snapshot_.pages_free = pool.num_free();
  snapshot_.pages_cached = engine_.cached_pages();
  snapshot_.prefix_query_tokens = st.prefix_query_tokens;
  snapshot_.prefix_hit_tokens = st.prefix_hit_tokens;
  snapshot_.preemptions = st.preemptions;
  snapshot_.steps = st.steps;
  snapshot_.draft_verifications = st.draft_verifications;
  snapshot_.draft_tokens = st.draft_tokens;
  snapshot_.draft_accepted_tokens = st.draft_accepted_tokens;
  snapshot_.drafted_at = st.drafted_at;
  snapshot_.accepted_at = st.accepted_at;
}

void EngineLoop::Run() {
  for (;;) {
    std::deque<Command> commands;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !commands_.empty() || !live_.empty(); });
      if (stopping_) break;
      commands.swap(commands_);
    }
    uint64_t adds = 0;
    for (Command& c : commands) {
      if (!c.abort) ++adds;
      Handle(c);
    }
    bool stepped = false;
    if (engine_.HasUnfinished()) {
      Result<std::vector<engine::StepOutput>> step = engine_.Step();
      stepped = true;
      if (!step) {
        // Not expected (every request was validated); fail them all rather
        // than leave a client waiting.
        Event e;
        e.kind = Event::Kind::kError;
        e.error = step.error();
        FinishAll(e, "error");
      } else {
        const Clock::time_point now = Clock::now();
        for (engine::StepOutput& out : *step) {
          auto it = live_.find(out.id);
          FOLIO_CHECK(it != live_.end());
          Live& live = it->second;
          if (!out.new_tokens.empty()) {
            const double since = std::chrono::duration<double>(
                                     now - (live.generated == 0 ? live.arrival : live.last_token))
                                     .count();
            if (live.generated == 0) {
              metrics_.ObserveTimeToFirstToken(since);
            } else {
              metrics_.ObserveInterTokenLatency(since);
            }
            live.generated += out.new_tokens.size();
            live.last_token = now;
            metrics_.CountTokens(0, out.new_tokens.size());
          }
          Event e;
          e.tokens = std::move(out.new_tokens);
          e.text = std::move(out.text);
          e.logprobs = std::move(out.logprobs);
          e.finish = out.finish;
          e.index = out.index;
          e.beam_score = out.beam_score;
          const bool finishing = out.finish != engine::FinishReason::kNone;
          const bool last =
              finishing && std::count(live.sample_done.begin(), live.sample_done.end(), false) == 1;
          if (!last) {
            if (finishing) live.sample_done[out.index] = true;
            outbox_.emplace_back(live.channel, std::move(e));
          } else {
            const std::string reason(engine::FinishReasonName(out.finish));
            Finish(out.id, std::move(e), reason);
          }
        }
      }
    }
    Publish(adds);
    Deliver();
    if (stepped && config_.step_delay.count() > 0) std::this_thread::sleep_for(config_.step_delay);
  }
  // Stopping: nothing is left to run, every waiting handler gets an answer.
  Event aborted;
  aborted.finish = engine::FinishReason::kAbort;
  FinishAll(aborted, "abort");
  std::deque<Command> left;
  {
    std::lock_guard lock(mu_);
    left.swap(commands_);
  }
  uint64_t adds = 0;
  for (Command& c : left) {
    if (c.abort) continue;
    ++adds;
    Event e;
    e.kind = Event::Kind::kError;
    e.error = Status::FailedPrecondition("the server is shutting down");
    outbox_.emplace_back(c.channel, std::move(e));
    std::lock_guard lock(mu_);
    --in_flight_;
  }
  Publish(adds);
  Deliver();
}

void EngineLoop::FinishAll(const Event& last, std::string_view reason) {
  std::vector<engine::RequestId> ids;  // Finish erases from live_
  for (const auto& [id, live] : live_) ids.push_back(id);
  for (engine::RequestId id : ids) {
    (void)engine_.Abort(id);
    Finish(id, last, reason);
  }
}

void EngineLoop::Deliver() {
  for (auto& [channel, event] : outbox_) channel->Push(std::move(event));
  outbox_.clear();
}

}  // namespace folio::server
