#include "folio/ops/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

namespace folio::ops {
namespace {

TEST(MatVec, RowsAreOutputs) {
  const std::vector<double> w = {1, 2, 3, 4, 5, 6};  // [2, 3]
  const std::vector<double> x = {1, 0, -1};
  std::vector<double> y(2);
  MatVec<double>(w, x, y);
  EXPECT_EQ(y, (std::vector<double>{-2, -2}));
}

TEST(RmsNorm, UnitRmsTimesGain) {
  const std::vector<double> x = {3, 4};  // mean square 12.5
  const std::vector<double> g = {1, 2};
  std::vector<double> y(2);
  RmsNorm<double>(x, g, 0.0, y);
  EXPECT_NEAR(y[0], 3 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(y[1], 8 / std::sqrt(12.5), 1e-15);
}

TEST(Rope, InterleavedRotatesAdjacentPairs) {
  std::vector<double> x = {1, 0, 1, 0};  // one head, head_dim 4
  const std::vector<double> c = {std::cos(2.0), std::cos(0.02)},
                            s = {std::sin(2.0), std::sin(0.02)};
  Rope<double>(x, 4, c, s, /*neox=*/false);
  EXPECT_EQ(x, (std::vector<double>{c[0], s[0], c[1], s[1]}));
}

TEST(Rope, NeoxRotatesHalves) {
  std::vector<double> x = {1, 1, 0, 0};  // pairs (0, 2) and (1, 3)
  const std::vector<double> c = {std::cos(2.0), std::cos(0.02)},
                            s = {std::sin(2.0), std::sin(0.02)};
  Rope<double>(x, 4, c, s, /*neox=*/true);
  EXPECT_EQ(x, (std::vector<double>{c[0], c[1], s[0], s[1]}));
}

TEST(Rope, ZeroAngleIsIdentity) {
  std::vector<double> y = {0.3, -0.7};
  const std::vector<double> c = {1.0}, s = {0.0};
  Rope<double>(y, 2, c, s, false);
  EXPECT_EQ(y, (std::vector<double>{0.3, -0.7}));
}

TEST(SwiGlu, IsSiluOfGateTimesUp) {
  std::vector<double> gate = {0.0, 2.0};
  const std::vector<double> up = {5.0, 3.0};
  SwiGlu<double>(gate, up);
  EXPECT_EQ(gate[0], 0.0);
  EXPECT_NEAR(gate[1], 2.0 / (1 + std::exp(-2.0)) * 3.0, 1e-15);
}

TEST(GeGlu, IsGeluTanhOfGateTimesUp) {
  std::vector<double> gate = {0.0, 1.0, -3.0};
  const std::vector<double> up = {5.0, 3.0, 2.0};
  GeGlu<double>(gate, up);
  EXPECT_EQ(gate[0], 0.0);
  // torch.nn.functional.gelu(torch.tensor(1.0, dtype=torch.float64), approximate="tanh"),
  // the tanh form, which is accurate to ~1e-16 at these points.
  EXPECT_NEAR(gate[1], 0.8411919906082768 * 3.0, 1e-15);
  EXPECT_NEAR(gate[2], -0.0036373920817729943 * 2.0, 1e-15);
}

}  // namespace
}  // namespace folio::ops
