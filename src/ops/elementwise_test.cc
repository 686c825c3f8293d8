#include "folio/ops/elementwise.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace folio::ops
