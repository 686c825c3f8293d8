#include "engine/decoding.h"

#include <algorithm>
#include <optional>

namespace folio::engine {

model::LogitRows Engine::SampleDecoding::Rows(const Engine& e, const Member& m,
                                              const ScheduledSequence& p) const {
  // Every row's logits for requests that asked for their prompt's, and for
  // drafts to verify.
  const Sequence& s = e.scheduler_.sequence(p.id);
  if ((m.output->params.prompt_logits && s.num_computed < s.num_prompt_tokens) ||
      p.num_draft != 0) {
    return model::LogitRows::kAll;
  }
  return model::LogitRows::kLast;
}

Status Engine::SampleDecoding::OnRows(Engine& e, RequestId request, const ScheduledSequence& p,
                                      model::LogitRows kind, std::span<const float> rows,
                                      std::vector<StepOutput>& out) {
  const uint64_t vocab = e.runner_.config().vocab_size;
  Member& m = e.request(request).member(p.id);
  const Sequence& s = e.scheduler_.sequence(p.id);
  StepOutput prompt_part;
  prompt_part.id = request;
  if (kind == model::LogitRows::kAll && p.num_draft == 0) {
    OutputProcessor::AddPromptLogits(*m.output, s.num_computed - p.num_tokens, s.num_prompt_tokens,
                                     rows, vocab, prompt_part);
  }
  if (s.num_pending() != 0) {  // a prompt chunk; more to feed
    if (!prompt_part.prompt_logits.empty()) out.push_back(std::move(prompt_part));
    return Status::Ok();
  }
  if (s.group_size > 1) return ForkAndSample(e, request, rows.last(vocab), out);
  StepOutput o;
  if (p.num_draft != 0) {
    FOLIO_ASSIGN_OR_RETURN(o, VerifyDraft(e, m, rows));
  } else {
    FOLIO_ASSIGN_OR_RETURN(
        o, e.outputs_.Process(*m.output, rows.last(vocab), s.num_output_tokens() + 1, s.tokens));
    if (!o.new_tokens.empty()) {  // else aborted
      e.scheduler_.AppendToken(p.id, o.new_tokens.front());
    }
  }
  o.prompt_logits = std::move(prompt_part.prompt_logits);
  Label(o, request, m);
  if (o.finish != FinishReason::kNone) e.FinishMember(request, p.id);
  out.push_back(std::move(o));
  return Status::Ok();
}

Status Engine::SampleDecoding::ForkAndSample(Engine& e, RequestId request,
                                             std::span<const float> logits,
                                             std::vector<StepOutput>& out) {
  const uint64_t n = e.scheduler_.sequence(request).group_size;
  for (uint64_t i = 1; i < n; ++i) {
    const RequestId child = e.next_id_++;
    FOLIO_RETURN_IF_ERROR(e.scheduler_.Fork(request, child));
    // The request's state before its first token (a grammar's matcher at
    // its start, sharing the request's memo tables), on the sample's own
    // stream.
    Request& r = e.request(request);
    r.members.push_back(
        {child, i, OutputProcessor::ForkState(*r.member(request).output, i), DraftState{}});
  }
  std::vector<RequestId> seqs;
  for (const Member& m : e.request(request).members) seqs.push_back(m.seq);
  for (const RequestId seq : seqs) {
    Member& m = e.request(request).member(seq);
    const Sequence& s = e.scheduler_.sequence(seq);
    FOLIO_ASSIGN_OR_RETURN(
        StepOutput o, e.outputs_.Process(*m.output, logits, s.num_output_tokens() + 1, s.tokens));
    if (!o.new_tokens.empty()) e.scheduler_.AppendToken(seq, o.new_tokens.front());  // else aborted
    Label(o, request, m);
    if (o.finish != FinishReason::kNone) e.FinishMember(request, seq);
    out.push_back(std::move(o));
  }
  return Status::Ok();
}

Result<StepOutput> Engine::SampleDecoding::VerifyDraft(Engine& e, Member& m,
                                                       std::span<const float> logits) {
  const uint64_t vocab = e.runner_.config().vocab_size;
  const Sequence& s = e.scheduler_.sequence(m.seq);
  const std::vector<int32_t> draft = s.draft;  // AcceptDraft clears it
  const uint64_t emitted_before = s.num_output_tokens();
  // The sequence before each row's token: its tokens, then the draft tokens
  // accepted so far (the processors of a draft position read exactly what
  // plain decoding's would).
  std::vector<int32_t> history = s.tokens;
  StepOutput merged;
  uint64_t accepted = 0;
  Status failed;
  for (uint64_t i = 0; i <= draft.size(); ++i) {
    // Exactly plain decoding's draw for this position: its logits (bit for
    // bit: a row's result does not depend on the rows beside it) from the
    // request's own stream, advanced once per emitted token. Under
    // rejection sampling, the draft position's own acceptance rule instead.
    std::optional<int32_t> resample;
    if (e.config_.speculative.acceptance == DraftAcceptance::kRejection && i < draft.size()) {
      resample = draft[i];
    }
    Result<StepOutput> o = e.outputs_.Process(*m.output, logits.subspan(i * vocab, vocab),
                                              emitted_before + 1 + i, history, resample);
    if (!o.ok()) {
      failed = o.status();
      break;
    }
    merged.text += o->text;
    merged.finish = o->finish;
    if (o->new_tokens.empty()) break;  // a grammar that cannot go on: aborted
    const int32_t token = o->new_tokens.front();
    merged.new_tokens.push_back(token);
    for (auto& lp : o->logprobs) merged.logprobs.push_back(std::move(lp));
    if (o->finish != FinishReason::kNone || i == draft.size() || token != draft[i]) break;
    ++accepted;
    history.push_back(token);
  }
  // The cache keeps the accepted draft's rows and drops the rest, also when
  // sampling failed (then nothing follows them).
  FOLIO_RETURN_IF_ERROR(e.scheduler_.AcceptDraft(m.seq, accepted));
  FOLIO_RETURN_IF_ERROR(failed);
  // The last token (a draft token's successor) is fed next; a request that
  // ended with no token after its accepted draft has nothing to feed.
  if (merged.new_tokens.size() > accepted) {
    e.scheduler_.AppendToken(m.seq, merged.new_tokens.back());
  }

  EngineStats& stats = e.draft_stats_;
  ++stats.draft_verifications;
  stats.draft_tokens += draft.size();
  stats.draft_accepted_tokens += accepted;
  for (uint64_t i = 0; i < draft.size(); ++i) ++stats.drafted_at[i];
  for (uint64_t i = 0; i < accepted; ++i) ++stats.accepted_at[i];
  DraftState& d = m.draft;
  d.length = NextDraftLength(d.length, draft.size(), accepted, e.DraftLimit(m));
  if (accepted > 0) {
    d.misses = 0;
  } else {
    ++d.misses;
    d.pause = std::min<uint64_t>((uint64_t{1} << std::min<uint64_t>(d.misses - 1, 5)) - 1, 31);
  }
  return merged;
}

Status Engine::BeamDecoding::OnRows(Engine& e, RequestId /*request*/, const ScheduledSequence& p,
                                    model::LogitRows /*kind*/, std::span<const float> rows,
                                    std::vector<StepOutput>& /*out*/) {
  if (e.scheduler_.sequence(p.id).num_pending() != 0) return Status::Ok();  // a prompt chunk
  // The round runs once the whole step is in (AfterStep).
  FOLIO_ASSIGN_OR_RETURN(offered_[p.id],
                         search_.TopCandidates(rows.last(e.runner_.config().vocab_size)));
  return Status::Ok();
}

Status Engine::BeamDecoding::AfterStep(Engine& e, RequestId request, std::vector<StepOutput>& out) {
  std::vector<Member>& members = e.request(request).members;
  // Every live beam must have offered since it last ran: a preempted one
  // offers again once recomputed (the same candidates, bit for bit).
  for (const Member& m : members) {
    const Sequence& s = e.scheduler_.sequence(m.seq);
    if (offered_.count(m.seq) == 0 || !s.seq || s.num_pending() != 0) return Status::Ok();
  }
  std::vector<BeamSearch::Beam> beams;
  for (size_t b = 0; b < members.size(); ++b) {
    beams.push_back({e.scheduler_.sequence(members[b].seq).output(), scores_[b],
                     std::move(offered_.at(members[b].seq))});
  }
  offered_.clear();
  const std::vector<BeamSearch::Next> next = search_.Step(beams);
  if (next.empty()) {
    End(e, request, beams, &out);
    return Status::Ok();
  }
  // Each surviving beam's first child continues in its sequence; the
  // others fork from it before it moves on, sharing its pages.
  const size_t num_parents = members.size();
  std::vector<Member> live(next.size());
  std::vector<bool> continued(num_parents, false);
  for (size_t j = 0; j < next.size(); ++j) {
    const RequestId parent = members[next[j].parent].seq;
    if (!continued[next[j].parent]) {
      continued[next[j].parent] = true;
      live[j].seq = parent;
      continue;
    }
    const RequestId child = e.next_id_++;
    if (Status forked = e.scheduler_.Fork(parent, child); !forked.ok()) {
      End(e, request, {}, nullptr);  // the request fails whole, its forks with it
      return forked;
    }
    members.push_back({child, 0, std::nullopt, DraftState{}});  // a failure above finishes it too
    live[j].seq = child;
  }
  for (size_t b = 0; b < num_parents; ++b) {
    if (!continued[b]) e.scheduler_.Finish(members[b].seq);
  }
  members = std::move(live);
  scores_.clear();
  for (size_t j = 0; j < next.size(); ++j) {
    e.scheduler_.AppendToken(members[j].seq, next[j].token);
    scores_.push_back(next[j].score);
  }
  const Sequence& first = e.scheduler_.sequence(members[0].seq);
  if (first.num_output_tokens() == first.max_tokens) {
    std::vector<BeamSearch::Beam> ended;
    for (size_t j = 0; j < members.size(); ++j) {
      ended.push_back({e.scheduler_.sequence(members[j].seq).output(), scores_[j], {}});
    }
    End(e, request, ended, &out);
  }
  return Status::Ok();
}

void Engine::BeamDecoding::End(Engine& e, RequestId request, std::span<const BeamSearch::Beam> live,
                               std::vector<StepOutput>* out) {
  if (out != nullptr) {
    std::vector<BeamSearch::Hypothesis> best = search_.Finish(live, n_);
    for (size_t i = 0; i < best.size(); ++i) {
      StepOutput o;
      o.id = request;
      o.new_tokens = best[i].output;
      o.text = e.outputs_.Text(best[i].output, skip_special_tokens_);
      o.finish = best[i].ended ? FinishReason::kStop : FinishReason::kLength;
      o.index = i;
      o.beam_score = best[i].score;
      out->push_back(std::move(o));
    }
  }
  std::vector<RequestId> seqs;
  for (const Member& m : e.request(request).members) seqs.push_back(m.seq);
  for (const RequestId seq : seqs) e.FinishMember(request, seq);
}

Status Engine::PoolingDecoding::OnRows(Engine& e, RequestId request, const ScheduledSequence& p,
                                       model::LogitRows /*kind*/, std::span<const float> rows,
                                       std::vector<StepOutput>& out) {
  Member& m = e.request(request).member(p.id);
  const Sequence& s = e.scheduler_.sequence(p.id);
  // A classification head reads the first position (an encoder's) or the
  // last (a decoder's).
  const Pooling requested = m.output->params.pooling;
  const Pooling pooling = requested != Pooling::kClassify  ? requested
                          : e.runner_.config().IsEncoder() ? Pooling::kCls
                                                           : Pooling::kLast;
  OutputProcessor::AddPooledRows(*m.output, s.num_computed - p.num_tokens, s.num_prompt_tokens,
                                 rows, e.runner_.config().hidden_size, pooling);
  if (s.num_pending() != 0) return Status::Ok();  // a prompt chunk; more to feed
  StepOutput o;
  o.embedding = OutputProcessor::Pooled(*m.output, s.num_prompt_tokens);
  if (m.output->params.pooling == Pooling::kClassify) {
    FOLIO_ASSIGN_OR_RETURN(o.embedding, e.runner_.Classify(o.embedding));
  }
  o.finish = FinishReason::kStop;
  Label(o, request, m);
  e.FinishMember(request, p.id);
  out.push_back(std::move(o));
  return Status::Ok();
}

}  // namespace folio::engine
