// Seeded random weight matrices and activations for the matmul tests
// (matmul_test.cc, packed_matmul_test.cc).
#ifndef FOLIO_OPS_TEST_MATRICES_H_
#define FOLIO_OPS_TEST_MATRICES_H_

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "folio/core/aligned_buffer.h"
#include "folio/core/dtype.h"
#include "folio/core/splitmix64.h"
#include "folio/ops/block_scales.h"
#include "folio/ops/matmul.h"

namespace folio::ops::test_matrices {

// A weight matrix that owns its bytes, filled from a seeded stream.
struct Matrix {
  AlignedBuffer bytes;
  WeightView view;
};

inline float Uniform(SplitMix64& rng) { return static_cast<float>(2.0 * rng.NextUnit() - 1.0); }

// Elements uniform in [-1, 1) rounded to the type; Q8_0 blocks get a scale
// in [2^-9, 2^-6) and q uniform in [-127, 127].
inline Matrix RandomMatrix(WeightType type, uint64_t rows, uint64_t cols, uint64_t seed) {
  SplitMix64 rng(seed);
  const uint64_t row_bytes = WeightRowBytes(type, cols);
  Matrix m{AlignedBuffer(rows * row_bytes), {}};
  m.view = {m.bytes.data(), type, rows, cols};
  std::byte* p = m.bytes.data();
  for (uint64_t j = 0; j < rows; ++j) {
    std::byte* row = p + j * row_bytes;
    for (uint64_t i = 0; i < cols; ++i) {
      switch (type) {
        case WeightType::kF64:
          StoreElement(DType::kF64, row, i, static_cast<double>(Uniform(rng)));
          break;
        case WeightType::kF32:
          StoreElement(DType::kF32, row, i, Uniform(rng));
          break;
        case WeightType::kF16:
          StoreElement(DType::kF16, row, i, Uniform(rng));
          break;
        case WeightType::kBF16:
          StoreElement(DType::kBF16, row, i, Uniform(rng));
          break;
        case WeightType::kQ8_0: {
          std::byte* block = row + i / 32 * kQ8_0BlockBytes;
          if (i % 32 == 0) {
            const uint16_t d = F32ToF16Bits(std::ldexp(1.0f + static_cast<float>(rng.NextUnit()),
                                                       -9 + static_cast<int>(rng.NextU64() % 3)));
            std::memcpy(block, &d, 2);
          }
          block[2 + i % 32] =
              static_cast<std::byte>(static_cast<int8_t>(rng.NextU64() % 255) - 127);
          break;
        }
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
        case WeightType::kMXFP4: {
          // Random bytes, then each f16 scale field (BlockScaleFields) set in
          // [2^-9, 2^-6) so that no scale is NaN, infinite or huge, and each
          // E8M0 one to 2^-9 ... 2^-6 (e = 118 ... 121; its levels reach 6).
          const WeightTypeTraits& traits = TraitsOf(type);
          if (i % traits.block_size != 0) break;
          std::byte* block = row + i / traits.block_size * traits.block_bytes;
          for (uint32_t k = 0; k < traits.block_bytes; ++k) {
            block[k] = static_cast<std::byte>(rng.NextU64() & 0xff);
          }
          for (const BlockScaleField& field : BlockScaleFields(type)) {
            if (field.encoding == ScaleEncoding::kE8M0) {
              block[field.offset] = static_cast<std::byte>(118 + rng.NextU64() % 4);
              continue;
            }
            const uint16_t d = F32ToF16Bits(std::ldexp(1.0f + static_cast<float>(rng.NextUnit()),
                                                       -9 + static_cast<int>(rng.NextU64() % 3)));
            std::memcpy(block + field.offset, &d, 2);
          }
          break;
        }
      }
    }
  }
  return m;
}

// A column count unit that every type's rows can take: 32, or the block
// when it is larger (the K-quants' 256).
// The weight types of the table (kWeightTypeTraits) for which pred holds,
// so a type added there is tested without further edits.
template <typename Pred>
std::vector<WeightType> TypesWhere(Pred pred) {
  std::vector<WeightType> types;
  for (const WeightTypeTraits& row : kWeightTypeTraits) {
    if (pred(row)) types.push_back(row.type);
  }
  return types;
}

inline uint64_t Unit(WeightType type) { return std::max<uint64_t>(32, TraitsOf(type).block_size); }

inline std::vector<float> RandomActivations(uint64_t n, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> x(n);
  for (float& v : x) v = Uniform(rng);
  return x;
}

inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace folio::ops::test_matrices

#endif  // FOLIO_OPS_TEST_MATRICES_H_
