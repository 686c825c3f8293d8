#include "folio/engine/engine.h"

#include "engine/decoding.h"
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
  if (c.IsEncoder()) {
    // An encoder's K/V at a position depend on the tokens after it, so no
    // two prompts can share a page: there is no prefix to cache.
    config.prefix_caching = false;
    if (sp.draft_model != nullptr) {
      return Status::InvalidArgument("an encoder generates nothing: it takes no draft model");
    }
  }
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
  if (!params.token_types.empty()) {
    if (params.pooling == Pooling::kNone || params.token_types.size() != prompt.size()) {
      return Status::InvalidArgument(StrCat("token types: one per prompt token (", prompt.size(),
                                            "; got ", params.token_types.size(),
                                            "), for a pooled request"));
    }
    for (size_t i = 0; i < prompt.size(); ++i) {
      if (params.token_types[i] < 0 ||
          static_cast<uint64_t>(params.token_types[i]) >= c.type_vocab_size) {
        return Status::OutOfRange(StrCat("prompt token ", i, " has type ", params.token_types[i],
                                         " outside [0, ", c.type_vocab_size, ")"));
      }
    }
  }
  if (c.num_labels != 0 && !c.IsEncoder() && params.pooling == Pooling::kNone) {
    return Status::InvalidArgument(StrCat("the model is a sequence classifier (",
                                          model::ArchitectureName(c.architecture),
                                          "): it scores text and generates nothing"));
  }
  if (c.IsEncoder()) {
    if (params.pooling == Pooling::kNone) {
      return Status::InvalidArgument(
          StrCat("the model is an encoder (", model::ArchitectureName(c.architecture),
                 "): it embeds text and generates nothing (ask for a pooled embedding)"));
    }
    if (prompt.size() > config_.max_num_batched_tokens) {
      return Status::InvalidArgument(
          StrCat("an encoder computes a prompt in one step: its ", prompt.size(),
                 " tokens exceed max_num_batched_tokens (", config_.max_num_batched_tokens, ")"));
    }
  }
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
  // (with no page shared, at worst). A windowed layer group holds only its
  // window's pages (kv::PagedKvCache::MaxPagesHeld).
  const std::optional<uint64_t> pages = CheckedMul(
      kv::PagedKvCache::MaxPagesHeld(kv_->config(), *positions, config_.max_num_batched_tokens),
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
  const model::ModelConfig& c = runner_.config();
  if (params.pooling == Pooling::kClassify) {
    if (c.num_labels == 0) {
      return Status::InvalidArgument(
          what +
          "needs a classification head (a BertForSequenceClassification checkpoint); "
          "the model has none");
    }
    if (params.normalize || params.dimensions != 0) {
      return Status::InvalidArgument(what +
                                     "returns the head's logits: normalize false and no "
                                     "dimensions");
    }
  }
  if (!params.token_types.empty() && !c.IsEncoder()) {
    return Status::InvalidArgument(what + "with token types needs an encoder");
  }
  const uint64_t hidden = c.hidden_size;
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

Engine::Request::Request() = default;
Engine::Request::Request(Request&&) noexcept = default;
Engine::Request& Engine::Request::operator=(Request&&) noexcept = default;
Engine::Request::~Request() = default;

Engine::Member& Engine::Request::member(RequestId seq) {
  auto it =
      std::find_if(members.begin(), members.end(), [&](const Member& m) { return m.seq == seq; });
  FOLIO_CHECK(it != members.end(), "no sequence ", seq, " in its request");
  return *it;
}

const Engine::Member& Engine::Request::member(RequestId seq) const {
  return const_cast<Request&>(*this).member(seq);
}

Engine::Request& Engine::request(RequestId id) {
  auto it = requests_.find(id);
  FOLIO_CHECK(it != requests_.end(), "no request ", id);
  return it->second;
}

const Engine::Request& Engine::request(RequestId id) const {
  return const_cast<Engine&>(*this).request(id);
}

Result<RequestId> Engine::AddRequest(std::vector<int32_t> prompt, RequestParams params) {
  FOLIO_RETURN_IF_ERROR(ValidateRequest(prompt, params));
  const RequestId id = next_id_++;
  Sequence s;
  s.id = id;
  s.num_prompt_tokens = prompt.size();
  s.max_tokens = params.pooling != Pooling::kNone ? 1 : params.max_tokens;
  s.whole_prompt = runner_.config().IsEncoder();
  s.token_types = params.token_types;
  s.every_row =
      s.whole_prompt || params.pooling == Pooling::kMean || params.pooling == Pooling::kCls;
  s.tokens = std::move(prompt);
  s.group_size = params.n;
  Request r;
  r.members.push_back({id, 0, std::nullopt, DraftState{}});
  if (params.beam.num_beams > 0) {  // scored by the search: no output state
    s.group_size = params.beam.num_beams;
    s.lockstep = true;
    r.decoding = std::make_unique<BeamDecoding>(
        BeamSearch(params.beam, params.max_tokens, StopTokenIds(params)), params.n,
        params.skip_special_tokens);
  } else {
    FOLIO_ASSIGN_OR_RETURN(r.members[0].output, outputs_.NewState(params));
    if (params.pooling != Pooling::kNone) {
      r.decoding = std::make_unique<PoolingDecoding>();
    } else {
      r.decoding = std::make_unique<SampleDecoding>();
    }
  }
  requests_.emplace(id, std::move(r));
  scheduler_.AddWaiting(std::move(s));
  return id;
}

void Engine::AddSampled(Sequence sequence, OutputProcessor::State output, bool running) {
  Request r;
  r.members.push_back({sequence.id, 0, std::move(output), DraftState{}});
  r.decoding = std::make_unique<SampleDecoding>();
  requests_.emplace(sequence.id, std::move(r));
  if (running) {
    scheduler_.AddRunning(std::move(sequence));
  } else {
    scheduler_.AddWaiting(std::move(sequence));
  }
}

Status Engine::Abort(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return Status::NotFound("no unfinished request " + std::to_string(id));
  for (const Member& m : it->second.members) {
    scheduler_.Finish(m.seq);
    drafter_->Forget(m.seq);
  }
  requests_.erase(it);
  return Status::Ok();
}

void Engine::FinishMember(RequestId request, RequestId seq) {
  scheduler_.Finish(seq);
  drafter_->Forget(seq);
  std::erase_if(this->request(request).members, [&](const Member& m) { return m.seq == seq; });
}

void Engine::Label(StepOutput& o, RequestId request, const Member& m) {
  o.id = request;
  o.index = m.index;
  if (m.output) {
    o.rng_state = m.output->rng.state();
    o.cached_prompt_tokens = m.output->cached_prompt_tokens.value_or(0);
  }
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

uint64_t Engine::DraftLimit(const Member& m) const {
  return m.output->params.num_draft_tokens.value_or(config_.speculative.num_draft_tokens);
}

void Engine::ProposeDrafts() {
  for (const RequestId id : scheduler_.running()) {
    const Sequence& s = scheduler_.sequence(id);
    if (s.num_pending() != 1 || s.num_computed < s.num_prompt_tokens) continue;  // prefilling
    Request& r = request(s.group_id());
    if (!r.decoding->drafts()) continue;  // beams are scored, not drafted
    Member& m = r.member(id);
    const uint64_t k = DraftLimit(m);
    // Tokens this step may still emit: the pending token's successor, then
    // one per accepted draft token.
    const uint64_t room = s.max_tokens - s.num_output_tokens();
    std::vector<int32_t> draft;
    if (k > 0 && room > 1) {
      DraftState& d = m.draft;
      if (d.pause > 0) {
        --d.pause;
      } else {
        draft = drafter_->Propose(id, s.tokens, std::min({d.length, k, room - 1}));
      }
    }
    scheduler_.SetDraft(id, std::move(draft));
  }
}

Result<std::vector<StepOutput>> Engine::Step() {
  std::vector<StepOutput> out;
  if (!HasUnfinished()) return out;
  ProposeDrafts();
  FOLIO_ASSIGN_OR_RETURN(SchedulerOutput plan, scheduler_.Schedule());
  if (plan.empty()) return out;
  std::vector<model::LogitRows> rows;
  for (const ScheduledSequence& p : plan.scheduled) {
    const Request& r = request(RequestOf(p.id));
    rows.push_back(r.decoding->Rows(*this, r.member(p.id), p));
  }
  std::vector<float> hidden;
  Result<std::vector<float>> logits = runner_.Execute(*kv_, plan, rows, &hidden);
  if (!logits.ok()) {
    scheduler_.Abandon(std::move(plan));
    return logits.error();
  }
  FOLIO_RETURN_IF_ERROR(scheduler_.Commit(plan));
  ++steps_;

  // The requests with rows in this step, by id; those left without
  // sequences are forgotten however the step ends.
  std::set<RequestId> ran;
  struct Sweep {
    Engine& e;
    const std::set<RequestId>& ran;
    ~Sweep() {
      for (const RequestId id : ran) {
        auto it = e.requests_.find(id);
        if (it != e.requests_.end() && it->second.members.empty()) e.requests_.erase(it);
      }
    }
  } sweep{*this, ran};
  const uint64_t vocab = runner_.config().vocab_size, width = runner_.config().hidden_size;
  uint64_t offset = 0;         // rows of `logits` before sequence i's
  uint64_t hidden_offset = 0;  // rows of `hidden` before sequence i's
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const ScheduledSequence& p = plan.scheduled[i];
    const RequestId id = RequestOf(p.id);
    Request& r = request(id);
    if (Member& m = r.member(p.id); p.admitted_now && m.output) {
      OutputProcessor::NoteAdmission(*m.output, p.prefix_hit_tokens);
    }
    std::span<const float> mine;
    if (rows[i] == model::LogitRows::kHidden) {
      mine = std::span<const float>(hidden).subspan(hidden_offset * width, p.num_tokens * width);
      hidden_offset += p.num_tokens;
    } else {
      const uint64_t n = rows[i] == model::LogitRows::kAll ? p.num_tokens : 1;
      mine = std::span<const float>(*logits).subspan(offset * vocab, n * vocab);
      offset += n;
    }
    ran.insert(id);
    FOLIO_RETURN_IF_ERROR(r.decoding->OnRows(*this, id, p, rows[i], mine, out));
  }
  for (const RequestId id : ran) {
    FOLIO_RETURN_IF_ERROR(request(id).decoding->AfterStep(*this, id, out));
  }
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
