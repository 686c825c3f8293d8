#include "folio/ops/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <vector>

#include "folio/core/dtype.h"
#include "folio/core/splitmix64.h"
#include "ops/block_layout.h"

namespace folio::ops {
namespace {

constexpr WeightType kQuantizable[] = {
    WeightType::kF32,  WeightType::kF16,    WeightType::kBF16,   WeightType::kQ8_0,
    WeightType::kQ4_0, WeightType::kQ4_1,   WeightType::kQ5_0,   WeightType::kQ5_1,
    WeightType::kQ2_K, WeightType::kQ3_K,   WeightType::kQ4_K,   WeightType::kQ5_K,
    WeightType::kQ6_K, WeightType::kIQ4_NL, WeightType::kIQ4_XS, WeightType::kMXFP4};
// Every type with a scale precise to f16 or better (MXFP4's is a power of
// two, its elements 3 bits).
bool F16Precise(WeightType type) { return type != WeightType::kMXFP4; }
constexpr WeightType kLegacy[] = {WeightType::kQ8_0, WeightType::kQ4_0, WeightType::kQ4_1,
                                  WeightType::kQ5_0, WeightType::kQ5_1};
constexpr WeightType kKQuants[] = {WeightType::kQ2_K, WeightType::kQ3_K, WeightType::kQ4_K,
                                   WeightType::kQ5_K, WeightType::kQ6_K};

// Seeded standard normal values (Box-Muller), times `scale`.
std::vector<float> Gaussian(size_t n, uint64_t seed, float scale = 1.0f) {
  SplitMix64 rng(seed);
  std::vector<float> x(n);
  for (float& v : x) {
    const double u1 = 1.0 - rng.NextUnit(), u2 = rng.NextUnit();
    v = scale *
        static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
  }
  return x;
}

// Quantizes `x` as `type` (which must succeed) and decodes it back.
std::vector<float> RoundTrip(WeightType type, const std::vector<float>& x,
                             std::vector<std::byte>* bytes_out = nullptr) {
  std::vector<std::byte> bytes(WeightRowBytes(type, x.size()));
  const Status s = QuantizeRow(type, x, bytes.data());
  EXPECT_TRUE(s.ok()) << WeightTypeName(type) << ": " << s.ToString();
  std::vector<float> y(x.size());
  DequantizeRow(type, bytes.data(), y);
  if (bytes_out != nullptr) *bytes_out = std::move(bytes);
  return y;
}

float F16At(const std::byte* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return F16BitsToF32(bits);
}

// The largest error the legacy encoders may make on element j of a block,
// derived from how they round (quantize.h):
//   Q8_0: q = round(x / d) is within 1/2 of x / d, and q * d16 is off from
//     q * d by |q| |d - d16| <= 127 |d - d16| (d16: d rounded to f16);
//   Q4_0 / Q5_0 (K = 8 / 16 levels below zero): |x / d - (q - K)| <= 1/2,
//     except where the top level clips (x / d >= K - 1/2, only on the side
//     opposite the block's max), where it is <= 1; plus K |d - d16|;
//   Q4_1 / Q5_1 (N = 15 / 31): |(x - min) / d - q| <= 1/2, plus N |d - d16|
//     and |min - m16|.
// Each adds a few f32 roundings of the quantities involved (x * (1 / d),
// the offset add, x - min, the decoder's + m16), at most 2^-14 of d plus
// 2^-20 of the magnitudes: far below the terms above.
double LegacyBound(WeightType type, const float* x, const std::byte* block, size_t j) {
  const bool has_min = type == WeightType::kQ4_1 || type == WeightType::kQ5_1;
  float amax = 0.0f, max = 0.0f, lo = x[0], hi = x[0];
  for (size_t i = 0; i < 32; ++i) {
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  const double d16 = F16At(block);
  switch (type) {
    case WeightType::kQ8_0: {
      const double d = amax / 127.0f;
      return 0.5 * d + 127.0 * std::fabs(d - d16) + d * 0x1p-14;
    }
    case WeightType::kQ4_0:
    case WeightType::kQ5_0: {
      const double k = type == WeightType::kQ4_0 ? 8.0 : 16.0;
      const double d = max / static_cast<float>(-k);
      const bool clips = d != 0.0 && x[j] / d >= k - 0.5 - 1e-5;
      return std::fabs(d) * (clips ? 1.0 : 0.5) + k * std::fabs(d - d16) + std::fabs(d) * 0x1p-14;
    }
    case WeightType::kQ4_1:
    case WeightType::kQ5_1: {
      const double n = type == WeightType::kQ4_1 ? 15.0 : 31.0;
      const double d = (hi - lo) / static_cast<float>(n);
      const double m16 = has_min ? F16At(block + 2) : 0.0;
      return 0.5 * d + n * std::fabs(d - d16) + std::fabs(lo - m16) + d * 0x1p-14 +
             (std::fabs(x[j]) + (hi - lo)) * 0x1p-20;
    }
    default:
      ADD_FAILURE() << "not a legacy type";
      return 0.0;
  }
}

// Checks LegacyBound for every element of `x`.
void ExpectWithinLegacyBounds(WeightType type, const std::vector<float>& x) {
  std::vector<std::byte> bytes;
  const std::vector<float> y = RoundTrip(type, x, &bytes);
  const size_t block_bytes = TraitsOf(type).block_bytes;
  size_t failures = 0;
  for (size_t i = 0; i < x.size() && failures < 5; ++i) {
    const size_t b = i / 32;
    const double bound =
        LegacyBound(type, x.data() + 32 * b, bytes.data() + b * block_bytes, i % 32);
    const double err = std::fabs(static_cast<double>(x[i]) - y[i]);
    if (!(err <= bound)) {
      ++failures;
      ADD_FAILURE() << WeightTypeName(type) << " element " << i << ": x " << x[i] << " decoded "
                    << y[i] << " error " << err << " > bound " << bound;
    }
  }
}

TEST(QuantizeRow, LegacyTypesStayWithinTheirDerivedBounds) {
  for (WeightType type : kLegacy) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      ExpectWithinLegacyBounds(type, Gaussian(4096, seed, 0.02f * static_cast<float>(seed)));
    }
  }
}

// Sub-block j's levels as dl * l - ml, l in [0, nmax], from the stored
// block: Q2_K d * (s & 15) and dmin * (s >> 4) of scale byte j; Q3_K d * sc
// with ml = 4 dl (its levels -4..3); Q4_K / Q5_K ScaleMinK4's d * sc and
// dmin * m; Q6_K d * sc with ml = 32 dl.
struct SubBlockLevels {
  double dl, ml;
  int nmax;
};
SubBlockLevels LevelsOf(WeightType type, const std::byte* block, size_t j) {
  switch (type) {
    case WeightType::kQ2_K: {
      const auto s = std::to_integer<uint32_t>(block[j]);
      return {static_cast<double>(F16At(block + 80)) * (s & 15),
              static_cast<double>(F16At(block + 82)) * (s >> 4), 3};
    }
    case WeightType::kQ3_K: {
      const double dl = static_cast<double>(F16At(block + 108)) *
                        (static_cast<int>(internal::ScaleQ3K(j, block + 96)) - 32);
      return {dl, 4.0 * dl, 7};
    }
    case WeightType::kQ4_K:
    case WeightType::kQ5_K: {
      uint32_t sc, m;
      internal::ScaleMinK4(j, block + 4, sc, m);
      return {static_cast<double>(F16At(block)) * sc, static_cast<double>(F16At(block + 2)) * m,
              type == WeightType::kQ4_K ? 15 : 31};
    }
    case WeightType::kQ6_K: {
      const double dl =
          static_cast<double>(F16At(block + 208)) * static_cast<int8_t>(block[192 + j]);
      return {dl, 32.0 * dl, 63};
    }
    default:
      ADD_FAILURE() << "not a K-quant";
      return {0.0, 0.0, 0};
  }
}

// Each element of a K-quant block decodes to the level of its sub-block
// that is nearest to it: the encoder's last step requantizes against the
// stored scales. Allowed slack: one f32 rounding of the decoded value.
void ExpectNearestLevels(WeightType type, const std::vector<float>& x) {
  std::vector<std::byte> bytes;
  const std::vector<float> y = RoundTrip(type, x, &bytes);
  const size_t block_bytes = TraitsOf(type).block_bytes;
  const size_t sub = type == WeightType::kQ4_K || type == WeightType::kQ5_K ? 32 : 16;
  size_t failures = 0;
  for (size_t i = 0; i < x.size() && failures < 5; ++i) {
    const std::byte* block = bytes.data() + i / 256 * block_bytes;
    const auto [dl, ml, nmax] = LevelsOf(type, block, i % 256 / sub);
    double nearest = std::numeric_limits<double>::infinity();
    for (int l = 0; l <= nmax; ++l) nearest = std::min(nearest, std::fabs(x[i] - (dl * l - ml)));
    const double err = std::fabs(static_cast<double>(x[i]) - y[i]);
    const double slack = (std::fabs(dl) * nmax + std::fabs(ml)) * 0x1p-22;
    if (!(err <= nearest + slack)) {
      ++failures;
      ADD_FAILURE() << WeightTypeName(type) << " element " << i << ": error " << err
                    << ", nearest level " << nearest;
    }
  }
}

TEST(QuantizeRow, KQuantsDecodeEveryElementToItsNearestLevel) {
  for (WeightType type : kKQuants) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      ExpectNearestLevels(type, Gaussian(4096, seed, 0.05f));
    }
  }
}

// sqrt(sum (y - x)^2 / sum x^2).
double RmsRelativeError(const std::vector<float>& x, const std::vector<float>& y) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
    den += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(num / den);
}

// The error a uniform grid over each group's own range would make, rounding
// to nearest: step / sqrt(12) per element, step = the group's range over
// the number of steps (Q4_K: 32 elements over [min(x, 0), max x] in 15
// steps; Q5_K: 31 steps; Q2_K: 16 elements, 3 steps; Q6_K: 16 elements over
// [-amax, amax] in 64 steps, its grid -32..31 of amax / 32; Q3_K: 8 steps,
// -4..3 of amax / 4). The K-quant fits start from that naive grid and keep
// another only where it fits better (by their weighted error); storing the
// scales in 4, 6 and 8 bits costs a little back, not all of it (0.88, 0.92
// and 0.92 of the naive error were measured on Gaussian rows for Q4_K,
// Q5_K and Q6_K; 0.85 for Q2_K, 0.98 for Q3_K, whose 6-bit scales cost
// more of its 3 bits).
double IdealRms(WeightType type, const std::vector<float>& x) {
  const size_t group = type == WeightType::kQ4_K || type == WeightType::kQ5_K ? 32 : 16;
  double num = 0.0, den = 0.0;
  for (size_t g = 0; g < x.size() / group; ++g) {
    float lo = 0.0f, hi = x[g * group], amax = 0.0f;
    for (size_t i = 0; i < group; ++i) {
      const float v = x[g * group + i];
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      amax = std::max(amax, std::fabs(v));
      den += static_cast<double>(v) * v;
    }
    double step = 0.0;
    switch (type) {
      case WeightType::kQ2_K:
        step = (hi - lo) / 3.0;
        break;
      case WeightType::kQ3_K:
        step = amax / 4.0;
        break;
      case WeightType::kQ4_K:
        step = (hi - lo) / 15.0;
        break;
      case WeightType::kQ5_K:
        step = (hi - lo) / 31.0;
        break;
      default:  // Q6_K
        step = amax / 32.0;
        break;
    }
    num += group * step * step / 12.0;
  }
  return std::sqrt(num / den);
}

TEST(QuantizeRow, KQuantErrorIsNoWorseThanAUniformGridOverEachGroup) {
  for (WeightType type : kKQuants) {
    const std::vector<float> x = Gaussian(1 << 16, 7, 0.03f);
    const double rms = RmsRelativeError(x, RoundTrip(type, x));
    const double ideal = IdealRms(type, x);
    EXPECT_LE(rms, ideal) << WeightTypeName(type);
    EXPECT_GT(rms, 0.5 * ideal) << WeightTypeName(type);  // a sanity floor
  }
}

// More bits, less error (Q2_K 2.625 bits per weight, Q3_K 3.4375, Q4_0
// 4.5); and ggml's claim for the K-quants: Q4_K beats
// Q4_1 and Q5_K beats Q5_1 on Gaussian weights at fewer bits per weight.
TEST(QuantizeRow, ErrorFallsWithBitsPerWeight) {
  const std::vector<float> x = Gaussian(1 << 16, 11);
  auto rms = [&](WeightType t) { return RmsRelativeError(x, RoundTrip(t, x)); };
  EXPECT_LT(rms(WeightType::kQ3_K), rms(WeightType::kQ2_K));
  EXPECT_LT(rms(WeightType::kQ4_0), rms(WeightType::kQ3_K));
  EXPECT_LT(rms(WeightType::kQ4_K), rms(WeightType::kQ4_1));
  EXPECT_LT(rms(WeightType::kQ4_1), rms(WeightType::kQ4_0));
  EXPECT_LT(rms(WeightType::kQ5_K), rms(WeightType::kQ5_1));
  EXPECT_LT(rms(WeightType::kQ5_1), rms(WeightType::kQ4_K));
  EXPECT_LT(rms(WeightType::kQ6_K), rms(WeightType::kQ5_K));
  EXPECT_LT(rms(WeightType::kQ8_0), rms(WeightType::kQ6_K));
  EXPECT_LT(rms(WeightType::kF16), rms(WeightType::kQ8_0));
  EXPECT_LT(rms(WeightType::kF16), rms(WeightType::kBF16));
  EXPECT_EQ(rms(WeightType::kF32), 0.0);
  // The non-uniform levels fit a bell better than Q4_0's uniform ones at
  // the same 4.5 bits (IQ4_NL), and at 4.25 (IQ4_XS: 6-bit sub-block
  // scales); MXFP4's 4.25 bits spend their scale on a power of two.
  EXPECT_LT(rms(WeightType::kIQ4_NL), rms(WeightType::kQ4_0));
  EXPECT_LT(rms(WeightType::kIQ4_XS), rms(WeightType::kQ4_0));
  EXPECT_LT(rms(WeightType::kQ4_0), rms(WeightType::kMXFP4));
}

// One MXFP4 block by hand: absmax 5 gives e = floor(log2 5) - 2 + 127 =
// 127, so the codes are worth 0, +-0.5, 1, 1.5, 2, 3, 4 and 6; each element
// takes the nearest, the first code on a tie (0.75 -> 0.5, 5 -> 4, -0 ->
// +0).
TEST(QuantizeRow, Mxfp4BlockByHand) {
  std::vector<float> x(32, 0.0f);
  const float values[] = {5.0f, -0.0f, 0.2f, -1.3f, 0.75f, 2.6f, -5.5f, 3.4f};
  const uint32_t codes[] = {6, 0, 0, 11, 1, 5, 15, 5};
  for (size_t j = 0; j < 8; ++j) x[2 * j + 16 * (j % 2)] = values[j];
  std::vector<std::byte> bytes;
  const std::vector<float> y = RoundTrip(WeightType::kMXFP4, x, &bytes);
  EXPECT_EQ(std::to_integer<uint32_t>(bytes[0]), 127u);
  for (size_t j = 0; j < 8; ++j) {
    const size_t i = 2 * j + 16 * (j % 2);  // element i: byte 1 + i % 16, nibble i / 16
    const uint32_t code = (std::to_integer<uint32_t>(bytes[1 + i % 16]) >> (4 * (i / 16))) & 15;
    EXPECT_EQ(code, codes[j]) << "element " << i << " = " << x[i];
    EXPECT_EQ(y[i], internal::kMxfp4Values[codes[j]] * 0.5f) << "element " << i;
  }
  // Below 2^-125 the exponent stays at 0 (ggml's formula would go
  // negative); the elements round between 0 and +-2^-128.
  const std::vector<float> tiny(32, 0x1p-127f);
  RoundTrip(WeightType::kMXFP4, tiny, &bytes);
  EXPECT_EQ(std::to_integer<uint32_t>(bytes[0]), 0u);
}

// What an MXFP4 block decodes to encodes to the same block: its largest
// element sits on code 4 or 6 (absmax in [4, 8) times the unit), whose
// exponent is the block's again, and every element is a code exactly.
TEST(QuantizeRow, Mxfp4IsAFixedPointOfItsDecodedValues) {
  std::vector<std::byte> first;
  const std::vector<float> y = RoundTrip(WeightType::kMXFP4, Gaussian(4096, 13, 0.02f), &first);
  std::vector<std::byte> second;
  RoundTrip(WeightType::kMXFP4, y, &second);
  EXPECT_EQ(first, second);
}

// IQ4_XS stores each sub-block's scale as l * d with l in [-32, 31]: the
// sub-block of largest scale gets l = -32 (d is minus it over 32), so its
// elements keep IQ4_NL's resolution while a sub-block 100x smaller keeps
// only a few levels.
TEST(QuantizeRow, Iq4XsSubBlockScales) {
  std::vector<float> x = Gaussian(256, 17, 1.0f);
  for (size_t i = 32; i < 64; ++i) x[i] *= 0.01f;
  std::vector<std::byte> bytes;
  const std::vector<float> y = RoundTrip(WeightType::kIQ4_XS, x, &bytes);
  uint16_t scales_h;
  std::memcpy(&scales_h, bytes.data() + 2, 2);
  int largest = 0;
  for (size_t sb = 0; sb < 8; ++sb) {
    const int l = static_cast<int>(internal::ScaleIq4Xs(sb, scales_h, bytes.data() + 4)) - 32;
    if (std::abs(l) > std::abs(largest)) largest = l;
  }
  EXPECT_EQ(largest, -32);
  const std::vector<float> nl = RoundTrip(WeightType::kIQ4_NL, x);
  const auto rms = [&](const std::vector<float>& q, size_t from, size_t to) {
    return RmsRelativeError(std::vector<float>(x.begin() + from, x.begin() + to),
                            std::vector<float>(q.begin() + from, q.begin() + to));
  };
  EXPECT_LT(rms(y, 0, 32), 1.5 * rms(nl, 0, 32));
  EXPECT_GT(rms(y, 32, 64), 2.0 * rms(nl, 32, 64));
}

// Q2_K and Q3_K quantize their sixteen sub-block scales against the
// largest: Q2_K's largest scale and largest min become 15 (d = max / 15),
// Q3_K's scale of largest magnitude -32 (d = -max / 32, stored biased as
// 0). A sub-block 100x smaller keeps only a few of its scale's 4 (6) bits
// and its elements lose their resolution.
TEST(QuantizeRow, Q2KAndQ3KScalesSpanTheirBits) {
  std::vector<float> x = Gaussian(256, 19, 1.0f);
  for (size_t i = 48; i < 64; ++i) x[i] *= 0.01f;  // sub-block 3
  std::vector<std::byte> q2;
  const std::vector<float> y2 = RoundTrip(WeightType::kQ2_K, x, &q2);
  uint32_t max_sc = 0, max_m = 0;
  for (size_t j = 0; j < 16; ++j) {
    max_sc = std::max(max_sc, std::to_integer<uint32_t>(q2[j]) & 15);
    max_m = std::max(max_m, std::to_integer<uint32_t>(q2[j]) >> 4);
  }
  EXPECT_EQ(max_sc, 15u);
  EXPECT_EQ(max_m, 15u);
  EXPECT_LE(std::to_integer<uint32_t>(q2[3]) & 15, 1u);
  std::vector<std::byte> q3;
  const std::vector<float> y3 = RoundTrip(WeightType::kQ3_K, x, &q3);
  int largest = 0;
  for (size_t j = 0; j < 16; ++j) {
    const int sc = static_cast<int>(internal::ScaleQ3K(j, q3.data() + 96)) - 32;
    if (std::abs(sc) > std::abs(largest)) largest = sc;
  }
  EXPECT_EQ(largest, -32);
  const auto rms = [&](const std::vector<float>& q, size_t from, size_t to) {
    return RmsRelativeError(std::vector<float>(x.begin() + from, x.begin() + to),
                            std::vector<float>(q.begin() + from, q.begin() + to));
  };
  EXPECT_LT(rms(y3, 0, 16), rms(y2, 0, 16));
  EXPECT_GT(rms(y3, 48, 64), 2.0 * rms(y3, 0, 16));
}

TEST(QuantizeRow, ElementTypesRoundToNearestEven) {
  const std::vector<float> x = {1.0f,     -2.5f,    1.0f + 0x1p-11f, 1.0f + 0x1p-10f + 0x1p-11f,
                                65504.0f, 0x1p-25f, 3e-8f,           1.0f + 0x1p-8f};
  std::vector<std::byte> bytes;
  RoundTrip(WeightType::kF16, x, &bytes);
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t got;
    std::memcpy(&got, bytes.data() + 2 * i, 2);
    EXPECT_EQ(got, F32ToF16Bits(x[i])) << i;
  }
  // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even (1) wins; 1 + 3 * 2^-11
  // rounds up to the even 1 + 2^-9.
  EXPECT_EQ(RoundTrip(WeightType::kF16, {1.0f + 0x1p-11f})[0], 1.0f);
  EXPECT_EQ(RoundTrip(WeightType::kF16, {1.0f + 0x1p-10f + 0x1p-11f})[0], 1.0f + 0x1p-9f);
  EXPECT_EQ(RoundTrip(WeightType::kBF16, {1.0f + 0x1p-8f})[0], 1.0f);
  EXPECT_EQ(RoundTrip(WeightType::kBF16, {1.0f + 0x1p-7f + 0x1p-8f})[0], 1.0f + 0x1p-6f);
  EXPECT_EQ(RoundTrip(WeightType::kF32, {0.1f, -3e-40f}), (std::vector<float>{0.1f, -3e-40f}));
}

// Hand-computed blocks. Q8_0 of x = j: amax 31, d = 31 / 127, q = round(j *
// (1 / d)). Q4_0 of j - 16: max is x[0] = -16, d = 2, q = trunc((j - 16) /
// 2 + 8.5) = trunc(j / 2 + 0.5), clipped to 15 at j = 31.
TEST(QuantizeRow, LegacyBlocksByHand) {
  std::vector<float> x(32);
  for (size_t j = 0; j < 32; ++j) x[j] = static_cast<float>(j);
  std::vector<std::byte> q8;
  RoundTrip(WeightType::kQ8_0, x, &q8);
  EXPECT_EQ(F16At(q8.data()), F16BitsToF32(F32ToF16Bits(31.0f / 127.0f)));
  for (size_t j = 0; j < 32; ++j) {
    const auto want =
        static_cast<int8_t>(std::round(static_cast<float>(j) * (1.0f / (31.0f / 127.0f))));
    EXPECT_EQ(static_cast<int8_t>(q8[2 + j]), want) << j;
  }
  EXPECT_EQ(static_cast<int8_t>(q8[2 + 31]), 127);
  EXPECT_EQ(static_cast<int8_t>(q8[2 + 0]), 0);

  for (size_t j = 0; j < 32; ++j) x[j] = static_cast<float>(j) - 16.0f;
  std::vector<std::byte> q4;
  const std::vector<float> y = RoundTrip(WeightType::kQ4_0, x, &q4);
  EXPECT_EQ(F16At(q4.data()), 2.0f);
  for (size_t j = 0; j < 32; ++j) {
    const uint32_t want = std::min<uint32_t>(15, static_cast<uint32_t>(j / 2.0 + 0.5));
    const auto byte = std::to_integer<uint32_t>(q4[2 + j % 16]);
    EXPECT_EQ(j < 16 ? byte & 15 : byte >> 4, want) << j;
  }
  EXPECT_EQ(y[0], -16.0f);  // the max lands on level 0 exactly
  EXPECT_EQ(y[31], 14.0f);  // 15 clips to level 15: 7 * 2

  // Q5_1 of 0..31: min 0, d = 1, every q = j, qh = the top bits of 16..31.
  for (size_t j = 0; j < 32; ++j) x[j] = static_cast<float>(j);
  std::vector<std::byte> q5;
  EXPECT_EQ(RoundTrip(WeightType::kQ5_1, x, &q5), x);
  EXPECT_EQ(F16At(q5.data()), 1.0f);
  EXPECT_EQ(F16At(q5.data() + 2), 0.0f);
  uint32_t qh;
  std::memcpy(&qh, q5.data() + 4, 4);
  EXPECT_EQ(qh, 0xffff0000u);
}

// Quantizing what a Q8_0 or Q4_0 block decodes to gives that block back:
// its largest element is exactly 127 d16 (-8 d16), so d comes out as d16
// and every level as itself.
TEST(QuantizeRow, Q8_0AndQ4_0AreFixedPointsOfTheirDecodedValues) {
  for (WeightType type : {WeightType::kQ8_0, WeightType::kQ4_0}) {
    std::vector<std::byte> first;
    const std::vector<float> y = RoundTrip(type, Gaussian(2048, 3), &first);
    std::vector<std::byte> second;
    RoundTrip(type, y, &second);
    EXPECT_EQ(first, second) << WeightTypeName(type);
  }
}

TEST(QuantizeRow, AllZerosDecodeToZeros) {
  const std::vector<float> zeros(512, 0.0f);
  for (WeightType type : kQuantizable) {
    EXPECT_EQ(RoundTrip(type, zeros), zeros) << WeightTypeName(type);
  }
}

// A constant row: the legacy types' bounds hold (Q4_1 / Q5_1 put it in m
// exactly up to f16), and every type gets within f16 precision of it.
TEST(QuantizeRow, ConstantRows) {
  for (float c : {0.37f, -1.25f, 1e-3f}) {
    const std::vector<float> x(512, c);
    for (WeightType type : kLegacy) ExpectWithinLegacyBounds(type, x);
    for (WeightType type : kKQuants) ExpectNearestLevels(type, x);
    for (WeightType type : kQuantizable) {
      if (!F16Precise(type)) continue;
      const std::vector<float> y = RoundTrip(type, x);
      for (size_t i = 0; i < x.size(); ++i) {
        // An f16 scale times an integer level, or bf16's 8 bits: within
        // 2^-8 relative; but a scale in f16's subnormal range (the
        // K-quants' d = max scale / 63 of 1e-3) is only within 2^-25
        // absolute, which the levels (at most 127 * 32, Q6_K) multiply.
        ASSERT_NEAR(y[i], c, std::fabs(c) * 0x1p-8 + 127 * 32 * 0x1p-25)
            << WeightTypeName(type) << " c " << c;
      }
    }
  }
}

// One huge value among small ones: the bounds still hold, the outlier
// itself survives within f16 precision, and (for the symmetric and K
// types) it costs the small values of its block their resolution.
TEST(QuantizeRow, OneHugeOutlier) {
  std::vector<float> x = Gaussian(512, 5, 0.01f);
  x[77] = 3000.0f;
  for (WeightType type : kLegacy) ExpectWithinLegacyBounds(type, x);
  for (WeightType type : kKQuants) ExpectNearestLevels(type, x);
  for (WeightType type : kQuantizable) {
    const std::vector<float> y = RoundTrip(type, x);
    // MXFP4: 3000 is 2^11 * 1.46, whose nearest code is 6 * 2^9 = 3072.
    EXPECT_NEAR(y[77], F16Precise(type) ? 3000.0f : 3072.0f, 3000.0f * 0x1p-8)
        << WeightTypeName(type);
    // Blocks without the outlier keep their resolution (Q2_K's is 0.3 on
    // Gaussian rows, ErrorFallsWithBitsPerWeight).
    EXPECT_LT(RmsRelativeError(std::vector<float>(x.begin() + 256, x.end()),
                               std::vector<float>(y.begin() + 256, y.end())),
              type == WeightType::kQ2_K ? 0.35 : 0.2)
        << WeightTypeName(type);
  }
}

// Values below f32's normal range: scales underflow f16 (to 0), 1/d would
// overflow, and every type must still write finite blocks that decode to
// within the values' magnitude of them (0, here).
TEST(QuantizeRow, SubnormalRowsDecodeFinitelyToNearZero) {
  std::vector<float> x(512);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(static_cast<int>(i % 7) - 3) * 1e-39f;  // f32 subnormals
  }
  for (WeightType type : kQuantizable) {
    const std::vector<float> y = RoundTrip(type, x);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << WeightTypeName(type);
      ASSERT_LE(std::fabs(y[i] - x[i]), 3e-39f) << WeightTypeName(type) << " " << i;
    }
  }
  for (WeightType type : kLegacy) ExpectWithinLegacyBounds(type, x);
}

TEST(QuantizeRow, NonFiniteValuesAreRefusedNamingTheElement) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> x(256, 0.5f);
    x[37] = bad;
    for (WeightType type : kQuantizable) {
      std::vector<std::byte> out(WeightRowBytes(type, x.size()));
      const Status s = QuantizeRow(type, x, out.data());
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << WeightTypeName(type);
      EXPECT_NE(s.message().find("element 37"), std::string::npos) << s.message();
    }
  }
}

TEST(QuantizeRow, ValuesOrScalesBeyondF16AreOutOfRange) {
  std::vector<float> x(256, 1.0f);
  x[3] = 70000.0f;  // beyond f16, fine for bf16
  std::vector<std::byte> out(WeightRowBytes(WeightType::kF16, x.size()));
  Status s = QuantizeRow(WeightType::kF16, x, out.data());
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("element 3"), std::string::npos) << s.message();
  EXPECT_TRUE(QuantizeRow(WeightType::kBF16, x, out.data()).ok());
  x[3] = std::numeric_limits<float>::max();  // rounds up past bf16's largest finite value
  EXPECT_EQ(QuantizeRow(WeightType::kBF16, x, out.data()).code(), StatusCode::kOutOfRange);
  // No block scale of 1e9 fits f16: Q8_0's 1e9 / 127, ..., Q6_K's 1e9 / 32
  // / 128, Q2_K's 1e9 / 3 / 15.
  x[3] = 1e9f;
  for (WeightType type :
       {WeightType::kQ8_0, WeightType::kQ4_0, WeightType::kQ4_1, WeightType::kQ5_0,
        WeightType::kQ5_1, WeightType::kQ2_K, WeightType::kQ3_K, WeightType::kQ4_K,
        WeightType::kQ5_K, WeightType::kQ6_K}) {
    std::vector<std::byte> q(WeightRowBytes(type, x.size()));
    s = QuantizeRow(type, x, q.data());
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << WeightTypeName(type);
    EXPECT_NE(s.message().find("block 0"), std::string::npos) << s.message();
  }
}

TEST(QuantizeRow, PartialBlocksAndTypesWithoutAQuantizerAreRefused) {
  const std::vector<float> x(48, 1.0f);
  std::vector<std::byte> out(1024);
  EXPECT_EQ(QuantizeRow(WeightType::kQ8_0, std::span<const float>(x).first(40), out.data()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(QuantizeRow(WeightType::kQ4_K, x, out.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(HasQuantizer(WeightType::kF64));
  const Status f64 = QuantizeRow(WeightType::kF64, {}, out.data());
  EXPECT_EQ(f64.code(), StatusCode::kUnimplemented);
  EXPECT_NE(f64.message().find("f64"), std::string::npos) << f64.message();
  for (WeightType type : kQuantizable) {
    EXPECT_TRUE(HasQuantizer(type));
    EXPECT_TRUE(QuantizeRow(type, {}, out.data()).ok()) << WeightTypeName(type);
  }
}

}  // namespace
}  // namespace folio::ops
