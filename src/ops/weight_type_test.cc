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
    {WeightType::kF64, "f64", 1, 8, false},
    {WeightType::kF32, "f32", 1, 4, true},
    {WeightType::kF16, "f16", 1, 2, true},
    {WeightType::kBF16, "bf16", 1, 2, true},
    {WeightType::kQ8_0, "q8_0", 32, 34, true},
    // ggml's block_q4_0 (d, qs[16]), block_q4_1 (d, m, qs[16]), block_q5_0
    // (d, qh[4], qs[16]), block_q5_1 (d, m, qh[4], qs[16]); no kernels yet.
    {WeightType::kQ4_0, "q4_0", 32, 18, false},
    {WeightType::kQ4_1, "q4_1", 32, 20, false},
    {WeightType::kQ5_0, "q5_0", 32, 22, false},
    {WeightType::kQ5_1, "q5_1", 32, 24, false},
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
  EXPECT_EQ(WeightTypeName(static_cast<WeightType>(200)), "unknown");
}

TEST(WeightTypeDeathTest, TraitsOfAValueOutsideTheEnumIsACheckFailure) {
  EXPECT_DEATH(TraitsOf(static_cast<WeightType>(200)), "unknown weight type 200");
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
  EXPECT_EQ(WeightRowBytes(WeightType::kQ4_0, 4096), 2304u);
  EXPECT_EQ(WeightRowBytes(WeightType::kQ4_1, 4096), 2560u);
  EXPECT_EQ(WeightRowBytes(WeightType::kQ5_0, 4096), 2816u);
  EXPECT_EQ(WeightRowBytes(WeightType::kQ5_1, 4096), 3072u);
  for (WeightType t :
       {WeightType::kQ4_0, WeightType::kQ4_1, WeightType::kQ5_0, WeightType::kQ5_1}) {
    EXPECT_EQ(WeightRowBytes(t, 48), 0u) << WeightTypeName(t);  // not whole blocks
  }
  EXPECT_EQ(WeightRowBytes(static_cast<WeightType>(200), 4), 0u);
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

// The legacy 4- and 5-bit blocks against a re-statement of ggml's
// dequantize_row_q4_0, _q4_1, _q5_0 and _q5_1 (ggml-quants.c), written from
// the block layout: per block, d (and m) as f32 from f16; for j < 16,
//   x0 = (qs[j] & 0x0F) | ((qh >> j) << 4 & 0x10),
//   x1 = (qs[j] >> 4) | ((qh >> (j + 12)) & 0x10),
// y[j] = (x0 - offset) * d and y[j + 16] = (x1 - offset) * d for the _0
// types (offset 8 or 16), y = x * d + m in f32 for the _1 (the product is
// exact, so only the addition rounds, fused or not).
struct LegacyCase {
  WeightType type;
  bool has_min, five_bit;
  int offset;
};
constexpr LegacyCase kLegacy[] = {{WeightType::kQ4_0, false, false, 8},
                                  {WeightType::kQ4_1, true, false, 0},
                                  {WeightType::kQ5_0, false, true, 16},
                                  {WeightType::kQ5_1, true, true, 0}};

struct Fields {
  uint16_t d, m;
  uint32_t qh;
  uint8_t qs[16];
};

std::vector<std::byte> Encode(const LegacyCase& c, const std::vector<Fields>& blocks) {
  std::vector<std::byte> out;
  auto put = [&out](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i) & 0xff));
  };
  for (const Fields& f : blocks) {
    put(f.d, 2);
    if (c.has_min) put(f.m, 2);
    if (c.five_bit) put(f.qh, 4);
    for (uint8_t q : f.qs) put(q, 1);
  }
  EXPECT_EQ(out.size(), blocks.size() * TraitsOf(c.type).block_bytes);
  return out;
}

float GgmlElement(const LegacyCase& c, const Fields& f, int j) {
  const float d = F16BitsToF32(f.d);
  const float m = F16BitsToF32(f.m);
  const uint32_t qh = c.five_bit ? f.qh : 0;
  const int jj = j % 16;
  const int x = j < 16 ? ((f.qs[jj] & 0x0F) | (((qh >> jj) << 4) & 0x10))
                       : ((f.qs[jj] >> 4) | ((qh >> (jj + 12)) & 0x10));
  if (!c.has_min) return static_cast<float>(x - c.offset) * d;
  const volatile float product = static_cast<float>(x) * d;  // never fused
  return product + m;
}

bool SameFloat(float want, float got) {
  return std::isnan(want) ? std::isnan(got)
                          : std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want);
}

// Checks DequantizeRow (float and double out) on `blocks` against
// GgmlElement; returns the number of mismatching elements.
size_t Mismatches(const LegacyCase& c, const std::vector<Fields>& blocks) {
  const std::vector<std::byte> bytes = Encode(c, blocks);
  std::vector<float> out(blocks.size() * 32);
  std::vector<double> out64(blocks.size() * 32);
  DequantizeRow(c.type, bytes.data(), out);
  DequantizeRow(c.type, bytes.data(), out64);
  size_t mismatches = 0;
  for (size_t b = 0; b < blocks.size(); ++b) {
    for (int j = 0; j < 32; ++j) {
      const float want = GgmlElement(c, blocks[b], j);
      const size_t i = b * 32 + static_cast<size_t>(j);
      const bool same64 = std::isnan(want) ? std::isnan(out64[i])
                                           : std::bit_cast<uint64_t>(out64[i]) ==
                                                 std::bit_cast<uint64_t>(double{want});
      if (!SameFloat(want, out[i]) || !same64) {
        if (++mismatches <= 5) {
          ADD_FAILURE() << WeightTypeName(c.type) << " block " << b << " (d 0x" << std::hex
                        << blocks[b].d << " m 0x" << blocks[b].m << std::dec << ") element " << j
                        << ": want " << want << " got " << out[i] << " / " << out64[i];
        }
      }
    }
  }
  return mismatches;
}

// Every quant value in every element position (qs and qh patterns that
// walk each nibble and high bit through 0..15 / 0..31), under scales that
// include zero, negative, the smallest and largest subnormal, the smallest
// normal, the largest finite f16, and (decoded as ggml does, not refused)
// infinities and NaN; the _1 types pair each d with several m.
TEST(DequantizeRow, LegacyBlocksEqualGgmlsFormulaForEveryQuantAndScale) {
  const uint16_t kScales[] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x3555, 0x0001, 0x8001, 0x03ff,
                              0x0400, 0x7bff, 0xfbff, 0x2e66, 0x7c00, 0xfc00, 0x7e00};
  const uint16_t kMins[] = {0x0000, 0x8000, 0xc233, 0x3c01, 0x0001, 0x7bff, 0xfbff, 0x1400, 0x7c00};
  for (const LegacyCase& c : kLegacy) {
    std::vector<Fields> blocks;
    for (uint16_t d : kScales) {
      for (uint16_t m : kMins) {
        if (!c.has_min && m != 0) continue;
        // 16 blocks: block k puts nibble (k + j) % 16 at low position j and
        // (k + 2j + 1) % 16 at high position j, so each position sees every
        // nibble; the qh patterns give each element its high bit 0 and 1.
        for (int k = 0; k < 16; ++k) {
          for (uint32_t qh : {0u, 0xffff'ffffu, 0x5555'5555u ^ (k % 2 ? ~0u : 0u)}) {
            Fields f{d, m, qh, {}};
            for (int j = 0; j < 16; ++j) {
              f.qs[j] = static_cast<uint8_t>((k + j) % 16 | ((k + 2 * j + 1) % 16) << 4);
            }
            blocks.push_back(f);
          }
        }
      }
    }
    EXPECT_EQ(Mismatches(c, blocks), 0u) << WeightTypeName(c.type);
  }
}

// Random blocks: random bytes for qs and qh, every f16 bit pattern as d
// (and a random one as m), so rounding of q * d + m is exercised widely.
TEST(DequantizeRow, LegacyBlocksEqualGgmlsFormulaOnRandomBlocks) {
  SplitMix64 rng(24);
  for (const LegacyCase& c : kLegacy) {
    std::vector<Fields> blocks(65536);
    for (size_t b = 0; b < blocks.size(); ++b) {
      Fields& f = blocks[b];
      f.d = static_cast<uint16_t>(b);
      f.m = c.has_min ? static_cast<uint16_t>(rng.NextU64()) : 0;
      f.qh = static_cast<uint32_t>(rng.NextU64());
      for (uint8_t& q : f.qs) q = static_cast<uint8_t>(rng.NextU64());
    }
    EXPECT_EQ(Mismatches(c, blocks), 0u) << WeightTypeName(c.type);
  }
}

// Exact values a reader can check by hand: d = 0.25, m = -1.
TEST(DequantizeRow, LegacyBlocksByHand) {
  Fields f{F32ToF16Bits(0.25f), F32ToF16Bits(-1.0f), 0x8000'0001u, {}};
  f.qs[0] = 0x3f;   // element 0: low nibble 15, element 16: high nibble 3
  f.qs[15] = 0xa0;  // element 15: 0; element 31: 10
  auto decode = [&f](const LegacyCase& c) {
    const std::vector<std::byte> bytes = Encode(c, {f});
    std::vector<float> out(32);
    DequantizeRow(c.type, bytes.data(), out);
    return std::vector<float>{out[0], out[15], out[16], out[31], out[1]};
  };
  // q4_0: (15-8)/4, (0-8)/4, (3-8)/4, (10-8)/4, (0-8)/4.
  EXPECT_EQ(decode(kLegacy[0]), (std::vector<float>{1.75f, -2.0f, -1.25f, 0.5f, -2.0f}));
  // q4_1: q/4 - 1.
  EXPECT_EQ(decode(kLegacy[1]), (std::vector<float>{2.75f, -1.0f, -0.25f, 1.5f, -1.0f}));
  // q5_0: qh bits 0 and 31 set: element 0 is 31, element 31 is 26.
  EXPECT_EQ(decode(kLegacy[2]), (std::vector<float>{3.75f, -4.0f, -3.25f, 2.5f, -4.0f}));
  // q5_1: q/4 - 1 with the same high bits.
  EXPECT_EQ(decode(kLegacy[3]), (std::vector<float>{6.75f, -1.0f, -0.25f, 5.5f, -1.0f}));
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
