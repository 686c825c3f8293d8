// SplitMix64: the one random stream folio uses for initialisation and
// sampling. Small, fast, and fully specified by its 64-bit state, so a
// stream can be saved, compared and resumed exactly
// (docs/design.md, "The worked example", describes the stream).
#ifndef FOLIO_CORE_SPLITMIX64_H_
#define FOLIO_CORE_SPLITMIX64_H_

#include <cstdint>

namespace folio {

class SplitMix64 {
 public:
  explicit constexpr SplitMix64(uint64_t seed) : state_(seed) {}

  constexpr uint64_t NextU64() {
    state_ += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1) with 53 random bits: (next >> 11) * 2^-53.
  constexpr double NextUnit() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

  constexpr uint64_t state() const { return state_; }

  // The value NextU64() would return, without advancing the stream.
  constexpr uint64_t PeekU64() const {
    SplitMix64 copy = *this;
    return copy.NextU64();
  }

  friend constexpr bool operator==(const SplitMix64&, const SplitMix64&) = default;

 private:
  uint64_t state_;
};

}  // namespace folio

#endif  // FOLIO_CORE_SPLITMIX64_H_
