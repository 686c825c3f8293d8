#include "folio/engine/engine.h"

#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "folio/core/checked_math.h"

namespace folio::engine {

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
  const model::ModelConfig& c = model.config();
  kv::PagedKvCacheConfig kc;
  kc.num_layers = c.num_layers;
  kc.num_kv_heads = c.num_kv_heads;
  kc.head_dim = c.head_dim();
  kc.page_size = config.page_size;
  kc.num_pages = config.num_pages;
  kc.dtype = config.kv_dtype;
  std::shared_ptr<backend::Backend> backend = backend::MakeBackend(config.backend, pool);
  FOLIO_ASSIGN_OR_RETURN(KvCacheManager kv,
                         KvCacheManager::Create(kc, config.prefix_caching, backend.get()));
  if (!policies.admission) {
    const auto watermark_pages =
        static_cast<uint64_t>(std::ceil(config.watermark * static_cast<double>(config.num_pages)));
    policies.admission = std::make_shared<WatermarkAdmission>(watermark_pages);
  }
  return Engine(std::make_unique<KvCacheManager>(std::move(kv)), model, config, std::move(backend),
                tokenizer, std::move(policies));
}

Engine::Engine(std::unique_ptr<KvCacheManager> kv, const model::Model& model, EngineConfig config,
               std::shared_ptr<backend::Backend> backend, const tokenizer::Tokenizer* tokenizer,
               EnginePolicies policies)
    : config_(config),
      kv_(std::move(kv)),
      scheduler_({config.max_num_batched_tokens, config.max_num_seqs}, kv_.get(),
                 std::move(policies.admission)),
      runner_(model, std::move(backend), std::move(policies.attention)),
      outputs_(tokenizer) {}

Status Engine::ValidateRequest(std::span<const int32_t> prompt, const RequestParams& params) const {
  FOLIO_RETURN_IF_ERROR(params.sampling.Validate());
  const model::ModelConfig& c = runner_.config();
  if (prompt.empty()) return Status::InvalidArgument("prompt is empty");
  if (params.max_tokens == 0) return Status::InvalidArgument("max_tokens must be >= 1");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || static_cast<uint64_t>(prompt[i]) >= c.vocab_size) {
      return Status::OutOfRange("prompt token " + std::to_string(i) + " has id " +
                                std::to_string(prompt[i]) + " outside the vocabulary");
    }
  }
  if (!params.stop_strings.empty() && outputs_.tokenizer() == nullptr) {
    return Status::InvalidArgument("stop strings need an engine with a tokenizer");
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
                                     " pages; the pool has " + std::to_string(config_.num_pages));
  }
  return Status::Ok();
}

Result<RequestId> Engine::AddRequest(std::vector<int32_t> prompt, RequestParams params) {
  FOLIO_RETURN_IF_ERROR(ValidateRequest(prompt, params));
  const RequestId id = next_id_++;
  Sequence s;
  s.id = id;
  s.num_prompt_tokens = prompt.size();
  s.max_tokens = params.max_tokens;
  s.tokens = std::move(prompt);
  outputs_.Add(id, outputs_.NewState(params));
  scheduler_.AddWaiting(std::move(s));
  return id;
}

Status Engine::Abort(RequestId id) {
  if (!scheduler_.Contains(id)) {
    return Status::NotFound("no unfinished request " + std::to_string(id));
  }
  scheduler_.Finish(id);
  outputs_.Remove(id);
  return Status::Ok();
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
  return e;
}

Result<std::vector<StepOutput>> Engine::Step() {
  std::vector<StepOutput> out;
  if (!HasUnfinished()) return out;
  FOLIO_ASSIGN_OR_RETURN(SchedulerOutput plan, scheduler_.Schedule());
  if (plan.empty()) return out;
  // Every row's logits for requests that asked for their prompt's.
  std::vector<model::LogitRows> rows(plan.scheduled.size(), model::LogitRows::kLast);
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const Sequence& s = scheduler_.sequence(plan.scheduled[i].id);
    if (outputs_.state(s.id).params.prompt_logits && s.num_computed < s.num_prompt_tokens) {
      rows[i] = model::LogitRows::kAll;
    }
  }
  Result<std::vector<float>> logits = runner_.Execute(*kv_, plan, rows);
  if (!logits.ok()) {
    scheduler_.Abandon(std::move(plan));
    return logits.error();
  }
  FOLIO_RETURN_IF_ERROR(scheduler_.Commit(plan));
  ++steps_;

  const uint64_t vocab = runner_.config().vocab_size;
  const std::span<const float> all(*logits);
  uint64_t offset = 0;  // rows of `all` before sequence i's
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const RequestId id = plan.scheduled[i].id;
    const Sequence& s = scheduler_.sequence(id);
    const uint64_t n = rows[i] == model::LogitRows::kAll ? plan.scheduled[i].num_tokens : 1;
    const std::span<const float> mine = all.subspan(offset * vocab, n * vocab);
    offset += n;
    StepOutput prompt_part{id, {}, {}, {}, FinishReason::kNone, {}};
    if (rows[i] == model::LogitRows::kAll) {
      outputs_.AddPromptLogits(id, s.num_computed - n, s.num_prompt_tokens, mine, vocab,
                               prompt_part);
    }
    if (s.num_pending() != 0) {  // a prompt chunk; more to feed
      if (!prompt_part.prompt_logits.empty()) out.push_back(std::move(prompt_part));
      continue;
    }
    FOLIO_ASSIGN_OR_RETURN(StepOutput o,
                           outputs_.Process(id, mine.last(vocab), s.num_output_tokens() + 1));
    o.prompt_logits = std::move(prompt_part.prompt_logits);
    scheduler_.AppendToken(id, o.new_tokens.front());
    if (o.finish != FinishReason::kNone) {
      scheduler_.Finish(id);
      outputs_.Remove(id);
    }
    out.push_back(std::move(o));
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
