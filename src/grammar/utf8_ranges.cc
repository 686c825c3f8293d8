#include "grammar/utf8_ranges.h"

#include <algorithm>

#include "folio/core/check.h"

namespace folio::grammar {

namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

size_t EncodedLength(uint32_t cp) {
  if (cp < 0x80) return 1;
  if (cp < 0x800) return 2;
  if (cp < 0x10000) return 3;
  return 4;
}

// [lo, hi] with one encoded length and no surrogate: split until every
// continuation byte position spans a whole aligned block, then each
// position's bytes form one range.
void Split(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out) {
  const size_t n = EncodedLength(lo);
  for (size_t i = 1; i < n; ++i) {
    const uint32_t mask = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~mask) != (hi & ~mask)) {
      if ((lo & mask) != 0) {
        Split(lo, lo | mask, out);
        Split((lo | mask) + 1, hi, out);
        return;
      }
      if ((hi & mask) != mask) {
        Split(lo, (hi & ~mask) - 1, out);
        Split(hi & ~mask, hi, out);
        return;
      }
    }
  }
  const std::string a = EncodeUtf8(lo), b = EncodeUtf8(hi);
  Utf8Sequence seq(n);
  for (size_t i = 0; i < n; ++i) {
    seq[i] = {static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i])};
  }
  out.push_back(std::move(seq));
}

}  // namespace

std::string EncodeUtf8(uint32_t cp) {
  FOLIO_CHECK(cp <= kMaxCodePoint && (cp < kSurrogateLo || cp > kSurrogateHi), "code point ", cp);
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

std::vector<CodePointRange> NormalizeRanges(std::vector<CodePointRange> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<CodePointRange> out;
  for (const auto& [lo, hi] : ranges) {
    if (lo > hi) continue;
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

std::vector<CodePointRange> ComplementRanges(const std::vector<CodePointRange>& ranges) {
  std::vector<CodePointRange> out;
  uint32_t next = 0;  // the first code point not yet covered
  bool done = false;
  for (const auto& [lo, hi] : ranges) {
    if (lo > next) out.emplace_back(next, lo - 1);
    if (hi >= kMaxCodePoint) {
      done = true;
      break;
    }
    next = std::max(next, hi + 1);
  }
  if (!done && next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  // Drop the surrogates, which are not scalar values.
  std::vector<CodePointRange> scalar;
  for (const auto& [lo, hi] : out) {
    if (hi < kSurrogateLo || lo > kSurrogateHi) {
      scalar.emplace_back(lo, hi);
      continue;
    }
    if (lo < kSurrogateLo) scalar.emplace_back(lo, kSurrogateLo - 1);
    if (hi > kSurrogateHi) scalar.emplace_back(kSurrogateHi + 1, hi);
  }
  return scalar;
}

std::vector<Utf8Sequence> Utf8Sequences(uint32_t lo, uint32_t hi) {
  std::vector<Utf8Sequence> out;
  hi = std::min(hi, kMaxCodePoint);
  // Pieces with one encoded length and no surrogate.
  const uint32_t bounds[] = {0x7F, 0x7FF, kSurrogateLo - 1, kSurrogateHi, 0xFFFF, kMaxCodePoint};
  uint32_t start = lo;
  for (const uint32_t bound : bounds) {
    if (start > hi) break;
    if (start > bound) continue;
    const uint32_t end = std::min(hi, bound);
    if (!(start >= kSurrogateLo && end <= kSurrogateHi)) Split(start, end, out);
    start = end + 1;
  }
  return out;
}

}  // namespace folio::grammar
