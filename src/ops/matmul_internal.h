// The unit of work shared by MatMul's planner (matmul.cc) and its per-target
// SIMD kernel (matmul_kernel.cc).
#ifndef FOLIO_OPS_MATMUL_INTERNAL_H_
#define FOLIO_OPS_MATMUL_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <span>

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

// The size checks every matmul entry point makes (MatMul, PackedMatMul and
// their references): x holds num_rows * cols floats and y num_rows * rows,
// products checked for overflow. InvalidArgument naming the sizes.
Status CheckActivationSizes(uint64_t rows, uint64_t cols, size_t x_size, uint64_t num_rows,
                            size_t y_size);
// Whether x and y share a byte (an in-place call, which the kernels refuse).
bool Overlap(std::span<const float> x, std::span<const float> y);

// How a call's outputs and activation rows are cut into tasks (shared by
// MatMul and PackedMatMul): outputs in blocks of out_block (a multiple of
// 8, the decode tile and the packed tile), activation rows in blocks of
// act_block. The split never changes a bit: each output is computed by one
// task in its fixed order.
struct Split {
  uint64_t outs, out_block, out_blocks;
  uint64_t num_rows, act_block, act_blocks;
  uint64_t num_tasks() const { return out_blocks * act_blocks; }
};
// Task i < num_tasks() of a split: outputs [out_begin, out_end) for
// activation rows [row_begin, row_begin + num_rows).
struct SplitTask {
  uint64_t out_begin, out_end, row_begin, num_rows;
};
SplitTask TaskOf(const Split& split, uint64_t i);
// macs: the call's multiply-adds (small calls run on the caller alone).
Split PlanSplit(uint64_t outs, uint64_t num_rows, uint64_t macs, ThreadPool* pool);
// Runs task(out_begin, out_end, row_begin, num_rows) for every task of the
// split, over the pool when there is more than one.
void RunSplit(const Split& split, ThreadPool* pool,
              const std::function<void(uint64_t, uint64_t, uint64_t, uint64_t)>& task);

// Runs one task with the best SIMD target this CPU has.
void MatMulRows(const MatMulTask& task);

// The name of that target ("AVX3", "AVX2", "EMU128"), for benchmarks and
// tests.
const char* MatMulTargetName();

}  // namespace folio::ops::internal

#endif  // FOLIO_OPS_MATMUL_INTERNAL_H_
