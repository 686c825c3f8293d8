// The unit of work shared by MatMul's planner (matmul.cc) and its per-target
// SIMD kernel (matmul_kernel.cc).
#ifndef FOLIO_OPS_MATMUL_INTERNAL_H_
#define FOLIO_OPS_MATMUL_INTERNAL_H_

#include <cstdint>

#include "folio/ops/matmul.h"

namespace folio::ops::internal {

// Outputs [row_begin, row_end) of W for all num_rows activation rows:
// y[r * w.rows + j] = dot(W[j, :], x[r * w.cols ...]). The view and sizes
// are already validated and w.cols > 0.
struct MatMulTask {
  WeightView w;
  const float* x;  // [num_rows, w.cols]
  uint64_t num_rows;
  float* y;  // [num_rows, w.rows]
  uint64_t row_begin;
  uint64_t row_end;
};

// Runs one task with the best SIMD target this CPU has.
void MatMulRows(const MatMulTask& task);

// The name of that target ("AVX3", "AVX2", "EMU128"), for benchmarks and
// tests.
const char* MatMulTargetName();

}  // namespace folio::ops::internal

#endif  // FOLIO_OPS_MATMUL_INTERNAL_H_
