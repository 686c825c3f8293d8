// The packed integer matmul: the packing against DequantizeRow, the SIMD
// quantizer and kernel against their scalar references (bits, every
// target), row and thread independence, and the error against the exact
// product of the dequantized weights within a derived bound.
//
// The packed kernel is also compiled for AVX3_DL (VNNI), so this test
// enumerates that target too.
#define HWY_WANT_AVX3_DL
#include "folio/ops/packed_matmul.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "ops/packed_layout.h"
#include "ops/test_matrices.h"
#include "testing/simd_targets.h"

namespace folio::ops {
namespace {

using test_matrices::Matrix;
using test_matrices::RandomActivations;
using test_matrices::RandomMatrix;
using test_matrices::SameBits;
using test_matrices::Unit;

const std::vector<WeightType> kPackedTypes =
    test_matrices::TypesWhere([](const WeightTypeTraits& t) { return HasPackedKernel(t.type); });

// Every target, and on a CPU with AVX-VNNI or AVX512-VNNI the AVX2 and AVX3
// targets' walks both with and without vpdpbusd.
void ForEachTarget(const std::function<void()>& fn) {
  test_support::ForEachSimdTarget(internal::PackedTargetName, fn);
  if (internal::CpuHasRuntimeVnni()) {
    SCOPED_TRACE("run-time VNNI off");
    internal::SetRuntimeVnniForTest(false);
    test_support::ForEachSimdTarget(internal::PackedTargetName, fn);
    internal::SetRuntimeVnniForTest(true);
  }
}

PackedMatrix Pack(const Matrix& m) {
  Result<PackedMatrix> p = PackedMatrix::Pack(m.view);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return std::move(*p);
}

TEST(PackedMatMul, TheIssueTypesArePacked) {
  for (WeightType t : {WeightType::kQ4_0, WeightType::kQ4_1, WeightType::kQ5_0, WeightType::kQ5_1,
                       WeightType::kQ8_0, WeightType::kQ4_K, WeightType::kQ5_K, WeightType::kQ6_K,
                       WeightType::kIQ4_NL, WeightType::kIQ4_XS, WeightType::kMXFP4,
                       WeightType::kQ2_K, WeightType::kQ3_K}) {
    EXPECT_TRUE(HasPackedKernel(t)) << WeightTypeName(t);
  }
  for (WeightType t : {WeightType::kF64, WeightType::kF32, WeightType::kF16, WeightType::kBF16}) {
    EXPECT_FALSE(HasPackedKernel(t)) << WeightTypeName(t);
  }
}

// Every packed row widens to DequantizeRow's f32, bit for bit: the packing
// keeps every level, scale and bias (rows not a multiple of the tile too).
void ExpectRowsWidenAsStored(const Matrix& m, const PackedMatrix& p) {
  std::vector<float> want(m.view.cols), got(m.view.cols);
  for (uint64_t j = 0; j < m.view.rows; ++j) {
    WidenRow(m.view, j, want);
    p.WidenRow(j, got);
    ASSERT_TRUE(SameBits(want, got)) << "row " << j;
  }
}

TEST(PackedMatMul, PackingKeepsEveryWeight) {
  uint64_t seed = 10;
  for (WeightType type : kPackedTypes) {
    SCOPED_TRACE(WeightTypeName(type));
    const Matrix m = RandomMatrix(type, 13, 2 * Unit(type), ++seed);
    ExpectRowsWidenAsStored(m, Pack(m));
  }
}

// Blocks for the quantizer: random, all zero, tiny, huge, one NaN, one inf,
// values on rounding ties.
std::vector<float> AwkwardActivations() {
  std::vector<float> x = RandomActivations(32 * 40, 77);
  for (size_t i = 0; i < 32; ++i) x[32 + i] = 0.0f;
  for (size_t i = 0; i < 32; ++i) x[64 + i] = x[64 + i] * 0x1p-110f;
  for (size_t i = 0; i < 32; ++i) x[96 + i] = x[96 + i] * 0x1p120f;
  x[128 + 5] = std::numeric_limits<float>::quiet_NaN();
  x[160 + 31] = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < 32; ++i) x[192 + i] = (static_cast<float>(i) - 16.0f) / 2.0f;
  x[192] = 127.0f;  // amax 127: every x * 127 / 127 lands on a half
  for (size_t i = 0; i < 32; ++i) x[224 + i] = -0.0f;
  return x;
}

TEST(PackedMatMul, QuantizerMatchesScalarOnEveryTarget) {
  const std::vector<float> x = AwkwardActivations();
  const size_t blocks = x.size() / 32;
  std::vector<ActivationBlock> want(blocks), got(blocks);
  internal::QuantizeActivationsScalar(x.data(), blocks, want.data());
  ForEachTarget([&] {
    QuantizeActivations(x, got);
    for (size_t b = 0; b < blocks; ++b) {
      EXPECT_EQ(std::memcmp(&want[b], &got[b], sizeof(ActivationBlock)), 0) << "block " << b;
    }
  });
  // The contract's values on the special blocks.
  EXPECT_EQ(want[1].d, 0.0f);
  EXPECT_EQ(want[2].d, 0.0f);  // below 2^-100
  EXPECT_TRUE(std::isnan(want[4].d) && std::isnan(want[5].d));
  for (int8_t q : want[4].q) EXPECT_EQ(q, 0);
  // Block 6 has amax 127 (scale 1) and x = (i - 16) / 2: ties round to even.
  EXPECT_EQ(want[6].q[0], 127);
  EXPECT_EQ(want[6].q[1], -8);  // -7.5
  EXPECT_EQ(want[6].q[3], -6);  // -6.5
  int32_t sum = 0;
  for (size_t b = 0; b < blocks; ++b) {
    sum = 0;
    int32_t sum_low = 0;
    for (size_t i = 0; i < 32; ++i) {
      EXPECT_GE(want[b].q[i], -127);
      sum += want[b].q[i];
      if (i < 16) sum_low += want[b].q[i];
    }
    EXPECT_EQ(sum, want[b].sum) << "block " << b;
    EXPECT_EQ(sum_low, want[b].sum_low) << "block " << b;
  }
  // Every non-special block reproduces its largest element exactly as 127.
  for (size_t b : {0, 3, 7, 8, 39}) {
    float amax = 0;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
    EXPECT_EQ(want[b].d, amax / 127.0f) << "block " << b;
  }
}

// The SIMD kernel gives the scalar chain's bits for every packed type,
// target, batch size (decode groups of 1-4, prefill blocks past 64 rows)
// and thread count; output row counts cover partial tiles.
TEST(PackedMatMul, EqualsReferenceBitForBit) {
  ThreadPool pool(3);
  ForEachTarget([&] {
    uint64_t seed = 100;
    for (WeightType type : kPackedTypes) {
      for (uint64_t rows : {5, 24, 77}) {
        const uint64_t cols = Unit(type) * (rows == 77 ? 3 : 1);
        const Matrix m = RandomMatrix(type, rows, cols, ++seed);
        const PackedMatrix p = Pack(m);
        for (uint64_t num_rows : {1, 2, 3, 4, 5, 6, 7, 70}) {
          SCOPED_TRACE(testing::Message()
                       << WeightTypeName(type) << " rows " << rows << " num_rows " << num_rows);
          const std::vector<float> x = RandomActivations(num_rows * cols, ++seed);
          std::vector<float> want(num_rows * rows), got(want.size()), got3(want.size());
          ASSERT_TRUE(PackedMatMulReference(p, x, num_rows, want).ok());
          ASSERT_TRUE(PackedMatMul(p, x, num_rows, got).ok());
          ASSERT_TRUE(PackedMatMul(p, x, num_rows, got3, &pool).ok());
          EXPECT_TRUE(SameBits(want, got));
          EXPECT_TRUE(SameBits(want, got3)) << "3 threads";
        }
      }
    }
  });
}

// MXFP4's scale is widened in registers from its E8M0 byte: every exponent
// up to 2^12, the subnormal scales of e = 0 and 1 included, gives the
// scalar chain's bits on every target, and widens to DequantizeRow's.
TEST(PackedMatMul, Mxfp4EveryScaleExponentEqualsReference) {
  const uint64_t rows = 16, cols = 32 * 9;  // 144 blocks: e = 0 ... 140 and some again
  Matrix m = RandomMatrix(WeightType::kMXFP4, rows, cols, 41);
  const uint64_t block_bytes = TraitsOf(WeightType::kMXFP4).block_bytes;
  for (uint64_t b = 0; b < rows * cols / 32; ++b) {
    m.bytes.data()[b * block_bytes] = static_cast<std::byte>(b % 141);
  }
  const PackedMatrix p = Pack(m);
  ExpectRowsWidenAsStored(m, p);
  const std::vector<float> x = RandomActivations(3 * cols, 42);
  std::vector<float> ref(3 * rows), out(ref.size());
  ASSERT_TRUE(PackedMatMulReference(p, x, 3, ref).ok());
  EXPECT_NE(ref[0], 0.0f);  // matrix row 0 has only e = 0 ... 8: tiny, but not zero
  ForEachTarget([&] {
    ASSERT_TRUE(PackedMatMul(p, x, 3, out).ok());
    EXPECT_TRUE(SameBits(ref, out));
  });
}

// A row's outputs do not depend on its batch: row r of a 70-row call equals
// a 1-row call on that row.
TEST(PackedMatMul, RowOfABatchEqualsThatRowAlone) {
  ThreadPool pool(2);
  for (WeightType type : {WeightType::kQ4_1, WeightType::kQ8_0, WeightType::kQ4_K}) {
    const uint64_t rows = 40, cols = 2 * Unit(type), num_rows = 70;
    const Matrix m = RandomMatrix(type, rows, cols, 5);
    const PackedMatrix p = Pack(m);
    const std::vector<float> x = RandomActivations(num_rows * cols, 6);
    std::vector<float> all(num_rows * rows), one(rows);
    ASSERT_TRUE(PackedMatMul(p, x, num_rows, all, &pool).ok());
    for (uint64_t r : {0, 3, 4, 63, 64, 69}) {
      ASSERT_TRUE(PackedMatMul(p, std::span(x).subspan(r * cols, cols), 1, one).ok());
      EXPECT_EQ(std::memcmp(one.data(), all.data() + r * rows, rows * sizeof(float)), 0)
          << WeightTypeName(type) << " row " << r;
    }
  }
}

// Several matrices on one input (mixed types and heights, as a Q4_K_M
// layer's q/k/v): each output has the bits of PackedMatMul on that matrix
// alone, at every thread count.
TEST(PackedMatMul, SeveralMatricesOnOneInputEqualEachAlone) {
  ThreadPool pool(3);
  const uint64_t cols = 512;
  const Matrix a = RandomMatrix(WeightType::kQ4_K, 72, cols, 1);
  const Matrix b = RandomMatrix(WeightType::kQ6_K, 24, cols, 2);
  const Matrix c = RandomMatrix(WeightType::kQ8_0, 9, cols, 3);
  const PackedMatrix pa = Pack(a), pb = Pack(b), pc = Pack(c);
  const PackedMatrix* const ws[] = {&pa, &pb, &pc};
  for (uint64_t num_rows : {1, 5, 70}) {
    const std::vector<float> x = RandomActivations(num_rows * cols, 10 + num_rows);
    for (ThreadPool* threads : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<std::vector<float>> got, want;
      std::vector<std::span<float>> ys;
      for (const PackedMatrix* w : ws) {
        got.emplace_back(num_rows * w->rows(), 7.0f);
        want.emplace_back(num_rows * w->rows());
        ASSERT_TRUE(PackedMatMul(*w, x, num_rows, want.back()).ok());
      }
      for (auto& y : got) ys.emplace_back(y);
      ASSERT_TRUE(PackedMatMuls(ws, x, num_rows, ys, threads).ok());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(SameBits(want[i], got[i])) << "matrix " << i << ", " << num_rows << " rows";
      }
    }
  }
  // A count or width mismatch is refused before anything is written.
  const Matrix narrow = RandomMatrix(WeightType::kQ8_0, 8, 256, 4);
  const PackedMatrix pn = Pack(narrow);
  const PackedMatrix* const mixed[] = {&pa, &pn};
  const std::vector<float> x = RandomActivations(cols, 9);
  std::vector<float> y0(72, 7.0f), y1(8, 7.0f);
  const std::span<float> ys[] = {y0, y1};
  const Status width = PackedMatMuls(mixed, x, 1, ys);
  EXPECT_EQ(width.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(width.message().find("columns"), std::string::npos) << width.message();
  EXPECT_FALSE(PackedMatMuls(std::span(ws).first(1), x, 1, ys).ok());
  const PackedMatrix* const twice[] = {&pc, &pc};
  std::vector<float> shared(9 + 4, 7.0f);
  const std::span<float> overlapping[] = {std::span(shared).first(9), std::span(shared).last(9)};
  const Status overlap = PackedMatMuls(twice, x, 1, overlapping);
  EXPECT_NE(overlap.message().find("overlap"), std::string::npos) << overlap.message();
  for (float v : shared) EXPECT_EQ(v, 7.0f);
  for (float v : y0) EXPECT_EQ(v, 7.0f);
  for (float v : y1) EXPECT_EQ(v, 7.0f);
}

// Against the exact product of the dequantized weights with the f32
// activations (MatMulReference, accumulated in double): each activation
// moves by at most half its block's step d_b (plus a few ulps of its
// block's range from rounding 127 / max |x|, covered by 0.51), so the
// product moves by at most sum_b 0.51 d_b sum_{i in b} |w_i|; the f32 chain
// of 2 operations per block part (+1 for a bias, +2 per part for Q2_K's
// part biases) adds at most gamma_(ops nb + 1) times the sum of its terms'
// magnitudes (Higham 3.1), and the double reference u |y|.
TEST(PackedMatMul, ErrorAgainstExactProductIsWithinTheActivationRounding) {
  constexpr double u = FLT_EPSILON / 2;
  uint64_t seed = 900;
  for (WeightType type : kPackedTypes) {
    SCOPED_TRACE(WeightTypeName(type));
    const uint64_t rows = 16, cols = 4 * Unit(type), num_rows = 3;
    const Matrix m = RandomMatrix(type, rows, cols, ++seed);
    const PackedMatrix p = Pack(m);
    const std::vector<float> x = RandomActivations(num_rows * cols, ++seed);
    std::vector<float> got(num_rows * rows), exact(num_rows * rows), wide(cols);
    ASSERT_TRUE(PackedMatMul(p, x, num_rows, got).ok());
    ASSERT_TRUE(MatMulReference(m.view, x, num_rows, exact).ok());
    const internal::PackedFormat f = internal::PackedFormatOf(type);
    const uint64_t nb = p.num_blocks();
    // Q2_K's parts each add a bias: two more operations a part.
    const size_t ops = internal::PartBiases(f) ? 4 * internal::PartsOf(f)
                                               : 2 * internal::PartsOf(f) + (f.has_bias ? 1 : 0);
    const double n = static_cast<double>(ops * nb + 1);
    const double gamma = n * u / (1 - n * u);
    std::vector<ActivationBlock> act(nb);
    double worst = 0;
    for (uint64_t r = 0; r < num_rows; ++r) {
      QuantizeActivations(std::span(x).subspan(r * cols, cols), act);
      for (uint64_t j = 0; j < rows; ++j) {
        WidenRow(m.view, j, wide);
        double rounding = 0, terms = 0;
        for (uint64_t b = 0; b < nb; ++b) {
          const internal::PackedBlock tb = internal::PackedBlockAt(p, j / 8, b);
          double abs_w = 0;
          for (size_t c = 0; c < 32; ++c) abs_w += std::fabs(wide[b * 32 + c]);
          rounding += 0.51 * act[b].d * abs_w;
          for (size_t part = 0; part < internal::PartsOf(f); ++part) {
            double dot = 0;
            for (size_t c = part * internal::PartCols(f); c < (part + 1) * internal::PartCols(f);
                 ++c) {
              dot += static_cast<double>(internal::PackedLevel(f, tb, j % 8, c)) * act[b].q[c];
            }
            terms += std::fabs(internal::PackedScale(f, tb, j % 8, part) * act[b].d *
                               (dot - f.offset * internal::PartSum(f, act[b], part)));
            if (internal::PartBiases(f)) {
              terms += std::fabs(internal::PackedBias(f, tb, j % 8, part) * act[b].d *
                                 internal::PartSum(f, act[b], part));
            }
          }
          if (f.has_bias && !internal::PartBiases(f)) {
            terms += std::fabs(internal::PackedBias(f, tb, j % 8) * act[b].e);
          }
        }
        const double want = exact[r * rows + j];
        const double err = std::fabs(got[r * rows + j] - want);
        const double tol = rounding + gamma * terms + u * std::fabs(want);
        ASSERT_LE(err, tol) << "row " << r << " output " << j;
        worst = std::max(worst, err / tol);
      }
    }
    // The bound is not vacuous: the error uses a fair part of it somewhere.
    EXPECT_GT(worst, 0.01);
  }
}

TEST(PackedMatMul, NonFiniteActivationsPoisonTheirRow) {
  const Matrix m = RandomMatrix(WeightType::kQ4_1, 8, 64, 3);
  const PackedMatrix p = Pack(m);
  std::vector<float> x = RandomActivations(2 * 64, 4), y(2 * 8);
  x[64 + 40] = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(PackedMatMul(p, x, 2, y).ok());
  for (size_t j = 0; j < 8; ++j) {
    EXPECT_TRUE(std::isfinite(y[j]));
    EXPECT_TRUE(std::isnan(y[8 + j]));
  }
}

TEST(PackedMatMul, RefusesBadCallsBeforeWriting) {
  const Matrix f16 = RandomMatrix(WeightType::kF16, 8, 32, 1);
  const Result<PackedMatrix> refused = PackedMatrix::Pack(f16.view);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("f16"), std::string::npos);

  const Matrix m = RandomMatrix(WeightType::kQ8_0, 8, 64, 2);
  const PackedMatrix p = Pack(m);
  std::vector<float> x(2 * 64, 1.0f), y(2 * 8, 7.0f);
  EXPECT_FALSE(PackedMatMul(p, std::span(x).first(127), 2, y).ok());
  EXPECT_FALSE(PackedMatMul(p, x, 2, std::span(y).first(15)).ok());
  EXPECT_FALSE(PackedMatMulReference(p, x, 3, y).ok());
  std::vector<float> shared(64 + 8);
  EXPECT_FALSE(
      PackedMatMul(p, std::span(shared).first(64), 1, std::span(shared).last(8 + 1).first(8)).ok());
  for (float v : y) EXPECT_EQ(v, 7.0f);
}

TEST(PackedMatMul, ParsesActivationModes) {
  EXPECT_EQ(*ParseMatMulActivations("q8"), MatMulActivations::kQ8);
  EXPECT_EQ(*ParseMatMulActivations("f32"), MatMulActivations::kF32);
  const Result<MatMulActivations> bad = ParseMatMulActivations("int4");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("int4"), std::string::npos);
}

}  // namespace
}  // namespace folio::ops
