#include "folio/ops/block_scales.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace folio::ops {
namespace {

// Where each type keeps its f16 scales, restated from ggml's block structs.
struct Case {
  WeightType type;
  std::vector<uint32_t> scale_offsets;
};
const Case kCases[] = {
    {WeightType::kQ8_0, {0}},    {WeightType::kQ4_0, {0}},    {WeightType::kQ4_1, {0, 2}},
    {WeightType::kQ5_0, {0}},    {WeightType::kQ5_1, {0, 2}}, {WeightType::kQ4_K, {0, 2}},
    {WeightType::kQ5_K, {0, 2}}, {WeightType::kQ6_K, {208}},  {WeightType::kQ2_K, {80, 82}},
    {WeightType::kQ3_K, {108}},  {WeightType::kIQ4_NL, {0}},  {WeightType::kIQ4_XS, {0}},
};

// Blocks whose every other byte is 0x7c (inf/NaN high bytes if read as an
// f16 scale) except the scale fields, which hold 1.0: only the scale
// fields are read, so these pass; then one scale at a time goes bad.
TEST(CheckBlockScales, FindsEachNonFiniteScaleAndNothingElse) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(std::string(WeightTypeName(c.type)));
    const uint32_t bb = TraitsOf(c.type).block_bytes;
    const uint64_t blocks = 5;
    std::vector<std::byte> bytes(blocks * bb, std::byte{0x7c});
    const uint16_t one = 0x3c00;
    for (uint64_t b = 0; b < blocks; ++b) {
      for (uint32_t at : c.scale_offsets) std::memcpy(&bytes[b * bb + at], &one, 2);
    }
    EXPECT_TRUE(CheckBlockScales(c.type, bytes).ok());
    for (uint32_t at : c.scale_offsets) {
      for (uint16_t bad : {uint16_t{0x7c00}, uint16_t{0xfc00}, uint16_t{0x7e01}}) {
        std::vector<std::byte> copy = bytes;
        std::memcpy(&copy[3 * bb + at], &bad, 2);
        const Status s = CheckBlockScales(c.type, copy);
        ASSERT_FALSE(s.ok());
        EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
        EXPECT_NE(s.message().find("block 3 of 5"), std::string::npos) << s.message();
        EXPECT_NE(s.message().find((bad & 0x3ff) != 0 ? "NaN" : "infinity"), std::string::npos)
            << s.message();
      }
    }
    EXPECT_FALSE(CheckBlockScales(c.type, std::span(bytes).first(bytes.size() - 1)).ok());
  }
}

// MXFP4's one scale is the E8M0 byte e at offset 0: every byte but 0xff
// (OCP MX's NaN) passes, including in the qs bytes around it.
TEST(CheckBlockScales, Mxfp4RefusesOnlyTheE8M0Nan) {
  const std::span<const BlockScaleField> fields = BlockScaleFields(WeightType::kMXFP4);
  ASSERT_EQ(fields.size(), 1u);
  EXPECT_EQ(fields[0].offset, 0u);
  EXPECT_EQ(fields[0].encoding, ScaleEncoding::kE8M0);
  const uint64_t blocks = 5;
  std::vector<std::byte> bytes(blocks * 17, std::byte{0xff});
  for (uint32_t e = 0; e < 255; ++e) {
    for (uint64_t b = 0; b < blocks; ++b) bytes[b * 17] = static_cast<std::byte>(e);
    ASSERT_TRUE(CheckBlockScales(WeightType::kMXFP4, bytes).ok()) << e;
  }
  bytes[3 * 17] = std::byte{0xff};
  const Status s = CheckBlockScales(WeightType::kMXFP4, bytes);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("mxfp4 block 3 of 5"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("non-finite scale e (E8M0 0xff"), std::string::npos) << s.message();
  EXPECT_FALSE(CheckBlockScales(WeightType::kMXFP4, std::span(bytes).first(bytes.size() - 1)).ok());
}

TEST(CheckBlockScales, ElementTypesHaveNoScales) {
  const std::vector<std::byte> nan_f16(8, std::byte{0xff});
  for (WeightType t : {WeightType::kF32, WeightType::kF16, WeightType::kBF16, WeightType::kF64}) {
    EXPECT_TRUE(CheckBlockScales(t, nan_f16).ok());
  }
}

}  // namespace
}  // namespace folio::ops
