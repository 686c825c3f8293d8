// Integer matmul for quantized weights: 8-bit activations, weights repacked
// once at load into tiles of 8 interleaved rows, integer dot products.
//
// The float kernel (ops/matmul.h) decodes every weight to f32 and spends
// most of its instructions doing so. This path does what ggml's CPU
// backend does instead, and goes one step further on the layout:
//   - each activation row is quantized once per call to blocks of 32 int8
//     (one f32 scale per block, round to nearest even);
//   - each weight matrix is repacked at load into tiles of 8 output rows.
//     Within a tile and a 32-column block, 4 consecutive levels of each of
//     the 8 rows sit side by side, so one 8-bit dot-product instruction
//     (vpdpbusd; vpmaddubsw + vpmaddwd without VNNI) against 4 broadcast
//     activation bytes yields 8 rows' partial sums in 8 lanes. The block's
//     8 sums are then scaled by one vector multiply-add, and no horizontal
//     sum is ever needed.
//
// Numeric contract. For output row j of a tile, activation row r and
// block b (columns 32b ... 32b + 31), the stored levels q (small unsigned
// integers), the weight's block scale s_jb and bias m_jb (or offset o, so
// that weight = s * (q - o), or s * q + m) and the activation's block
// (int8 a, scale d_b, sum of a A_b, and e_b = d_b * float(A_b)):
//   I = sum_i q_i * a_i - o * A_b                       (exact, in int32)
//   acc = fma(s_jb * d_b, float(I), acc)                (the product rounds)
//   acc = fma(m_jb, e_b, acc)                           (bias types only)
// over b = 0, 1, ... in order, from acc = 0; y[r, j] = acc. Q6_K, whose
// 16-column halves p = 0, 1 have their own scales s_jbp, runs the first
// two lines once per half (in order, over the half's columns, with the
// half's activation sum A_bp) before the next block. Integers are
// exact and each output is one scalar chain, so the bits are the same on
// every SIMD target (and the scalar fallback), for any batch, tile split or
// thread count: PackedMatMulReference computes the same chain one output
// at a time and must agree with `==`.
//
// Against the exact product of the dequantized weights with the f32
// activations the difference is the activation rounding: at most
// d_b / 2 * sum_i |w_i| per block, plus f32 accumulation.
//
// Types with a packed kernel (HasPackedKernel): Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4. A K-quant's
// 32-element sub-block is a block whose scale (d * sc) and bias (-dmin *
// m) are exact in f32 (Q6_K and Q3_K: two halves with scale d * sc each,
// Q3_K's levels q + 4 with offset o = 4; Q2_K: two halves with their own
// scale and bias, each bias taking its half's sum; IQ4_XS: d * (ls - 32));
// the packed tiles keep d, dmin, sc and m as the file does and form the
// products in registers. The lookup types keep their 4-bit indices and
// the kernel turns them into levels q = table value + 128 (offset o = 128)
// with one byte shuffle; MXFP4's scale is its E8M0 byte's E8M0Half, a
// power of two. The float types stay on the float kernel.
#ifndef FOLIO_OPS_PACKED_MATMUL_H_
#define FOLIO_OPS_PACKED_MATMUL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "folio/core/status.h"
#include "folio/core/thread_pool.h"
#include "folio/ops/matmul.h"
#include "folio/ops/weight_type.h"

namespace folio::ops {

// How a matmul treats the activations of a quantized weight matrix.
//   kF32: decode the weights to f32 and multiply exact f32 activations
//         (ops::MatMul; bit for bit the product with the dequantized matrix);
//   kQ8:  quantize activations to 8-bit blocks and use the packed integer
//         kernel for the types that have one (the float kernel for others).
enum class MatMulActivations : uint8_t { kF32, kQ8 };
std::string_view MatMulActivationsName(MatMulActivations a);
// "f32" or "q8"; anything else is InvalidArgument naming the choices.
Result<MatMulActivations> ParseMatMulActivations(std::string_view name);

bool HasPackedKernel(WeightType type);

// One 32-element block of a quantized activation row.
struct ActivationBlock {
  int8_t q[32];     // round(x / d), in [-127, 127]
  float d;          // max |x| / 127 (0 for an all-zero block; NaN or inf if x is)
  float e;          // d * float(sum)
  int32_t sum;      // sum of q
  int32_t sum_low;  // sum of q[0 .. 15] (for Q6_K's 16-element sub-blocks)
};
static_assert(sizeof(ActivationBlock) == 48);

// out[b] for the blocks of x (x.size() == 32 * out.size()). A block with a
// NaN or infinite element gets q = 0 and d = e = NaN, which makes every
// output it reaches NaN. Bits do not depend on the SIMD target.
void QuantizeActivations(std::span<const float> x, std::span<ActivationBlock> out);

class PackedMatrix {
 public:
  static constexpr size_t kTileRows = 8;
  static constexpr size_t kBlockCols = 32;

  // Repacks a validated view of a type with a packed kernel, tiles spread
  // over the pool when one is given. InvalidArgument for any other type or
  // a bad view.
  static Result<PackedMatrix> Pack(const WeightView& w, ThreadPool* pool = nullptr);

  WeightType type() const { return type_; }
  uint64_t rows() const { return rows_; }
  uint64_t cols() const { return cols_; }
  uint64_t num_tiles() const { return (rows_ + kTileRows - 1) / kTileRows; }
  uint64_t num_blocks() const { return cols_ / kBlockCols; }
  // Blocks are stored in groups of group_blocks() (8 for the K-quants, whose
  // super-block scales a group shares; else 1), tile_group_bytes() each.
  size_t group_blocks() const { return group_blocks_; }
  uint64_t num_groups() const { return num_blocks() / group_blocks_; }
  size_t tile_group_bytes() const { return tile_group_bytes_; }
  // Tiles are stored in pairs (2p, 2p + 1; an odd last tile is paired with
  // zero rows), field by field (ops/packed_layout.h), so that a kernel
  // walking two tiles at once reads memory in order. Pair p's group g:
  size_t group_stride() const { return 2 * tile_group_bytes_; }
  uint64_t pair_group_offset(uint64_t p, uint64_t g) const {
    return (p * num_groups() + g) * group_stride();
  }
  const std::byte* pair_group(uint64_t p, uint64_t g) const {
    return data_.get() + pair_group_offset(p, g);
  }
  size_t size_bytes() const { return size_bytes_; }
  // Row `row` as the f32 the packed levels, scales and biases give: equal to
  // DequantizeRow of the original row (a test checks it for every type).
  void WidenRow(uint64_t row, std::span<float> out) const;

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  WeightType type_ = WeightType::kQ8_0;
  uint64_t rows_ = 0, cols_ = 0;
  size_t group_blocks_ = 1, tile_group_bytes_ = 0, size_bytes_ = 0;
  std::unique_ptr<std::byte[], Free> data_;
};

// y[r, j] = the contract's chain for r < num_rows, j < w.rows() (x: [num_rows,
// w.cols()] f32, y: [num_rows, w.rows()] f32). Tiles of output rows are split
// over the pool's threads; any split gives the same bits. InvalidArgument on
// a size mismatch or overlapping x and y, before anything is written.
Status PackedMatMul(const PackedMatrix& w, std::span<const float> x, uint64_t num_rows,
                    std::span<float> y, ThreadPool* pool = nullptr);

// PackedMatMul for several matrices of the same width on one input (a
// layer's q/k/v projections, its gate and up): ys[i] = x times ws[i]
// transposed, each with the bits PackedMatMul gives it alone. x is
// quantized once for all, and every matrix's tiles run in one parallel
// loop. InvalidArgument, before anything is written, on a count or size
// mismatch, or an output overlapping x or another output.
Status PackedMatMuls(std::span<const PackedMatrix* const> ws, std::span<const float> x,
                     uint64_t num_rows, std::span<const std::span<float>> ys,
                     ThreadPool* pool = nullptr);

// The same chain, one output at a time in scalar code.
Status PackedMatMulReference(const PackedMatrix& w, std::span<const float> x, uint64_t num_rows,
                             std::span<float> y);

}  // namespace folio::ops

#endif  // FOLIO_OPS_PACKED_MATMUL_H_
