// The weight types folio computes with: one enum, one table row per type,
// one place that decodes a row of each type.
//
// The model of ggml's type_traits[GGML_TYPE_COUNT]: per type its name, its
// block size in elements and its bytes per block (an element type is a
// block of one), whether ops::MatMul has a kernel for it (ggml's vec_dot),
// and DequantizeRow (ggml's to_float). Every function that depends on the
// type switches over WeightType exhaustively with no `default`, and the
// build uses -Wall -Werror, so a new enumerator fails to compile until
// IsWeightType, the table (a static_assert), DequantizeRow, the matmul
// kernel dispatch (src/ops/matmul_kernel.cc) and the encoders (HasQuantizer
// and QuantizeRow, ops/quantize.h) all handle it; file readers
// map their own type ids here through their own exhaustive switches
// (GGUF: checkpoint::WeightTypeOf; safetensors: checkpoint/model_io.cc).
//
// ops knows nothing of models or files: a WeightType says how a run of
// elements is laid out in bytes, nothing else.
#ifndef FOLIO_OPS_WEIGHT_TYPE_H_
#define FOLIO_OPS_WEIGHT_TYPE_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string_view>

namespace folio::ops {

// How a weight tensor's elements are stored (rows are whole blocks):
//   kF64, kF32, kF16 (IEEE binary16), kBF16: one element after another,
//     little-endian.
//   kQ8_0 (ggml's block_q8_0): blocks of 32 elements, 34 bytes each: the
//     block's scale d as f16, then 32 int8 q; element = d * q.
//   The legacy ggml blocks, 32 elements each, every field little-endian:
//   element j's 4 low bits are the low nibble of qs[j] for j < 16 and the
//   high nibble of qs[j - 16] for j >= 16; the 5-bit types take bit 4 from
//   bit j of the u32 qh. d and m are f16; arithmetic is f32 (see
//   DequantizeRow):
//   kQ4_0 (block_q4_0, 18 bytes): d, qs[16]; element = (q - 8) * d.
//   kQ4_1 (block_q4_1, 20 bytes): d, m, qs[16]; element = q * d + m.
//   kQ5_0 (block_q5_0, 22 bytes): d, qh, qs[16]; element = (q - 16) * d.
//   kQ5_1 (block_q5_1, 24 bytes): d, m, qh, qs[16]; element = q * d + m.
//   The K-quants: super-blocks of 256 elements in sub-blocks whose scales
//   (and mins) are small integers times the super-block's f16 d (dmin):
//   kQ4_K (block_q4_K, 144 bytes): d, dmin, scales[12], qs[128]. Eight
//     sub-blocks of 32; sub-block g has a 6-bit scale sc and min m packed
//     in scales as ggml's get_scale_min_k4 unpacks them; its 4-bit q are
//     the low (g even) or high (g odd) nibbles of qs[32 * (g / 2) + l];
//     element = (d * sc) * q - dmin * m.
//   kQ5_K (block_q5_K, 176 bytes): d, dmin, scales[12], qh[32], qs[128]:
//     Q4_K's layout with bit 4 of element l of sub-block g from bit g of
//     qh[l].
//   kQ6_K (block_q6_K, 210 bytes): ql[128], qh[64], int8 scales[16], d.
//     Each half of 128 elements uses 64 ql, 32 qh and 8 scales: its
//     element 32 * k + l (k < 4, l < 32) has 4 low bits from ql[l + 32 *
//     (k % 2)] (low nibble for k < 2, high for k >= 2), 2 high bits from
//     bits 2k and 2k + 1 of qh[l], and scale sc[l / 16 + 2k];
//     element = (d * sc) * (q - 32).
//   kQ2_K (block_q2_K, 84 bytes): scales[16], qs[64], d, dmin. Each half
//     of 128 elements uses 32 qs and 8 scale bytes: its element 32k + 16h
//     + l (k < 4, h < 2, l < 16) is bits 2k, 2k + 1 of qs[16h + l] and
//     scale byte s = scales[2k + h]; element = (d * (s & 15)) * q -
//     dmin * (s >> 4).
//   kQ3_K (block_q3_K, 110 bytes): hmask[32], qs[64], scales[12], d. Laid
//     out as Q2_K, plus bit 4n + k of hmask[16h + l] (n the half): q is the
//     2 bits minus 4 where that bit is clear; the 16 6-bit scales are
//     low nibbles of bytes 0-7 then high nibbles, with bits 4-5 from bits
//     2 (j / 4) of byte 8 + j % 4; element = (d * (sc - 32)) * q.
//   kIQ4_NL (block_iq4_nl, 18 bytes per 32): d, qs[16]: the legacy nibble
//     order, element = d * kvalues_iq4nl[q] (a fixed non-linear table).
//   kIQ4_XS (block_iq4_xs, 136 bytes per 256): d, u16 scales_h,
//     scales_l[4], qs[128]: sub-block b of 32 has the 6-bit scale ls from
//     nibble b % 2 of scales_l[b / 2] and bits 2b, 2b + 1 of scales_h, and
//     IQ4_NL's nibble order in qs[16b..]; element = (d * (ls - 32)) *
//     kvalues_iq4nl[q].
//   kMXFP4 (block_mxfp4, 17 bytes per 32; OCP microscaling FP4): u8 e (an
//     E8M0 scale: 2^(e - 127)), qs[16] in the legacy nibble order, each
//     nibble an E2M1 code; element = kvalues_mxfp4[q] * 2^(e - 128), where
//     kvalues_mxfp4 = {0, 1, 2, 3, 4, 6, 8, 12, then the same negated} is
//     twice E2M1's values, so this is E2M1(q) * 2^(e - 127) (but code 8,
//     E2M1's -0, is +0 as in ggml's integer table). As in ggml,
//     every e is an exponent, 0xff (OCP's NaN) included; a loader refuses
//     e = 0xff (ops::CheckBlockScales).
// Values are the table's row indices; add new types at the end.
enum class WeightType : uint8_t {
  kF64,
  kF32,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  kQ2_K,
  kQ3_K,
  kIQ4_NL,
  kIQ4_XS,
  kMXFP4,
};

struct WeightTypeTraits {
  WeightType type;
  // "f64", "f32", "f16", "bf16", "q8_0", "q4_0", ... Model ids hash these names
  // (docs/spec/model-id.md): never rename one.
  std::string_view name;
  uint32_t block_size;   // elements per block (1 for an element type)
  uint32_t block_bytes;  // bytes per block
  // ops::MatMul has a SIMD kernel (and the scalar reference) for it, which
  // reads the stored blocks. f64 has none: the float decoder rounds such
  // weights to f32 once, at load.
  bool has_matmul;
};

// The table, indexed by WeightType.
inline constexpr WeightTypeTraits kWeightTypeTraits[] = {
    //  type              name    block  bytes  matmul
    {WeightType::kF64, "f64", 1, 8, false},
    {WeightType::kF32, "f32", 1, 4, true},
    {WeightType::kF16, "f16", 1, 2, true},
    {WeightType::kBF16, "bf16", 1, 2, true},
    {WeightType::kQ8_0, "q8_0", 32, 2 + 32, true},
    {WeightType::kQ4_0, "q4_0", 32, 2 + 16, true},
    {WeightType::kQ4_1, "q4_1", 32, 2 + 2 + 16, true},
    {WeightType::kQ5_0, "q5_0", 32, 2 + 4 + 16, true},
    {WeightType::kQ5_1, "q5_1", 32, 2 + 2 + 4 + 16, true},
    {WeightType::kQ4_K, "q4_k", 256, 2 + 2 + 12 + 128, true},
    {WeightType::kQ5_K, "q5_k", 256, 2 + 2 + 12 + 32 + 128, true},
    {WeightType::kQ6_K, "q6_k", 256, 128 + 64 + 16 + 2, true},
    {WeightType::kQ2_K, "q2_k", 256, 16 + 64 + 2 + 2, true},
    {WeightType::kQ3_K, "q3_k", 256, 32 + 64 + 12 + 2, true},
    {WeightType::kIQ4_NL, "iq4_nl", 32, 2 + 16, true},
    {WeightType::kIQ4_XS, "iq4_xs", 256, 2 + 2 + 4 + 128, true},
    {WeightType::kMXFP4, "mxfp4", 32, 1 + 16, true},
};
inline constexpr size_t kNumWeightTypes = std::size(kWeightTypeTraits);

// True for every enumerator, false for any other value. Its switch is
// what makes a new enumerator fail to compile until it is listed here.
constexpr bool IsWeightType(WeightType t) {
  switch (t) {
    case WeightType::kF64:
    case WeightType::kF32:
    case WeightType::kF16:
    case WeightType::kBF16:
    case WeightType::kQ8_0:
    case WeightType::kQ4_0:
    case WeightType::kQ4_1:
    case WeightType::kQ5_0:
    case WeightType::kQ5_1:
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
    case WeightType::kQ6_K:
    case WeightType::kQ2_K:
    case WeightType::kQ3_K:
    case WeightType::kIQ4_NL:
    case WeightType::kIQ4_XS:
    case WeightType::kMXFP4:
      return true;
  }
  return false;
}

namespace internal {
// Row i describes the type with value i, and the value after the last row
// is no type: so the table has exactly one row per enumerator.
constexpr bool WeightTypeTableIsComplete() {
  for (size_t i = 0; i < kNumWeightTypes; ++i) {
    if (static_cast<size_t>(kWeightTypeTraits[i].type) != i) return false;
    if (!IsWeightType(static_cast<WeightType>(i))) return false;
  }
  return !IsWeightType(static_cast<WeightType>(kNumWeightTypes));
}
[[noreturn]] void BadWeightType(WeightType t);  // a FOLIO_CHECK failure
}  // namespace internal
static_assert(internal::WeightTypeTableIsComplete(),
              "kWeightTypeTraits needs exactly one row per WeightType, in "
              "enum order");

// The row of `t`; a value outside the enum is a FOLIO_CHECK failure.
constexpr const WeightTypeTraits& TraitsOf(WeightType t) {
  if (!IsWeightType(t)) internal::BadWeightType(t);
  return kWeightTypeTraits[static_cast<size_t>(t)];
}

// The table's name; "unknown" for a value outside the enum.
std::string_view WeightTypeName(WeightType type);

// The Q8_0 block layout, for the kernels that decode it in SIMD registers.
inline constexpr uint64_t kQ8_0BlockElems = TraitsOf(WeightType::kQ8_0).block_size;
inline constexpr uint64_t kQ8_0BlockBytes = TraitsOf(WeightType::kQ8_0).block_bytes;
inline constexpr uint64_t kQ8_0ScaleBytes = 2;  // the f16 d before the quants
static_assert(kQ8_0BlockBytes == kQ8_0ScaleBytes + kQ8_0BlockElems);

// Bytes of one row of `cols` elements: cols / block_size * block_bytes.
// 0 for cols > 0 that is not whole blocks, on overflow, or for a value
// outside the enum (ops::ValidateWeightView says which).
uint64_t WeightRowBytes(WeightType type, uint64_t cols);

// Decodes out.size() consecutive elements of type `type` (whole blocks:
// out.size() a multiple of the block size; `src` needs no alignment) —
// ggml's to_float, and the one scalar decoder of every type; the SIMD
// kernels decode the same values in registers and are tested against it.
// The quantized types compute as ggml's dequantize_row_* do, in f32:
// f32(d) times the integer q (q - 8, q - 16), exact in a 24-bit
// significand; the _1 types then add f32(m), rounded to nearest once (the
// exact product makes a fused multiply-add give the same bits). Q4_K and
// Q5_K likewise: d * sc, dmin * m and (d * sc) * q are exact, so only the
// subtraction rounds, and Q2_K's too; Q3_K, IQ4_NL and IQ4_XS round
// nowhere, nor does MXFP4 (a 4-bit level times a power of two, subnormal
// for e < 2) except that a product of 2^128 or more is infinity (e >= 0xfd
// with the larger levels), as in ggml. Q6_K's (d * sc) * (q - 32) can round in its second product,
// computed in that order as in ggml. Double output is that f32
// value widened, so both outputs agree with ggml bit for bit; element
// types widen exactly, except f64 into float, which rounds to nearest
// once. A NaN or infinite scale decodes to NaN/inf as in ggml. Whole
// blocks and a known type are FOLIO_CHECKed.
void DequantizeRow(WeightType type, const std::byte* src, std::span<float> out);
void DequantizeRow(WeightType type, const std::byte* src, std::span<double> out);

}  // namespace folio::ops

#endif  // FOLIO_OPS_WEIGHT_TYPE_H_
