#include "folio/engine/scheduler.h"

#include <algorithm>
#include <string>
#include <utility>

#include "folio/core/check.h"

namespace folio::engine {

Scheduler::Scheduler(SchedulerConfig config, KvCacheManager* kv,
                     std::shared_ptr<AdmissionPolicy> policy)
    : config_(config), kv_(kv), policy_(std::move(policy)) {
  FOLIO_CHECK(kv_ != nullptr && policy_ != nullptr);
  FOLIO_CHECK(config_.max_num_seqs >= 1 && config_.max_num_batched_tokens >= config_.max_num_seqs);
}

void Scheduler::AddWaiting(Sequence sequence) {
  FOLIO_CHECK(!sequence.tokens.empty() && !sequence.seq);
  const RequestId id = sequence.id;
  FOLIO_CHECK(sequences_.emplace(id, std::move(sequence)).second, "request ", id, " exists");
  waiting_.push_back(id);
}

void Scheduler::AddRunning(Sequence sequence) {
  FOLIO_CHECK(sequence.seq.has_value());
  const RequestId id = sequence.id;
  auto [it, added] = sequences_.emplace(id, std::move(sequence));
  FOLIO_CHECK(added, "request ", id, " exists");
  running_.push_back(id);
  policy_->OnAdmit(it->second);
}

Sequence& Scheduler::Get(RequestId id) {
  auto it = sequences_.find(id);
  FOLIO_CHECK(it != sequences_.end(), "no request ", id);
  return it->second;
}

const Sequence& Scheduler::sequence(RequestId id) const {
  auto it = sequences_.find(id);
  FOLIO_CHECK(it != sequences_.end(), "no request ", id);
  return it->second;
}

void Scheduler::Release(Sequence& s) {
  s.draft.clear();
  if (!s.seq) return;
  kv_->Free(*s.seq);
  s.seq.reset();
  s.num_computed = 0;
}

void Scheduler::Unadmit(const ScheduledSequence& p) {
  Sequence& s = Get(p.id);
  policy_->OnRelease(s);
  Release(s);
}

void Scheduler::Preempt(Sequence& s) {
  policy_->OnRelease(s);
  Release(s);
  running_.erase(std::find(running_.begin(), running_.end(), s.id));
  waiting_.push_front(s.id);
  ++stats_.preemptions;
}

Result<SchedulerOutput> Scheduler::Schedule() {
  SchedulerOutput out;
  StepBudget b;
  b.tokens = config_.max_num_batched_tokens;
  for (const RequestId id : running_) b.slots += sequences_.at(id).group_size;
  ScheduleRunning(b, out.scheduled);
  Status s = AdmitWaiting(b, out.scheduled);
  if (s.ok()) s = MakeRoom(b, out);
  if (!s.ok()) {
    // An error before the step ran undoes this step's admissions.
    for (const ScheduledSequence& p : out.scheduled) {
      if (p.admitted_now) Unadmit(p);
    }
    return s;
  }
  Emit(out);
  return out;
}

void Scheduler::ScheduleRunning(StepBudget& b, std::vector<ScheduledSequence>& picks) {
  for (const bool decodes : {true, false}) {
    for (const RequestId id : running_) {
      const Sequence& s = sequences_.at(id);
      // Nothing pending: a beam waiting for its siblings' logits.
      if (s.num_pending() == 0 || (s.num_pending() == 1) != decodes || b.tokens == 0) continue;
      const uint64_t drafted = decodes ? std::min<uint64_t>(s.draft.size(), b.tokens - 1) : 0;
      const uint64_t n = std::min(s.num_pending(), b.tokens) + drafted;
      ScheduledSequence p;
      p.id = id;
      p.seq = *s.seq;
      p.num_tokens = n;
      p.num_draft = drafted;
      p.new_pages = kv_->NumNewPages(*s.seq, s.num_computed, n);
      b.needed += p.new_pages;
      b.promised += kv_->NumNewPages(*s.seq, s.num_computed, s.num_pending() + drafted);
      picks.push_back(p);
      b.tokens -= n;
    }
  }
}

Status Scheduler::AdmitWaiting(StepBudget& b, std::vector<ScheduledSequence>& picks) {
  for (size_t i = 0; i < waiting_.size() && b.tokens != 0;) {
    FOLIO_ASSIGN_OR_RETURN(const size_t taken, AdmitUnit(i, b, picks));
    if (taken == 0) break;  // FCFS: nobody overtakes the head of the queue
    i += taken;
  }
  return Status::Ok();
}

Result<size_t> Scheduler::AdmitUnit(size_t i, StepBudget& b,
                                    std::vector<ScheduledSequence>& picks) {
  const Sequence& head = sequences_.at(waiting_[i]);
  size_t count = 1;
  while (head.lockstep && i + count < waiting_.size() &&
         sequences_.at(waiting_[i + count]).group_id() == head.group_id()) {
    ++count;
  }
  // Each member needs a token of the budget and its slots.
  uint64_t unit_slots = 0;
  for (size_t k = 0; k < count; ++k) unit_slots += sequences_.at(waiting_[i + k]).group_size;
  if (b.tokens < count || b.slots + unit_slots > config_.max_num_seqs) return 0;
  if (head.whole_prompt && head.tokens.size() > b.tokens) return 0;  // waits for a whole budget
  std::vector<uint64_t> need_all;
  uint64_t need_unit = 0;
  auto release_started = [&] {
    for (size_t k = 0; k < need_all.size(); ++k) Release(sequences_.at(waiting_[i + k]));
  };
  for (size_t k = 0; k < count; ++k) {
    Sequence& s = sequences_.at(waiting_[i + k]);
    Result<KvCacheManager::Started> started = kv_->StartSequence(s.tokens, !s.every_row);
    if (!started.ok()) {
      release_started();
      return started.status();
    }
    s.seq = started->seq;
    s.num_computed = started->num_cached_tokens;
    need_all.push_back(kv_->NumNewPages(*s.seq, s.num_computed, s.num_pending()));
    need_unit += need_all.back();
  }
  const AdmissionQuery q{head,
                         b.promised,
                         need_unit,
                         kv_->NumAvailablePages(),
                         kv_->num_pages(),
                         running_.empty() && b.admitted == 0};
  if (!policy_->CanAdmit(q)) {
    release_started();
    return 0;
  }
  const uint64_t page = kv_->page_size();
  for (size_t k = 0; k < count; ++k) {
    Sequence& s = sequences_.at(waiting_[i + k]);
    policy_->OnAdmit(s);
    const uint64_t n = std::min(s.num_pending(), b.tokens - (count - 1 - k));
    ScheduledSequence p;
    p.id = s.id;
    p.seq = *s.seq;
    p.num_tokens = n;
    p.admitted_now = true;
    p.new_pages = kv_->NumNewPages(*s.seq, s.num_computed, n);
    p.prefix_query_tokens = (s.tokens.size() - 1) / page * page;
    p.prefix_hit_tokens = s.num_computed;
    b.needed += p.new_pages;
    b.promised += need_all[k];
    picks.push_back(p);
    b.tokens -= n;
    ++b.admitted;
    b.slots += s.group_size;
  }
  return count;
}

Status Scheduler::MakeRoom(StepBudget& b, SchedulerOutput& out) {
  std::vector<ScheduledSequence>& picks = out.scheduled;
  while (!picks.empty()) {
    std::vector<std::pair<kv::SeqId, uint64_t>> requests;
    for (const ScheduledSequence& p : picks) requests.emplace_back(p.seq, p.num_tokens);
    FOLIO_ASSIGN_OR_RETURN(std::optional<kv::AppendPlan> plan, kv_->Allocate(requests, b.needed));
    if (plan) {
      out.plan = std::move(*plan);
      return Status::Ok();
    }
    if (DropDrafts(b, picks)) continue;
    if (picks.back().admitted_now) {
      ShedNewestAdmission(b, picks);
    } else {
      PreemptNewestGroup(b, out);
    }
  }
  return Status::Ok();
}

bool Scheduler::DropDrafts(StepBudget& b, std::vector<ScheduledSequence>& picks) {
  bool dropped = false;
  for (ScheduledSequence& p : picks) {
    if (p.num_draft == 0) continue;
    const Sequence& s = sequences_.at(p.id);
    b.needed -= p.new_pages;
    p.num_tokens -= p.num_draft;
    p.num_draft = 0;
    p.new_pages = kv_->NumNewPages(p.seq, s.num_computed, p.num_tokens);
    b.needed += p.new_pages;
    dropped = true;
  }
  return dropped;
}

void Scheduler::ShedNewestAdmission(StepBudget& b, std::vector<ScheduledSequence>& picks) {
  const Sequence& newest = sequences_.at(picks.back().id);
  const RequestId group = newest.group_id();
  const bool lockstep = newest.lockstep;
  do {
    Unadmit(picks.back());
    b.needed -= picks.back().new_pages;
    picks.pop_back();
  } while (lockstep && !picks.empty() && picks.back().admitted_now &&
           sequences_.at(picks.back().id).group_id() == group);
}

void Scheduler::PreemptNewestGroup(StepBudget& b, SchedulerOutput& out) {
  // Nothing admitted now is left: every pick runs already, so running_ is
  // not empty. A parallel sample goes with its whole group: its siblings
  // hold the pages it shares, so preempting it alone would free almost
  // nothing.
  std::vector<ScheduledSequence>& picks = out.scheduled;
  const RequestId group = Get(running_.back()).group_id();
  std::vector<RequestId> victims;
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if (sequences_.at(*it).group_id() == group) victims.push_back(*it);
  }
  for (const RequestId v : victims) {
    for (const ScheduledSequence& p : picks) {
      if (p.id == v) b.needed -= p.new_pages;
    }
    picks.erase(std::remove_if(picks.begin(), picks.end(),
                               [&](const ScheduledSequence& p) { return p.id == v; }),
                picks.end());
    out.preempted.push_back(v);
    Preempt(Get(v));  // newest first, so the group's oldest ends up first in line
  }
}

void Scheduler::Emit(SchedulerOutput& out) const {
  const bool typed = std::any_of(out.scheduled.begin(), out.scheduled.end(), [&](const auto& p) {
    return !sequences_.at(p.id).token_types.empty();
  });
  for (const ScheduledSequence& p : out.scheduled) {
    const Sequence& s = sequences_.at(p.id);
    out.seqs.push_back(p.seq);
    const auto first = s.tokens.begin() + static_cast<ptrdiff_t>(s.num_computed);
    out.token_ids.insert(out.token_ids.end(), first,
                         first + static_cast<ptrdiff_t>(p.num_tokens - p.num_draft));
    out.token_ids.insert(out.token_ids.end(), s.draft.begin(),
                         s.draft.begin() + static_cast<ptrdiff_t>(p.num_draft));
    if (!typed) continue;
    if (s.token_types.empty()) {
      out.token_types.resize(out.token_ids.size(), 0);
      continue;
    }
    FOLIO_CHECK(p.num_draft == 0 && s.num_computed + p.num_tokens <= s.token_types.size());
    const auto types = s.token_types.begin() + static_cast<ptrdiff_t>(s.num_computed);
    out.token_types.insert(out.token_types.end(), types,
                           types + static_cast<ptrdiff_t>(p.num_tokens));
  }
}

void Scheduler::Abandon(SchedulerOutput&& out) {
  if (out.plan) kv_->Abort(std::move(*out.plan));
  for (const ScheduledSequence& p : out.scheduled) {
    if (p.admitted_now) Unadmit(p);
    if (p.num_draft != 0) Get(p.id).draft.clear();
  }
  out.scheduled.clear();
}

Status Scheduler::Commit(const SchedulerOutput& out) {
  if (out.empty()) return Status::Ok();
  FOLIO_CHECK(out.plan.has_value());
  // Only a step's drafts can be taken back (AcceptDraft truncates to the
  // accepted ones), so a window's pages go back as soon as the rest allows.
  std::vector<uint64_t> num_revocable;
  for (const ScheduledSequence& p : out.scheduled) num_revocable.push_back(p.num_draft);
  kv_->Commit(*out.plan, num_revocable);
  for (const ScheduledSequence& p : out.scheduled) {
    Sequence& s = Get(p.id);
    if (p.admitted_now) {
      running_.push_back(p.id);
      waiting_.erase(std::find(waiting_.begin(), waiting_.end(), p.id));
      stats_.prefix_query_tokens += p.prefix_query_tokens;
      stats_.prefix_hit_tokens += p.prefix_hit_tokens;
    }
    if (s.num_pending() == 1 && s.num_computed >= s.num_prompt_tokens) {
      ++stats_.decode_tokens;
    } else {
      stats_.prompt_tokens_computed += p.num_tokens;
    }
    s.num_computed += p.num_tokens - p.num_draft;  // a draft's rows wait for AcceptDraft
    s.draft.resize(p.num_draft);
  }
  stats_.peak_running = std::max<uint64_t>(stats_.peak_running, running_.size());
  for (const ScheduledSequence& p : out.scheduled) {
    const Sequence& s = sequences_.at(p.id);
    FOLIO_RETURN_IF_ERROR(kv_->CacheFullPages(p.seq, s.tokens, s.num_computed));
  }
  return Status::Ok();
}

Status Scheduler::Fork(RequestId parent, RequestId child) {
  Sequence& p = Get(parent);
  FOLIO_CHECK(p.seq.has_value() && p.num_pending() == 0 && sequences_.count(child) == 0, "request ",
              parent, " cannot fork into ", child);
  FOLIO_ASSIGN_OR_RETURN(kv::SeqId seq, kv_->Fork(*p.seq));
  Sequence c = p;
  c.id = child;
  c.group = p.group_id();
  c.seq = seq;
  c.group_size = 1;
  c.draft.clear();
  if (p.group_size > 1) --p.group_size;
  const Sequence& added = sequences_.emplace(child, std::move(c)).first->second;
  running_.push_back(child);
  policy_->OnAdmit(added);
  return Status::Ok();
}

void Scheduler::SetDraft(RequestId id, std::vector<int32_t> draft) {
  Get(id).draft = std::move(draft);
}

Status Scheduler::AcceptDraft(RequestId id, uint64_t num_accepted) {
  Sequence& s = Get(id);
  FOLIO_CHECK(s.seq.has_value() && s.num_pending() == 0 && num_accepted <= s.draft.size(),
              "request ", id, ": no committed draft of ", num_accepted, " tokens");
  s.tokens.insert(s.tokens.end(), s.draft.begin(),
                  s.draft.begin() + static_cast<ptrdiff_t>(num_accepted));
  s.num_computed += num_accepted;
  s.draft.clear();
  FOLIO_RETURN_IF_ERROR(kv_->Truncate(*s.seq, s.num_computed));
  return kv_->CacheFullPages(*s.seq, s.tokens, s.num_computed);
}

void Scheduler::AppendToken(RequestId id, int32_t token) {
  Sequence& s = Get(id);
  FOLIO_CHECK(s.num_pending() == 0, "request ", id, " still has tokens to feed");
  s.tokens.push_back(token);
}

void Scheduler::Finish(RequestId id) {
  Sequence& s = Get(id);
  const auto run = std::find(running_.begin(), running_.end(), id);
  if (run != running_.end()) {
    policy_->OnRelease(s);
    running_.erase(run);
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), id));
  }
  Release(s);
  sequences_.erase(id);
}

}  // namespace folio::engine
