#include "folio/engine/model_runner.h"

#include "folio/core/check.h"

namespace folio::engine {

Result<std::vector<float>> ModelRunner::Execute(KvCacheManager& kv,
                                                const SchedulerOutput& step) const {
  FOLIO_CHECK(step.plan.has_value());
  FOLIO_ASSIGN_OR_RETURN(kv::BatchMetadata meta, kv.BuildBatchMetadata(step.seqs, *step.plan));
  return decoder_.Step(kv.mutable_cache(), meta, step.token_ids, model::LogitRows::kLast,
                       attention_.get());
}

}  // namespace folio::engine
