#include "folio/core/dtype.h"

#include <limits>
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
    case DType::kF8E4M3:
      return "f8e4m3";
  }
  return "unknown";
}

Result<DType> ParseDType(std::string_view name) {
  if (name == "f64" || name == "float64") return DType::kF64;
  if (name == "f32" || name == "float32") return DType::kF32;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "f16" || name == "float16") return DType::kF16;
  if (name == "i8" || name == "int8") return DType::kI8;
  if (name == "f8e4m3" || name == "fp8" || name == "float8_e4m3fn") return DType::kF8E4M3;
  return Status::InvalidArgument("unknown dtype '" + std::string(name) +
                                 "' (expected f64, f32, bf16, f16, i8 or f8e4m3)");
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

// E4M3: bias 7; exponent field 0 is subnormal (m * 2^-9); 0x7f is NaN.
uint8_t F32ToE4M3Bits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
  // 448 = 0x43e00000; everything from there on (464 and up would round to
  // 512, which E4M3 lacks) saturates.
  if (abs >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7eu);
  if (abs < 0x3c800000u) {  // below 2^-6: subnormal, m = round(|f| * 2^9)
    const float scaled = std::bit_cast<float>(abs) * 512.0f;  // exact, < 8
    auto m = static_cast<uint32_t>(scaled);
    const float rest = scaled - static_cast<float>(m);
    if (rest > 0.5f || (rest == 0.5f && (m & 1u) != 0)) ++m;  // 8 is 2^-6, the least normal
    return static_cast<uint8_t>(sign | m);
  }
  // Normal: rebias (127 -> 7) and round the mantissa 23 -> 3 bits; a carry
  // into the exponent is the right answer.
  uint32_t r = abs - (120u << 23);
  r += 0x7ffffu + ((r >> 20) & 1u);
  return static_cast<uint8_t>(sign | (r >> 20));
}

float E4M3BitsToF32(uint8_t bits) {
  const uint32_t exp = (bits >> 3) & 0xfu;
  const uint32_t mant = bits & 0x7u;
  float v;
  if (exp == 0xf && mant == 0x7) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    v = static_cast<float>(mant) * 0x1.0p-9f;
  } else {
    v = std::bit_cast<float>(((exp + 120u) << 23) | (mant << 20));
  }
  return (bits & 0x80u) != 0 ? -v : v;
}

}  // namespace folio
