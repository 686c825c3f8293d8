#include "reference/placed_cache.h"

#include <limits>

#include "folio/core/checked_math.h"

namespace folio::reference {

Result<PlacedCache> MakePlacedCache(const model::ModelConfig& config, uint64_t page_size,
                                    std::span<const uint64_t> table, uint64_t batch,
                                    DType kv_dtype) {
  if (batch == 0 || table.empty()) {
    return Status::InvalidArgument("a placed cache needs batch > 0 and a non-empty table");
  }
  const auto num_pages = CheckedMul(table.size(), batch);
  if (!num_pages || *num_pages > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return Status::OutOfRange("table of " + std::to_string(table.size()) + " pages times batch " +
                              std::to_string(batch) + " exceeds int32 page ids");
  }
  kv::PagedKvCacheConfig kc;
  kc.num_layers = config.num_layers;
  kc.num_kv_heads = config.num_kv_heads;
  kc.head_dim = config.head_dim();
  kc.page_size = page_size;
  kc.num_pages = *num_pages;
  kc.dtype = kv_dtype;
  FOLIO_ASSIGN_OR_RETURN(kv::PagedKvCache cache, kv::PagedKvCache::Create(kc));
  PlacedCache c{std::move(cache), {}};
  for (uint64_t b = 0; b < batch; ++b) {
    std::vector<kv::PageId> placement;
    for (const uint64_t page : table) {
      if (page >= table.size()) {
        return Status::OutOfRange("table entry " + std::to_string(page) + " is past its " +
                                  std::to_string(table.size()) + " pages");
      }
      placement.push_back(static_cast<kv::PageId>(page * batch + b));
    }
    FOLIO_ASSIGN_OR_RETURN(kv::SeqId lane, c.cache.AddPlacedSequence(std::move(placement)));
    c.lanes.push_back(lane);
  }
  return c;
}

}  // namespace folio::reference
