// The SIMD matmul kernel, compiled once per Highway target (the SCALAR
// fallback, AVX2, AVX-512) and dispatched at run time to the best the CPU
// has. A task computes outputs [row_begin, row_end) for all its activation
// rows, in one of two ways:
//
// - Decode (up to kMaxDecodeRows activation rows: one sequence's token, a
//   small decode batch or a speculative verify step): a stream over the
//   stored bytes. Tiles of weight rows (8 for 1 activation row, 4 for 2, 2
//   for 3 or 4, 1 for 5 to 7) are read straight from their stored type and
//   decoded in registers (element types widened; quantized blocks unpacked
//   by their codec below), and each decoded vector feeds the multiply-add
//   chains of every activation row, so a weight is decoded and read from
//   memory once per call.
// - Prefill (more rows): blocks of kBlockOut outputs x kBlockAct
//   activation rows, walked in chunks of kChunkCols columns. Each chunk of
//   the block's weight rows is decoded once into a small buffer of f32 and
//   then used by every activation row of the block through register tiles
//   of kTileRows x PanelCols, whose accumulators persist in a buffer
//   between chunks. A weight row is read from memory once per activation
//   block (once per call up to kBlockAct rows), and everything a tile
//   touches stays in L2.
//
// Numeric choices (matmul.h states the order): accumulation is f32, as
// memory-speed decode can afford; each (activation row, output) pair owns
// exactly one vector accumulator that walks the columns in increasing order
// — a vector stored between chunks and loaded back is the same vector — so
// the path, the tile shape, the chunking, the task split and the rows in a
// call never change a bit. Decoding gives DequantizeRow's values (widening
// is exact; a quantized element rounds once, as DequantizeRow's does), so
// decoding in registers or into the buffer gives the same operands. The
// scalar tail uses std::fma so that its rounding does not depend on
// whether the compiler contracts a * b + c.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#include "folio/core/dtype.h"
#include "ops/block_layout.h"
#include "ops/matmul_internal.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_kernel.cc"
// foreach_target.h re-includes this file once per target: it comes first.
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace folio::ops::internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// f32 lanes of this target (fixed-width targets only: 1 on SCALAR).
constexpr size_t kLanes = HWY_LANES(float);
static_assert(16 % kLanes == 0, "a sub-block (16 or 32 elements) must fill whole vectors");
// Decode: outputs per tile (8 beat 4 in a 1-thread bf16 measurement here,
// 0.86 vs 0.82 of the streaming-read bandwidth).
constexpr size_t kDecodeCols = 8;
// Up to this many activation rows (a small decode batch, a speculative
// verify step) take the decode path, which decodes each weight once for all
// of them; more take prefill, which decodes a chunk once into a buffer for
// up to kBlockAct. Measured (SmolLM2-135M Q4_1, 2 threads, engine decode
// steps, decode path vs prefill path): x1.48 at 2 rows, x1.22 at 4
// (2026-12-01), x1.17 at 5, x1.16 at 6, x1.15 at 7, x0.97 at 8
// (2026-12-02; docs/performance-log.md).
constexpr size_t kMaxDecodeRows = 7;
static_assert(kMaxDecodeRows <= kDecodeCols, "a decode tile holds at least one weight row");
// Decode: software prefetch distance along each weight row. The hardware
// prefetchers restart at every 4 KiB page of each of the 8 row streams;
// prefetching 512 bytes ahead lifted 2-thread bf16 decode from ~0.82 to
// ~0.88 of the streaming-read bandwidth (medians of 4 runs; 1024 and 4096
// did worse).
constexpr size_t kPrefetchBytes = 512;
// Prefill register tile: kTileRows activation rows x PanelCols<kSub>()
// weight rows. AVX-512's 32 vector registers hold 4 x 6 accumulators beside
// the 6 weight vectors and one activation vector: each activation vector
// loaded (from L2) feeds 6 multiply-adds, where 4 x 4 fed 4 (F16 MatMul
// calls of 512 rows 1.09-1.48x as fast, median 1.15, on SmolLM2's shapes
// and 4096 x 4096, 1 and 2 threads, paired runs on the Intel Xeon VM,
// 2026-12-07; performance-log.md). A factored panel (Q8_0 in f32 mode)
// keeps a sub-block's activation vectors of all 4 rows live, so it takes
// 4 x 4; AVX2's 16 registers hold 2 x 4.
constexpr size_t kTileRows = HWY_MAX_BYTES >= 64 ? 4 : 2;
template <size_t kSub>
constexpr size_t PanelCols() {
  return HWY_MAX_BYTES >= 64 && kSub == 0 ? 6 : 4;
}
// Prefill blocking: the widened chunk (kBlockOut x 1024 f32, 96 KiB on
// AVX-512, 128 KiB elsewhere), the accumulators (128 x kBlockOut vectors,
// 192 KiB on AVX-512) and the activation chunk (128 x 1024 f32, 512 KiB)
// fit in a 1 MiB L2 together. kBlockOut is a whole number of column tiles:
// 24 = 4 x 6 on AVX-512 (48 was no faster on the Xeon VM and would not fit
// 1 MiB), 32 elsewhere. Each weight chunk is widened once per kBlockAct
// activation rows: 128 rather than 64 made SmolLM2 pp512 7% faster for F16
// and Q4_1 in f32 mode (AMD EPYC, 2 threads, 6 and 4 alternated pairs,
// 2026-12-07).
constexpr size_t kBlockOut = HWY_MAX_BYTES >= 64 ? 24 : 32;
constexpr size_t kBlockAct = 128;
constexpr size_t kChunkCols = 1024;
static_assert(kChunkCols % 256 == 0);  // whole blocks per chunk
static_assert(kBlockOut % PanelCols<0>() == 0 && kBlockOut % PanelCols<16>() == 0);

// ------------------------------------------------------- block codecs
//
// A quantized type is read through a codec: its blocks (kBlock elements,
// kBytes bytes) are cut into sub-blocks of kSub elements that share one
// scale and, for the types with a min, one bias. For sub-block g of a block
// at b, Q(b, g, v) is vector v (elements v * kLanes ...) of its integer
// levels as f32 (exact: they are small integers), Scale and Bias broadcast
// the sub-block's scale and bias, and Weights combines them into the
// elements' f32 values, DequantizeRow's bit for bit.
// Open unpacks what a whole block shares (the K-quants' packed scales) once
// into a Head. Every field is read with unaligned loads of at most
// kLanes bytes inside the block, so nothing reads past a block.

using DI = hn::RebindToSigned<DF>;
using VI = hn::Vec<DI>;
using DU = hn::RebindToUnsigned<DF>;

// kLanes bytes at p, each widened to an i32 lane.
HWY_INLINE VI Bytes(const std::byte* p) {
  return hn::PromoteTo(DI(),
                       hn::LoadU(hn::Rebind<uint8_t, DF>(), reinterpret_cast<const uint8_t*>(p)));
}
HWY_INLINE VI SignedBytes(const std::byte* p) {
  return hn::PromoteTo(DI(),
                       hn::LoadU(hn::Rebind<int8_t, DF>(), reinterpret_cast<const int8_t*>(p)));
}
// The low (high = false) or high nibbles of kLanes bytes at p.
HWY_INLINE VI Nibbles(const std::byte* p, bool high) {
  const VI b = Bytes(p);
  return high ? hn::ShiftRight<4>(b) : hn::And(b, hn::Set(DI(), 0x0f));
}
// (v >> shift) & mask per lane (shift the same for every lane).
HWY_INLINE VI Bits(VI v, int shift, int mask) {
  return hn::And(hn::ShiftRightSame(v, shift), hn::Set(DI(), mask));
}
HWY_INLINE VF Float(VI q) { return hn::ConvertTo(DF(), q); }
HWY_INLINE float F16Scalar(const std::byte* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return F16BitsToF32(bits);
}
// An f16 at p broadcast to every lane: one broadcast and one vector
// conversion, rather than a scalar conversion and a broadcast.
HWY_INLINE VF F16Vec(const std::byte* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(DF(), hn::BitCast(dh, hn::Set(hn::RebindToUnsigned<decltype(dh)>(), bits)));
}

// out[i] = scale * float(bytes[i]) for i < n (a multiple of 8), bytes
// unsigned (kSigned false) or int8: the K-quants' sub-block scales, in
// vectors. The products are exact (an f16 times a small integer), as in
// DequantizeRow.
template <bool kSigned>
HWY_INLINE void ScaleBytes(const uint8_t* bytes, size_t n, float scale, float* out) {
  const hn::CappedTag<float, 8> d8;
  const hn::RebindToSigned<decltype(d8)> di8;
  for (size_t i = 0; i < n; i += hn::Lanes(d8)) {
    hn::Vec<decltype(di8)> q;
    if constexpr (kSigned) {
      q = hn::PromoteTo(di8, hn::LoadU(hn::Rebind<int8_t, decltype(d8)>(),
                                       reinterpret_cast<const int8_t*>(bytes + i)));
    } else {
      q = hn::PromoteTo(di8, hn::LoadU(hn::Rebind<uint8_t, decltype(d8)>(), bytes + i));
    }
    hn::StoreU(hn::Mul(hn::Set(d8, scale), hn::ConvertTo(d8, q)), d8, out + i);
  }
}

struct NoHead {};

// Q8_0: d, int8 q[32].
struct CodecQ8_0 {
  static constexpr WeightType kType = WeightType::kQ8_0;
  static constexpr size_t kSub = 32;
  static constexpr bool kHasBias = false;
  using Head = NoHead;
  static HWY_INLINE void Open(const std::byte*, Head&) {}
  static HWY_INLINE VF Q(const std::byte* b, size_t, size_t v) {
    return Float(SignedBytes(b + kQ8_0ScaleBytes + v * kLanes));
  }
  static HWY_INLINE VF Scale(const std::byte* b, const Head&, size_t) { return F16Vec(b); }
  static HWY_INLINE VF Bias(const std::byte*, const Head&, size_t) { return hn::Zero(DF()); }
};

// The legacy 4- and 5-bit blocks (d, [m], [u32 qh], qs[16]): element j's
// low bits are nibble j / 16 of qs[j % 16], bit 4 is bit j of qh.
template <WeightType kT>
struct CodecLegacy {
  static constexpr WeightType kType = kT;
  static constexpr size_t kSub = 32;
  static constexpr bool kHasMin = kT == WeightType::kQ4_1 || kT == WeightType::kQ5_1;
  static constexpr bool kFiveBit = kT == WeightType::kQ5_0 || kT == WeightType::kQ5_1;
  static constexpr int kOffset = kT == WeightType::kQ4_0 ? 8 : kT == WeightType::kQ5_0 ? 16 : 0;
  // Every legacy type is decoded as scale * q + bias: the _1 types' bias is
  // m, the _0 types' is -offset * d, so (q - offset) * d needs no integer
  // subtract per vector. Both products are exact (an f16 d times a small
  // integer), and so is their sum, d * (q - offset): the fused step gives
  // DequantizeRow's value exactly.
  static constexpr bool kHasBias = true;
  static constexpr size_t kQhAt = kHasMin ? 4 : 2;
  static constexpr size_t kQsAt = kQhAt + (kFiveBit ? 4 : 0);
  static_assert(kLanes <= 16, "a vector of a legacy block reads one half of its nibbles");
  using Head = NoHead;
  static HWY_INLINE void Open(const std::byte*, Head&) {}
  static HWY_INLINE VF Q(const std::byte* b, size_t, size_t v) {
    const size_t e = v * kLanes;
    VI q = Nibbles(b + kQsAt + e % 16, e >= 16);
    if constexpr (kFiveBit) {
      uint32_t qh;
      std::memcpy(&qh, b + kQhAt, 4);
      const auto bit = hn::And(hn::Shr(hn::Set(DU(), qh), hn::Iota(DU(), static_cast<uint32_t>(e))),
                               hn::Set(DU(), 1));
      q = hn::Or(q, hn::ShiftLeft<4>(hn::BitCast(DI(), bit)));
    }
    return Float(q);
  }
  static HWY_INLINE VF Scale(const std::byte* b, const Head&, size_t) { return F16Vec(b); }
  static HWY_INLINE VF Bias(const std::byte* b, const Head&, size_t) {
    if constexpr (kHasMin) {
      return F16Vec(b + 2);
    } else {
      return hn::Mul(F16Vec(b), hn::Set(DF(), static_cast<float>(-kOffset)));
    }
  }
};

// Q4_K and Q5_K (d, dmin, scales[12], [qh[32]], qs[128]): sub-block g of
// 32 takes nibble g % 2 of qs[32 (g / 2) + l] and (Q5_K) bit g of qh[l];
// scale d * sc, bias -(dmin * m).
template <WeightType kT>
struct CodecQ45K {
  static constexpr WeightType kType = kT;
  static constexpr size_t kSub = 32;
  static constexpr bool kHasBias = true;
  static constexpr bool kFiveBit = kT == WeightType::kQ5_K;
  static constexpr KQuantFields kAt = KQuantFieldsOf(kT);
  struct Head {
    float scale[8], bias[8];
  };
  // ScaleMinK4 for all 8 sub-blocks at once, on 32-bit words (ggml's
  // kmask shuffle): scales[g] and mins[g] as bytes, then in vectors.
  static HWY_INLINE void Open(const std::byte* b, Head& h) {
    uint32_t w[3];
    std::memcpy(w, b + kAt.scales, 12);
    constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kTop2 = 0x03030303;
    const uint32_t packed[4] = {w[0] & kLow6,                                   // scales 0-3
                                (w[2] & kLow4) | (((w[0] >> 6) & kTop2) << 4),  // scales 4-7
                                w[1] & kLow6,                                   // mins 0-3
                                ((w[2] >> 4) & kLow4) | (((w[1] >> 6) & kTop2) << 4)};  // mins 4-7
    uint8_t bytes[16];
    std::memcpy(bytes, packed, 16);
    ScaleBytes<false>(bytes, 8, F16Scalar(b + kAt.d), h.scale);
    ScaleBytes<false>(bytes + 8, 8, -F16Scalar(b + kAt.dmin), h.bias);
  }
  static HWY_INLINE VF Q(const std::byte* b, size_t g, size_t v) {
    const size_t l = v * kLanes;
    VI q = Nibbles(b + kAt.low + 32 * (g / 2) + l, g % 2 != 0);
    if constexpr (kFiveBit) {
      q = hn::Or(q, hn::ShiftLeft<4>(Bits(Bytes(b + kAt.high + l), static_cast<int>(g), 1)));
    }
    return Float(q);
  }
  static HWY_INLINE VF Scale(const std::byte*, const Head& h, size_t g) {
    return hn::Set(DF(), h.scale[g]);
  }
  static HWY_INLINE VF Bias(const std::byte*, const Head& h, size_t g) {
    return hn::Set(DF(), h.bias[g]);
  }
};

// Q6_K (ql[128], qh[64], int8 scales[16], d): sub-block g of 16 is half n
// = g / 8, group k = g % 8 / 2, part h = g % 2: element l (16h ...) of the
// group has nibble k / 2 of ql[64n + 32 (k % 2) + l] and bits 2k, 2k + 1 of
// qh[32n + l] as bits 4-5; q - 32, scale d * scales[g].
struct CodecQ6K {
  static constexpr WeightType kType = WeightType::kQ6_K;
  static constexpr size_t kSub = 16;
  static constexpr bool kHasBias = false;
  static constexpr KQuantFields kAt = KQuantFieldsOf(kType);
  struct Head {
    float scale[16];
  };
  static HWY_INLINE void Open(const std::byte* b, Head& h) {
    ScaleBytes<true>(reinterpret_cast<const uint8_t*>(b + kAt.scales), 16, F16Scalar(b + kAt.d),
                     h.scale);
  }
  static HWY_INLINE VF Q(const std::byte* b, size_t g, size_t v) {
    const size_t n = g / 8, k = g % 8 / 2, l = 16 * (g % 2) + v * kLanes;
    const VI low = Nibbles(b + kAt.low + 64 * n + 32 * (k % 2) + l, k >= 2);
    const VI high = Bits(Bytes(b + kAt.high + 32 * n + l), static_cast<int>(2 * k), 3);
    return Float(hn::Sub(hn::Or(low, hn::ShiftLeft<4>(high)), hn::Set(DI(), 32)));
  }
  static HWY_INLINE VF Scale(const std::byte*, const Head& h, size_t g) {
    return hn::Set(DF(), h.scale[g]);
  }
  static HWY_INLINE VF Bias(const std::byte*, const Head&, size_t) { return hn::Zero(DF()); }
};

// Q2_K (scales[16], qs[64], d, dmin) and Q3_K (hmask[32], qs[64],
// scales[12], d): sub-block g of 16 is half n = g / 8, group k = g % 8 / 2,
// part h = g % 2, and takes bits 2k, 2k + 1 of qs[32n + 16h + l]. Q2_K:
// scale d * (s & 15), bias -(dmin * (s >> 4)) for s = scales[g]. Q3_K: q - 4
// unless bit 4n + k of hmask[16h + l] is set, scale d * (ScaleQ3K - 32).
template <WeightType kT>
struct CodecQ23K {
  static constexpr WeightType kType = kT;
  static constexpr size_t kSub = 16;
  static constexpr bool kQ3 = kT == WeightType::kQ3_K;
  static constexpr bool kHasBias = !kQ3;
  static constexpr KQuantFields kAt = KQuantFieldsOf(kT);
  struct Head {
    float scale[16], bias[16];
  };
  static HWY_INLINE void Open(const std::byte* b, Head& h) {
    if constexpr (kQ3) {
      const float d = F16Scalar(b + kAt.d);
      for (size_t g = 0; g < 16; ++g) {
        h.scale[g] = d * static_cast<float>(static_cast<int>(ScaleQ3K(g, b + kAt.scales)) - 32);
      }
    } else {
      const float d = F16Scalar(b + kAt.d), dmin = F16Scalar(b + kAt.dmin);
      for (size_t g = 0; g < 16; ++g) {
        const auto s = std::to_integer<uint32_t>(b[kAt.scales + g]);
        h.scale[g] = d * static_cast<float>(s & 0x0f);
        h.bias[g] = -(dmin * static_cast<float>(s >> 4));
      }
    }
  }
  static HWY_INLINE VF Q(const std::byte* b, size_t g, size_t v) {
    const size_t n = g / 8, k = g % 8 / 2, l = 16 * (g % 2) + v * kLanes;
    VI q = Bits(Bytes(b + kAt.low + 32 * n + l), static_cast<int>(2 * k), 3);
    if constexpr (kQ3) {
      const VI set = Bits(Bytes(b + kAt.high + l), static_cast<int>(4 * n + k), 1);
      q = hn::Sub(hn::Or(q, hn::ShiftLeft<2>(set)), hn::Set(DI(), 4));
    }
    return Float(q);
  }
  static HWY_INLINE VF Scale(const std::byte*, const Head& h, size_t g) {
    return hn::Set(DF(), h.scale[g]);
  }
  static HWY_INLINE VF Bias(const std::byte*, const Head& h, size_t g) {
    return hn::Set(DF(), h.bias[g]);
  }
};

// IQ4_NL (d, qs[16] per 32) and IQ4_XS (d, u16 scales_h, scales_l[4],
// qs[128] per 256): sub-block g of 32 has the legacy nibble order in
// qs[16g ...], each nibble a level of kIq4nlValues; scale d (IQ4_NL) or d *
// (ScaleIq4Xs - 32).
alignas(64) constexpr float kIq4Levels[16] = {
    kIq4nlValues[0],  kIq4nlValues[1],  kIq4nlValues[2],  kIq4nlValues[3],
    kIq4nlValues[4],  kIq4nlValues[5],  kIq4nlValues[6],  kIq4nlValues[7],
    kIq4nlValues[8],  kIq4nlValues[9],  kIq4nlValues[10], kIq4nlValues[11],
    kIq4nlValues[12], kIq4nlValues[13], kIq4nlValues[14], kIq4nlValues[15]};
template <WeightType kT>
struct CodecIq4 {
  static constexpr WeightType kType = kT;
  static constexpr size_t kSub = 32;
  static constexpr bool kHasBias = false;
  static constexpr bool kXs = kT == WeightType::kIQ4_XS;
  static constexpr size_t kQsAt = kXs ? 8 : 2;
  struct Head {
    float scale[kXs ? 8 : 1];
  };
  static HWY_INLINE void Open(const std::byte* b, Head& h) {
    if constexpr (kXs) {
      const float d = F16Scalar(b);
      const uint32_t scales_h = std::to_integer<uint32_t>(b[2]) | std::to_integer<uint32_t>(b[3])
                                                                      << 8;
      for (size_t g = 0; g < 8; ++g) {
        h.scale[g] = d * static_cast<float>(static_cast<int>(ScaleIq4Xs(g, scales_h, b + 4)) - 32);
      }
    }
  }
  static HWY_INLINE VF Q(const std::byte* b, size_t g, size_t v) {
    const size_t e = v * kLanes;
    return hn::GatherIndex(DF(), kIq4Levels, Nibbles(b + kQsAt + 16 * g + e % 16, e >= 16));
  }
  static HWY_INLINE VF Scale(const std::byte* b, const Head& h, size_t g) {
    if constexpr (kXs) {
      return hn::Set(DF(), h.scale[g]);
    } else {
      return F16Vec(b);
    }
  }
  static HWY_INLINE VF Bias(const std::byte*, const Head&, size_t) { return hn::Zero(DF()); }
};

// MXFP4 (u8 e, qs[16] per 32): IQ4_NL's nibble order, each nibble a level
// of kMxfp4Values; scale E8M0Half(e), so Scale * Q is DequantizeRow's
// product.
alignas(64) constexpr float kMxfp4Levels[16] = {
    kMxfp4Values[0],  kMxfp4Values[1],  kMxfp4Values[2],  kMxfp4Values[3],
    kMxfp4Values[4],  kMxfp4Values[5],  kMxfp4Values[6],  kMxfp4Values[7],
    kMxfp4Values[8],  kMxfp4Values[9],  kMxfp4Values[10], kMxfp4Values[11],
    kMxfp4Values[12], kMxfp4Values[13], kMxfp4Values[14], kMxfp4Values[15]};
struct CodecMxfp4 {
  static constexpr WeightType kType = WeightType::kMXFP4;
  static constexpr size_t kSub = 32;
  static constexpr bool kHasBias = false;
  using Head = NoHead;
  static HWY_INLINE void Open(const std::byte*, Head&) {}
  static HWY_INLINE VF Q(const std::byte* b, size_t, size_t v) {
    const size_t e = v * kLanes;
    return hn::GatherIndex(DF(), kMxfp4Levels, Nibbles(b + 1 + e % 16, e >= 16));
  }
  static HWY_INLINE VF Scale(const std::byte* b, const Head&, size_t) {
    return hn::Set(DF(), E8M0Half(std::to_integer<uint32_t>(b[0])));
  }
  static HWY_INLINE VF Bias(const std::byte*, const Head&, size_t) { return hn::Zero(DF()); }
};

// True for the codecs above; false for the element types (float, f16, bf16).
template <typename K>
constexpr bool kIsBlock = requires {
  K::kSub;
};
template <class C>
constexpr size_t kBlockElems = TraitsOf(C::kType).block_size;
template <class C>
constexpr size_t kBlockBytes = TraitsOf(C::kType).block_bytes;
template <class C>
constexpr size_t kSubVecs = C::kSub / kLanes;

// Exact widening of a stored element type S.
template <typename S>
HWY_INLINE VF LoadWide(DF d, const S* p) {
  if constexpr (std::is_same_v<S, float>) {
    return hn::LoadU(d, p);
  } else {
    return hn::PromoteTo(d, hn::LoadU(hn::Rebind<S, DF>(), p));
  }
}
template <typename S>
HWY_INLINE float ScalarWide(const S* p) {
  const hn::CappedTag<float, 1> d1;
  if constexpr (std::is_same_v<S, float>) {
    float v;  // rows need no alignment
    std::memcpy(&v, p, sizeof(v));
    return v;
  } else {
    return hn::GetLane(hn::PromoteTo(d1, hn::LoadU(hn::CappedTag<S, 1>(), p)));
  }
}

// s plus (element types) the scalar tail of a row's product in order.
template <typename K>
HWY_INLINE float AddTail(float s, const std::byte* w_row, const float* x, size_t cols) {
  if constexpr (!kIsBlock<K>) {
    const auto* w = reinterpret_cast<const K*>(w_row);
    for (size_t i = cols - cols % kLanes; i < cols; ++i) s = std::fma(ScalarWide(w + i), x[i], s);
  }
  return s;
}

#undef FOLIO_MATMUL_LANE_SUMS
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX2
// Lane k of the result = the lane sum of v[k], for kLanes accumulators at
// once, each by the tree SumOfLanes runs on these targets (GCC's
// _mm512_reduce_add_ps, Highway's AVX2 SumOfLanes): lane i + N/2 added to
// lane i, then i + N/4, and so on to one lane. Each step adds two
// accumulators' halves in one vector op: about 3 ops a sum where a lone
// tree takes 8 in a dependent chain, and each sum has SumOfLanes' bits.
// (Addition commutes, so only a NaN's payload could tell the operand order
// apart.)
HWY_INLINE VF LaneSumsOf(const VF* v) {
  const DF d;
  const hn::Repartition<double, DF> d64;
  constexpr size_t kBlocks = kLanes / 4;  // 128-bit blocks: 4 on AVX-512, 2 on AVX2
  // The steps below leave slot s's sum in lane (s & ~(2 kBlocks - 1)) |
  // (s % kBlocks) << 1 | (s / kBlocks) % 2; slot s takes the v whose sum
  // belongs there, so that lane k comes out as v[k]'s.
  VF slot[kLanes];
  for (size_t s = 0; s < kLanes; ++s) {
    slot[s] = v[(s & ~(2 * kBlocks - 1)) | ((s % kBlocks) << 1) | ((s / kBlocks) % 2)];
  }
  // Lanes N/2 ... onto 0 ...: u[m] holds slot 2m's half and slot 2m + 1's.
  VF u[kLanes / 2];
  for (size_t m = 0; m < kLanes / 2; ++m) {
    u[m] = hn::Add(hn::ConcatUpperUpper(d, slot[2 * m + 1], slot[2 * m]),
                   hn::ConcatLowerLower(d, slot[2 * m + 1], slot[2 * m]));
  }
  const VF* quads = u;  // blocks of 4 lanes, one slot each
#if HWY_TARGET == HWY_AVX3
  // Lanes 4..7 onto 0..3: block j of w[m] is slot 4m + j.
  VF w[4];
  for (size_t m = 0; m < 4; ++m) {
    w[m] = VF{_mm512_add_ps(_mm512_shuffle_f32x4(u[2 * m].raw, u[2 * m + 1].raw, 0xDD),
                            _mm512_shuffle_f32x4(u[2 * m].raw, u[2 * m + 1].raw, 0x88))};
  }
  quads = w;
#endif
  // Lanes 2, 3 onto 0, 1 of each block, then lane 1 onto 0.
  VF t[2];
  for (size_t m = 0; m < 2; ++m) {
    const auto a = hn::BitCast(d64, quads[2 * m]), b = hn::BitCast(d64, quads[2 * m + 1]);
    t[m] = hn::Add(hn::BitCast(d, hn::InterleaveLower(d64, a, b)),
                   hn::BitCast(d, hn::InterleaveUpper(d64, a, b)));
  }
  return hn::Add(hn::ConcatEven(d, t[1], t[0]), hn::ConcatOdd(d, t[1], t[0]));
}
#define FOLIO_MATMUL_LANE_SUMS 1
#else
#define FOLIO_MATMUL_LANE_SUMS 0
#endif

// Lane k = the lane sum of v[k], for the kLanes vectors v, by SumOfLanes'
// tree (LaneSumsOf, all at once, where the target has it).
HWY_INLINE VF LaneSums(const VF* v) {
#if FOLIO_MATMUL_LANE_SUMS
  return LaneSumsOf(v);
#else
  alignas(64) float sums[kLanes];
  for (size_t k = 0; k < kLanes; ++k) sums[k] = hn::GetLane(hn::SumOfLanes(DF(), v[k]));
  return hn::Load(DF(), sums);
#endif
}

// y[r * y_stride + c] = the lane sum of acc[r][c] plus (element types) the
// scalar tail of weight row c (at w_rows + c * row_bytes) times x row r.
template <typename K, size_t kR, size_t kC>
HWY_INLINE void StoreTileSums(const VF (&acc)[kR][kC], const std::byte* w_rows, size_t row_bytes,
                              const float* x, size_t cols, float* y, size_t y_stride) {
  constexpr size_t kN = kR * kC;
  alignas(64) float sums[(kN + kLanes - 1) / kLanes * kLanes];
  for (size_t k = 0; k < kN; k += kLanes) {
    VF v[kLanes];
    for (size_t i = 0; i < kLanes; ++i) {
      v[i] = k + i < kN ? acc[(k + i) / kC][(k + i) % kC] : hn::Zero(DF());
    }
    hn::Store(LaneSums(v), DF(), sums + k);
  }
  for (size_t r = 0; r < kR; ++r) {
    for (size_t c = 0; c < kC; ++c) {
      y[r * y_stride + c] =
          AddTail<K>(sums[r * kC + c], w_rows + c * row_bytes, x + r * cols, cols);
    }
  }
}

// The order of a block type (matmul.h). Every type but Q8_0 decodes each
// weight to f32 and goes on as f32 weights. Q8_0 is "factored": a block's
// levels are multiplied by x first, p = Q * x over its vectors (multiply,
// then fused multiply-adds in order), and the scale enters once, acc =
// Scale * p + acc. That saves a multiply per vector, which matters where
// unpacking is one sign extension: measured on SmolLM2-135M (1 thread),
// factored Q8_0 decodes x1.2 faster and prefills x0.85 as fast; the 4-bit
// types, whose unpacking costs more, decoded no faster factored and
// prefilled x0.83 as fast (docs/performance-log.md, 2026-12-01).
template <class C>
constexpr bool kFactored = C::kType == WeightType::kQ8_0;

// Vector v of sub-block g's weights as f32: Scale * Q (+ Bias, fused),
// which is DequantizeRow's value bit for bit (it computes the exact product
// and rounds once, at the multiply or at the add of the bias).
template <class C>
HWY_INLINE VF Weights(const std::byte* block, size_t g, size_t v, VF scale, VF bias) {
  if constexpr (C::kHasBias) {
    return hn::MulAdd(scale, C::Q(block, g, v), bias);
  } else {
    return hn::Mul(scale, C::Q(block, g, v));
  }
}

// ---------------------------------------------------------------- decode

// Prefetches the line kPrefetchBytes ahead of each 64-byte line of a
// block (once every few blocks for blocks shorter than a line).
template <class C>
HWY_INLINE void PrefetchBlock(const std::byte* block, size_t b) {
  constexpr size_t kEvery = (64 + kBlockBytes<C> - 1) / kBlockBytes<C>;
  if (b % kEvery != 0) return;
  for (size_t at = 0; at < kBlockBytes<C>; at += 64) hwy::Prefetch(block + at + kPrefetchBytes);
}

// y[r * y_stride + c] = dot(W row c, x row r) for kC consecutive weight
// rows and kR activation rows (x row r at x + r * cols), block types. Each
// weight vector is decoded once and used by all kR rows; every (r, c)
// accumulator walks the columns exactly as a one-row call's does.
template <class C, size_t kR, size_t kC>
HWY_NOINLINE void DecodeBlockTile(const std::byte* w_rows, size_t row_bytes, const float* x,
                                  size_t cols, float* y, size_t y_stride) {
  const DF d;
  constexpr size_t kVecs = kSubVecs<C>;
  VF acc[kR][kC];
  for (size_t r = 0; r < kR; ++r) {
    for (size_t c = 0; c < kC; ++c) acc[r][c] = hn::Zero(d);
  }
  typename C::Head head[kC];
  for (size_t b = 0; b < cols / kBlockElems<C>; ++b) {
    const std::byte* block[kC];
    for (size_t c = 0; c < kC; ++c) {
      block[c] = w_rows + c * row_bytes + b * kBlockBytes<C>;
      PrefetchBlock<C>(block[c], b);
      C::Open(block[c], head[c]);
    }
    for (size_t g = 0; g < kBlockElems<C> / C::kSub; ++g) {
      const size_t i0 = b * kBlockElems<C> + g * C::kSub;
      VF xv[kR][kVecs];
      for (size_t r = 0; r < kR; ++r) {
        for (size_t v = 0; v < kVecs; ++v) xv[r][v] = hn::LoadU(d, x + r * cols + i0 + v * kLanes);
      }
      for (size_t c = 0; c < kC; ++c) {
        const VF scale = C::Scale(block[c], head[c], g), bias = C::Bias(block[c], head[c], g);
        if constexpr (kFactored<C>) {
          VF p[kR];
          const VF q0 = C::Q(block[c], g, 0);
          for (size_t r = 0; r < kR; ++r) p[r] = hn::Mul(q0, xv[r][0]);
          for (size_t v = 1; v < kVecs; ++v) {
            const VF q = C::Q(block[c], g, v);
            for (size_t r = 0; r < kR; ++r) p[r] = hn::MulAdd(q, xv[r][v], p[r]);
          }
          for (size_t r = 0; r < kR; ++r) acc[r][c] = hn::MulAdd(scale, p[r], acc[r][c]);
        } else {
          for (size_t v = 0; v < kVecs; ++v) {
            const VF w = Weights<C>(block[c], g, v, scale, bias);
            for (size_t r = 0; r < kR; ++r) acc[r][c] = hn::MulAdd(w, xv[r][v], acc[r][c]);
          }
        }
      }
    }
  }
  StoreTileSums<C>(acc, w_rows, row_bytes, x, cols, y, y_stride);
}

// The same for an element type S.
template <typename S, size_t kR, size_t kC>
HWY_NOINLINE void DecodeElementTile(const std::byte* w_rows, size_t row_bytes, const float* x,
                                    size_t cols, float* y, size_t y_stride) {
  const DF d;
  VF acc[kR][kC];
  for (size_t r = 0; r < kR; ++r) {
    for (size_t c = 0; c < kC; ++c) acc[r][c] = hn::Zero(d);
  }
  const S* w[kC];
  for (size_t c = 0; c < kC; ++c) w[c] = reinterpret_cast<const S*>(w_rows + c * row_bytes);
  const auto step = [&](size_t i) HWY_ATTR {
    VF xv[kR];
    for (size_t r = 0; r < kR; ++r) xv[r] = hn::LoadU(d, x + r * cols + i);
    for (size_t c = 0; c < kC; ++c) {
      const VF wv = LoadWide(d, w[c] + i);
      for (size_t r = 0; r < kR; ++r) acc[r][c] = hn::MulAdd(wv, xv[r], acc[r][c]);
    }
  };
  const size_t vec_end = cols - cols % kLanes;
  // One prefetch per 64-byte line of each row (it may run past the row:
  // a prefetch never faults).
  constexpr size_t kLineSteps = std::max<size_t>(1, 64 / (kLanes * sizeof(S)));
  size_t i = 0;
  for (; i + kLineSteps * kLanes <= vec_end; i += kLineSteps * kLanes) {
    for (size_t c = 0; c < kC; ++c) {
      hwy::Prefetch(reinterpret_cast<const std::byte*>(w[c] + i) + kPrefetchBytes);
    }
    for (size_t k = 0; k < kLineSteps; ++k) step(i + k * kLanes);
  }
  for (; i < vec_end; i += kLanes) step(i);
  StoreTileSums<S>(acc, w_rows, row_bytes, x, cols, y, y_stride);
}

// A decode-path task of kR activation rows: tiles of kC = kDecodeCols / kR
// weight rows (at least one), then narrower tiles for the rest.
template <typename K, size_t kR>
void DecodeRows(const MatMulTask& t) {
  const uint64_t row_bytes = WeightRowBytes(t.w.type, t.w.cols);
  const auto tile = [&](auto cols_tag, uint64_t j) HWY_ATTR {
    constexpr size_t kC = decltype(cols_tag)::value;
    const std::byte* rows = t.w.data + j * row_bytes;
    if constexpr (kIsBlock<K>) {
      DecodeBlockTile<K, kR, kC>(rows, row_bytes, t.x, t.w.cols, t.y + j, t.w.rows);
    } else {
      DecodeElementTile<K, kR, kC>(rows, row_bytes, t.x, t.w.cols, t.y + j, t.w.rows);
    }
  };
  constexpr size_t kC = kDecodeCols / kR;
  uint64_t j = t.row_begin;
  for (; j + kC <= t.row_end; j += kC) tile(std::integral_constant<size_t, kC>(), j);
  if constexpr (kC > 4) {
    for (; j + 4 <= t.row_end; j += 4) tile(std::integral_constant<size_t, 4>(), j);
  }
  for (; j < t.row_end; ++j) tile(std::integral_constant<size_t, 1>(), j);
}

// Up to kMaxDecodeRows activation rows, as one group: each weight is
// decoded once per call and feeds every row.
template <typename K>
void Decode(const MatMulTask& t) {
  [&]<size_t... kIndex>(std::index_sequence<kIndex...>) HWY_ATTR {
    (void)((t.num_rows == kIndex + 1 && (DecodeRows<K, kIndex + 1>(t), true)) || ...);
  }
  (std::make_index_sequence<kMaxDecodeRows>{});
}

// ---------------------------------------------------------------- prefill

// One chunk of a block's weight rows as f32: row c's chunk starts at
// rows[c]. For a factored type (Q8_0) rows hold the integer levels and
// scales[c] the chunk's sub-block scales.
struct Panel {
  const float* rows[kBlockOut];
  const float* scales[kBlockOut];
  size_t cols;  // columns in this chunk (a multiple of kLanes; of the block for a block type)
};

// acc[r * kBlockOut + c] (one vector each) += the chunk's products of x
// rows r < kR (x[r] points at the chunk) and panel rows c < kC: plain f32
// weights (kSub = 0), or a factored type's levels in sub-blocks of kSub.
template <size_t kSub, size_t kR, size_t kC>
HWY_NOINLINE void PanelTile(const Panel& panel, size_t c0, const float* const* x, float* acc,
                            bool first) {
  const DF d;
  VF a[kR][kC];
  for (size_t r = 0; r < kR; ++r) {
    for (size_t c = 0; c < kC; ++c) {
      a[r][c] = first ? hn::Zero(d) : hn::Load(d, acc + (r * kBlockOut + c) * kLanes);
    }
  }
  const float* const* w = panel.rows + c0;
  if constexpr (kSub > 0) {
    constexpr size_t kVecs = kSub / kLanes;
    for (size_t sb = 0; sb < panel.cols / kSub; ++sb) {
      const size_t i0 = sb * kSub;
      VF xv[kR][kVecs];
      for (size_t r = 0; r < kR; ++r) {
        for (size_t v = 0; v < kVecs; ++v) xv[r][v] = hn::LoadU(d, x[r] + i0 + v * kLanes);
      }
      for (size_t c = 0; c < kC; ++c) {
        VF q[kVecs];
        for (size_t v = 0; v < kVecs; ++v) q[v] = hn::Load(d, w[c] + i0 + v * kLanes);
        const VF scale = hn::Set(d, panel.scales[c0 + c][sb]);
        for (size_t r = 0; r < kR; ++r) {
          VF p = hn::Mul(q[0], xv[r][0]);
          for (size_t v = 1; v < kVecs; ++v) p = hn::MulAdd(q[v], xv[r][v], p);
          a[r][c] = hn::MulAdd(scale, p, a[r][c]);
        }
      }
    }
  } else {
    for (size_t i = 0; i < panel.cols; i += kLanes) {
      VF wv[kC];
      for (size_t c = 0; c < kC; ++c) wv[c] = hn::LoadU(d, w[c] + i);
      for (size_t r = 0; r < kR; ++r) {
        const VF xv = hn::LoadU(d, x[r] + i);
        for (size_t c = 0; c < kC; ++c) a[r][c] = hn::MulAdd(wv[c], xv, a[r][c]);
      }
    }
  }
  for (size_t r = 0; r < kR; ++r) {
    for (size_t c = 0; c < kC; ++c) hn::Store(a[r][c], d, acc + (r * kBlockOut + c) * kLanes);
  }
}

// Scratch of one thread, kept between calls: the widened chunk, a
// factored type's sub-block scales (sub-blocks have 16 elements or more)
// and the accumulators, vector-aligned.
struct Scratch {
  static constexpr size_t kMaxSubs = kChunkCols / 16;
  hwy::AlignedFreeUniquePtr<float[]> wide = hwy::AllocateAligned<float>(kBlockOut * kChunkCols);
  hwy::AlignedFreeUniquePtr<float[]> scales = hwy::AllocateAligned<float>(kBlockOut * kMaxSubs);
  hwy::AlignedFreeUniquePtr<float[]> acc =
      hwy::AllocateAligned<float>(kBlockAct * kBlockOut * kLanes);
};

// Fills panel with columns [k0, k0 + n) of rows [j0, j0 + jn) of W.
template <typename K>
void WidenChunk(const MatMulTask& t, uint64_t j0, size_t jn, size_t k0, size_t n, Scratch& s,
                Panel& panel) {
  const DF d;
  const uint64_t row_bytes = WeightRowBytes(t.w.type, t.w.cols);
  panel.cols = n;
  for (size_t c = 0; c < jn; ++c) {
    const std::byte* row = t.w.data + (j0 + c) * row_bytes;
    float* out = s.wide.get() + c * kChunkCols;
    panel.rows[c] = out;
    if constexpr (kIsBlock<K>) {
      static_assert(K::kSub >= 16, "Scratch::scales holds a scale per 16 elements");
      constexpr size_t kSubs = kBlockElems<K> / K::kSub;
      float* scales = s.scales.get() + c * Scratch::kMaxSubs;
      panel.scales[c] = scales;
      for (size_t b = 0; b < n / kBlockElems<K>; ++b) {
        const std::byte* block = row + (k0 / kBlockElems<K> + b) * kBlockBytes<K>;
        typename K::Head head;
        K::Open(block, head);
        for (size_t g = 0; g < kSubs; ++g) {
          const size_t sb = b * kSubs + g;
          const VF scale = K::Scale(block, head, g), bias = K::Bias(block, head, g);
          for (size_t v = 0; v < kSubVecs<K>; ++v) {
            const VF w = kFactored<K> ? K::Q(block, g, v) : Weights<K>(block, g, v, scale, bias);
            hn::Store(w, d, out + sb * K::kSub + v * kLanes);
          }
          if constexpr (kFactored<K>) scales[sb] = hn::GetLane(scale);
        }
      }
    } else if constexpr (std::is_same_v<K, float>) {
      panel.rows[c] = reinterpret_cast<const float*>(row) + k0;  // already f32
    } else {
      const K* src = reinterpret_cast<const K*>(row) + k0;
      for (size_t i = 0; i < n; i += kLanes) hn::Store(LoadWide(d, src + i), d, out + i);
    }
  }
}

// Runs the panel over activation rows [r0, r0 + rn) (x rows at column k0).
template <size_t kSub>
void PanelBlock(const Panel& panel, size_t jn, const MatMulTask& t, uint64_t r0, size_t rn,
                size_t k0, float* acc, bool first) {
  const auto tile = [&](auto rows_tag, auto cols_tag, size_t r, size_t c) HWY_ATTR {
    constexpr size_t kR = decltype(rows_tag)::value;
    const float* x[kR];
    for (size_t k = 0; k < kR; ++k) x[k] = t.x + (r0 + r + k) * t.w.cols + k0;
    PanelTile<kSub, kR, decltype(cols_tag)::value>(panel, c, x, acc + (r * kBlockOut + c) * kLanes,
                                                   first);
  };
  using Rows = std::integral_constant<size_t, kTileRows>;
  using One = std::integral_constant<size_t, 1>;
  constexpr size_t kCols = PanelCols<kSub>();
  using Cols = std::integral_constant<size_t, kCols>;
  size_t c = 0;
  for (; c + kCols <= jn; c += kCols) {
    size_t r = 0;
    for (; r + kTileRows <= rn; r += kTileRows) tile(Rows(), Cols(), r, c);
    for (; r < rn; ++r) tile(One(), Cols(), r, c);
  }
  for (; c < jn; ++c) {
    size_t r = 0;
    for (; r + kTileRows <= rn; r += kTileRows) tile(Rows(), One(), r, c);
    for (; r < rn; ++r) tile(One(), One(), r, c);
  }
}

// The sub-block a type's panel is factored by; 0 for plain f32 weights.
template <typename K>
constexpr size_t PanelSub() {
  if constexpr (kIsBlock<K>) {
    return kFactored<K> ? K::kSub : 0;
  } else {
    return 0;
  }
}
template <typename K>
constexpr size_t kPanelSub = PanelSub<K>();

template <typename K>
void Prefill(const MatMulTask& t) {
  thread_local Scratch scratch;
  const DF d;
  const uint64_t cols = t.w.cols, row_bytes = WeightRowBytes(t.w.type, cols);
  const size_t vec_end = kIsBlock<K> ? cols : cols - cols % kLanes;
  Panel panel;
  for (uint64_t j0 = t.row_begin; j0 < t.row_end; j0 += kBlockOut) {
    const size_t jn = std::min<uint64_t>(kBlockOut, t.row_end - j0);
    for (uint64_t r0 = 0; r0 < t.num_rows; r0 += kBlockAct) {
      const size_t rn = std::min<uint64_t>(kBlockAct, t.num_rows - r0);
      float* acc = scratch.acc.get();
      if (vec_end == 0) {  // every column is tail
        for (size_t k = 0; k < rn * kBlockOut; ++k) hn::Store(hn::Zero(d), d, acc + k * kLanes);
      }
      for (size_t k0 = 0; k0 < vec_end; k0 += kChunkCols) {
        WidenChunk<K>(t, j0, jn, k0, std::min(kChunkCols, vec_end - k0), scratch, panel);
        PanelBlock<kPanelSub<K>>(panel, jn, t, r0, rn, k0, acc, k0 == 0);
      }
      for (size_t r = 0; r < rn; ++r) {
        float* y = t.y + (r0 + r) * t.w.rows + j0;
        const float* x = t.x + (r0 + r) * cols;
        const float* a = acc + r * kBlockOut * kLanes;
        // kLanes outputs' lane sums at a time.
        for (size_t c = 0; c < jn; c += kLanes) {
          const size_t n = std::min(kLanes, jn - c);
          VF v[kLanes];
          for (size_t k = 0; k < kLanes; ++k) {
            v[k] = k < n ? hn::Load(d, a + (c + k) * kLanes) : hn::Zero(d);
          }
          const VF sums = LaneSums(v);
          if (vec_end == cols) {  // no scalar tail: one store, masked only when short
            // (AVX2's masked store is microcoded on some AMD cores).
            if (n == kLanes) {
              hn::StoreU(sums, d, y + c);
            } else {
              hn::BlendedStore(sums, hn::FirstN(d, n), d, y + c);
            }
            continue;
          }
          alignas(64) float lanes[kLanes];
          hn::Store(sums, d, lanes);
          for (size_t k = 0; k < n; ++k) {
            y[c + k] = AddTail<K>(lanes[k], t.w.data + (j0 + c + k) * row_bytes, x, cols);
          }
        }
      }
    }
  }
}

template <typename K>
void RowsT(const MatMulTask& t) {
  if (t.num_rows <= kMaxDecodeRows) {
    Decode<K>(t);
  } else {
    Prefill<K>(t);
  }
}

void MatMulRowsImpl(const MatMulTask& t) {
  switch (t.w.type) {
    case WeightType::kF32:
      return RowsT<float>(t);
    case WeightType::kF16:
      return RowsT<hwy::float16_t>(t);
    case WeightType::kBF16:
      return RowsT<hwy::bfloat16_t>(t);
    case WeightType::kQ8_0:
      return RowsT<CodecQ8_0>(t);
    case WeightType::kQ4_0:
      return RowsT<CodecLegacy<WeightType::kQ4_0>>(t);
    case WeightType::kQ4_1:
      return RowsT<CodecLegacy<WeightType::kQ4_1>>(t);
    case WeightType::kQ5_0:
      return RowsT<CodecLegacy<WeightType::kQ5_0>>(t);
    case WeightType::kQ5_1:
      return RowsT<CodecLegacy<WeightType::kQ5_1>>(t);
    case WeightType::kQ4_K:
      return RowsT<CodecQ45K<WeightType::kQ4_K>>(t);
    case WeightType::kQ5_K:
      return RowsT<CodecQ45K<WeightType::kQ5_K>>(t);
    case WeightType::kQ6_K:
      return RowsT<CodecQ6K>(t);
    case WeightType::kQ2_K:
      return RowsT<CodecQ23K<WeightType::kQ2_K>>(t);
    case WeightType::kQ3_K:
      return RowsT<CodecQ23K<WeightType::kQ3_K>>(t);
    case WeightType::kIQ4_NL:
      return RowsT<CodecIq4<WeightType::kIQ4_NL>>(t);
    case WeightType::kIQ4_XS:
      return RowsT<CodecIq4<WeightType::kIQ4_XS>>(t);
    case WeightType::kMXFP4:
      return RowsT<CodecMxfp4>(t);
    case WeightType::kF64:  // no kernel (has_matmul false): MatMul refused it
      break;
  }
  FOLIO_CHECK(false, "matmul kernel: no kernel for weight type ", WeightTypeName(t.w.type));
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace folio::ops::internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace folio::ops::internal {
HWY_EXPORT(MatMulRowsImpl);
HWY_EXPORT(TargetNameImpl);
void MatMulRows(const MatMulTask& task) { HWY_DYNAMIC_DISPATCH(MatMulRowsImpl)(task); }
const char* MatMulTargetName() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }
}  // namespace folio::ops::internal
#endif
