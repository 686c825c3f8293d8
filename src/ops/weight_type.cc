// The weight-type table's functions: names, row sizes and the one scalar
// decoder of each type.
#include "folio/ops/weight_type.h"

#include <cstring>

#include "folio/core/checked_math.h"
#include "folio/core/dtype.h"
#include "folio/core/status.h"
#include "ops/block_layout.h"

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
  constexpr internal::KQuantFields kAt = internal::KQuantFieldsOf(kType);
  for (size_t b = 0; b < out.size() / kElems; ++b) {
    const std::byte* block = src + b * kBytes;
    const float d = F16At(block + kAt.d);
    const float dmin = F16At(block + kAt.dmin);
    for (size_t g = 0; g < 8; ++g) {
      uint32_t sc, m;
      internal::ScaleMinK4(g, block + kAt.scales, sc, m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      for (size_t l = 0; l < 32; ++l) {
        const uint32_t qs = ByteAt(block, kAt.low + 32 * (g / 2) + l);
        uint32_t q = g % 2 == 0 ? qs & 0x0f : qs >> 4;
        if constexpr (kFiveBit) q |= ((ByteAt(block, kAt.high + l) >> g) & 1) << 4;
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
  constexpr internal::KQuantFields kAt = internal::KQuantFieldsOf(WeightType::kQ6_K);
  for (size_t b = 0; b < out.size() / kElems; ++b) {
    const std::byte* block = src + b * kBytes;
    const float d = F16At(block + kAt.d);
    for (size_t h = 0; h < 2; ++h) {
      for (size_t k = 0; k < 4; ++k) {
        for (size_t l = 0; l < 32; ++l) {
          const uint32_t ql = ByteAt(block, kAt.low + 64 * h + 32 * (k % 2) + l);
          const uint32_t qh = ByteAt(block, kAt.high + 32 * h + l);
          const uint32_t q = (k < 2 ? ql & 0x0f : ql >> 4) | ((qh >> (2 * k)) & 3) << 4;
          const auto sc = static_cast<int8_t>(block[kAt.scales + 8 * h + l / 16 + 2 * k]);
          const float dl = d * static_cast<float>(sc);
          out[b * kElems + 128 * h + 32 * k + l] =
              static_cast<Out>(dl * static_cast<float>(static_cast<int>(q) - 32));
        }
      }
    }
  }
}

// ggml's dequantize_row_q2_K and _q3_K. Both lay 256 elements out in two
// halves n of 128, each in 4 groups k of 32, each in two sub-blocks h of
// 16: element 128n + 32k + 16h + l takes bits 2k, 2k + 1 of qs[32n + 16h
// + l] as q and sub-block scale 8n + 2k + h.
//   Q2_K (scales[16], qs[64], f16 d, dmin): scale byte s gives d * (s &
//   15) and dmin * (s >> 4); the element is (d * (s & 15)) * q - dmin *
//   (s >> 4), products exact (11 by 4 by 2 bits), one rounding.
//   Q3_K (hmask[32], qs[64], scales[12], f16 d): q minus 4 unless bit 4n +
//   k of hmask[16h + l] is set; scale j (6 bits) has low bits from the low
//   (j < 8) or high nibble of byte j % 8 and bits 4-5 from bits 2 (j / 4)
//   of byte 8 + j % 4 (ggml's kmask shuffle); the element is (d * (sc -
//   32)) * q, exact (11 by 6 by 3 bits).
template <WeightType kType, typename Out>
void DecodeQ2Q3K(const std::byte* src, std::span<Out> out) {
  constexpr bool kQ3 = kType == WeightType::kQ3_K;
  constexpr size_t kElems = TraitsOf(kType).block_size;
  constexpr size_t kBytes = TraitsOf(kType).block_bytes;
  constexpr internal::KQuantFields kAt = internal::KQuantFieldsOf(kType);
  for (size_t b = 0; b < out.size() / kElems; ++b) {
    const std::byte* block = src + b * kBytes;
    const float d = F16At(block + kAt.d);
    const float dmin = kQ3 ? 0.0f : F16At(block + kAt.dmin);
    for (size_t j = 0; j < 16; ++j) {  // sub-block j = 8n + 2k + h
      const size_t n = j / 8, k = j % 8 / 2, h = j % 2;
      float dl, ml = 0.0f;
      if constexpr (kQ3) {
        const uint32_t sc = internal::ScaleQ3K(j, block + kAt.scales);
        dl = d * static_cast<float>(static_cast<int>(sc) - 32);
      } else {
        const uint32_t s = ByteAt(block, kAt.scales + j);
        dl = d * static_cast<float>(s & 0x0f);
        ml = dmin * static_cast<float>(s >> 4);
      }
      for (size_t l = 0; l < 16; ++l) {
        int q = static_cast<int>((ByteAt(block, kAt.low + 32 * n + 16 * h + l) >> (2 * k)) & 3);
        float x;
        if constexpr (kQ3) {
          if (((ByteAt(block, kAt.high + 16 * h + l) >> (4 * n + k)) & 1) == 0) q -= 4;
          x = dl * static_cast<float>(q);
        } else {
          x = dl * static_cast<float>(q) - ml;
        }
        out[b * kElems + 16 * j + l] = static_cast<Out>(x);
      }
    }
  }
}

// ggml's dequantize_row_iq4_nl and _iq4_xs: 32 elements at a time take
// nibbles in the legacy order (element j < 16 the low nibble of qs[j],
// element j + 16 its high nibble) through kIq4nlValues, times d (IQ4_NL,
// blocks of 32: f16 d, qs[16]) or times d * (ls - 32) (IQ4_XS, super-blocks
// of 256: f16 d, u16 scales_h, scales_l[4], qs[128]; sub-block b's 6-bit
// ls has low bits from nibble b % 2 of scales_l[b / 2] and bits 4-5 from
// bits 2b, 2b + 1 of scales_h). Every product is exact (11, 6 and 7 bits).
template <WeightType kType, typename Out>
void DecodeIq4(const std::byte* src, std::span<Out> out) {
  constexpr bool kXs = kType == WeightType::kIQ4_XS;
  constexpr size_t kElems = TraitsOf(kType).block_size;
  constexpr size_t kBytes = TraitsOf(kType).block_bytes;
  constexpr size_t kQsAt = kXs ? 8 : 2;
  static_assert(kQsAt + kElems / 2 == kBytes, "an IQ4 block's layout");
  for (size_t b = 0; b < out.size() / kElems; ++b) {
    const std::byte* block = src + b * kBytes;
    const float d = F16At(block);
    const uint32_t scales_h = ByteAt(block, 2) | ByteAt(block, 3) << 8;
    for (size_t sb = 0; sb < kElems / 32; ++sb) {
      float dl = d;
      if constexpr (kXs) {
        const uint32_t ls = internal::ScaleIq4Xs(sb, scales_h, block + 4);
        dl = d * static_cast<float>(static_cast<int>(ls) - 32);
      }
      for (size_t j = 0; j < 32; ++j) {
        const uint32_t qs = ByteAt(block, kQsAt + 16 * sb + j % 16);
        const uint32_t q = j < 16 ? qs & 0x0f : qs >> 4;
        out[b * kElems + 32 * sb + j] =
            static_cast<Out>(dl * static_cast<float>(internal::kIq4nlValues[q]));
      }
    }
  }
}

// ggml's dequantize_row_mxfp4: blocks of 32 (u8 e, qs[16]) in the legacy
// nibble order, element = kMxfp4Values[q] * E8M0Half(e): a small integer
// times a power of two, exact unless it overflows to infinity.
template <typename Out>
void DecodeMxfp4(const std::byte* src, std::span<Out> out) {
  constexpr size_t kElems = TraitsOf(WeightType::kMXFP4).block_size;
  constexpr size_t kBytes = TraitsOf(WeightType::kMXFP4).block_bytes;
  static_assert(kElems == 32 && 1 + kElems / 2 == kBytes, "an MXFP4 block's layout");
  for (size_t b = 0; b < out.size() / kElems; ++b) {
    const std::byte* block = src + b * kBytes;
    const float d = internal::E8M0Half(ByteAt(block, 0));
    for (size_t j = 0; j < kElems; ++j) {
      const uint32_t qs = ByteAt(block, 1 + j % 16);
      const uint32_t q = j < 16 ? qs & 0x0f : qs >> 4;
      out[b * kElems + j] = static_cast<Out>(static_cast<float>(internal::kMxfp4Values[q]) * d);
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
    case WeightType::kQ2_K:
      return DecodeQ2Q3K<WeightType::kQ2_K>(src, out);
    case WeightType::kQ3_K:
      return DecodeQ2Q3K<WeightType::kQ3_K>(src, out);
    case WeightType::kIQ4_NL:
      return DecodeIq4<WeightType::kIQ4_NL>(src, out);
    case WeightType::kIQ4_XS:
      return DecodeIq4<WeightType::kIQ4_XS>(src, out);
    case WeightType::kMXFP4:
      return DecodeMxfp4(src, out);
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
