#include "folio/core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace folio {
namespace {

TEST(DType, NamesRoundTrip) {
  for (DType t : {DType::kF64, DType::kF32, DType::kBF16, DType::kF16, DType::kI8}) {
    EXPECT_EQ(*ParseDType(DTypeName(t)), t);
  }
  EXPECT_EQ(*ParseDType("bfloat16"), DType::kBF16);
  Result<DType> bad = ParseDType("f8");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message().find("'f8'"), std::string::npos);
}

TEST(DType, BF16RoundsToNearestEven) {
  EXPECT_EQ(F32ToBF16Bits(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(F32ToBF16Bits(1.0f + 0x1.0p-8f), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1.0078125 (odd) and 1.015625: rounds up.
  EXPECT_EQ(F32ToBF16Bits(1.0f + 3 * 0x1.0p-8f), 0x3f82);
  EXPECT_TRUE(std::isnan(BF16BitsToF32(F32ToBF16Bits(std::nanf("")))));
  EXPECT_EQ(BF16BitsToF32(F32ToBF16Bits(-2.5f)), -2.5f);
}

// Every one of the 65536 f16 bit patterns survives f16 -> f32 -> f16.
TEST(DType, F16RoundTripsEveryPattern) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = F16BitsToF32(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(F16BitsToF32(F32ToF16Bits(f))));
      continue;
    }
    ASSERT_EQ(F32ToF16Bits(f), h) << "pattern " << bits;
  }
}

TEST(DType, F16RoundsAndSaturates) {
  EXPECT_EQ(F32ToF16Bits(65504.0f), 0x7bff);    // largest finite
  EXPECT_EQ(F32ToF16Bits(65520.0f), 0x7c00);    // rounds to inf
  EXPECT_EQ(F32ToF16Bits(0x1.0p-25f), 0x0000);  // half the smallest subnormal: ties to even 0
  EXPECT_EQ(F32ToF16Bits(0x1.8p-24f), 0x0002);  // 1.5 ulp: ties to even 2
  EXPECT_EQ(F32ToF16Bits(1.0f + 0x1.0p-11f), 0x3c00);  // tie to even
}

TEST(DType, LoadStoreEveryFloatType) {
  for (DType t : {DType::kF64, DType::kF32, DType::kBF16, DType::kF16}) {
    std::vector<std::byte> buf(3 * DTypeSize(t));
    StoreElement<double>(t, buf.data(), 2, -1.5);
    EXPECT_EQ(LoadElement<double>(t, buf.data(), 2), -1.5) << DTypeName(t);
    EXPECT_EQ(LoadElement<float>(t, buf.data(), 2), -1.5f) << DTypeName(t);
  }
}

}  // namespace
}  // namespace folio
