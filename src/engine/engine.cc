#include "folio/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "folio/core/checked_math.h"

namespace folio::engine {

std::string_view FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
  }
  return "unknown";
}

Result<Engine> Engine::Create(const model::Model& model, EngineConfig config, ThreadPool* pool,
                              const model::Tokenizer* tokenizer) {
  if (config.max_num_seqs == 0 || config.max_num_batched_tokens < config.max_num_seqs) {
    return Status::InvalidArgument("need max_num_seqs >= 1 and max_num_batched_tokens >= "
                                   "max_num_seqs (got " + std::to_string(config.max_num_seqs) +
                                   ", " + std::to_string(config.max_num_batched_tokens) + ")");
  }
  if (!(config.watermark >= 0.0 && config.watermark < 1.0)) {
    return Status::InvalidArgument("watermark must be in [0, 1) (got " +
                                   std::to_string(config.watermark) + ")");
  }
  const model::ModelConfig& c = model.config();
  kv::PagedKvCacheConfig kc;
  kc.num_layers = c.num_layers;
  kc.num_kv_heads = c.num_kv_heads;
  kc.head_dim = c.head_dim();
  kc.page_size = config.page_size;
  kc.num_pages = config.num_pages;
  kc.dtype = config.kv_dtype;
  FOLIO_ASSIGN_OR_RETURN(kv::PagedKvCache cache, kv::PagedKvCache::Create(kc));
  return Engine(model::Decoder<float>(model, pool), std::move(cache), config, tokenizer);
}

Status Engine::ValidateRequest(const std::vector<int32_t>& prompt,
                               const RequestParams& params) const {
  FOLIO_RETURN_IF_ERROR(params.sampling.Validate());
  const model::ModelConfig& c = decoder_.config();
  if (prompt.empty()) return Status::InvalidArgument("prompt is empty");
  if (params.max_tokens == 0) return Status::InvalidArgument("max_tokens must be >= 1");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || static_cast<uint64_t>(prompt[i]) >= c.vocab_size) {
      return Status::OutOfRange("prompt token " + std::to_string(i) + " has id " +
                                std::to_string(prompt[i]) + " outside the vocabulary");
    }
  }
  if (!params.stop_strings.empty() && tokenizer_ == nullptr) {
    return Status::InvalidArgument("stop strings need an engine with a tokenizer");
  }
  for (size_t i = 0; i < params.stop_strings.size(); ++i) {
    if (params.stop_strings[i].empty()) {
      return Status::InvalidArgument("stop string " + std::to_string(i) + " is empty");
    }
  }
  if (params.top_logprobs > sampling::kMaxTopLogprobs) {
    return Status::InvalidArgument("top_logprobs " + std::to_string(params.top_logprobs) +
                                   " exceeds " + std::to_string(sampling::kMaxTopLogprobs));
  }
  // The last selected token is never fed, so a request caches at most
  // prompt + max_tokens - 1 positions.
  const std::optional<uint64_t> positions = CheckedAdd(prompt.size() - 1, params.max_tokens);
  if (!positions || *positions > c.max_positions) {
    return Status::OutOfRange("prompt of " + std::to_string(prompt.size()) + " + max_tokens " +
                              std::to_string(params.max_tokens) + " exceeds the model's " +
                              std::to_string(c.max_positions) + " positions");
  }
  if (CeilDiv(*positions, config_.page_size) > config_.num_pages) {
    return Status::ResourceExhausted("request needs " +
                                     std::to_string(CeilDiv(*positions, config_.page_size)) +
                                     " pages; the pool has " +
                                     std::to_string(config_.num_pages));
  }
  return Status::Ok();
}

Result<RequestId> Engine::AddRequest(std::vector<int32_t> prompt, RequestParams params) {
  FOLIO_RETURN_IF_ERROR(ValidateRequest(prompt, params));
  const RequestId id = next_id_++;
  Request& r = requests_[id];
  r.id = id;
  r.prompt = std::move(prompt);
  r.params = std::move(params);
  r.rng = SplitMix64(r.params.seed);
  if (tokenizer_ != nullptr) r.detok.emplace(*tokenizer_);
  waiting_.push_back(id);
  return id;
}

void Engine::ReleaseSequence(Request& r) {
  if (!r.seq) return;
  if (config_.prefix_caching) prefix_.Touch(cache_.block_table(*r.seq));
  FOLIO_CHECK(cache_.Release(*r.seq).ok());
  r.seq.reset();
  r.computed = 0;
  r.pages_cached = 0;
  r.chain = kv::PrefixCache::kRoot;
  r.chain_hash = kv::PrefixCache::kRootHash;
}

Status Engine::Admit(Request& r) {
  kv::PrefixCache::Match m;
  if (config_.prefix_caching) {
    const uint64_t total = r.prompt.size() + r.output.size();
    std::vector<int32_t> tokens(total);
    for (uint64_t i = 0; i < total; ++i) tokens[i] = TokenAt(r, i);
    m = prefix_.Lookup(tokens, (total - 1) / config_.page_size);
  }
  FOLIO_ASSIGN_OR_RETURN(kv::SeqId seq, cache_.AddSequence(m.pages));
  r.seq = seq;
  r.computed = m.pages.size() * config_.page_size;
  r.pages_cached = m.pages.size();
  r.chain = m.last;
  r.chain_hash = m.last_hash;
  return Status::Ok();
}

Status Engine::CachePages(Request& r) {
  const uint64_t page = config_.page_size;
  if ((r.pages_cached + 1) * page > r.computed) return Status::Ok();  // most steps
  std::vector<int32_t> tokens(page);
  while ((r.pages_cached + 1) * page <= r.computed && prefix_.HasEntry(r.chain)) {
    for (uint64_t i = 0; i < page; ++i) tokens[i] = TokenAt(r, r.pages_cached * page + i);
    const kv::PageId id = cache_.block_table(*r.seq)[r.pages_cached];
    FOLIO_ASSIGN_OR_RETURN(kv::PrefixCache::Inserted in,
                           prefix_.Insert(cache_, r.chain, r.chain_hash, tokens, id));
    r.chain = in.entry;
    r.chain_hash = in.hash;
    ++r.pages_cached;
  }
  return Status::Ok();
}

bool Engine::EmitText(Request& r, int32_t token, StepOutput& out) {
  if (!r.detok) return false;
  r.text += r.detok->Push(token);
  // A stop string cannot start before text_sent: whatever might have
  // started one was held back.
  size_t stop = std::string::npos;
  for (const std::string& s : r.params.stop_strings) {
    stop = std::min(stop, r.text.find(s, r.text_sent));
  }
  if (stop != std::string::npos) {
    r.text.resize(stop);
    out.text += r.text.substr(r.text_sent);
    r.text_sent = stop;
    return true;
  }
  // Hold back the longest tail that is the start of some stop string.
  const std::string_view unsent = std::string_view(r.text).substr(r.text_sent);
  size_t hold = 0;
  for (const std::string& s : r.params.stop_strings) {
    for (size_t len = std::min(s.size() - 1, unsent.size()); len > hold; --len) {
      if (unsent.substr(unsent.size() - len) == std::string_view(s).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  out.text += unsent.substr(0, unsent.size() - hold);
  r.text_sent = r.text.size() - hold;
  return false;
}

void Engine::FlushText(Request& r, StepOutput& out) {
  if (!r.detok) return;
  r.text += r.detok->Flush();
  out.text += r.text.substr(r.text_sent);
  r.text_sent = r.text.size();
}

void Engine::Preempt(Request& r) {
  if (config_.reserve_max_length) reserved_pages_ -= Reservation(r);
  ReleaseSequence(r);
  running_.erase(std::find(running_.begin(), running_.end(), r.id));
  waiting_.push_front(r.id);
  ++stats_.preemptions;
}

void Engine::Finish(Request& r, FinishReason why, std::vector<StepOutput>& out) {
  const bool running = std::find(running_.begin(), running_.end(), r.id) != running_.end();
  if (config_.reserve_max_length && running) reserved_pages_ -= Reservation(r);
  ReleaseSequence(r);
  running_.erase(std::remove(running_.begin(), running_.end(), r.id), running_.end());
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), r.id), waiting_.end());
  auto it = std::find_if(out.begin(), out.end(), [&](const StepOutput& o) { return o.id == r.id; });
  if (it == out.end()) it = out.insert(out.end(), StepOutput{r.id, {}, {}, {}, FinishReason::kNone});
  it->finish = why;
  requests_.erase(r.id);
}

Status Engine::Abort(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return Status::NotFound("no unfinished request " + std::to_string(id));
  std::vector<StepOutput> unused;
  Finish(it->second, FinishReason::kAbort, unused);
  return Status::Ok();
}

Status Engine::ClearPrefixCache() {
  const uint64_t before = prefix_.stats().evicted;
  FOLIO_RETURN_IF_ERROR(prefix_.Clear(cache_));
  stats_.prefix_evictions += prefix_.stats().evicted - before;
  return Status::Ok();
}

Result<std::vector<StepOutput>> Engine::Step() {
  std::vector<StepOutput> out;
  if (!HasUnfinished()) return out;
  const uint64_t page = config_.page_size;
  // Pages a step may take: free ones and cached ones no sequence reads
  // (O(1); an admission that reuses cached pages makes them unavailable).
  auto available = [&] {
    return cache_.pool().num_free() + (config_.prefix_caching ? prefix_.NumEvictable(cache_) : 0);
  };
  // Pages this step allocates (needed), and pages promised to the running
  // and newly admitted sequences until their prompts are prefilled
  // (promised >= needed): admission checks the promise, so a request is
  // only admitted when its whole pending prefill fits, and a preempted
  // request does not come back just to be preempted again.
  uint64_t needed = 0, promised = 0;
  auto pages_for = [&](const Request& r, uint64_t n) {
    return CeilDiv(r.computed + n, page) - cache_.block_table(*r.seq).size();
  };
  // Candidates in priority order: running sequences (decodes, then the
  // rest of partially prefilled prompts), then waiting requests, FCFS.
  struct Pick {
    RequestId id;
    uint64_t tokens;
    bool admitted_now;
    uint64_t query_tokens = 0;  // prefix-cache accounting of an admission
    uint64_t hit_tokens = 0;
    uint64_t pages = 0;  // pages this step allocates for it
  };
  std::vector<Pick> picks;
  // Undoes an admission of this step: its pages (and reservation) go back,
  // and it stays at its place in the queue.
  auto unadmit = [&](const Pick& p) {
    Request& r = requests_.at(p.id);
    if (config_.reserve_max_length) reserved_pages_ -= Reservation(r);
    ReleaseSequence(r);
    needed -= p.pages;
  };
  // An error before the step ran leaves the engine as it was.
  auto fail = [&](Status s) {
    for (const Pick& p : picks) {
      if (p.admitted_now) unadmit(p);
    }
    return s;
  };
  uint64_t budget = config_.max_num_batched_tokens;
  for (bool decodes : {true, false}) {
    for (RequestId id : running_) {
      const Request& r = requests_.at(id);
      if ((Pending(r) == 1) != decodes || budget == 0) continue;
      const uint64_t n = std::min(Pending(r), budget);
      const uint64_t need = pages_for(r, n);
      picks.push_back({id, n, false, 0, 0, need});
      needed += need;
      promised += pages_for(r, Pending(r));
      budget -= n;
    }
  }
  const auto watermark = static_cast<uint64_t>(
      std::ceil(config_.watermark * static_cast<double>(config_.num_pages)));
  uint64_t admitted = 0;
  for (RequestId id : waiting_) {
    if (budget == 0 || running_.size() + admitted >= config_.max_num_seqs) break;
    Request& r = requests_.at(id);
    if (Status s = Admit(r); !s.ok()) return fail(s);
    const uint64_t n = std::min(Pending(r), budget);
    const uint64_t need = pages_for(r, n);
    const uint64_t need_all = pages_for(r, Pending(r));
    const bool alone = running_.empty() && admitted == 0;
    const bool no_room = config_.reserve_max_length
                             ? reserved_pages_ + Reservation(r) > config_.num_pages
                             : !alone && promised + need_all + watermark > available();
    if (no_room) {
      ReleaseSequence(r);
      break;  // FCFS: nobody overtakes the head of the queue
    }
    needed += need;
    promised += need_all;
    if (config_.reserve_max_length) reserved_pages_ += Reservation(r);
    const uint64_t total = r.prompt.size() + r.output.size();
    picks.push_back({id, n, true, (total - 1) / page * page, r.computed, need});
    budget -= n;
    ++admitted;
  }

  // Make room: evict cached pages first (least recently used), then shed
  // the newest admissions, then preempt running sequences, most recently
  // admitted first (vLLM's recompute policy).
  std::optional<kv::AppendPlan> plan;
  while (true) {
    while (config_.prefix_caching && cache_.pool().num_free() < needed) {
      Result<bool> evicted = prefix_.EvictOne(cache_);
      if (!evicted.ok()) return fail(evicted.status());
      if (!*evicted) break;
      ++stats_.prefix_evictions;
    }
    std::vector<std::pair<kv::SeqId, uint64_t>> requests;
    for (const Pick& p : picks) requests.emplace_back(*requests_.at(p.id).seq, p.tokens);
    Result<std::optional<kv::AppendPlan>> prepared = cache_.PrepareAppend(requests);
    if (!prepared.ok()) return fail(prepared.status());
    plan = std::move(*prepared);
    if (plan) break;
    if (config_.prefix_caching) {
      Result<bool> evicted = prefix_.EvictOne(cache_);
      if (!evicted.ok()) return fail(evicted.status());
      if (*evicted) {
        ++stats_.prefix_evictions;
        continue;
      }
    }
    auto newest = std::find_if(picks.rbegin(), picks.rend(),
                               [](const Pick& p) { return p.admitted_now; });
    if (newest != picks.rend()) {
      unadmit(*newest);
      picks.erase(std::next(newest).base());
      continue;
    }
    if (running_.empty()) return Status::FailedPrecondition("no request fits the pool");
    Request& victim = requests_.at(running_.back());
    for (const Pick& p : picks) {
      if (p.id == victim.id) needed -= p.pages;
    }
    picks.erase(std::remove_if(picks.begin(), picks.end(),
                               [&](const Pick& p) { return p.id == victim.id; }),
                picks.end());
    Preempt(victim);
    if (picks.empty()) return out;
  }
  if (picks.empty()) return out;

  std::vector<kv::SeqId> seqs;
  std::vector<int32_t> tokens;
  for (const Pick& p : picks) {
    const Request& r = requests_.at(p.id);
    seqs.push_back(*r.seq);
    for (uint64_t i = r.computed; i < r.computed + p.tokens; ++i) tokens.push_back(TokenAt(r, i));
  }
  Result<kv::BatchMetadata> meta = cache_.BuildBatchMetadata(seqs, &*plan);
  Result<std::vector<float>> logits =
      meta.ok() ? decoder_.Step(cache_, *meta, tokens, model::LogitRows::kLast,
                                config_.kv_access, &gather_)
                : Result<std::vector<float>>(meta.error());
  if (!logits.ok()) {
    // Nothing happened: the plan is undone and this step's admissions go
    // back to waiting without their sequences.
    cache_.Abort(std::move(*plan));
    return fail(logits.error());
  }
  cache_.Commit(*plan);
  ++stats_.steps;
  stats_.kv_copy_bytes = gather_.kv_copy_bytes;

  const uint64_t vocab = decoder_.config().vocab_size;
  for (size_t i = 0; i < picks.size(); ++i) {
    Request& r = requests_.at(picks[i].id);
    if (picks[i].admitted_now) {
      running_.push_back(r.id);
      waiting_.erase(std::find(waiting_.begin(), waiting_.end(), r.id));
      r.admitted_at = admissions_++;
      stats_.prefix_query_tokens += picks[i].query_tokens;
      stats_.prefix_hit_tokens += picks[i].hit_tokens;
    }
    if (Pending(r) == 1 && r.computed >= r.prompt.size()) {
      ++stats_.decode_tokens;
    } else {
      stats_.prompt_tokens_computed += picks[i].tokens;
    }
    r.computed += picks[i].tokens;
    if (config_.prefix_caching) FOLIO_RETURN_IF_ERROR(CachePages(r));
  }
  stats_.peak_running = std::max<uint64_t>(stats_.peak_running, running_.size());
  stats_.peak_reserved_pages = std::max(stats_.peak_reserved_pages, reserved_pages_);
  for (size_t i = 0; i < picks.size(); ++i) {
    Request& r = requests_.at(picks[i].id);
    if (Pending(r) != 0) continue;  // prompt chunk; more to feed
    const std::span<const float> row = std::span<const float>(*logits).subspan(i * vocab, vocab);
    FOLIO_ASSIGN_OR_RETURN(int32_t token, sampling::SelectToken<float>(row, r.params.sampling, r.rng));
    r.output.push_back(token);
    StepOutput& o = out.emplace_back(StepOutput{r.id, {token}, {}, {}, FinishReason::kNone});
    if (r.params.logprobs) {
      FOLIO_ASSIGN_OR_RETURN(sampling::TokenLogprobs lp,
                             sampling::ComputeLogprobs(row, token, r.params.top_logprobs));
      o.logprobs.push_back(std::move(lp));
    }
    const bool stop_string = EmitText(r, token, o);
    const auto& stops = r.params.stop_token_ids;
    if (stop_string) {
      Finish(r, FinishReason::kStop, out);
    } else if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
      FlushText(r, o);
      Finish(r, FinishReason::kStop, out);
    } else if (r.output.size() == r.params.max_tokens) {
      FlushText(r, o);
      Finish(r, FinishReason::kLength, out);
    }
  }
  return out;
}
Result<std::vector<std::vector<int32_t>>> Engine::Generate(
    const std::vector<std::vector<int32_t>>& prompts, const RequestParams& params) {
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
