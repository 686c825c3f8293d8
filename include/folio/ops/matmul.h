// Weight-stationary matrix kernels for the decoder's linear layers.
//
// A weight matrix stays in the type it was stored in (ops/weight_type.h:
// every type whose row has has_matmul, all but f64) and is decoded inside
// the kernel, one vector at a time: element types are widened to f32, the
// quantized types' blocks are unpacked in registers into their integer
// levels and their sub-block scales; nothing is expanded to f32 in memory.
// Activations and outputs are f32. Decode (one activation row) is a
// matrix-vector product whose floor is the weight bytes over the memory
// bandwidth; prefill (many rows) reads each weight row from memory once per
// block of activation rows.
//
// Determinism (docs/design.md, contract 3): the reduction that
// produces y[r, j] has one fixed order that depends only on `cols`, the
// weight type and the SIMD target the CPU runs (chosen once per process) —
// never on num_rows, which rows share a call, how outputs are split over
// threads or the thread count. So prefill and decode produce identical
// bits for the same (row, output). The order, with N = f32 lanes of the
// target (1 on the scalar fallback, 8 on AVX2, 16 on AVX-512):
//   every type but Q8_0: one N-lane accumulator over the whole vectors
//     i = 0, N, 2N, ... (fused multiply-add, lane k sums i + k in index
//     order), the target's fixed lane-sum tree, then the scalar tail
//     cols - cols % N ... cols - 1 in order with fused multiply-add (only
//     element types have one: a block type's rows are whole blocks). Each
//     weight is first decoded to exactly the f32 that DequantizeRow gives
//     (widening; for a quantized block, scale * level, plus the bias in
//     one fused step where the type has a min), so a quantized matrix's
//     product is bit for bit that of the f32 matrix DequantizeRow makes
//     of it, computed without ever storing that matrix;
//   Q8_0: per 32-element block in order, p = q * x over the block's 32 / N
//     vectors (multiply, then fused multiply-adds in order), then
//     acc = d * p + acc (fused); at the end the lane-sum tree.
#ifndef FOLIO_OPS_MATMUL_H_
#define FOLIO_OPS_MATMUL_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "folio/core/status.h"
#include "folio/core/thread_pool.h"
#include "folio/ops/weight_type.h"

namespace folio::ops {

// A row-major [rows = out_features, cols = in_features] matrix in its stored
// type: one contiguous row per output (nn.Linear and GGUF layout), rows
// packed back to back (row j starts at j * WeightRowBytes(type, cols)).
// Non-owning; `data` needs no particular alignment.
struct WeightView {
  const std::byte* data = nullptr;  // [rows, WeightRowBytes(type, cols)]
  WeightType type = WeightType::kF32;
  uint64_t rows = 0;
  uint64_t cols = 0;
};

// Checks a view before anything reads it: a known type, cols whole blocks
// of it (Q8_0: a multiple of 32), rows * row bytes without overflow, and
// data non-null whenever that size is nonzero. Any type of the table,
// with or without a matmul kernel (WidenRow reads them all).
Status ValidateWeightView(const WeightView& w);

// y[r, j] = sum_i W[j, i] * x[r, i] for r < num_rows and j < w.rows.
//   x: [num_rows, w.cols] f32, y: [num_rows, w.rows] f32 (fully written).
// Output rows of W are split over the pool's threads in contiguous blocks;
// every output is computed by one thread in the fixed order above. Checks
// the view, that its type has a kernel (has_matmul) and both sizes first
// and returns InvalidArgument without reading or writing anything on a
// mismatch. x and y must not overlap.
Status MatMul(const WeightView& w, std::span<const float> x, uint64_t num_rows, std::span<float> y,
              ThreadPool* pool = nullptr);

// The scalar reference: each output accumulated in double in index order
// from the weights as DequantizeRow decodes them (exactly), rounded to f32
// once. Same validation.
Status MatMulReference(const WeightView& w, std::span<const float> x, uint64_t num_rows,
                       std::span<float> y);

// out[i] = W[row, i] as f32, by DequantizeRow (exact for every type but
// f64, which rounds once; Q8_0 gives f32(d) * q). For embedding lookups.
// Programming errors (row out of range, out.size() != cols, an invalid
// view) fail a FOLIO_CHECK.
void WidenRow(const WeightView& w, uint64_t row, std::span<float> out);

}  // namespace folio::ops

#endif  // FOLIO_OPS_MATMUL_H_
