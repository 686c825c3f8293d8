// The K-quant encoders: ggml's quantize_row_q{2,3,4,5,6}_K_ref restated
// (what llama-quantize runs without an importance matrix), and the scale
// searches they share (make_qkx2_quants, make_qx_quants, make_q3_quants).
// Sums accumulate in f32 in ggml's order and every expression keeps its
// operand order, and no multiply-add is fused (-ffp-contract=off): that is
// what makes the bytes equal llama.cpp's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include "folio/core/dtype.h"
#include "folio/ops/weight_type.h"
#include "ops/block_layout.h"
#include "ops/quantize_internal.h"

namespace folio::ops::internal {
namespace {

// StoreF16Scale, returning the value stored: the K-quants requantize every
// element against the scale a decoder will read, not the one they fitted.
Result<float> StoreF16ScaleRead(std::byte* p, float v, std::string_view what, size_t block) {
  FOLIO_RETURN_IF_ERROR(StoreF16Scale(p, v, what, block));
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return F16BitsToF32(bits);
}

// How FitScaleAndMin judges a fit: ggml's use_mad.
enum class FitError : uint8_t { kSquared, kAbsolute };

// ggml's make_qkx2_quants: levels L in [0, nmax], a scale > 0 and a min <=
// 0 with x ~ scale * L + min, minimising sum w (scale * L + min - x)^2
// (kSquared) or sum w |scale * L + min - x| (kAbsolute). It starts from the
// grid spanning [min(x, 0), max(x)] and tries nstep + 1 denser or sparser
// grids (nmax + rmin + rdelta * i steps over [best min so far, max x]); for
// each, the best scale and min for those levels come from the 2x2 normal
// equations (least squares whatever the error judged; min clamped to 0 if
// positive), kept if they lower the weighted error. Sums accumulate in f32
// in index order, as ggml's. Returns the scale and writes -min to
// `neg_min`.
float FitScaleAndMin(const float* x, const float* w, int n, int nmax, float rmin, float rdelta,
                     int nstep, FitError judge, uint8_t* levels, float& neg_min) {
  float lo = x[0], hi = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  lo = std::min(lo, 0.0f);
  if (hi == lo) {
    std::fill(levels, levels + n, uint8_t{0});
    neg_min = -lo;
    return 0.0f;
  }
  auto level = [nmax](float v) { return static_cast<uint8_t>(std::clamp(NearestInt(v), 0, nmax)); };
  auto error_of = [judge](float diff) {
    return judge == FitError::kAbsolute ? std::fabs(diff) : diff * diff;
  };
  float iscale = static_cast<float>(nmax) / (hi - lo);
  float scale = 1.0f / iscale;
  float min = lo;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    levels[i] = level(iscale * (x[i] - lo));
    const float diff = scale * levels[i] + lo - x[i];
    best_error += w[i] * error_of(diff);
  }
  uint8_t trial[32];
  for (int step = 0; step <= nstep; ++step) {
    // As in ggml, each grid is laid from the best min found so far.
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (hi - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      trial[i] = level(iscale * (x[i] - min));
      const float l = trial[i];
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0.0f) {
      this_min = 0.0f;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * trial[i] + this_min - x[i];
      error += w[i] * error_of(diff);
    }
    if (error < best_error) {
      std::copy(trial, trial + n, levels);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  neg_min = -min;
  return scale;
}

// ggml's make_qx_quants with weights x^2 (its rmse_type 1): a signed scale
// with x ~ scale * (L - nmax), L in [0, 2 nmax), maximising the weighted
// fit (sum w x l)^2 / sum w l^2 over the grids -(nmax + 0.1 i) / max, i in
// [-9, 9]; max is the first element of largest magnitude. A group below
// kGroupMaxEps is all zeros.
float FitSignedScale(const float* x, int n, int nmax, int8_t* levels) {
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(levels, levels + n, int8_t{0});
    return 0.0f;
  }
  auto level = [nmax](float v) { return std::clamp(NearestInt(v), -nmax, nmax - 1); };
  auto sums = [&](float iscale, float& sum_lx, float& sum_l2) {
    sum_lx = sum_l2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const auto l = static_cast<float>(level(iscale * x[i]));
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * l;
      sum_l2 += w * l * l;
    }
  };
  auto assign = [&](float iscale) {
    for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(level(iscale * x[i]) + nmax);
  };
  float iscale = -static_cast<float>(nmax) / max;
  float sum_lx = 0.0f, sum_l2 = 0.0f;
  sums(iscale, sum_lx, sum_l2);
  assign(iscale);
  float scale = sum_l2 != 0.0f ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    sums(iscale, sum_lx, sum_l2);
    if (sum_l2 > 0.0f && sum_lx * sum_lx > best * sum_l2) {
      assign(iscale);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

// ggml's make_q3_quants with its level search (do_rmse): a signed scale with
// x ~ scale * l, l in [-nmax, nmax), weights w = x^2. The levels start on the
// grid -nmax / max (max: the first element of largest magnitude, which lands
// on -nmax); then, up to 5 sweeps in element order, each element is offered
// the level nearest x / s, where s is the least-squares scale of the other
// elements (sum w x l / sum w l^2 without it, tried only while that sum w x
// l is > 0), and takes it when that raises the fit (sum w x l)^2 / sum w l^2
// of the whole group. A sweep that moves nothing ends the search. Returns the
// least-squares scale of the final levels and writes them biased by nmax.
// A group below kGroupMaxEps is all zeros (its levels 0, as ggml writes
// them).
float FitSignedScaleByMoves(const float* x, int n, int nmax, int8_t* levels) {
  constexpr int kSweeps = 5;
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(levels, levels + n, int8_t{0});
    return 0.0f;
  }
  auto level = [nmax](float v) { return std::clamp(NearestInt(v), -nmax, nmax - 1); };
  const float iscale = -static_cast<float>(nmax) / max;
  float sum_lx = 0.0f, sum_l2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale * x[i]);
    levels[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sum_lx += w * x[i] * static_cast<float>(l);
    sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int sweep = 0; sweep < kSweeps; ++sweep) {
    int moved = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const auto old_l = static_cast<float>(levels[i]);
      float slx = sum_lx - w * x[i] * old_l;
      if (!(slx > 0.0f)) continue;
      float sl2 = sum_l2 - w * old_l * old_l;
      const int l = level(x[i] * sl2 / slx);
      if (l == levels[i]) continue;
      slx += w * x[i] * static_cast<float>(l);
      sl2 += w * static_cast<float>(l) * static_cast<float>(l);
      // (slx / sl2) * slx > (sum_lx / sum_l2) * sum_lx, cross-multiplied in
      // ggml's order.
      if (sl2 > 0.0f && slx * slx * sum_l2 > sum_lx * sum_lx * sl2) {
        levels[i] = static_cast<int8_t>(l);
        sum_lx = slx;
        sum_l2 = sl2;
        ++moved;
      }
    }
    if (moved == 0) break;
  }
  for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(levels[i] + nmax);
  return sum_l2 > 0.0f ? sum_lx / sum_l2 : 0.0f;
}

// ggml's quantize_row_q4_K_ref and _q5_K_ref. Per sub-block of 32: weights
// w = rms(x) + |x| (large values matter more), FitScaleAndMin (Q4_K: 15
// levels, grids nmax - 1 + 0.1 i, i <= 20; Q5_K: 31 levels, nmax - 0.5 +
// 0.1 i, i <= 15). The eight scales and mins become 6-bit integers against
// d = max scale / 63 and dmin = max min / 63, packed as ScaleMinK4 unpacks
// them; then every element is requantized against the stored d * sc and
// dmin * m (a sub-block whose scale rounds to 0 keeps its fitted levels,
// which then decode to -dmin * m anyway). Layout as weight_type.cc's
// DecodeQ4Q5K.
template <WeightType kType>
Status EncodeQ4Q5K(std::span<const float> in, std::byte* out) {
  constexpr bool kFiveBit = kType == WeightType::kQ5_K;
  constexpr int kNmax = kFiveBit ? 31 : 15;
  constexpr float kRmin = kFiveBit ? -0.5f : -1.0f;
  constexpr int kNstep = kFiveBit ? 15 : 20;
  constexpr size_t kElems = TraitsOf(kType).block_size;
  constexpr size_t kBytes = TraitsOf(kType).block_bytes;
  constexpr KQuantFields kAt = KQuantFieldsOf(kType);
  for (size_t b = 0; b < in.size() / kElems; ++b) {
    const float* x = in.data() + b * kElems;
    std::byte* block = out + b * kBytes;
    uint8_t levels[kElems];
    float scales[8], mins[8];
    float max_scale = 0.0f, max_min = 0.0f;
    for (size_t j = 0; j < 8; ++j) {
      const float* xs = x + 32 * j;
      float sum_x2 = 0.0f;
      for (size_t l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
      const float av_x = std::sqrt(sum_x2 / 32.0f);
      float w[32];
      for (size_t l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xs[l]);
      scales[j] = FitScaleAndMin(xs, w, 32, kNmax, kRmin, 0.1f, kNstep, FitError::kSquared,
                                 levels + 32 * j, mins[j]);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    // A scale or min that rounds below 0 is stored as 0 (ggml's uint8
    // conversion would wrap it to 63 instead; fitted scales and mins are
    // not negative in practice).
    uint8_t packed[12] = {};
    for (size_t j = 0; j < 8; ++j) {
      const auto ls = static_cast<uint8_t>(std::clamp(NearestInt(inv_scale * scales[j]), 0, 63));
      const auto lm = static_cast<uint8_t>(std::clamp(NearestInt(inv_min * mins[j]), 0, 63));
      if (j < 4) {
        packed[j] = ls;
        packed[j + 4] = lm;
      } else {
        packed[j + 4] = static_cast<uint8_t>((ls & 0x0f) | (lm & 0x0f) << 4);
        packed[j - 4] = static_cast<uint8_t>(packed[j - 4] | (ls >> 4) << 6);
        packed[j] = static_cast<uint8_t>(packed[j] | (lm >> 4) << 6);
      }
    }
    std::memcpy(block + kAt.scales, packed, 12);
    FOLIO_ASSIGN_OR_RETURN(const float d, StoreF16ScaleRead(block + kAt.d, max_scale / 63.0f,
                                                            "super-block scale d", b));
    FOLIO_ASSIGN_OR_RETURN(const float dmin, StoreF16ScaleRead(block + kAt.dmin, max_min / 63.0f,
                                                               "super-block dmin", b));
    for (size_t j = 0; j < 8; ++j) {
      uint32_t sc, m;
      internal::ScaleMinK4(j, block + kAt.scales, sc, m);
      const float dl = d * static_cast<float>(sc);
      if (dl == 0.0f) continue;
      const float ml = dmin * static_cast<float>(m);
      for (size_t l = 0; l < 32; ++l) {
        levels[32 * j + l] =
            static_cast<uint8_t>(std::clamp(NearestInt((x[32 * j + l] + ml) / dl), 0, kNmax));
      }
    }
    // Sub-blocks 2k and 2k + 1 share qs[32k..32k + 31]: low and high nibble;
    // Q5_K's fifth bit of sub-block g is bit g of qh[l].
    if constexpr (kFiveBit) std::memset(block + kAt.high, 0, 32);
    for (size_t k = 0; k < 4; ++k) {
      for (size_t l = 0; l < 32; ++l) {
        const uint32_t lo = levels[64 * k + l], hi = levels[64 * k + 32 + l];
        block[kAt.low + 32 * k + l] = static_cast<std::byte>((lo & 0x0f) | (hi & 0x0f) << 4);
        if constexpr (kFiveBit) {
          const uint32_t bits_k = (lo >> 4) << (2 * k) | (hi >> 4) << (2 * k + 1);
          block[kAt.high + l] |= static_cast<std::byte>(bits_k);
        }
      }
    }
  }
  return Status::Ok();
}

// Packs 256 2-bit values as Q2_K's and Q3_K's qs[64]: bits 2k, 2k + 1 of
// qs[32n + l] hold element 128n + 32k + l.
void StoreTwoBitLevels(const uint8_t* levels, std::byte* qs) {
  for (size_t n = 0; n < 2; ++n) {
    const uint8_t* L = levels + 128 * n;
    for (size_t l = 0; l < 32; ++l) {
      qs[32 * n + l] =
          static_cast<std::byte>(L[l] | L[l + 32] << 2 | L[l + 64] << 4 | L[l + 96] << 6);
    }
  }
}

// The first of the scales with the largest magnitude (0 when all are 0),
// sign kept: the super-block scale Q3_K and Q6_K derive, as ggml picks it.
float LargestMagnitude(std::span<const float> scales) {
  float largest = 0.0f;
  for (const float s : scales) {
    if (std::fabs(s) > std::fabs(largest)) largest = s;
  }
  return largest;
}

}  // namespace

// ggml's quantize_row_q2_K_ref. Per sub-block of 16: weights w = |x|,
// FitScaleAndMin with 3 levels over the grids nmax - 0.5 + 0.1 i, i <= 15,
// judged by weighted absolute error. The sixteen scales and mins become
// 4-bit integers against d = max scale / 15 and dmin = max min / 15 (scale
// byte j: the scale in its low nibble, the min in its high); then every
// element is requantized against the stored d * sc and dmin * m (a
// sub-block whose scale rounds to 0 keeps its fitted levels, which decode
// to -dmin * m anyway). A scale that would round below 0 is stored as 0,
// as in EncodeQ4Q5K. Layout as weight_type.cc's DecodeQ2Q3K.
Status EncodeQ2K(std::span<const float> in, std::byte* out) {
  constexpr size_t kElems = TraitsOf(WeightType::kQ2_K).block_size;
  constexpr size_t kBytes = TraitsOf(WeightType::kQ2_K).block_bytes;
  constexpr KQuantFields kAt = KQuantFieldsOf(WeightType::kQ2_K);
  for (size_t b = 0; b < in.size() / kElems; ++b) {
    const float* x = in.data() + b * kElems;
    std::byte* block = out + b * kBytes;
    uint8_t levels[kElems];
    float scales[16], mins[16];
    float max_scale = 0.0f, max_min = 0.0f;
    for (size_t j = 0; j < 16; ++j) {
      const float* xs = x + 16 * j;
      float w[16];
      for (size_t l = 0; l < 16; ++l) w[l] = std::fabs(xs[l]);
      scales[j] = FitScaleAndMin(xs, w, 16, 3, -0.5f, 0.1f, 15, FitError::kAbsolute,
                                 levels + 16 * j, mins[j]);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0.0f ? 15.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 15.0f / max_min : 0.0f;
    for (size_t j = 0; j < 16; ++j) {
      const int ls = std::clamp(NearestInt(inv_scale * scales[j]), 0, 15);
      const int lm = std::clamp(NearestInt(inv_min * mins[j]), 0, 15);
      block[j] = static_cast<std::byte>(ls | lm << 4);
    }
    FOLIO_ASSIGN_OR_RETURN(const float d, StoreF16ScaleRead(block + kAt.d, max_scale / 15.0f,
                                                            "super-block scale d", b));
    FOLIO_ASSIGN_OR_RETURN(const float dmin, StoreF16ScaleRead(block + kAt.dmin, max_min / 15.0f,
                                                               "super-block dmin", b));
    for (size_t j = 0; j < 16; ++j) {
      const auto s = std::to_integer<uint32_t>(block[j]);
      const float dl = d * static_cast<float>(s & 0x0f);
      if (dl == 0.0f) continue;
      const float ml = dmin * static_cast<float>(s >> 4);
      for (size_t l = 0; l < 16; ++l) {
        levels[16 * j + l] =
            static_cast<uint8_t>(std::clamp(NearestInt((x[16 * j + l] + ml) / dl), 0, 3));
      }
    }
    StoreTwoBitLevels(levels, block + kAt.low);
  }
  return Status::Ok();
}

// ggml's quantize_row_q3_K_ref. Per sub-block of 16: FitSignedScaleByMoves
// (levels -4..3). The sixteen scales become 6-bit signed integers against d
// = -(the scale of largest magnitude) / 32, stored biased by 32 as
// ScaleQ3K unpacks them, and d as the f16 of 1 / (-32 / that scale), as
// ggml computes it; then every element is requantized against the stored
// d * (sc - 32) (a sub-block whose scale rounds to 0 keeps its fitted
// levels, which decode to 0 anyway). The third bit of each level goes to
// hmask: set when the level is 4 or more (the decoder subtracts 4 where it
// is clear). Layout as weight_type.cc's DecodeQ2Q3K.
Status EncodeQ3K(std::span<const float> in, std::byte* out) {
  constexpr size_t kElems = TraitsOf(WeightType::kQ3_K).block_size;
  constexpr size_t kBytes = TraitsOf(WeightType::kQ3_K).block_bytes;
  constexpr KQuantFields kAt = KQuantFieldsOf(WeightType::kQ3_K);
  for (size_t b = 0; b < in.size() / kElems; ++b) {
    const float* x = in.data() + b * kElems;
    std::byte* block = out + b * kBytes;
    int8_t levels[kElems];
    float scales[16];
    for (size_t j = 0; j < 16; ++j) {
      scales[j] = FitSignedScaleByMoves(x + 16 * j, 16, 4, levels + 16 * j);
    }
    const float max_scale = LargestMagnitude(scales);
    std::memset(block, 0, kBytes);
    float d_f32 = 0.0f;
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (size_t j = 0; j < 16; ++j) {
        const auto sc =
            static_cast<uint32_t>(std::clamp(NearestInt(iscale * scales[j]), -32, 31) + 32);
        block[kAt.scales + j % 8] |= static_cast<std::byte>((sc & 0x0f) << (j < 8 ? 0 : 4));
        block[kAt.scales + 8 + j % 4] |= static_cast<std::byte>((sc >> 4) << (2 * (j / 4)));
      }
      d_f32 = 1.0f / iscale;
    }
    FOLIO_ASSIGN_OR_RETURN(const float d,
                           StoreF16ScaleRead(block + kAt.d, d_f32, "super-block scale d", b));
    for (size_t j = 0; j < 16; ++j) {
      const auto sc = static_cast<int>(ScaleQ3K(j, block + kAt.scales)) - 32;
      const float dl = d * static_cast<float>(sc);
      if (dl == 0.0f) continue;
      for (size_t l = 0; l < 16; ++l) {
        levels[16 * j + l] =
            static_cast<int8_t>(std::clamp(NearestInt(x[16 * j + l] / dl), -4, 3) + 4);
      }
    }
    // Element e's third bit is bit e / 32 of hmask[e % 32].
    uint8_t low[kElems];
    for (size_t e = 0; e < kElems; ++e) {
      const auto q = static_cast<uint8_t>(levels[e]);
      if (q > 3) block[kAt.high + e % 32] |= static_cast<std::byte>(1u << (e / 32));
      low[e] = q & 3;
    }
    StoreTwoBitLevels(low, block + kAt.low);
  }
  return Status::Ok();
}

Status EncodeQ4K(std::span<const float> in, std::byte* out) {
  return EncodeQ4Q5K<WeightType::kQ4_K>(in, out);
}
Status EncodeQ5K(std::span<const float> in, std::byte* out) {
  return EncodeQ4Q5K<WeightType::kQ5_K>(in, out);
}

// ggml's quantize_row_q6_K_ref: FitSignedScale per sub-block of 16 (levels
// -32..31), the sixteen scales as int8 against d = -(largest-magnitude
// scale) / 128, then every element requantized against d * sc. A
// super-block whose scales are all below kGroupMaxEps is all zero bytes.
// Layout as weight_type.cc's DecodeQ6K.
Status EncodeQ6K(std::span<const float> in, std::byte* out) {
  constexpr size_t kElems = TraitsOf(WeightType::kQ6_K).block_size;
  constexpr size_t kBytes = TraitsOf(WeightType::kQ6_K).block_bytes;
  constexpr KQuantFields kAt = KQuantFieldsOf(WeightType::kQ6_K);
  for (size_t b = 0; b < in.size() / kElems; ++b) {
    const float* x = in.data() + b * kElems;
    std::byte* block = out + b * kBytes;
    int8_t levels[kElems];
    float scales[16];
    for (size_t j = 0; j < 16; ++j) {
      scales[j] = FitSignedScale(x + 16 * j, 16, 32, levels + 16 * j);
    }
    const float max_scale = LargestMagnitude(scales);
    std::memset(block, 0, kBytes);
    if (std::fabs(max_scale) < kGroupMaxEps) continue;
    const float iscale = -128.0f / max_scale;
    FOLIO_ASSIGN_OR_RETURN(
        const float d, StoreF16ScaleRead(block + kAt.d, 1.0f / iscale, "super-block scale d", b));
    for (size_t j = 0; j < 16; ++j) {
      const auto sc = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[j])));
      block[kAt.scales + j] = static_cast<std::byte>(sc);
      const float dl = d * static_cast<float>(sc);
      if (dl == 0.0f) continue;
      for (size_t l = 0; l < 16; ++l) {
        levels[16 * j + l] =
            static_cast<int8_t>(std::clamp(NearestInt(x[16 * j + l] / dl), -32, 31) + 32);
      }
    }
    for (size_t h = 0; h < 2; ++h) {
      const int8_t* L = levels + 128 * h;
      for (size_t l = 0; l < 32; ++l) {
        const auto q = [&](size_t k) { return static_cast<uint32_t>(L[32 * k + l]); };
        block[kAt.low + 64 * h + l] = static_cast<std::byte>((q(0) & 0x0f) | (q(2) & 0x0f) << 4);
        block[kAt.low + 64 * h + 32 + l] =
            static_cast<std::byte>((q(1) & 0x0f) | (q(3) & 0x0f) << 4);
        block[kAt.high + 32 * h + l] = static_cast<std::byte>((q(0) >> 4) | (q(1) >> 4) << 2 |
                                                              (q(2) >> 4) << 4 | (q(3) >> 4) << 6);
      }
    }
  }
  return Status::Ok();
}

}  // namespace folio::ops::internal
