// ModelRunner: runs one planned step on the model.
//
// It takes the scheduler's plan, builds the step's batch metadata once
// (block tables, context lengths, slot mapping), runs every layer's forward
// pass over the step's tokens, writing their K/V rows through the slot
// mapping and reading attention through the block tables, and returns the
// logits of each scheduled sequence's last row. It neither commits nor
// aborts: the engine does, through the scheduler.
#ifndef FOLIO_ENGINE_MODEL_RUNNER_H_
#define FOLIO_ENGINE_MODEL_RUNNER_H_

#include <memory>
#include <string>
#include <vector>

#include "folio/core/status.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/kv_cache_manager.h"
#include "folio/engine/scheduler.h"
#include "folio/model/decoder.h"
#include "folio/model/model.h"

namespace folio::engine {

class ModelRunner {
 public:
  // backend (not null) computes; attention (optional) replaces the direct
  // page reads, for benchmarks (model::PagedAttentionPath).
  ModelRunner(const model::Model& model, std::shared_ptr<backend::Backend> backend,
              std::shared_ptr<model::PagedAttentionPath> attention)
      : decoder_(model, std::move(backend)), attention_(std::move(attention)) {}

  const model::ModelConfig& config() const { return decoder_.config(); }
  const std::string& model_id() const { return decoder_.model_id(); }

  // Logits, sequence by sequence: the last row of each scheduled sequence,
  // every row it fed where rows[i] is kAll, none where it is kHidden (rows:
  // one per scheduled sequence); the kHidden sequences' final hidden states
  // go to *hidden (model::Decoder::Step). Errors: the metadata's or the
  // decoder's (a non-finite K/V row or logit); the caller then abandons the
  // step.
  Result<std::vector<float>> Execute(KvCacheManager& kv, const SchedulerOutput& step,
                                     std::span<const model::LogitRows> rows,
                                     std::vector<float>* hidden = nullptr) const;

  // An encoder's classification head on a first-position state
  // (model::Decoder::Classify).
  Result<std::vector<float>> Classify(std::span<const float> cls) const {
    return decoder_.Classify(cls);
  }

 private:
  model::Decoder decoder_;
  std::shared_ptr<model::PagedAttentionPath> attention_;
};

}  // namespace folio::engine

#endif  // FOLIO_ENGINE_MODEL_RUNNER_H_
