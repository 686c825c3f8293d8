// The packed matrix's tile layout (ops/packed_matmul.h), shared by the
// packer and reference (packed_matmul.cc) and the SIMD kernel
// (packed_matmul_kernel.cc).
//
// Tile t holds output rows 8t ... 8t + 7 (rows past the matrix are zero).
// Its 32-column blocks come in groups of group_blocks (1, or 8 for the
// K-quants: one 256-column super-block). One tile's group is a header,
// then each block's levels (tiles are stored in pairs, interleaved field
// by field: see PairAt below):
//   header, kF16 scales (legacy types, Q8_0; group_blocks = 1):
//     scale[8]       f16, one per row (lane), the file's own block scale
//     bias[8]        f16, bias formats only
//   header, kSuperBlock scales (Q4_K, Q5_K; group_blocks = 8):
//     d[8], dmin[8]  f16, each lane's super-block scales, as in the file
//     sc[8][8]       u8, block k's 6-bit scale for each lane
//     m[8][8]        u8, block k's 6-bit min for each lane
//     so block k's scale is d * sc and its bias -(dmin * m), both exact in
//     f32 (an 11-bit significand times a 6-bit integer), and a tile is no
//     larger than the file's blocks but for 16 bytes a super-block
//   header, kHalfBlocks scales (Q6_K, Q3_K; group_blocks = 8, two parts a
//   block):
//     d[8]           f16, each lane's super-block scale
//     sc[16][8]      i8, the scale of block k's part p (columns 16p ...
//                    16p + 15) in row 2k + p: its scale is d * sc, exact
//                    (Q3_K: the file's 6-bit scale less 32)
//   header, kSuperHalves scales (Q2_K; group_blocks = 8, two parts a block):
//     d[8], dmin[8]  f16, each lane's super-block scales, as in the file
//     sm[16][8]      u8, the file's byte for block k's part p in row 2k + p:
//                    its low nibble the part's scale (d * it), its high
//                    nibble the part's min (bias -(dmin * it)), both exact
//   header, kSignedBlocks scales (IQ4_XS; group_blocks = 8):
//     d[8]           f16, each lane's super-block scale
//     sc[8][8]       i8, block k's 6-bit scale less 32: d * sc, exact
//   header, kE8M0 scales (MXFP4; group_blocks = 1):
//     e[8]           u8, each lane's E8M0 byte; the scale is E8M0Half(e),
//                    a power of two (block_layout.h)
//   levels, per block: `bits` planes of 32 bytes. Byte 4 * lane + i of
//     every plane belongs to the lane's columns 4s + i, s = 0 ... 7 (slot s
//     of the block), and holds some of their 8 * bits level bits: SlotOf
//     below says which, per width. 8-bit formats (Q8_0): plane s is slot s.
//     4-bit: plane v's low nibble is slot v, its high nibble slot 4 + v.
//     2-bit (Q2_K): bits 2v, 2v + 1 of plane j are slot 4j + v. 3-, 5-
//     and 6-bit formats (Q3_K; Q5_0, Q5_1, Q5_K; Q6_K): each plane's low
//     bits are one or two whole slots (unpacked by one AND, or a shift and
//     an AND) and its spare high bits gather into the remaining slots.
// So slot s pairs with activation bytes 4s ... 4s + 3 of the block, and
// belongs to part s / 4 of a two-part block.
// Lookup formats (IQ4_NL, IQ4_XS, MXFP4) store each element's 4-bit index
// as a 4-bit format does; its level is the type's table value plus 128
// (LookupLevels), unsigned like Q8_0's, with offset 128.
#ifndef FOLIO_OPS_PACKED_LAYOUT_H_
#define FOLIO_OPS_PACKED_LAYOUT_H_

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "folio/core/dtype.h"
#include "folio/ops/packed_matmul.h"
#include "ops/block_layout.h"

namespace folio::ops::internal {

enum class PackedScales : uint8_t {
  kF16,
  kSuperBlock,
  kSuperHalves,
  kHalfBlocks,
  kSignedBlocks,
  kE8M0
};
// The table a lookup format's 4-bit indices select from.
enum class PackedLookup : uint8_t { kNone, kIq4nl, kMxfp4 };

// weight = scale * (level - offset) (offset formats) or scale * level + bias.
// A structural type, so that the kernel can take it as a template argument.
struct PackedFormat {
  int bits = 0;  // per level: 2, 3, 4, 5, 6 or 8 (SlotOf)
  bool has_bias = false;
  int offset = 0;
  PackedScales scales = PackedScales::kF16;
  size_t group_blocks = 1;
  PackedLookup lookup = PackedLookup::kNone;
};

constexpr PackedFormat PackedFormatOf(WeightType type) {
  constexpr PackedScales kSuper = PackedScales::kSuperBlock;
  constexpr size_t kSuperBlocks = 8;  // 256 columns
  switch (type) {
    case WeightType::kQ4_0:
      return {4, false, 8};
    case WeightType::kQ4_1:
      return {4, true, 0};
    case WeightType::kQ4_K:
      return {4, true, 0, kSuper, kSuperBlocks};
    case WeightType::kQ5_0:
      return {5, false, 16};
    case WeightType::kQ5_1:
      return {5, true, 0};
    case WeightType::kQ5_K:
      return {5, true, 0, kSuper, kSuperBlocks};
    case WeightType::kQ8_0:  // levels are q + 128
      return {8, false, 128};
    case WeightType::kQ6_K:
      return {6, false, 32, PackedScales::kHalfBlocks, kSuperBlocks};
    case WeightType::kIQ4_NL:
      return {4, false, 128, PackedScales::kF16, 1, PackedLookup::kIq4nl};
    case WeightType::kIQ4_XS:
      return {4, false, 128, PackedScales::kSignedBlocks, kSuperBlocks, PackedLookup::kIq4nl};
    case WeightType::kMXFP4:
      return {4, false, 128, PackedScales::kE8M0, 1, PackedLookup::kMxfp4};
    case WeightType::kQ2_K:
      return {2, true, 0, PackedScales::kSuperHalves, kSuperBlocks};
    case WeightType::kQ3_K:  // levels are q + 4
      return {3, false, 4, PackedScales::kHalfBlocks, kSuperBlocks};
    case WeightType::kF64:
    case WeightType::kF32:
    case WeightType::kF16:
    case WeightType::kBF16:
      return {};
  }
  return {};
}

// A lookup format's 16 levels: the table's values plus 128 (all in 1 ..
// 241, so unsigned bytes; the kernels subtract 128 times the activation
// sum, as for Q8_0). Tables, so that the scalar chain reads one byte.
constexpr std::array<uint8_t, 16> LevelsOf(const int8_t (&values)[16]) {
  std::array<uint8_t, 16> out{};
  for (size_t i = 0; i < 16; ++i) out[i] = static_cast<uint8_t>(static_cast<int>(values[i]) + 128);
  return out;
}
inline constexpr std::array<uint8_t, 16> kIq4nlPackedLevels = LevelsOf(kIq4nlValues);
inline constexpr std::array<uint8_t, 16> kMxfp4PackedLevels = LevelsOf(kMxfp4Values);
// For a lookup format (lookup != kNone).
constexpr const std::array<uint8_t, 16>& LookupLevels(PackedLookup lookup) {
  return lookup == PackedLookup::kMxfp4 ? kMxfp4PackedLevels : kIq4nlPackedLevels;
}

// A block's parts: runs of columns with their own scale (Q6_K, Q3_K and
// Q2_K: 2 of 16; Q2_K's parts have their own bias too).
constexpr size_t PartsOf(PackedFormat f) {
  return f.scales == PackedScales::kHalfBlocks || f.scales == PackedScales::kSuperHalves ? 2 : 1;
}
constexpr size_t PartCols(PackedFormat f) { return PackedMatrix::kBlockCols / PartsOf(f); }

// Where a group header's fields start (kF16: scale, bias; kSuperBlock: d,
// dmin, sc, m; kSuperHalves: d, dmin, sm; kHalfBlocks: d, sc), and its
// size.
constexpr size_t kF16Lanes = 2 * PackedMatrix::kTileRows;  // bytes of 8 f16
constexpr size_t BiasAt() { return kF16Lanes; }
constexpr size_t SubScalesAt(PackedFormat f) { return f.has_bias ? 2 * kF16Lanes : kF16Lanes; }
// Rows of 8 sub-scale bytes (one per lane): one per part of each block.
constexpr size_t SubScaleRows(PackedFormat f) { return f.group_blocks * PartsOf(f); }
constexpr size_t SubMinsAt(PackedFormat f) {
  return SubScalesAt(f) + SubScaleRows(f) * PackedMatrix::kTileRows;
}
constexpr size_t HeaderBytes(PackedFormat f) {
  switch (f.scales) {
    case PackedScales::kF16:
      return SubScalesAt(f);
    case PackedScales::kSuperBlock:
      return SubMinsAt(f) + f.group_blocks * PackedMatrix::kTileRows;
    case PackedScales::kSuperHalves:  // the mins share the scales' bytes
    case PackedScales::kHalfBlocks:   // no mins: the header ends with the scales
    case PackedScales::kSignedBlocks:
      return SubMinsAt(f);
    case PackedScales::kE8M0:
      return PackedMatrix::kTileRows;
  }
  return 0;
}
constexpr size_t BlockLevelBytes(PackedFormat f) { return static_cast<size_t>(f.bits) * 32; }
// Block k's levels within its group.
constexpr size_t LevelsAt(PackedFormat f, size_t k) {
  return HeaderBytes(f) + k * BlockLevelBytes(f);
}
constexpr size_t TileGroupBytes(PackedFormat f) { return LevelsAt(f, f.group_blocks); }

// Tiles 2p and 2p + 1 share a pair group (PackedMatrix::pair_group): each
// field of one tile's layout above (a scale or bias vector, a block's sc
// or m bytes, a vector of levels) is followed by the same field of the
// other tile, so that the 512-bit kernel loads both in one instruction and
// every kernel reads memory in order. The field at `at` of `unit` bytes of
// tile `half` (0 or 1) starts here in its pair group:
constexpr size_t PairAt(size_t at, size_t unit, size_t half) { return 2 * at + half * unit; }
inline constexpr size_t kLevelVector = 32;

// A run of a level's bits in its block's planes: `width` bits from bit
// `shift` of plane `plane`'s byte, which are the level's bits dst ...
// dst + width - 1.
struct LevelPiece {
  int plane = 0;
  int shift = 0;
  int width = 0;
  int dst = 0;
};
// Where slot s (< 8) of a `bits`-bit format lives: one piece, or for the
// slots gathered from spare high bits two or three.
struct SlotLayout {
  LevelPiece piece[3] = {};
  int count = 0;
};
constexpr SlotLayout SlotOf(int bits, size_t slot) {
  const int s = static_cast<int>(slot);
  switch (bits) {
    case 2:
      return {{{s / 4, 2 * (s % 4), 2, 0}}, 1};
    case 3:  // planes 0-2: slots 2j (bits 0-2), 2j + 1 (3-5); spare bits 6, 7
      if (s < 6) return {{{s / 2, 3 * (s % 2), 3, 0}}, 1};
      // Slot 6: bits 6, 7 of plane 0 and bit 6 of plane 2; slot 7: of plane 1, bit 7.
      return {{{s - 6, 6, 2, 0}, {2, s, 1, 2}}, 2};
    case 4:
      return {{{s % 4, 4 * (s / 4), 4, 0}}, 1};
    case 5:  // planes 0-4: slot j (bits 0-4); spare bits 5-7
      if (s < 5) return {{{s, 0, 5, 0}}, 1};
      if (s == 5) return {{{0, 5, 3, 0}, {1, 5, 2, 3}}, 2};
      if (s == 6) return {{{1, 7, 1, 0}, {2, 5, 3, 1}, {3, 5, 1, 4}}, 3};
      return {{{3, 6, 2, 0}, {4, 5, 3, 2}}, 2};
    case 6:  // planes 0-5: slot j (bits 0-5); spare bits 6, 7
      if (s < 6) return {{{s, 0, 6, 0}}, 1};
      return {{{3 * (s - 6), 6, 2, 0}, {3 * (s - 6) + 1, 6, 2, 2}, {3 * (s - 6) + 2, 6, 2, 4}}, 3};
    case 8:
      return {{{s, 0, 8, 0}}, 1};
    default:
      return {};
  }
}
// Whether SlotOf gives every slot of a `bits`-bit level each of its bits
// once, from plane bits no other slot uses, and every plane bit a use.
constexpr bool SlotsTile(int bits) {
  uint8_t plane_bits[8] = {};
  for (size_t s = 0; s < 8; ++s) {
    const SlotLayout slot = SlotOf(bits, s);
    uint32_t level_bits = 0;
    for (int i = 0; i < slot.count; ++i) {
      const LevelPiece p = slot.piece[i];
      if (p.plane < 0 || p.plane >= bits || p.width < 1 || p.shift < 0 || p.shift + p.width > 8 ||
          p.dst < 0 || p.dst + p.width > bits) {
        return false;
      }
      const uint32_t mask = (1u << p.width) - 1;
      if ((uint32_t{plane_bits[p.plane]} >> p.shift & mask) != 0 ||
          (level_bits >> p.dst & mask) != 0) {
        return false;
      }
      plane_bits[p.plane] = static_cast<uint8_t>(plane_bits[p.plane] | mask << p.shift);
      level_bits |= mask << p.dst;
    }
    if (level_bits != (1u << bits) - 1) return false;
  }
  for (int j = 0; j < bits; ++j) {
    if (plane_bits[j] != 0xff) return false;
  }
  return true;
}
static_assert(SlotsTile(2) && SlotsTile(3) && SlotsTile(4) && SlotsTile(5) && SlotsTile(6) &&
              SlotsTile(8));
// Column c's byte in plane `plane` of lane `lane` of block k of tile
// `half`, within its pair group.
constexpr size_t PlaneByteAt(PackedFormat f, size_t k, size_t half, int plane, size_t lane,
                             size_t c) {
  const size_t vector = LevelsAt(f, k) + static_cast<size_t>(plane) * kLevelVector;
  return PairAt(vector, kLevelVector, half) + lane * 4 + c % 4;
}
// Where lane `lane`'s f16 scale (or d) and bias (or dmin) lie, and its
// sub-scale row `row` (block k, or block k's part p at 2k + p) and block
// k's min byte.
constexpr size_t ScaleAt(size_t half, size_t lane) { return PairAt(0, kF16Lanes, half) + 2 * lane; }
constexpr size_t E8M0At(size_t half, size_t lane) {
  return PairAt(0, PackedMatrix::kTileRows, half) + lane;
}
constexpr size_t BiasAt(size_t half, size_t lane) {
  return PairAt(BiasAt(), kF16Lanes, half) + 2 * lane;
}
constexpr size_t SubScaleAt(PackedFormat f, size_t row, size_t half, size_t lane) {
  constexpr size_t kUnit = PackedMatrix::kTileRows;
  return PairAt(SubScalesAt(f) + kUnit * row, kUnit, half) + lane;
}
constexpr size_t SubMinAt(PackedFormat f, size_t k, size_t half, size_t lane) {
  constexpr size_t kUnit = PackedMatrix::kTileRows;
  return PairAt(SubMinsAt(f) + kUnit * k, kUnit, half) + lane;
}

// Block b of tile t: its pair group, its index in the group, and which
// tile of the pair.
struct PackedBlock {
  const std::byte* group;
  size_t k;
  size_t half;
};
inline PackedBlock PackedBlockAt(const PackedMatrix& w, uint64_t tile, uint64_t b) {
  const size_t g = w.group_blocks();
  return {w.pair_group(tile / 2, b / g), static_cast<size_t>(b % g), static_cast<size_t>(tile % 2)};
}

// Column c's level in lane `lane` of a block.
inline uint32_t PackedLevel(PackedFormat f, PackedBlock block, size_t lane, size_t c) {
  const SlotLayout slot = SlotOf(f.bits, c / 4);
  uint32_t level = 0;
  for (int i = 0; i < slot.count; ++i) {
    const LevelPiece p = slot.piece[i];
    const auto byte = std::to_integer<uint32_t>(
        block.group[PlaneByteAt(f, block.k, block.half, p.plane, lane, c)]);
    level |= (byte >> p.shift & ((1u << p.width) - 1)) << p.dst;
  }
  return f.lookup != PackedLookup::kNone ? LookupLevels(f.lookup)[level] : level;
}

inline float PackedF16(const std::byte* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return F16BitsToF32(bits);
}
inline float PackedU8(const std::byte* p) { return static_cast<float>(std::to_integer<int>(*p)); }

// A lane's scale for part `part` of a block and its bias, as the kernels
// compute them.
inline float PackedScale(PackedFormat f, PackedBlock block, size_t lane, size_t part = 0) {
  if (f.scales == PackedScales::kE8M0) {
    return E8M0Half(std::to_integer<uint32_t>(block.group[E8M0At(block.half, lane)]));
  }
  const float scale = PackedF16(block.group + ScaleAt(block.half, lane));
  switch (f.scales) {
    case PackedScales::kF16:
      return scale;
    case PackedScales::kSuperBlock:
      return scale * PackedU8(block.group + SubScaleAt(f, block.k, block.half, lane));
    case PackedScales::kSuperHalves: {
      const std::byte sm = block.group[SubScaleAt(f, 2 * block.k + part, block.half, lane)];
      return scale * static_cast<float>(std::to_integer<int>(sm & std::byte{0x0f}));
    }
    case PackedScales::kHalfBlocks:
    case PackedScales::kSignedBlocks: {
      const size_t row = PartsOf(f) * block.k + part;
      const std::byte sc = block.group[SubScaleAt(f, row, block.half, lane)];
      return scale * static_cast<float>(static_cast<int8_t>(sc));
    }
    case PackedScales::kE8M0:
      break;
  }
  return scale;
}
inline float PackedBias(PackedFormat f, PackedBlock block, size_t lane, size_t part = 0) {
  const float bias = PackedF16(block.group + BiasAt(block.half, lane));
  if (f.scales == PackedScales::kF16) return bias;
  if (f.scales == PackedScales::kSuperHalves) {
    const std::byte sm = block.group[SubScaleAt(f, 2 * block.k + part, block.half, lane)];
    return -bias * static_cast<float>(std::to_integer<int>(sm >> 4));
  }
  return -bias * PackedU8(block.group + SubMinAt(f, block.k, block.half, lane));
}

// The sum of an activation block's q over part `part`'s columns.
inline int32_t PartSum(PackedFormat f, const ActivationBlock& a, size_t part) {
  if (PartsOf(f) == 1) return a.sum;
  return part == 0 ? a.sum_low : a.sum - a.sum_low;
}
// Whether each part has its own bias (Q2_K), which multiplies that part's
// activation sum a.d * PartSum; otherwise a bias takes the block's a.e.
constexpr bool PartBiases(PackedFormat f) { return f.has_bias && PartsOf(f) > 1; }

// The contract's chain for one output: lane `lane` of tile `tile` against
// one activation row's blocks. The scalar targets and the reference both
// run this.
inline float PackedDot(const PackedMatrix& w, uint64_t tile, size_t lane,
                       const ActivationBlock* act) {
  const PackedFormat f = PackedFormatOf(w.type());
  float acc = 0.0f;
  for (uint64_t b = 0; b < w.num_blocks(); ++b) {
    const PackedBlock block = PackedBlockAt(w, tile, b);
    const ActivationBlock& a = act[b];
    for (size_t part = 0; part < PartsOf(f); ++part) {
      int32_t sum = 0;
      for (size_t c = part * PartCols(f); c < (part + 1) * PartCols(f); ++c) {
        sum += static_cast<int32_t>(PackedLevel(f, block, lane, c)) * a.q[c];
      }
      sum -= f.offset * PartSum(f, a, part);
      const float scale = PackedScale(f, block, lane, part) * a.d;
      acc = std::fma(scale, static_cast<float>(sum), acc);
      if (PartBiases(f)) {
        const float e = a.d * static_cast<float>(PartSum(f, a, part));
        acc = std::fma(PackedBias(f, block, lane, part), e, acc);
      }
    }
    if (f.has_bias && !PartBiases(f)) acc = std::fma(PackedBias(f, block, lane), a.e, acc);
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
  // The end of the task's tiles' bytes (the last pair group's end): the
  // weight prefetch stays below it. Null: no software prefetch.
  const std::byte* prefetch_end = nullptr;
};

// The sum of a quantized block's first 16 values.
inline int32_t SumLow(const ActivationBlock& a) {
  int32_t sum = 0;
  for (size_t i = 0; i < 16; ++i) sum += a.q[i];
  return sum;
}

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
// Whether the AVX2 target (avx512 false) or the AVX3 target (true) runs
// its dot products as vpdpbusd: the CPU has AVX-VNNI, or AVX512-VNNI
// (CPUID, once), and no test has turned it off.
bool RuntimeVnni(bool avx512);
// Tests: turn those instantiations off (false) or back on where the CPU
// has the instructions (true), so that both walks are checked there.
void SetRuntimeVnniForTest(bool allow);
// Whether the CPU has either.
bool CpuHasRuntimeVnni();

}  // namespace folio::ops::internal

#endif  // FOLIO_OPS_PACKED_LAYOUT_H_
