// Block-layout facts that the scalar decoder (weight_type.cc) and the SIMD
// kernel (matmul_kernel.cc) both read, so that neither keeps its own copy.
#ifndef FOLIO_OPS_BLOCK_LAYOUT_H_
#define FOLIO_OPS_BLOCK_LAYOUT_H_

#include <bit>
#include <cstddef>
#include <cstdint>

#include "folio/ops/weight_type.h"

namespace folio::ops::internal {

// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j (of 8)
// from a Q4_K/Q5_K super-block's 12 scale bytes `s`. Sub-blocks 0-3 keep
// theirs in the low 6 bits of bytes j and j + 4; sub-blocks 4-7 take their
// low 4 bits from the nibbles of byte j + 4 and their top 2 bits from the
// spare top bits of bytes j - 4 (scale) and j (min).
inline void ScaleMinK4(size_t j, const std::byte* s, uint32_t& sc, uint32_t& m) {
  const auto at = [s](size_t i) { return std::to_integer<uint32_t>(s[i]); };
  if (j < 4) {
    sc = at(j) & 63;
    m = at(j + 4) & 63;
  } else {
    sc = (at(j + 4) & 0x0f) | (at(j - 4) >> 6) << 4;
    m = (at(j + 4) >> 4) | (at(j) >> 6) << 4;
  }
}

// Where a K-quant super-block's fields start, in bytes, as ggml's
// block_q{2,3,4,5,6}_K lays them out (256 elements each); 0 where a type
// has no such field (its `has_*` says which):
//   Q2_K (84):  scales[16] (scale | min << 4), qs[64], f16 d, f16 dmin
//   Q3_K (110): hmask[32], qs[64], scales[12] (6-bit), f16 d
//   Q4_K (144): f16 d, f16 dmin, scales[12] (6-bit scale and min), qs[128]
//   Q5_K (176): f16 d, f16 dmin, scales[12], qh[32], qs[128]
//   Q6_K (210): ql[128], qh[64], scales[16] (int8), f16 d
// The decoder, the encoders, the float kernel's codecs and the packer all
// read these, so each layout is written down once.
struct KQuantFields {
  size_t d, dmin, scales, high, low;  // high: Q3_K's hmask, Q5_K's and Q6_K's qh
  bool has_dmin, has_high;
};
constexpr KQuantFields KQuantFieldsOf(WeightType type) {
  switch (type) {
    case WeightType::kQ2_K:
      return {80, 82, 0, 0, 16, true, false};
    case WeightType::kQ3_K:
      return {108, 0, 96, 0, 32, false, true};
    case WeightType::kQ4_K:
      return {0, 2, 4, 0, 16, true, false};
    case WeightType::kQ5_K:
      return {0, 2, 4, 16, 48, true, true};
    case WeightType::kQ6_K:
      return {208, 0, 192, 128, 0, false, true};
    default:
      return {};
  }
}
// Each layout ends where TraitsOf says the block does.
static_assert(KQuantFieldsOf(WeightType::kQ2_K).dmin + 2 ==
              TraitsOf(WeightType::kQ2_K).block_bytes);
static_assert(KQuantFieldsOf(WeightType::kQ3_K).d + 2 == TraitsOf(WeightType::kQ3_K).block_bytes);
static_assert(KQuantFieldsOf(WeightType::kQ4_K).low + 128 ==
              TraitsOf(WeightType::kQ4_K).block_bytes);
static_assert(KQuantFieldsOf(WeightType::kQ5_K).low + 128 ==
              TraitsOf(WeightType::kQ5_K).block_bytes);
static_assert(KQuantFieldsOf(WeightType::kQ6_K).d + 2 == TraitsOf(WeightType::kQ6_K).block_bytes);

// Q3_K's 6-bit scale j (of 16) from its 12 scale bytes: low bits from the
// low (j < 8) or high nibble of byte j % 8, bits 4-5 from bits 2 (j / 4)
// and 2 (j / 4) + 1 of byte 8 + j % 4 (ggml's kmask shuffle). Unbiased:
// the scale is this minus 32.
inline uint32_t ScaleQ3K(size_t j, const std::byte* s) {
  const auto at = [s](size_t i) { return std::to_integer<uint32_t>(s[i]); };
  const uint32_t low = (at(j % 8) >> (j < 8 ? 0 : 4)) & 0x0f;
  const uint32_t high = (at(8 + j % 4) >> (2 * (j / 4))) & 3;
  return low | high << 4;
}

// IQ4_XS's 6-bit scale of sub-block j (of 8): low bits from nibble j % 2 of
// scales_l[j / 2] (the 4 bytes at `scales_l`), bits 4-5 from bits 2j, 2j +
// 1 of the u16 scales_h. Unbiased: the scale is this minus 32.
inline uint32_t ScaleIq4Xs(size_t j, uint32_t scales_h, const std::byte* scales_l) {
  return ((std::to_integer<uint32_t>(scales_l[j / 2]) >> (4 * (j % 2))) & 0x0f) |
         ((scales_h >> (2 * j)) & 3) << 4;
}

// ggml's kvalues_iq4nl: the 16 levels of the IQ4 types.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// ggml's kvalues_mxfp4: the 16 E2M1 codes' values times 2 (sign bit 3,
// then exponent and mantissa), integers, so that an MXFP4 element is
// kMxfp4Values[q] * E8M0Half(e).
inline constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// Half the E8M0 scale e, 2^(e - 128), exactly as an f32 (ggml's
// GGML_E8M0_TO_FP32_HALF): biased exponent e - 1 for e >= 2; for e = 0 and
// 1 the subnormals 2^-128 and 2^-127 (significand bit 21 or 22). Every e
// is an exponent, 0xff (OCP MX's NaN) included, as in ggml.
inline float E8M0Half(uint32_t e) {
  return std::bit_cast<float>(e < 2 ? uint32_t{1} << (21 + e) : (e - 1) << 23);
}

}  // namespace folio::ops::internal

#endif  // FOLIO_OPS_BLOCK_LAYOUT_H_
