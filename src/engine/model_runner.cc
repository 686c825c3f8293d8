#include "folio/engine/model_runner.h"

#include "folio/core/check.h"

namespace folio::engine {

Result<std::vector<float>> ModelRunner::Execute(KvCacheManager& kv, const SchedulerOutput& step,
                                                std::span<const model::LogitRows> rows,
                                                std::vector<float>* hidden) const {
  FOLIO_CHECK(step.plan.has_value() && rows.size() == step.scheduled.size());
  FOLIO_ASSIGN_OR_RETURN(std::vector<kv::BatchMetadata> metas,
                         kv.BuildBatchMetadata(step.seqs, *step.plan));
  return decoder_.Step(kv.mutable_cache(), metas, step.token_ids, rows, attention_.get(), hidden,
                       step.token_types);
}

}  // namespace folio::engine
