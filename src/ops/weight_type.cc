// The weight-type table's functions: names, row sizes and the one scalar
// decoder of each type.
#include "folio/ops/weight_type.h"

#include <cstring>

#include "folio/core/checked_math.h"
#include "folio/core/dtype.h"
#include "folio/core/status.h"

namespace folio::ops {
namespace internal {
void BadWeightType(WeightType t) {
  FOLIO_CHECK(false, "unknown weight type ", static_cast<int>(t));
  __builtin_unreachable();
}
}  // namespace internal

namespace {

// Element types: element i of `src` read as Out (f64 into float rounds).
template <DType kD, typename Out>
void DecodeElements(const std::byte* src, std::span<Out> out) {
  for (size_t i = 0; i < out.size(); ++i) out[i] = LoadElement<Out>(kD, src, i);
}

// ggml's dequantize_row_q8_0: each element is f32(d) * f32(q), one exact
// product (an 11-bit times an 8-bit significand), so Out = double gets the
// same value.
template <typename Out>
void DecodeQ8_0(const std::byte* src, std::span<Out> out) {
  for (size_t b = 0; b < out.size() / kQ8_0BlockElems; ++b) {
    const std::byte* block = src + b * kQ8_0BlockBytes;
    uint16_t d_bits;
    std::memcpy(&d_bits, block, kQ8_0ScaleBytes);
    const float d = F16BitsToF32(d_bits);
    for (size_t j = 0; j < kQ8_0BlockElems; ++j) {
      const auto q = static_cast<int8_t>(block[kQ8_0ScaleBytes + j]);
      out[b * kQ8_0BlockElems + j] = static_cast<Out>(d * static_cast<float>(q));
    }
  }
}

template <typename Out>
void Dequantize(WeightType type, const std::byte* src, std::span<Out> out) {
  const WeightTypeTraits& traits = TraitsOf(type);
  FOLIO_CHECK(out.size() % traits.block_size == 0, "DequantizeRow: ", out.size(), " ", traits.name,
              " elements are not whole blocks: not a multiple of ", traits.block_size);
  switch (type) {
    case WeightType::kF64:
      return DecodeElements<DType::kF64>(src, out);
    case WeightType::kF32:
      return DecodeElements<DType::kF32>(src, out);
    case WeightType::kF16:
      return DecodeElements<DType::kF16>(src, out);
    case WeightType::kBF16:
      return DecodeElements<DType::kBF16>(src, out);
    case WeightType::kQ8_0:
      return DecodeQ8_0(src, out);
  }
}

}  // namespace

std::string_view WeightTypeName(WeightType type) {
  return IsWeightType(type) ? TraitsOf(type).name : "unknown";
}

uint64_t WeightRowBytes(WeightType type, uint64_t cols) {
  if (!IsWeightType(type)) return 0;
  const WeightTypeTraits& traits = TraitsOf(type);
  if (cols % traits.block_size != 0) return 0;
  return CheckedMul(cols / traits.block_size, uint64_t{traits.block_bytes}).value_or(0);
}

void DequantizeRow(WeightType type, const std::byte* src, std::span<float> out) {
  Dequantize(type, src, out);
}
void DequantizeRow(WeightType type, const std::byte* src, std::span<double> out) {
  Dequantize(type, src, out);
}

}  // namespace folio::ops
