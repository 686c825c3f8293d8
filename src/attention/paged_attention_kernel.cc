// The SIMD paged-attention chunk kernel, compiled once per Highway target
// (the scalar fallback, AVX2 and AVX3) and dispatched at run time to the best the CPU has.
//
// Numeric choices, all fixed so that a row's bits depend only on its own
// inputs (contract 3):
// - accumulation is f32; K/V of narrower dtypes are widened exactly;
// - a dot product runs over head_dim with one vector accumulator in index
//   order, a lane sum, then the scalar tail (rows of a group share each K
//   load, which also hides the FMA latency);
// - keys are taken in tiles of kTileKeys at multiples of kTileKeys: per
//   tile a row rescales its state once (one exp of the max difference) and
//   adds its visible keys' exp(s - m) in key order;
// - a row only touches keys it may see, so other rows in the call (other
//   query positions, other batch entries) cannot change its arithmetic.
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "attention/paged_attention_internal.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attention/paged_attention_kernel.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace folio::attention::internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

static_assert(kTileKeys % 16 == 0, "a tile must fill whole vectors on every target");

// Rows handled together: every K/V vector loaded is used by up to kGroup
// query rows (a GQA group, or several positions of a prefill).
constexpr size_t kGroup = 4;

// One vector of S widened to f32, and one scalar.
template <typename S>
HWY_INLINE hn::Vec<DF> LoadF(const S* HWY_RESTRICT p) {
  const DF d;
  if constexpr (std::is_same_v<S, float>) {
    return hn::LoadU(d, p);
  } else {
    const hn::Rebind<S, DF> ds;
    return hn::PromoteTo(d, hn::LoadU(ds, p));
  }
}
template <typename S>
HWY_INLINE float ScalarF(const S* p) {
  if constexpr (std::is_same_v<S, float>) {
    return *p;
  } else {
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    return std::is_same_v<S, hwy::bfloat16_t> ? BF16BitsToF32(bits) : F16BitsToF32(bits);
  }
}

// out[r] = dot(q[r], k) for R rows. Each row's dot runs one accumulator over
// whole vectors in index order, a lane sum, then the scalar tail in order:
// the same instructions whatever R is, so a row's bits never depend on
// which rows share the call.
template <typename S, size_t R>
HWY_INLINE void Dots(const float* const* q, const S* HWY_RESTRICT k, size_t n, float* out) {
  const DF d;
  const size_t lanes = hn::Lanes(d);
  hn::Vec<DF> acc[R];
  for (size_t r = 0; r < R; ++r) acc[r] = hn::Zero(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto kv = LoadF(k + i);
    for (size_t r = 0; r < R; ++r) acc[r] = hn::MulAdd(hn::LoadU(d, q[r] + i), kv, acc[r]);
  }
  for (size_t r = 0; r < R; ++r) out[r] = hn::GetLane(hn::SumOfLanes(d, acc[r]));
  for (; i < n; ++i) {
    const float kf = ScalarF(k + i);
    for (size_t r = 0; r < R; ++r) out[r] += q[r][i] * kf;
  }
}

template <typename S>
void RunChunkT(const ChunkTask& t) {
  const DF d;
  const size_t lanes = hn::Lanes(d);
  const uint64_t head_dim = t.kv.head_dim, page = t.kv.page_size;
  const uint64_t page_stride = page * head_dim;  // one head's block in a page
  const auto* kbase = reinterpret_cast<const S*>(t.kv.key_pages);
  const auto* vbase = reinterpret_cast<const S*>(t.kv.value_pages);

  const S* krow[kTileKeys];  // this tile's key and value rows
  const S* vrow[kTileKeys];
  alignas(64) float scores[kGroup][kTileKeys] = {};
  alignas(64) float p[kGroup][kTileKeys];

  uint64_t lo = t.key_end, hi = t.key_begin;  // keys any row sees
  for (uint64_t r = 0; r < t.num_rows; ++r) {
    t.states[r] = SoftmaxState{};
    std::fill_n(t.acc + r * head_dim, head_dim, 0.0f);
    lo = std::min(lo, std::max(t.lo[r], t.key_begin));
    hi = std::max(hi, std::min(t.hi[r], t.key_end));
  }
  if (lo >= hi) return;

  uint64_t cached_page = UINT64_MAX;
  const S* kpage = nullptr;
  const S* vpage = nullptr;
  for (uint64_t t0 = lo - lo % kTileKeys; t0 < hi; t0 += kTileKeys) {
    const uint64_t a0 = std::max(t0, lo), t1 = std::min(t0 + kTileKeys, hi);
    // Prefetch the next tile's K/V rows, one page run at a time: a short
    // page is one small block per head, too short for the hardware
    // prefetcher to ramp up on before the walk jumps to another page.
    for (uint64_t j = t1, end = std::min(t1 + kTileKeys, hi); j < end;) {
      const uint64_t run_end = std::min(end, (j / page + 1) * page);
      const auto phys = static_cast<uint64_t>(t.table[j / page]);
      const uint64_t at =
          (phys * t.kv.num_kv_heads + t.kv_head) * page_stride + (j % page) * head_dim;
      const auto* kb = reinterpret_cast<const char*>(kbase + at);
      const auto* vb = reinterpret_cast<const char*>(vbase + at);
      for (uint64_t b = 0; b < (run_end - j) * head_dim * sizeof(S); b += 64) {
        hwy::Prefetch(kb + b);
        hwy::Prefetch(vb + b);
      }
      j = run_end;
    }
    for (uint64_t j = a0; j < t1; ++j) {
      const uint64_t logical_page = j / page;
      if (logical_page != cached_page) {  // one table read per page
        cached_page = logical_page;
        const auto phys = static_cast<uint64_t>(t.table[logical_page]);
        const uint64_t offset = (phys * t.kv.num_kv_heads + t.kv_head) * page_stride;
        kpage = kbase + offset;
        vpage = vbase + offset;
      }
      krow[j - t0] = kpage + (j % page) * head_dim;
      vrow[j - t0] = vpage + (j % page) * head_dim;
    }
    for (uint64_t g0 = 0; g0 < t.num_rows; g0 += kGroup) {
      const size_t rows = static_cast<size_t>(std::min<uint64_t>(kGroup, t.num_rows - g0));
      // Tile slots [first, last) each row of the group sees.
      uint64_t first[kGroup], last[kGroup];
      bool any = false;
      for (size_t r = 0; r < rows; ++r) {
        first[r] = std::max(a0, t.lo[g0 + r]) - t0;
        last[r] = std::max(std::min(t1, t.hi[g0 + r]), t0 + first[r]) - t0;
        any |= first[r] < last[r];
      }
      if (!any) continue;
      // Scores: each key row is loaded once for the whole group.
      for (uint64_t j = a0 - t0; j < t1 - t0; ++j) {
        bool all = rows == kGroup;
        for (size_t r = 0; r < rows; ++r) all &= first[r] <= j && j < last[r];
        if (all) {
          float out[kGroup];
          Dots<S, kGroup>(t.queries + g0, krow[j], head_dim, out);
          for (size_t r = 0; r < kGroup; ++r) scores[r][j] = out[r] * t.scale;
          continue;
        }
        for (size_t r = 0; r < rows; ++r) {
          if (first[r] <= j && j < last[r]) {
            Dots<S, 1>(t.queries + g0 + r, krow[j], head_dim, &scores[r][j]);
            scores[r][j] *= t.scale;
          }
        }
      }
      // Online-softmax update: one rescale per row per tile.
      float corr[kGroup];
      for (size_t r = 0; r < rows; ++r) {
        if (first[r] >= last[r]) continue;
        float tile_max = -std::numeric_limits<float>::infinity();
        for (uint64_t j = first[r]; j < last[r]; ++j) tile_max = std::max(tile_max, scores[r][j]);
        SoftmaxState& st = t.states[g0 + r];
        const float m = std::max(st.max, tile_max);
        corr[r] = std::exp(st.max - m);  // 0 for an empty state
        const auto vm = hn::Set(d, m);
        for (size_t j = 0; j < kTileKeys; j += lanes) {
          hn::Store(hn::Exp(d, hn::Sub(hn::Load(d, scores[r] + j), vm)), d, p[r] + j);
        }
        float sum = st.sum * corr[r];
        for (uint64_t j = first[r]; j < last[r]; ++j) sum += p[r][j];
        st.max = m;
        st.sum = sum;
      }
      // acc = acc * corr + sum_j p_j v_j per row, j ascending; each value
      // vector is loaded once for the group.
      uint64_t i = 0;
      // The common case, a full group whose rows all see the whole tile (a
      // decode step's GQA group): no per-row tests, so the accumulators
      // stay in registers. The same operations in the same order as the
      // general loop below, so the same bits.
      bool full = rows == kGroup;
      for (size_t r = 0; r < rows; ++r) full &= first[r] == a0 - t0 && last[r] == t1 - t0;
      for (; full && i + lanes <= head_dim; i += lanes) {
        hn::Vec<DF> acc[kGroup];
        for (size_t r = 0; r < kGroup; ++r) {
          acc[r] = hn::Mul(hn::LoadU(d, t.acc + (g0 + r) * head_dim + i), hn::Set(d, corr[r]));
        }
        for (uint64_t j = a0 - t0; j < t1 - t0; ++j) {
          const auto vv = LoadF(vrow[j] + i);
          for (size_t r = 0; r < kGroup; ++r) acc[r] = hn::MulAdd(hn::Set(d, p[r][j]), vv, acc[r]);
        }
        for (size_t r = 0; r < kGroup; ++r) hn::StoreU(acc[r], d, t.acc + (g0 + r) * head_dim + i);
      }
      for (; i + lanes <= head_dim; i += lanes) {
        hn::Vec<DF> acc[kGroup];
        for (size_t r = 0; r < rows; ++r) {
          if (first[r] < last[r]) {
            acc[r] = hn::Mul(hn::LoadU(d, t.acc + (g0 + r) * head_dim + i), hn::Set(d, corr[r]));
          }
        }
        for (uint64_t j = a0 - t0; j < t1 - t0; ++j) {
          const auto vv = LoadF(vrow[j] + i);
          for (size_t r = 0; r < rows; ++r) {
            if (first[r] <= j && j < last[r]) acc[r] = hn::MulAdd(hn::Set(d, p[r][j]), vv, acc[r]);
          }
        }
        for (size_t r = 0; r < rows; ++r) {
          if (first[r] < last[r]) hn::StoreU(acc[r], d, t.acc + (g0 + r) * head_dim + i);
        }
      }
      for (; i < head_dim; ++i) {
        for (size_t r = 0; r < rows; ++r) {
          if (first[r] >= last[r]) continue;
          float* a = t.acc + (g0 + r) * head_dim + i;
          float x = *a * corr[r];
          for (uint64_t j = first[r]; j < last[r]; ++j) x += p[r][j] * ScalarF(vrow[j] + i);
          *a = x;
        }
      }
    }
  }
}

void RunChunkImpl(const ChunkTask& t) {
  switch (t.kv.dtype) {
    case DType::kF32: return RunChunkT<float>(t);
    case DType::kBF16: return RunChunkT<hwy::bfloat16_t>(t);
    case DType::kF16: return RunChunkT<hwy::float16_t>(t);
    default: FOLIO_CHECK(false, "paged attention kernel: dtype ", DTypeName(t.kv.dtype));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace folio::attention::internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace folio::attention::internal {
HWY_EXPORT(RunChunkImpl);
void RunChunk(const ChunkTask& task) { HWY_DYNAMIC_DISPATCH(RunChunkImpl)(task); }
}  // namespace folio::attention::internal
#endif
