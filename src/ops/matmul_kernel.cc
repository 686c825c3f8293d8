// The SIMD matmul kernel, compiled once per Highway target (the SCALAR
// fallback, AVX2, AVX-512) and dispatched at run time to the best the CPU
// has. A task computes outputs [row_begin, row_end) for all its activation
// rows, in one of two ways:
//
// - Decode (one activation row): a memory-bound stream. Tiles of 8 weight
//   rows are read straight from their stored type and widened in registers,
//   8 independent multiply-add chains per x load.
// - Prefill (several rows): blocks of kBlockOut outputs x kBlockAct
//   activation rows, walked in chunks of kChunkCols columns. Each chunk of
//   the block's weight rows is widened to f32 once into a small buffer and
//   then used by every activation row of the block through register tiles
//   of kTileRows x kPrefillCols, whose accumulators persist in a buffer
//   between chunks. A weight row is read from memory once per activation
//   block (once per call up to kBlockAct rows), and everything a tile
//   touches stays in L2.
//
// Numeric choices (matmul.h states the order): accumulation is f32, as
// memory-speed decode can afford; each (activation row, output) pair owns
// exactly one vector accumulator that walks the columns in increasing order
// — a vector stored between chunks and loaded back is the same vector — so
// the path, the tile shape, the chunking, the task split and the rows in a
// call never change a bit. Widening (bf16, f16, int8 to f32) is exact, so
// widening in registers or into the buffer gives the same operands. The
// scalar tail uses std::fma so that its rounding does not depend on whether
// the compiler contracts a * b + c.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "ops/matmul_internal.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_kernel.cc"
// foreach_target.h re-includes this file once per target: it comes first.
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace folio::ops::internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// f32 lanes of this target (fixed-width targets only: 1 on SCALAR).
constexpr size_t kLanes = HWY_LANES(float);
static_assert(kQ8_0BlockElems % kLanes == 0, "a Q8_0 block must fill whole vectors");
constexpr size_t kQ8Vecs = kQ8_0BlockElems / kLanes;  // vectors per Q8_0 block
// Decode: outputs per tile (8 beat 4 in a 1-thread bf16 measurement here,
// 0.86 vs 0.82 of the streaming-read bandwidth).
constexpr size_t kDecodeCols = 8;
// Decode: software prefetch distance along each weight row. The hardware
// prefetchers restart at every 4 KiB page of each of the 8 row streams;
// prefetching 512 bytes ahead lifted 2-thread bf16 decode from ~0.82 to
// ~0.88 of the streaming-read bandwidth (medians of 4 runs; 1024 and 4096
// did worse).
constexpr size_t kPrefetchBytes = 512;
// Prefill register tile: 4 x 4 (16 accumulators) fits AVX-512's 32 vector
// registers beside the 4 weight vectors; AVX2's 16 registers hold 2 x 4.
constexpr size_t kTileRows = HWY_MAX_BYTES >= 64 ? 4 : 2;
constexpr size_t kPrefillCols = 4;
// Prefill blocking: the widened chunk (32 x 1024 f32, 128 KiB), the
// accumulators (64 x 32 vectors, 128 KiB on AVX-512) and the activation
// chunk (64 x 1024 f32, 256 KiB) fit in a 2 MiB L2 together.
constexpr size_t kBlockOut = 32;
constexpr size_t kBlockAct = 64;
constexpr size_t kChunkCols = 1024;
static_assert(kChunkCols % kQ8_0BlockElems == 0 && kBlockOut % kPrefillCols == 0);

template <typename S>
constexpr bool kIsQ8 = std::is_same_v<S, void>;  // S = void selects Q8_0

// Exact widening of a stored element type S (not Q8_0).
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

// A Q8_0 block's scale and its int8 values as f32 (both exact): the
// vector form of DequantizeRow's Q8_0 decoder (ops/weight_type.h), tested
// against it through MatMulReference and WidenRow.
HWY_INLINE float Q8Scale(const std::byte* block) {
  return ScalarWide(reinterpret_cast<const hwy::float16_t*>(block));
}
// The scale broadcast to every lane: one broadcast and one vector
// conversion, rather than a scalar conversion and a broadcast.
HWY_INLINE VF Q8ScaleVec(DF d, const std::byte* block) {
  uint16_t bits;
  std::memcpy(&bits, block, kQ8_0ScaleBytes);
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(d, hn::BitCast(dh, hn::Set(hn::RebindToUnsigned<decltype(dh)>(), bits)));
}
HWY_INLINE VF Q8Values(DF d, const std::byte* block, size_t v) {
  const auto* q = reinterpret_cast<const int8_t*>(block + kQ8_0ScaleBytes) + v * kLanes;
  return hn::ConvertTo(
      d, hn::PromoteTo(hn::Rebind<int32_t, DF>(), hn::LoadU(hn::Rebind<int8_t, DF>(), q)));
}

// The lane sum of an accumulator, then the scalar tail in order.
template <typename S>
HWY_INLINE float Finish(DF d, VF acc, const std::byte* w_row, const float* x, size_t cols) {
  float s = hn::GetLane(hn::SumOfLanes(d, acc));
  if constexpr (!kIsQ8<S>) {
    const auto* w = reinterpret_cast<const S*>(w_row);
    for (size_t i = cols - cols % kLanes; i < cols; ++i) s = std::fma(ScalarWide(w + i), x[i], s);
  }
  return s;
}

// ---------------------------------------------------------------- decode

// y[c] = dot(W row c, x) for kC consecutive rows starting at w_rows.
template <typename S, size_t kC>
HWY_NOINLINE void DecodeTile(const std::byte* w_rows, size_t row_bytes, const float* x, size_t cols,
                             float* y) {
  const DF d;
  VF acc[kC];
  for (size_t c = 0; c < kC; ++c) acc[c] = hn::Zero(d);
  if constexpr (kIsQ8<S>) {
    for (size_t b = 0; b < cols / kQ8_0BlockElems; ++b) {
      VF xv[kQ8Vecs];
      for (size_t v = 0; v < kQ8Vecs; ++v)
        xv[v] = hn::LoadU(d, x + b * kQ8_0BlockElems + v * kLanes);
      for (size_t c = 0; c < kC; ++c) {
        const std::byte* block = w_rows + c * row_bytes + b * kQ8_0BlockBytes;
        if (b % 2 == 0) hwy::Prefetch(block + kPrefetchBytes);  // >= 1 a line
        VF p = hn::Mul(Q8Values(d, block, 0), xv[0]);
        for (size_t v = 1; v < kQ8Vecs; ++v) p = hn::MulAdd(Q8Values(d, block, v), xv[v], p);
        acc[c] = hn::MulAdd(Q8ScaleVec(d, block), p, acc[c]);
      }
    }
  } else {
    const S* w[kC];
    for (size_t c = 0; c < kC; ++c) w[c] = reinterpret_cast<const S*>(w_rows + c * row_bytes);
    const auto step = [&](size_t i) HWY_ATTR {
      const VF xv = hn::LoadU(d, x + i);
      for (size_t c = 0; c < kC; ++c) acc[c] = hn::MulAdd(LoadWide(d, w[c] + i), xv, acc[c]);
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
  }
  for (size_t c = 0; c < kC; ++c) y[c] = Finish<S>(d, acc[c], w_rows + c * row_bytes, x, cols);
}

template <typename S>
void Decode(const MatMulTask& t) {
  const uint64_t row_bytes = WeightRowBytes(t.w.type, t.w.cols);
  const auto tile = [&](auto cols_tag, uint64_t j) HWY_ATTR {
    DecodeTile<S, decltype(cols_tag)::value>(t.w.data + j * row_bytes, row_bytes, t.x, t.w.cols,
                                             t.y + j);
  };
  uint64_t j = t.row_begin;
  for (; j + kDecodeCols <= t.row_end; j += kDecodeCols)
    tile(std::integral_constant<size_t, kDecodeCols>(), j);
  for (; j + 4 <= t.row_end; j += 4) tile(std::integral_constant<size_t, 4>(), j);
  for (; j < t.row_end; ++j) tile(std::integral_constant<size_t, 1>(), j);
}

// ---------------------------------------------------------------- prefill

// One chunk of a block's weight rows as f32: row c's chunk starts at
// rows[c]; for Q8_0, rows hold the int8 values and scales[c] the chunk's
// block scales.
struct Panel {
  const float* rows[kBlockOut];
  const float* scales[kBlockOut];
  size_t cols;  // columns in this chunk (a multiple of kLanes; of 32 for Q8_0)
};

// acc[r * kBlockOut + c] (one vector each) += the chunk's products of x
// rows r < kR (x[r] points at the chunk) and panel rows c < kC.
template <bool kQ8, size_t kR, size_t kC>
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
  if constexpr (kQ8) {
    for (size_t b = 0; b < panel.cols / kQ8_0BlockElems; ++b) {
      const size_t i0 = b * kQ8_0BlockElems;
      VF xv[kR][kQ8Vecs];
      for (size_t r = 0; r < kR; ++r) {
        for (size_t v = 0; v < kQ8Vecs; ++v) xv[r][v] = hn::LoadU(d, x[r] + i0 + v * kLanes);
      }
      for (size_t c = 0; c < kC; ++c) {
        VF q[kQ8Vecs];
        for (size_t v = 0; v < kQ8Vecs; ++v) q[v] = hn::Load(d, w[c] + i0 + v * kLanes);
        const VF scale = hn::Set(d, panel.scales[c0 + c][b]);
        for (size_t r = 0; r < kR; ++r) {
          VF p = hn::Mul(q[0], xv[r][0]);
          for (size_t v = 1; v < kQ8Vecs; ++v) p = hn::MulAdd(q[v], xv[r][v], p);
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

// Scratch of one thread, kept between calls: the widened chunk, Q8_0
// scales and the accumulators, vector-aligned.
struct Scratch {
  hwy::AlignedFreeUniquePtr<float[]> wide = hwy::AllocateAligned<float>(kBlockOut * kChunkCols);
  hwy::AlignedFreeUniquePtr<float[]> scales =
      hwy::AllocateAligned<float>(kBlockOut * kChunkCols / kQ8_0BlockElems);
  hwy::AlignedFreeUniquePtr<float[]> acc =
      hwy::AllocateAligned<float>(kBlockAct * kBlockOut * kLanes);
};

// Fills panel with columns [k0, k0 + n) of rows [j0, j0 + jn) of W.
template <typename S>
void WidenChunk(const MatMulTask& t, uint64_t j0, size_t jn, size_t k0, size_t n, Scratch& s,
                Panel& panel) {
  const DF d;
  const uint64_t row_bytes = WeightRowBytes(t.w.type, t.w.cols);
  panel.cols = n;
  for (size_t c = 0; c < jn; ++c) {
    const std::byte* row = t.w.data + (j0 + c) * row_bytes;
    float* out = s.wide.get() + c * kChunkCols;
    panel.rows[c] = out;
    if constexpr (kIsQ8<S>) {
      float* scales = s.scales.get() + c * (kChunkCols / kQ8_0BlockElems);
      panel.scales[c] = scales;
      for (size_t b = 0; b < n / kQ8_0BlockElems; ++b) {
        const std::byte* block = row + (k0 / kQ8_0BlockElems + b) * kQ8_0BlockBytes;
        scales[b] = Q8Scale(block);
        for (size_t v = 0; v < kQ8Vecs; ++v) {
          hn::Store(Q8Values(d, block, v), d, out + b * kQ8_0BlockElems + v * kLanes);
        }
      }
    } else if constexpr (std::is_same_v<S, float>) {
      panel.rows[c] = reinterpret_cast<const float*>(row) + k0;  // already f32
    } else {
      const S* src = reinterpret_cast<const S*>(row) + k0;
      for (size_t i = 0; i < n; i += kLanes) hn::Store(LoadWide(d, src + i), d, out + i);
    }
  }
}

// Runs the panel over activation rows [r0, r0 + rn) (x rows at column k0).
template <bool kQ8>
void PanelBlock(const Panel& panel, size_t jn, const MatMulTask& t, uint64_t r0, size_t rn,
                size_t k0, float* acc, bool first) {
  const auto tile = [&](auto rows_tag, auto cols_tag, size_t r, size_t c) HWY_ATTR {
    constexpr size_t kR = decltype(rows_tag)::value;
    const float* x[kR];
    for (size_t k = 0; k < kR; ++k) x[k] = t.x + (r0 + r + k) * t.w.cols + k0;
    PanelTile<kQ8, kR, decltype(cols_tag)::value>(panel, c, x, acc + (r * kBlockOut + c) * kLanes,
                                                  first);
  };
  using Rows = std::integral_constant<size_t, kTileRows>;
  using One = std::integral_constant<size_t, 1>;
  using Cols = std::integral_constant<size_t, kPrefillCols>;
  size_t c = 0;
  for (; c + kPrefillCols <= jn; c += kPrefillCols) {
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

template <typename S>
void Prefill(const MatMulTask& t) {
  thread_local Scratch scratch;
  const DF d;
  const uint64_t cols = t.w.cols, row_bytes = WeightRowBytes(t.w.type, cols);
  const size_t vec_end = kIsQ8<S> ? cols : cols - cols % kLanes;
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
        WidenChunk<S>(t, j0, jn, k0, std::min(kChunkCols, vec_end - k0), scratch, panel);
        PanelBlock<kIsQ8<S>>(panel, jn, t, r0, rn, k0, acc, k0 == 0);
      }
      for (size_t r = 0; r < rn; ++r) {
        for (size_t c = 0; c < jn; ++c) {
          const VF a = hn::Load(d, acc + (r * kBlockOut + c) * kLanes);
          t.y[(r0 + r) * t.w.rows + j0 + c] =
              Finish<S>(d, a, t.w.data + (j0 + c) * row_bytes, t.x + (r0 + r) * cols, cols);
        }
      }
    }
  }
}

template <typename S>
void RowsT(const MatMulTask& t) {
  if (t.num_rows == 1) {
    Decode<S>(t);
  } else {
    Prefill<S>(t);
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
      return RowsT<void>(t);
    case WeightType::kF64:  // no kernel (has_matmul false): MatMul refused it
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
