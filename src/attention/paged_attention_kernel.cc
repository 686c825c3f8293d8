// The SIMD paged-attention chunk kernel, compiled once per Highway target
// (the scalar fallback, AVX2 and AVX3) and dispatched at run time to the best the CPU has.
//
// Numeric choices, all fixed so that a row's bits depend only on its own
// inputs (contract 3):
// - accumulation is f32; K/V of narrower dtypes are widened exactly;
// - quantized K/V (i8, f8e4m3): a row's scale is applied once per key, not
//   per element: a key's score is dot(q, codes) * key scale * softmax
//   scale, and a value row's weight p is multiplied by its value scale
//   before the row is accumulated. f8e4m3 codes widen through f16 bits
//   (exact, and subnormals stay out of f32 arithmetic) to their value /
//   256, and the 256 joins the scale. i8 runs in integers: the query row
//   and a tile's weights are rounded to i16 codes (QueryCodes,
//   WeightCodes) and both dot products accumulate exactly in i32, so
//   their sums have the same bits on every target;
// - a dot product runs over head_dim with one vector accumulator in index
//   order, a balanced tree over adjacent lane pairs (LaneSums), then the
//   scalar tail; a block of keys and rows shares every K and query load;
//   a prefill's many rows per K/V head run the same chains and tree from a
//   transposed tile instead, with the same bits ("Shared tiles" below);
// - keys are taken in tiles of kTileKeys at multiples of kTileKeys: per
//   tile a row rescales its state once (one exp of the max difference),
//   adds the tile's exp(s - m) as one lane sum with 0 for keys it may not
//   see, and accumulates its visible value rows in key order; every exp is
//   Highway's lane-wise vector Exp, whatever else shares its vector;
// - a row's scores for keys it may not see are computed (from keys the
//   tile holds anyway) but never read, and value rows it may not see are
//   skipped, so other rows in the call (other query positions, other batch
//   entries) cannot change its arithmetic.
#define HWY_WANT_AVX3_DL
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "attention/paged_attention_internal.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attention/paged_attention_kernel.cc"
// foreach_target.h re-includes this file once per target: it comes first.
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>
#endif

// Highway 1.0's AVX3_DL attributes name AVX-VNNI but not AVX512-VNNI, which
// the i8 score path uses (vpdpwssd): GCC adds it to the pushed options;
// clang keeps one target attribute per function, so it gets both in one.
#if HWY_TARGET == HWY_AVX3_DL && defined(__clang__)
HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR ",avx512vnni")
#else
HWY_BEFORE_NAMESPACE();
#endif
#if HWY_TARGET == HWY_AVX3_DL && !defined(__clang__)
#pragma GCC target("avx512vnni")
#endif
// What the kernel's lambdas (which the pushed attributes do not reach) are
// marked with: the target, and inlined like the HWY_INLINE functions they
// stand in (a call per tile measured 4-5% on i8).
#undef FOLIO_KERNEL_ATTR
#if HWY_TARGET == HWY_AVX3_DL && defined(__clang__)
#define FOLIO_KERNEL_ATTR __attribute__((target(HWY_TARGET_STR ",avx512vnni"), always_inline))
#else
#define FOLIO_KERNEL_ATTR HWY_ATTR __attribute__((always_inline))
#endif
namespace folio::attention::internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

static_assert(kTileKeys % 16 == 0, "a tile must fill whole vectors on every target");

// Rows handled together: every K/V vector loaded is used by up to kGroup
// query rows (a GQA group, or several positions of a prefill).
constexpr size_t kGroup = 4;

// Vector accumulators a score or value block keeps in registers: AVX-512
// has 32 vector registers, AVX2 16.
#if HWY_TARGET <= HWY_AVX3
constexpr size_t kAccs = 16;
#else
constexpr size_t kAccs = 8;
#endif
static_assert(kAccs % kGroup == 0);

// The storage lane of an f8e4m3 pool: its codes are bytes.
using E4M3Code = uint8_t;
template <typename S>
constexpr bool kQuantized = std::is_same_v<S, int8_t> || std::is_same_v<S, E4M3Code>;
// What LoadF's value of a code is multiplied by to give the code's value:
// f8e4m3 codes load as value / 256 (see the top of this file).
template <typename S>
constexpr float kCodeScale = std::is_same_v<S, E4M3Code> ? 256.0f : 1.0f;

// One vector of S widened to f32, and one scalar.
template <typename S>
HWY_INLINE hn::Vec<DF> LoadF(const S* HWY_RESTRICT p) {
  const DF d;
  if constexpr (std::is_same_v<S, float>) {
    return hn::LoadU(d, p);
  } else if constexpr (std::is_same_v<S, int8_t>) {
    const hn::Rebind<int8_t, DF> d8;
    const hn::Rebind<int32_t, DF> d32;
    return hn::ConvertTo(d, hn::PromoteTo(d32, hn::LoadU(d8, p)));
  } else if constexpr (std::is_same_v<S, E4M3Code>) {
    // s eeee mmm -> the f16 s 0eeee mmm0000000, whose value is the code's
    // value / 2^8 (f16's exponent bias is 15, E4M3's 7), subnormals too.
    // Sign-extended to 16 bits and shifted left by 7, the code lands with
    // its sign in bit 15 and a copy of it in bit 14, which the mask clears.
    const hn::Rebind<int8_t, DF> d8;
    const hn::Rebind<int16_t, DF> d16;
    const hn::Rebind<uint16_t, DF> du16;
    const hn::Rebind<hwy::float16_t, DF> dh;
    const auto* codes = reinterpret_cast<const int8_t*>(p);
    const auto x = hn::BitCast(du16, hn::ShiftLeft<7>(hn::PromoteTo(d16, hn::LoadU(d8, codes))));
    return hn::PromoteTo(d, hn::BitCast(dh, hn::And(x, hn::Set(du16, 0xbf80))));
  } else {
    const hn::Rebind<S, DF> ds;
    return hn::PromoteTo(d, hn::LoadU(ds, p));
  }
}
template <typename S>
HWY_INLINE float ScalarF(const S* p) {
  if constexpr (std::is_same_v<S, float>) {
    return *p;
  } else if constexpr (std::is_same_v<S, int8_t>) {
    return static_cast<float>(*p);
  } else if constexpr (std::is_same_v<S, E4M3Code>) {
    return E4M3BitsToF32(*p) / kCodeScale<S>;
  } else {
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    return std::is_same_v<S, hwy::bfloat16_t> ? BF16BitsToF32(bits) : F16BitsToF32(bits);
  }
}

// Software prefetch of the next tile's K and V rows, a few cache lines at a
// time from inside this tile's loops. Issued in bursts, the prefetches of a
// tile wait for the core's few line-fill buffers and hold up the compute
// behind them in the reorder buffer; trickled in, they keep the buffers busy
// while the compute runs.
class TilePrefetch {
 public:
  // Each Step issues lines_per_step lines of K and as many of V.
  explicit TilePrefetch(size_t lines_per_step) : lines_per_step_(lines_per_step) {}

  // Bytes [skip, skip + row_bytes) past keys[i] and values[i], i < num_rows.
  template <typename S>
  void Start(const S* const* keys, const S* const* values, size_t num_rows, size_t skip,
             size_t row_bytes) {
    keys_ = reinterpret_cast<const char* const*>(keys);
    values_ = reinterpret_cast<const char* const*>(values);
    num_rows_ = num_rows;
    row_end_ = skip + row_bytes;
    row_ = 0;
    skip_ = offset_ = skip;
  }
  HWY_INLINE void Step() { Issue(lines_per_step_); }
  // Whatever the steps left over.
  void Finish() { Issue(SIZE_MAX); }

 private:
  HWY_INLINE void Issue(size_t lines) {
    for (size_t l = 0; l < lines && row_ < num_rows_; ++l) {
      hwy::Prefetch(keys_[row_] + offset_);
      hwy::Prefetch(values_[row_] + offset_);
      offset_ += 64;
      if (offset_ >= row_end_) {
        offset_ = skip_;
        ++row_;
      }
    }
  }

  size_t lines_per_step_;
  const char* const* keys_ = nullptr;
  const char* const* values_ = nullptr;
  size_t num_rows_ = 0, row_end_ = 0, skip_ = 0, row_ = 0, offset_ = 0;
};

// out[c] = the sum of v[c]'s lanes, for kCount vectors at once. Every sum
// runs the same balanced tree of adjacent lane pairs, whichever vectors
// share the call; v is clobbered.
template <size_t kCount, class D = DF>
HWY_INLINE void LaneSums(hn::Vec<D>* v, hn::TFromD<D>* out) {
#if HWY_TARGET == HWY_SCALAR
  for (size_t c = 0; c < kCount; ++c) out[c] = hn::GetLane(v[c]);
#else
  const D d;
  constexpr size_t kLanes = hn::MaxLanes(D());
  static_assert(kCount % kLanes == 0, "whole vectors of sums");
  // Each pass halves the partial sums per input: vector m takes inputs
  // 2m and 2m + 1, each summed over adjacent lane pairs.
  size_t count = kCount;
  for (size_t width = kLanes; width > 1; width /= 2, count /= 2) {
    for (size_t m = 0; m < count / 2; ++m) {
      v[m] = hn::Add(hn::ConcatEven(d, v[2 * m + 1], v[2 * m]),
                     hn::ConcatOdd(d, v[2 * m + 1], v[2 * m]));
    }
  }
  for (size_t m = 0; m < count; ++m) hn::StoreU(v[m], d, out + m * kLanes);
#endif
}

// Keys a score block takes for R rows: kAccs / R, and for 3 rows as for 4
// (the fourth row's accumulators stay 0), so that blocks tile a tile.
template <size_t R>
constexpr size_t kBlockKeys = kAccs / (R == 3 ? 4 : R);
static_assert(kTileKeys % kBlockKeys<1> == 0 && kBlockKeys<kGroup> > 0);

// out[r * kKeys + j] = dot(q[r], k[j]) for R rows and kKeys = kBlockKeys<R>
// keys (row-major, so that a row's scores scale as one vector): each K
// vector is loaded once for the R rows and each query vector once for the
// keys. A dot runs one accumulator over whole vectors in index order, the
// lane-sum tree of LaneSums, then the scalar tail in order: the same
// operations whatever R is, so a row's bits never depend on which rows or
// keys share the block.
template <typename S, size_t R>
HWY_INLINE void ScoreBlock(const float* const* q, const S* const* k, size_t head_dim,
                           TilePrefetch& prefetch, float* out) {
  const DF d;
  const size_t lanes = hn::Lanes(d);
  constexpr size_t kKeys = kBlockKeys<R>;
  hn::Vec<DF> acc[kAccs];
  for (size_t a = 0; a < kAccs; ++a) acc[a] = hn::Zero(d);
  size_t i = 0;
  for (; i + lanes <= head_dim; i += lanes) {
    hn::Vec<DF> qv[R];
    for (size_t r = 0; r < R; ++r) qv[r] = hn::LoadU(d, q[r] + i);
    prefetch.Step();
    for (size_t j = 0; j < kKeys; ++j) {
      const auto kv = LoadF(k[j] + i);
      for (size_t r = 0; r < R; ++r) {
        acc[r * kKeys + j] = hn::MulAdd(qv[r], kv, acc[r * kKeys + j]);
      }
    }
  }
  // A copy for LaneSums to clobber: handing it acc itself made g++ keep acc
  // on the stack and store it back every iteration of the loop above.
  hn::Vec<DF> sums[kAccs];
  for (size_t a = 0; a < kAccs; ++a) sums[a] = acc[a];
  LaneSums<kAccs>(sums, out);
  for (; i < head_dim; ++i) {
    for (size_t j = 0; j < kKeys; ++j) {
      const float kf = ScalarF(k[j] + i);
      for (size_t r = 0; r < R; ++r) out[r * kKeys + j] += q[r][i] * kf;
    }
  }
}

// scores[r][s] = scale * dot(q[r], key of tile slot s) for the slots
// [s_begin, s_end) (other slots of a block compute junk from a stand-in key
// and are never read). Quantized keys: dot(q[r], codes) * kscale[s] * scale.
template <typename S, size_t R>
HWY_INLINE void TileScores(const float* const* q, const S* const* krow, const float* kscale,
                           size_t s_begin, size_t s_end, size_t head_dim, float scale,
                           float (*scores)[kTileKeys], TilePrefetch& prefetch) {
  constexpr size_t kKeys = kBlockKeys<R>;
  static_assert(kTileKeys % kKeys == 0);
  for (size_t b = s_begin - s_begin % kKeys; b < s_end; b += kKeys) {
    const S* k[kKeys];
    for (size_t j = 0; j < kKeys; ++j) {
      k[j] = b + j >= s_begin && b + j < s_end ? krow[b + j] : krow[s_begin];
    }
    alignas(64) float out[kAccs];
    ScoreBlock<S, R>(q, k, head_dim, prefetch, out);
    // kscale and scores are 64-byte aligned rows and b a multiple of kKeys.
    const hn::CappedTag<float, kKeys> dk;
    const auto vscale = hn::Set(dk, scale);
    for (size_t r = 0; r < R; ++r) {
      for (size_t j = 0; j < kKeys; j += hn::Lanes(dk)) {
        auto x = hn::Load(dk, out + r * kKeys + j);
        if constexpr (kQuantized<S>) x = hn::Mul(x, hn::Load(dk, kscale + b + j));
        hn::Store(hn::Mul(x, vscale), dk, scores[r] + b + j);
      }
    }
  }
}

// ---- Shared tiles: a tile's K/V widened once for many rows -------------------
//
// A prefill has many rows per K/V head (16 positions times the GQA group),
// and ScoreBlock's horizontal sums cost about as many shuffles as its
// multiply-adds. With that many rows the tile's keys are widened and
// transposed once (kt: one vector of keys per element of head_dim), and
// each row's scores for a vector of keys come from whole-vector FMAs:
// ScoreBlock's lane c is the chain of FMAs over elements c, c + L, c + 2L,
// ... (L lanes), and LaneSums adds the L chains in a balanced tree of
// adjacent pairs; ChainSums runs the same chains with keys across the
// lanes and adds them in the same tree, vector by vector. Every product,
// sum and rounding is the same, so a row's bits do not depend on which
// path its scores take (DecodeRowEqualsPrefillRow checks it). The tile's
// value rows are widened once too, which the value loop would otherwise
// redo for every group of rows.

#if HWY_TARGET != HWY_SCALAR
constexpr size_t kLanesF = hn::MaxLanes(DF());
constexpr bool kSharedTiles = kTileKeys % kLanesF == 0;
#else
constexpr size_t kLanesF = 1;
constexpr bool kSharedTiles = false;
#endif

// Rows per K/V head from which a tile is widened and transposed for them.
// The transposition costs about what 6 rows' horizontal sums do; 8 rows (a
// decode step with a GQA group of 8) measured the same time either way.
constexpr uint64_t kSharedTileRows = 8;

#if HWY_TARGET != HWY_SCALAR
// v[c] = lane c of each of v[0], ..., v[L - 1], in order: a transposition
// as log2(L) passes of unzipping adjacent pairs (each pass rotates the
// bits of a (vector, lane) index right by one).
HWY_INLINE void Transpose(hn::Vec<DF>* v) {
  const DF d;
  for (size_t pass = 1; pass < kLanesF; pass *= 2) {
    hn::Vec<DF> w[kLanesF];
    for (size_t m = 0; m < kLanesF / 2; ++m) {
      w[m] = hn::ConcatEven(d, v[2 * m + 1], v[2 * m]);
      w[m + kLanesF / 2] = hn::ConcatOdd(d, v[2 * m + 1], v[2 * m]);
    }
    for (size_t c = 0; c < kLanesF; ++c) v[c] = w[c];
  }
}
#endif

// kt[i * kTileKeys + s] = element i of the key in tile slot s, widened, for
// every slot (slots without a key of [s_begin, s_end) repeat slot
// s_begin's, so every score computed from kt is a real one, never read);
// vt[s * head_dim + i] = element i of slot s's value row, for the slots
// [s_begin, s_end). head_dim is a multiple of kLanesF.
template <typename S>
HWY_INLINE void WidenTile(const S* const* krow, const S* const* vrow, size_t s_begin, size_t s_end,
                          size_t head_dim, float* HWY_RESTRICT kt, float* HWY_RESTRICT vt,
                          TilePrefetch& prefetch) {
#if HWY_TARGET != HWY_SCALAR
  const DF d;
  for (size_t s0 = 0; s0 < kTileKeys; s0 += kLanesF) {
    const S* k[kLanesF];
    for (size_t j = 0; j < kLanesF; ++j) {
      k[j] = s0 + j >= s_begin && s0 + j < s_end ? krow[s0 + j] : krow[s_begin];
    }
    for (size_t i = 0; i < head_dim; i += kLanesF) {
      prefetch.Step();
      hn::Vec<DF> v[kLanesF];
      for (size_t j = 0; j < kLanesF; ++j) v[j] = LoadF(k[j] + i);
      Transpose(v);
      for (size_t c = 0; c < kLanesF; ++c) hn::Store(v[c], d, kt + (i + c) * kTileKeys + s0);
    }
  }
  if constexpr (!std::is_same_v<S, float>) {
    for (size_t s = s_begin; s < s_end; ++s) {
      for (size_t i = 0; i < head_dim; i += kLanesF) {
        hn::Store(LoadF(vrow[s] + i), d, vt + s * head_dim + i);
      }
    }
  }
#else
  (void)krow, (void)vrow, (void)s_begin, (void)s_end, (void)head_dim, (void)kt, (void)vt,
      (void)prefetch;
#endif
}

// out[r] = the chains [kFirst, kFirst + kWidth) of row r's scores against
// the kLanesF keys of kt (the tile's transposed keys from the first of
// them), added in LaneSums' tree. kDim is head_dim when it is one of the
// common sizes (the chains then unroll), 0 otherwise.
template <size_t R, size_t kFirst, size_t kWidth, size_t kDim>
HWY_INLINE void ChainSums(const float* const* q, const float* HWY_RESTRICT kt, size_t head_dim,
                          hn::Vec<DF>* out) {
  const DF d;
  if constexpr (kWidth == 1) {
    const size_t dim = kDim != 0 ? kDim : head_dim;
    for (size_t r = 0; r < R; ++r) out[r] = hn::Zero(d);
    for (size_t i = kFirst; i < dim; i += kLanesF) {
      const auto k = hn::Load(d, kt + i * kTileKeys);
      for (size_t r = 0; r < R; ++r) out[r] = hn::MulAdd(hn::Set(d, q[r][i]), k, out[r]);
    }
  } else {
    hn::Vec<DF> upper[R];
    ChainSums<R, kFirst, kWidth / 2, kDim>(q, kt, head_dim, out);
    ChainSums<R, kFirst + kWidth / 2, kWidth / 2, kDim>(q, kt, head_dim, upper);
    for (size_t r = 0; r < R; ++r) out[r] = hn::Add(out[r], upper[r]);
  }
}

// TileScores from a shared tile's transposed keys (WidenTile): every slot's
// score, for R rows; kscale is null for unquantized keys. (With R up to 4,
// a row's partial sums, one per level of the tree, fit AVX2's registers
// too, near enough: 4 rows measured 1.15x 2 rows at a time there.)
template <size_t R, size_t kDim>
HWY_INLINE void SharedTileScoresFor(const float* const* q, const float* kt, const float* kscale,
                                    size_t head_dim, float scale, float (*scores)[kTileKeys]) {
  const DF d;
  const auto vscale = hn::Set(d, scale);
  for (size_t s0 = 0; s0 < kTileKeys; s0 += kLanesF) {
    hn::Vec<DF> sum[R];
    ChainSums<R, 0, kLanesF, kDim>(q, kt + s0, head_dim, sum);
    for (size_t r = 0; r < R; ++r) {
      auto x = sum[r];
      if (kscale != nullptr) x = hn::Mul(x, hn::Load(d, kscale + s0));
      hn::Store(hn::Mul(x, vscale), d, scores[r] + s0);
    }
  }
}
template <size_t R>
HWY_NOINLINE void SharedTileScores(const float* const* q, const float* kt, const float* kscale,
                                   size_t head_dim, float scale, float (*scores)[kTileKeys]) {
  switch (head_dim) {
    case 64:
      return SharedTileScoresFor<R, 64>(q, kt, kscale, head_dim, scale, scores);
    case 128:
      return SharedTileScoresFor<R, 128>(q, kt, kscale, head_dim, scale, scores);
    default:
      return SharedTileScoresFor<R, 0>(q, kt, kscale, head_dim, scale, scores);
  }
}

// ---- i8 keys: scores in integers --------------------------------------------
//
// The integer i8 path relies on two x86 behaviours: ReorderWidenMulAccumulate
// keeps every pair in its first accumulator, and InterleaveLower/Upper pair
// columns within 128-bit blocks. x86's targets and the scalar one take it;
// i8 on other architectures runs the f32 path that f8e4m3 runs.
#undef FOLIO_I8_INTEGER
#define FOLIO_I8_INTEGER (HWY_ARCH_X86 || HWY_TARGET == HWY_SCALAR)
template <typename S>
constexpr bool kIntegerPath = std::is_same_v<S, int8_t>&& FOLIO_I8_INTEGER;
//
// An i8 key's dot product with a query runs in integers: each query row is
// quantized once per chunk to i16 codes with one scale (QueryCodes), and
// dot(query codes, key codes) accumulates exactly in i32, two products a
// lane (vpmaddwd; vpdpwssd with AVX512-VNNI). The sum is exact, so every
// target and every order of terms give the same integer, and the score is
// float(sum) * key scale * (query scale * softmax scale). The query's
// rounding (half a step of max |q| / 32767) is far below the keys' own.

// The i16 codes of a chunk's query rows (row r at codes + r * stride) and
// each row's query scale times the softmax scale; NaN for a row with a
// non-finite element, whose scores (and so output) are then NaN.
struct QueryCodes {
  const int16_t* codes = nullptr;
  size_t stride = 0;
  const float* factor = nullptr;
};

#if FOLIO_I8_INTEGER

// The largest query code: 32767, or less where head_dim products of it and
// 128 (the largest key code's magnitude) would overflow an i32.
inline int32_t QueryCodeMax(size_t head_dim) {
  return static_cast<int32_t>(std::min<uint64_t>(32767, 0x7fffffffu / (128 * head_dim)));
}

// codes = nearest(q * (code_max / max |q|)), saturated to i16, and factor =
// max |q| / code_max * scale.
HWY_INLINE void QuantizeQuery(const float* q, size_t head_dim, float scale, int16_t* codes,
                              float* factor) {
  const DF d;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<int16_t, DF> d16;
  const size_t lanes = hn::Lanes(d);
  // One integer max over the bits of |q|: finite magnitudes order as their
  // bits do, and inf and NaN lie above every finite pattern.
  const auto magnitude = hn::Set(di, 0x7fffffff);
  auto top_bits = hn::Zero(di);
  size_t f = 0;
  for (; f + lanes <= head_dim; f += lanes) {
    top_bits = hn::Max(top_bits, hn::And(hn::BitCast(di, hn::LoadU(d, q + f)), magnitude));
  }
  int32_t bits = hn::GetLane(hn::MaxOfLanes(di, top_bits));
  for (; f < head_dim; ++f) {
    int32_t x;
    std::memcpy(&x, q + f, sizeof(x));
    bits = std::max(bits, x & 0x7fffffff);
  }
  constexpr int32_t kInfBits = 0x7f800000;
  float top;
  std::memcpy(&top, &bits, sizeof(top));
  // Rows below 2^-100 (zeros included) score 0 against every key: their
  // float scores would be as good as 0, and code_max / top must not
  // overflow.
  if (bits >= kInfBits || top < 0x1p-100f) {
    std::fill_n(codes, head_dim, int16_t{0});
    *factor = bits >= kInfBits ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
    return;
  }
  const auto code_max = static_cast<float>(QueryCodeMax(head_dim));
  // q * inverse <= code_max * (1 + 2^-23)^2, which rounds to code_max.
  const float inverse = code_max / top;
  const auto vinverse = hn::Set(d, inverse);
  for (f = 0; f + lanes <= head_dim; f += lanes) {
    const auto c = hn::NearestInt(hn::Mul(hn::LoadU(d, q + f), vinverse));
    hn::StoreU(hn::DemoteTo(d16, c), d16, codes + f);
  }
  for (; f < head_dim; ++f) {
    codes[f] = static_cast<int16_t>(std::nearbyint(q[f] * inverse));
  }
  *factor = top / code_max * scale;
}

using DI32 = hn::ScalableTag<int32_t>;
#if HWY_TARGET == HWY_SCALAR
using DI16 = hn::Rebind<int16_t, DI32>;  // one lane, one product a step
#else
using DI16 = hn::Repartition<int16_t, DI32>;  // two i16 lanes per i32 lane
#endif
using DI8 = hn::Rebind<int8_t, DI16>;

// acc + the pairwise products of q and k, lane by lane.
HWY_INLINE hn::Vec<DI32> DotPairs(hn::Vec<DI32> acc, hn::Vec<DI16> q, hn::Vec<DI16> k) {
#if HWY_TARGET == HWY_AVX3_DL
  return hn::Vec<DI32>{_mm512_dpwssd_epi32(acc.raw, q.raw, k.raw)};
#else
  // sum1 is untouched on x86 and the scalar target: one accumulator holds
  // every pair.
  hn::Vec<DI32> unused = hn::Zero(DI32());
  return hn::ReorderWidenMulAccumulate(DI32(), q, k, acc, unused);
#endif
}

// out[r * kKeys + j] = dot(q[r], k[j]) in integers, for R rows and kKeys =
// kBlockKeys<R> keys (row-major, so that a row's scores convert as one
// vector); each key vector is widened once for the R rows.
template <size_t R>
HWY_INLINE void ScoreBlockI8(const int16_t* const* q, const int8_t* const* k, size_t head_dim,
                             TilePrefetch& prefetch, int32_t* out) {
  const DI32 d32;
  const DI16 d16;
  const DI8 d8;
  const size_t lanes = hn::Lanes(d16);
  constexpr size_t kKeys = kBlockKeys<R>;
  hn::Vec<DI32> acc[kAccs];
  for (size_t a = 0; a < kAccs; ++a) acc[a] = hn::Zero(d32);
  size_t i = 0;
  for (; i + lanes <= head_dim; i += lanes) {
    hn::Vec<DI16> qv[R];
    for (size_t r = 0; r < R; ++r) qv[r] = hn::LoadU(d16, q[r] + i);
    prefetch.Step();
    for (size_t j = 0; j < kKeys; ++j) {
      const auto kv = hn::PromoteTo(d16, hn::LoadU(d8, k[j] + i));
      for (size_t r = 0; r < R; ++r) acc[r * kKeys + j] = DotPairs(acc[r * kKeys + j], qv[r], kv);
    }
  }
  hn::Vec<DI32> sums[kAccs];
  for (size_t a = 0; a < kAccs; ++a) sums[a] = acc[a];
  LaneSums<kAccs, DI32>(sums, out);
  for (; i < head_dim; ++i) {
    for (size_t j = 0; j < kKeys; ++j) {
      for (size_t r = 0; r < R; ++r) out[r * kKeys + j] += int32_t{q[r][i]} * int32_t{k[j][i]};
    }
  }
}

// TileScores for i8 keys: scores[r][s] = float(dot(codes of q[r], key
// codes of slot s)) * kscale[s] * factor[r].
template <size_t R>
HWY_INLINE void TileScoresI8(const int16_t* const* q, const float* factor,
                             const int8_t* const* krow, const float* kscale, size_t s_begin,
                             size_t s_end, size_t head_dim, float (*scores)[kTileKeys],
                             TilePrefetch& prefetch) {
  constexpr size_t kKeys = kBlockKeys<R>;
  static_assert(kTileKeys % kKeys == 0);
  for (size_t b = s_begin - s_begin % kKeys; b < s_end; b += kKeys) {
    const int8_t* k[kKeys];
    for (size_t j = 0; j < kKeys; ++j) {
      k[j] = b + j >= s_begin && b + j < s_end ? krow[b + j] : krow[s_begin];
    }
    alignas(64) int32_t out[kAccs];
    ScoreBlockI8<R>(q, k, head_dim, prefetch, out);
    // kscale and scores are 64-byte aligned rows and b a multiple of kKeys.
    const hn::CappedTag<float, kKeys> dk;
    const hn::RebindToSigned<decltype(dk)> dki;
    for (size_t r = 0; r < R; ++r) {
      const auto f = hn::Set(dk, factor[r]);
      for (size_t j = 0; j < kKeys; j += hn::Lanes(dk)) {
        const auto sum = hn::ConvertTo(dk, hn::Load(dki, out + r * kKeys + j));
        hn::Store(hn::Mul(hn::Mul(sum, hn::Load(dk, kscale + b + j)), f), dk, scores[r] + b + j);
      }
    }
  }
}

#endif  // FOLIO_I8_INTEGER

// acc[r] = acc[r] * corr[r] + sum over slots s in [s_begin, s_end), in
// order, of p[r][s] * value row s, for R rows that all see every one of
// those slots; each value vector is loaded once for the R rows.
// kCols vectors of a row are carried at once, so the R * kCols accumulators
// stay in registers and each p is broadcast once per kCols vectors. Which
// loop an element falls in depends on head_dim only, never on R, so a row
// gets the same bits alone (R = 1, as GroupTile runs rows that see
// different slots) as in a full group.
template <typename S, size_t R>
HWY_INLINE void TileValues(float* const* acc_rows, const float* corr, const float (*p)[kTileKeys],
                           const S* const* vrow, size_t s_begin, size_t s_end, size_t head_dim,
                           TilePrefetch& prefetch) {
  const DF d;
  const size_t lanes = hn::Lanes(d);
  constexpr size_t kCols = kAccs / kGroup;
  size_t i = 0;
  for (; i + kCols * lanes <= head_dim; i += kCols * lanes) {
    hn::Vec<DF> acc[R][kCols];
    for (size_t r = 0; r < R; ++r) {
      const auto c = hn::Set(d, corr[r]);
      for (size_t col = 0; col < kCols; ++col) {
        acc[r][col] = hn::Mul(hn::LoadU(d, acc_rows[r] + i + col * lanes), c);
      }
    }
    for (size_t s = s_begin; s < s_end; ++s) {
      prefetch.Step();
      hn::Vec<DF> vv[kCols];
      for (size_t col = 0; col < kCols; ++col) vv[col] = LoadF(vrow[s] + i + col * lanes);
      for (size_t r = 0; r < R; ++r) {
        const auto pr = hn::Set(d, p[r][s]);
        for (size_t col = 0; col < kCols; ++col) acc[r][col] = hn::MulAdd(pr, vv[col], acc[r][col]);
      }
    }
    for (size_t r = 0; r < R; ++r) {
      for (size_t col = 0; col < kCols; ++col) {
        hn::StoreU(acc[r][col], d, acc_rows[r] + i + col * lanes);
      }
    }
  }
  for (; i + lanes <= head_dim; i += lanes) {
    hn::Vec<DF> acc[R];
    for (size_t r = 0; r < R; ++r)
      acc[r] = hn::Mul(hn::LoadU(d, acc_rows[r] + i), hn::Set(d, corr[r]));
    for (size_t s = s_begin; s < s_end; ++s) {
      const auto vv = LoadF(vrow[s] + i);
      for (size_t r = 0; r < R; ++r) acc[r] = hn::MulAdd(hn::Set(d, p[r][s]), vv, acc[r]);
    }
    for (size_t r = 0; r < R; ++r) hn::StoreU(acc[r], d, acc_rows[r] + i);
  }
  for (; i < head_dim; ++i) {
    for (size_t r = 0; r < R; ++r) {
      float x = acc_rows[r][i] * corr[r];
      for (size_t s = s_begin; s < s_end; ++s) x += p[r][s] * ScalarF(vrow[s] + i);
      acc_rows[r][i] = x;
    }
  }
}

#if FOLIO_I8_INTEGER
// ---- i8 values: weighted sums in integers -----------------------------------
//
// A row's tile weights (p times the value row's scale, so 0 for slots the
// row does not see) are quantized to i16 codes against the tile's largest
// (WeightCodes), and sum_s code_s * v_s accumulates exactly in i32, two
// slots a lane: a pair vector holds (v_s[c], v_{s+1}[c]) in each i32 lane
// and a weight pair broadcasts (code_s, code_{s+1}). Per tile the row then
// takes acc = acc * corr + float(sum) * step (WeightCodes): one rounding of
// the sum, where the float path rounds once per slot.

constexpr float kWeightCodeMax = 32767.0f;

// A row's tile weights as i16 codes against their largest, max: code =
// nearest(weight * 32767 / max). A code's value is factor * unboost, with
// factor = max / 32767 (NaN when a weight is not finite, which then reaches
// the whole row) and unboost 1; weights below 2^-100 are first raised by
// 2^100, exactly, and unboost is 2^-100, so that neither 32767 / max
// overflows nor the factor loses bits as a subnormal.
struct WeightCodes {
  alignas(64) int16_t codes[kTileKeys];
  float factor;
  float unboost;
  // Slots 2m and 2m + 1 as one i32 (the even slot in the low half).
  int32_t Pair(size_t m) const {
    int32_t pair;
    std::memcpy(&pair, codes + 2 * m, sizeof(pair));
    return pair;
  }
};

HWY_INLINE void QuantizeWeights(const float* w, WeightCodes& out) {
  const DF d;
  const hn::Rebind<int16_t, DF> d16;
  const size_t lanes = hn::Lanes(d);
  auto top = hn::Zero(d);
  auto bad = hn::FirstN(d, 0);
  for (size_t s = 0; s < kTileKeys; s += lanes) {
    const auto x = hn::Load(d, w + s);
    bad = hn::Or(bad, hn::Not(hn::IsFinite(x)));
    top = hn::Max(top, x);
  }
  const float max = hn::GetLane(hn::MaxOfLanes(d, top));
  if (!hn::AllFalse(d, bad) || max == 0) {
    std::fill_n(out.codes, kTileKeys, int16_t{0});
    out.factor = hn::AllFalse(d, bad) ? 0.0f : std::numeric_limits<float>::quiet_NaN();
    out.unboost = 1.0f;
    return;
  }
  // Weights below 2^-100: a tiny value scale, or a tile far below the row's
  // max.
  const float boost = max < 0x1p-100f ? 0x1p100f : 1.0f;
  const auto vboost = hn::Set(d, boost);
  const auto inverse = hn::Set(d, kWeightCodeMax / (max * boost));
  for (size_t s = 0; s < kTileKeys; s += lanes) {
    const auto c = hn::NearestInt(hn::Mul(hn::Mul(hn::Load(d, w + s), vboost), inverse));
    hn::StoreU(hn::DemoteTo(d16, c), d16, out.codes + s);
  }
  out.factor = max * boost / kWeightCodeMax;
  out.unboost = 1.0f / boost;
}

#if HWY_TARGET != HWY_SCALAR
// InterleaveLower/Upper pair the columns of two i16 vectors within 128-bit
// blocks: lane 4b + j of lo is column 8b + j, of hi column 8b + 4 + j.
// first/second get the two i32 vectors of sums in column order.
HWY_INLINE void PairSumsInOrder(hn::Vec<DI32> lo, hn::Vec<DI32> hi, hn::Vec<DI32>& first,
                                hn::Vec<DI32>& second) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  const __m512i i0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i i1 =
      _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  first = hn::Vec<DI32>{_mm512_permutex2var_epi32(lo.raw, i0, hi.raw)};
  second = hn::Vec<DI32>{_mm512_permutex2var_epi32(lo.raw, i1, hi.raw)};
#elif HWY_TARGET == HWY_AVX2
  first = hn::ConcatLowerLower(DI32(), hi, lo);
  second = hn::ConcatUpperUpper(DI32(), hi, lo);
#else
  static_assert(hn::MaxLanes(DI32()) == 4, "one 128-bit block");
  first = lo;
  second = hi;
#endif
}
#endif

// Column vectors TileValuesI8 takes a step where the registers allow
// (AVX-512's 32): the weights' broadcasts and the loop's bookkeeping serve
// twice the work.
constexpr size_t kValueVectorsI8 = kAccs >= 16 ? 2 : 1;

#if HWY_TARGET != HWY_SCALAR
// Columns [i, i + kC * Lanes(DI16)) of TileValuesI8, for the slot pairs
// [m_begin, m_end) whose even and odd rows are even[m] and odd[m].
template <size_t R, size_t kC>
HWY_INLINE void ValueColumnsI8(float* const* acc_rows, const float* corr, const WeightCodes* w,
                               const int8_t* const* even, const int8_t* const* odd, size_t m_begin,
                               size_t m_end, size_t i, TilePrefetch& prefetch) {
  const DF d;
  const DI32 d32;
  const DI16 d16;
  const DI8 d8;
  const size_t lanes = hn::Lanes(d16);
  hn::Vec<DI32> lo[R][kC], hi[R][kC];
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < kC; ++c) lo[r][c] = hi[r][c] = hn::Zero(d32);
  }
  for (size_t m = m_begin; m < m_end; ++m) {
    prefetch.Step();
    hn::Vec<DI16> pair_lo[kC], pair_hi[kC];
    for (size_t c = 0; c < kC; ++c) {
      const auto a = hn::PromoteTo(d16, hn::LoadU(d8, even[m] + i + c * lanes));
      const auto b = hn::PromoteTo(d16, hn::LoadU(d8, odd[m] + i + c * lanes));
      pair_lo[c] = hn::InterleaveLower(d16, a, b);
      pair_hi[c] = hn::InterleaveUpper(d16, a, b);
    }
    for (size_t r = 0; r < R; ++r) {
      const auto wp = hn::BitCast(d16, hn::Set(d32, w[r].Pair(m)));
      for (size_t c = 0; c < kC; ++c) {
        lo[r][c] = DotPairs(lo[r][c], wp, pair_lo[c]);
        hi[r][c] = DotPairs(hi[r][c], wp, pair_hi[c]);
      }
    }
  }
  const size_t half = hn::Lanes(d);
  for (size_t r = 0; r < R; ++r) {
    const auto cr = hn::Set(d, corr[r]), f = hn::Set(d, w[r].factor);
    const auto unboost = hn::Set(d, w[r].unboost);
    for (size_t c = 0; c < kC; ++c) {
      hn::Vec<DI32> sums[2];
      PairSumsInOrder(lo[r][c], hi[r][c], sums[0], sums[1]);
      for (size_t k = 0; k < 2; ++k) {
        float* at = acc_rows[r] + i + c * lanes + k * half;
        const auto x = hn::Mul(hn::ConvertTo(d, sums[k]), f);
        hn::StoreU(hn::MulAdd(x, unboost, hn::Mul(hn::LoadU(d, at), cr)), d, at);
      }
    }
  }
}
#endif

// TileValues for i8 values: acc[r] = acc[r] * corr[r] + float(sum over the
// tile's slot pairs of codes * value codes) * step (WeightCodes), for R
// rows whose weights are 0 outside [s_begin, s_end). Pairs are whole
// even-odd slot pairs; a slot outside the range reads a stand-in row with
// weight 0.
// Integer sums are exact and every column takes the same float steps, so
// which loop a column falls in never shows in its bits.
template <size_t R>
HWY_INLINE void TileValuesI8(float* const* acc_rows, const float* corr, const WeightCodes* w,
                             const int8_t* const* vrow, size_t s_begin, size_t s_end,
                             size_t head_dim, TilePrefetch& prefetch) {
  const size_t m_begin = s_begin / 2, m_end = (s_end + 1) / 2;
  const int8_t* even[kTileKeys / 2];
  const int8_t* odd[kTileKeys / 2];
  for (size_t m = m_begin; m < m_end; ++m) {
    even[m] = 2 * m < s_begin ? vrow[s_begin] : vrow[2 * m];
    odd[m] = 2 * m + 1 < s_end ? vrow[2 * m + 1] : vrow[s_begin];
  }
  size_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const size_t lanes = hn::Lanes(DI16());
  for (; i + kValueVectorsI8 * lanes <= head_dim; i += kValueVectorsI8 * lanes) {
    ValueColumnsI8<R, kValueVectorsI8>(acc_rows, corr, w, even, odd, m_begin, m_end, i, prefetch);
  }
  for (; i + lanes <= head_dim; i += lanes) {
    ValueColumnsI8<R, 1>(acc_rows, corr, w, even, odd, m_begin, m_end, i, prefetch);
  }
#else
  (void)prefetch;
#endif
  for (; i < head_dim; ++i) {
    for (size_t r = 0; r < R; ++r) {
      int32_t sum = 0;
      for (size_t m = m_begin; m < m_end; ++m) {
        sum += int32_t{w[r].codes[2 * m]} * even[m][i] + int32_t{w[r].codes[2 * m + 1]} * odd[m][i];
      }
      acc_rows[r][i] =
          std::fma(static_cast<float>(sum) * w[r].factor, w[r].unboost, acc_rows[r][i] * corr[r]);
    }
  }
}

#endif  // FOLIO_I8_INTEGER

// fn(std::integral_constant<size_t, R>()) for R = rows, which is 1, 2, 3
// or kGroup: the group sizes the score and value blocks are built for.
static_assert(kGroup == 4);
template <class F>
HWY_INLINE void ForRows(size_t rows, F&& fn) {
  switch (rows) {
    case 1:
      return fn(std::integral_constant<size_t, 1>());
    case 2:
      return fn(std::integral_constant<size_t, 2>());
    case 3:
      return fn(std::integral_constant<size_t, 3>());
    default:
      return fn(std::integral_constant<size_t, kGroup>());
  }
}

// One group of up to kGroup rows, all reading the K/V head whose rows of the
// tile are krow/vrow (with scales kscale/vscale by tile slot when
// quantized): the scores, the online-softmax update and the value
// accumulation for the tile at t0 (keys [a0, t1) visible to some row).
// A shared tile (WidenTile) gives kt, the transposed keys, and vwide, the
// widened value rows by slot; both are null otherwise.
template <typename S>
HWY_INLINE void GroupTile(const ChunkTask& t, uint64_t g0, size_t rows, uint64_t t0, uint64_t a0,
                          uint64_t t1, const S* const* krow, const S* const* vrow,
                          const float* kscale, const float* vscale, const float* kt,
                          const float* const* vwide, [[maybe_unused]] const QueryCodes& codes,
                          TilePrefetch& prefetch) {
  const DF d;
  const size_t lanes = hn::Lanes(d);
  const uint64_t head_dim = t.kv.head_dim;
  const size_t s_begin = static_cast<size_t>(a0 - t0), s_end = static_cast<size_t>(t1 - t0);
  // Slots outside the group's score blocks are loaded with the rest and
  // masked out; zeroed, so that no indeterminate value is ever read.
  alignas(64) float scores[kGroup][kTileKeys] = {};
  alignas(64) float p[kGroup][kTileKeys];

  // Tile slots [first, last) each row of the group sees.
  size_t first[kGroup], last[kGroup];
  bool any = false, full = true;
  for (size_t r = 0; r < rows; ++r) {
    first[r] = static_cast<size_t>(std::max(a0, t.lo[g0 + r]) - t0);
    last[r] = static_cast<size_t>(std::max(std::min(t1, t.hi[g0 + r]), t0 + first[r]) - t0);
    any |= first[r] < last[r];
    full &= first[r] == s_begin && last[r] == s_end;
  }
  if (!any) return;
  // Scores: one block of keys at a time, every row of the group against
  // every key the group sees (a row's scores for keys it may not see are
  // computed and never read).
  if constexpr (kIntegerPath<S>) {
#if FOLIO_I8_INTEGER
    const int16_t* q[kGroup];
    float factor[kGroup];
    for (size_t r = 0; r < kGroup; ++r) {
      const uint64_t row = g0 + std::min(r, rows - 1);
      q[r] = codes.codes + row * codes.stride;
      factor[r] = codes.factor[row];
    }
    ForRows(rows, [&](auto n) FOLIO_KERNEL_ATTR {
      TileScoresI8<decltype(n)::value>(q, factor, krow, kscale, s_begin, s_end, head_dim, scores,
                                       prefetch);
    });
#endif
  } else {
    const float* q[kGroup];
    for (size_t r = 0; r < kGroup; ++r) q[r] = t.queries[g0 + std::min(r, rows - 1)];
    if (kt != nullptr) {
      ForRows(rows, [&](auto n) FOLIO_KERNEL_ATTR {
        SharedTileScores<decltype(n)::value>(q, kt, kQuantized<S> ? kscale : nullptr, head_dim,
                                             t.scale, scores);
      });
    } else {
      ForRows(rows, [&](auto n) FOLIO_KERNEL_ATTR {
        TileScores<S, decltype(n)::value>(q, krow, kscale, s_begin, s_end, head_dim, t.scale,
                                          scores, prefetch);
      });
    }
  }
  if (t.softcap != 0) {
    // Gemma 2's soft-capping, scalar: cap * tanh(score / cap), on the
    // slots the group sees (each score on its own, so no bit depends on
    // the tile's shape).
    for (size_t r = 0; r < rows; ++r) {
      for (size_t s = s_begin; s < s_end; ++s) {
        scores[r][s] = t.softcap * std::tanh(scores[r][s] / t.softcap);
      }
    }
  }
  // Online-softmax update: one rescale per row per tile, over the slots it
  // sees; p is 0 elsewhere. The group's rescale factors come from one
  // vector exp, lane-wise, so a row's bits do not depend on the rows beside
  // it; a libm call per row spilled every live vector register around it.
  const auto seen = [&](size_t r, size_t s) {
    return hn::AndNot(hn::FirstN(d, first[r] > s ? first[r] - s : 0),
                      hn::FirstN(d, last[r] > s ? last[r] - s : 0));
  };
  // A seen score that is NaN or +inf makes the row's softmax NaN in IEEE
  // arithmetic (NaN - m, or inf - inf); Max and Exp would hide it (Max drops
  // a NaN operand, Exp clamps its input), so such a row is marked and its
  // sum set to NaN below, which Finalize and MergeInto carry to the output.
  // A -inf score is an exact zero weight, as in IEEE arithmetic.
  alignas(64) float old_max[kGroup] = {}, new_max[kGroup] = {}, corr[kGroup];
  bool poisoned[kGroup] = {};
  for (size_t r = 0; r < rows; ++r) {
    if (first[r] >= last[r]) continue;
    const auto neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
    const auto pos_inf = hn::Set(d, std::numeric_limits<float>::infinity());
    auto vmax = neg_inf;
    auto bad = hn::FirstN(d, 0);
    for (size_t s = 0; s < kTileKeys; s += lanes) {
      const auto sc = hn::Load(d, scores[r] + s);
      const auto m = seen(r, s);
      vmax = hn::Max(vmax, hn::IfThenElse(m, sc, neg_inf));
      bad = hn::Or(bad, hn::And(m, hn::Or(hn::IsNaN(sc), hn::Eq(sc, pos_inf))));
    }
    poisoned[r] = !hn::AllFalse(d, bad);
    old_max[r] = t.states[g0 + r].max;
    new_max[r] = std::max(old_max[r], hn::GetLane(hn::MaxOfLanes(d, vmax)));
  }
  // exp(old - new): 0 for an empty state (old = -inf), exactly 1 when the
  // max stays.
  const hn::CappedTag<float, kGroup> dg;
  for (size_t r = 0; r < kGroup; r += hn::Lanes(dg)) {
    const auto diff = hn::Sub(hn::Load(dg, old_max + r), hn::Load(dg, new_max + r));
    hn::Store(hn::Exp(dg, diff), dg, corr + r);
  }
  for (size_t r = 0; r < rows; ++r) {
    if (first[r] >= last[r]) continue;
    const auto vm = hn::Set(d, new_max[r]);
    auto vsum = hn::Zero(d);
    for (size_t s = 0; s < kTileKeys; s += lanes) {
      const auto x = hn::Sub(hn::Load(d, scores[r] + s), vm);
      const auto m = seen(r, s);
      const auto e = hn::IfThenElseZero(m, hn::Exp(d, x));
      // Quantized values: each weight takes its value row's scale, so the
      // accumulation below reads codes as they are (and 0 where the row
      // does not see the slot, whatever scale the slot holds).
      if constexpr (kQuantized<S>) {
        hn::Store(hn::IfThenElseZero(m, hn::Mul(e, hn::Load(d, vscale + s))), d, p[r] + s);
      } else {
        hn::Store(e, d, p[r] + s);
      }
      vsum = hn::Add(vsum, e);
    }
    SoftmaxState& st = t.states[g0 + r];
    st.sum = st.sum * corr[r] + hn::GetLane(hn::SumOfLanes(d, vsum));
    st.max = new_max[r];
    if (poisoned[r]) st.sum = std::numeric_limits<float>::quiet_NaN();
  }
  // acc = acc * corr + sum_s p_s v_s per row, s ascending.
  float* acc_rows[kGroup];
  for (size_t r = 0; r < rows; ++r) acc_rows[r] = t.acc + (g0 + r) * head_dim;
  if constexpr (kIntegerPath<S>) {
#if FOLIO_I8_INTEGER
    WeightCodes w[kGroup];
    for (size_t r = 0; r < rows; ++r) {
      if (first[r] < last[r]) QuantizeWeights(p[r], w[r]);
    }
    if (full) {
      ForRows(rows, [&](auto n) FOLIO_KERNEL_ATTR {
        TileValuesI8<decltype(n)::value>(acc_rows, corr, w, vrow, s_begin, s_end, head_dim,
                                         prefetch);
      });
    } else {
      for (size_t r = 0; r < rows; ++r) {
        if (first[r] >= last[r]) continue;
        TileValuesI8<1>(acc_rows + r, corr + r, w + r, vrow, first[r], last[r], head_dim, prefetch);
      }
    }
#endif
    return;
  }
  // A group of 2 or 3 (GQA ratios 2, 3, 6, 7, ...) loads each value vector
  // once for all its rows too; a row's bits are the same in any of these.
  // Widened rows (a shared tile's, or an f32 pool's own) hold the values
  // LoadF gives, so the sums are the same whichever rows are read.
  const float* const* wide = vwide;
  if constexpr (std::is_same_v<S, float>) wide = vrow;
  const auto accumulate = [&](auto n, float* const* acc, const float* c, const float(*w)[kTileKeys],
                              size_t begin, size_t end) FOLIO_KERNEL_ATTR {
    if (wide != nullptr) {
      TileValues<float, decltype(n)::value>(acc, c, w, wide, begin, end, head_dim, prefetch);
    } else {
      TileValues<S, decltype(n)::value>(acc, c, w, vrow, begin, end, head_dim, prefetch);
    }
  };
  if (full) {
    ForRows(rows,
            [&](auto n) FOLIO_KERNEL_ATTR { accumulate(n, acc_rows, corr, p, s_begin, s_end); });
  } else {
    // Rows that see different slots (a prefill's diagonal tile, a window's
    // edge): each row takes its own slots in the same order.
    for (size_t r = 0; r < rows; ++r) {
      if (first[r] >= last[r]) continue;
      accumulate(std::integral_constant<size_t, 1>(), acc_rows + r, corr + r, p + r, first[r],
                 last[r]);
    }
  }
}

template <typename S>
void RunChunkT(const ChunkTask& t) {
  const DF d;
  const size_t lanes = hn::Lanes(d);
  const uint64_t head_dim = t.kv.head_dim, page = t.kv.page_size;
  // Rows are found through the view's strides (elements); a row's scale
  // sits at its first element / head_dim, so the scales' strides are the
  // pool's over head_dim (exact: validation makes them multiples of it).
  const uint64_t stride_page = t.kv.stride_page, stride_h = t.kv.stride_h, stride_n = t.kv.stride_n;
  uint64_t scale_stride_page = 0, scale_stride_h = 0, scale_stride_n = 0;
  if constexpr (kQuantized<S>) {
    scale_stride_page = stride_page / head_dim;
    scale_stride_h = stride_h / head_dim;
    scale_stride_n = stride_n / head_dim;
  }
  const auto* kbase = reinterpret_cast<const S*>(t.kv.key_pages);
  const auto* vbase = reinterpret_cast<const S*>(t.kv.value_pages);

  uint64_t lo = t.key_end, hi = t.key_begin;  // keys any row sees
  for (uint64_t r = 0; r < t.num_rows(); ++r) {
    t.states[r] = SoftmaxState{};
    std::fill_n(t.acc + r * head_dim, head_dim, 0.0f);
    lo = std::min(lo, std::max(t.lo[r], t.key_begin));
    hi = std::max(hi, std::min(t.hi[r], t.key_end));
  }
  if (lo >= hi) return;

  // i8 keys: the rows' query codes, once for the chunk.
  QueryCodes codes;
  if constexpr (kIntegerPath<S>) {
#if FOLIO_I8_INTEGER
    thread_local std::vector<int16_t> code_buffer;
    thread_local std::vector<float> factor_buffer;
    code_buffer.resize(t.num_rows() * head_dim);
    factor_buffer.resize(t.num_rows());
    for (uint64_t r = 0; r < t.num_rows(); ++r) {
      QuantizeQuery(t.queries[r], head_dim, t.scale, code_buffer.data() + r * head_dim,
                    &factor_buffer[r]);
    }
    codes = {code_buffer.data(), head_dim, factor_buffer.data()};
#endif
  }

  // Fills rows[0][s] (K) and rows[1][s] (V) of the task's first head for keys
  // [begin, end) of the tile at t0, reading each page's table entry once;
  // the task's head h has its rows h * stride_h further on. Quantized
  // pools: scales[s] is where the first head's scale of slot s sits (head
  // h's is h * scale_stride_h further on).
  uint64_t cached_page = UINT64_MAX;
  uint64_t page_offset = 0, scale_offset = 0;
  const auto locate = [&](uint64_t t0, uint64_t begin, uint64_t end, const S*(*rows)[kTileKeys],
                          uint64_t* scales) {
    for (uint64_t j = begin; j < end;) {  // one run of keys per page
      const uint64_t logical_page = j / page, in_page = j % page;
      if (logical_page != cached_page) {
        cached_page = logical_page;
        const auto phys = static_cast<uint64_t>(t.table[logical_page]);
        page_offset = phys * stride_page + t.kv_head_begin * stride_h;
        scale_offset = phys * scale_stride_page + t.kv_head_begin * scale_stride_h;
      }
      const uint64_t run_end = std::min(end, j + (page - in_page));
      uint64_t at = page_offset + in_page * stride_n, row = scale_offset + in_page * scale_stride_n;
      for (; j < run_end; ++j, at += stride_n, row += scale_stride_n) {
        rows[0][j - t0] = kbase + at;
        rows[1][j - t0] = vbase + at;
        scales[j - t0] = row;
      }
    }
  };
  // A (tile, head)'s lines spread evenly over the steps of a full group's
  // score blocks (one per vector of head_dim) and value loop (one per key
  // and kCols vectors); what is left is issued when the head is done.
  const size_t row_bytes = head_dim * sizeof(S);
  const size_t tile_lines = kTileKeys * ((row_bytes + 63) / 64);
  size_t score_lanes = lanes;
  size_t value_steps = kTileKeys * (head_dim / (kAccs / kGroup * lanes));
  if constexpr (kIntegerPath<S>) {
#if FOLIO_I8_INTEGER
    score_lanes = hn::Lanes(DI16());
    value_steps = kTileKeys / 2 * (head_dim / (kValueVectorsI8 * hn::Lanes(DI16())));
#endif
  }
  const size_t steps = kTileKeys / (kAccs / kGroup) * (head_dim / score_lanes) + value_steps;
  TilePrefetch prefetch(steps == 0 ? tile_lines : (tile_lines + steps - 1) / steps);

  // The first head's key ([0]) and value ([1]) rows of this tile and the
  // next, by tile slot; the current head's.
  const S* rows_a[2][kTileKeys];
  const S* rows_b[2][kTileKeys];
  const S* head_rows[2][kTileKeys];
  const S*(*cur)[kTileKeys] = rows_a;
  const S*(*next)[kTileKeys] = rows_b;
  uint64_t scales_a[kTileKeys], scales_b[kTileKeys];
  uint64_t* cur_scales = scales_a;
  uint64_t* next_scales = scales_b;
  // The current head's key and value scales (times kCodeScale) by tile
  // slot; slots outside a tile's keys keep stale but finite values, read
  // only for the junk scores nobody uses.
  alignas(64) float head_scales[2][kTileKeys] = {};
  const uint64_t first_t0 = lo - lo % kTileKeys;
  locate(first_t0, lo, std::min(first_t0 + kTileKeys, hi), cur, cur_scales);

  // Enough rows per K/V head (a prefill's) share each tile widened once
  // (WidenTile): kt its transposed keys, wide_rows[s] slot s's value row.
  bool shared = false;
  if constexpr (kSharedTiles && !kIntegerPath<S>) {
    shared = t.rows_per_head >= kSharedTileRows && head_dim % kLanesF == 0;
  }
  thread_local hwy::AlignedFreeUniquePtr<float[]> shared_buffer;
  thread_local size_t shared_floats = 0;
  float* kt = nullptr;
  float* vt = nullptr;
  const float* wide_rows[kTileKeys] = {};
  if (shared) {
    const size_t floats = 2 * kTileKeys * head_dim;
    if (shared_floats < floats) {
      shared_buffer = hwy::AllocateAligned<float>(floats);
      FOLIO_CHECK(shared_buffer != nullptr, "paged attention kernel: out of memory");
      shared_floats = floats;
    }
    kt = shared_buffer.get();
    vt = kt + kTileKeys * head_dim;
    for (size_t s = 0; s < kTileKeys; ++s) wide_rows[s] = vt + s * head_dim;
  }
  const float* const* vwide = shared && !std::is_same_v<S, float> ? wide_rows : nullptr;

  // Page-major walk: every head of a tile before the next tile. In the
  // dense layout a page's heads are one contiguous block per pool, so the
  // walk reads num_kv_heads * page_size rows in a row, a stream the
  // hardware prefetchers follow; head-major it would jump to another page
  // after page_size rows.
  for (uint64_t t0 = first_t0; t0 < hi; t0 += kTileKeys) {
    const uint64_t a0 = std::max(t0, lo), t1 = std::min(t0 + kTileKeys, hi);
    const size_t s_begin = static_cast<size_t>(a0 - t0), s_end = static_cast<size_t>(t1 - t0);
    // After the last tile comes the next chunk's first, when this thread
    // runs it next.
    const uint64_t n0 = t0 + kTileKeys;
    const uint64_t n1 = std::min(n0 + kTileKeys, n0 < hi ? hi : t.prefetch_end);
    if (n0 < n1) locate(n0, n0, n1, next, next_scales);
    for (uint64_t h = 0; h < t.num_kv_heads; ++h) {
      for (size_t s = s_begin; s < s_end; ++s) {
        head_rows[0][s] = cur[0][s] + h * stride_h;
        head_rows[1][s] = cur[1][s] + h * stride_h;
        if constexpr (kQuantized<S>) {
          head_scales[0][s] = t.kv.key_scales[cur_scales[s] + h * scale_stride_h] * kCodeScale<S>;
          head_scales[1][s] = t.kv.value_scales[cur_scales[s] + h * scale_stride_h] * kCodeScale<S>;
        }
      }
      // The next (tile, head)'s rows, prefetched a few lines at a time from
      // inside this one's loops so the misses spread over its compute.
      if (h + 1 < t.num_kv_heads) {
        prefetch.Start(cur[0] + s_begin, cur[1] + s_begin, s_end - s_begin,
                       (h + 1) * stride_h * sizeof(S), row_bytes);
      } else {
        prefetch.Start(next[0], next[1], n0 < n1 ? static_cast<size_t>(n1 - n0) : 0, 0, row_bytes);
      }
      if (shared) {
        WidenTile<S>(head_rows[0], head_rows[1], s_begin, s_end, head_dim, kt, vt, prefetch);
      }
      const uint64_t row0 = h * t.rows_per_head;
      for (uint64_t g0 = 0; g0 < t.rows_per_head; g0 += kGroup) {
        const auto rows = static_cast<size_t>(std::min<uint64_t>(kGroup, t.rows_per_head - g0));
        GroupTile<S>(t, row0 + g0, rows, t0, a0, t1, head_rows[0], head_rows[1], head_scales[0],
                     head_scales[1], kt, vwide, codes, prefetch);
      }
      prefetch.Finish();
    }
    std::swap(cur, next);
    std::swap(cur_scales, next_scales);
  }
}

void RunChunkImpl(const ChunkTask& t) {
  switch (t.kv.dtype) {
    case DType::kF32:
      return RunChunkT<float>(t);
    case DType::kBF16:
      return RunChunkT<hwy::bfloat16_t>(t);
    case DType::kF16:
      return RunChunkT<hwy::float16_t>(t);
    case DType::kI8:
      return RunChunkT<int8_t>(t);
    case DType::kF8E4M3:
      return RunChunkT<E4M3Code>(t);
    default:
      FOLIO_CHECK(false, "paged attention kernel: dtype ", DTypeName(t.kv.dtype));
  }
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace folio::attention::internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace folio::attention::internal {
HWY_EXPORT(RunChunkImpl);
HWY_EXPORT(TargetNameImpl);
void RunChunk(const ChunkTask& task) { HWY_DYNAMIC_DISPATCH(RunChunkImpl)(task); }
const char* KernelTargetName() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }
}  // namespace folio::attention::internal
#endif
