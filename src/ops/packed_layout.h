// The packed matrix's tile layout (ops/packed_matmul.h), shared by the
// packer and reference (packed_matmul.cc) and the SIMD kernel
// (packed_matmul_kernel.cc).
//
// Tile t holds output rows 8t ... 8t + 7 (rows past the matrix are zero).
// Tiles are stored in pairs: tile 2p's block b, then tile 2p + 1's block b,
// then both tiles' block b + 1 (PackedMatrix::tile_block), so that the
// kernel's two-tile path streams memory in order. Each tile block is
// tile_block_bytes long:
//   scale[8]                      one per row (lane): f16 where the stored
//                                 type's scales are f16 (the legacy types
//                                 and Q8_0, so a tile is no larger than the
//                                 file's blocks), f32 for the K-quants,
//                                 whose d * sc is not an f16
//   bias[8]                       bias formats only, the same width
//   levels                        4-bit formats: 4 vectors of 32 bytes;
//                                 vector k's byte 4 * lane + i holds
//                                 column 4k + i in its low nibble and
//                                 column 16 + 4k + i in its high nibble.
//                                 8-bit formats: 8 vectors; vector k's byte
//                                 4 * lane + i holds column 4k + i.
// So vector k (4-bit: its low nibbles for k < 4, high nibbles as k + 4)
// pairs with activation bytes 4k ... 4k + 3 of the block.
#ifndef FOLIO_OPS_PACKED_LAYOUT_H_
#define FOLIO_OPS_PACKED_LAYOUT_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "folio/core/dtype.h"
#include "folio/ops/packed_matmul.h"

namespace folio::ops::internal {

// weight = scale * (level - offset) (offset formats) or scale * level + bias.
// A structural type, so that the kernel can take it as a template argument.
struct PackedFormat {
  int bits = 0;  // 4 (nibbles) or 8 (bytes) of storage per level
  bool has_bias = false;
  int offset = 0;
  bool f16_scales = false;  // scales and biases stored as f16 (else f32)
};

constexpr PackedFormat PackedFormatOf(WeightType type) {
  switch (type) {
    case WeightType::kQ4_0:
      return {4, false, 8, true};
    case WeightType::kQ4_1:
      return {4, true, 0, true};
    case WeightType::kQ4_K:
      return {4, true, 0, false};
    case WeightType::kQ5_0:
      return {8, false, 16, true};
    case WeightType::kQ5_1:
      return {8, true, 0, true};
    case WeightType::kQ5_K:
      return {8, true, 0, false};
    case WeightType::kQ8_0:  // levels are q + 128
      return {8, false, 128, true};
    case WeightType::kF64:
    case WeightType::kF32:
    case WeightType::kF16:
    case WeightType::kBF16:
    case WeightType::kQ6_K:
    case WeightType::kQ2_K:
    case WeightType::kQ3_K:
    case WeightType::kIQ4_NL:
    case WeightType::kIQ4_XS:
      return {};
  }
  return {};
}

// Bytes of one lane's scale (and bias).
constexpr size_t ScaleBytes(PackedFormat f) { return f.f16_scales ? 2 : 4; }
// Where a tile block's biases and levels start.
constexpr size_t BiasAt(PackedFormat f) { return 8 * ScaleBytes(f); }
constexpr size_t LevelsAt(PackedFormat f) { return BiasAt(f) * (f.has_bias ? 2 : 1); }
constexpr size_t TileBlockBytes(PackedFormat f) {
  return LevelsAt(f) + (f.bits == 4 ? size_t{128} : size_t{256});
}

// Where column c (< 32) of lane `lane` lives among a tile block's levels:
// its byte, and its bit shift within it (4-bit formats: 0 for columns
// below 16, 4 above).
struct LevelSlot {
  size_t byte;
  int shift;
};
constexpr LevelSlot LevelAt(PackedFormat f, size_t lane, size_t c) {
  const size_t col = f.bits == 4 ? c % 16 : c;
  return {(col / 4) * 32 + lane * 4 + col % 4, f.bits == 4 && c >= 16 ? 4 : 0};
}

// Column c's level in lane `lane` of a tile block at tb.
inline uint32_t PackedLevel(PackedFormat f, const std::byte* tb, size_t lane, size_t c) {
  const LevelSlot at = LevelAt(f, lane, c);
  const uint32_t byte = std::to_integer<uint32_t>(tb[LevelsAt(f) + at.byte]);
  return f.bits == 4 ? (byte >> at.shift) & 0x0f : byte;
}

// The f16 or f32 at p, as f32 (exactly).
inline float PackedFloat(PackedFormat f, const std::byte* p) {
  if (f.f16_scales) {
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    return F16BitsToF32(bits);
  }
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float PackedScale(PackedFormat f, const std::byte* tb, size_t lane) {
  return PackedFloat(f, tb + ScaleBytes(f) * lane);
}
inline float PackedBias(PackedFormat f, const std::byte* tb, size_t lane) {
  return PackedFloat(f, tb + BiasAt(f) + ScaleBytes(f) * lane);
}

// The contract's chain for one output: lane `lane` of tile `tile` against
// one activation row's blocks. The scalar targets and the reference both
// run this.
inline float PackedDot(const PackedMatrix& w, uint64_t tile, size_t lane,
                       const ActivationBlock* act) {
  const PackedFormat f = PackedFormatOf(w.type());
  float acc = 0.0f;
  for (uint64_t b = 0; b < w.num_blocks(); ++b) {
    const std::byte* tb = w.tile_block(tile, b);
    const ActivationBlock& a = act[b];
    int32_t sum = 0;
    for (size_t c = 0; c < PackedMatrix::kBlockCols; ++c) {
      sum += static_cast<int32_t>(PackedLevel(f, tb, lane, c)) * a.q[c];
    }
    sum -= f.offset * a.sum;
    const float scale = PackedScale(f, tb, lane) * a.d;
    acc = std::fma(scale, static_cast<float>(sum), acc);
    if (f.has_bias) acc = std::fma(PackedBias(f, tb, lane), a.e, acc);
  }
  return acc;
}

// The unit of work of PackedMatMul: tiles [tile_begin, tile_end) for
// num_rows activation rows. act holds num_rows * w.num_blocks() blocks;
// y[r * y_stride + j] receives output j of row r.
struct PackedTask {
  const PackedMatrix* w;
  const ActivationBlock* act;
  uint64_t num_rows;
  float* y;
  uint64_t y_stride;
  uint64_t tile_begin;
  uint64_t tile_end;
};

// A block whose largest |x| is below this quantizes to zeros with d = 0, so
// that 127 / max |x| stays finite.
inline constexpr float kMinActivationRange = 0x1p-100f;

// The scalar quantizer (QuantizeActivations' contract), the bits every SIMD
// target must give.
void QuantizeActivationsScalar(const float* x, size_t num_blocks, ActivationBlock* out);

// Runs one task with the best SIMD target this CPU has.
void PackedRows(const PackedTask& task);
// QuantizeActivations with the best SIMD target (the same bits).
void QuantizeActivationsSimd(const float* x, size_t num_blocks, ActivationBlock* out);
// The target PackedRows dispatches to ("AVX3_DL", "AVX3", "AVX2", "EMU128").
const char* PackedTargetName();

}  // namespace folio::ops::internal

#endif  // FOLIO_OPS_PACKED_LAYOUT_H_
