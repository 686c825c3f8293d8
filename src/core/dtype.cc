#include "folio/core/dtype.h"

#include <string>

namespace folio {

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF64:
      return "f64";
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kI8:
      return "i8";
  }
  return "unknown";
}

Result<DType> ParseDType(std::string_view name) {
  if (name == "f64" || name == "float64") return DType::kF64;
  if (name == "f32" || name == "float32") return DType::kF32;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "f16" || name == "float16") return DType::kF16;
  if (name == "i8" || name == "int8") return DType::kI8;
  return Status::InvalidArgument("unknown dtype '" + std::string(name) +
                                 "' (expected f64, f32, bf16, f16 or i8)");
}

// binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
uint16_t F32ToF16Bits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // inf/overflow
  if (abs < 0x38800000u) {
    // Subnormal or zero in f16: scale into the 10-bit mantissa with
    // round-to-nearest-even via float addition of a magic constant.
    const float magic = std::bit_cast<float>(0x3f000000u);  // 0.5
    const float v = std::bit_cast<float>(abs) + magic;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(v) - 0x3f000000u));
  }
  // Normal: rebias exponent (127 -> 15) and round mantissa 23 -> 10 bits.
  uint32_t r = abs - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}

float F16BitsToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    // Subnormal: mant * 2^-24, exact in float32.
    const float v = static_cast<float>(mant) * 0x1.0p-24f;
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

}  // namespace folio
