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

TEST(RopeInterleaved, RotatesPairsByPositionTimesFrequency) {
  std::vector<double> x = {1, 0, 1, 0};  // one head, head_dim 4
  RopeInterleaved<double>(x, 4, 2, 10000.0);
  EXPECT_NEAR(x[0], std::cos(2.0), 1e-15);
  EXPECT_NEAR(x[1], std::sin(2.0), 1e-15);
  EXPECT_NEAR(x[2], std::cos(2.0 / 100.0), 1e-15);  // 10000^(-2/4) = 1/100
  EXPECT_NEAR(x[3], std::sin(2.0 / 100.0), 1e-15);
  std::vector<double> y = {0.3, -0.7};
  RopeInterleaved<double>(y, 2, 0, 10000.0);  // position 0 is the identity
  EXPECT_EQ(y, (std::vector<double>{0.3, -0.7}));
}

TEST(SwiGlu, IsSiluOfGateTimesUp) {
  std::vector<double> gate = {0.0, 2.0};
  const std::vector<double> up = {5.0, 3.0};
  SwiGlu<double>(gate, up);
  EXPECT_EQ(gate[0], 0.0);
  EXPECT_NEAR(gate[1], 2.0 / (1 + std::exp(-2.0)) * 3.0, 1e-15);
}

}  // namespace
}  // namespace folio::ops
