// QuantizeRow: the scalar encoder of each weight type (ggml's
// quantize_row_*_ref, restated; for the IQ4 types, what llama-quantize
// runs).
#include "folio/ops/quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "folio/core/dtype.h"
#include "folio/core/str_cat.h"
#include "ops/block_layout.h"
#include "ops/quantize_internal.h"

namespace folio::ops {

namespace {

constexpr uint16_t kF16ExponentMask = 0x7c00;

void StoreU16(std::byte* p, uint16_t v) {
  p[0] = static_cast<std::byte>(v & 0xff);
  p[1] = static_cast<std::byte>(v >> 8);
}
void StoreU32(std::byte* p, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

}  // namespace

Status internal::StoreF16Scale(std::byte* p, float v, std::string_view what, size_t block) {
  const uint16_t bits = F32ToF16Bits(v);
  if ((bits & kF16ExponentMask) == kF16ExponentMask) {
    return Status::OutOfRange(
        StrCat("block ", block, ": ", what, " ", v, " is beyond f16's largest finite value 65504"));
  }
  StoreU16(p, bits);
  return Status::Ok();
}

namespace {

using internal::kGroupMaxEps;
using internal::NearestInt;
using internal::StoreF16Scale;

// 1/d as ggml computes it (0 for d = 0). Where 1/d overflows, d is below
// f32's normal range and its f16 is 0, so the levels do not matter: 0 keeps
// them finite.
float Reciprocal(float d) {
  if (d == 0.0f) return 0.0f;
  const float id = 1.0f / d;
  return std::isfinite(id) ? id : 0.0f;
}

// trunc(t) clamped to [0, max_q], as ggml's MIN(max_q, (int8_t)t) for the t
// it can see (t > -1); NaN (only from a zero-level block) gives 0.
uint32_t TruncLevel(float t, uint32_t max_q) {
  if (t >= static_cast<float>(max_q)) return max_q;
  return t > 0.0f ? static_cast<uint32_t>(t) : 0;
}

// --- Element types. ---

Status EncodeElements(WeightType type, std::span<const float> in, std::byte* out) {
  for (size_t i = 0; i < in.size(); ++i) {
    uint16_t bits = 0;
    if (type == WeightType::kF16) {
      bits = F32ToF16Bits(in[i]);
      if ((bits & kF16ExponentMask) == kF16ExponentMask) {
        return Status::OutOfRange(
            StrCat("element ", i, " = ", in[i], " is beyond f16's largest finite value 65504"));
      }
    } else {
      bits = F32ToBF16Bits(in[i]);
      if ((bits & 0x7f80) == 0x7f80) {
        return Status::OutOfRange(
            StrCat("element ", i, " = ", in[i], " rounds past bf16's largest finite value"));
      }
    }
    StoreU16(out + 2 * i, bits);
  }
  return Status::Ok();
}

// --- Q8_0 and the legacy 4/5-bit blocks. ---

// ggml's quantize_row_q8_0_ref: d = absmax / 127, q = roundf(x * (1 / d)).
Status EncodeQ8_0(std::span<const float> in, std::byte* out) {
  for (size_t b = 0; b < in.size() / kQ8_0BlockElems; ++b) {
    const float* x = in.data() + b * kQ8_0BlockElems;
    std::byte* block = out + b * kQ8_0BlockBytes;
    float amax = 0.0f;
    for (size_t j = 0; j < kQ8_0BlockElems; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = Reciprocal(d);
    FOLIO_RETURN_IF_ERROR(StoreF16Scale(block, d, "scale d", b));
    for (size_t j = 0; j < kQ8_0BlockElems; ++j) {
      // |x * id| <= 127 (up to an ulp, which roundf absorbs).
      const auto q = static_cast<int8_t>(std::round(x[j] * id));
      block[kQ8_0ScaleBytes + j] = static_cast<std::byte>(q);
    }
  }
  return Status::Ok();
}

// ggml's quantize_row_q4_0_ref, _q4_1, _q5_0 and _q5_1 in one template, the
// inverse of weight_type.cc's DecodeLegacy (same layout). The symmetric
// types take d = max / -8 (-16) with max the first element of largest
// magnitude, so it lands on level 0 exactly and the opposite extreme may
// clip to the top level; the _1 types spread [min, max] over 16 (32)
// levels. Levels are trunc(x / d + offset + 0.5) in f32, against the f32 d
// and min (not their f16 roundings), multiplication by 1/d and all, as
// ggml and the gguf package compute them: that is what makes the bytes
// equal theirs.
template <WeightType kType>
Status EncodeLegacy(std::span<const float> in, std::byte* out) {
  constexpr bool kHasMin = kType == WeightType::kQ4_1 || kType == WeightType::kQ5_1;
  constexpr bool kFiveBit = kType == WeightType::kQ5_0 || kType == WeightType::kQ5_1;
  constexpr uint32_t kMaxQ = kFiveBit ? 31 : 15;
  constexpr float kOffset = kHasMin ? 0.5f : kFiveBit ? 16.5f : 8.5f;
  constexpr size_t kElems = TraitsOf(kType).block_size;
  constexpr size_t kBytes = TraitsOf(kType).block_bytes;
  constexpr size_t kQhAt = kHasMin ? 4 : 2;
  constexpr size_t kQsAt = kQhAt + (kFiveBit ? 4 : 0);
  static_assert(kElems == 32 && kQsAt + kElems / 2 == kBytes, "a legacy block's layout");
  for (size_t b = 0; b < in.size() / kElems; ++b) {
    const float* x = in.data() + b * kElems;
    std::byte* block = out + b * kBytes;
    float d = 0.0f;
    float min = 0.0f;
    if constexpr (kHasMin) {
      float max = -FLT_MAX;
      min = FLT_MAX;
      for (size_t j = 0; j < kElems; ++j) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
      }
      d = (max - min) / static_cast<float>(kMaxQ);
      FOLIO_RETURN_IF_ERROR(StoreF16Scale(block + 2, min, "min m", b));
    } else {
      float amax = 0.0f;
      float max = 0.0f;
      for (size_t j = 0; j < kElems; ++j) {
        if (amax < std::fabs(x[j])) {
          amax = std::fabs(x[j]);
          max = x[j];
        }
      }
      d = max / -static_cast<float>(kMaxQ / 2 + 1);
    }
    FOLIO_RETURN_IF_ERROR(StoreF16Scale(block, d, "scale d", b));
    const float id = Reciprocal(d);
    std::memset(block + kQsAt, 0, kElems / 2);
    uint32_t qh = 0;
    for (size_t j = 0; j < kElems; ++j) {
      const float t = kHasMin ? (x[j] - min) * id + kOffset : x[j] * id + kOffset;
      const uint32_t q = TruncLevel(t, kMaxQ);
      const uint32_t nibble = (q & 0x0f) << (j < kElems / 2 ? 0 : 4);
      block[kQsAt + j % (kElems / 2)] |= static_cast<std::byte>(nibble);
      qh |= ((q >> 4) & 1) << j;
    }
    if constexpr (kFiveBit) StoreU32(block + kQhAt, qh);
  }
  return Status::Ok();
}

// --- The lookup types: IQ4_NL, IQ4_XS and MXFP4. ---

// ggml's best_index_int8 over kIq4nlValues: the level nearest x, the upper
// one on a tie, the end levels beyond the range.
uint32_t NearestIq4Level(float x) {
  const int8_t* v = internal::kIq4nlValues;
  if (x <= static_cast<float>(v[0])) return 0;
  if (x >= static_cast<float>(v[15])) return 15;
  uint32_t hi = 1;
  while (x >= static_cast<float>(v[hi])) ++hi;  // v[hi - 1] <= x < v[hi]
  return x - static_cast<float>(v[hi - 1]) < static_cast<float>(v[hi]) - x ? hi - 1 : hi;
}

// The scale of 32 elements on the IQ4 levels, as llama-quantize fits it
// without an importance matrix (ggml's quantize_row_iq4_nl_impl with
// ntry 7): weights x^2; start from d = max / 127 (max: the first element of
// largest magnitude, so it lands on the level -127) and the least-squares
// scale of its levels, then try the levels of 1/d = (k - 127) / max for
// k = -7..7 and keep the least-squares scale whose fit is best. 0 for a
// block below 1e-15 in magnitude. Sums run in f32 in element order, as in
// ggml.
float FitIq4Scale(const float* x) {
  constexpr int kTries = 7;
  const auto v0 = static_cast<float>(internal::kIq4nlValues[0]);
  float amax = 0.0f;
  float max = 0.0f;
  for (size_t j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0.0f;
  // sum w q x and sum w q^2 of the levels of x * id.
  const auto sums = [x](float id, float& sumqx, float& sumq2) {
    sumqx = 0.0f;
    sumq2 = 0.0f;
    for (size_t j = 0; j < 32; ++j) {
      const auto q = static_cast<float>(internal::kIq4nlValues[NearestIq4Level(id * x[j])]);
      const float w = x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
  };
  float sumqx = 0.0f;
  float sumq2 = 0.0f;
  sums(1.0f / (-max / v0), sumqx, sumq2);
  float d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int t = -kTries; t <= kTries; ++t) {
    sums(static_cast<float>(t + internal::kIq4nlValues[0]) / max, sumqx, sumq2);
    if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Packs 32 elements' levels against 1/d = id into 16 bytes in the legacy
// nibble order (element j < 16 low nibble of byte j, j + 16 its high).
void StoreIq4Levels(const float* x, float id, std::byte* qs) {
  for (size_t j = 0; j < 16; ++j) {
    qs[j] =
        static_cast<std::byte>(NearestIq4Level(id * x[j]) | NearestIq4Level(id * x[j + 16]) << 4);
  }
}

// IQ4_NL: per block of 32, f16 FitIq4Scale, then the levels against the
// f32 scale. IQ4_XS: per super-block of 256, the 8 sub-blocks' scales are
// quantized to 6 signed bits against d = -(the scale of largest magnitude)
// / 32 (f16), each l = round-half-even(scale / d) clamped to [-32, 31] and
// stored as l + 32, and the elements take their levels against d * l.
template <WeightType kType>
Status EncodeIq4(std::span<const float> in, std::byte* out) {
  constexpr size_t kElems = TraitsOf(kType).block_size;
  constexpr size_t kBytes = TraitsOf(kType).block_bytes;
  for (size_t b = 0; b < in.size() / kElems; ++b) {
    const float* x = in.data() + b * kElems;
    std::byte* block = out + b * kBytes;
    if constexpr (kType == WeightType::kIQ4_NL) {
      const float d = FitIq4Scale(x);
      FOLIO_RETURN_IF_ERROR(StoreF16Scale(block, d, "scale d", b));
      StoreIq4Levels(x, d != 0.0f ? 1.0f / d : 0.0f, block + 2);
    } else {
      constexpr size_t kSub = kElems / 32;
      float scales[kSub];
      float max_scale = 0.0f;
      float amax_scale = 0.0f;
      for (size_t sb = 0; sb < kSub; ++sb) {
        scales[sb] = FitIq4Scale(x + 32 * sb);
        if (std::fabs(scales[sb]) > amax_scale) {
          amax_scale = std::fabs(scales[sb]);
          max_scale = scales[sb];
        }
      }
      const float d = -max_scale / 32.0f;
      FOLIO_RETURN_IF_ERROR(StoreF16Scale(block, d, "scale d", b));
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      uint32_t scales_h = 0;
      std::byte* scales_l = block + 4;
      std::memset(scales_l, 0, kSub / 2);
      for (size_t sb = 0; sb < kSub; ++sb) {
        const int l = std::clamp(NearestInt(id * scales[sb]), -32, 31);
        const float dl = d * static_cast<float>(l);
        StoreIq4Levels(x + 32 * sb, dl != 0.0f ? 1.0f / dl : 0.0f, block + 8 + 16 * sb);
        const auto biased = static_cast<uint32_t>(l + 32);
        scales_l[sb / 2] |= static_cast<std::byte>((biased & 0x0f) << (4 * (sb % 2)));
        scales_h |= (biased >> 4) << (2 * sb);
      }
      StoreU16(block + 2, static_cast<uint16_t>(scales_h));
    }
  }
  return Status::Ok();
}

// ggml's quantize_row_mxfp4_ref: per block of 32, the E8M0 exponent e =
// floor(log2(absmax)) - 2 + 127, so that absmax / 2^(e - 127) lies in
// [4, 8) and the largest E2M1 value 6 covers most of it (beyond 6 it
// clips), then each element the code whose value kMxfp4Values[q] *
// E8M0Half(e) is nearest, the first code on a tie (so 0 is +0). An all-zero
// block has e = 0. Blocks whose absmax is below 2^-125 take e = 0 as well
// (ggml's formula would go negative there); their elements round to the
// nearest of 0 and +-2^-128.
Status EncodeMxfp4(std::span<const float> in, std::byte* out) {
  constexpr size_t kElems = TraitsOf(WeightType::kMXFP4).block_size;
  constexpr size_t kBytes = TraitsOf(WeightType::kMXFP4).block_bytes;
  for (size_t b = 0; b < in.size() / kElems; ++b) {
    const float* x = in.data() + b * kElems;
    std::byte* block = out + b * kBytes;
    float amax = 0.0f;
    for (size_t j = 0; j < kElems; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float exponent = amax > 0.0f ? std::floor(std::log2(amax)) - 2.0f + 127.0f : 0.0f;
    const auto e = static_cast<uint32_t>(std::clamp(exponent, 0.0f, 254.0f));
    const float d = internal::E8M0Half(e);
    const auto nearest = [d](float v) {
      uint32_t best = 0;
      float best_err = std::fabs(static_cast<float>(internal::kMxfp4Values[0]) * d - v);
      for (uint32_t q = 1; q < 16; ++q) {
        const float err = std::fabs(static_cast<float>(internal::kMxfp4Values[q]) * d - v);
        if (err < best_err) {
          best = q;
          best_err = err;
        }
      }
      return best;
    };
    block[0] = static_cast<std::byte>(e);
    for (size_t j = 0; j < kElems / 2; ++j) {
      block[1 + j] = static_cast<std::byte>(nearest(x[j]) | nearest(x[j + kElems / 2]) << 4);
    }
  }
  return Status::Ok();
}

}  // namespace

Status QuantizeRow(WeightType type, std::span<const float> in, std::byte* out) {
  if (!HasQuantizer(type)) {
    return Status::Unimplemented(StrCat("folio cannot quantize to ", WeightTypeName(type)));
  }
  const WeightTypeTraits& traits = TraitsOf(type);
  if (in.size() % traits.block_size != 0) {
    return Status::InvalidArgument(StrCat(in.size(), " elements are not whole ", traits.name,
                                          " blocks of ", traits.block_size));
  }
  for (size_t i = 0; i < in.size(); ++i) {
    if (!std::isfinite(in[i])) {
      return Status::InvalidArgument(StrCat("element ", i, " is ", in[i],
                                            ": only finite values "
                                            "can be quantized"));
    }
  }
  switch (type) {
    case WeightType::kF32:
      if (!in.empty()) std::memcpy(out, in.data(), in.size() * sizeof(float));
      return Status::Ok();
    case WeightType::kF16:
    case WeightType::kBF16:
      return EncodeElements(type, in, out);
    case WeightType::kQ8_0:
      return EncodeQ8_0(in, out);
    case WeightType::kQ4_0:
      return EncodeLegacy<WeightType::kQ4_0>(in, out);
    case WeightType::kQ4_1:
      return EncodeLegacy<WeightType::kQ4_1>(in, out);
    case WeightType::kQ5_0:
      return EncodeLegacy<WeightType::kQ5_0>(in, out);
    case WeightType::kQ5_1:
      return EncodeLegacy<WeightType::kQ5_1>(in, out);
    case WeightType::kQ2_K:
      return internal::EncodeQ2K(in, out);
    case WeightType::kQ3_K:
      return internal::EncodeQ3K(in, out);
    case WeightType::kQ4_K:
      return internal::EncodeQ4K(in, out);
    case WeightType::kQ5_K:
      return internal::EncodeQ5K(in, out);
    case WeightType::kQ6_K:
      return internal::EncodeQ6K(in, out);
    case WeightType::kIQ4_NL:
      return EncodeIq4<WeightType::kIQ4_NL>(in, out);
    case WeightType::kIQ4_XS:
      return EncodeIq4<WeightType::kIQ4_XS>(in, out);
    case WeightType::kMXFP4:
      return EncodeMxfp4(in, out);
    case WeightType::kF64:
      break;
  }
  return Status::Unimplemented(StrCat("folio cannot quantize to ", WeightTypeName(type)));
}

}  // namespace folio::ops
