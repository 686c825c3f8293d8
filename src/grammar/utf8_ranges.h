// Code-point ranges as UTF-8 byte-range sequences: the alternatives a
// byte-level grammar needs to match one character from a class.
#ifndef FOLIO_GRAMMAR_UTF8_RANGES_H_
#define FOLIO_GRAMMAR_UTF8_RANGES_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace folio::grammar {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// A closed range of code points.
using CodePointRange = std::pair<uint32_t, uint32_t>;

// Sorted, merged, non-overlapping ranges.
std::vector<CodePointRange> NormalizeRanges(std::vector<CodePointRange> ranges);
// The Unicode scalar values (U+0000..U+10FFFF without surrogates) not in
// `ranges` (normalized).
std::vector<CodePointRange> ComplementRanges(const std::vector<CodePointRange>& ranges);

// One byte range per encoded byte: a code point matches the sequence when
// each of its UTF-8 bytes lies in the range at its position.
struct ByteRange {
  uint8_t lo = 0, hi = 0;
};
using Utf8Sequence = std::vector<ByteRange>;

// Sequences matching exactly the UTF-8 encodings of the scalar values in
// [lo, hi] (surrogates skipped), in code point order. Each sequence covers
// a block of code points whose encodings have one length.
std::vector<Utf8Sequence> Utf8Sequences(uint32_t lo, uint32_t hi);

// The UTF-8 encoding of a scalar value (cp <= kMaxCodePoint, not a
// surrogate).
std::string EncodeUtf8(uint32_t cp);

}  // namespace folio::grammar

#endif  // FOLIO_GRAMMAR_UTF8_RANGES_H_
