#include "folio/engine/engine.h"

#include "folio/engine/request_params.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <utility>

#include "folio/core/checked_math.h"
#include "folio/core/str_cat.h"

namespace folio::engine {

Result<DraftAcceptance> ParseDraftAcceptance(std::string_view name) {
  if (name == "exact") return DraftAcceptance::kExact;
  if (name == "rejection") return DraftAcceptance::kRejection;
  return Status::InvalidArgument("speculative acceptance '" + std::string(name) +
                                 "' is not 'exact' or 'rejection'");
}

Result<Engine> Engine::Create(const model::Model& model, EngineConfig config, ThreadPool* pool,
                              const tokenizer::Tokenizer* tokenizer, EnginePolicies policies) {
  if (config.max_num_seqs == 0 || config.max_num_batched_tokens < config.max_num_seqs) {
    return Status::InvalidArgument(
        "need max_num_seqs >= 1 and max_num_batched_tokens >= "
        "max_num_seqs (got " +
        std::to_string(config.max_num_seqs) + ", " + std::to_string(config.max_num_batched_tokens) +
        ")");
  }
  if (!(config.watermark >= 0.0 && config.watermark < 1.0)) {
    return Status::InvalidArgument("watermark must be in [0, 1) (got " +
                                   std::to_string(config.watermark) + ")");
  }
  const SpeculativeConfig& sp = config.speculative;
  if (sp.num_draft_tokens > kMaxDraftTokens || sp.ngram_min == 0 || sp.ngram_min > sp.ngram_max) {
    return Status::InvalidArgument(
        "speculative decoding needs num_draft_tokens <= " + std::to_string(kMaxDraftTokens) +
        " and 1 <= ngram_min <= ngram_max (got " + std::to_string(sp.num_draft_tokens) + ", " +
        std::to_string(sp.ngram_min) + ", " + std::to_string(sp.ngram_max) + ")");
  }
  const model::ModelConfig& c = model.config();
  const kv::PagedKvCacheConfig kc =
      KvCacheConfigFor(c, config.page_size, config.num_pages, config.kv_dtype);
  std::shared_ptr<backend::Backend> backend =
      backend::MakeBackend(config.backend, pool, config.matmul_activations);
  FOLIO_ASSIGN_OR_RETURN(KvCacheManager kv,
                         KvCacheManager::Create(kc, config.prefix_caching, backend.get()));
  std::unique_ptr<Drafter> drafter;
  if (sp.draft_model != nullptr) {
    DraftModelDrafter::Config dc;
    dc.page_size = config.page_size;
    dc.num_pages = sp.draft_num_pages != 0 ? sp.draft_num_pages : config.num_pages;
    dc.kv_dtype = config.kv_dtype;
    dc.backend = config.backend;
    dc.matmul_activations = config.matmul_activations;
    FOLIO_ASSIGN_OR_RETURN(drafter,
                           DraftModelDrafter::Create(*sp.draft_model, c.vocab_size, dc, pool));
  } else {
    drafter = std::make_unique<NgramDrafter>(sp.ngram_min, sp.ngram_max);
  }
  if (!policies.admission) {
    const auto watermark_pages =
        static_cast<uint64_t>(std::ceil(config.watermark * static_cast<double>(config.num_pages)));
    policies.admission = std::make_shared<WatermarkAdmission>(watermark_pages);
  }
  return Engine(std::make_unique<KvCacheManager>(std::move(kv)), model, config, std::move(backend),
                tokenizer, std::move(policies), std::move(drafter));
}

Engine::Engine(std::unique_ptr<KvCacheManager> kv, const model::Model& model, EngineConfig config,
               std::shared_ptr<backend::Backend> backend, const tokenizer::Tokenizer* tokenizer,
               EnginePolicies policies, std::unique_ptr<Drafter> drafter)
    : config_(config),
      kv_(std::move(kv)),
      scheduler_({config.max_num_batched_tokens, config.max_num_seqs}, kv_.get(),
                 std::move(policies.admission)),
      runner_(model, std::move(backend), std::move(policies.attention)),
      outputs_(tokenizer, model.config().vocab_size),
      drafter_(std::move(drafter)) {}

Status Engine::ValidateRequest(std::span<const int32_t> prompt, const RequestParams& params) const {
  FOLIO_RETURN_IF_ERROR(params.sampling.Validate());
  const model::ModelConfig& c = runner_.config();
  if (prompt.empty()) return Status::InvalidArgument("prompt is empty");
  if (params.max_tokens == 0) return Status::InvalidArgument("max_tokens must be >= 1");
  FOLIO_RETURN_IF_ERROR(ValidateRequestParams(params, c.vocab_size));
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || static_cast<uint64_t>(prompt[i]) >= c.vocab_size) {
      return Status::OutOfRange("prompt token " + std::to_string(i) + " has id " +
                                std::to_string(prompt[i]) + " outside the vocabulary");
    }
  }
  if (!params.stop_strings.empty() && outputs_.tokenizer() == nullptr) {
    return Status::InvalidArgument("stop strings need an engine with a tokenizer");
  }
  if (!params.bad_words.empty() && outputs_.tokenizer() == nullptr) {
    return Status::InvalidArgument("bad_words need an engine with a tokenizer");
  }
  if (params.processors.dry.multiplier != 0.0 && outputs_.tokenizer() == nullptr) {
    return Status::InvalidArgument(
        "DRY (dry_multiplier > 0) needs an engine with a tokenizer: its sequence breakers are "
        "text");
  }
  if (params.grammar && outputs_.tokenizer() == nullptr) {
    return Status::InvalidArgument(
        "grammar (structured output) needs an engine with a tokenizer: the grammar constrains "
        "the tokens' bytes");
  }
  for (size_t i = 0; i < params.stop_strings.size(); ++i) {
    if (params.stop_strings[i].empty()) {
      return Status::InvalidArgument("stop string " + std::to_string(i) + " is empty");
    }
  }
  if (params.prompt_logits && config_.prefix_caching) {
    return Status::InvalidArgument(
        "prompt_logits needs an engine without prefix caching (a "
        "cached page's rows are never computed)");
  }
  if (params.n == 0 || params.n > config_.max_num_seqs) {
    return Status::InvalidArgument("n = " + std::to_string(params.n) +
                                   " samples: need 1 <= n <= max_num_seqs (" +
                                   std::to_string(config_.max_num_seqs) + ")");
  }
  if (params.n > 1 && params.prompt_logits) {
    return Status::InvalidArgument("prompt_logits needs n = 1");
  }
  if (params.beam.num_beams > 0) FOLIO_RETURN_IF_ERROR(ValidateBeamSearch(params));
  if (params.pooling != Pooling::kNone) FOLIO_RETURN_IF_ERROR(ValidatePooling(params));
  if (params.num_draft_tokens && *params.num_draft_tokens > kMaxDraftTokens) {
    return Status::InvalidArgument("num_draft_tokens " + std::to_string(*params.num_draft_tokens) +
                                   " exceeds " + std::to_string(kMaxDraftTokens));
  }
  if (params.top_logprobs > sampling::kMaxTopLogprobs) {
    return Status::InvalidArgument("top_logprobs " + std::to_string(params.top_logprobs) +
                                   " exceeds " + std::to_string(sampling::kMaxTopLogprobs));
  }
  // The last selected token is never fed, so a request caches at most
  // prompt + max_tokens - 1 positions (a pooled request: its prompt).
  const std::optional<uint64_t> positions = CheckedAdd(
      prompt.size() - 1, params.pooling != Pooling::kNone ? uint64_t{1} : params.max_tokens);
  if (!positions || *positions > c.max_positions) {
    return Status::OutOfRange("prompt of " + std::to_string(prompt.size()) + " + max_tokens " +
                              std::to_string(params.max_tokens) + " exceeds the model's " +
                              std::to_string(c.max_positions) + " positions");
  }
  // A beam search's beams run together, so all of them must fit at once
  // (with no page shared, at worst).
  const std::optional<uint64_t> pages = CheckedMul(CeilDiv(*positions, config_.page_size),
                                                   std::max<uint64_t>(params.beam.num_beams, 1));
  if (!pages || *pages > config_.num_pages) {
    return Status::ResourceExhausted(
        "request needs " + (pages ? std::to_string(*pages) : std::string("too many")) + " pages" +
        (params.beam.num_beams > 1 ? " for its beams" : "") + "; the pool has " +
        std::to_string(config_.num_pages));
  }
  return Status::Ok();
}

Status Engine::ValidatePooling(const RequestParams& params) const {
  const std::string what =
      StrCat("a pooled embedding (pooling ", PoolingName(params.pooling), ") ");
  if (params.n != 1 || params.beam.num_beams != 0) {
    return Status::InvalidArgument(what + "is one vector: it takes n = 1 and no beams");
  }
  if (params.grammar || params.prompt_logits || params.logprobs || params.top_logprobs != 0 ||
      params.num_draft_tokens.value_or(0) != 0) {
    return Status::InvalidArgument(
        what + "generates nothing: it takes no grammar, prompt_logits, logprobs or draft tokens");
  }
  const uint64_t hidden = runner_.config().hidden_size;
  if (params.dimensions > hidden) {
    return Status::InvalidArgument(StrCat(what, "of ", params.dimensions,
                                          " dimensions: the model's hidden states have ", hidden));
  }
  return Status::Ok();
}

Status Engine::ValidateBeamSearch(const RequestParams& params) const {
  const BeamSearchParams& beam = params.beam;
  const std::string what = "beam search (num_beams = " + std::to_string(beam.num_beams) + ") ";
  if (beam.num_beams > config_.max_num_seqs) {
    return Status::InvalidArgument(what + "needs num_beams <= max_num_seqs (" +
                                   std::to_string(config_.max_num_seqs) + ")");
  }
  if (params.n > beam.num_beams) {
    return Status::InvalidArgument(
        what + "returns at most num_beams hypotheses (n = " + std::to_string(params.n) + ")");
  }
  if (params.grammar) {
    return Status::InvalidArgument(
        what +
        "cannot follow a grammar (structured output) yet: its beams are scored on the "
        "unconstrained log-probabilities; use sampling or greedy decoding");
  }
  if (!std::isfinite(beam.length_penalty)) {
    return Status::InvalidArgument(what + "needs a finite length_penalty");
  }
  const sampling::SamplingParams& p = params.sampling;
  if (p.temperature != 0.0 || p.top_k != 0 || p.top_p != 1.0 || p.min_p != 0.0) {
    return Status::InvalidArgument(what +
                                   "scores the model's own log-probabilities: temperature, "
                                   "top_k, top_p and min_p must keep their defaults");
  }
  // Every other declared parameter changes what is sampled, and beams are
  // scored on the model's own log-probabilities: refused by name unless it
  // keeps its default. The stop ids and ignore_eos end hypotheses, which
  // beams honour.
  std::string changed;
  const RequestParams defaults;
  ForEachRequestParam(params, [&](const RequestParamInfo& info, const auto& value) {
    if (!changed.empty() || info.name == "stop_token_ids" || info.name == "ignore_eos") return;
    bool same = true;
    ForEachRequestParam(defaults, [&](const RequestParamInfo& d, const auto& neutral) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>,
                                   std::decay_t<decltype(neutral)>>) {
        if (d.name == info.name) same = value == neutral;
      }
    });
    if (!same) changed = info.name;
  });
  if (!changed.empty()) {
    return Status::InvalidArgument(what + "cannot apply " + changed +
                                   ": beams are scored on the model's own log-probabilities, so "
                                   "it must keep its default");
  }
  if (!params.stop_strings.empty() || params.logprobs || params.top_logprobs != 0 ||
      params.prompt_logits || params.num_draft_tokens.value_or(0) != 0) {
    return Status::InvalidArgument(
        what + "takes no stop strings, logprobs, top_logprobs, prompt_logits or draft tokens");
  }
  const BeamSearch search(beam, params.max_tokens, StopTokenIds(params));
  if (search.num_candidates() > runner_.config().vocab_size) {
    return Status::InvalidArgument(what + "takes " + std::to_string(search.num_candidates()) +
                                   " candidates a round, more than the vocabulary's " +
                                   std::to_string(runner_.config().vocab_size) + " tokens");
  }
  return Status::Ok();
}

Result<RequestId> Engine::AddRequest(std::vector<int32_t> prompt, RequestParams params) {
  FOLIO_RETURN_IF_ERROR(ValidateRequest(prompt, params));
  const RequestId id = next_id_++;
  Sequence s;
  s.id = id;
  s.num_prompt_tokens = prompt.size();
  s.max_tokens = params.pooling != Pooling::kNone ? 1 : params.max_tokens;
  s.every_row = params.pooling == Pooling::kMean || params.pooling == Pooling::kCls;
  s.tokens = std::move(prompt);
  s.group_size = params.n;
  if (params.beam.num_beams > 0) {
    s.group_size = params.beam.num_beams;
    s.lockstep = true;
    beams_.emplace(id, BeamGroup{BeamSearch(params.beam, params.max_tokens, StopTokenIds(params)),
                                 params.n,
                                 {id},
                                 {0.0},
                                 {}});
    beam_request_[id] = id;
  } else {  // a beam search keeps its state in beams_, not in outputs_
    FOLIO_ASSIGN_OR_RETURN(OutputProcessor::State state, outputs_.NewState(params));
    outputs_.Add(id, std::move(state));
  }
  scheduler_.AddWaiting(std::move(s));
  return id;
}

Status Engine::Abort(RequestId id) {
  if (beams_.count(id) != 0) {
    EndBeams(id, {}, nullptr);
    return Status::Ok();
  }
  if (auto group = groups_.find(id); group != groups_.end()) {
    const std::vector<RequestId> members = group->second;  // Forget edits it
    for (const RequestId m : members) {
      scheduler_.Finish(m);
      Forget(m);
    }
    return Status::Ok();
  }
  if (!scheduler_.Contains(id) || members_.count(id) != 0 || beam_request_.count(id) != 0) {
    return Status::NotFound("no unfinished request " + std::to_string(id));
  }
  scheduler_.Finish(id);
  Forget(id);
  return Status::Ok();
}

void Engine::Forget(RequestId id) {
  outputs_.Remove(id);
  drafting_.erase(id);
  drafter_->Forget(id);
  RequestId request = id;
  if (auto m = members_.find(id); m != members_.end()) {
    request = m->second.request;
    members_.erase(m);
  }
  if (auto group = groups_.find(request); group != groups_.end()) {
    std::erase(group->second, id);
    if (group->second.empty()) groups_.erase(group);
  }
}

void Engine::Label(StepOutput& o, RequestId member) const {
  o.rng_state = outputs_.state(member).rng.state();
  o.cached_prompt_tokens = outputs_.state(member).cached_prompt_tokens.value_or(0);
  if (auto m = members_.find(member); m != members_.end()) {
    o.id = m->second.request;
    o.index = m->second.index;
  }
}

Result<std::vector<StepOutput>> Engine::ForkAndSample(RequestId parent,
                                                      std::span<const float> logits) {
  const uint64_t n = scheduler_.sequence(parent).group_size;
  std::vector<RequestId> ids = {parent};
  for (uint64_t i = 1; i < n; ++i) {
    const RequestId child = next_id_++;
    FOLIO_RETURN_IF_ERROR(scheduler_.Fork(parent, child));
    // The parent's state before its first token (a grammar's matcher at its
    // start, sharing the parent's memo tables), on the sample's own stream.
    outputs_.Add(child, outputs_.ForkState(parent, i));
    members_[child] = {parent, i};
    ids.push_back(child);
  }
  groups_[parent] = ids;
  std::vector<StepOutput> out;
  for (const RequestId id : ids) {
    const Sequence& s = scheduler_.sequence(id);
    FOLIO_ASSIGN_OR_RETURN(StepOutput o,
                           outputs_.Process(id, logits, s.num_output_tokens() + 1, s.tokens));
    if (!o.new_tokens.empty()) scheduler_.AppendToken(id, o.new_tokens.front());  // else aborted
    if (o.finish != FinishReason::kNone) {
      scheduler_.Finish(id);
      Label(o, id);
      Forget(id);
    } else {
      Label(o, id);
    }
    out.push_back(std::move(o));
  }
  return out;
}

Status Engine::OfferBeam(RequestId seq, std::span<const float> logits) {
  BeamGroup& g = beams_.at(beam_request_.at(seq));
  FOLIO_ASSIGN_OR_RETURN(g.offered[seq], g.search.TopCandidates(logits));
  return Status::Ok();
}

Status Engine::RunBeamRound(RequestId request, std::vector<StepOutput>& out) {
  BeamGroup& g = beams_.at(request);
  // Every live beam must have offered since it last ran: a preempted one
  // offers again once recomputed (the same candidates, bit for bit).
  for (const RequestId seq : g.live) {
    const Sequence& s = scheduler_.sequence(seq);
    if (g.offered.count(seq) == 0 || !s.seq || s.num_pending() != 0) return Status::Ok();
  }
  std::vector<BeamSearch::Beam> beams;
  for (size_t b = 0; b < g.live.size(); ++b) {
    beams.push_back(
        {scheduler_.sequence(g.live[b]).output(), g.scores[b], std::move(g.offered.at(g.live[b]))});
  }
  g.offered.clear();
  const std::vector<BeamSearch::Next> next = g.search.Step(beams);
  if (next.empty()) {
    EndBeams(request, beams, &out);
    return Status::Ok();
  }
  // Each surviving beam's first child continues in its sequence; the
  // others fork from it before it moves on, sharing its pages.
  std::vector<RequestId> live(next.size());
  std::vector<bool> continued(g.live.size(), false);
  for (size_t j = 0; j < next.size(); ++j) {
    const RequestId parent = g.live[next[j].parent];
    if (!continued[next[j].parent]) {
      continued[next[j].parent] = true;
      live[j] = parent;
      continue;
    }
    const RequestId child = next_id_++;
    if (Status forked = scheduler_.Fork(parent, child); !forked.ok()) {
      EndBeams(request, {}, nullptr);  // the request fails whole, its forks with it
      return forked;
    }
    beam_request_[child] = request;
    g.live.push_back(child);  // after every parent: a failure above finishes it too
    live[j] = child;
  }
  for (size_t b = 0; b < continued.size(); ++b) {
    if (continued[b]) continue;
    scheduler_.Finish(g.live[b]);
    beam_request_.erase(g.live[b]);
  }
  g.live = live;
  g.scores.clear();
  for (size_t j = 0; j < next.size(); ++j) {
    scheduler_.AppendToken(live[j], next[j].token);
    g.scores.push_back(next[j].score);
  }
  const Sequence& first = scheduler_.sequence(live[0]);
  if (first.num_output_tokens() == first.max_tokens) {
    std::vector<BeamSearch::Beam> ended;
    for (size_t j = 0; j < live.size(); ++j) {
      ended.push_back({scheduler_.sequence(live[j]).output(), g.scores[j], {}});
    }
    EndBeams(request, ended, &out);
  }
  return Status::Ok();
}

void Engine::EndBeams(RequestId request, std::span<const BeamSearch::Beam> live,
                      std::vector<StepOutput>* out) {
  BeamGroup& g = beams_.at(request);
  if (out != nullptr) {
    std::vector<BeamSearch::Hypothesis> best = g.search.Finish(live, g.n);
    for (size_t i = 0; i < best.size(); ++i) {
      StepOutput o;
      o.id = request;
      o.new_tokens = best[i].output;
      o.text = outputs_.Text(best[i].output);
      o.finish = best[i].ended ? FinishReason::kStop : FinishReason::kLength;
      o.index = i;
      o.beam_score = best[i].score;
      out->push_back(std::move(o));
    }
  }
  for (const RequestId seq : g.live) {
    scheduler_.Finish(seq);
    beam_request_.erase(seq);
  }
  beams_.erase(request);
}

EngineStats Engine::stats() const {
  const SchedulerStats& s = scheduler_.stats();
  EngineStats e;
  e.steps = steps_;
  e.preemptions = s.preemptions;
  e.prompt_tokens_computed = s.prompt_tokens_computed;
  e.decode_tokens = s.decode_tokens;
  e.prefix_query_tokens = s.prefix_query_tokens;
  e.prefix_hit_tokens = s.prefix_hit_tokens;
  e.prefix_evictions = kv_->num_evictions();
  e.peak_running = s.peak_running;
  e.draft_verifications = draft_stats_.draft_verifications;
  e.draft_tokens = draft_stats_.draft_tokens;
  e.draft_accepted_tokens = draft_stats_.draft_accepted_tokens;
  e.drafted_at = draft_stats_.drafted_at;
  e.accepted_at = draft_stats_.accepted_at;
  return e;
}

uint64_t Engine::DraftLimit(RequestId id) const {
  return outputs_.state(id).params.num_draft_tokens.value_or(config_.speculative.num_draft_tokens);
}

void Engine::ProposeDrafts() {
  for (const RequestId id : scheduler_.running()) {
    const Sequence& s = scheduler_.sequence(id);
    if (s.num_pending() != 1 || s.num_computed < s.num_prompt_tokens) continue;  // prefilling
    if (s.lockstep) continue;  // beams are scored, not drafted
    const uint64_t k = DraftLimit(id);
    // Tokens this step may still emit: the pending token's successor, then
    // one per accepted draft token.
    const uint64_t room = s.max_tokens - s.num_output_tokens();
    std::vector<int32_t> draft;
    if (k > 0 && room > 1) {
      DraftState& d = drafting_[id];
      if (d.pause > 0) {
        --d.pause;
      } else {
        draft = drafter_->Propose(id, s.tokens, std::min({d.length, k, room - 1}));
      }
    }
    scheduler_.SetDraft(id, std::move(draft));
  }
}

Result<StepOutput> Engine::VerifyDraft(RequestId id, std::span<const float> logits) {
  const uint64_t vocab = runner_.config().vocab_size;
  const Sequence& s = scheduler_.sequence(id);
  const std::vector<int32_t> draft = s.draft;  // AcceptDraft clears it
  const uint64_t emitted_before = s.num_output_tokens();
  // The sequence before each row's token: its tokens, then the draft tokens
  // accepted so far (the processors of a draft position read exactly what
  // plain decoding's would).
  std::vector<int32_t> history = s.tokens;
  StepOutput merged;
  merged.id = id;
  uint64_t accepted = 0;
  Status failed;
  for (uint64_t i = 0; i <= draft.size(); ++i) {
    // Exactly plain decoding's draw for this position: its logits (bit for
    // bit: a row's result does not depend on the rows beside it) from the
    // request's own stream, advanced once per emitted token. Under
    // rejection sampling, the draft position's own acceptance rule instead.
    std::optional<int32_t> resample;
    if (config_.speculative.acceptance == DraftAcceptance::kRejection && i < draft.size()) {
      resample = draft[i];
    }
    Result<StepOutput> o = outputs_.Process(id, logits.subspan(i * vocab, vocab),
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
  FOLIO_RETURN_IF_ERROR(scheduler_.AcceptDraft(id, accepted));
  FOLIO_RETURN_IF_ERROR(failed);
  // The last token (a draft token's successor) is fed next; a request that
  // ended with no token after its accepted draft has nothing to feed.
  if (merged.new_tokens.size() > accepted) scheduler_.AppendToken(id, merged.new_tokens.back());

  ++draft_stats_.draft_verifications;
  draft_stats_.draft_tokens += draft.size();
  draft_stats_.draft_accepted_tokens += accepted;
  for (uint64_t i = 0; i < draft.size(); ++i) ++draft_stats_.drafted_at[i];
  for (uint64_t i = 0; i < accepted; ++i) ++draft_stats_.accepted_at[i];
  DraftState& d = drafting_[id];
  d.length = NextDraftLength(d.length, draft.size(), accepted, DraftLimit(id));
  if (accepted > 0) {
    d.misses = 0;
  } else {
    ++d.misses;
    d.pause = std::min<uint64_t>((uint64_t{1} << std::min<uint64_t>(d.misses - 1, 5)) - 1, 31);
  }
  return merged;
}

Result<std::vector<StepOutput>> Engine::Step() {
  std::vector<StepOutput> out;
  if (!HasUnfinished()) return out;
  ProposeDrafts();
  FOLIO_ASSIGN_OR_RETURN(SchedulerOutput plan, scheduler_.Schedule());
  if (plan.empty()) return out;
  // Every row's logits for requests that asked for their prompt's, and for
  // drafts to verify; every row's final hidden state, and no logits, for
  // pooled embeddings.
  std::vector<model::LogitRows> rows(plan.scheduled.size(), model::LogitRows::kLast);
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const Sequence& s = scheduler_.sequence(plan.scheduled[i].id);
    // (Beams have no output state: they refuse prompt_logits and pooling.)
    if (!s.lockstep && outputs_.state(s.id).params.pooling != Pooling::kNone) {
      rows[i] = model::LogitRows::kHidden;
    } else if ((!s.lockstep && outputs_.state(s.id).params.prompt_logits &&
                s.num_computed < s.num_prompt_tokens) ||
               plan.scheduled[i].num_draft != 0) {
      rows[i] = model::LogitRows::kAll;
    }
  }
  std::vector<float> hidden;
  Result<std::vector<float>> logits = runner_.Execute(*kv_, plan, rows, &hidden);
  if (!logits.ok()) {
    scheduler_.Abandon(std::move(plan));
    return logits.error();
  }
  FOLIO_RETURN_IF_ERROR(scheduler_.Commit(plan));
  ++steps_;

  const uint64_t vocab = runner_.config().vocab_size;
  const std::span<const float> all(*logits);
  std::set<RequestId> rounds;  // beam requests with a beam that ran
  uint64_t offset = 0;         // rows of `all` before sequence i's
  uint64_t hidden_offset = 0;  // rows of `hidden` before sequence i's
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const RequestId id = plan.scheduled[i].id;
    const Sequence& s = scheduler_.sequence(id);
    if (plan.scheduled[i].admitted_now && !s.lockstep) {
      outputs_.NoteAdmission(id, plan.scheduled[i].prefix_hit_tokens);
    }
    if (rows[i] == model::LogitRows::kHidden) {
      const uint64_t d = runner_.config().hidden_size, n = plan.scheduled[i].num_tokens;
      outputs_.AddPooledRows(id, s.num_computed - n, s.num_prompt_tokens,
                             std::span<const float>(hidden).subspan(hidden_offset * d, n * d), d);
      hidden_offset += n;
      if (s.num_pending() != 0) continue;  // a prompt chunk; more to feed
      StepOutput o;
      o.id = id;
      o.embedding = outputs_.Pooled(id, s.num_prompt_tokens);
      o.finish = FinishReason::kStop;
      Label(o, id);
      scheduler_.Finish(id);
      Forget(id);
      out.push_back(std::move(o));
      continue;
    }
    const uint64_t n = rows[i] == model::LogitRows::kAll ? plan.scheduled[i].num_tokens : 1;
    const std::span<const float> mine = all.subspan(offset * vocab, n * vocab);
    offset += n;
    StepOutput prompt_part;
    prompt_part.id = id;
    if (rows[i] == model::LogitRows::kAll && plan.scheduled[i].num_draft == 0) {
      outputs_.AddPromptLogits(id, s.num_computed - n, s.num_prompt_tokens, mine, vocab,
                               prompt_part);
    }
    if (s.num_pending() != 0) {  // a prompt chunk; more to feed
      if (!prompt_part.prompt_logits.empty()) out.push_back(std::move(prompt_part));
      continue;
    }
    if (s.lockstep) {  // a beam: rounds run once the whole step is in
      FOLIO_RETURN_IF_ERROR(OfferBeam(id, mine.last(vocab)));
      rounds.insert(beam_request_.at(id));
      continue;
    }
    if (s.group_size > 1) {  // n samples: fork after the shared prefill
      FOLIO_ASSIGN_OR_RETURN(std::vector<StepOutput> samples, ForkAndSample(id, mine.last(vocab)));
      for (StepOutput& o : samples) out.push_back(std::move(o));
      continue;
    }
    StepOutput o;
    o.id = id;
    if (plan.scheduled[i].num_draft != 0) {
      FOLIO_ASSIGN_OR_RETURN(o, VerifyDraft(id, mine));
    } else {
      FOLIO_ASSIGN_OR_RETURN(
          o, outputs_.Process(id, mine.last(vocab), s.num_output_tokens() + 1, s.tokens));
      if (!o.new_tokens.empty()) scheduler_.AppendToken(id, o.new_tokens.front());  // else aborted
    }
    o.prompt_logits = std::move(prompt_part.prompt_logits);
    Label(o, id);
    if (o.finish != FinishReason::kNone) {
      scheduler_.Finish(id);
      Forget(id);
    }
    out.push_back(std::move(o));
  }
  for (const RequestId request : rounds) FOLIO_RETURN_IF_ERROR(RunBeamRound(request, out));
  return out;
}

Result<std::vector<std::vector<int32_t>>> Engine::Generate(
    const std::vector<std::vector<int32_t>>& prompts, const RequestParams& params) {
  if (params.n != 1) return Status::InvalidArgument("Generate runs one sample per prompt (n = 1)");
  std::vector<RequestId> ids;
  for (const auto& p : prompts) {
    FOLIO_ASSIGN_OR_RETURN(RequestId id, AddRequest(p, params));
    ids.push_back(id);
  }
  std::map<RequestId, std::vector<int32_t>> tokens;
  while (HasUnfinished()) {
    FOLIO_ASSIGN_OR_RETURN(std::vector<StepOutput> step, Step());
    for (const StepOutput& o : step) {
      auto& t = tokens[o.id];
      t.insert(t.end(), o.new_tokens.begin(), o.new_tokens.end());
    }
  }
  std::vector<std::vector<int32_t>> result;
  for (RequestId id : ids) result.push_back(tokens[id]);
  return result;
}

}  // namespace folio::engine
