#include "folio/ops/matmul.h"

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "folio/core/aligned_buffer.h"
#include "folio/core/dtype.h"
#include "folio/core/splitmix64.h"
#include "folio/ops/block_scales.h"
#include "ops/matmul_internal.h"
#include "ops/test_matrices.h"
#include "testing/simd_targets.h"

namespace folio::ops {
namespace {

using test_matrices::Matrix;
using test_matrices::RandomActivations;
using test_matrices::RandomMatrix;
using test_matrices::SameBits;
using test_matrices::Unit;

// Every type with a matmul kernel.
const std::vector<WeightType> kKernelTypes =
    test_matrices::TypesWhere([](const WeightTypeTraits& t) { return t.has_matmul; });

// Runs fn once per SIMD target compiled into folio_ops that this CPU has.
void ForEachTarget(const std::function<void()>& fn) {
  test_support::ForEachSimdTarget(internal::MatMulTargetName, fn);
}

// Every f32 result of a sum of n products is within gamma_n * sum |w x| of
// the exact sum whatever the order (Higham, Accuracy and Stability, 3.1),
// gamma_n = n u / (1 - n u), u = FLT_EPSILON / 2; the kernel's chains are
// at most cols + 2 operations deep (Q8_0 adds a scale multiply and its
// add), and the reference's double sum, rounded once, adds u |y|. The bound
// doubles gamma for the slack of the double reference.
TEST(MatMul, MatchesReferenceForEveryTypeAndShape) {
  constexpr double u = FLT_EPSILON / 2;
  ForEachTarget([&] {
    uint64_t seed = 1;
    for (WeightType type : kKernelTypes) {
      const uint64_t unit = Unit(type);
      for (uint64_t cols : {unit, 3 * unit, 4096 + unit}) {
        for (uint64_t rows : {1, 7, 64}) {
          const Matrix w = RandomMatrix(type, rows, cols, ++seed);
          std::vector<float> wide(rows * cols);
          for (uint64_t j = 0; j < rows; ++j) {
            WidenRow(w.view, j, std::span(wide).subspan(j * cols, cols));
          }
          for (uint64_t num_rows : {1, 3, 17}) {
            SCOPED_TRACE(testing::Message() << WeightTypeName(type) << " rows " << rows << " cols "
                                            << cols << " num_rows " << num_rows);
            const std::vector<float> x = RandomActivations(num_rows * cols, ++seed);
            std::vector<float> y(num_rows * rows), ref(num_rows * rows);
            ASSERT_TRUE(MatMul(w.view, x, num_rows, y).ok());
            ASSERT_TRUE(MatMulReference(w.view, x, num_rows, ref).ok());
            const double n = static_cast<double>(cols + 2);
            const double gamma = 2 * n * u / (1 - n * u);
            for (uint64_t r = 0; r < num_rows; ++r) {
              for (uint64_t j = 0; j < rows; ++j) {
                double abs_sum = 0;
                for (uint64_t i = 0; i < cols; ++i) {
                  abs_sum += std::abs(static_cast<double>(wide[j * cols + i]) * x[r * cols + i]);
                }
                const double want = ref[r * rows + j];
                const double tol = gamma * abs_sum + u * std::abs(want);
                ASSERT_NEAR(y[r * rows + j], want, tol) << "r " << r << " j " << j;
              }
            }
          }
        }
      }
    }
  });
}

// Every quantized type but Q8_0 (matmul.h: they decode each weight to f32
// in registers and then follow the f32 order) multiplies bit for bit as the
// f32 matrix that DequantizeRow makes of it, for decode, small batches and
// prefill, on 1 and 3 threads.
TEST(MatMul, QuantizedEqualsF32OfItsDequantizedWeights) {
  ThreadPool pool(3);
  ForEachTarget([&] {
    uint64_t seed = 500;
    for (WeightType type : kKernelTypes) {
      if (TraitsOf(type).block_size == 1 || type == WeightType::kQ8_0) continue;
      const uint64_t rows = 45, cols = 2048 + Unit(type);
      SCOPED_TRACE(WeightTypeName(type));
      const Matrix w = RandomMatrix(type, rows, cols, ++seed);
      std::vector<float> wide(rows * cols);
      DequantizeRow(type, w.bytes.data(), wide);
      const WeightView f32{reinterpret_cast<const std::byte*>(wide.data()), WeightType::kF32, rows,
                           cols};
      for (uint64_t num_rows : {1, 2, 5, 140}) {
        const std::vector<float> x = RandomActivations(num_rows * cols, ++seed);
        std::vector<float> want(num_rows * rows), got(want.size()), got3(want.size());
        ASSERT_TRUE(MatMul(f32, x, num_rows, want).ok());
        ASSERT_TRUE(MatMul(w.view, x, num_rows, got).ok());
        ASSERT_TRUE(MatMul(w.view, x, num_rows, got3, &pool).ok());
        EXPECT_TRUE(SameBits(want, got)) << "num_rows " << num_rows;
        EXPECT_TRUE(SameBits(want, got3)) << "num_rows " << num_rows << ", 3 threads";
      }
    }
  });
}

// Each row of a 3-, 4-, 5- or 17-row (small batch or prefill) call, split over
// 3 threads, equals a 1-row (decode) call on that row alone, bit for bit. Shapes cover partial
// tiles (rows not a multiple of 4 or 8) and a scalar tail (cols % 16 != 0).
TEST(MatMul, PrefillRowEqualsDecodeOfThatRowAlone) {
  ThreadPool pool(3);
  ForEachTarget([&] {
    uint64_t seed = 100;
    for (WeightType type : kKernelTypes) {
      for (uint64_t rows : {1, 7, 203}) {
        for (uint64_t cols : {4096 + Unit(type), uint64_t{4096 + 37}}) {
          if (cols % TraitsOf(type).block_size != 0) continue;
          // 2 to 7 rows take the small-batch decode path (one group), 8
          // and 17 the prefill path.
          for (uint64_t num_rows : {2, 3, 4, 5, 7, 8, 17}) {
            SCOPED_TRACE(testing::Message() << WeightTypeName(type) << " rows " << rows << " cols "
                                            << cols << " num_rows " << num_rows);
            const Matrix w = RandomMatrix(type, rows, cols, ++seed);
            const std::vector<float> x = RandomActivations(num_rows * cols, ++seed);
            std::vector<float> batch(num_rows * rows);
            ASSERT_TRUE(MatMul(w.view, x, num_rows, batch, &pool).ok());
            for (uint64_t r = 0; r < num_rows; ++r) {
              std::vector<float> alone(rows);
              ASSERT_TRUE(MatMul(w.view, std::span(x).subspan(r * cols, cols), 1, alone).ok());
              const std::vector<float> from_batch(
                  batch.begin() + static_cast<ptrdiff_t>(r * rows),
                  batch.begin() + static_cast<ptrdiff_t>((r + 1) * rows));
              ASSERT_TRUE(SameBits(alone, from_batch)) << "row " << r;
            }
          }
        }
      }
    }
  });
}

// More activation rows than one prefill block holds (128), and columns that
// are all tail (5 < one vector) or end in one: still each row equals its
// decode alone.
TEST(MatMul, LongPrefillAndShortRowsEqualDecode) {
  ForEachTarget([&] {
    uint64_t seed = 300;
    for (WeightType type : {WeightType::kF32, WeightType::kBF16, WeightType::kF16}) {
      for (uint64_t cols : {5, 1024 + 32 + 5}) {
        SCOPED_TRACE(testing::Message() << WeightTypeName(type) << " cols " << cols);
        const uint64_t rows = 37, num_rows = 140;
        const Matrix w = RandomMatrix(type, rows, cols, ++seed);
        const std::vector<float> x = RandomActivations(num_rows * cols, ++seed);
        std::vector<float> batch(num_rows * rows), alone(rows);
        ASSERT_TRUE(MatMul(w.view, x, num_rows, batch).ok());
        for (uint64_t r = 0; r < num_rows; ++r) {
          ASSERT_TRUE(MatMul(w.view, std::span(x).subspan(r * cols, cols), 1, alone).ok());
          ASSERT_EQ(std::memcmp(alone.data(), batch.data() + r * rows, rows * sizeof(float)), 0)
              << "row " << r;
        }
      }
    }
  });
}

// WeightView data needs no alignment: a copy one byte off gives the same
// bits, decode and prefill.
TEST(MatMul, UnalignedWeightsGiveTheSameBits) {
  ForEachTarget([&] {
    for (WeightType type : kKernelTypes) {
      SCOPED_TRACE(WeightTypeName(type));
      const uint64_t rows = 19, cols = 1024 + 2 * Unit(type);
      const Matrix w = RandomMatrix(type, rows, cols, 400);
      AlignedBuffer shifted(w.bytes.size() + 1);
      std::memcpy(shifted.data() + 1, w.bytes.data(), w.bytes.size());
      const WeightView odd{shifted.data() + 1, type, rows, cols};
      for (uint64_t num_rows : {1, 5, 8}) {  // decode, decode, prefill
        const std::vector<float> x = RandomActivations(num_rows * cols, 401);
        std::vector<float> a(num_rows * rows), b(num_rows * rows);
        ASSERT_TRUE(MatMul(w.view, x, num_rows, a).ok());
        ASSERT_TRUE(MatMul(odd, x, num_rows, b).ok());
        EXPECT_TRUE(SameBits(a, b)) << "num_rows " << num_rows;
      }
    }
  });
}

// 1, 2 and 3 threads give the same bits, for decode, for prefill, and when
// few outputs make the planner split the activation rows instead.
TEST(MatMul, BitsDoNotDependOnThreadCount) {
  ThreadPool two(2), three(3);
  ForEachTarget([&] {
    uint64_t seed = 200;
    for (WeightType type : kKernelTypes) {
      const uint64_t cols_a = 4096 + Unit(type);
      for (const auto [rows, cols, num_rows] :
           {std::array<uint64_t, 3>{203, cols_a, 1}, {203, cols_a, 17}, {7, 1024, 64}}) {
        SCOPED_TRACE(testing::Message() << WeightTypeName(type) << " rows " << rows << " cols "
                                        << cols << " num_rows " << num_rows);
        const Matrix w = RandomMatrix(type, rows, cols, ++seed);
        const std::vector<float> x = RandomActivations(num_rows * cols, ++seed);
        std::vector<float> y1(num_rows * rows), y2(y1.size()), y3(y1.size());
        ASSERT_TRUE(MatMul(w.view, x, num_rows, y1).ok());
        ASSERT_TRUE(MatMul(w.view, x, num_rows, y2, &two).ok());
        ASSERT_TRUE(MatMul(w.view, x, num_rows, y3, &three).ok());
        EXPECT_TRUE(SameBits(y1, y2));
        EXPECT_TRUE(SameBits(y1, y3));
      }
    }
  });
}

// Identity activations read the weights back: y[r, j] = W[j, r] * 1 plus
// zeros, exact, so the kernel's widening must equal WidenRow bit for bit —
// here over every finite f16 value (subnormals included) and random bf16 /
// Q8_0 values.
// matmul.h's order, emulated step by step for f32 weights: lane k of one
// N-lane accumulator takes columns k, k + N, ... by fused multiply-add, the
// lanes meet in the halves tree (lane i + N/2 onto lane i, then i + N/4,
// ... as SumOfLanes does on AVX2 and AVX-512), then the scalar tail. Decode
// and prefill must give exactly those bits.
TEST(MatMul, F32FollowsTheStatedOrderBitForBit) {
  ForEachTarget([&] {
    const std::string target = internal::MatMulTargetName();
    const size_t n = target.rfind("AVX3", 0) == 0 ? 16 : target == "AVX2" ? 8 : 0;
    if (n == 0) return;  // the tree is stated for the x86 targets
    const uint64_t rows = 29, cols = 6 * n + 5, vec_end = cols - cols % n;
    const Matrix w = RandomMatrix(WeightType::kF32, rows, cols, 71);
    const float* wf = reinterpret_cast<const float*>(w.view.data);
    for (uint64_t num_rows : {1, 9}) {
      const std::vector<float> x = RandomActivations(num_rows * cols, 72 + num_rows);
      std::vector<float> y(num_rows * rows);
      ASSERT_TRUE(MatMul(w.view, x, num_rows, y).ok());
      for (uint64_t r = 0; r < num_rows; ++r) {
        for (uint64_t j = 0; j < rows; ++j) {
          std::vector<float> lane(n, 0.0f);
          for (uint64_t i = 0; i < vec_end; ++i) {
            lane[i % n] = std::fma(wf[j * cols + i], x[r * cols + i], lane[i % n]);
          }
          for (size_t h = n / 2; h >= 1; h /= 2) {
            for (size_t i = 0; i < h; ++i) lane[i] = lane[i + h] + lane[i];
          }
          float want = lane[0];
          for (uint64_t i = vec_end; i < cols; ++i) {
            want = std::fma(wf[j * cols + i], x[r * cols + i], want);
          }
          ASSERT_EQ(std::bit_cast<uint32_t>(y[r * rows + j]), std::bit_cast<uint32_t>(want))
              << target << " num_rows " << num_rows << " row " << r << " output " << j;
        }
      }
    }
  });
}

TEST(MatMul, IdentityActivationsReproduceWidenedWeights) {
  ForEachTarget([&] {
    for (WeightType type : kKernelTypes) {
      SCOPED_TRACE(WeightTypeName(type));
      const uint64_t cols = Unit(type);
      std::vector<float> eye(cols * cols, 0.0f);
      for (uint64_t i = 0; i < cols; ++i) eye[i * cols + i] = 1.0f;
      Matrix w = RandomMatrix(type, 63488 / cols, cols, 7);
      if (type == WeightType::kF16) {  // every finite f16: exponent field < 31
        uint64_t k = 0;
        for (uint32_t bits = 0; bits < 0x10000; ++bits) {
          if (((bits >> 10) & 0x1f) == 0x1f) continue;
          const auto h = static_cast<uint16_t>(bits);
          std::memcpy(w.bytes.data() + 2 * k++, &h, 2);
        }
        ASSERT_EQ(k, 63488u);
      }
      const uint64_t rows = w.view.rows;
      std::vector<float> y(cols * rows), row(cols);
      ASSERT_TRUE(MatMul(w.view, eye, cols, y).ok());
      for (uint64_t j = 0; j < rows; ++j) {
        WidenRow(w.view, j, row);
        for (uint64_t i = 0; i < cols; ++i) {
          // == rather than bits: a -0 weight comes back as +0 + -0 = +0.
          ASSERT_EQ(y[i * rows + j], row[i]) << "row " << j << " col " << i;
        }
      }
    }
  });
}

TEST(WidenRow, IsExactForEveryType) {
  const float f32[] = {1.0f, -0.0f, 3.0e-41f, -65504.5f};
  std::vector<float> out(4);
  WidenRow({reinterpret_cast<const std::byte*>(f32), WeightType::kF32, 1, 4}, 0, out);
  EXPECT_EQ(std::memcmp(out.data(), f32, sizeof(f32)), 0);

  const uint16_t bf16[] = {0x3f80, 0x8000, 0x0001, 0xff7f};  // 1, -0, min subnormal, -max
  WidenRow({reinterpret_cast<const std::byte*>(bf16), WeightType::kBF16, 1, 4}, 0, out);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], BF16BitsToF32(bf16[i]));
  EXPECT_EQ(out[2], 0x1p-133f);

  const uint16_t f16[] = {0x3c00, 0x0001, 0x7bff, 0xfc00};  // 1, 2^-24, 65504, -inf
  WidenRow({reinterpret_cast<const std::byte*>(f16), WeightType::kF16, 1, 4}, 0, out);
  EXPECT_EQ(out, (std::vector<float>{1.0f, 0x1p-24f, 65504.0f, -INFINITY}));
}

// One hand-made Q8_0 row of two blocks: d = 0.5 (f16 0x3800) then
// d = -2^-10 (0x9400), q = i - 16 in the first block and alternating
// extremes (127, -128) in the second.
TEST(Q8_0, DequantizesHandMadeBlock) {
  std::vector<std::byte> row(2 * kQ8_0BlockBytes);
  const uint16_t d0 = 0x3800, d1 = 0x9400;
  std::memcpy(row.data(), &d0, 2);
  std::memcpy(row.data() + kQ8_0BlockBytes, &d1, 2);
  for (int i = 0; i < 32; ++i) {
    row[static_cast<size_t>(2 + i)] = static_cast<std::byte>(static_cast<int8_t>(i - 16));
    row[static_cast<size_t>(kQ8_0BlockBytes + 2 + i)] =
        static_cast<std::byte>(static_cast<int8_t>(i % 2 == 0 ? 127 : -128));
  }
  const WeightView w{row.data(), WeightType::kQ8_0, 1, 64};
  EXPECT_EQ(WeightRowBytes(WeightType::kQ8_0, 64), 68u);
  std::vector<float> wide(64);
  WidenRow(w, 0, wide);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(wide[static_cast<size_t>(i)], 0.5f * static_cast<float>(i - 16));
    EXPECT_EQ(wide[static_cast<size_t>(32 + i)], i % 2 == 0 ? -127.0f / 1024 : 128.0f / 1024);
  }
  // Sums of few small integers times powers of two are exact, so the
  // kernel must hit them on the nose: ones -> 0.5 * (-16) + (-2^-10) * (-16).
  const std::vector<float> ones(64, 1.0f);
  std::vector<float> y(1), ref(1);
  ForEachTarget([&] {
    ASSERT_TRUE(MatMul(w, ones, 1, y).ok());
    EXPECT_EQ(y[0], -8.0f + 16.0f / 1024);
  });
  ASSERT_TRUE(MatMulReference(w, ones, 1, ref).ok());
  EXPECT_EQ(ref[0], -8.0f + 16.0f / 1024);
}

TEST(MatMul, ZeroColumnsGiveZeros) {
  const WeightView w{nullptr, WeightType::kBF16, 3, 0};
  std::vector<float> y(6, NAN);
  ASSERT_TRUE(MatMul(w, {}, 2, y).ok());
  EXPECT_EQ(y, std::vector<float>(6, 0.0f));
}

// The error matrix: every bad call returns InvalidArgument, naming the
// problem, and leaves y untouched (nothing is read or written first).
struct BadCall {
  const char* name;
  WeightView w;
  size_t x_size;
  uint64_t num_rows;
  size_t y_size;
  const char* message_part;
};

TEST(MatMul, RejectsBadCallsBeforeTouchingMemory) {
  static const std::byte kSome[64] = {};
  const std::byte* data = kSome;
  const BadCall calls[] = {
      {"x too small", {data, WeightType::kF32, 2, 4}, 7, 2, 4, "x must hold"},
      {"x too large", {data, WeightType::kF32, 2, 4}, 9, 2, 4, "x must hold"},
      {"y too small", {data, WeightType::kF32, 2, 4}, 8, 2, 3, "y must hold"},
      {"num_rows mismatch", {data, WeightType::kF32, 2, 4}, 8, 3, 4, "x must hold"},
      {"q8_0 cols", {data, WeightType::kQ8_0, 1, 48}, 48, 1, 1, "multiple of 32"},
      {"null data", {nullptr, WeightType::kBF16, 2, 4}, 4, 1, 2, "null"},
      {"unknown type", {data, static_cast<WeightType>(200), 1, 4}, 4, 1, 1, "unknown weight type"},
      {"no kernel for f64",
       {data, WeightType::kF64, 1, 4},
       4,
       1,
       1,
       "f64 weights have no matmul kernel"},
      {"size overflow",
       {data, WeightType::kF32, uint64_t{1} << 40, uint64_t{1} << 40},
       0,
       0,
       0,
       "overflows"},
      {"x size overflow",
       {data, WeightType::kF32, 1, uint64_t{1} << 40},
       0,
       uint64_t{1} << 40,
       0,
       "x must hold"},
  };
  for (const BadCall& c : calls) {
    SCOPED_TRACE(c.name);
    std::vector<float> x(c.x_size, 1.0f), y(c.y_size, 42.0f);
    for (const Status& s :
         {MatMul(c.w, x, c.num_rows, y), MatMulReference(c.w, x, c.num_rows, y)}) {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(s.message().find(c.message_part), std::string::npos) << s.message();
    }
    EXPECT_EQ(y, std::vector<float>(c.y_size, 42.0f));
  }
}

TEST(MatMul, RejectsOverlappingXAndY) {
  const float w[4] = {1, 2, 3, 4};
  std::vector<float> buf(4, 1.0f);
  const WeightView view{reinterpret_cast<const std::byte*>(w), WeightType::kF32, 2, 2};
  const Status s =
      MatMul(view, std::span<const float>(buf).first(2), 1, std::span(buf).subspan(1, 2));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(MatMul, NullDataIsFineForAnEmptyMatrix) {
  const WeightView w{nullptr, WeightType::kQ8_0, 0, 64};
  const std::vector<float> x(64, 1.0f);
  std::vector<float> y;
  EXPECT_TRUE(MatMul(w, x, 1, y).ok());
}

}  // namespace
}  // namespace folio::ops
