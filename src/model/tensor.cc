#include "folio/model/tensor.h"

#include "folio/core/checked_math.h"

namespace folio::model {

std::optional<uint64_t> TensorBytes(TensorType type, std::span<const uint64_t> shape) {
  if (!ops::IsWeightType(type)) return std::nullopt;
  const ops::WeightTypeTraits& traits = ops::TraitsOf(type);
  uint64_t n = 1;
  for (uint64_t s : shape) {
    if (__builtin_mul_overflow(n, s, &n)) return std::nullopt;
  }
  const uint64_t row = shape.empty() ? 1 : shape.back();
  if (row % traits.block_size != 0) return std::nullopt;
  return CheckedMul(n / traits.block_size, traits.block_bytes);
}

uint64_t Tensor::num_elements() const {
  uint64_t n = 1;
  for (uint64_t s : shape) n *= s;
  return n;
}

std::vector<double> Tensor::ToDoubles() const {
  std::vector<double> out(num_elements());
  // Rows are whole blocks, so the tensor is one run of blocks.
  ops::DequantizeRow(type, bytes.data(), out);
  return out;
}

Tensor Tensor::FromDoubles(std::vector<uint64_t> shape, std::vector<double> values) {
  auto storage = std::make_shared<std::vector<double>>(std::move(values));
  Tensor t;
  t.type = TensorType::kF64;
  t.shape = std::move(shape);
  t.bytes = std::as_bytes(std::span<const double>(*storage));
  t.owner = std::move(storage);
  return t;
}

}  // namespace folio::model
