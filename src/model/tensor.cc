#include "folio/model/tensor.h"

#include <cstring>

#include "folio/core/checked_math.h"
#include "folio/core/dtype.h"

namespace folio::model {

std::string_view TensorTypeName(TensorType t) {
  switch (t) {
    case TensorType::kF64: return "f64";
    case TensorType::kF32: return "f32";
    case TensorType::kF16: return "f16";
    case TensorType::kBF16: return "bf16";
    case TensorType::kQ8_0: return "q8_0";
  }
  return "unknown";
}

std::optional<uint64_t> TensorBytes(TensorType type, std::span<const uint64_t> shape) {
  uint64_t n = 1;
  for (uint64_t s : shape) {
    if (__builtin_mul_overflow(n, s, &n)) return std::nullopt;
  }
  switch (type) {
    case TensorType::kF64: return CheckedMul(n, 8);
    case TensorType::kF32: return CheckedMul(n, 4);
    case TensorType::kF16:
    case TensorType::kBF16: return CheckedMul(n, 2);
    case TensorType::kQ8_0:
      if (shape.empty() || shape.back() % 32 != 0) return std::nullopt;
      return CheckedMul(n / 32, 34);
  }
  return std::nullopt;
}

uint64_t Tensor::num_elements() const {
  uint64_t n = 1;
  for (uint64_t s : shape) n *= s;
  return n;
}

std::vector<double> Tensor::ToDoubles() const {
  const uint64_t n = num_elements();
  std::vector<double> out(n);
  const std::byte* p = bytes.data();
  switch (type) {
    case TensorType::kF64:
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16: {
      const DType d = type == TensorType::kF64   ? DType::kF64
                      : type == TensorType::kF32 ? DType::kF32
                      : type == TensorType::kF16 ? DType::kF16
                                                 : DType::kBF16;
      for (uint64_t i = 0; i < n; ++i) out[i] = LoadElement<double>(d, p, i);
      return out;
    }
    case TensorType::kQ8_0:
      for (uint64_t b = 0; b < n / 32; ++b) {
        uint16_t scale_bits;
        std::memcpy(&scale_bits, p + b * 34, 2);
        const double scale = static_cast<double>(F16BitsToF32(scale_bits));
        for (uint64_t i = 0; i < 32; ++i) {
          const auto q = static_cast<int8_t>(p[b * 34 + 2 + i]);
          out[b * 32 + i] = scale * static_cast<double>(q);
        }
      }
      return out;
  }
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
