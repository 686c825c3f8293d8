#include "folio/format/quantization.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "test_bytes.h"

namespace folio::format {
namespace {

using namespace testing;  // NOLINT

void ExpectRefused(const Bytes& b, std::string_view needle) {
  auto r = DecodeQuantization(b);
  ASSERT_FALSE(r.ok()) << "accepted; wanted an error containing " << needle;
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find(needle), std::string::npos) << r.error().message();
}

// The spec's worked example: symmetric per-block, axis 0, block 128, scales
// in buffer 1, f16 scales.
const Bytes kSpecPerBlock = FromHex("03 01 0100 | 00000000 80000000 01000000 ffffffff 01 000000");

TEST(Quantization, DecodesTheSpecPerBlockExample) {
  auto q = DecodeQuantization(kSpecPerBlock);
  ASSERT_TRUE(q.ok()) << q.error().ToString();
  const auto& b = std::get<PerBlockAffine>(*q);
  EXPECT_EQ(b.axis(), 0u);
  EXPECT_EQ(b.block_size(), 128u);
  EXPECT_EQ(b.scale_buffer_index(), 1u);
  EXPECT_FALSE(b.zero_point_buffer_index().has_value());
  EXPECT_TRUE(b.symmetric());
  EXPECT_EQ(b.scale_type(), ElementType::kF16);
}

TEST(Quantization, EncodesTheSpecPerBlockExample) {
  auto b = PerBlockAffine::Symmetric(0, 128, 1, ElementType::kF16);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(EncodeQuantization(*b), kSpecPerBlock);
}

TEST(Quantization, PerTensorGoldenBytes) {
  auto q = PerTensorAffine::Create(0.5f, -3);
  ASSERT_TRUE(q.ok());
  const Bytes want = Join({FromHex("01 01 0000"), U32(0x3F000000u), U32(0xFFFFFFFDu), Zeros(4)});
  EXPECT_EQ(EncodeQuantization(*q), want);
  auto back = DecodeQuantization(want);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::get<PerTensorAffine>(*back), *q);
  EXPECT_EQ(std::get<PerTensorAffine>(*back).zero_point(), -3);
  EXPECT_FALSE(std::get<PerTensorAffine>(*back).symmetric());
}

TEST(Quantization, PerTensorSymmetricIsZeroPointZeroWithFlagsZero) {
  // The spec: per-tensor flags MUST be 0; symmetric is z = 0, not a flag.
  auto q = PerTensorAffine::Symmetric(2.0f);
  ASSERT_TRUE(q.ok());
  const Bytes want = Join({FromHex("01 01 0000"), U32(0x40000000u), U32(0), Zeros(4)});
  EXPECT_EQ(EncodeQuantization(*q), want);
  EXPECT_EQ(*q, *PerTensorAffine::Create(2.0f, 0));
  auto back = DecodeQuantization(want);
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_EQ(std::get<PerTensorAffine>(*back), *q);
  EXPECT_TRUE(std::get<PerTensorAffine>(*back).symmetric());
}

TEST(Quantization, PerChannelAsymmetricGoldenBytes) {
  auto q = PerChannelAffine::Asymmetric(2, 1, 2);
  ASSERT_TRUE(q.ok());
  const Bytes want = Join({FromHex("02 01 0000"), U32(2), U32(1), U32(2), U8(0x03), Zeros(3)});
  EXPECT_EQ(EncodeQuantization(*q), want);
  auto back = DecodeQuantization(want);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::get<PerChannelAffine>(*back), *q);
  EXPECT_EQ(std::get<PerChannelAffine>(*back).zero_point_buffer_index(), 2u);
}

TEST(Quantization, PerBlockAsymmetricRoundTrips) {
  auto q = PerBlockAffine::Asymmetric(1, 32, 3, 4, ElementType::kBF16);
  ASSERT_TRUE(q.ok());
  const Bytes b = EncodeQuantization(*q);
  EXPECT_EQ(b.size(), 24u);
  auto back = DecodeQuantization(b);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::get<PerBlockAffine>(*back), *q);
}

TEST(Quantization, ReferencedBuffersAndNames) {
  EXPECT_TRUE(ReferencedBuffers(*PerTensorAffine::Create(1.f, 0)).empty());
  EXPECT_EQ(ReferencedBuffers(*PerChannelAffine::Symmetric(1, 3)), std::vector<uint32_t>({3}));
  EXPECT_EQ(ReferencedBuffers(*PerBlockAffine::Asymmetric(0, 4, 3, 4, ElementType::kF32)),
            std::vector<uint32_t>({3, 4}));
  EXPECT_EQ(SchemeName(*PerChannelAffine::Symmetric(1, 3)), "per_channel_affine");
}

TEST(Quantization, RefusesZeroAndNonFiniteScales) {
  EXPECT_FALSE(PerTensorAffine::Create(0.0f, 0).ok());
  EXPECT_FALSE(PerTensorAffine::Create(-0.0f, 0).ok());
  EXPECT_FALSE(PerTensorAffine::Create(std::numeric_limits<float>::infinity(), 0).ok());
  EXPECT_FALSE(PerTensorAffine::Symmetric(std::nanf("")).ok());
  ExpectRefused(Join({FromHex("01 01 0000"), U32(0x7FC00000u), U32(0), Zeros(4)}),
                "scale must be finite and non-zero");
  ExpectRefused(Join({FromHex("01 01 0000"), U32(0), U32(0), Zeros(4)}),
                "scale must be finite and non-zero (got 0");
}

TEST(Quantization, RefusesUnknownSchemeTag) {
  ExpectRefused(Join({FromHex("04 01 0000"), Zeros(12)}), "unknown quantization scheme_tag 0x04");
}

TEST(Quantization, RefusesOtherSchemeVersions) {
  ExpectRefused(Join({FromHex("01 02 0000"), U32(0x3F800000u), U32(0), Zeros(4)}),
                "scheme_version 2");
}

TEST(Quantization, RefusesUnknownFlagBits) {
  ExpectRefused(FromHex("02 01 0300 | 01000000 01000000 ffffffff 03 000000"),
                "per_channel_affine flags 0x0003 has unknown bits set");
}

TEST(Quantization, RefusesAnyPerTensorFlag) {
  ExpectRefused(Join({FromHex("01 01 0100"), U32(0x3F800000u), U32(0), Zeros(4)}),
                "per_tensor_affine flags 0x0001 must be 0");
  ExpectRefused(Join({FromHex("01 01 0100"), U32(0x3F800000u), U32(5), Zeros(4)}),
                "per_tensor_affine flags 0x0001 must be 0");
  ExpectRefused(Join({FromHex("01 01 0080"), U32(0x3F800000u), U32(0), Zeros(4)}),
                "per_tensor_affine flags 0x8000 must be 0");
}

TEST(Quantization, RefusesALengthOtherThanTheSchemes) {
  Bytes b = EncodeQuantization(*PerTensorAffine::Create(1.f, 0));
  b.push_back(std::byte{0});
  ExpectRefused(b, "quantization_length is 17 bytes; the scheme is exactly 16");
  ExpectRefused(FromHex("02 01 0000 00000000"),
                "quantization_length is 8 bytes; the scheme is exactly 20");
  ExpectRefused(FromHex("03 01"), "truncated descriptor: quantization flags");
}

TEST(Quantization, RefusesNonZeroReservedBytes) {
  ExpectRefused(Join({FromHex("01 01 0000"), U32(0x3F800000u), U32(0), FromHex("00 00 01 00")}),
                "per_tensor_affine reserved byte 2");
  Bytes b = kSpecPerBlock;
  b.back() = std::byte{0x10};
  ExpectRefused(b, "quantization reserved byte 2");
}

TEST(Quantization, RefusesAZeroPointBufferThatDisagreesWithTheFlag) {
  // Symmetric flag with a zero-point buffer.
  ExpectRefused(FromHex("03 01 0100 | 00000000 80000000 01000000 02000000 01 000000"),
                "must be 0xffffffff when symmetric");
  // Asymmetric without one.
  ExpectRefused(FromHex("03 01 0000 | 00000000 80000000 01000000 ffffffff 01 000000"),
                "must name a buffer when asymmetric");
}

TEST(Quantization, RefusesBadBlockSizes) {
  EXPECT_FALSE(PerBlockAffine::Symmetric(0, 1, 1, ElementType::kF16).ok());
  EXPECT_FALSE(PerBlockAffine::Symmetric(0, 0, 1, ElementType::kF16).ok());
  ExpectRefused(FromHex("03 01 0100 | 00000000 60000000 01000000 ffffffff 01 000000"),
                "block_size must be a power of two >= 2 (got 96)");
}

TEST(Quantization, RefusesBadScaleTypes) {
  ExpectRefused(FromHex("03 01 0100 | 00000000 80000000 01000000 ffffffff 10 000000"),
                "scale_type must be f16, bf16 or f32 (got i8)");
  ExpectRefused(FromHex("03 01 0100 | 00000000 80000000 01000000 ffffffff 77 000000"),
                "scale_type: unknown element type tag 0x77");
  ExpectRefused(FromHex("02 01 0100 | 01000000 01000000 ffffffff 01 000000"),
                "per_channel_affine scale_type must be f32 (got f16)");
}

TEST(Quantization, RefusesBadBufferIndices) {
  EXPECT_FALSE(PerChannelAffine::Symmetric(1, 0xFFFFFFFFu).ok());
  EXPECT_FALSE(PerChannelAffine::Asymmetric(1, 3, 3).ok());
  EXPECT_FALSE(PerChannelAffine::Asymmetric(1, 3, 0xFFFFFFFFu).ok());
  ExpectRefused(FromHex("02 01 0000 | 01000000 03000000 03000000 03 000000"),
                "zero_point_buffer 3 is also the scale_buffer");
}

}  // namespace
}  // namespace folio::format
