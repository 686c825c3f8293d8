// A fixed page table made literal on the engine's paged cache: `batch`
// lanes in lockstep, lane b's logical page lp at page table[lp] * batch + b
// (the worked example's [N, B, H_kv, P, d] array is a pool of N * B pages
// shaped [H_kv, P, d]), each page claimed from the pool when the lane first
// reaches it (kv::PagedKvCache::AddPlacedSequence). A contiguous cache is
// the table {0} with pages of the whole capacity.
//
// StepLanes appends n tokens to every lane in one step of either decoder
// (model::Decoder, or the float64 reference) and commits it, or aborts it
// on any error, so a failed step changes nothing.
#ifndef FOLIO_TOOLS_REFERENCE_PLACED_CACHE_H_
#define FOLIO_TOOLS_REFERENCE_PLACED_CACHE_H_

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "folio/core/dtype.h"
#include "folio/core/status.h"
#include "folio/kv/paged_kv_cache.h"
#include "folio/model/config.h"
#include "folio/model/decoder.h"

namespace folio::reference {

struct PlacedCache {
  kv::PagedKvCache cache;
  std::vector<kv::SeqId> lanes;  // [batch]
  uint64_t length() const { return cache.length(lanes.front()); }
};

// Errors: batch 0, an empty table, a table entry past the pool, a table
// that names a page twice, and PagedKvCache::Create's.
Result<PlacedCache> MakePlacedCache(const model::ModelConfig& config, uint64_t page_size,
                                    std::span<const uint64_t> table, uint64_t batch,
                                    DType kv_dtype);

// tokens [batch, n], lane-major; logits of every row ([batch, n, vocab];
// kAll) or of each lane's last ([batch, vocab]; kLast). Errors: tokens not
// [batch, n >= 1]; a lane outgrowing its table (OutOfRange) or a page it
// must claim in use (ResourceExhausted); the decoder's.
template <typename Decoder>
auto StepLanes(const Decoder& decoder, PlacedCache& c, std::span<const int32_t> tokens,
               model::LogitRows rows) -> decltype(decoder.Step(c.cache, {}, tokens, rows)) {
  const uint64_t batch = c.lanes.size();
  if (tokens.empty() || tokens.size() % batch != 0) {
    return Status::InvalidArgument("tokens must be [batch=" + std::to_string(batch) +
                                   ", n >= 1] (got " + std::to_string(tokens.size()) + " ids)");
  }
  const uint64_t n = tokens.size() / batch;
  std::vector<std::pair<kv::SeqId, uint64_t>> requests;
  for (const kv::SeqId lane : c.lanes) requests.emplace_back(lane, n);
  FOLIO_ASSIGN_OR_RETURN(std::optional<kv::AppendPlan> plan, c.cache.PrepareAppend(requests));
  if (!plan) return Status::ResourceExhausted("a page the step must claim is in use");
  Result<kv::BatchMetadata> meta = c.cache.BuildBatchMetadata(c.lanes, &*plan);
  auto logits = meta.ok() ? decoder.Step(c.cache, *meta, tokens, rows)
                          : decltype(decoder.Step(c.cache, {}, tokens, rows))(meta.status());
  if (logits.ok()) {
    c.cache.Commit(*plan);
  } else {
    c.cache.Abort(std::move(*plan));
  }
  return logits;
}

}  // namespace folio::reference

#endif  // FOLIO_TOOLS_REFERENCE_PLACED_CACHE_H_
