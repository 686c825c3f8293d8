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
    // (d, qh[4], qs[16]), block_q5_1 (d, m, qh[4], qs[16]).
    {WeightType::kQ4_0, "q4_0", 32, 18, true},
    {WeightType::kQ4_1, "q4_1", 32, 20, true},
    {WeightType::kQ5_0, "q5_0", 32, 22, true},
    {WeightType::kQ5_1, "q5_1", 32, 24, true},
    // ggml's block_q4_K (d, dmin, scales[12], qs[128]), block_q5_K (d, dmin,
    // scales[12], qh[32], qs[128]), block_q6_K (ql[128], qh[64], scales[16],
    // d): super-blocks of QK_K = 256.
    {WeightType::kQ4_K, "q4_k", 256, 144, true},
    {WeightType::kQ5_K, "q5_k", 256, 176, true},
    {WeightType::kQ6_K, "q6_k", 256, 210, true},
    // block_q2_K (scales[16], qs[64], d, dmin), block_q3_K (hmask[32],
    // qs[64], scales[12], d), block_iq4_nl (d, qs[16]), block_iq4_xs (d,
    // scales_h, scales_l[4], qs[128]).
    {WeightType::kQ2_K, "q2_k", 256, 84, true},
    {WeightType::kQ3_K, "q3_k", 256, 110, true},
    {WeightType::kIQ4_NL, "iq4_nl", 32, 18, true},
    {WeightType::kIQ4_XS, "iq4_xs", 256, 136, true},
    // block_mxfp4 (u8 e, qs[16]).
    {WeightType::kMXFP4, "mxfp4", 32, 17, true},
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
  EXPECT_EQ(WeightRowBytes(WeightType::kQ4_K, 4096), 2304u);
  EXPECT_EQ(WeightRowBytes(WeightType::kQ5_K, 4096), 2816u);
  EXPECT_EQ(WeightRowBytes(WeightType::kQ6_K, 4096), 3360u);
  EXPECT_EQ(WeightRowBytes(WeightType::kQ2_K, 4096), 1344u);
  EXPECT_EQ(WeightRowBytes(WeightType::kQ3_K, 4096), 1760u);
  EXPECT_EQ(WeightRowBytes(WeightType::kIQ4_NL, 4096), 2304u);
  EXPECT_EQ(WeightRowBytes(WeightType::kIQ4_NL, 48), 0u);
  EXPECT_EQ(WeightRowBytes(WeightType::kIQ4_XS, 4096), 2176u);
  EXPECT_EQ(WeightRowBytes(WeightType::kMXFP4, 4096), 2176u);  // 17 bytes per 32
  EXPECT_EQ(WeightRowBytes(WeightType::kMXFP4, 48), 0u);
  for (WeightType t : {WeightType::kQ4_K, WeightType::kQ5_K, WeightType::kQ6_K, WeightType::kQ2_K,
                       WeightType::kQ3_K, WeightType::kIQ4_XS}) {
    EXPECT_EQ(WeightRowBytes(t, 128), 0u) << WeightTypeName(t);  // not whole super-blocks
    EXPECT_EQ(WeightRowBytes(t, 288), 0u) << WeightTypeName(t);
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

// --- The K-quants, against a plain re-statement of ggml's
// dequantize_row_q4_K, _q5_K and _q6_K (ggml-quants.c), written in its own
// loop order from the block structs in ggml-common.h. ---

float F16Le(const uint8_t* p) { return F16BitsToF32(static_cast<uint16_t>(p[0] | p[1] << 8)); }

// ggml's get_scale_min_k4.
void GetScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

// One block_q4_K (five = false) or block_q5_K; the product d1 * q is exact,
// kept unfused here so the subtraction is the only rounding.
void GgmlQ4Q5K(const uint8_t* x, bool five, float* y) {
  const float d = F16Le(x), min = F16Le(x + 2);
  const uint8_t* scales = x + 4;
  const uint8_t* qh = x + 16;
  const uint8_t* ql = x + (five ? 48 : 16);
  int is = 0;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < 256; j += 64) {
    uint8_t sc, m;
    GetScaleMinK4(is + 0, scales, &sc, &m);
    const float d1 = d * sc, m1 = min * m;
    GetScaleMinK4(is + 1, scales, &sc, &m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) {
      const int q = (ql[l] & 0xF) + (five && (qh[l] & u1) ? 16 : 0);
      const volatile float p = d1 * static_cast<float>(q);
      *y++ = p - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int q = (ql[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0);
      const volatile float p = d2 * static_cast<float>(q);
      *y++ = p - m2;
    }
    ql += 32;
    is += 2;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

// One block_q6_K.
void GgmlQ6K(const uint8_t* x, float* y) {
  const uint8_t* ql = x;
  const uint8_t* qh = x + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(x + 192);
  const float d = F16Le(x + 208);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int8_t q1 = static_cast<int8_t>((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int8_t q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int8_t q3 = static_cast<int8_t>((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int8_t q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l + 0] = d * sc[is + 0] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

// One block_q2_K; the product dl * q is exact, kept unfused.
void GgmlQ2K(const uint8_t* x, float* y) {
  const uint8_t* q = x + 16;
  const float d = F16Le(x + 80), min = F16Le(x + 82);
  int is = 0;
  for (int n = 0; n < 256; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      uint8_t sc = x[is++];
      float dl = d * (sc & 0xF), ml = min * (sc >> 4);
      for (int l = 0; l < 16; ++l) {
        const volatile float p = dl * static_cast<float>(static_cast<int8_t>((q[l] >> shift) & 3));
        *y++ = p - ml;
      }
      sc = x[is++];
      dl = d * (sc & 0xF), ml = min * (sc >> 4);
      for (int l = 0; l < 16; ++l) {
        const volatile float p =
            dl * static_cast<float>(static_cast<int8_t>((q[l + 16] >> shift) & 3));
        *y++ = p - ml;
      }
      shift += 2;
    }
    q += 32;
  }
}

// One block_q3_K, with ggml's kmask shuffle of the 12 scale bytes.
void GgmlQ3K(const uint8_t* x, float* y) {
  constexpr uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  const uint8_t* hm = x;
  const uint8_t* q = x + 32;
  const float d_all = F16Le(x + 108);
  uint32_t aux[4];
  std::memcpy(aux, x + 96, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  const auto* scales = reinterpret_cast<const int8_t*>(aux);
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < 256; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      float dl = d_all * (scales[is++] - 32);
      for (int l = 0; l < 16; ++l) {
        *y++ = dl * static_cast<float>(static_cast<int8_t>((q[l + 0] >> shift) & 3) -
                                       ((hm[l + 0] & m) ? 0 : 4));
      }
      dl = d_all * (scales[is++] - 32);
      for (int l = 0; l < 16; ++l) {
        *y++ = dl * static_cast<float>(static_cast<int8_t>((q[l + 16] >> shift) & 3) -
                                       ((hm[l + 16] & m) ? 0 : 4));
      }
      shift += 2;
      m = static_cast<uint8_t>(m << 1);
    }
    q += 32;
  }
}

// ggml's kvalues_iq4nl.
constexpr int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};

// One block_iq4_nl (32 elements).
void GgmlIq4Nl(const uint8_t* x, float* y) {
  const float d = F16Le(x);
  const uint8_t* qs = x + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * kvalues_iq4nl[qs[j] & 0xf];
    y[j + 16] = d * kvalues_iq4nl[qs[j] >> 4];
  }
}

// One block_iq4_xs.
void GgmlIq4Xs(const uint8_t* x, float* y) {
  const float d = F16Le(x);
  const auto scales_h = static_cast<uint16_t>(x[2] | x[3] << 8);
  const uint8_t* scales_l = x + 4;
  const uint8_t* qs = x + 8;
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((scales_h >> 2 * ib) & 3) << 4);
    const float dl = d * (ls - 32);
    for (int j = 0; j < 16; ++j) {
      y[j + 0] = dl * kvalues_iq4nl[qs[j] & 0xf];
      y[j + 16] = dl * kvalues_iq4nl[qs[j] >> 4];
    }
    y += 32;
    qs += 16;
  }
}

// Where each K-quant (and IQ4 type) keeps its f16 super-block scales.
struct KCase {
  WeightType type;
  std::vector<size_t> f16_at;  // byte offsets of d (and dmin)
};
const KCase kKQuants[] = {{WeightType::kQ4_K, {0, 2}}, {WeightType::kQ5_K, {0, 2}},
                          {WeightType::kQ6_K, {208}},  {WeightType::kQ2_K, {80, 82}},
                          {WeightType::kQ3_K, {108}},  {WeightType::kIQ4_NL, {0}},
                          {WeightType::kIQ4_XS, {0}}};

void GgmlK(WeightType type, const uint8_t* block, float* y) {
  switch (type) {
    case WeightType::kQ6_K:
      return GgmlQ6K(block, y);
    case WeightType::kQ2_K:
      return GgmlQ2K(block, y);
    case WeightType::kQ3_K:
      return GgmlQ3K(block, y);
    case WeightType::kIQ4_NL:
      return GgmlIq4Nl(block, y);
    case WeightType::kIQ4_XS:
      return GgmlIq4Xs(block, y);
    default:
      return GgmlQ4Q5K(block, type == WeightType::kQ5_K, y);
  }
}

// DequantizeRow (float and double out) over `bytes` (whole blocks) against
// GgmlK; returns the number of mismatching elements.
size_t KMismatches(WeightType type, const std::vector<uint8_t>& bytes) {
  const size_t block_bytes = TraitsOf(type).block_bytes;
  const size_t elems = TraitsOf(type).block_size;
  const size_t blocks = bytes.size() / block_bytes;
  const auto* src = reinterpret_cast<const std::byte*>(bytes.data());
  std::vector<float> out(blocks * elems), want(blocks * elems);
  std::vector<double> out64(blocks * elems);
  DequantizeRow(type, src, out);
  DequantizeRow(type, src, out64);
  for (size_t b = 0; b < blocks; ++b) GgmlK(type, &bytes[b * block_bytes], &want[b * elems]);
  size_t mismatches = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool same64 = std::isnan(want[i]) ? std::isnan(out64[i])
                                            : std::bit_cast<uint64_t>(out64[i]) ==
                                                  std::bit_cast<uint64_t>(double{want[i]});
    if (!SameFloat(want[i], out[i]) || !same64) {
      if (++mismatches <= 5) {
        ADD_FAILURE() << WeightTypeName(type) << " block " << i / elems << " element " << i % elems
                      << ": want " << want[i] << " got " << out[i] << " / " << out64[i];
      }
    }
  }
  return mismatches;
}

// Every byte value in every byte position: block k's byte i is (97k + 31i)
// mod 256, so over 256 blocks each quant nibble, high-bit pair, 6-bit
// scale and min (including those get_scale_min_k4 assembles from two
// bytes, whose difference is fixed while the first takes every value) and
// int8 scale appears in every position. Each pattern is decoded under f16
// super-block scales that include zero, negative, subnormal, the largest
// finite, infinities and NaN (decoded as ggml does, not refused).
TEST(DequantizeRow, KQuantsEqualGgmlsFormulaForEveryQuantAndScale) {
  const uint16_t kScales[] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x3555, 0x0001, 0x8001, 0x03ff,
                              0x0400, 0x7bff, 0xfbff, 0x2e66, 0x7c00, 0xfc00, 0x7e00};
  const uint16_t kMins[] = {0x0000, 0xc233, 0x3c01, 0x0001, 0x7bff, 0x1400, 0x7c00};
  for (const KCase& c : kKQuants) {
    const size_t block_bytes = TraitsOf(c.type).block_bytes;
    std::vector<uint8_t> bytes;
    for (uint16_t d : kScales) {
      for (uint16_t m : kMins) {
        if (c.f16_at.size() == 1 && m != kMins[0]) continue;
        for (size_t k = 0; k < 256; ++k) {
          const size_t at = bytes.size();
          for (size_t i = 0; i < block_bytes; ++i) {
            bytes.push_back(static_cast<uint8_t>((97 * k + 31 * i) & 0xff));
          }
          const uint16_t f16[] = {d, m};
          for (size_t f = 0; f < c.f16_at.size(); ++f) {
            bytes[at + c.f16_at[f]] = static_cast<uint8_t>(f16[f] & 0xff);
            bytes[at + c.f16_at[f] + 1] = static_cast<uint8_t>(f16[f] >> 8);
          }
        }
      }
    }
    EXPECT_EQ(KMismatches(c.type, bytes), 0u) << WeightTypeName(c.type);
  }
}

// Random blocks, each with a random f16 bit pattern for d (and dmin), so
// the rounding of the subtraction (Q4_K, Q5_K) and of the second product
// (Q6_K) is exercised widely.
TEST(DequantizeRow, KQuantsEqualGgmlsFormulaOnRandomBlocks) {
  SplitMix64 rng(24);
  for (const KCase& c : kKQuants) {
    // 8192 * 256 elements, whatever the block size.
    std::vector<uint8_t> bytes(8192 * 256 / TraitsOf(c.type).block_size *
                               TraitsOf(c.type).block_bytes);
    for (uint8_t& v : bytes) v = static_cast<uint8_t>(rng.NextU64());
    EXPECT_EQ(KMismatches(c.type, bytes), 0u) << WeightTypeName(c.type);
  }
}

// Values a reader can check by hand: one Q4_K block with d = 0.5, dmin =
// 0.25; sub-block 0 has scale 3 and min 2, sub-block 5 scale 0x2a = 42 (low
// nibble 0xa from byte 9, top bits 0b10 from byte 1) and min 0x11 = 17
// (nibble 1 from byte 9, top bits 0b01 from byte 5).
TEST(DequantizeRow, Q4KByHand) {
  std::vector<uint8_t> b(144, 0);
  b[0] = 0x00, b[1] = 0x38;  // d = 0.5
  b[2] = 0x00, b[3] = 0x34;  // dmin = 0.25
  b[4 + 0] = 3;              // sub-block 0 scale
  b[4 + 4] = 2;              // sub-block 0 min
  b[4 + 1] = 0x80;           // top bits of sub-block 5's scale
  b[4 + 5] = 0x40;           // top bits of sub-block 5's min
  b[4 + 9] = 0x1a;           // low 4 bits of sub-block 5's scale and min
  b[16 + 0] = 0x0f;          // element 0: q 15
  b[16 + 64 + 7] = 0x90;     // element 32 * 5 + 7: high nibble 9
  std::vector<float> out(256);
  DequantizeRow(WeightType::kQ4_K, reinterpret_cast<const std::byte*>(b.data()), out);
  EXPECT_EQ(out[0], 0.5f * 3 * 15 - 0.25f * 2);  // 22
  EXPECT_EQ(out[1], -0.5f);
  EXPECT_EQ(out[32 * 5 + 7], 0.5f * 42 * 9 - 0.25f * 17);  // 184.75
  EXPECT_EQ(out[32 * 5], -4.25f);
  EXPECT_EQ(out[32 * 4], 0.0f);  // q 0, and min 0 (byte 8's high nibble)
}

// One Q6_K block by hand: d = 2, scales[0] = -3, scales[13] = 5. Element 0
// is ql[0]'s low nibble 7 with qh[0] bits 0-1 = 2: q = 39, value 2 * -3 *
// 7 = -42. Element 128 + 96 + 17 (second half, k = 3, l = 17) reads ql[64 +
// 32 + 17] high nibble 0xc, qh[128 + 32 + 17] bits 6-7 = 1: q = 28 - 32 =
// -4, scale scales[8 + 1 + 6] = scales[15].
TEST(DequantizeRow, Q6KByHand) {
  std::vector<uint8_t> b(210, 0);
  b[0] = 0x07;
  b[128] = 0x02;
  b[192] = static_cast<uint8_t>(-3);
  b[192 + 15] = 5;
  b[64 + 32 + 17] = 0xc0;
  b[128 + 32 + 17] = 0x40;
  b[208] = 0x00, b[209] = 0x40;  // d = 2
  std::vector<float> out(256);
  DequantizeRow(WeightType::kQ6_K, reinterpret_cast<const std::byte*>(b.data()), out);
  EXPECT_EQ(out[0], 2.0f * -3 * 7);
  EXPECT_EQ(out[1], 2.0f * -3 * -32);
  EXPECT_EQ(out[128 + 96 + 17], 2.0f * 5 * -4);
  EXPECT_EQ(out[128 + 96 + 16], 2.0f * 5 * -32);
  EXPECT_EQ(out[16], 0.0f);  // scales[1] = 0
}

// One Q3_K block by hand, d = 1. Sub-block 9 (half 1, group 0, second 16)
// takes its scale's low bits from byte 1's high nibble (3) and bits 4-5
// from bits 4-5 of byte 9 (2): 35 - 32 = 3. Its element 5 (128 + 16 + 5)
// has q 2 from qs[32 + 16 + 5] and hmask[16 + 5] bit 4 set (no -4): 6; its
// element 6 has q 0 and the bit clear: -4 * 3. Sub-block 0's scale is 0 -
// 32, its element 0 is 0 - 4.
TEST(DequantizeRow, Q3KByHand) {
  std::vector<uint8_t> b(110, 0);
  b[96 + 1] = 0x30;
  b[96 + 9] = 0x20;
  b[32 + 32 + 16 + 5] = 0x02;
  b[16 + 5] = 0x10;
  b[108] = 0x00, b[109] = 0x3c;  // d = 1
  std::vector<float> out(256);
  DequantizeRow(WeightType::kQ3_K, reinterpret_cast<const std::byte*>(b.data()), out);
  EXPECT_EQ(out[128 + 16 + 5], 6.0f);
  EXPECT_EQ(out[128 + 16 + 6], -12.0f);
  EXPECT_EQ(out[0], 128.0f);
}

// One IQ4_XS block by hand, d = 1: sub-block 1's ls is scales_l[0]'s high
// nibble 5 plus bits 2-3 of scales_h (2) as bits 4-5: 37, so dl = 5; its
// element 0 is the low nibble 0 of qs[16] (kvalues -127), element 16 the
// high nibble 15 (113). Sub-block 0's ls is 0: dl = -32.
TEST(DequantizeRow, Iq4XsByHand) {
  std::vector<uint8_t> b(136, 0);
  b[0] = 0x00, b[1] = 0x3c;  // d = 1
  b[2] = 0x08;               // scales_h
  b[4] = 0x50;               // scales_l[0]
  b[8 + 16] = 0xf0;
  std::vector<float> out(256);
  DequantizeRow(WeightType::kIQ4_XS, reinterpret_cast<const std::byte*>(b.data()), out);
  EXPECT_EQ(out[32], 5.0f * -127);
  EXPECT_EQ(out[48], 5.0f * 113);
  EXPECT_EQ(out[0], -32.0f * -127);
  // IQ4_NL: the same nibbles straight through the table, times d.
  std::vector<uint8_t> nl = {0x00, 0x3c, 0x8f};
  nl.resize(18);
  std::vector<float> out_nl(32);
  DequantizeRow(WeightType::kIQ4_NL, reinterpret_cast<const std::byte*>(nl.data()), out_nl);
  EXPECT_EQ(out_nl[0], 113.0f);
  EXPECT_EQ(out_nl[16], 1.0f);
  EXPECT_EQ(out_nl[1], -127.0f);
}

// MXFP4 from the OCP MX definition rather than ggml's doubled table: the
// E2M1 code's value (sign bit 3, exponent bits 1-2, mantissa bit 0: 0,
// 0.5, 1, 1.5, 2, 3, 4, 6) times 2^(e - 127), computed exactly in double
// and rounded to f32 once (which is ggml's f32 product: both are exact
// unless they overflow, and then both are infinite). One deliberate
// difference from OCP: code 8 (-0) is +0, as ggml's integer table has it.
float OcpMxfp4(uint32_t e, uint32_t code) {
  constexpr double kE2M1[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  if ((code & 7) == 0) return 0.0f;
  const double v = kE2M1[code & 7] * std::ldexp(1.0, static_cast<int>(e) - 127);
  return static_cast<float>((code & 8) != 0 ? -v : v);
}

// Every scale byte (0xff included: DequantizeRow reads it as ggml does,
// 2^128; loaders refuse it) with every qs byte in every position: block
// (e, k) has qs[i] = (k + 37i) mod 256, so over 256 blocks per scale each
// byte value sits at each position. Element j < 16 is qs[j]'s low nibble,
// element j + 16 its high nibble.
TEST(DequantizeRow, Mxfp4EqualsTheOcpDefinitionForEveryScaleAndCode) {
  std::vector<uint8_t> bytes;
  for (uint32_t e = 0; e < 256; ++e) {
    for (uint32_t k = 0; k < 256; ++k) {
      bytes.push_back(static_cast<uint8_t>(e));
      for (uint32_t i = 0; i < 16; ++i) bytes.push_back(static_cast<uint8_t>((k + 37 * i) & 0xff));
    }
  }
  const size_t blocks = bytes.size() / 17;
  std::vector<float> out(blocks * 32);
  std::vector<double> out64(blocks * 32);
  DequantizeRow(WeightType::kMXFP4, reinterpret_cast<const std::byte*>(bytes.data()), out);
  DequantizeRow(WeightType::kMXFP4, reinterpret_cast<const std::byte*>(bytes.data()), out64);
  size_t mismatches = 0;
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* block = &bytes[b * 17];
    for (size_t j = 0; j < 32; ++j) {
      const uint32_t qs = block[1 + j % 16];
      const float want = OcpMxfp4(block[0], j < 16 ? qs & 0x0f : qs >> 4);
      const float got = out[b * 32 + j];
      if (!SameFloat(want, got) || !SameFloat(want, static_cast<float>(out64[b * 32 + j])) ||
          static_cast<double>(got) != out64[b * 32 + j]) {
        if (++mismatches <= 5) {
          ADD_FAILURE() << "e " << int{block[0]} << " element " << j << ": want " << want << " got "
                        << got << " / " << out64[b * 32 + j];
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

// One MXFP4 block by hand: e = 126 (scale 1/2); qs[0] = 0x79 holds
// element 0 (low nibble 9: -0.5) and element 16 (high nibble 7: 6); qs[15]
// = 0xd2 holds element 15 (2: 1) and element 31 (0xd: -3). e = 0 and 1
// scale by the subnormals 2^-127 and 2^-126 (times 1 for code 2).
TEST(DequantizeRow, Mxfp4ByHand) {
  std::vector<uint8_t> b(17 * 3, 0);
  b[0] = 126;
  b[1] = 0x79;
  b[16] = 0xd2;
  b[17] = 0;
  b[18] = 0x02;
  b[34] = 1;
  b[35] = 0x02;
  std::vector<float> out(96);
  DequantizeRow(WeightType::kMXFP4, reinterpret_cast<const std::byte*>(b.data()), out);
  EXPECT_EQ(out[0], -0.25f);
  EXPECT_EQ(out[16], 3.0f);
  EXPECT_EQ(out[15], 0.5f);
  EXPECT_EQ(out[31], -1.5f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[32], 0x1p-127f);
  EXPECT_EQ(out[64], 0x1p-126f);
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
