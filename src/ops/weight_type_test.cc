#include "folio/ops/weight_type.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "folio/core/dtype.h"
#include "folio/core/splitmix64.h"
#include "folio/ops/matmul.h"

namespace folio::ops {
namespace {

// The table's rows, written out independently of it (ggml's type_traits
// for the quantized types: block_q8_0 is an f16 scale and 32 int8).
struct Row {
  WeightType type;
  const char* name;
  uint32_t block_size;
  uint32_t block_bytes;
  bool has_matmul;
};
constexpr Row kRows[] = {
    {WeightType::kF64, "f64", 1, 8, false},    {WeightType::kF32, "f32", 1, 4, true},
    {WeightType::kF16, "f16", 1, 2, true},     {WeightType::kBF16, "bf16", 1, 2, true},
    {WeightType::kQ8_0, "q8_0", 32, 34, true},
};

TEST(WeightType, TableHasOneRowPerTypeInEnumOrder) {
  ASSERT_EQ(kNumWeightTypes, std::size(kRows));
  for (size_t i = 0; i < kNumWeightTypes; ++i) {
    const Row& want = kRows[i];
    SCOPED_TRACE(want.name);
    const WeightTypeTraits& got = TraitsOf(want.type);
    EXPECT_EQ(&got, &kWeightTypeTraits[i]);
    EXPECT_EQ(static_cast<size_t>(want.type), i);
    EXPECT_EQ(got.type, want.type);
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(WeightTypeName(want.type), want.name);
    EXPECT_EQ(got.block_size, want.block_size);
    EXPECT_EQ(got.block_bytes, want.block_bytes);
    EXPECT_EQ(got.has_matmul, want.has_matmul);
    EXPECT_TRUE(IsWeightType(want.type));
  }
  EXPECT_FALSE(IsWeightType(static_cast<WeightType>(kNumWeightTypes)));
  EXPECT_FALSE(IsWeightType(static_cast<WeightType>(255)));
  EXPECT_EQ(WeightTypeName(static_cast<WeightType>(9)), "unknown");
}

TEST(WeightTypeDeathTest, TraitsOfAValueOutsideTheEnumIsACheckFailure) {
  EXPECT_DEATH(TraitsOf(static_cast<WeightType>(9)), "unknown weight type 9");
}

TEST(WeightType, RowBytesAreWholeBlocks) {
  EXPECT_EQ(WeightRowBytes(WeightType::kF64, 10), 80u);
  EXPECT_EQ(WeightRowBytes(WeightType::kF32, 10), 40u);
  EXPECT_EQ(WeightRowBytes(WeightType::kF16, 10), 20u);
  EXPECT_EQ(WeightRowBytes(WeightType::kBF16, 10), 20u);
  EXPECT_EQ(WeightRowBytes(WeightType::kQ8_0, 4096), 4352u);
  EXPECT_EQ(WeightRowBytes(WeightType::kQ8_0, 0), 0u);
  EXPECT_EQ(WeightRowBytes(WeightType::kQ8_0, 33), 0u);             // not whole blocks
  EXPECT_EQ(WeightRowBytes(WeightType::kF32, UINT64_MAX / 2), 0u);  // overflow
  EXPECT_EQ(WeightRowBytes(static_cast<WeightType>(9), 4), 0u);
}

// Q8_0 blocks with every f16 scale (subnormals, infinities and NaNs
// included) and every int8 quant: the decoder equals ggml's
// dequantize_row_q8_0 (y = q * d in f32) bit for bit, written here from
// the block layout rather than through DequantizeRow's helpers.
TEST(DequantizeRow, Q8_0EqualsTheReferenceForEveryScaleAndQuant) {
  constexpr size_t kBlocks = 65536 * 8;  // each scale with 256 quants
  std::vector<std::byte> blocks(kBlocks * 34);
  for (size_t b = 0; b < kBlocks; ++b) {
    std::byte* block = blocks.data() + b * 34;
    const uint16_t d = static_cast<uint16_t>(b / 8);
    block[0] = static_cast<std::byte>(d & 0xff);  // little-endian
    block[1] = static_cast<std::byte>(d >> 8);
    for (size_t j = 0; j < 32; ++j) block[2 + j] = static_cast<std::byte>((b % 8) * 32 + j);
  }
  std::vector<float> out(kBlocks * 32);
  DequantizeRow(WeightType::kQ8_0, blocks.data(), out);
  std::vector<double> out64(kBlocks * 32);
  DequantizeRow(WeightType::kQ8_0, blocks.data(), out64);
  size_t mismatches = 0;
  for (size_t b = 0; b < kBlocks; ++b) {
    const float d = F16BitsToF32(static_cast<uint16_t>(b / 8));
    for (size_t j = 0; j < 32; ++j) {
      const auto q = static_cast<int8_t>((b % 8) * 32 + j);
      const float want = static_cast<float>(q) * d;
      const float got = out[b * 32 + j];
      const bool same = std::isnan(want)
                            ? std::isnan(got)
                            : std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want);
      // The product is exact, so double output is the same value.
      const double got64 = out64[b * 32 + j];
      const bool same64 = std::isnan(want) ? std::isnan(got64)
                                           : std::bit_cast<uint64_t>(got64) ==
                                                 std::bit_cast<uint64_t>(static_cast<double>(want));
      if (!same || !same64) {
        if (++mismatches <= 5) {
          ADD_FAILURE() << "block " << b << " q " << int{q} << ": want " << want << " got " << got
                        << " / " << got64;
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(DequantizeRow, ElementTypesWidenExactlyAndF64RoundsIntoFloat) {
  const double f64[] = {1.0, -0.0, 0.1, 1e300};
  std::vector<float> out(4);
  std::vector<double> out64(4);
  const auto* p = reinterpret_cast<const std::byte*>(f64);
  DequantizeRow(WeightType::kF64, p, out);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -0.0f, 0.1f, INFINITY}));
  EXPECT_TRUE(std::signbit(out[1]));
  DequantizeRow(WeightType::kF64, p, out64);
  EXPECT_EQ(std::memcmp(out64.data(), f64, sizeof(f64)), 0);

  const uint16_t bf16[] = {0x3f80, 0x8000, 0x0001, 0xff7f};
  DequantizeRow(WeightType::kBF16, reinterpret_cast<const std::byte*>(bf16), out64);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out64[i], BF16BitsToF32(bf16[i]));
  const uint16_t f16[] = {0x3c00, 0x0001, 0x7bff, 0xfc00};
  DequantizeRow(WeightType::kF16, reinterpret_cast<const std::byte*>(f16), out64);
  EXPECT_EQ(out64, (std::vector<double>{1.0, 0x1p-24, 65504.0, -INFINITY}));
}

TEST(DequantizeRowDeathTest, APartialBlockIsACheckFailure) {
  std::vector<std::byte> block(34);
  std::vector<float> out(31);
  EXPECT_DEATH(DequantizeRow(WeightType::kQ8_0, block.data(), out), "not a multiple of 32");
}

// A type without a kernel is still a valid view: WidenRow reads it, MatMul
// refuses it by name.
TEST(WeightType, F64HasNoMatMulKernelButWidens) {
  const double w[] = {0.5, -2.0, 0.1, 3.0};
  const WeightView view{reinterpret_cast<const std::byte*>(w), WeightType::kF64, 2, 2};
  EXPECT_TRUE(ValidateWeightView(view).ok());
  std::vector<float> row(2);
  WidenRow(view, 1, row);
  EXPECT_EQ(row, (std::vector<float>{0.1f, 3.0f}));
  std::vector<float> x = {1.0f, 1.0f}, y(2);
  const Status s = MatMul(view, x, 1, y);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "f64 weights have no matmul kernel");
}

}  // namespace
}  // namespace folio::ops
