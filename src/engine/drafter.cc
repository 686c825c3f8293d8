#include "folio/engine/drafter.h"

#include <algorithm>

#include "folio/core/check.h"

namespace folio::engine {

uint64_t NextDraftLength(uint64_t length, uint64_t drafted, uint64_t accepted,
                         uint64_t max_length) {
  FOLIO_CHECK(accepted <= drafted && max_length >= 1, "accepted ", accepted, " of ", drafted,
              " drafted, at most ", max_length);
  uint64_t next = length;
  if (drafted != 0) {
    next = accepted == drafted ? 2 * length : accepted > 0 ? accepted + 1 : kFirstDraftLength;
  }
  return std::clamp<uint64_t>(next, 1, max_length);
}

NgramDrafter::NgramDrafter(uint64_t min_n, uint64_t max_n) : min_n_(min_n), max_n_(max_n) {
  FOLIO_CHECK(min_n >= 1 && min_n <= max_n, "n-gram sizes ", min_n, "..", max_n);
}

std::vector<int32_t> NgramDrafter::Propose(std::span<const int32_t> tokens,
                                           uint64_t max_tokens) const {
  const uint64_t size = tokens.size();
  if (max_tokens == 0) return {};
  for (uint64_t n = std::min(max_n_, size == 0 ? 0 : size - 1); n >= min_n_; --n) {
    const std::span<const int32_t> pattern = tokens.last(n);
    // Most recent start p < size - n whose n tokens equal the pattern: the
    // match must leave at least one token after it.
    for (uint64_t p = size - n; p-- > 0;) {
      if (!std::equal(pattern.begin(), pattern.end(), tokens.begin() + static_cast<ptrdiff_t>(p))) {
        continue;
      }
      const uint64_t from = p + n;
      const uint64_t count = std::min(max_tokens, size - from);
      return {tokens.begin() + static_cast<ptrdiff_t>(from),
              tokens.begin() + static_cast<ptrdiff_t>(from + count)};
    }
  }
  return {};
}

}  // namespace folio::engine
