#include "folio/kv/paged_view.h"

#include <string>

#include "folio/core/checked_math.h"

namespace folio::kv {

Result<std::vector<uint64_t>> BatchContexts(const PagedBatchView& b, uint64_t page_size) {
  const uint64_t batch = b.batch();
  if (b.indptr.size() != batch + 1) {
    return Status::InvalidArgument("indptr has " + std::to_string(b.indptr.size()) +
                                   " entries; batch " + std::to_string(batch) +
                                   " (last_page_len's size) needs " + std::to_string(batch + 1));
  }
  if (b.indptr[0] != 0) {
    return Status::InvalidArgument("indptr[0] must be 0 (got " + std::to_string(b.indptr[0]) + ")");
  }
  for (uint64_t s = 0; s < batch; ++s) {
    if (b.indptr[s + 1] < b.indptr[s]) {
      return Status::InvalidArgument("indptr decreases at " + std::to_string(s + 1) + " (" +
                                     std::to_string(b.indptr[s]) + " to " +
                                     std::to_string(b.indptr[s + 1]) + ")");
    }
  }
  if (static_cast<uint64_t>(b.indptr[batch]) != b.indices.size()) {
    return Status::InvalidArgument("indptr[batch] = " + std::to_string(b.indptr[batch]) +
                                   " but indices has " + std::to_string(b.indices.size()) +
                                   " entries");
  }
  const auto seq = [](uint64_t s) { return "sequence " + std::to_string(s) + ": "; };
  std::vector<uint64_t> contexts(batch);
  for (uint64_t s = 0; s < batch; ++s) {
    const auto pages = static_cast<uint64_t>(b.indptr[s + 1] - b.indptr[s]);
    const int32_t last = b.last_page_len[s];
    if (pages == 0 ? last != 0 : last < 1 || static_cast<uint64_t>(last) > page_size) {
      return Status::InvalidArgument(
          seq(s) + "last_page_len " + std::to_string(last) + " with " + std::to_string(pages) +
          (pages == 0 ? " pages must be 0"
                      : " pages is outside [1, page_size " + std::to_string(page_size) + "]"));
    }
    // pages <= INT32_MAX, so only page_size can make the context overflow.
    const auto full = CheckedMul(pages == 0 ? 0 : pages - 1, page_size);
    if (!full || *full > UINT64_MAX / 2) {
      return Status::InvalidArgument(seq(s) + std::to_string(pages) + " pages of " +
                                     std::to_string(page_size) + " slots overflow a context");
    }
    contexts[s] = b.context_len(s, page_size);
  }
  return contexts;
}

}  // namespace folio::kv
