// Element types and the conversions between them.
//
// folio computes in float64 (the worked example) or float32 (production)
// and may store K/V and weights narrower. Widening is exact; narrowing to
// bf16/f16/f8e4m3 rounds to nearest, ties to even, as hardware converters
// do. i8 and f8e4m3 hold quantized K/V: their real value is the stored one
// times a scale kept beside them (kv/paged_kv_cache.h).
#ifndef FOLIO_CORE_DTYPE_H_
#define FOLIO_CORE_DTYPE_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "folio/core/status.h"

namespace folio {

// kF8E4M3 is OCP FP8 E4M3 ("e4m3fn"): 1 sign, 4 exponent (bias 7) and 3
// mantissa bits, no infinities, 0x7f / 0xff NaN, largest finite 448.
enum class DType : uint8_t { kF64, kF32, kBF16, kF16, kI8, kF8E4M3 };

constexpr size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF64:
      return 8;
    case DType::kF32:
      return 4;
    case DType::kBF16:
      return 2;
    case DType::kF16:
      return 2;
    case DType::kI8:
    case DType::kF8E4M3:
      return 1;
  }
  return 0;
}

// "f64", "f32", "bf16", "f16", "i8", "f8e4m3".
std::string_view DTypeName(DType t);
// Accepts the names above and "float64", "float32", "bfloat16", "float16",
// "int8", "fp8", "float8_e4m3fn".
Result<DType> ParseDType(std::string_view name);

// True for the dtypes whose elements need a scale to mean anything.
constexpr bool IsQuantized(DType t) { return t == DType::kI8 || t == DType::kF8E4M3; }

// float32 <-> bfloat16 bits. NaN stays NaN (quiet).
constexpr uint16_t F32ToBF16Bits(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}
constexpr float BF16BitsToF32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// float32 <-> IEEE binary16 bits.
uint16_t F32ToF16Bits(float f);
float F16BitsToF32(uint16_t h);

// float32 -> FP8 E4M3 bits, rounding to nearest even and saturating: a
// finite value beyond +-448 becomes +-448 (the format has no infinity).
// NaN becomes 0x7f (with the sign).
uint8_t F32ToE4M3Bits(float f);
// Exact: every E4M3 value is a float32.
float E4M3BitsToF32(uint8_t bits);

// Reads element i of a buffer of type `t` as T (T = float or double).
// float64 storage read as float rounds once; narrower types widen exactly.
template <typename T>
inline T LoadElement(DType t, const std::byte* base, size_t i) {
  switch (t) {
    case DType::kF64: {
      double v;
      std::memcpy(&v, base + i * 8, 8);
      return static_cast<T>(v);
    }
    case DType::kF32: {
      float v;
      std::memcpy(&v, base + i * 4, 4);
      return static_cast<T>(v);
    }
    case DType::kBF16: {
      uint16_t v;
      std::memcpy(&v, base + i * 2, 2);
      return static_cast<T>(BF16BitsToF32(v));
    }
    case DType::kF16: {
      uint16_t v;
      std::memcpy(&v, base + i * 2, 2);
      return static_cast<T>(F16BitsToF32(v));
    }
    case DType::kI8:
      return static_cast<T>(static_cast<int8_t>(base[i]));
    case DType::kF8E4M3:
      return static_cast<T>(E4M3BitsToF32(static_cast<uint8_t>(base[i])));
  }
  FOLIO_CHECK(false, "unknown dtype");
  return T{};
}

// Writes `value` as element i of a buffer of type `t` (t must be a float
// type). double -> bf16/f16/f8e4m3 rounds through float32.
template <typename T>
inline void StoreElement(DType t, std::byte* base, size_t i, T value) {
  switch (t) {
    case DType::kF64: {
      const double v = static_cast<double>(value);
      std::memcpy(base + i * 8, &v, 8);
      return;
    }
    case DType::kF32: {
      const float v = static_cast<float>(value);
      std::memcpy(base + i * 4, &v, 4);
      return;
    }
    case DType::kBF16: {
      const uint16_t v = F32ToBF16Bits(static_cast<float>(value));
      std::memcpy(base + i * 2, &v, 2);
      return;
    }
    case DType::kF16: {
      const uint16_t v = F32ToF16Bits(static_cast<float>(value));
      std::memcpy(base + i * 2, &v, 2);
      return;
    }
    case DType::kF8E4M3:
      base[i] = static_cast<std::byte>(F32ToE4M3Bits(static_cast<float>(value)));
      return;
    case DType::kI8:
      break;
  }
  FOLIO_CHECK(false, "StoreElement needs a floating dtype, got ", DTypeName(t));
}

}  // namespace folio

#endif  // FOLIO_CORE_DTYPE_H_
