#include "folio/core/status.h"

#include <gtest/gtest.h>

#include "folio/core/checked_math.h"

namespace folio {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument("x must be even (got " + std::to_string(x) + ")");
  return x / 2;
}

Result<int> Quarter(int x) {
  FOLIO_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(Status, OkByDefault) {
  EXPECT_TRUE(Status().ok());
  EXPECT_EQ(Status().ToString(), "Ok");
}

TEST(Status, ToStringNamesCodeAndMessage) {
  Status s = Status::OutOfRange("pos 12 >= capacity 12");
  EXPECT_EQ(s.ToString(), "OutOfRange: pos 12 >= capacity 12");
  EXPECT_EQ(s.WithContext("layer 1").message(), "layer 1: pos 12 >= capacity 12");
  EXPECT_EQ(s.WithContext("layer 1").code(), StatusCode::kOutOfRange);
}

TEST(Result, PropagatesErrorThroughAssignOrReturn) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> bad = Quarter(6);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.error().message().find("got 3"), std::string::npos);
}

TEST(CheckedMath, DetectsOverflow) {
  EXPECT_EQ(CheckedMul(1ULL << 32, 1ULL << 31), 1ULL << 63);
  EXPECT_FALSE(CheckedMul(1ULL << 32, 1ULL << 32).has_value());
  EXPECT_FALSE(CheckedAdd(~0ULL, 1).has_value());
  EXPECT_FALSE(CheckedProduct({1ULL << 40, 1ULL << 20, 16}).has_value());
  EXPECT_EQ(CheckedProduct({2, 3, 7}), 42u);
  EXPECT_EQ(CeilDiv(10, 3), 4u);
  EXPECT_EQ(CeilDiv(9, 3), 3u);
  EXPECT_EQ(CeilDiv(0, 3), 0u);
  EXPECT_EQ(CeilDiv(~0ULL, 2), (1ULL << 63));
}

TEST(CheckDeathTest, AbortsWithValues) {
  EXPECT_DEATH(FOLIO_CHECK(1 + 1 == 3, "lhs=", 2), "FOLIO_CHECK failed: 1 \\+ 1 == 3: lhs=2");
}

}  // namespace
}  // namespace folio
