// Validation, work planning and threading for MatMul, and the scalar
// reference; the SIMD kernel is in matmul_kernel.cc.
#include "folio/ops/matmul.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "folio/core/checked_math.h"
#include "ops/matmul_internal.h"

namespace folio::ops {
namespace {

std::string Str(uint64_t v) { return std::to_string(v); }

Status ValidateCall(const WeightView& w, size_t x_size, uint64_t num_rows, size_t y_size) {
  FOLIO_RETURN_IF_ERROR(ValidateWeightView(w));
  if (!TraitsOf(w.type).has_matmul) {
    return Status::InvalidArgument(std::string(TraitsOf(w.type).name) +
                                   " weights have no matmul kernel");
  }
  return internal::CheckActivationSizes(w.rows, w.cols, x_size, num_rows, y_size);
}

}  // namespace

namespace internal {

Status CheckActivationSizes(uint64_t rows, uint64_t cols, size_t x_size, uint64_t num_rows,
                            size_t y_size) {
  const auto x_expected = CheckedMul(num_rows, cols);
  if (!x_expected || x_size != *x_expected) {
    return Status::InvalidArgument("x must hold num_rows * cols = " + Str(num_rows) + " * " +
                                   Str(cols) + " floats (got " + Str(x_size) + ")");
  }
  const auto y_expected = CheckedMul(num_rows, rows);
  if (!y_expected || y_size != *y_expected) {
    return Status::InvalidArgument("y must hold num_rows * rows = " + Str(num_rows) + " * " +
                                   Str(rows) + " floats (got " + Str(y_size) + ")");
  }
  return Status::Ok();
}

bool Overlap(std::span<const float> x, std::span<const float> y) {
  const auto px = reinterpret_cast<uintptr_t>(x.data()), py = reinterpret_cast<uintptr_t>(y.data());
  return !x.empty() && !y.empty() && px < py + y.size_bytes() && py < px + x.size_bytes();
}

// Below this many multiply-adds a call runs on the calling thread: waking
// the pool costs tens of microseconds, more than such a call takes.
constexpr uint64_t kMinParallelMacs = uint64_t{1} << 18;
// Output rows per task are a multiple of the decode tile (8 rows), so no
// task ends in a partial tile it could have avoided.
constexpr uint64_t kRowAlign = 8;
// Tasks per thread. One contiguous block of outputs per thread keeps each
// thread's weight reads one long stream for the hardware prefetchers; the
// extra tasks let a thread that loses its core to another process hand
// work to the others. Either way each output is computed by one thread in
// the fixed order, so the split never changes a bit.
constexpr uint64_t kTasksPerThread = 2;
// Activation rows per task when outputs alone cannot feed every thread.
constexpr uint64_t kRowBlockAlign = 4;

Split PlanSplit(uint64_t outs, uint64_t num_rows, uint64_t macs, ThreadPool* pool) {
  // Outputs in blocks of out_block (a multiple of kRowAlign), activation
  // rows in blocks of act_block; task i = (output block i / act_blocks,
  // activation block i % act_blocks).
  const uint64_t threads = pool == nullptr ? 1 : pool->num_threads();
  const uint64_t want = macs < kMinParallelMacs ? 1 : threads * kTasksPerThread;
  uint64_t out_blocks = std::min(want, CeilDiv(outs, kRowAlign));
  const uint64_t out_block = CeilDiv(CeilDiv(outs, out_blocks), kRowAlign) * kRowAlign;
  out_blocks = CeilDiv(outs, out_block);
  uint64_t act_block = num_rows;
  if (out_blocks < std::min(want, threads)) {
    const uint64_t act_blocks = CeilDiv(threads, out_blocks);
    act_block = CeilDiv(CeilDiv(num_rows, act_blocks), kRowBlockAlign) * kRowBlockAlign;
  }
  return {outs, out_block, out_blocks, num_rows, act_block, CeilDiv(num_rows, act_block)};
}

SplitTask TaskOf(const Split& split, uint64_t i) {
  const uint64_t ob = i / split.act_blocks, ab = i % split.act_blocks;
  const uint64_t r0 = ab * split.act_block;
  return {ob * split.out_block, std::min((ob + 1) * split.out_block, split.outs), r0,
          std::min(split.act_block, split.num_rows - r0)};
}

void RunSplit(const Split& split, ThreadPool* pool,
              const std::function<void(uint64_t, uint64_t, uint64_t, uint64_t)>& task) {
  const auto run = [&](size_t i) {
    const SplitTask t = TaskOf(split, i);
    task(t.out_begin, t.out_end, t.row_begin, t.num_rows);
  };
  const uint64_t num_tasks = split.num_tasks();
  if (num_tasks == 1 || pool == nullptr) {
    for (uint64_t i = 0; i < num_tasks; ++i) run(i);
  } else {
    pool->ParallelFor(num_tasks, run);
  }
}

}  // namespace internal

Status ValidateWeightView(const WeightView& w) {
  if (!IsWeightType(w.type)) {
    return Status::InvalidArgument("unknown weight type " + Str(static_cast<uint64_t>(w.type)));
  }
  const WeightTypeTraits& traits = TraitsOf(w.type);
  if (w.cols % traits.block_size != 0) {
    return Status::InvalidArgument(std::string(traits.name) + " weights need cols a multiple of " +
                                   Str(traits.block_size) + " (got " + Str(w.cols) + ")");
  }
  const uint64_t row_bytes = WeightRowBytes(w.type, w.cols);
  const auto total = CheckedMul(w.rows, row_bytes);
  if ((w.cols > 0 && row_bytes == 0) || !total) {
    return Status::InvalidArgument("a " + Str(w.rows) + " x " + Str(w.cols) + " " +
                                   std::string(WeightTypeName(w.type)) +
                                   " matrix overflows 64-bit byte sizes");
  }
  if (w.data == nullptr && *total != 0) {
    return Status::InvalidArgument("weight data is null for a " + Str(w.rows) + " x " +
                                   Str(w.cols) + " matrix (" + Str(*total) + " bytes)");
  }
  return Status::Ok();
}

Status MatMul(const WeightView& w, std::span<const float> x, uint64_t num_rows, std::span<float> y,
              ThreadPool* pool) {
  FOLIO_RETURN_IF_ERROR(ValidateCall(w, x.size(), num_rows, y.size()));
  if (internal::Overlap(x, y)) {
    return Status::InvalidArgument("x and y overlap");
  }
  if (y.empty()) return Status::Ok();
  if (w.cols == 0) {  // empty sums
    std::fill(y.begin(), y.end(), 0.0f);
    return Status::Ok();
  }

  const internal::Split split = internal::PlanSplit(
      w.rows, num_rows, CheckedProduct({w.rows, w.cols, num_rows}).value_or(UINT64_MAX), pool);
  internal::RunSplit(split, pool, [&](uint64_t j0, uint64_t j1, uint64_t r0, uint64_t rn) {
    internal::MatMulTask task{w, x.data() + r0 * w.cols, rn, y.data() + r0 * w.rows, j0, j1};
    internal::MatMulRows(task);
  });
  return Status::Ok();
}

Status MatMulReference(const WeightView& w, std::span<const float> x, uint64_t num_rows,
                       std::span<float> y) {
  FOLIO_RETURN_IF_ERROR(ValidateCall(w, x.size(), num_rows, y.size()));
  const uint64_t row_bytes = WeightRowBytes(w.type, w.cols);
  std::vector<float> wide(w.cols);
  for (uint64_t j = 0; j < w.rows; ++j) {
    DequantizeRow(w.type, w.data + j * row_bytes, wide);
    for (uint64_t r = 0; r < num_rows; ++r) {
      double acc = 0.0;
      for (uint64_t i = 0; i < w.cols; ++i) {
        acc += static_cast<double>(wide[i]) * static_cast<double>(x[r * w.cols + i]);
      }
      y[r * w.rows + j] = static_cast<float>(acc);
    }
  }
  return Status::Ok();
}

void WidenRow(const WeightView& w, uint64_t row, std::span<float> out) {
  const Status valid = ValidateWeightView(w);
  FOLIO_CHECK(valid.ok(), valid.ToString());
  FOLIO_CHECK(row < w.rows, "row ", row, " of ", w.rows);
  FOLIO_CHECK(out.size() == w.cols, "out has ", out.size(), " floats, cols ", w.cols);
  DequantizeRow(w.type, w.data + row * WeightRowBytes(w.type, w.cols), out);
}

}  // namespace folio::ops
