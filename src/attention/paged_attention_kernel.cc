// The SIMD paged-attention chunk kernel, compiled once per Highway target
// (the scalar fallback, AVX2 and AVX3) and dispatched at run time to the best the CPU has.
//
// Numeric choices, all fixed so that a row's bits depend only on its own
// inputs (contract 3):
// - accumulation is f32; K/V of narrower dtypes are widened exactly;
// - a dot product runs over head_dim with two vector accumulators in
//   index order, a lane sum, then the scalar tail;
// - keys are taken in tiles of kTileKeys at multiples of kTileKeys: per
//   tile a row rescales its state once (one exp of the max difference) and
//   adds its visible keys' exp(s - m) in key order;
// - a row only touches keys it may see, so other rows in the call (other
//   query positions, other batch entries) cannot change its arithmetic.
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

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

// dst[0, n) = src[0, n) widened to f32.
template <typename S>
HWY_INLINE void Widen(const S* HWY_RESTRICT src, float* HWY_RESTRICT dst, size_t n) {
  const DF d;
  const hn::Rebind<S, DF> ds;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::PromoteTo(d, hn::LoadU(ds, src + i)), d, dst + i);
  for (; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + i, 2);
    dst[i] = std::is_same_v<S, hwy::bfloat16_t> ? BF16BitsToF32(bits) : F16BitsToF32(bits);
  }
}

HWY_INLINE float Dot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, size_t n) {
  const DF d;
  const size_t lanes = hn::Lanes(d);
  auto s0 = hn::Zero(d);
  auto s1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    s0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), s0);
    s1 = hn::MulAdd(hn::LoadU(d, a + i + lanes), hn::LoadU(d, b + i + lanes), s1);
  }
  if (i + lanes <= n) {
    s0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), s0);
    i += lanes;
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// acc = acc * corr + sum_{j in [a, b)} p[j] * v[j], per feature, j ascending.
HWY_INLINE void Accumulate(float* HWY_RESTRICT acc, float corr, const float* p,
                           const float* const* v, uint64_t a, uint64_t b, size_t n) {
  const DF d;
  const size_t lanes = hn::Lanes(d);
  const auto vcorr = hn::Set(d, corr);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    auto x = hn::Mul(hn::LoadU(d, acc + i), vcorr);
    for (uint64_t j = a; j < b; ++j) x = hn::MulAdd(hn::Set(d, p[j]), hn::LoadU(d, v[j] + i), x);
    hn::StoreU(x, d, acc + i);
  }
  for (; i < n; ++i) {
    float x = acc[i] * corr;
    for (uint64_t j = a; j < b; ++j) x += p[j] * v[j][i];
    acc[i] = x;
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
  constexpr bool kWiden = !std::is_same_v<S, float>;

  thread_local std::vector<float> kbuf, vbuf, scores;
  if constexpr (kWiden) {
    kbuf.resize(kTileKeys * head_dim);
    vbuf.resize(kTileKeys * head_dim);
  }
  scores.assign(kTileKeys, 0.0f);
  const float* krow[kTileKeys];  // this tile's key rows, as f32
  const float* vrow[kTileKeys];
  float p[kTileKeys];

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
      const uint64_t row = (j % page) * head_dim;
      const uint64_t slot = j - t0;
      if constexpr (kWiden) {
        Widen(kpage + row, kbuf.data() + slot * head_dim, head_dim);
        Widen(vpage + row, vbuf.data() + slot * head_dim, head_dim);
        krow[slot] = kbuf.data() + slot * head_dim;
        vrow[slot] = vbuf.data() + slot * head_dim;
      } else {
        krow[slot] = kpage + row;
        vrow[slot] = vpage + row;
      }
    }
    for (uint64_t r = 0; r < t.num_rows; ++r) {
      const uint64_t first = std::max(a0, t.lo[r]), last = std::min(t1, t.hi[r]);
      if (first >= last) continue;
      const uint64_t a = first - t0, b = last - t0;  // tile slots this row sees
      float tile_max = -std::numeric_limits<float>::infinity();
      for (uint64_t j = a; j < b; ++j) {
        scores[j] = Dot(t.queries[r], krow[j], head_dim) * t.scale;
        tile_max = std::max(tile_max, scores[j]);
      }
      SoftmaxState& st = t.states[r];
      const float m = std::max(st.max, tile_max);
      const float corr = std::exp(st.max - m);  // 0 for an empty state
      const auto vm = hn::Set(d, m);
      for (size_t j = 0; j < kTileKeys; j += lanes) {
        hn::StoreU(hn::Exp(d, hn::Sub(hn::LoadU(d, scores.data() + j), vm)), d, p + j);
      }
      float sum = st.sum * corr;
      for (uint64_t j = a; j < b; ++j) sum += p[j];
      Accumulate(t.acc + r * head_dim, corr, p, vrow, a, b, head_dim);
      st.max = m;
      st.sum = sum;
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
