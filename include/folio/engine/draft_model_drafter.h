// Speculative decoding with a draft model: a smaller checkpoint that shares
// the target's vocabulary proposes greedily, and the engine verifies (see
// drafter.h: the emitted stream is plain decoding's whatever is proposed).
//
// The drafter runs the draft model on a paged KV pool of its own. Per
// request it keeps one draft sequence whose cache holds a prefix of the
// request's tokens. Each Propose cuts that sequence back to the longest
// prefix it shares with the request's tokens now (so draft tokens the
// target rejected, or tokens a preemption recomputed differently, leave it
// again: pages only they used go back to the pool), feeds the tokens it
// lacks in one step, then decodes greedily one token a step. When its pool
// is full it frees the least recently used other request's sequence, and
// if that is not enough proposes what it has: drafts are optional.
#ifndef FOLIO_ENGINE_DRAFT_MODEL_DRAFTER_H_
#define FOLIO_ENGINE_DRAFT_MODEL_DRAFTER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "folio/backend/backend.h"
#include "folio/core/status.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/drafter.h"
#include "folio/engine/kv_cache_manager.h"
#include "folio/engine/model_runner.h"
#include "folio/model/model.h"

namespace folio::engine {

class DraftModelDrafter final : public Drafter {
 public:
  struct Config {
    uint64_t page_size = 16;
    uint64_t num_pages = 256;
    DType kv_dtype = DType::kF32;
    backend::BackendKind backend = backend::BackendKind::kCpu;
    ops::MatMulActivations matmul_activations = ops::MatMulActivations::kQ8;
  };
  // draft must outlive the drafter; pool (optional) is shared with the
  // target. Errors: a vocabulary that differs from target_vocab_size
  // (InvalidArgument), the pool's.
  static Result<std::unique_ptr<DraftModelDrafter>> Create(const model::Model& draft,
                                                           uint64_t target_vocab_size,
                                                           const Config& config,
                                                           ThreadPool* pool = nullptr);

  std::vector<int32_t> Propose(uint64_t id, std::span<const int32_t> tokens,
                               uint64_t max_tokens) override;
  void Forget(uint64_t id) override;

  // Requests with a draft sequence, and the draft pool (for tests, stats).
  uint64_t num_sequences() const { return states_.size(); }
  const kv::PagedKvCache& cache() const { return kv_->cache(); }
  const model::ModelConfig& config() const { return runner_.config(); }

 private:
  struct State {
    kv::SeqId seq = 0;
    std::vector<int32_t> cached;  // the tokens whose K/V the sequence holds
    uint64_t last_used = 0;
  };
  DraftModelDrafter(std::shared_ptr<backend::Backend> backend, std::unique_ptr<KvCacheManager> kv,
                    const model::Model& draft)
      : backend_(backend), kv_(std::move(kv)), runner_(draft, backend, nullptr) {}
  // Feeds `tokens` after what s holds, in one step; the draft model's
  // greedy next token. ResourceExhausted (nothing changed) when the pool
  // has no room even after freeing every other request's sequence.
  Result<int32_t> Feed(uint64_t id, State& s, std::span<const int32_t> tokens);

  std::shared_ptr<backend::Backend> backend_;  // first: the pool's memory is the backend's
  std::unique_ptr<KvCacheManager> kv_;
  ModelRunner runner_;
  std::map<uint64_t, State> states_;
  uint64_t clock_ = 0;
};

}  // namespace folio::engine

#endif  // FOLIO_ENGINE_DRAFT_MODEL_DRAFTER_H_
