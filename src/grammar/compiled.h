// The compiled form of a grammar: rules as alternatives of elements, each
// element one byte set, one token or a rule reference, laid out flat so a
// parse position is one index.
#ifndef FOLIO_GRAMMAR_COMPILED_H_
#define FOLIO_GRAMMAR_COMPILED_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace folio::grammar {

// 256 bits, bit b set when byte b is in the set.
struct ByteSet {
  std::array<uint64_t, 4> words{};
  bool Has(uint8_t b) const { return ((words[b >> 6] >> (b & 63)) & 1) != 0; }
  void Add(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  bool operator==(const ByteSet&) const = default;
};

struct Element {
  enum class Kind : uint8_t {
    kBytes,  // one byte from byte_sets[arg]
    kToken,  // the token whose id is arg, whole (a token reference)
    kRule,   // rule arg
    kEnd,    // the end of an alternative
  };
  Kind kind = Kind::kEnd;
  uint32_t arg = 0;
};

struct CompiledGrammar {
  // Every rule's alternatives, one after another; each ends in kEnd.
  std::vector<Element> elements;
  std::vector<ByteSet> byte_sets;
  // rule -> the positions (indices into elements) where its alternatives
  // start.
  std::vector<std::vector<uint32_t>> rule_alternatives;
  std::vector<std::string> rule_names;  // helper rules get derived names
  uint32_t root = 0;
};

}  // namespace folio::grammar

#endif  // FOLIO_GRAMMAR_COMPILED_H_
