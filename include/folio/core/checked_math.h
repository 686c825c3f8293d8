// Overflow-checked unsigned arithmetic for sizes, counts and offsets that
// come from configuration or untrusted files.
#ifndef FOLIO_CORE_CHECKED_MATH_H_
#define FOLIO_CORE_CHECKED_MATH_H_

#include <cstdint>
#include <initializer_list>
#include <optional>

namespace folio {

inline std::optional<uint64_t> CheckedMul(uint64_t a, uint64_t b) {
  uint64_t out;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

inline std::optional<uint64_t> CheckedAdd(uint64_t a, uint64_t b) {
  uint64_t out;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The product of all factors, or nullopt if any partial product overflows.
inline std::optional<uint64_t> CheckedProduct(std::initializer_list<uint64_t> factors) {
  uint64_t out = 1;
  for (uint64_t f : factors) {
    if (__builtin_mul_overflow(out, f, &out)) return std::nullopt;
  }
  return out;
}

// ceil(a / b) for b > 0, without the overflow of (a + b - 1) / b.
constexpr uint64_t CeilDiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace folio

#endif  // FOLIO_CORE_CHECKED_MATH_H_
