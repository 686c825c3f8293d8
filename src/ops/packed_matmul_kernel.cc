// The packed integer matmul's kernel (ops/packed_matmul.h), compiled once
// per Highway target and dispatched at run time.
//
// Highway 1.0.3 has no 8-bit dot product, so the x86 targets use a small
// intrinsics path (ARCHITECTURE: "a small intrinsics path behind the same
// dispatch"):
//   AVX3_DL  vpdpbusd (AVX512-VNNI): 4 products a lane, one instruction,
//            on 512-bit vectors (two tiles) and 256-bit ones (one).
//            Highway 1.0.3's AVX3_DL target string names AVX-VNNI rather
//            than AVX512-VNNI, so that target adds avx512vnni itself.
//   AVX2, AVX3  vpmaddubsw + vpmaddwd (Q8_0's signed levels through the
//            sign trick, since u8 * i8 pairs of full-range bytes would
//            saturate 16 bits).
//   AVX2 on CPUs with AVX-VNNI (AVX-512-less Intel cores since Alder Lake,
//            Sierra Forest) and AVX3 on CPUs with AVX512-VNNI but not the
//            rest of AVX3_DL (Cascade Lake): vpdpbusd (VEX on AVX2, EVEX on
//            AVX3, with AVX3_DL's pairs of tiles) in a second instantiation
//            that PackedRowsImpl picks at run time (RuntimeVnni()).
// Every other target runs PackedDot, the scalar chain. Integer sums are
// exact, so all of these give the same bits (packed_matmul.h).
//
// A task walks its tiles; for each tile all the tile's blocks for 1-4
// activation rows at once (kR), so a tile's levels are unpacked once per
// group of rows. AVX3_DL (and AVX3 with VNNI) walks two tiles at once in
// 512-bit vectors (16 lanes), which halves the broadcasts, unpacking and
// scaling per product; a task's odd last tile takes the 256-bit path.
// Prefill walks activation rows in blocks of kActBlock so that those rows'
// quantized blocks stay in L2 while every tile of the task passes over them.
#define HWY_WANT_AVX3_DL
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "ops/packed_layout.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/packed_matmul_kernel.cc"
// foreach_target.h re-includes this file once per target: it comes first.
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/cache_control.h"
#include "hwy/highway.h"

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>
#endif

// Highway 1.0's AVX3_DL attributes name AVX-VNNI but not AVX512-VNNI,
// which this code uses: GCC adds it to the pushed options; clang keeps one
// target attribute per function, so it gets Highway's list and VNNI in one.
#if HWY_TARGET == HWY_AVX3_DL && defined(__clang__)
HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR ",avx512vnni")
#else
HWY_BEFORE_NAMESPACE();
#endif
#if HWY_TARGET == HWY_AVX3_DL && !defined(__clang__)
#pragma GCC target("avx512vnni")
#endif
// What lambdas (which the pushed attributes do not reach) are marked with.
#undef FOLIO_PACKED_ATTR
#if HWY_TARGET == HWY_AVX3_DL && defined(__clang__)
#define FOLIO_PACKED_ATTR __attribute__((target(HWY_TARGET_STR ",avx512vnni")))
#else
#define FOLIO_PACKED_ATTR HWY_ATTR
#endif
namespace folio::ops::internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ------------------------------------------------------ quantization

void QuantizeActivationsImpl(const float* x, size_t num_blocks, ActivationBlock* out) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<int8_t, decltype(d)> d8;
  const size_t n = hn::Lanes(d);
  const auto magnitude = hn::Set(di, 0x7fffffff);
  constexpr int32_t kInfBits = 0x7f800000;
  for (size_t b = 0; b < num_blocks; ++b) {
    const float* xb = x + 32 * b;
    ActivationBlock& a = out[b];
    // One integer max over the bits of |x|: finite magnitudes order as
    // their bits do, and inf and NaN lie above every finite pattern, so it
    // gives both max |x| and whether the block holds a non-finite element.
    auto top = hn::Zero(di);
    for (size_t i = 0; i < 32; i += n) {
      top = hn::Max(top, hn::And(hn::BitCast(di, hn::LoadU(d, xb + i)), magnitude));
    }
    const int32_t top_bits = hn::GetLane(hn::MaxOfLanes(di, top));
    float range;
    std::memcpy(&range, &top_bits, sizeof(range));
    if (top_bits >= kInfBits || range < kMinActivationRange) {
      std::memset(a.q, 0, sizeof(a.q));
      a.sum = a.sum_low = 0;
      a.d = a.e = top_bits >= kInfBits ? __builtin_nanf("") : 0.0f;
      continue;
    }
    const auto inverse = hn::Set(d, 127.0f / range);
    auto low = hn::Zero(di), high = hn::Zero(di);  // sums of q[0..15], q[16..31]
    for (size_t i = 0; i < 32; i += n) {
      const auto q = hn::NearestInt(hn::Mul(hn::LoadU(d, xb + i), inverse));
      if (i < 16) {
        low = hn::Add(low, q);
      } else {
        high = hn::Add(high, q);
      }
      hn::StoreU(hn::DemoteTo(d8, q), d8, a.q + i);
    }
    a.sum_low = hn::GetLane(hn::SumOfLanes(di, low));
    a.sum = a.sum_low + hn::GetLane(hn::SumOfLanes(di, high));
    a.d = range / 127.0f;
    a.e = a.d * static_cast<float>(a.sum);
  }
}

// ------------------------------------------------------------ tiles

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL

// Activation rows per prefill block: 64 rows of a 1536-column matrix are
// 144 KiB of quantized blocks.
constexpr size_t kActBlock = 64;

// How far ahead of its loads a pass over a tile prefetches the weights. A
// task's tiles are one contiguous stream, which the hardware prefetchers
// follow only within a 4 KiB page. On the Xeon VM, Q4_K decode of a 0.9B
// model on 2 threads, each distance against the build without (medians of
// 3-4 alternated pairs): 1.25x with 1 KiB, 1.26x with 2 KiB, 1.48x with
// 4 KiB, 1.33x with 8 KiB and 1.22x with 16 KiB ahead.
constexpr size_t kPrefetchAhead = 4096;

// Activation rows one pass over a tile's weights serves: each pass unpacks
// the levels once for all of its rows. AVX-512's 32 registers hold six
// rows' accumulators and sums (twelve sums for Q6_K's halves), so a
// speculative verify step of up to six rows unpacks once; AVX2's 16 hold
// four.
#if HWY_TARGET == HWY_AVX2
constexpr size_t kMaxRows = 4;
#else
constexpr size_t kMaxRows = 6;
#endif

constexpr bool kVnni = HWY_TARGET == HWY_AVX3_DL;

// The vector operations PackedTile needs, on one tile (8 lanes of 32 bits,
// 256-bit vectors) or, with AVX512-VNNI, both tiles of a pair (16 lanes,
// 512-bit vectors: tile 2p in the low half, 2p + 1 in the high half). Every
// lane runs the same operations in the same order either way, so the bits
// do not depend on which one runs. Loads take the pair group, which tile
// of it (OneTile only) and the field's offset in one tile's layout.
// kDpbusd: Dot is one vpdpbusd (AVX512-VNNI's EVEX form on AVX3_DL and
// AVX3, AVX-VNNI's VEX form on AVX2).
template <bool kDpbusd>
struct OneTileT {
  static constexpr size_t kTiles = 1;
  static constexpr bool kVnni = kDpbusd;
  using I = __m256i;
  using F = __m256;
  static I Load(const std::byte* pg, size_t half, size_t at) {
    return _mm256_loadu_si256(
        reinterpret_cast<const __m256i_u*>(pg + PairAt(at, kLevelVector, half)));
  }
  // 8 f16 as f32, and 8 bytes as unsigned integers in f32.
  static F LoadF16(const std::byte* pg, size_t half, size_t at) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(pg + PairAt(at, kF16Lanes, half))));
  }
  static F LoadU8(const std::byte* pg, size_t half, size_t at) {
    const std::byte* p = pg + PairAt(at, PackedMatrix::kTileRows, half);
    return _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static F LoadI8(const std::byte* pg, size_t half, size_t at) {
    const std::byte* p = pg + PairAt(at, PackedMatrix::kTileRows, half);
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  // 8 bytes' low (kHigh false) or high nibbles as unsigned integers in f32.
  template <bool kHigh>
  static F LoadNibble(const std::byte* pg, size_t half, size_t at) {
    const std::byte* p = pg + PairAt(at, PackedMatrix::kTileRows, half);
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_cvtepi32_ps(kHigh ? _mm256_srli_epi32(b, 4)
                                    : _mm256_and_si256(b, _mm256_set1_epi32(0x0f)));
  }
  // 8 E8M0 bytes as E8M0Half(e): the f32 bits (e - 1) << 23, or for e < 2
  // the subnormal 1 << (21 + e).
  static F LoadE8M0Half(const std::byte* pg, size_t half, size_t at) {
    const std::byte* p = pg + PairAt(at, PackedMatrix::kTileRows, half);
    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i tiny =
        _mm256_sllv_epi32(_mm256_set1_epi32(1), _mm256_add_epi32(e, _mm256_set1_epi32(21)));
    const __m256i is_tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, is_tiny));
  }
  // A 16-byte table in every 128-bit lane, and bytes idx (< 16) looked up.
  static I Table(const uint8_t* t) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t)));
  }
  static I Lookup(I table, I idx) { return _mm256_shuffle_epi8(table, idx); }
  static I Set1(int32_t v) { return _mm256_set1_epi32(v); }
  static I Or(I a, I b) { return _mm256_or_si256(a, b); }
  // v shifted left by kBits (right when negative) in 16-bit lanes.
  template <int kBits>
  static I ShiftBits(I v) {
    if constexpr (kBits > 0) return _mm256_slli_epi16(v, kBits);
    if constexpr (kBits < 0) return _mm256_srli_epi16(v, -kBits);
    return v;
  }
  static I Bytes(int8_t v) { return _mm256_set1_epi8(v); }
  static I And(I a, I b) { return _mm256_and_si256(a, b); }
  static I Zero() { return _mm256_setzero_si256(); }
  static F ZeroF() { return _mm256_setzero_ps(); }
  static F Set1F(float v) { return _mm256_set1_ps(v); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F ToFloat(I v) { return _mm256_cvtepi32_ps(v); }
  static void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
  // acc + per 32-bit lane the sum of 4 products of w's unsigned bytes and
  // a's signed bytes. kSigned: w holds q + 128 for a signed q (Q8_0), and
  // without VNNI the products are of q itself (no offset to take off
  // afterwards).
  template <bool kSigned>
  static I Dot(I acc, I w, I a) {
    if constexpr (kDpbusd) {
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX3
      // Highway 1.0.3 compiles AVX3_DL with AVX-VNNI enabled too, so GCC
      // would pick the shorter VEX form of _mm256_dpbusd_epi32 ({vex}
      // vpdpbusd), an illegal instruction on AVX-512 VNNI machines without
      // AVX-VNNI (Zen 4, Ice Lake). The EVEX form is what AVX3_DL promises.
      __asm__("%{evex%} vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(w), "v"(a));
#else
      // AVX2 (and AVX3) are not compiled for VNNI: the assembler takes the
      // instruction, which only the RuntimeVnni() instantiation runs.
      __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(w), "x"(a));
#endif
      return acc;
    } else {
      I pairs;
      if constexpr (kSigned) {
        const I q = _mm256_xor_si256(w, _mm256_set1_epi8(-128));
        pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q));
      } else {
        pairs = _mm256_maddubs_epi16(w, a);
      }
      return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
    }
  }
};

using OneTile = OneTileT<kVnni>;

#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX3
// AVX3 runs it only where the CPU has AVX512-VNNI (RuntimeVnni()).
struct TwoTiles {
  static constexpr size_t kTiles = 2;
  static constexpr bool kVnni = true;
  using I = __m512i;
  using F = __m512;
  // Both tiles' fields lie side by side: PairAt(at, unit, 0) == 2 * at.
  static I Load(const std::byte* pg, size_t, size_t at) { return _mm512_loadu_si512(pg + 2 * at); }
  static F LoadF16(const std::byte* pg, size_t, size_t at) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i_u*>(pg + 2 * at)));
  }
  static F LoadU8(const std::byte* pg, size_t, size_t at) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pg + 2 * at))));
  }
  static F LoadI8(const std::byte* pg, size_t, size_t at) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pg + 2 * at))));
  }
  template <bool kHigh>
  static F LoadNibble(const std::byte* pg, size_t, size_t at) {
    const __m512i b =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pg + 2 * at)));
    return _mm512_cvtepi32_ps(kHigh ? _mm512_srli_epi32(b, 4)
                                    : _mm512_and_si512(b, _mm512_set1_epi32(0x0f)));
  }
  static F LoadE8M0Half(const std::byte* pg, size_t, size_t at) {
    const __m512i e =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pg + 2 * at)));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i tiny =
        _mm512_sllv_epi32(_mm512_set1_epi32(1), _mm512_add_epi32(e, _mm512_set1_epi32(21)));
    const __mmask16 is_tiny = _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(is_tiny, normal, tiny));
  }
  static I Table(const uint8_t* t) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t)));
  }
  static I Lookup(I table, I idx) { return _mm512_shuffle_epi8(table, idx); }
  static I Set1(int32_t v) { return _mm512_set1_epi32(v); }
  static I Or(I a, I b) { return _mm512_or_si512(a, b); }
  template <int kBits>
  static I ShiftBits(I v) {
    if constexpr (kBits > 0) return _mm512_slli_epi16(v, kBits);
    if constexpr (kBits < 0) return _mm512_srli_epi16(v, -kBits);
    return v;
  }
  static I Bytes(int8_t v) { return _mm512_set1_epi8(v); }
  static I And(I a, I b) { return _mm512_and_si512(a, b); }
  static I Zero() { return _mm512_setzero_si512(); }
  static F ZeroF() { return _mm512_setzero_ps(); }
  static F Set1F(float v) { return _mm512_set1_ps(v); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F ToFloat(I v) { return _mm512_cvtepi32_ps(v); }
  static void Store(float* p, F v) { _mm512_storeu_ps(p, v); }
  template <bool kSigned>
  static I Dot(I acc, I w, I a) {
#if HWY_TARGET == HWY_AVX3_DL
    return _mm512_dpbusd_epi32(acc, w, a);
#else
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(w), "v"(a));
    return acc;
#endif
  }
};
#endif

template <typename V>
HWY_INLINE typename V::I Broadcast4Bytes(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return V::Set1(v);
}

// Piece kP of a slot from the block's planes at `levels` (16-bit shifts:
// the bits the mask keeps come from the same byte).
template <typename V, LevelPiece kP>
HWY_INLINE typename V::I SlotPiece(const std::byte* pg, size_t half, size_t levels) {
  const typename V::I plane = V::Load(pg, half, levels + kLevelVector * kP.plane);
  const typename V::I shifted = V::template ShiftBits<kP.dst - kP.shift>(plane);
  if constexpr (kP.width == 8) return shifted;
  return V::And(shifted, V::Bytes(static_cast<int8_t>(((1 << kP.width) - 1) << kP.dst)));
}

// Outputs of V::kTiles tiles for kR activation rows act[r] (num_groups *
// kF.group_blocks blocks each): the tiles' first pair group at pg0 (groups
// `stride` bytes apart), OneTile's tile `half` of it; y[r][lane] for lane
// < n_out (the tiles' outputs are consecutive in y).
template <typename V, PackedFormat kF, size_t kR, bool kPrefetch>
HWY_NOINLINE void PackedTile(const std::byte* pg0, size_t half, size_t stride, size_t num_groups,
                             const ActivationBlock* const* act, float* const* y, size_t n_out,
                             [[maybe_unused]] const std::byte* prefetch_end) {
  using I = typename V::I;
  using F = typename V::F;
  constexpr bool kSigned = kF.offset == 128;
  constexpr int kSubtract = kSigned && !V::kVnni ? 0 : kF.offset;
  constexpr bool kSuper =
      kF.scales == PackedScales::kSuperBlock || kF.scales == PackedScales::kSuperHalves;
  constexpr size_t kParts = PartsOf(kF);
  constexpr bool kPartBiases = PartBiases(kF);
  constexpr bool kLookup = kF.lookup != PackedLookup::kNone;
  F acc[kR];
  for (size_t r = 0; r < kR; ++r) acc[r] = V::ZeroF();
  const I table = kLookup ? V::Table(LookupLevels(kF.lookup).data()) : V::Zero();
  for (size_t g = 0; g < num_groups; ++g) {
    const std::byte* pg = pg0 + g * stride;
    // kF16: the block's scale and bias; kSuperBlock: the group's d and
    // -dmin, which each block's 6-bit sc and m multiply (kSuperHalves: each
    // block part's 4-bit ones); kHalfBlocks: the group's d, which each block
    // part's 8-bit sc multiplies.
    const F group_scale =
        kF.scales == PackedScales::kE8M0 ? V::LoadE8M0Half(pg, half, 0) : V::LoadF16(pg, half, 0);
    const F group_bias = kF.has_bias ? V::LoadF16(pg, half, BiasAt()) : V::ZeroF();
    const F neg_group_bias = kSuper ? V::Mul(group_bias, V::Set1F(-1.0f)) : group_bias;
    for (size_t k = 0; k < kF.group_blocks; ++k) {
      const size_t b = g * kF.group_blocks + k;
      if constexpr (kPrefetch) {
        // This block's share of the pair group kPrefetchAhead bytes on.
        const size_t per = (stride + 64 * kF.group_blocks - 1) / (64 * kF.group_blocks) * 64;
        const auto room = static_cast<size_t>(prefetch_end - pg);
        for (size_t at = kPrefetchAhead + k * per;
             at < std::min(kPrefetchAhead + (k + 1) * per, room); at += 64) {
          hwy::Prefetch(pg + at);
        }
      }
      // sum[p][r]: part p of the block (Q6_K's two 16-column halves),
      // starting from the offset's share, -offset * the part's activation
      // sum, so that the dot products leave the exact sum of the part.
      I sum[kParts][kR];
      for (size_t p = 0; p < kParts; ++p) {
        for (size_t r = 0; r < kR; ++r) {
          sum[p][r] = kSubtract != 0 ? V::Set1(-kSubtract * PartSum(kF, act[r][b], p)) : V::Zero();
        }
      }
      // Slot s (columns 4s ... 4s + 3; packed_layout.h): its pieces
      // shifted into place, masked and joined.
      const auto for_slot = [&]<size_t s>() FOLIO_PACKED_ATTR {
        constexpr SlotLayout kSlot = SlotOf(kF.bits, s);
        I level = SlotPiece<V, kSlot.piece[0]>(pg, half, LevelsAt(kF, k));
        if constexpr (kSlot.count > 1) {
          level = V::Or(level, SlotPiece<V, kSlot.piece[1]>(pg, half, LevelsAt(kF, k)));
        }
        if constexpr (kSlot.count > 2) {
          level = V::Or(level, SlotPiece<V, kSlot.piece[2]>(pg, half, LevelsAt(kF, k)));
        }
        if constexpr (kLookup) level = V::Lookup(table, level);  // indices to levels
        constexpr size_t kPart = s * kParts / 8;
        for (size_t r = 0; r < kR; ++r) {
          sum[kPart][r] = V::template Dot<kSigned>(sum[kPart][r], level,
                                                   Broadcast4Bytes<V>(act[r][b].q + 4 * s));
        }
      };
      [&]<size_t... kS>(std::index_sequence<kS...>) FOLIO_PACKED_ATTR {
        (for_slot.template operator()<kS>(), ...);
      }
      (std::make_index_sequence<8>{});
      F scale[kParts], bias = neg_group_bias;
      [[maybe_unused]] F part_bias[kParts];
      scale[0] = group_scale;
      if constexpr (kF.scales == PackedScales::kSuperBlock) {
        const size_t at = PackedMatrix::kTileRows * k;
        scale[0] = V::Mul(group_scale, V::LoadU8(pg, half, SubScalesAt(kF) + at));
        bias = V::Mul(neg_group_bias, V::LoadU8(pg, half, SubMinsAt(kF) + at));
      } else if constexpr (kF.scales == PackedScales::kSuperHalves) {
        for (size_t p = 0; p < kParts; ++p) {
          const size_t at = SubScalesAt(kF) + PackedMatrix::kTileRows * (kParts * k + p);
          scale[p] = V::Mul(group_scale, V::template LoadNibble<false>(pg, half, at));
          part_bias[p] = V::Mul(neg_group_bias, V::template LoadNibble<true>(pg, half, at));
        }
      } else if constexpr (kF.scales == PackedScales::kSignedBlocks) {
        scale[0] =
            V::Mul(group_scale, V::LoadI8(pg, half, SubScalesAt(kF) + PackedMatrix::kTileRows * k));
      } else if constexpr (kF.scales == PackedScales::kHalfBlocks) {
        for (size_t p = 0; p < kParts; ++p) {
          const size_t at = PackedMatrix::kTileRows * (kParts * k + p);
          scale[p] = V::Mul(group_scale, V::LoadI8(pg, half, SubScalesAt(kF) + at));
        }
      }
      for (size_t r = 0; r < kR; ++r) {
        const ActivationBlock& a = act[r][b];
        for (size_t p = 0; p < kParts; ++p) {
          acc[r] = V::Fma(V::Mul(scale[p], V::Set1F(a.d)), V::ToFloat(sum[p][r]), acc[r]);
          if constexpr (kPartBiases) {
            const float e = a.d * static_cast<float>(PartSum(kF, a, p));
            acc[r] = V::Fma(part_bias[p], V::Set1F(e), acc[r]);
          }
        }
        if constexpr (kF.has_bias && !kPartBiases) acc[r] = V::Fma(bias, V::Set1F(a.e), acc[r]);
      }
    }
  }
  constexpr size_t kOut = V::kTiles * PackedMatrix::kTileRows;
  for (size_t r = 0; r < kR; ++r) {
    if (n_out == kOut) {
      V::Store(y[r], acc[r]);
    } else {
      alignas(64) float out[kOut];
      V::Store(out, acc[r]);
      std::copy_n(out, n_out, y[r]);
    }
  }
}

// Tiles [tile, tile + V::kTiles) for activation rows [r0, r0 + rn), in
// groups of at most kMaxRows rows.
template <typename V, PackedFormat kF>
HWY_INLINE void PackedTiles(const PackedTask& t, uint64_t tile, uint64_t r0, uint64_t rn) {
  const PackedMatrix& w = *t.w;
  const size_t blocks = w.num_blocks(), groups = w.num_groups();
  const size_t stride = w.group_stride();
  const size_t n_out = std::min<uint64_t>(V::kTiles * PackedMatrix::kTileRows,
                                          w.rows() - tile * PackedMatrix::kTileRows);
  const std::byte* pg0 = w.pair_group(tile / 2, 0);
  const size_t half = tile % 2;
  for (uint64_t r = r0; r < r0 + rn; r += kMaxRows) {
    const ActivationBlock* act[kMaxRows];
    float* y[kMaxRows];
    const size_t n = std::min<uint64_t>(kMaxRows, r0 + rn - r);
    for (size_t k = 0; k < n; ++k) {
      act[k] = t.act + (r + k) * blocks;
      y[k] = t.y + (r + k) * t.y_stride + tile * PackedMatrix::kTileRows;
    }
    // Decode's one pass over the tiles (a batch or a verify step of at
    // most kMaxRows rows) prefetches their weights. Prefill's passes do
    // not: its later row groups find the weights in cache, and carrying
    // the prefetch through its tiles ran pp512 0.82x (synthetic 0.9B
    // Q6_K, 3 pairs), so it has instantiations without.
    const bool prefetch = rn <= kMaxRows && t.prefetch_end != nullptr;
    // PackedTile<kR> for kR = n, one instantiation per count up to kMaxRows.
    [&]<size_t... kIndex>(std::index_sequence<kIndex...>) FOLIO_PACKED_ATTR {
      (void)((n == kIndex + 1 &&
              (prefetch ? PackedTile<V, kF, kIndex + 1, true>(pg0, half, stride, groups, act, y,
                                                              n_out, t.prefetch_end)
                        : PackedTile<V, kF, kIndex + 1, false>(pg0, half, stride, groups, act, y,
                                                               n_out, nullptr),
               true)) ||
             ...);
    }
    (std::make_index_sequence<kMaxRows>{});
  }
}

// kRuntimeVnni: the AVX2 or AVX3 target's walk with vpdpbusd.
template <PackedFormat kF, bool kRuntimeVnni>
void PackedRowsT(const PackedTask& t) {
  using Single = OneTileT<kVnni || kRuntimeVnni>;
  for (uint64_t r0 = 0; r0 < t.num_rows; r0 += kActBlock) {
    const uint64_t rn = std::min<uint64_t>(kActBlock, t.num_rows - r0);
    uint64_t tile = t.tile_begin;
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX3
    if constexpr (kVnni || kRuntimeVnni) {  // pairs as stored: (2p, 2p + 1)
      if (tile % 2 == 1 && tile < t.tile_end) PackedTiles<Single, kF>(t, tile++, r0, rn);
      for (; tile + 2 <= t.tile_end; tile += 2) PackedTiles<TwoTiles, kF>(t, tile, r0, rn);
    }
#endif
    for (; tile < t.tile_end; ++tile) PackedTiles<Single, kF>(t, tile, r0, rn);
  }
}

template <bool kRuntimeVnni>
void PackedRowsFor(const PackedTask& t) {
  switch (t.w->type()) {
    case WeightType::kQ4_0:
      return PackedRowsT<PackedFormatOf(WeightType::kQ4_0), kRuntimeVnni>(t);
    case WeightType::kQ4_1:
      return PackedRowsT<PackedFormatOf(WeightType::kQ4_1), kRuntimeVnni>(t);
    case WeightType::kQ4_K:
      return PackedRowsT<PackedFormatOf(WeightType::kQ4_K), kRuntimeVnni>(t);
    case WeightType::kQ5_0:
      return PackedRowsT<PackedFormatOf(WeightType::kQ5_0), kRuntimeVnni>(t);
    case WeightType::kQ5_1:
      return PackedRowsT<PackedFormatOf(WeightType::kQ5_1), kRuntimeVnni>(t);
    case WeightType::kQ5_K:
      return PackedRowsT<PackedFormatOf(WeightType::kQ5_K), kRuntimeVnni>(t);
    case WeightType::kQ8_0:
      return PackedRowsT<PackedFormatOf(WeightType::kQ8_0), kRuntimeVnni>(t);
    case WeightType::kQ6_K:
      return PackedRowsT<PackedFormatOf(WeightType::kQ6_K), kRuntimeVnni>(t);
    case WeightType::kIQ4_NL:
      return PackedRowsT<PackedFormatOf(WeightType::kIQ4_NL), kRuntimeVnni>(t);
    case WeightType::kIQ4_XS:
      return PackedRowsT<PackedFormatOf(WeightType::kIQ4_XS), kRuntimeVnni>(t);
    case WeightType::kMXFP4:
      return PackedRowsT<PackedFormatOf(WeightType::kMXFP4), kRuntimeVnni>(t);
    case WeightType::kQ2_K:
      return PackedRowsT<PackedFormatOf(WeightType::kQ2_K), kRuntimeVnni>(t);
    case WeightType::kQ3_K:
      return PackedRowsT<PackedFormatOf(WeightType::kQ3_K), kRuntimeVnni>(t);
    case WeightType::kF64:  // PackedMatrix::Pack accepts none of these
    case WeightType::kF32:
    case WeightType::kF16:
    case WeightType::kBF16:
      break;
  }
  FOLIO_CHECK(false, "no packed kernel for ", WeightTypeName(t.w->type()));
}

void PackedRowsImpl(const PackedTask& t) {
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
  if (RuntimeVnni(HWY_TARGET == HWY_AVX3)) return PackedRowsFor<true>(t);
#endif
  PackedRowsFor<false>(t);
}

#else  // every other target: the scalar chain

void PackedRowsImpl(const PackedTask& t) {
  const PackedMatrix& w = *t.w;
  for (uint64_t r = 0; r < t.num_rows; ++r) {
    const ActivationBlock* act = t.act + r * w.num_blocks();
    for (uint64_t tile = t.tile_begin; tile < t.tile_end; ++tile) {
      for (size_t lane = 0; lane < PackedMatrix::kTileRows; ++lane) {
        const uint64_t j = tile * PackedMatrix::kTileRows + lane;
        if (j < w.rows()) t.y[r * t.y_stride + j] = PackedDot(w, tile, lane, act);
      }
    }
  }
}

#endif

const char* PackedTargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace folio::ops::internal
#if HWY_TARGET == HWY_AVX3_DL && defined(__clang__)
HWY_POP_ATTRIBUTES
#else
HWY_AFTER_NAMESPACE();
#endif

#if HWY_ONCE
namespace folio::ops::internal {
HWY_EXPORT(PackedRowsImpl);
HWY_EXPORT(QuantizeActivationsImpl);
HWY_EXPORT(PackedTargetNameImpl);
void PackedRows(const PackedTask& task) { HWY_DYNAMIC_DISPATCH(PackedRowsImpl)(task); }
void QuantizeActivationsSimd(const float* x, size_t num_blocks, ActivationBlock* out) {
  HWY_DYNAMIC_DISPATCH(QuantizeActivationsImpl)(x, num_blocks, out);
}
const char* PackedTargetName() { return HWY_DYNAMIC_DISPATCH(PackedTargetNameImpl)(); }
}  // namespace folio::ops::internal
#endif
