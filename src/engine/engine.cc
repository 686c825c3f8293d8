#include "folio/engine/engine.h"

#include <algorithm>
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

Result<Engine> Engine::Create(const model::Model& model, EngineConfig config, ThreadPool* pool) {
  if (config.max_num_seqs == 0 || config.max_num_batched_tokens < config.max_num_seqs) {
    return Status::InvalidArgument("need max_num_seqs >= 1 and max_num_batched_tokens >= "
                                   "max_num_seqs (got " + std::to_string(config.max_num_seqs) +
                                   ", " + std::to_string(config.max_num_batched_tokens) + ")");
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
  return Engine(model::Decoder<float>(model, pool), std::move(cache), config);
}

Result<RequestId> Engine::AddRequest(std::vector<int32_t> prompt, RequestParams params) {
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
  // The last selected token is never fed, so a request caches at most
  // prompt + max_tokens - 1 positions.
  const uint64_t positions = prompt.size() + params.max_tokens - 1;
  if (positions > c.max_positions) {
    return Status::OutOfRange("prompt of " + std::to_string(prompt.size()) + " + max_tokens " +
                              std::to_string(params.max_tokens) + " exceeds the model's " +
                              std::to_string(c.max_positions) + " positions");
  }
  if (CeilDiv(positions, config_.page_size) > config_.num_pages) {
    return Status::ResourceExhausted("request needs " +
                                     std::to_string(CeilDiv(positions, config_.page_size)) +
                                     " pages; the pool has " +
                                     std::to_string(config_.num_pages));
  }
  const RequestId id = next_id_++;
  Request r{id, std::move(prompt), params, SplitMix64(params.seed), {}, std::nullopt, 0, 0};
  requests_.emplace(id, std::move(r));
  waiting_.push_back(id);
  return id;
}

void Engine::Preempt(Request& r) {
  FOLIO_CHECK(cache_.Release(*r.seq).ok());
  r.seq.reset();
  r.computed = 0;  // recompute prompt and generated tokens later
  running_.erase(std::find(running_.begin(), running_.end(), r.id));
  waiting_.push_front(r.id);
  ++stats_.preemptions;
}

void Engine::Finish(Request& r, FinishReason why, std::vector<StepOutput>& out) {
  if (r.seq) FOLIO_CHECK(cache_.Release(*r.seq).ok());
  r.seq.reset();
  running_.erase(std::remove(running_.begin(), running_.end(), r.id), running_.end());
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), r.id), waiting_.end());
  auto it = std::find_if(out.begin(), out.end(), [&](const StepOutput& o) { return o.id == r.id; });
  if (it == out.end()) it = out.insert(out.end(), StepOutput{r.id, {}, FinishReason::kNone});
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

Result<std::vector<StepOutput>> Engine::Step() {
  std::vector<StepOutput> out;
  if (!HasUnfinished()) return out;
  // Candidates in priority order: running sequences (decodes, then the
  // rest of partially prefilled prompts), then waiting requests, FCFS.
  struct Pick {
    RequestId id;
    uint64_t tokens;
    bool admitted_now;
  };
  std::vector<Pick> picks;
  uint64_t budget = config_.max_num_batched_tokens;
  for (bool decodes : {true, false}) {
    for (RequestId id : running_) {
      const Request& r = requests_.at(id);
      if ((Pending(r) == 1) != decodes || budget == 0) continue;
      const uint64_t n = std::min(Pending(r), budget);
      picks.push_back({id, n, false});
      budget -= n;
    }
  }
  uint64_t admitted = 0;
  for (RequestId id : waiting_) {
    if (budget == 0 || running_.size() + admitted >= config_.max_num_seqs) break;
    const uint64_t n = std::min(Pending(requests_.at(id)), budget);
    picks.push_back({id, n, true});
    budget -= n;
    ++admitted;
  }
  for (const Pick& p : picks) {
    Request& r = requests_.at(p.id);
    if (p.admitted_now) r.seq = cache_.AddSequence();
  }

  // Shed load until the pool can hold the step: first the newest
  // admissions, then preempt running sequences, most recently admitted
  // first (vLLM's recompute policy).
  std::optional<kv::AppendPlan> plan;
  while (true) {
    std::vector<std::pair<kv::SeqId, uint64_t>> requests;
    for (const Pick& p : picks) requests.emplace_back(*requests_.at(p.id).seq, p.tokens);
    FOLIO_ASSIGN_OR_RETURN(plan, cache_.PrepareAppend(requests));
    if (plan) break;
    auto newest = std::find_if(picks.rbegin(), picks.rend(),
                               [](const Pick& p) { return p.admitted_now; });
    if (newest != picks.rend()) {
      Request& r = requests_.at(newest->id);
      FOLIO_CHECK(cache_.Release(*r.seq).ok());
      r.seq.reset();
      picks.erase(std::next(newest).base());
      continue;
    }
    if (running_.empty()) return Status::FailedPrecondition("no request fits the pool");
    Request& victim = requests_.at(running_.back());
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
    for (uint64_t i = r.computed; i < r.computed + p.tokens; ++i) {
      tokens.push_back(i < r.prompt.size() ? r.prompt[i] : r.output[i - r.prompt.size()]);
    }
  }
  Result<kv::BatchMetadata> meta = cache_.BuildBatchMetadata(seqs, &*plan);
  Result<std::vector<float>> logits =
      meta.ok() ? decoder_.Step(cache_, *meta, tokens, model::LogitRows::kLast)
                : Result<std::vector<float>>(meta.error());
  if (!logits.ok()) {
    cache_.Abort(std::move(*plan));
    return logits.error();
  }
  cache_.Commit(*plan);
  ++stats_.steps;

  const uint64_t vocab = decoder_.config().vocab_size;
  for (size_t i = 0; i < picks.size(); ++i) {
    Request& r = requests_.at(picks[i].id);
    if (picks[i].admitted_now) {
      running_.push_back(r.id);
      waiting_.erase(std::find(waiting_.begin(), waiting_.end(), r.id));
      r.admitted_at = admissions_++;
    }
    if (Pending(r) == 1 && r.computed >= r.prompt.size()) {
      ++stats_.decode_tokens;
    } else {
      stats_.prompt_tokens_computed += picks[i].tokens;
    }
    r.computed += picks[i].tokens;
    if (Pending(r) != 0) continue;  // prompt chunk; more to feed
    const std::span<const float> row = std::span<const float>(*logits).subspan(i * vocab, vocab);
    FOLIO_ASSIGN_OR_RETURN(int32_t token, sampling::SelectToken<float>(row, r.params.sampling, r.rng));
    r.output.push_back(token);
    out.push_back({r.id, {token}, FinishReason::kNone});
    const auto& stops = r.params.stop_token_ids;
    if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
      Finish(r, FinishReason::kStop, out);
    } else if (r.output.size() == r.params.max_tokens) {
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
