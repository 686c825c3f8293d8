// Packing, validation, threading and the scalar reference of the packed
// integer matmul; the SIMD kernel is in packed_matmul_kernel.cc.
#include "folio/ops/packed_matmul.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "folio/core/checked_math.h"
#include "folio/core/dtype.h"
#include "ops/block_layout.h"
#include "ops/matmul_internal.h"
#include "ops/packed_layout.h"

namespace folio::ops {
namespace {

using internal::PackedFormat;
using internal::PackedFormatOf;

std::string Str(uint64_t v) { return std::to_string(v); }

// The 32 levels, scale and bias of 32-element block g of a stored row, as
// the packed format of `type` holds them (packed_layout.h): for
// Q4_K and Q5_K, scale and bias are the super-block's d and dmin and
// sub_scale, sub_min the block's 6-bit sc and m; for Q6_K, scale is d and
// part_scale the two halves' 8-bit sc; for Q3_K, the same with the halves'
// 6-bit scales less 32; for Q2_K, scale and bias are d and dmin and
// part_sm the halves' scale bytes; for IQ4_XS, scale is d and
// part_scale[0] the block's scale less 32; MXFP4 has its E8M0 byte. The
// lookup types' levels are their 4-bit indices.
struct Group {
  uint8_t level[32];
  float scale = 0.0f;
  float bias = 0.0f;
  uint8_t sub_scale = 0, sub_min = 0;
  int8_t part_scale[2] = {0, 0};
  uint8_t part_sm[2] = {0, 0};
  uint8_t e8m0 = 0;
};

Group ReadGroup(WeightType type, const std::byte* row, uint64_t g) {
  Group out{};
  const auto byte = [](const std::byte* p, size_t i) { return std::to_integer<uint32_t>(p[i]); };
  // The legacy blocks: d, [m], [qh], qs[16] (weight_type.h).
  const auto legacy = [&](size_t block_bytes, bool has_min, bool five_bit) {
    const std::byte* b = row + g * block_bytes;
    out.scale = internal::PackedF16(b);
    if (has_min) out.bias = internal::PackedF16(b + 2);
    const size_t qh_at = has_min ? 4 : 2, qs_at = qh_at + (five_bit ? 4 : 0);
    uint32_t qh = 0;
    if (five_bit) std::memcpy(&qh, b + qh_at, 4);
    for (size_t j = 0; j < 32; ++j) {
      const uint32_t q = byte(b + qs_at, j % 16);
      uint32_t level = j < 16 ? q & 0x0f : q >> 4;
      if (five_bit) level |= ((qh >> j) & 1) << 4;
      out.level[j] = static_cast<uint8_t>(level);
    }
  };
  // Q4_K / Q5_K sub-block g % 8 of super-block g / 8.
  const auto k_quant = [&](bool five_bit) {
    const std::byte* b = row + (g / 8) * TraitsOf(type).block_bytes;
    const internal::KQuantFields at = internal::KQuantFieldsOf(type);
    const size_t sub = g % 8;
    uint32_t sc = 0, m = 0;
    internal::ScaleMinK4(sub, b + at.scales, sc, m);
    out.scale = internal::PackedF16(b + at.d);
    out.bias = internal::PackedF16(b + at.dmin);
    out.sub_scale = static_cast<uint8_t>(sc);
    out.sub_min = static_cast<uint8_t>(m);
    for (size_t l = 0; l < 32; ++l) {
      const uint32_t q = byte(b + at.low + 32 * (sub / 2), l);
      uint32_t level = sub % 2 == 0 ? q & 0x0f : q >> 4;
      if (five_bit) level |= ((byte(b + at.high, l) >> sub) & 1) << 4;
      out.level[l] = static_cast<uint8_t>(level);
    }
  };
  switch (type) {
    case WeightType::kQ8_0: {
      const std::byte* b = row + g * 34;
      out.scale = internal::PackedF16(b);
      for (size_t j = 0; j < 32; ++j) {
        out.level[j] = static_cast<uint8_t>(static_cast<int8_t>(byte(b + 2, j)) + 128);
      }
      break;
    }
    case WeightType::kQ4_0:
      legacy(18, false, false);
      break;
    case WeightType::kQ4_1:
      legacy(20, true, false);
      break;
    case WeightType::kQ5_0:
      legacy(22, false, true);
      break;
    case WeightType::kQ5_1:
      legacy(24, true, true);
      break;
    case WeightType::kQ4_K:
      k_quant(false);
      break;
    case WeightType::kQ5_K:
      k_quant(true);
      break;
    case WeightType::kQ6_K: {
      // Sub-block g % 8 = 4h + k of super-block g / 8 holds elements 128h +
      // 32k + l (weight_type.cc's DecodeQ6K): ql, qh, scales[16], d.
      const std::byte* b = row + (g / 8) * TraitsOf(type).block_bytes;
      const internal::KQuantFields at = internal::KQuantFieldsOf(type);
      const size_t h = g % 8 / 4, k = g % 4;
      out.scale = internal::PackedF16(b + at.d);
      for (size_t part = 0; part < 2; ++part) {
        out.part_scale[part] = static_cast<int8_t>(byte(b + at.scales, 8 * h + 2 * k + part));
      }
      for (size_t l = 0; l < 32; ++l) {
        const uint32_t ql = byte(b + at.low, 64 * h + 32 * (k % 2) + l);
        const uint32_t qh = byte(b + at.high, 32 * h + l);
        out.level[l] =
            static_cast<uint8_t>((k < 2 ? ql & 0x0f : ql >> 4) | ((qh >> (2 * k)) & 3) << 4);
      }
      break;
    }
    case WeightType::kIQ4_NL:  // d, qs[16]: Q4_0's layout
      legacy(18, false, false);
      break;
    case WeightType::kIQ4_XS: {
      // d, scales_h, scales_l[4], qs[128]; block g % 8 of super-block g / 8.
      const std::byte* b = row + (g / 8) * 136;
      const size_t sub = g % 8;
      out.scale = internal::PackedF16(b);
      const uint32_t scales_h = byte(b, 2) | byte(b, 3) << 8;
      out.part_scale[0] =
          static_cast<int8_t>(static_cast<int>(internal::ScaleIq4Xs(sub, scales_h, b + 4)) - 32);
      for (size_t j = 0; j < 32; ++j) {
        const uint32_t q = byte(b + 8 + 16 * sub, j % 16);
        out.level[j] = static_cast<uint8_t>(j < 16 ? q & 0x0f : q >> 4);
      }
      break;
    }
    case WeightType::kQ2_K:
    case WeightType::kQ3_K: {
      // Block g % 8 = 4n + k of super-block g / 8 holds sub-blocks 8n + 2k
      // + h (its parts h = 0, 1), element 16h + l taking bits 2k, 2k + 1
      // of qs[32n + 16h + l] (weight_type.cc's DecodeQ2Q3K). Q2_K: scales,
      // qs, d, dmin; Q3_K: hmask, qs, scales[12], d, and bit 4n + k of
      // hmask[16h + l] set means q, clear q - 4: the level is q + 4 * bit.
      const bool q3 = type == WeightType::kQ3_K;
      const std::byte* b = row + (g / 8) * TraitsOf(type).block_bytes;
      const internal::KQuantFields at = internal::KQuantFieldsOf(type);
      const size_t n = g % 8 / 4, k = g % 4;
      out.scale = internal::PackedF16(b + at.d);
      if (!q3) out.bias = internal::PackedF16(b + at.dmin);
      for (size_t h = 0; h < 2; ++h) {
        const size_t sub = 8 * n + 2 * k + h;
        if (q3) {
          out.part_scale[h] =
              static_cast<int8_t>(static_cast<int>(internal::ScaleQ3K(sub, b + at.scales)) - 32);
        } else {
          out.part_sm[h] = static_cast<uint8_t>(byte(b + at.scales, sub));
        }
        for (size_t l = 0; l < 16; ++l) {
          uint32_t level = (byte(b + at.low, 32 * n + 16 * h + l) >> (2 * k)) & 3;
          if (q3) level |= ((byte(b + at.high, 16 * h + l) >> (4 * n + k)) & 1) << 2;
          out.level[16 * h + l] = static_cast<uint8_t>(level);
        }
      }
      break;
    }
    case WeightType::kMXFP4: {  // e, qs[16]
      const std::byte* b = row + g * 17;
      out.e8m0 = static_cast<uint8_t>(byte(b, 0));
      for (size_t j = 0; j < 32; ++j) {
        const uint32_t q = byte(b + 1, j % 16);
        out.level[j] = static_cast<uint8_t>(j < 16 ? q & 0x0f : q >> 4);
      }
      break;
    }
    case WeightType::kF64:
    case WeightType::kF32:
    case WeightType::kF16:
    case WeightType::kBF16:
      FOLIO_CHECK(false, "no packed format for ", WeightTypeName(type));
  }
  return out;
}

// v as an f16: every value packed is read from an f16 field, so the
// conversion is exact (checked).
void WriteF16(float v, std::byte* p) {
  const uint16_t bits = F32ToF16Bits(v);
  FOLIO_CHECK(F16BitsToF32(bits) == v || (std::isnan(v) && std::isnan(F16BitsToF32(bits))),
              "scale ", v, " is not an f16");
  std::memcpy(p, &bits, 2);
}

// Block k of tile `half` of a pair group at pg, lane `lane`.
void WriteGroup(PackedFormat f, const Group& group, size_t k, size_t half, size_t lane,
                std::byte* pg) {
  if (f.scales == internal::PackedScales::kE8M0) {
    pg[internal::E8M0At(half, lane)] = std::byte{group.e8m0};
  } else {
    WriteF16(group.scale, pg + internal::ScaleAt(half, lane));
  }
  if (f.has_bias) WriteF16(group.bias, pg + internal::BiasAt(half, lane));
  if (f.scales == internal::PackedScales::kSuperBlock) {
    pg[internal::SubScaleAt(f, k, half, lane)] = std::byte{group.sub_scale};
    pg[internal::SubMinAt(f, k, half, lane)] = std::byte{group.sub_min};
  }
  if (f.scales == internal::PackedScales::kSuperHalves) {
    for (size_t part = 0; part < 2; ++part) {
      pg[internal::SubScaleAt(f, 2 * k + part, half, lane)] = std::byte{group.part_sm[part]};
    }
  }
  if (f.scales == internal::PackedScales::kHalfBlocks ||
      f.scales == internal::PackedScales::kSignedBlocks) {
    const size_t parts = internal::PartsOf(f);
    for (size_t part = 0; part < parts; ++part) {
      pg[internal::SubScaleAt(f, parts * k + part, half, lane)] =
          static_cast<std::byte>(group.part_scale[part]);
    }
  }
  for (size_t c = 0; c < 32; ++c) {
    const internal::SlotLayout slot = internal::SlotOf(f.bits, c / 4);
    for (int i = 0; i < slot.count; ++i) {
      const internal::LevelPiece piece = slot.piece[i];
      const uint32_t bits = uint32_t{group.level[c]} >> piece.dst & ((1u << piece.width) - 1);
      pg[internal::PlaneByteAt(f, k, half, piece.plane, lane, c)] |= std::byte(bits << piece.shift);
    }
  }
}

Status ValidateCall(const PackedMatrix& w, std::span<const float> x, uint64_t num_rows,
                    std::span<const float> y) {
  FOLIO_RETURN_IF_ERROR(
      internal::CheckActivationSizes(w.rows(), w.cols(), x.size(), num_rows, y.size()));
  if (internal::Overlap(x, y)) return Status::InvalidArgument("x and y overlap");
  return Status::Ok();
}

}  // namespace

namespace internal {

namespace {
struct CpuVnni {
  bool avx = false;     // AVX-VNNI: CPUID leaf 7, sub-leaf 1, EAX bit 4
  bool avx512 = false;  // AVX512-VNNI: leaf 7, sub-leaf 0, ECX bit 11
};
// (The OS's saving of the vector state is Highway's check before it
// dispatches to AVX2 or AVX3.)
CpuVnni ReadCpuVnni() {
  CpuVnni out;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0) out.avx512 = (ecx >> 11 & 1) != 0;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0) out.avx = (eax >> 4 & 1) != 0;
#endif
  return out;
}
const CpuVnni& Vnni() {
  static const CpuVnni vnni = ReadCpuVnni();
  return vnni;
}
std::atomic<bool> runtime_vnni_allowed{true};
}  // namespace

bool RuntimeVnni(bool avx512) {
  return (avx512 ? Vnni().avx512 : Vnni().avx) &&
         runtime_vnni_allowed.load(std::memory_order_relaxed);
}
void SetRuntimeVnniForTest(bool allow) {
  runtime_vnni_allowed.store(allow, std::memory_order_relaxed);
}
bool CpuHasRuntimeVnni() { return Vnni().avx || Vnni().avx512; }

// The scalar quantizer: the SIMD one (packed_matmul_kernel.cc) must give
// these bits.
void QuantizeActivationsScalar(const float* x, size_t num_blocks, ActivationBlock* out) {
  for (size_t b = 0; b < num_blocks; ++b) {
    const float* xb = x + 32 * b;
    ActivationBlock& a = out[b];
    float amax = 0.0f, poison = 0.0f;
    for (size_t i = 0; i < 32; ++i) {
      amax = std::max(amax, std::fabs(xb[i]));
      poison += xb[i] * 0.0f;
    }
    std::memset(a.q, 0, sizeof(a.q));
    a.sum = 0;
    a.sum_low = 0;
    if (poison != 0.0f) {  // NaN compares unequal too
      a.d = a.e = std::nanf("");
      continue;
    }
    if (amax < kMinActivationRange) {
      a.d = a.e = 0.0f;
      continue;
    }
    const float inverse = 127.0f / amax;
    int32_t sum = 0;
    for (size_t i = 0; i < 32; ++i) {
      const auto q = static_cast<int32_t>(std::nearbyint(xb[i] * inverse));
      a.q[i] = static_cast<int8_t>(std::clamp(q, -127, 127));
      sum += a.q[i];
    }
    a.d = amax / 127.0f;
    a.sum = sum;
    a.sum_low = SumLow(a);
    a.e = a.d * static_cast<float>(sum);
  }
}

}  // namespace internal

std::string_view MatMulActivationsName(MatMulActivations a) {
  switch (a) {
    case MatMulActivations::kF32:
      return "f32";
    case MatMulActivations::kQ8:
      return "q8";
  }
  return "unknown";
}

Result<MatMulActivations> ParseMatMulActivations(std::string_view name) {
  for (const MatMulActivations a : {MatMulActivations::kF32, MatMulActivations::kQ8}) {
    if (name == MatMulActivationsName(a)) return a;
  }
  return Status::InvalidArgument("matmul activations '" + std::string(name) +
                                 "' is not one of: f32, q8");
}

bool HasPackedKernel(WeightType type) { return PackedFormatOf(type).bits != 0; }

void QuantizeActivations(std::span<const float> x, std::span<ActivationBlock> out) {
  FOLIO_CHECK(x.size() == out.size() * PackedMatrix::kBlockCols, "x has ", x.size(), " floats for ",
              out.size(), " blocks");
  internal::QuantizeActivationsSimd(x.data(), out.size(), out.data());
}

void PackedMatrix::Free::operator()(std::byte* p) const { std::free(p); }

Result<PackedMatrix> PackedMatrix::Pack(const WeightView& w, ThreadPool* pool) {
  FOLIO_RETURN_IF_ERROR(ValidateWeightView(w));
  if (!HasPackedKernel(w.type)) {
    return Status::InvalidArgument(std::string(WeightTypeName(w.type)) +
                                   " weights have no packed integer kernel");
  }
  const PackedFormat f = PackedFormatOf(w.type);
  PackedMatrix m;
  m.type_ = w.type;
  m.rows_ = w.rows;
  m.cols_ = w.cols;
  m.group_blocks_ = f.group_blocks;
  m.tile_group_bytes_ = internal::TileGroupBytes(f);
  // K-quant rows are whole super-blocks (ValidateWeightView), so whole groups.
  FOLIO_CHECK(m.num_blocks() % f.group_blocks == 0, "cols ", w.cols, " are not whole groups");
  const auto bytes =
      CheckedProduct({(m.num_tiles() + 1) / 2 * 2, m.num_groups(), m.tile_group_bytes_});
  if (!bytes) {
    return Status::InvalidArgument("a packed " + Str(w.rows) + " x " + Str(w.cols) +
                                   " matrix overflows 64-bit byte sizes");
  }
  m.size_bytes_ = *bytes;
  // Cache-line aligned (tile blocks are not all multiples of 32 bytes, so
  // the kernel loads unaligned).
  const size_t alloc = std::max<size_t>(64, (m.size_bytes_ + 63) / 64 * 64);
  m.data_.reset(static_cast<std::byte*>(std::aligned_alloc(64, alloc)));
  if (m.data_ == nullptr) throw std::bad_alloc();
  std::memset(m.data_.get(), 0, alloc);
  const uint64_t row_bytes = WeightRowBytes(w.type, w.cols);
  const auto pack_rows = [&](uint64_t j0, uint64_t j1, uint64_t, uint64_t) {
    for (uint64_t j = j0; j < j1; ++j) {
      const std::byte* row = w.data + j * row_bytes;
      for (uint64_t b = 0; b < m.num_blocks(); ++b) {
        const uint64_t tile = j / kTileRows;
        WriteGroup(f, ReadGroup(w.type, row, b), b % f.group_blocks, tile % 2, j % kTileRows,
                   m.data_.get() + m.pair_group_offset(tile / 2, b / f.group_blocks));
      }
    }
  };
  // Tasks own whole tiles (PlanSplit's blocks are multiples of 8 rows), and
  // every byte of a pair group belongs to one tile, so no two threads write
  // one byte.
  internal::RunSplit(internal::PlanSplit(w.rows, 1, *bytes, pool), pool, pack_rows);
  return m;
}

void PackedMatrix::WidenRow(uint64_t row, std::span<float> out) const {
  FOLIO_CHECK(row < rows_ && out.size() == cols_, "row ", row, " of ", rows_);
  const PackedFormat f = PackedFormatOf(type_);
  const size_t lane = row % kTileRows;
  for (uint64_t b = 0; b < num_blocks(); ++b) {
    const internal::PackedBlock block = internal::PackedBlockAt(*this, row / kTileRows, b);
    for (size_t c = 0; c < kBlockCols; ++c) {
      const size_t part = c / internal::PartCols(f);
      const float scale = internal::PackedScale(f, block, lane, part);
      const auto level = static_cast<int32_t>(internal::PackedLevel(f, block, lane, c));
      out[b * kBlockCols + c] = f.has_bias ? scale * static_cast<float>(level) +
                                                 internal::PackedBias(f, block, lane, part)
                                           : scale * static_cast<float>(level - f.offset);
    }
  }
}

Status PackedMatMul(const PackedMatrix& w, std::span<const float> x, uint64_t num_rows,
                    std::span<float> y, ThreadPool* pool) {
  const PackedMatrix* const ws[] = {&w};
  const std::span<float> ys[] = {y};
  return PackedMatMuls(ws, x, num_rows, ys, pool);
}

Status PackedMatMuls(std::span<const PackedMatrix* const> ws, std::span<const float> x,
                     uint64_t num_rows, std::span<const std::span<float>> ys, ThreadPool* pool) {
  if (ws.size() != ys.size()) {
    return Status::InvalidArgument(Str(ws.size()) + " matrices for " + Str(ys.size()) + " outputs");
  }
  if (ws.empty()) return Status::Ok();
  for (size_t i = 0; i < ws.size(); ++i) {
    FOLIO_CHECK(ws[i] != nullptr);
    if (ws[i]->cols() != ws[0]->cols()) {
      return Status::InvalidArgument("matrix " + Str(i) + " has " + Str(ws[i]->cols()) +
                                     " columns, matrix 0 " + Str(ws[0]->cols()));
    }
    FOLIO_RETURN_IF_ERROR(ValidateCall(*ws[i], x, num_rows, ys[i]));
    for (size_t j = 0; j < i; ++j) {
      if (internal::Overlap(ys[i], ys[j])) {
        return Status::InvalidArgument("outputs " + Str(j) + " and " + Str(i) + " overlap");
      }
    }
  }
  if (num_rows == 0) return Status::Ok();
  // The activations, quantized once for every tile of every matrix (in
  // parallel when there are many rows). The caller's buffer is kept between
  // calls; the tasks (on other threads too) reach it through `act`, not by
  // its name.
  thread_local std::vector<ActivationBlock> buffer;
  const uint64_t cols = ws[0]->cols(), blocks = ws[0]->num_blocks();
  buffer.resize(num_rows * blocks);
  ActivationBlock* const act = buffer.data();
  internal::RunSplit(internal::PlanSplit(num_rows, 1, num_rows * cols, pool), pool,
                     [&](uint64_t r0, uint64_t r1, uint64_t, uint64_t) {
                       internal::QuantizeActivationsSimd(x.data() + r0 * cols, (r1 - r0) * blocks,
                                                         act + r0 * blocks);
                     });
  // Each matrix split as it would be alone; the tasks of all of them in one
  // loop (task t of the loop is task t - first[i] of matrix i). Kept per
  // thread like `buffer` (no allocation per call on the decode path) and,
  // like it, reached by the tasks through spans, not by name.
  thread_local std::vector<internal::Split> split_buffer;
  thread_local std::vector<uint64_t> first_buffer;
  split_buffer.clear();
  first_buffer.assign(1, 0);
  for (const PackedMatrix* w : ws) {
    if (w->rows() == 0) {  // no outputs, no tasks
      split_buffer.emplace_back();
      first_buffer.push_back(first_buffer.back());
      continue;
    }
    const uint64_t macs = CheckedProduct({w->rows(), cols, num_rows}).value_or(UINT64_MAX);
    split_buffer.push_back(internal::PlanSplit(w->rows(), num_rows, macs, pool));
    first_buffer.push_back(first_buffer.back() + split_buffer.back().num_tasks());
  }
  const std::span<const internal::Split> splits = split_buffer;
  const std::span<const uint64_t> first = first_buffer;
  const auto run = [&](size_t t) {
    const size_t i =
        static_cast<size_t>(std::upper_bound(first.begin(), first.end(), t) - first.begin()) - 1;
    const PackedMatrix& w = *ws[i];
    const internal::SplitTask task = internal::TaskOf(splits[i], t - first[i]);
    const uint64_t tile_end = CeilDiv(task.out_end, PackedMatrix::kTileRows);
    internal::PackedRows({&w, act + task.row_begin * blocks, task.num_rows,
                          ys[i].data() + task.row_begin * w.rows(), w.rows(),
                          task.out_begin / PackedMatrix::kTileRows, tile_end,
                          w.pair_group(CeilDiv(tile_end, 2), 0)});
  };
  if (pool == nullptr || first.back() <= 1) {
    for (uint64_t t = 0; t < first.back(); ++t) run(t);
  } else {
    pool->ParallelFor(first.back(), run);
  }
  return Status::Ok();
}

Status PackedMatMulReference(const PackedMatrix& w, std::span<const float> x, uint64_t num_rows,
                             std::span<float> y) {
  FOLIO_RETURN_IF_ERROR(ValidateCall(w, x, num_rows, y));
  std::vector<ActivationBlock> act(w.num_blocks());
  for (uint64_t r = 0; r < num_rows; ++r) {
    internal::QuantizeActivationsScalar(x.data() + r * w.cols(), act.size(), act.data());
    for (uint64_t j = 0; j < w.rows(); ++j) {
      y[r * w.rows() + j] = internal::PackedDot(w, j / PackedMatrix::kTileRows,
                                                j % PackedMatrix::kTileRows, act.data());
    }
  }
  return Status::Ok();
}

}  // namespace folio::ops
