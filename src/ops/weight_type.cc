// The weight-type table's functions: names, row sizes and the one scalar
// decoder of each type.
#include "folio/ops/weight_type.h"

#include <cstring>

#include "folio/core/checked_math.h"
#include "folio/core/dtype.h"
#include "folio/core/status.h"

namespace folio::ops {
namespace internal {
void BadWeightType(WeightType t) {
  FOLIO_CHECK(false, "unknown weight type ", static_cast<int>(t));
  __builtin_unreachable();
}
}  // namespace internal

namespace {

// Element types: element i of `src` read as Out (f64 into float rounds).
template <DType kD, typename Out>
void DecodeElements(const std::byte* src, std::span<Out> out) {
  for (size_t i = 0; i < out.size(); ++i) out[i] = LoadElement<Out>(kD, src, i);
}

// ggml's dequantize_row_q8_0: each element is f32(d) * f32(q), one exact
// product (an 11-bit times an 8-bit significand), so Out = double gets the
// same value.
template <typename Out>
void DecodeQ8_0(const std::byte* src, std::span<Out> out) {
  for (size_t b = 0; b < out.size() / kQ8_0BlockElems; ++b) {
    const std::byte* block = src + b * kQ8_0BlockBytes;
    uint16_t d_bits;
    std::memcpy(&d_bits, block, kQ8_0ScaleBytes);
    const float d = F16BitsToF32(d_bits);
    for (size_t j = 0; j < kQ8_0BlockElems; ++j) {
      const auto q = static_cast<int8_t>(block[kQ8_0ScaleBytes + j]);
      out[b * kQ8_0BlockElems + j] = static_cast<Out>(d * static_cast<float>(q));
    }
  }
}

// ggml's dequantize_row_q4_0, _q4_1, _q5_0 and _q5_1 (ggml-quants.c), one
// template: a block is f16 d, then f16 m for the _1 types, then the u32 qh
// for the 5-bit types, then 16 bytes qs. Element j (of 32) has 4 low bits
// from qs[j % 16] (low nibble for j < 16, high for j >= 16) and, in the
// 5-bit types, bit 4 from bit j of qh. As in ggml, the integer (q - 8 for
// Q4_0, q - 16 for Q5_0, q otherwise) is multiplied by f32(d), and the _1
// types then add f32(m) in f32. The product is exact (d has an 11-bit
// significand, |q| < 32, and no f16 times 31 leaves f32's normal range),
// so the addition is the one rounding whether or not a compiler fuses the
// two, as ggml's build may: the result is ggml's bit for bit on any
// platform. Double output widens that f32 value (adding in double would
// round differently).
template <WeightType kType, typename Out>
void DecodeLegacy(const std::byte* src, std::span<Out> out) {
  constexpr bool kHasMin = kType == WeightType::kQ4_1 || kType == WeightType::kQ5_1;
  constexpr bool kFiveBit = kType == WeightType::kQ5_0 || kType == WeightType::kQ5_1;
  constexpr int kOffset = kType == WeightType::kQ4_0 ? 8 : kType == WeightType::kQ5_0 ? 16 : 0;
  constexpr size_t kElems = TraitsOf(kType).block_size;
  constexpr size_t kBytes = TraitsOf(kType).block_bytes;
  constexpr size_t kQhAt = kHasMin ? 4 : 2;
  constexpr size_t kQsAt = kQhAt + (kFiveBit ? 4 : 0);
  static_assert(kElems == 32 && kQsAt + kElems / 2 == kBytes, "a legacy block's layout");
  for (size_t b = 0; b < out.size() / kElems; ++b) {
    const std::byte* block = src + b * kBytes;
    uint16_t bits;
    std::memcpy(&bits, block, 2);
    const float d = F16BitsToF32(bits);
    float m = 0.0f;
    if constexpr (kHasMin) {
      std::memcpy(&bits, block + 2, 2);
      m = F16BitsToF32(bits);
    }
    uint32_t qh = 0;
    if constexpr (kFiveBit) {
      for (size_t i = 0; i < 4; ++i) qh |= std::to_integer<uint32_t>(block[kQhAt + i]) << (8 * i);
    }
    for (size_t j = 0; j < kElems; ++j) {
      const auto qs = std::to_integer<uint32_t>(block[kQsAt + j % (kElems / 2)]);
      const uint32_t low = j < kElems / 2 ? qs & 0x0f : qs >> 4;
      const uint32_t q = low | (((qh >> j) & 1) << 4);
      float x = static_cast<float>(static_cast<int>(q) - kOffset) * d;
      if constexpr (kHasMin) x = x + m;
      out[b * kElems + j] = static_cast<Out>(x);
    }
  }
}

uint32_t ByteAt(const std::byte* p, size_t i) { return std::to_integer<uint32_t>(p[i]); }

float F16At(const std::byte* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return F16BitsToF32(bits);
}

// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j (of 8)
// from a K-quant's 12 scale bytes. Sub-blocks 0-3 keep theirs in the low 6
// bits of bytes j and j + 4; sub-blocks 4-7 take their low 4 bits from the
// nibbles of byte j + 4 and their top 2 bits from the spare top bits of
// bytes j - 4 (scale) and j (min).
void ScaleMinK4(size_t j, const std::byte* s, uint32_t& sc, uint32_t& m) {
  if (j < 4) {
    sc = ByteAt(s, j) & 63;
    m = ByteAt(s, j + 4) & 63;
  } else {
    sc = (ByteAt(s, j + 4) & 0x0f) | (ByteAt(s, j - 4) >> 6) << 4;
    m = (ByteAt(s, j + 4) >> 4) | (ByteAt(s, j) >> 6) << 4;
  }
}

// ggml's dequantize_row_q4_K and _q5_K: a super-block is f16 d and dmin,
// 12 scale bytes, (Q5_K) 32 bytes qh, 128 bytes qs. Sub-block g (32
// elements) has scale d * sc and min dmin * m (ScaleMinK4); its element l
// takes the low (g even) or high (g odd) nibble of qs[32 * (g / 2) + l]
// and, in Q5_K, bit 4 from bit g of qh[l]. As in ggml, the element is
// (d * sc) * q - dmin * m in f32: d * sc (11 by 6 bits), dmin * m and
// (d * sc) * q (17 by 5 bits) are exact, so the subtraction is the one
// rounding, fused or not.
template <WeightType kType, typename Out>
void DecodeQ4Q5K(const std::byte* src, std::span<Out> out) {
  constexpr bool kFiveBit = kType == WeightType::kQ5_K;
  constexpr size_t kElems = TraitsOf(kType).block_size;
  constexpr size_t kBytes = TraitsOf(kType).block_bytes;
  constexpr size_t kScalesAt = 4;
  constexpr size_t kQhAt = kScalesAt + 12;
  constexpr size_t kQsAt = kQhAt + (kFiveBit ? kElems / 8 : 0);
  static_assert(kElems == 256 && kQsAt + kElems / 2 == kBytes, "a Q4_K/Q5_K block's layout");
  for (size_t b = 0; b < out.size() / kElems; ++b) {
    const std::byte* block = src + b * kBytes;
    const float d = F16At(block);
    const float dmin = F16At(block + 2);
    for (size_t g = 0; g < 8; ++g) {
      uint32_t sc, m;
      ScaleMinK4(g, block + kScalesAt, sc, m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      for (size_t l = 0; l < 32; ++l) {
        const uint32_t qs = ByteAt(block, kQsAt + 32 * (g / 2) + l);
        uint32_t q = g % 2 == 0 ? qs & 0x0f : qs >> 4;
        if constexpr (kFiveBit) q |= ((ByteAt(block, kQhAt + l) >> g) & 1) << 4;
        out[b * kElems + 32 * g + l] = static_cast<Out>(dl * static_cast<float>(q) - ml);
      }
    }
  }
}

// ggml's dequantize_row_q6_K: a super-block is ql[128], qh[64], int8
// scales[16], f16 d. Half h (128 elements) uses ql[64h..], qh[32h..] and
// scales[8h..]; its element 32k + l (k < 4, l < 32) has the low (k < 2)
// or high nibble of ql[l + 32 (k % 2)], bits 2k and 2k + 1 of qh[l] as
// bits 4-5, and scale scales[l / 16 + 2k]. The element is (d * sc) * (q -
// 32) in f32, in that order as in ggml: d * sc (11 by 8 bits) is exact,
// the second product (19 by 6 bits) may round.
template <typename Out>
void DecodeQ6K(const std::byte* src, std::span<Out> out) {
  constexpr size_t kElems = TraitsOf(WeightType::kQ6_K).block_size;
  constexpr size_t kBytes = TraitsOf(WeightType::kQ6_K).block_bytes;
  constexpr size_t kQhAt = kElems / 2, kScalesAt = kQhAt + kElems / 4, kDAt = kScalesAt + 16;
  static_assert(kElems == 256 && kDAt + 2 == kBytes, "a Q6_K block's layout");
  for (size_t b = 0; b < out.size() / kElems; ++b) {
    const std::byte* block = src + b * kBytes;
    const float d = F16At(block + kDAt);
    for (size_t h = 0; h < 2; ++h) {
      for (size_t k = 0; k < 4; ++k) {
        for (size_t l = 0; l < 32; ++l) {
          const uint32_t ql = ByteAt(block, 64 * h + 32 * (k % 2) + l);
          const uint32_t qh = ByteAt(block, kQhAt + 32 * h + l);
          const uint32_t q = (k < 2 ? ql & 0x0f : ql >> 4) | ((qh >> (2 * k)) & 3) << 4;
          const auto sc = static_cast<int8_t>(block[kScalesAt + 8 * h + l / 16 + 2 * k]);
          const float dl = d * static_cast<float>(sc);
          out[b * kElems + 128 * h + 32 * k + l] =
              static_cast<Out>(dl * static_cast<float>(static_cast<int>(q) - 32));
        }
      }
    }
  }
}

template <typename Out>
void Dequantize(WeightType type, const std::byte* src, std::span<Out> out) {
  const WeightTypeTraits& traits = TraitsOf(type);
  FOLIO_CHECK(out.size() % traits.block_size == 0, "DequantizeRow: ", out.size(), " ", traits.name,
              " elements are not whole blocks: not a multiple of ", traits.block_size);
  switch (type) {
    case WeightType::kF64:
      return DecodeElements<DType::kF64>(src, out);
    case WeightType::kF32:
      return DecodeElements<DType::kF32>(src, out);
    case WeightType::kF16:
      return DecodeElements<DType::kF16>(src, out);
    case WeightType::kBF16:
      return DecodeElements<DType::kBF16>(src, out);
    case WeightType::kQ8_0:
      return DecodeQ8_0(src, out);
    case WeightType::kQ4_0:
      return DecodeLegacy<WeightType::kQ4_0>(src, out);
    case WeightType::kQ4_1:
      return DecodeLegacy<WeightType::kQ4_1>(src, out);
    case WeightType::kQ5_0:
      return DecodeLegacy<WeightType::kQ5_0>(src, out);
    case WeightType::kQ5_1:
      return DecodeLegacy<WeightType::kQ5_1>(src, out);
    case WeightType::kQ4_K:
      return DecodeQ4Q5K<WeightType::kQ4_K>(src, out);
    case WeightType::kQ5_K:
      return DecodeQ4Q5K<WeightType::kQ5_K>(src, out);
    case WeightType::kQ6_K:
      return DecodeQ6K(src, out);
  }
}

}  // namespace

std::string_view WeightTypeName(WeightType type) {
  return IsWeightType(type) ? TraitsOf(type).name : "unknown";
}

uint64_t WeightRowBytes(WeightType type, uint64_t cols) {
  if (!IsWeightType(type)) return 0;
  const WeightTypeTraits& traits = TraitsOf(type);
  if (cols % traits.block_size != 0) return 0;
  return CheckedMul(cols / traits.block_size, uint64_t{traits.block_bytes}).value_or(0);
}

void DequantizeRow(WeightType type, const std::byte* src, std::span<float> out) {
  Dequantize(type, src, out);
}
void DequantizeRow(WeightType type, const std::byte* src, std::span<double> out) {
  Dequantize(type, src, out);
}

}  // namespace folio::ops
