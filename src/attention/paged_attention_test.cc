// The kernel is also compiled for AVX3_DL (VNNI, the i8 score path), so
// this test enumerates that target too.
#define HWY_WANT_AVX3_DL
#include "folio/attention/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <vector>

#include "attention/paged_attention_internal.h"
#include "folio/core/splitmix64.h"
#include "testing/simd_targets.h"

namespace folio::attention {
namespace {

// Runs fn once per SIMD target of the kernel that this CPU has (here
// AVX-512 with and without VNNI, AVX2 and the baseline): each has its own
// block shapes and lane-sum trees, so each must match the reference and
// keep contract 3 on its own. Bits may differ between targets.
void ForEachTarget(const std::function<void()>& fn) {
  test_support::ForEachSimdTarget(internal::KernelTargetName, fn);
}

// How Place lays out a pool: the dense [num_pages, num_kv_heads, page_size,
// head_dim] the cache stores, token-major [num_pages, page_size,
// num_kv_heads, head_dim], or dense with a gap of NaN rows after every slot,
// head and page. Kernels address rows through the view's strides, so every
// layout holding the same rows gives the same bits.
enum class Layout { kDense, kNhd, kPadded };

// A batch of sequences placed in a page pool. Every sequence's logical K/V
// content comes from its own seed, so the same content can be placed with
// different page sizes, permutations and layouts. Every element no
// sequence owns is NaN (quantized pools: every row no sequence owns has a
// NaN scale).
struct PagedBatch {
  uint64_t num_kv_heads = 0, head_dim = 0, page_size = 0, num_pages = 0;
  uint64_t stride_page = 0, stride_h = 0, stride_n = 0;  // elements
  DType dtype = DType::kF32;
  std::vector<std::byte> keys, values;          // rows at kv().RowIndex
  std::vector<float> key_scales, value_scales;  // quantized: at kv().ScaleIndex
  std::vector<int32_t> indptr, indices, last_page_len, query_indptr;

  kv::PagedKvView kv() const {
    kv::PagedKvView v{keys.data(),  values.data(), dtype,   num_pages,
                      num_kv_heads, page_size,     head_dim};
    v.stride_page = stride_page;
    v.stride_h = stride_h;
    v.stride_n = stride_n;
    if (IsQuantized(dtype)) {
      v.key_scales = key_scales.data();
      v.value_scales = value_scales.data();
    }
    return v;
  }
  kv::PagedBatchView batch() const { return {indptr, indices, last_page_len, query_indptr}; }
  // Sequence s's physical page of logical key `pos`.
  uint64_t PageOf(uint64_t s, uint64_t pos) const {
    return static_cast<uint64_t>(indices[static_cast<size_t>(indptr[s]) + pos / page_size]);
  }
};

struct SeqSpec {
  uint64_t context;
  uint64_t query_len;
  uint64_t seed;
};

// Value of (sequence seed, position, head, feature) in [-1, 1).
float Content(uint64_t seed, uint64_t pos, uint64_t h, uint64_t f, uint64_t role) {
  SplitMix64 rng(seed * 0x9e37 + ((pos * 64 + h) * 1024 + f) * 2 + role);
  return static_cast<float>(2 * rng.NextUnit() - 1);
}

PagedBatch Place(const std::vector<SeqSpec>& seqs, uint64_t kv_heads, uint64_t head_dim,
                 uint64_t page_size, DType dtype, uint64_t placement_seed, uint64_t spare_pages = 3,
                 Layout layout = Layout::kDense) {
  PagedBatch b;
  b.num_kv_heads = kv_heads;
  b.head_dim = head_dim;
  b.page_size = page_size;
  b.dtype = dtype;
  uint64_t total = spare_pages;
  for (const auto& s : seqs) total += (s.context + page_size - 1) / page_size;
  b.num_pages = total;
  switch (layout) {
    case Layout::kDense:
      b.stride_n = head_dim;
      b.stride_h = page_size * head_dim;
      b.stride_page = kv_heads * page_size * head_dim;
      break;
    case Layout::kNhd:
      b.stride_h = head_dim;
      b.stride_n = kv_heads * head_dim;
      b.stride_page = page_size * kv_heads * head_dim;
      break;
    case Layout::kPadded:  // gaps of whole rows, so quantized scales still line up
      b.stride_n = 2 * head_dim;
      b.stride_h = page_size * b.stride_n + head_dim;
      b.stride_page = kv_heads * b.stride_h + 3 * head_dim;
      break;
  }
  // Shuffled physical pages.
  std::vector<int32_t> ids(total);
  std::iota(ids.begin(), ids.end(), 0);
  SplitMix64 rng(placement_seed);
  for (size_t i = ids.size(); i > 1; --i) std::swap(ids[i - 1], ids[rng.NextU64() % i]);
  const size_t esize = DTypeSize(dtype);
  const uint64_t slots = total * b.stride_page;  // every layout's pages end within it
  b.keys.resize(slots * esize);
  b.values.resize(slots * esize);
  const bool quantized = IsQuantized(dtype);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (quantized) {
    b.key_scales.assign(slots / head_dim, nan);
    b.value_scales.assign(slots / head_dim, nan);
  } else {
    for (uint64_t i = 0; i < slots; ++i) {
      StoreElement(dtype, b.keys.data(), i, nan);
      StoreElement(dtype, b.values.data(), i, nan);
    }
  }
  // Quantized content: Content's value as a code of the dtype's full
  // range, and a scale per (position, head, role) between 1 and 1.75
  // times the one that maps the range back to [-1, 1].
  const float code_max = dtype == DType::kI8 ? 127.0f : 448.0f;
  const auto store = [&](std::vector<std::byte>& pool, uint64_t i, float x) {
    if (dtype == DType::kI8) {
      pool[i] = static_cast<std::byte>(static_cast<int8_t>(std::nearbyint(x * code_max)));
    } else {
      StoreElement(dtype, pool.data(), i, quantized ? x * code_max : x);
    }
  };
  const kv::PagedKvView view = b.kv();
  size_t next = 0;
  b.indptr.push_back(0);
  b.query_indptr.push_back(0);
  for (const auto& s : seqs) {
    const uint64_t pages = (s.context + page_size - 1) / page_size;
    const auto first = static_cast<int64_t>(b.indices.size());
    for (uint64_t p = 0; p < pages; ++p) b.indices.push_back(ids[next++]);
    for (uint64_t pos = 0; pos < s.context; ++pos) {
      const auto phys = static_cast<uint64_t>(b.indices[first + pos / page_size]);
      for (uint64_t h = 0; h < kv_heads; ++h) {
        const uint64_t row = view.RowIndex(phys, h, pos % page_size);
        for (uint64_t f = 0; f < head_dim; ++f) {
          store(b.keys, row + f, Content(s.seed, pos, h, f, 0));
          store(b.values, row + f, Content(s.seed, pos, h, f, 1));
        }
        if (quantized) {
          const uint64_t at = view.ScaleIndex(phys, h, pos % page_size);
          b.key_scales[at] = (1.0f + 0.25f * static_cast<float>((s.seed + pos + h) % 4)) / code_max;
          b.value_scales[at] =
              (1.0f + 0.25f * static_cast<float>((s.seed + pos + h + 1) % 4)) / code_max;
        }
      }
    }
    b.indptr.push_back(static_cast<int32_t>(b.indices.size()));
    b.last_page_len.push_back(
        static_cast<int32_t>(s.context == 0 ? 0 : (s.context - 1) % page_size + 1));
    b.query_indptr.push_back(b.query_indptr.back() + static_cast<int32_t>(s.query_len));
  }
  return b;
}

// Token-major queries [rows, H_q, D], from each sequence's seed.
std::vector<float> Queries(const std::vector<SeqSpec>& seqs, uint64_t q_heads, uint64_t head_dim) {
  std::vector<float> q;
  for (const auto& s : seqs)
    for (uint64_t i = 0; i < s.query_len; ++i)
      for (uint64_t h = 0; h < q_heads; ++h)
        for (uint64_t f = 0; f < head_dim; ++f)
          q.push_back(Content(s.seed + 1000, s.context - s.query_len + i, h, f, 2));
  return q;
}

std::vector<float> RunKernel(const PagedAttentionParams& p, const std::vector<float>& q,
                             const PagedBatch& b, ThreadPool* pool = nullptr) {
  std::vector<float> out(q.size(), -7.0f);
  const Status s = PagedAttention(p, q, b.kv(), b.batch(), out, pool);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

struct GridCase {
  uint64_t page_size, context, query_len, q_heads, kv_heads, head_dim, window;
  DType dtype;
};

void PrintTo(const GridCase& c, std::ostream* os) {
  *os << "p" << c.page_size << "_n" << c.context << "_l" << c.query_len << "_hq" << c.q_heads
      << "_hkv" << c.kv_heads << "_d" << c.head_dim << "_w" << c.window << "_"
      << DTypeName(c.dtype);
}

class PagedAttentionGrid : public ::testing::TestWithParam<GridCase> {};

// How far the f32 kernel may sit from the float64 reference. With |q|, |k|,
// |v| <= 1 a score's f32 error is at most ~D * eps * D * scale; the output,
// a convex combination of values, moves by at most twice that, plus one
// rounding per accumulated key.
double ReferenceTolerance(uint64_t head_dim, double scale, uint64_t context) {
  const double eps = 0x1.0p-24;
  const double d = static_cast<double>(head_dim);
  return eps * (2.0 * d * d * scale + 2.0 * static_cast<double>(context) + 16);
}

// What the i8 path's integer arithmetic adds (paged_attention_kernel.cc):
// a query element moves by at most 1 / 65534 of the row's max |q| (1
// here), so a score by delta = scale * D * 1.75 / 65534 and the output by
// at most 4 * delta * 1.75; a weight moves by at most 1 / 65534 of its
// tile's largest, so a tile's 16 weights, on values of at most 1.75, move
// the output by at most 16 * 1.75 / 65534 of the row's weight sum.
double I8Tolerance(uint64_t head_dim, double scale) {
  const double vmax = 1.75, step = 1.0 / 65534;
  const double delta = scale * static_cast<double>(head_dim) * vmax * step;
  return 4 * delta * vmax + 16 * step * vmax;
}

// The kernel against the float64 reference, on fresh random content with
// shuffled pages and NaN in every slot no sequence owns.
TEST_P(PagedAttentionGrid, MatchesReference) {
  const GridCase c = GetParam();
  const std::vector<SeqSpec> seqs = {{c.context, c.query_len, 11},
                                     {c.context + 1, std::min(c.query_len, c.context + 1), 12},
                                     {1, 1, 13}};
  const PagedBatch b = Place(seqs, c.kv_heads, c.head_dim, c.page_size, c.dtype, 99);
  const auto q = Queries(seqs, c.q_heads, c.head_dim);
  PagedAttentionParams p;
  p.num_q_heads = c.q_heads;
  p.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  p.window = c.window;
  std::vector<float> ref(q.size());
  ASSERT_TRUE(PagedAttentionReference(p, q, b.kv(), b.batch(), ref).ok());
  // Quantized K/V reach 1.75 in magnitude.
  const double tol =
      ReferenceTolerance(c.head_dim, p.scale, c.context + 1) * (IsQuantized(c.dtype) ? 4.0 : 1.0) +
      (c.dtype == DType::kI8 ? I8Tolerance(c.head_dim, p.scale) : 0.0);
  ForEachTarget([&] {
    const auto out = RunKernel(p, q, b);
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_FALSE(std::isnan(out[i])) << i;
      ASSERT_NEAR(out[i], ref[i], tol) << "element " << i;
    }
  });
}

std::vector<GridCase> Grid() {
  std::vector<GridCase> cases;
  // Contexts around page boundaries, GQA ratios, head dims and dtypes.
  for (uint64_t page : {1, 3, 16, 128})
    for (uint64_t n : {page - (page > 1 ? 1 : 0), page, page + 1})
      cases.push_back({page, std::max<uint64_t>(n, 1), 1, 8, 2, 64, 0, DType::kF32});
  for (uint64_t ratio : {1, 2, 4, 8})
    cases.push_back({16, 100, 1, 2 * ratio, 2, 128, 0, DType::kBF16});
  cases.push_back({16, 300, 1, 4, 1, 37, 0, DType::kF16});     // odd head dim
  cases.push_back({3, 40, 40, 4, 2, 64, 0, DType::kF32});      // whole prefill
  cases.push_back({16, 530, 37, 8, 2, 64, 0, DType::kBF16});   // chunked prefill over chunks
  cases.push_back({16, 530, 37, 8, 2, 64, 100, DType::kF32});  // windowed prefill
  cases.push_back({5, 700, 1, 4, 4, 16, 64, DType::kF16});     // windowed decode
  cases.push_back({128, 129, 9, 16, 2, 128, 0, DType::kF32});
  // Quantized pages: row scales change from key to key (pages of 16, 3, 5), GQA,
  // prefill, the scalar tail (head dim 37) and a window.
  for (DType q : {DType::kI8, DType::kF8E4M3}) {
    cases.push_back({16, 100, 1, 8, 2, 64, 0, q});
    cases.push_back({3, 40, 40, 4, 2, 64, 0, q});
    cases.push_back({16, 300, 1, 4, 1, 37, 0, q});
    cases.push_back({5, 530, 37, 8, 2, 64, 100, q});
    cases.push_back({16, 530, 1, 8, 2, 128, 0, q});
  }
  // i8 above head_dim 512, where the query codes stop short of 32767 so
  // that no i32 sum can overflow.
  cases.push_back({16, 100, 2, 4, 2, 640, 0, DType::kI8});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Sweep, PagedAttentionGrid, ::testing::ValuesIn(Grid()));

// An attention option (set on p by `turn_on`) against the float64
// reference, on f32, bf16 and i8 pages with a window and a chunked
// prefill beside a short sequence; and the option changes the result.
void ExpectOptionMatchesReference(
    double scale, uint64_t seed,
    const std::function<void(const GridCase&, PagedAttentionParams&)>& turn_on) {
  for (const GridCase& c : {GridCase{16, 530, 37, 8, 2, 64, 100, DType::kF32},
                            GridCase{5, 300, 1, 4, 1, 37, 0, DType::kBF16},
                            GridCase{3, 40, 40, 4, 2, 64, 0, DType::kI8}}) {
    const std::vector<SeqSpec> seqs = {{c.context, c.query_len, seed}, {7, 2, seed + 1}};
    const PagedBatch b = Place(seqs, c.kv_heads, c.head_dim, c.page_size, c.dtype, seed + 2);
    const auto q = Queries(seqs, c.q_heads, c.head_dim);
    PagedAttentionParams p;
    p.num_q_heads = c.q_heads;
    p.scale = scale != 0 ? scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    p.window = c.window;
    const std::vector<float> without = RunKernel(p, q, b);
    turn_on(c, p);
    std::vector<float> ref(q.size());
    ASSERT_TRUE(PagedAttentionReference(p, q, b.kv(), b.batch(), ref).ok());
    const double tol = ReferenceTolerance(c.head_dim, p.scale, c.context + 1) *
                           (IsQuantized(c.dtype) ? 4.0 : 1.0) +
                       (c.dtype == DType::kI8 ? I8Tolerance(c.head_dim, p.scale) : 0.0);
    ForEachTarget([&] {
      const auto out = RunKernel(p, q, b);
      EXPECT_NE(out, without);
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_NEAR(out[i], ref[i], tol) << "element " << i << " of " << c.head_dim;
      }
    });
  }
}

// Gemma 2's soft-capping, with scores large enough (scale 1) that the cap
// bends most of them; tanh is 1-Lipschitz, so the uncapped tolerance holds.
TEST(PagedAttention, SoftcapMatchesReference) {
  ExpectOptionMatchesReference(1.0, 21,
                               [](const GridCase&, PagedAttentionParams& p) { p.softcap = 1.5; });
}

// gpt-oss's attention sinks: one logit per query head in each row's softmax
// denominator.
TEST(PagedAttention, SinksMatchReference) {
  std::vector<float> sinks;
  ExpectOptionMatchesReference(0.0, 23, [&](const GridCase& c, PagedAttentionParams& p) {
    sinks.resize(c.q_heads);
    SplitMix64 rng(c.q_heads + c.context);
    for (float& x : sinks) x = static_cast<float>(rng.NextUnit() * 6.0 - 2.0);
    p.sinks = sinks;
  });
}

// ---- determinism: bits, not tolerances ---------------------------------------

PagedAttentionParams Gqa(uint64_t q_heads, uint64_t head_dim, uint64_t window = 0) {
  PagedAttentionParams p;
  p.num_q_heads = q_heads;
  p.scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  p.window = window;
  return p;
}

// Rows of sequence `s` from a token-major output.
std::vector<float> RowsOf(const std::vector<float>& out, const PagedBatch& b, size_t s,
                          uint64_t width) {
  return {out.begin() + b.query_indptr[s] * static_cast<int64_t>(width),
          out.begin() + b.query_indptr[s + 1] * static_cast<int64_t>(width)};
}

TEST(PagedAttentionDeterminism, PagePlacementAndPageSizeDoNotChangeBits) {
  ForEachTarget([&] {
    const std::vector<SeqSpec> seqs = {{700, 3, 5}};
    const auto q = Queries(seqs, 8, 64);
    const auto want = RunKernel(Gqa(8, 64), q, Place(seqs, 2, 64, 16, DType::kBF16, 1));
    for (uint64_t page : {1, 7, 16, 256, 700}) {
      for (uint64_t seed : {2, 3}) {
        EXPECT_EQ(RunKernel(Gqa(8, 64), q, Place(seqs, 2, 64, page, DType::kBF16, seed)), want)
            << "page " << page << " seed " << seed;
      }
    }
  });
}

// Quantized pages carry their row scales with them: placement, page size,
// batch company, threads and split never change a row's bits.
TEST(PagedAttentionDeterminism, QuantizedPagesKeepTheContract) {
  ForEachTarget([&] {
    for (DType dtype : {DType::kI8, DType::kF8E4M3}) {
      const SeqSpec me{700, 3, 5};
      const auto q = Queries({me}, 8, 64);
      const auto want = RunKernel(Gqa(8, 64), q, Place({me}, 2, 64, 16, dtype, 1));
      for (uint64_t page : {5, 16, 64}) {
        for (uint64_t seed : {2, 3}) {
          EXPECT_EQ(RunKernel(Gqa(8, 64), q, Place({me}, 2, 64, page, dtype, seed)), want)
              << DTypeName(dtype) << " page " << page << " seed " << seed;
        }
      }
      const std::vector<SeqSpec> crowd = {{33, 33, 22}, me, {1000, 1, 23}, {5, 2, 24}};
      const PagedBatch b = Place(crowd, 2, 64, 16, dtype, 5);
      const auto crowd_q = Queries(crowd, 8, 64);
      EXPECT_EQ(RowsOf(RunKernel(Gqa(8, 64), crowd_q, b), b, 1, 8 * 64), want) << DTypeName(dtype);
      for (size_t threads : {2, 3}) {
        ThreadPool pool(threads);
        auto p = Gqa(8, 64);
        p.split_k = SplitK::kAlways;
        EXPECT_EQ(RowsOf(RunKernel(p, crowd_q, b, &pool), b, 1, 8 * 64), want)
            << DTypeName(dtype) << " " << threads << " threads";
      }
    }
  });
}

TEST(PagedAttentionDeterminism, BatchCompositionDoesNotChangeBits) {
  ForEachTarget([&] {
    const SeqSpec me{600, 2, 21};
    const auto alone_q = Queries({me}, 4, 32);
    const auto alone = RunKernel(Gqa(4, 32), alone_q, Place({me}, 2, 32, 16, DType::kF32, 4));
    const std::vector<SeqSpec> crowd = {{33, 33, 22}, me, {1000, 1, 23}, {5, 2, 24}};
    const PagedBatch b = Place(crowd, 2, 32, 16, DType::kF32, 5);
    const auto out = RunKernel(Gqa(4, 32), Queries(crowd, 4, 32), b);
    EXPECT_EQ(RowsOf(out, b, 1, 4 * 32), alone);
  });
}

// Every row of a prefill equals the same position computed alone as a
// decode step over its own context. GQA ratios 1, 2, 3 and 7 group a
// decode's rows differently from a prefill's (rows of several positions
// share K loads there, and which rows share depends on the row; a decode
// takes groups of 4, 3 and 2 rows whole); a prefill's 16 or more rows per
// K/V head take the shared-tile path (transposed keys, widened values),
// a decode's never; head dims below, at and off a vector width take the
// kernel's vector and scalar paths, and 48 and 128 the shared tile's
// unrolled and looped chains; f16, bf16, f32 and f8e4m3 K/V widen
// differently, and i8 runs in integers.
TEST(PagedAttentionDeterminism, DecodeRowEqualsPrefillRow) {
  ForEachTarget([&] {
    for (uint64_t head_dim : {64, 2, 67, 48, 128}) {
      std::vector<DType> dtypes = {DType::kF16, DType::kF32, DType::kI8};
      if (head_dim == 64) dtypes.push_back(DType::kF8E4M3);
      if (head_dim == 48) dtypes = {DType::kBF16};
      if (head_dim == 128) dtypes = {DType::kF32};
      for (DType dtype : dtypes) {
        for (uint64_t q_heads : {2, 4, 6, 14}) {
          for (uint64_t window : {0, 50}) {
            const uint64_t n = 530, rows = 41, width = q_heads * head_dim;
            const auto p = Gqa(q_heads, head_dim, window);
            const SeqSpec prefill_seq{n, rows, 8};
            const auto prefill = RunKernel(p, Queries({prefill_seq}, q_heads, head_dim),
                                           Place({prefill_seq}, 2, head_dim, 3, dtype, 2));
            for (uint64_t i = 0; i < rows; ++i) {
              const SeqSpec decode_seq{n - rows + i + 1, 1, 8};
              const auto decode = RunKernel(p, Queries({decode_seq}, q_heads, head_dim),
                                            Place({decode_seq}, 2, head_dim, 16, dtype, 1));
              const auto row = prefill.begin() + static_cast<long>(i * width);
              ASSERT_EQ(std::vector<float>(row, row + static_cast<long>(width)), decode)
                  << "row " << i << " head_dim " << head_dim << " " << DTypeName(dtype)
                  << " q_heads " << q_heads << " window " << window;
            }
          }
        }
      }
    }
  });
}

TEST(PagedAttentionDeterminism, ThreadCountAndSplitDoNotChangeBits) {
  ForEachTarget([&] {
    const std::vector<SeqSpec> seqs = {{1500, 1, 31}, {300, 1, 32}};
    const PagedBatch b = Place(seqs, 2, 64, 16, DType::kBF16, 6);
    const auto q = Queries(seqs, 8, 64);
    auto p = Gqa(8, 64);
    p.split_k = SplitK::kNever;
    const auto want = RunKernel(p, q, b);
    for (size_t threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (SplitK split : {SplitK::kNever, SplitK::kAlways, SplitK::kAuto}) {
        p.split_k = split;
        EXPECT_EQ(RunKernel(p, q, b, &pool), want) << threads << " threads";
      }
    }
  });
}

// Prefill rows in several row blocks, a window, a long sequence beside
// short ones, and K/V head counts that split evenly and unevenly: the
// planner cuts heads and chunk ranges differently for every thread count
// and split mode.
TEST(PagedAttentionDeterminism, ThreadCountAndSplitDoNotChangePrefillBits) {
  ForEachTarget([&] {
    struct Case {
      std::vector<SeqSpec> seqs;
      uint64_t kv_heads, q_heads;
    };
    const Case cases[] = {{{{1300, 20, 51}, {45, 3, 52}, {700, 1, 53}}, 4, 8},
                          {{{300, 17, 54}, {20, 1, 55}}, 3, 6}};
    for (const Case& c : cases) {
      const PagedBatch b = Place(c.seqs, c.kv_heads, 32, 16, DType::kF32, 8);
      const auto q = Queries(c.seqs, c.q_heads, 32);
      auto p = Gqa(c.q_heads, 32, /*window=*/600);
      p.split_k = SplitK::kNever;
      const auto want = RunKernel(p, q, b);
      for (size_t threads : {1, 2, 3, 5}) {
        ThreadPool pool(threads);
        for (SplitK split : {SplitK::kNever, SplitK::kAlways, SplitK::kAuto}) {
          p.split_k = split;
          EXPECT_EQ(RunKernel(p, q, b, &pool), want)
              << c.kv_heads << " K/V heads, " << threads << " threads, split "
              << static_cast<int>(split);
        }
      }
    }
  });
}

TEST(PagedAttentionDeterminism, HeadMajorLayoutSameBits) {
  ForEachTarget([&] {
    const std::vector<SeqSpec> seqs = {{50, 4, 41}, {80, 4, 42}};
    const PagedBatch b = Place(seqs, 2, 16, 8, DType::kF32, 7);
    const auto q = Queries(seqs, 4, 16);  // [rows, H, D]
    const auto token_major = RunKernel(Gqa(4, 16), q, b);
    // Rearrange to [B, H, L, D] and back.
    auto to_head_major = [&](const std::vector<float>& x) {
      std::vector<float> y(x.size());
      for (size_t s = 0; s < 2; ++s)
        for (size_t i = 0; i < 4; ++i)
          for (size_t h = 0; h < 4; ++h)
            std::copy_n(x.begin() + static_cast<long>(((s * 4 + i) * 4 + h) * 16), 16,
                        y.begin() + static_cast<long>(((s * 4 + h) * 4 + i) * 16));
      return y;
    };
    auto p = Gqa(4, 16);
    p.layout = QueryLayout::kHeadMajor;
    EXPECT_EQ(RunKernel(p, to_head_major(q), b), to_head_major(token_major));
  });
}

// Kernels reach rows only through the view's strides: the same rows laid
// out token-major, or with NaN gaps between slots, heads and pages, give
// the dense layout's bits, in the kernel (every target) and the reference
// alike. Prefill and decode rows, GQA, a window, the scalar tail (head dim
// 37) and quantized scales addressed through the strides.
TEST(PagedAttentionStrides, EveryLayoutGivesTheDenseBits) {
  struct Case {
    uint64_t page_size, kv_heads, q_heads, head_dim, window;
    DType dtype;
  };
  const Case cases[] = {{16, 2, 8, 64, 0, DType::kF32},
                        {5, 2, 4, 37, 100, DType::kBF16},
                        {3, 4, 4, 16, 0, DType::kF16},
                        {16, 2, 8, 64, 0, DType::kI8},
                        {7, 2, 4, 32, 50, DType::kF8E4M3}};
  for (const Case& c : cases) {
    const std::vector<SeqSpec> seqs = {{530, 37, 71}, {300, 1, 72}, {1, 1, 73}, {0, 0, 74}};
    const auto q = Queries(seqs, c.q_heads, c.head_dim);
    const auto p = Gqa(c.q_heads, c.head_dim, c.window);
    const PagedBatch dense = Place(seqs, c.kv_heads, c.head_dim, c.page_size, c.dtype, 5);
    std::vector<float> dense_ref(q.size());
    ASSERT_TRUE(PagedAttentionReference(p, q, dense.kv(), dense.batch(), dense_ref).ok());
    for (Layout layout : {Layout::kNhd, Layout::kPadded}) {
      const PagedBatch other =
          Place(seqs, c.kv_heads, c.head_dim, c.page_size, c.dtype, 5, 3, layout);
      ASSERT_EQ(other.indices, dense.indices);
      ASSERT_NE(other.kv().stride_h, dense.kv().stride_h);
      std::vector<float> ref(q.size());
      ASSERT_TRUE(PagedAttentionReference(p, q, other.kv(), other.batch(), ref).ok());
      EXPECT_EQ(ref, dense_ref) << DTypeName(c.dtype) << " layout " << static_cast<int>(layout);
      ForEachTarget([&] {
        const auto want = RunKernel(p, q, dense);
        for (const float x : want) ASSERT_FALSE(std::isnan(x));
        EXPECT_EQ(RunKernel(p, q, other), want)
            << DTypeName(c.dtype) << " layout " << static_cast<int>(layout);
        ThreadPool pool(2);
        auto split = p;
        split.split_k = SplitK::kAlways;
        EXPECT_EQ(RunKernel(split, q, other, &pool), want);
      });
    }
  }
}

// A plan is made for one layout: a run on a pool of the same shape with
// other strides is refused, not misread.
TEST(PagedAttentionStrides, PlanRefusesAPoolWithOtherStrides) {
  const std::vector<SeqSpec> seqs = {{40, 2, 81}};
  const PagedBatch dense = Place(seqs, 2, 16, 8, DType::kF32, 3);
  const PagedBatch nhd = Place(seqs, 2, 16, 8, DType::kF32, 3, 3, Layout::kNhd);
  const auto q = Queries(seqs, 4, 16);
  std::vector<float> out(q.size());
  auto plan = PagedAttentionPlan::Create(Gqa(4, 16), q, out, dense.kv(), dense.batch(), 1);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->Run(q, nhd.kv(), out).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(plan->Run(q, dense.kv(), out).ok());
}

TEST(PagedAttention, EmptyContextOutputsZeros) {
  ForEachTarget([&] {
    const std::vector<SeqSpec> seqs = {{0, 2, 1}, {4, 1, 2}};
    PagedBatch b = Place(seqs, 1, 8, 4, DType::kF32, 1);
    std::vector<float> q(3 * 2 * 8, 0.5f);
    const auto out = RunKernel(Gqa(2, 8), q, b);
    for (size_t i = 0; i < 2 * 2 * 8; ++i) EXPECT_EQ(out[i], 0.0f);
    EXPECT_FALSE(std::isnan(out.back()));
  });
}

// Non-finite input propagates as IEEE arithmetic would, as the float64
// reference does: a NaN query row, a NaN in a key, or a key whose score is
// +inf gives NaN in every row that sees it, and only there; a NaN value
// row poisons the rows that weigh it; a key scoring -inf (others finite)
// has weight exactly 0, so those rows stay finite and equal the reference.
TEST(PagedAttention, NonFiniteInputPropagatesAsIeee) {
  const auto all_nan = [](const std::vector<float>& out, size_t row, size_t width) {
    for (size_t f = 0; f < width; ++f) {
      if (!std::isnan(out[row * width + f])) return false;
    }
    return true;
  };
  const auto all_finite = [](const std::vector<float>& out, size_t row, size_t width) {
    for (size_t f = 0; f < width; ++f) {
      if (!std::isfinite(out[row * width + f])) return false;
    }
    return true;
  };
  ForEachTarget([&] {
    // One sequence of 40 keys, a prefill of all 40 rows (causal), one head.
    constexpr uint64_t kD = 8, kN = 40, kBad = 25;
    const std::vector<SeqSpec> seqs = {{kN, kN, 5}};
    const auto p = Gqa(1, kD);
    const auto key_at = [&](PagedBatch& b, uint64_t pos, bool value) -> std::byte* {
      const uint64_t i = b.kv().RowIndex(b.PageOf(0, pos), 0, pos % b.page_size);
      return (value ? b.values.data() : b.keys.data()) + i * sizeof(float);
    };
    const auto set = [](std::byte* at, float v) { std::memcpy(at, &v, sizeof(v)); };
    const auto q = Queries(seqs, 1, kD);
    for (int kind = 0; kind < 5; ++kind) {
      SCOPED_TRACE(kind);
      PagedBatch b = Place(seqs, 1, kD, 16, DType::kF32, 3);
      std::vector<float> query = q;
      switch (kind) {
        case 0:  // NaN in one element of key kBad
          set(key_at(b, kBad, false) + 3 * sizeof(float), std::nanf(""));
          break;
        case 1:  // key kBad scores +inf for every row: a huge key along q
          for (uint64_t f = 0; f < kD; ++f) set(key_at(b, kBad, false) + f * 4, INFINITY);
          for (float& v : query) v = std::fabs(v) + 0.25f;
          break;
        case 2:  // NaN value row kBad
          for (uint64_t f = 0; f < kD; ++f) set(key_at(b, kBad, true) + f * 4, std::nanf(""));
          break;
        case 3:  // NaN query row kBad
          query[kBad * kD + 1] = std::nanf("");
          break;
        case 4:  // key kBad scores -inf for every row
          for (uint64_t f = 0; f < kD; ++f) set(key_at(b, kBad, false) + f * 4, -INFINITY);
          for (float& v : query) v = std::fabs(v) + 0.25f;
          break;
      }
      const auto out = RunKernel(p, query, b);
      std::vector<float> ref(query.size());
      ASSERT_TRUE(PagedAttentionReference(p, query, b.kv(), b.batch(), ref).ok());
      for (uint64_t row = 0; row < kN; ++row) {
        SCOPED_TRACE(row);
        const bool sees = row >= kBad;  // causal: row i sees keys 0..i
        const bool want_nan = kind == 3 ? row == kBad : kind != 4 && sees;
        EXPECT_EQ(all_nan(ref, row, kD), want_nan);
        if (want_nan) {
          EXPECT_TRUE(all_nan(out, row, kD));
        } else {
          ASSERT_TRUE(all_finite(out, row, kD));
          const double tol = ReferenceTolerance(kD, p.scale, row + 1);
          for (uint64_t f = 0; f < kD; ++f) EXPECT_NEAR(out[row * kD + f], ref[row * kD + f], tol);
        }
      }
    }
  });
}

// i8 weights below 2^-100 (here every value scale times 2^-118, so that
// 32767 / max would overflow) are raised by 2^100 before their codes are
// taken and their step stays a normal float: the output keeps its
// relative precision.
TEST(PagedAttention, I8TinyValueScalesKeepTheirPrecision) {
  ForEachTarget([&] {
    const std::vector<SeqSpec> seqs = {{100, 3, 21}};
    PagedBatch b = Place(seqs, 2, 64, 16, DType::kI8, 5);
    for (float& s : b.value_scales) s *= 0x1p-118f;
    const auto q = Queries(seqs, 4, 64);
    const auto p = Gqa(4, 64);
    const auto out = RunKernel(p, q, b);
    std::vector<float> ref(q.size());
    ASSERT_TRUE(PagedAttentionReference(p, q, b.kv(), b.batch(), ref).ok());
    const double tol = ReferenceTolerance(64, p.scale, 101) * 4 + I8Tolerance(64, p.scale);
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_NE(out[i], 0.0f) << i;
      ASSERT_NEAR(double{out[i]} * 0x1p118, double{ref[i]} * 0x1p118, tol) << i;
    }
  });
}

TEST(PagedAttention, NonCausalRowsSeeEveryKey) {
  ForEachTarget([&] {
    const std::vector<SeqSpec> seqs = {{20, 5, 3}};
    const PagedBatch b = Place(seqs, 1, 8, 6, DType::kF32, 2);
    const auto q = Queries(seqs, 1, 8);
    auto p = Gqa(1, 8);
    p.causal = false;
    const auto out = RunKernel(p, q, b);
    std::vector<float> ref(q.size());
    ASSERT_TRUE(PagedAttentionReference(p, q, b.kv(), b.batch(), ref).ok());
    const double tol = ReferenceTolerance(8, p.scale, 20);
    for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], ref[i], tol);
    // Row 0 differs from its causal version (which sees keys 0..15 only).
    p.causal = true;
    EXPECT_NE(RunKernel(p, q, b), out);
  });
}

// ---- bad input: refused before any K/V byte is read ----------------------------

class PagedAttentionErrors : public ::testing::Test {
 protected:
  PagedAttentionErrors() : b_(Place({{10, 2, 1}, {5, 1, 2}}, 2, 8, 4, DType::kF32, 3)) {
    q_.assign(3 * 4 * 8, 0.1f);
    out_.assign(q_.size(), 0.0f);
    p_ = Gqa(4, 8);
  }
  Status Call() { return PagedAttention(p_, q_, b_.kv(), b_.batch(), out_); }
  void ExpectError(const std::string& fragment) {
    const Status s = Call();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
  }
  PagedBatch b_;
  std::vector<float> q_, out_;
  PagedAttentionParams p_;
};

TEST_F(PagedAttentionErrors, ValidCallSucceeds) { EXPECT_TRUE(Call().ok()); }

TEST_F(PagedAttentionErrors, QueryHeadsNotAMultiple) {
  p_.num_q_heads = 3;
  ExpectError("not a positive multiple of num_kv_heads 2");
}

TEST_F(PagedAttentionErrors, MismatchedQueryShape) {
  q_.pop_back();
  ExpectError("query and out must hold");
}

// The fixture's batch: sequence 0 has 10 keys in 3 pages (indices 0..2,
// last_page_len 2) and 2 query rows, sequence 1 5 keys in 2 pages
// (indices 3..4, last_page_len 1) and 1 row; pages of 4 slots.

TEST_F(PagedAttentionErrors, IndptrOfTheWrongLength) {
  b_.indptr.pop_back();
  ExpectError("indptr has 2 entries; batch 2 (last_page_len's size) needs 3");
}

TEST_F(PagedAttentionErrors, IndptrNotStartingAtZero) {
  b_.indptr[0] = 1;
  ExpectError("indptr[0] must be 0 (got 1)");
}

TEST_F(PagedAttentionErrors, IndptrDecreasing) {
  b_.indptr[1] = 6;  // past indptr[2] = 5
  ExpectError("indptr decreases at 2 (6 to 5)");
}

TEST_F(PagedAttentionErrors, IndptrNotEndingAtTheIndices) {
  b_.indices.push_back(0);
  ExpectError("indptr[batch] = 5 but indices has 6 entries");
}

TEST_F(PagedAttentionErrors, LastPageLenOutsideThePage) {
  b_.last_page_len[1] = 5;
  ExpectError("sequence 1: last_page_len 5 with 2 pages is outside [1, page_size 4]");
  b_.last_page_len[1] = 0;
  ExpectError("sequence 1: last_page_len 0 with 2 pages");
  b_.last_page_len[1] = -1;
  ExpectError("sequence 1: last_page_len -1 with 2 pages");
}

TEST_F(PagedAttentionErrors, LastPageLenOfASequenceWithoutPages) {
  b_.indices.resize(3);
  b_.indptr[2] = 3;  // sequence 1 has no pages now
  ExpectError("sequence 1: last_page_len 1 with 0 pages must be 0");
}

TEST_F(PagedAttentionErrors, PageIdOutOfRange) {
  b_.indices[1] = static_cast<int32_t>(b_.num_pages);
  ExpectError("sequence 0: indices entry 1 of its pages is page " + std::to_string(b_.num_pages) +
              ", outside [0, " + std::to_string(b_.num_pages) + ")");
  b_.indices[1] = -2;
  ExpectError("sequence 0: indices entry 1 of its pages is page -2");
}

TEST_F(PagedAttentionErrors, RepeatedPageInOneSequence) {
  b_.indices[1] = b_.indices[0];
  ExpectError("appears twice in its indices");
}

TEST_F(PagedAttentionErrors, SharedPageAcrossSequencesIsValid) {
  b_.indices[3] = b_.indices[0];  // sequence 1's first page = sequence 0's
  EXPECT_TRUE(Call().ok());
}

// Sequence 0 has 10 keys and 2 rows (positions 8, 9): with a window of 3
// its first row sees keys 6..8, so its page 0 (keys 0..3) may be released
// and the result keeps its bits; page 1 (keys 4..7) may not.
TEST_F(PagedAttentionErrors, PagesWhollyBeforeTheWindowMayBeReleased) {
  p_.window = 3;
  ASSERT_TRUE(Call().ok());
  const std::vector<float> want = out_;
  const int32_t page1 = b_.indices[1];
  b_.indices[0] = kv::kReleasedPage;
  ASSERT_TRUE(Call().ok());
  EXPECT_EQ(out_, want);
  b_.indices[1] = kv::kReleasedPage;
  ExpectError("sequence 0: indices entry 1 of its pages is page -1");
  p_.window = 0;
  b_.indices[1] = page1;
  ExpectError("sequence 0: indices entry 0 of its pages is page -1");
}

TEST_F(PagedAttentionErrors, StridesMustBePositive) {
  b_.stride_n = 0;
  ExpectError("stride_n must be > 0");
}

// A pool whose rows would share elements: heads 4 elements apart with
// rows of head_dim 8.
TEST_F(PagedAttentionErrors, OverlappingStridesAreRefused) {
  b_.stride_h = 4;
  ExpectError("stride_h 4 overlaps the 8 elements");
  b_.stride_h = b_.page_size * b_.head_dim;
  b_.stride_page = 48;  // a page starts inside the previous page's second head
  ExpectError("stride_page 48 overlaps the 64 elements");
}

// Scales are found at a row's first element / head_dim.
TEST_F(PagedAttentionErrors, QuantizedStridesAreWholeRows) {
  std::vector<float> scales(b_.num_pages * b_.num_kv_heads * b_.page_size, 1.0f);
  kv::PagedKvView v = b_.kv();
  v.dtype = DType::kI8;
  v.key_scales = scales.data();
  v.value_scales = scales.data();
  EXPECT_TRUE(PagedAttention(p_, q_, v, b_.batch(), out_).ok());
  v.stride_page += 4;
  const Status s = PagedAttention(p_, q_, v, b_.batch(), out_);
  EXPECT_NE(s.message().find("stride_page 68 is not a multiple of head_dim 8"), std::string::npos)
      << s.ToString();
}

TEST_F(PagedAttentionErrors, StridesAddressingPast64Bits) {
  b_.stride_page = uint64_t{1} << 62;
  ExpectError("address more than 2^64 bytes");
}

TEST_F(PagedAttentionErrors, NegativeOrNonFiniteScale) {
  p_.scale = -0.5;
  ExpectError("scale");
  p_.scale = std::numeric_limits<double>::infinity();
  ExpectError("scale");
}

TEST_F(PagedAttentionErrors, NegativeOrNonFiniteSoftcap) {
  p_.softcap = -1;
  ExpectError("softcap");
  p_.softcap = std::numeric_limits<double>::quiet_NaN();
  ExpectError("softcap");
}

TEST_F(PagedAttentionErrors, ContextShorterThanQuery) {
  b_.indices.erase(b_.indices.begin() + 1, b_.indices.begin() + 3);
  b_.indptr = {0, 1, 3};
  b_.last_page_len[0] = 1;  // sequence 0: 1 key, 2 query rows
  ExpectError("sequence 0: context 1 is shorter than its 2 query rows");
}

TEST_F(PagedAttentionErrors, QueryIndptrMismatch) {
  b_.query_indptr.pop_back();
  ExpectError("query_indptr has 2 entries");
}

TEST_F(PagedAttentionErrors, QueryIndptrNotStartingAtZero) {
  b_.query_indptr = {1, 2, 3};
  ExpectError("query_indptr[0] must be 0 (got 1)");
}

TEST_F(PagedAttentionErrors, QueryIndptrDecreasing) {
  b_.query_indptr = {0, 3, 2};
  ExpectError("query_indptr decreases at 2");
}

TEST_F(PagedAttentionErrors, ScalesExactlyForQuantizedDtypes) {
  std::vector<float> scales(b_.num_pages * b_.num_kv_heads * b_.page_size, 1.0f);
  kv::PagedKvView v = b_.kv();
  v.key_scales = scales.data();
  v.value_scales = scales.data();
  std::vector<float> q(3 * 4 * 8), out(q.size());
  PagedAttentionParams p = Gqa(4, 8);
  Status s = PagedAttention(p, q, v, b_.batch(), out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("f32 takes no scales"), std::string::npos) << s.ToString();
  v.dtype = DType::kI8;
  v.value_scales = nullptr;
  s = PagedAttention(p, q, v, b_.batch(), out);
  EXPECT_NE(s.message().find("i8 needs key and value scales"), std::string::npos) << s.ToString();
}

TEST_F(PagedAttentionErrors, UnsupportedKernelDtype) {
  b_.dtype = DType::kF64;
  b_.keys.resize(b_.keys.size() * 2);
  b_.values.resize(b_.values.size() * 2);
  EXPECT_EQ(Call().code(), StatusCode::kUnimplemented);
}

// Plan once per step, run per layer: one plan over two layers' pools (the
// same placement, different content) gives each layer PagedAttention's bits.
TEST(PagedAttentionPlan, OnePlanRunsEveryLayerWithTheKernelsBits) {
  const std::vector<SeqSpec> seqs = {{300, 1, 31}, {40, 40, 32}, {1, 1, 33}};
  const std::vector<SeqSpec> other = {{300, 1, 41}, {40, 40, 42}, {1, 1, 43}};
  const PagedBatch layer0 = Place(seqs, 2, 32, 16, DType::kBF16, 7);
  const PagedBatch layer1 = Place(other, 2, 32, 16, DType::kBF16, 7);  // same tables
  ASSERT_EQ(layer0.indices, layer1.indices);
  const auto q = Queries(seqs, 4, 32);
  ThreadPool pool(2);
  std::vector<float> out(q.size());
  auto plan = PagedAttentionPlan::Create(Gqa(4, 32), q, out, layer0.kv(), layer0.batch(), 2);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const PagedBatch* layer : {&layer0, &layer1, &layer0}) {
    ASSERT_TRUE(plan->Run(q, layer->kv(), out, &pool).ok());
    EXPECT_EQ(out, RunKernel(Gqa(4, 32), q, *layer, &pool));
  }
}

// Sinks come with each Run (layers differ): a plan's run equals the
// one-shot kernel with the same sinks, bit for bit, whatever the split or
// thread count, and a run without them is the plain kernel.
TEST(PagedAttentionPlan, EachRunTakesItsLayersSinks) {
  const std::vector<SeqSpec> seqs = {{600, 1, 61}, {300, 30, 62}, {1, 1, 63}};
  const PagedBatch b = Place(seqs, 2, 32, 16, DType::kBF16, 9);
  const auto q = Queries(seqs, 4, 32);
  const std::vector<float> sinks0 = {0.5f, -1.0f, 2.0f, 0.0f}, sinks1 = {3.0f, 1.0f, -2.0f, 1.5f};
  ThreadPool pool(2);
  std::vector<float> out(q.size());
  PagedAttentionParams with = Gqa(4, 32);
  with.sinks = sinks0;  // not kept by the plan
  auto plan = PagedAttentionPlan::Create(with, q, out, b.kv(), b.batch(), 2);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const std::vector<float>* sinks : {&sinks0, &sinks1}) {
    ASSERT_TRUE(plan->Run(q, b.kv(), out, &pool, *sinks).ok());
    PagedAttentionParams p = Gqa(4, 32);
    p.sinks = *sinks;
    EXPECT_EQ(out, RunKernel(p, q, b, &pool));
    for (SplitK split : {SplitK::kAlways, SplitK::kNever}) {
      p.split_k = split;
      EXPECT_EQ(out, RunKernel(p, q, b)) << static_cast<int>(split);
    }
  }
  ASSERT_TRUE(plan->Run(q, b.kv(), out, &pool).ok());
  EXPECT_EQ(out, RunKernel(Gqa(4, 32), q, b, &pool));
  const std::vector<float> short_sinks = {1.0f}, nan_sinks = {0, 0, std::nanf(""), 0};
  EXPECT_NE(plan->Run(q, b.kv(), out, &pool, short_sinks).message().find("1 logits for 4"),
            std::string::npos);
  EXPECT_NE(plan->Run(q, b.kv(), out, &pool, nan_sinks).message().find("query head 2"),
            std::string::npos);
  PagedAttentionParams bad = Gqa(4, 32);
  bad.sinks = short_sinks;
  EXPECT_EQ(PagedAttention(bad, q, b.kv(), b.batch(), out).code(), StatusCode::kInvalidArgument);
}

TEST(PagedAttentionPlan, RunRefusesOtherBuffersAndShapes) {
  const std::vector<SeqSpec> seqs = {{20, 2, 51}};
  const PagedBatch b = Place(seqs, 2, 32, 16, DType::kF32, 8);
  const auto q = Queries(seqs, 4, 32);
  std::vector<float> out(q.size()), other_out(q.size());
  auto plan = PagedAttentionPlan::Create(Gqa(4, 32), q, out, b.kv(), b.batch(), 1);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->Run(q, b.kv(), other_out).code(), StatusCode::kInvalidArgument);
  kv::PagedKvView wider = b.kv();
  wider.num_pages += 1;
  EXPECT_EQ(plan->Run(q, wider, out).code(), StatusCode::kInvalidArgument);
  kv::PagedKvView bf16 = b.kv();
  bf16.dtype = DType::kBF16;
  EXPECT_EQ(plan->Run(q, bf16, out).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(plan->Run(q, b.kv(), out).ok());
}

}  // namespace
}  // namespace folio::attention
