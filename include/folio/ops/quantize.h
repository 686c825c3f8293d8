// The encoders of the weight types: a row of f32 values in, the type's
// blocks out. The inverse of DequantizeRow (weight_type.h), as ggml's
// from_float_ref is of its to_float.
//
// Every encoder is scalar and deterministic: the bytes depend on the row's
// values only. The legacy types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) round as
// ggml's quantize_row_*_ref do, so their bytes equal ggml's and the gguf
// Python package's (gguf.quants.quantize) bit for bit. The K-quants follow
// ggml's reference quantizers without an importance matrix (what
// llama-quantize runs without --imatrix): Q4_K and Q5_K fit a scale and a
// min per 32 elements by weighted least squares over a sweep of grids
// (ggml's make_qkx2_quants), Q2_K the same per 16 elements judged by
// weighted absolute error, Q6_K a signed scale per 16 elements
// (make_qx_quants), Q3_K one per 16 elements by moving one level at a time
// (make_q3_quants), then quantize those scales to 4, 6 or 8 bits against
// the super-block's f16 d (and dmin) and requantize the elements against
// the stored scales. The gguf Python package cannot quantize K-quants or the
// IQ4 types; tests/python/test_quantize.py compares their bytes with
// llama.cpp's own quantizer (ggml_quantize_chunk, through llama-cpp-python)
// instead, and quantize_test.cc checks their error.
//
// The type is chosen by an exhaustive switch, so a new WeightType does not
// compile until HasQuantizer and QuantizeRow decide it.
#ifndef FOLIO_OPS_QUANTIZE_H_
#define FOLIO_OPS_QUANTIZE_H_

#include <cstddef>
#include <span>

#include "folio/core/status.h"
#include "folio/ops/weight_type.h"

namespace folio::ops {

// Whether QuantizeRow writes `type`: f32, f16, bf16, Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS and MXFP4. f64
// (folio computes in f32) has none.
constexpr bool HasQuantizer(WeightType type) {
  switch (type) {
    case WeightType::kF32:
    case WeightType::kF16:
    case WeightType::kBF16:
    case WeightType::kQ8_0:
    case WeightType::kQ4_0:
    case WeightType::kQ4_1:
    case WeightType::kQ5_0:
    case WeightType::kQ5_1:
    case WeightType::kQ2_K:
    case WeightType::kQ3_K:
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
    case WeightType::kQ6_K:
    case WeightType::kIQ4_NL:
    case WeightType::kIQ4_XS:
    case WeightType::kMXFP4:
      return true;
    case WeightType::kF64:
      return false;
  }
  return false;
}

// Encodes in.size() values as `type` into the WeightRowBytes(type,
// in.size()) bytes at `out` (no alignment needed). in.size() must be whole
// blocks of the type (0 is allowed and writes nothing).
//
// What each type does (d, m: the block's scale and min, stored as f16; the
// integer levels are computed against the f32 d before it is rounded to
// f16, as in ggml):
//   f32: a copy. f16 / bf16: rounded to nearest, ties to even.
//   Q8_0: d = absmax / 127, q = round(x / d) half away from zero.
//   Q4_0 / Q5_0: d = max / -8 (/ -16), where max is the first element of
//     largest magnitude, so that element becomes the lowest level exactly;
//     q = min(15 (31), trunc(x / d + 8.5 (16.5))).
//   Q4_1 / Q5_1: d = (max - min) / 15 (/ 31), m = min, q = min(15 (31),
//     trunc((x - min) / d + 0.5)).
//   Q2_K / Q3_K / Q4_K / Q5_K / Q6_K: see the file comment.
//   IQ4_NL / IQ4_XS: llama-quantize's search without an importance matrix
//     (weights x^2): per 32 elements the least-squares scale on the 16
//     non-uniform levels, best of 15 starting grids; IQ4_XS then stores
//     each sub-block's scale as 6 signed bits of the super-block's f16 d.
//     As quantize.cc restates ggml's quantize_iq4_nl / _iq4_xs.
//   MXFP4: e = floor(log2(absmax)) - 2 + 127 (E8M0; 0 for a block below
//     2^-125), each element the nearest E2M1 code (the first on a tie), as
//     ggml's quantize_row_mxfp4_ref and gguf.quants.quantize.
// Where 1/d would overflow (d below f32's normal range, so its f16 is 0)
// the levels are those of a zero scale; every element decodes to 0 (or m).
//
// Errors (nothing is written past `out`'s row; its contents are then
// unspecified):
//   InvalidArgument  a NaN or infinite value, naming its index and value;
//                    in.size() not whole blocks; a type without a quantizer
//                    (HasQuantizer) is Unimplemented instead;
//   OutOfRange       a value (f16, bf16) or a block's scale or min (every
//                    quantized type stores them as f16) that rounds past the
//                    type's largest finite value (65504 for f16), naming the
//                    element or block.
Status QuantizeRow(WeightType type, std::span<const float> in, std::byte* out);

}  // namespace folio::ops

#endif  // FOLIO_OPS_QUANTIZE_H_
