#include "folio/server/channel.h"

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

}  // namespace folio::server
