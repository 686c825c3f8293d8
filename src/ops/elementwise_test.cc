#include "folio/ops/elementwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "folio/core/splitmix64.h"
#include "folio/ops/ops.h"
#include "testing/simd_targets.h"

namespace folio::ops {
namespace {

void ForEachTarget(const std::function<void()>& fn) {
  test_support::ForEachSimdTarget(ElementwiseTargetName, fn);
}

std::vector<float> Uniform(size_t n, float lo, float hi, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(lo + (hi - lo) * rng.NextUnit());
  return v;
}

uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

// Against the formula in double: exp within 1 ulp (Highway's bound), then
// an add, a divide and a multiply each rounding once (half an ulp), and
// the exp's error is damped by e / (1 + e) <= 1 in the sum: at most 2.5 ulp
// of the result; the bound allows 4.
TEST(SwiGluSimd, IsWithinFourUlpOfTheFormulaOnEveryTarget) {
  ForEachTarget([] {
    for (const size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{16}, size_t{37}, size_t{1000}}) {
      std::vector<float> gate = Uniform(n, -30, 30, 1 + n);
      const std::vector<float> up = Uniform(n, -4, 4, 100 + n);
      std::vector<double> want(gate.begin(), gate.end());
      SwiGlu<double>(want, std::vector<double>(up.begin(), up.end()));
      SwiGluSimd(gate, up);
      for (size_t i = 0; i < n; ++i) {
        const double ulp = std::ldexp(1.0, std::ilogb(want[i]) - 23);
        EXPECT_NEAR(gate[i], want[i], 4 * ulp + 1e-38) << "n " << n << " at " << i;
      }
    }
  });
}

// Contract 3: an element's bits depend on its own inputs alone, not on the
// length of the call or where the element sits in it (a tail goes through
// the vector code too).
TEST(SwiGluSimd, AnElementsBitsDoNotDependOnTheCall) {
  ForEachTarget([] {
    const size_t n = 53;
    const std::vector<float> gate = Uniform(n, -12, 12, 7), up = Uniform(n, -3, 3, 8);
    std::vector<float> whole = gate;
    SwiGluSimd(whole, up);
    for (size_t i = 0; i < n; ++i) {
      for (const size_t len : {size_t{1}, size_t{3}}) {
        if (i + len > n) continue;
        std::vector<float> part(gate.begin() + i, gate.begin() + i + len);
        SwiGluSimd(part, std::span<const float>(up).subspan(i, len));
        EXPECT_EQ(Bits(part[0]), Bits(whole[i])) << "element " << i << ", call of " << len;
      }
    }
  });
}

// Outside the clamp: silu(g) is g to within rounding for large g and
// vanishes for very negative g; infinities and NaN come through as the
// formula gives them (NaN stays NaN).
TEST(SwiGluSimd, ExtremeGatesAndNaN) {
  ForEachTarget([] {
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> gate = {200.0f, -200.0f, 1e30f,
                               -1e30f, inf,     std::numeric_limits<float>::quiet_NaN()};
    const std::vector<float> up(gate.size(), 2.0f);
    SwiGluSimd(gate, up);
    EXPECT_EQ(gate[0], 400.0f);
    EXPECT_LE(std::fabs(gate[1]), 1e-30f);
    EXPECT_EQ(gate[2], 2e30f);
    EXPECT_LE(std::fabs(gate[3]), 1e-6f);
    EXPECT_EQ(gate[4], inf);
    EXPECT_TRUE(std::isnan(gate[5]));
  });
}

// Against ops::GeGlu in double (the same exp form, so the double reference
// itself is accurate where 1 + tanh would cancel). The vector form's error comes from
// exp's argument -2u, rounded to within an ulp or two of |2u|: that is an
// absolute error of ~2|u| ulp(1) in the exponent, hence a relative error of
// up to 2|u| * 2^-23 times e / (1 + e) <= 1 in the result, plus a few
// roundings. The bound allows (6 + 4|u|) ulp of the result.
TEST(GeGluSimd, IsWithinTheFormulasRoundingOnEveryTarget) {
  ForEachTarget([] {
    for (const size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{16}, size_t{37}, size_t{1000}}) {
      std::vector<float> gate = Uniform(n, -12, 12, 3 + n);
      const std::vector<float> up = Uniform(n, -4, 4, 300 + n);
      std::vector<double> want(gate.begin(), gate.end());
      GeGlu<double>(want, std::vector<double>(up.begin(), up.end()));
      const std::vector<float> g0 = gate;
      GeGluSimd(gate, up);
      for (size_t i = 0; i < n; ++i) {
        const double z = g0[i];
        const double u = std::fabs(0.7978845608028654 * (z + 0.044715 * z * z * z));
        const double ulp = std::ldexp(1.0, std::ilogb(want[i]) - 23);
        // Past the clamp (-2u > 88) the vector form returns z up e^-88
        // (<= |z up| 6.1e-39) where the exact value is smaller still.
        const double clamped = std::fabs(z * up[i]) * 6.1e-39;
        EXPECT_NEAR(gate[i], want[i], (6 + 4 * std::min(u, 88.0)) * ulp + clamped + 1e-44)
            << "n " << n << " at " << i << " gate " << z;
      }
    }
  });
}

TEST(GeGluSimd, AnElementsBitsDoNotDependOnTheCall) {
  ForEachTarget([] {
    const size_t n = 53;
    const std::vector<float> gate = Uniform(n, -6, 6, 9), up = Uniform(n, -3, 3, 10);
    std::vector<float> whole = gate;
    GeGluSimd(whole, up);
    for (size_t i = 0; i + 3 <= n; ++i) {
      std::vector<float> part(gate.begin() + i, gate.begin() + i + 3);
      GeGluSimd(part, std::span<const float>(up).subspan(i, 3));
      EXPECT_EQ(Bits(part[0]), Bits(whole[i])) << "element " << i;
    }
  });
}

TEST(GeGluSimd, ExtremeGatesAndNaN) {
  ForEachTarget([] {
    std::vector<float> gate = {0.0f, 200.0f, -200.0f, 1e30f,
                               std::numeric_limits<float>::quiet_NaN()};
    const std::vector<float> up(gate.size(), 2.0f);
    GeGluSimd(gate, up);
    EXPECT_EQ(gate[0], 0.0f);
    EXPECT_EQ(gate[1], 400.0f);
    EXPECT_LE(std::fabs(gate[2]), 1e-30f);
    EXPECT_EQ(gate[3], 2e30f);
    EXPECT_TRUE(std::isnan(gate[4]));
  });
}

}  // namespace
}  // namespace folio::ops
