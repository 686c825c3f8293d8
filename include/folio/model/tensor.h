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
#include "folio/ops/weight_type.h"

namespace folio::model {

// A tensor's stored type is one of ops' weight types (ops/weight_type.h):
// one enum and one table for the whole engine, whatever file it came from.
using TensorType = ops::WeightType;
inline std::string_view TensorTypeName(TensorType t) { return ops::WeightTypeName(t); }

// Bytes of a tensor of `shape`: whole blocks of the type along the last
// dimension (Q8_0: 34 bytes per 32 elements; a scalar is a row of one).
// nullopt on overflow, a row that is not whole blocks or an unknown type.
std::optional<uint64_t> TensorBytes(TensorType type, std::span<const uint64_t> shape);

struct Tensor {
  TensorType type = TensorType::kF64;
  std::vector<uint64_t> shape;
  std::span<const std::byte> bytes;
  std::shared_ptr<const void> owner;  // keeps `bytes` alive

  bool empty() const { return shape.empty() && bytes.empty(); }
  uint64_t num_elements() const;
  // All elements widened to double by ops::DequantizeRow (exact): for
  // conversion and tests, not for hot paths.
  std::vector<double> ToDoubles() const;
  // Owned float64 tensor.
  static Tensor FromDoubles(std::vector<uint64_t> shape, std::vector<double> values);
};

}  // namespace folio::model

#endif  // FOLIO_MODEL_TENSOR_H_
