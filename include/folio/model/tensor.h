// A weight tensor in the type it was stored in: row-major, owned, or a view
// into a memory-mapped file that `owner` keeps alive. Weights stay in this
// form; kernels widen them as they read (ops/matmul.h).
#ifndef FOLIO_MODEL_TENSOR_H_
#define FOLIO_MODEL_TENSOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "folio/core/status.h"

namespace folio::model {

enum class TensorType : uint8_t { kF64, kF32, kF16, kBF16, kQ8_0 };
std::string_view TensorTypeName(TensorType t);

// Bytes of a tensor of `shape` (Q8_0: 34 bytes per 32 elements along the
// last dimension, which must be a multiple of 32). nullopt on overflow or a
// Q8_0 row that is not whole blocks.
std::optional<uint64_t> TensorBytes(TensorType type, std::span<const uint64_t> shape);

struct Tensor {
  TensorType type = TensorType::kF64;
  std::vector<uint64_t> shape;
  std::span<const std::byte> bytes;
  std::shared_ptr<const void> owner;  // keeps `bytes` alive

  bool empty() const { return shape.empty() && bytes.empty(); }
  uint64_t num_elements() const;
  // All elements widened to double (Q8_0 dequantised): for conversion and
  // tests, not for hot paths.
  std::vector<double> ToDoubles() const;
  // Owned float64 tensor.
  static Tensor FromDoubles(std::vector<uint64_t> shape, std::vector<double> values);
};

}  // namespace folio::model

#endif  // FOLIO_MODEL_TENSOR_H_
