// Scheduler: the waiting and running queues, and a plan for each step.
//
// Every step: running sequences decode first (one token each, plus the
// draft tokens a speculative drafter proposed for it, as far as the budget
// allows), then
// partially prefilled ones get their next prompt chunk, then waiting
// requests are admitted first come first served, all under a token budget
// (max_num_batched_tokens) and a cap on running sequences (max_num_seqs).
// The scheduler never runs a model: it asks the KvCacheManager for pages
// and hands the model runner a SchedulerOutput, which the engine then
// commits (the step ran) or abandons (it failed).
//
// Admission: a waiting request starts on the longest prefix of its tokens
// that the prefix cache holds, then is admitted only if its
// AdmissionPolicy agrees. folio's policy (WatermarkAdmission) admits when
// the pool can hold the request's whole pending prefill on top of what the
// step's running sequences were promised, plus a watermark of free pages
// kept for their growth (waived when nothing runs, so no request starves).
// "Whole pending prefill", not only its next chunk: a request admitted on
// its first chunk alone would be preempted as soon as the others grow, and
// recomputed, again and again. The head of the queue is never overtaken:
// when it does not fit, nobody behind it is admitted.
//
// Making room: when the step's pages do not fit, cached prefix pages are
// evicted first (least recently used), then drafts are dropped (a
// speculation never costs anyone their pages), then this step's newest admissions
// are undone, then running sequences are preempted, most recently admitted
// first (vLLM's recompute policy): their pages are freed and they go back
// to the front of the waiting queue, to be recomputed later (mostly from
// the prefix cache). The parallel samples of one request are preempted
// together, since they share pages.
//
// Atomicity: Schedule either returns a plan whose pages are reserved, or an
// error having undone its admissions (preemptions it made stand: they are
// complete state changes, not half-done ones). Abandon undoes a plan and
// its admissions exactly; Commit makes it the new state.
#ifndef FOLIO_ENGINE_SCHEDULER_H_
#define FOLIO_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "folio/core/status.h"
#include "folio/engine/kv_cache_manager.h"
#include "folio/engine/request.h"
#include "folio/kv/paged_kv_cache.h"

namespace folio::engine {

// A request's token stream, as the scheduler tracks it.
struct Sequence {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // the prompt, then generated tokens
  uint64_t num_prompt_tokens = 0;
  uint64_t max_tokens = 0;       // generated tokens it may have
  uint64_t num_computed = 0;     // tokens whose K/V are in the cache
  std::optional<kv::SeqId> seq;  // while it holds pages
  // Speculative decoding: tokens proposed to follow `tokens`, fed after its
  // pending token in the next step and verified by the engine. Never part
  // of `tokens` until accepted; after Commit, exactly the ones fed.
  std::vector<int32_t> draft;
  // Running slots (max_num_seqs) it takes: a request for n parallel
  // samples holds n from admission, and becomes n sequences of one slot
  // each when it forks after its prefill.
  uint64_t group_size = 1;
  // The request whose samples it belongs to, for a forked sample (unset:
  // its own): preemption takes a group whole.
  std::optional<RequestId> group;
  RequestId group_id() const { return group.value_or(id); }
  // Beam search: the group's beams advance together, so after a preemption
  // its waiting members are admitted together or not at all (a beam
  // admitted alone would wait for siblings that may never fit).
  bool lockstep = false;

  // Tokens still to feed: its prompt and generated tokens beyond the cache.
  // Every prompt row must be computed (pooled embeddings): the sequence
  // never starts on pages of the prefix cache.
  bool every_row = false;
  // The prompt is computed in one step or not at all (an encoder's rows
  // attend to each other): admitted only when the step's budget holds it.
  bool whole_prompt = false;
  // An encoder's token type per prompt token (RequestParams::token_types);
  // empty: all type 0.
  std::vector<int32_t> token_types;
  uint64_t num_pending() const { return tokens.size() - num_computed; }
  uint64_t num_output_tokens() const { return tokens.size() - num_prompt_tokens; }
  std::span<const int32_t> prompt() const { return std::span(tokens).first(num_prompt_tokens); }
  std::span<const int32_t> output() const { return std::span(tokens).subspan(num_prompt_tokens); }
};

// What an AdmissionPolicy is asked about a waiting sequence. The sequence
// has started (it holds its cached prefix, counted in num_computed).
struct AdmissionQuery {
  const Sequence& sequence;
  uint64_t pages_promised;   // to the step's earlier sequences, until their prompts are in
  uint64_t pages_needed;     // for this sequence's whole pending prefill
  uint64_t pages_available;  // free, plus cached ones nothing reads
  uint64_t num_pages;        // the pool
  bool alone;                // nothing runs and nothing was admitted this step
};

// Decides admissions. OnAdmit and OnRelease bracket every admission: a
// policy that keeps books (a reservation) sees each admitted sequence
// released exactly once (preempted, finished, aborted, or its admission
// undone).
class AdmissionPolicy {
 public:
  virtual ~AdmissionPolicy() = default;
  virtual bool CanAdmit(const AdmissionQuery& q) const = 0;
  virtual void OnAdmit(const Sequence& /*sequence*/) {}
  virtual void OnRelease(const Sequence& /*sequence*/) {}
};

// folio's admission: the whole pending prefill fits on top of the step's
// promises and a watermark of free pages, or nothing else runs.
class WatermarkAdmission final : public AdmissionPolicy {
 public:
  explicit WatermarkAdmission(uint64_t watermark_pages) : watermark_pages_(watermark_pages) {}
  bool CanAdmit(const AdmissionQuery& q) const override {
    return q.alone || q.pages_promised + q.pages_needed + watermark_pages_ <= q.pages_available;
  }

 private:
  uint64_t watermark_pages_;
};

struct SchedulerConfig {
  uint64_t max_num_batched_tokens = 256;  // tokens per step, all sequences
  uint64_t max_num_seqs = 8;              // running sequences
};

// One sequence's part of a step: tokens [num_computed, num_computed +
// num_tokens) of its stream.
struct ScheduledSequence {
  RequestId id = 0;
  kv::SeqId seq = 0;
  uint64_t num_tokens = 0;
  bool admitted_now = false;  // starts running with this step
  uint64_t new_pages = 0;     // pages this step allocates for it (as counted)
  // Of num_tokens, the draft tokens fed after the pending one (decodes
  // only): their K/V rows are written but unconfirmed until AcceptDraft.
  uint64_t num_draft = 0;
  // Prefix-cache accounting of an admission: tokens that could have come
  // from the cache (whole pages before the last token) and those that did.
  uint64_t prefix_query_tokens = 0;
  uint64_t prefix_hit_tokens = 0;
};

// The plan of one step. Rows are in batch order: decodes, then prompt
// chunks of running sequences, then this step's admissions.
struct SchedulerOutput {
  std::vector<ScheduledSequence> scheduled;
  std::vector<RequestId> preempted;  // sent back to waiting while planning
  std::vector<kv::SeqId> seqs;       // [scheduled.size()]
  std::vector<int32_t> token_ids;    // the tokens fed, sequence by sequence
  // Their token types (Sequence::token_types; 0 for a sequence without);
  // empty when every fed row is type 0.
  std::vector<int32_t> token_types;
  std::optional<kv::AppendPlan> plan;  // set iff scheduled is not empty
  bool empty() const { return scheduled.empty(); }
};

struct SchedulerStats {
  uint64_t preemptions = 0;
  uint64_t prompt_tokens_computed = 0;  // recomputation after preemption included
  uint64_t decode_tokens = 0;
  uint64_t prefix_query_tokens = 0;
  uint64_t prefix_hit_tokens = 0;
  uint64_t peak_running = 0;  // most sequences in one step
};

class Scheduler {
 public:
  // kv must outlive the scheduler. config must have max_num_seqs >= 1 and
  // max_num_batched_tokens >= max_num_seqs (checked; the engine validates).
  Scheduler(SchedulerConfig config, KvCacheManager* kv, std::shared_ptr<AdmissionPolicy> policy);

  // Queues a new sequence at the end of the waiting queue. Its id must be
  // new, its tokens non-empty and it must hold no pages (checked).
  void AddWaiting(Sequence sequence);
  // Adds a sequence that holds pages already (an import) as running, most
  // recently admitted. Its id must be new (checked).
  void AddRunning(Sequence sequence);

  // Plans the next step (see the top of this file). An empty output means
  // nothing to run. Errors (admissions undone): the KV manager's.
  Result<SchedulerOutput> Schedule();
  // The step failed: its plan is undone and its admissions go back to
  // waiting without their pages, in their places.
  void Abandon(SchedulerOutput&& out);
  // The step ran: lengths advance, admissions start running, full pages
  // are cached. A sequence fed a draft advances by its pending token only;
  // its cache holds the draft's rows too until AcceptDraft says how many
  // stand. Errors: the prefix cache's (the step itself stands).
  Status Commit(const SchedulerOutput& out);

  // Forks a running sequence whose prompt is in (nothing pending) into a
  // new running sequence `child` with the same tokens and every page
  // shared: a parallel sample or a beam. A parent whose group is larger
  // than 1 gives up one of its slots to the child; otherwise the child
  // takes a slot of its own (beam search forks only as many as it just
  // finished). child must be new (checked). Errors: the KV manager's.
  Status Fork(RequestId parent, RequestId child);

  // Proposes draft tokens for a running sequence in its decode phase (its
  // next step feeds them after its pending token). Replaces any earlier
  // draft; empty clears it. id must be known (checked).
  void SetDraft(RequestId id, std::vector<int32_t> draft);
  // After Commit of a step that fed id a draft: the first num_accepted
  // draft tokens become the sequence's, their rows stay in the cache, the
  // rest of the draft's rows are dropped (pages only they used go back to
  // the pool) and the newly full pages are cached. Call AppendToken after
  // it with the token that follows them. Errors: Truncate's or the prefix
  // cache's.
  Status AcceptDraft(RequestId id, uint64_t num_accepted);

  // Appends a generated token to a sequence (after Commit).
  void AppendToken(RequestId id, int32_t token);
  // Forgets a sequence, waiting or running, and frees its pages. id must be
  // known (checked).
  void Finish(RequestId id);

  bool Contains(RequestId id) const { return sequences_.count(id) != 0; }
  // id must be known (checked).
  const Sequence& sequence(RequestId id) const;
  bool HasUnfinished() const { return !waiting_.empty() || !running_.empty(); }
  // Admission order, oldest first.
  std::span<const RequestId> running() const { return running_; }
  const std::deque<RequestId>& waiting() const { return waiting_; }
  uint64_t num_running() const { return running_.size(); }
  uint64_t num_waiting() const { return waiting_.size(); }
  const SchedulerStats& stats() const { return stats_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  // What one Schedule call has handed out so far.
  struct StepBudget {
    uint64_t tokens = 0;  // left of max_num_batched_tokens
    // Pages this step allocates (needed), and pages promised to the
    // running and newly admitted sequences until their prompts are
    // prefilled (promised >= needed): admission checks the promise.
    uint64_t needed = 0;
    uint64_t promised = 0;
    // Running slots taken: one per running sequence, and a group's whole
    // size until it forks.
    uint64_t slots = 0;
    uint64_t admitted = 0;  // sequences admitted this step
  };

  // Schedule's phases, in order. Running: decodes first (with their
  // drafts), then prompt chunks of running sequences.
  void ScheduleRunning(StepBudget& b, std::vector<ScheduledSequence>& picks);
  // Admission, first come first served: nobody overtakes the head of the
  // queue. Errors undo nothing; the caller does.
  Status AdmitWaiting(StepBudget& b, std::vector<ScheduledSequence>& picks);
  // Admits waiting_[i] and, for a lockstep group, the group's members
  // queued right behind it, all or none. Returns how many it admitted.
  Result<size_t> AdmitUnit(size_t i, StepBudget& b, std::vector<ScheduledSequence>& picks);
  // Make room: allocate the step's pages (evicting cached pages inside
  // Allocate), else drop drafts, then shed the newest admissions, then
  // preempt running sequences, most recently admitted first.
  Status MakeRoom(StepBudget& b, SchedulerOutput& out);
  // Drops every pick's draft tokens; false when none had any.
  bool DropDrafts(StepBudget& b, std::vector<ScheduledSequence>& picks);
  // Undoes the newest admission (a lockstep group's whole, as it was made).
  void ShedNewestAdmission(StepBudget& b, std::vector<ScheduledSequence>& picks);
  // Preempts the most recently admitted running sequence with its group.
  void PreemptNewestGroup(StepBudget& b, SchedulerOutput& out);
  // The plan's per-row sequences and the tokens fed.
  void Emit(SchedulerOutput& out) const;

  Sequence& Get(RequestId id);
  // Frees a sequence's pages; it will be recomputed from its tokens.
  void Release(Sequence& s);
  void Preempt(Sequence& s);
  // Undoes a ScheduledSequence's admission.
  void Unadmit(const ScheduledSequence& p);

  SchedulerConfig config_;
  KvCacheManager* kv_;
  std::shared_ptr<AdmissionPolicy> policy_;
  std::map<RequestId, Sequence> sequences_;
  std::deque<RequestId> waiting_;   // FCFS; preempted sequences go to the front
  std::vector<RequestId> running_;  // admission order
  SchedulerStats stats_;
};

}  // namespace folio::engine

#endif  // FOLIO_ENGINE_SCHEDULER_H_
