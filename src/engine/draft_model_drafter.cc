#include "folio/engine/draft_model_drafter.h"

#include <algorithm>
#include <string>
#include <utility>

#include "folio/core/check.h"
#include "folio/engine/engine.h"
#include "folio/sampling/sampler.h"

namespace folio::engine {

Result<std::unique_ptr<DraftModelDrafter>> DraftModelDrafter::Create(const model::Model& draft,
                                                                     uint64_t target_vocab_size,
                                                                     const Config& config,
                                                                     ThreadPool* pool) {
  const model::ModelConfig& c = draft.config();
  if (c.vocab_size != target_vocab_size) {
    return Status::InvalidArgument("the draft model's vocabulary has " +
                                   std::to_string(c.vocab_size) + " tokens, the target's " +
                                   std::to_string(target_vocab_size) +
                                   " (a draft model must share the target's tokenizer)");
  }
  kv::PagedKvCacheConfig kc =
      KvCacheConfigFor(c, config.page_size, config.num_pages, config.kv_dtype);
  // Propose truncates the drafts the target rejected, up to the most it
  // ever drafts, below the last step's start: a window keeps those too.
  kc.window_margin = kMaxDraftTokens + 1;
  std::shared_ptr<backend::Backend> backend =
      backend::MakeBackend(config.backend, pool, config.matmul_activations);
  FOLIO_ASSIGN_OR_RETURN(KvCacheManager kv, KvCacheManager::Create(kc, false, backend.get()));
  return std::unique_ptr<DraftModelDrafter>(
      new DraftModelDrafter(backend, std::make_unique<KvCacheManager>(std::move(kv)), draft));
}

void DraftModelDrafter::Forget(uint64_t id) {
  auto it = states_.find(id);
  if (it == states_.end()) return;
  kv_->Free(it->second.seq);
  states_.erase(it);
}

Result<int32_t> DraftModelDrafter::Feed(uint64_t id, State& s, std::span<const int32_t> tokens) {
  const std::pair<kv::SeqId, uint64_t> request{s.seq, tokens.size()};
  for (;;) {
    const uint64_t needed = kv_->NumNewPages(s.seq, s.cached.size(), tokens.size());
    FOLIO_ASSIGN_OR_RETURN(std::optional<kv::AppendPlan> plan,
                           kv_->Allocate(std::span(&request, 1), needed));
    if (plan) {
      SchedulerOutput step;
      ScheduledSequence p;
      p.id = id;
      p.seq = s.seq;
      p.num_tokens = tokens.size();
      step.scheduled.push_back(p);
      step.seqs.push_back(s.seq);
      step.token_ids.assign(tokens.begin(), tokens.end());
      step.plan = std::move(*plan);
      const model::LogitRows rows[] = {model::LogitRows::kLast};
      Result<std::vector<float>> logits = runner_.Execute(*kv_, step, rows);
      if (!logits.ok()) {
        kv_->Abort(std::move(*step.plan));
        return logits.status();
      }
      kv_->Commit(*step.plan);
      s.cached.insert(s.cached.end(), tokens.begin(), tokens.end());
      return sampling::TopTokens(*logits, 1).front();  // greedy, ties to the lower id
    }
    // No room: free the least recently used other request's sequence.
    auto victim = states_.end();
    for (auto it = states_.begin(); it != states_.end(); ++it) {
      if (it->first != id &&
          (victim == states_.end() || it->second.last_used < victim->second.last_used)) {
        victim = it;
      }
    }
    if (victim == states_.end()) {
      return Status::ResourceExhausted("the draft pool cannot hold " +
                                       std::to_string(s.cached.size() + tokens.size()) + " tokens");
    }
    Forget(victim->first);
  }
}

std::vector<int32_t> DraftModelDrafter::Propose(uint64_t id, std::span<const int32_t> tokens,
                                                uint64_t max_tokens) {
  // The draft model's positions bound how far it can look ahead.
  const uint64_t positions = runner_.config().max_positions;
  if (tokens.empty() || tokens.size() > positions) return {};
  max_tokens = std::min<uint64_t>(max_tokens, positions - tokens.size() + 1);
  if (max_tokens == 0) return {};
  auto it = states_.find(id);
  if (it == states_.end()) {
    Result<KvCacheManager::Started> started = kv_->StartSequence(tokens);
    if (!started.ok()) return {};
    it = states_.emplace(id, State{started->seq, {}, 0}).first;
  }
  State& s = it->second;
  s.last_used = ++clock_;
  // Keep the longest prefix shared with the request, short of its last
  // token (whose logits give the first draft token).
  const auto shared =
      std::mismatch(s.cached.begin(), s.cached.end(), tokens.begin(), tokens.end() - 1);
  const uint64_t keep = static_cast<uint64_t>(shared.first - s.cached.begin());
  if (keep < s.cached.size()) {
    if (!kv_->Truncate(s.seq, keep).ok()) {
      Forget(id);
      return {};
    }
    s.cached.resize(keep);
  }
  std::vector<int32_t> draft;
  Result<int32_t> next = Feed(id, s, tokens.subspan(keep));
  while (next.ok()) {
    draft.push_back(*next);
    if (draft.size() == max_tokens) break;
    next = Feed(id, s, std::span(&draft.back(), 1));
  }
  return draft;
}

}  // namespace folio::engine
