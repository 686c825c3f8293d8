#include "folio/core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace folio {
namespace {

TEST(DType, NamesRoundTrip) {
  for (DType t :
       {DType::kF64, DType::kF32, DType::kBF16, DType::kF16, DType::kI8, DType::kF8E4M3}) {
    EXPECT_EQ(*ParseDType(DTypeName(t)), t);
  }
  EXPECT_EQ(*ParseDType("bfloat16"), DType::kBF16);
  EXPECT_EQ(*ParseDType("fp8"), DType::kF8E4M3);
  EXPECT_EQ(*ParseDType("int8"), DType::kI8);
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

// Every E4M3 pattern decodes to what its fields say and survives the trip
// back; 0x7f and 0xff are NaN and nothing decodes to infinity.
TEST(DType, E4M3DecodesEveryPattern) {
  for (uint32_t bits = 0; bits < 0x100; ++bits) {
    const auto b = static_cast<uint8_t>(bits);
    const float f = E4M3BitsToF32(b);
    const int exp = static_cast<int>((b >> 3) & 0xf), mant = b & 7;
    if (exp == 15 && mant == 7) {
      EXPECT_TRUE(std::isnan(f)) << bits;
      EXPECT_EQ(F32ToE4M3Bits(f) & 0x7f, 0x7f);
      continue;
    }
    const double magnitude = exp == 0 ? std::ldexp(mant, -9) : std::ldexp(8 + mant, exp - 10);
    EXPECT_EQ(f, (b & 0x80) != 0 ? -magnitude : magnitude) << bits;
    if (f == 0.0f) continue;  // -0 and +0 keep their sign bits, checked next
    ASSERT_EQ(F32ToE4M3Bits(f), b) << "pattern " << bits;
  }
  EXPECT_EQ(F32ToE4M3Bits(-0.0f), 0x80);
  EXPECT_EQ(E4M3BitsToF32(0x7e), 448.0f);
}

// Rounding agrees with a brute-force search for the nearest E4M3 value
// (ties to the even pattern) on random floats across the whole range, and
// everything past 448 saturates.
TEST(DType, E4M3RoundsToNearestEvenAndSaturates) {
  std::vector<float> finite;
  for (uint32_t b = 0; b < 0x7f; ++b) finite.push_back(E4M3BitsToF32(static_cast<uint8_t>(b)));
  uint64_t state = 12345;
  for (int trial = 0; trial < 20000; ++trial) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const float x = std::ldexp(static_cast<float>(state >> 40) / 16777216.0f,
                               static_cast<int>((state >> 8) % 24) - 14);
    uint32_t best = 0;
    for (uint32_t b = 1; b < finite.size(); ++b) {
      const double d = std::abs(double{finite[b]} - x), e = std::abs(double{finite[best]} - x);
      if (d < e || (d == e && (b & 1) == 0)) best = b;
    }
    if (x >= 448.0f) best = 0x7e;
    ASSERT_EQ(F32ToE4M3Bits(x), best) << x;
    ASSERT_EQ(F32ToE4M3Bits(-x), best | 0x80) << -x;
  }
  EXPECT_EQ(F32ToE4M3Bits(464.0f), 0x7e);
  EXPECT_EQ(F32ToE4M3Bits(1e30f), 0x7e);
  EXPECT_EQ(F32ToE4M3Bits(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(F32ToE4M3Bits(0x1.0p-10f), 0x00);        // half the least subnormal: ties to even 0
  EXPECT_EQ(F32ToE4M3Bits(0x1.8p-9f), 0x02);         // 1.5 of it: ties to even 2
  EXPECT_EQ(F32ToE4M3Bits(1.0f + 0x1.0p-4f), 0x38);  // halfway 1 and 1.125: even 1
}

TEST(DType, LoadStoreEveryFloatType) {
  for (DType t : {DType::kF64, DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3}) {
    std::vector<std::byte> buf(3 * DTypeSize(t));
    StoreElement<double>(t, buf.data(), 2, -1.5);
    EXPECT_EQ(LoadElement<double>(t, buf.data(), 2), -1.5) << DTypeName(t);
    EXPECT_EQ(LoadElement<float>(t, buf.data(), 2), -1.5f) << DTypeName(t);
  }
}

}  // namespace
}  // namespace folio
