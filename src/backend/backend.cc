// The two host backends: one class for what they share (host memory, the
// element-wise ops, the K/V pool), one subclass each for the kernels.
#include "folio/backend/backend.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "folio/core/check.h"
#include "folio/core/checked_math.h"
#include "folio/core/thread_pool.h"
#include "folio/ops/elementwise.h"
#include "folio/ops/ops.h"

namespace folio::backend {

std::string_view BackendName(BackendKind kind) {
  switch (kind) {
    case BackendKind::kCpu:
      return "cpu";
    case BackendKind::kReference:
      return "reference";
  }
  return "unknown";
}

Result<BackendKind> ParseBackendKind(std::string_view name) {
  for (const BackendKind k : {BackendKind::kCpu, BackendKind::kReference}) {
    if (name == BackendName(k)) return k;
  }
  return Status::InvalidArgument("backend '" + std::string(name) +
                                 "' is not one of: cpu, reference");
}

Status Backend::MatMuls(std::span<const Weight* const> ws, std::span<const float> x, uint64_t rows,
                        std::span<const std::span<float>> ys) {
  if (ws.size() != ys.size()) {
    return Status::InvalidArgument(std::to_string(ws.size()) + " weights for " +
                                   std::to_string(ys.size()) + " outputs");
  }
  for (size_t i = 0; i < ws.size(); ++i) FOLIO_RETURN_IF_ERROR(MatMul(*ws[i], x, rows, ys[i]));
  return Status::Ok();
}

namespace {

// Host memory and the element-wise ops in their scalar forms (the cpu
// backend swaps in SIMD ones), spread over the pool by rows when a step has
// many.
class HostBackend : public Backend {
 public:
  // pool (optional) spreads the kernels and Upload's packing.
  HostBackend(ThreadPool* pool, ops::MatMulActivations activations)
      : pool_(pool), activations_(activations) {}
  Result<Weight> Upload(const ops::WeightView& w) override {
    FOLIO_RETURN_IF_ERROR(ops::ValidateWeightView(w));
    Weight weight{w, nullptr};
    if (activations_ == ops::MatMulActivations::kQ8 && ops::HasPackedKernel(w.type)) {
      FOLIO_ASSIGN_OR_RETURN(ops::PackedMatrix packed, ops::PackedMatrix::Pack(w, pool_));
      weight.packed = std::make_shared<const ops::PackedMatrix>(std::move(packed));
    }
    return weight;
  }
  void Embed(const Weight& w, std::span<const int32_t> ids, std::span<float> out) override {
    const uint64_t cols = w.host.cols;
    FOLIO_CHECK(out.size() == ids.size() * cols);
    for (size_t r = 0; r < ids.size(); ++r) {
      FOLIO_CHECK(ids[r] >= 0 && static_cast<uint64_t>(ids[r]) < w.host.rows, "id ", ids[r]);
      ops::WidenRow(w.host, static_cast<uint64_t>(ids[r]), out.subspan(r * cols, cols));
    }
  }
  void RmsNorm(std::span<const float> x, std::span<const float> gain, float eps,
               std::span<float> out) override {
    const size_t width = gain.size();
    FOLIO_CHECK(width > 0 && x.size() % width == 0 && out.size() == x.size());
    ForRowRanges(x.size() / width, width, [&](size_t r0, size_t r1) {
      for (size_t off = r0 * width; off < r1 * width; off += width) {
        ops::RmsNorm<float>(x.subspan(off, width), gain, eps, out.subspan(off, width));
      }
    });
  }
  void LayerNorm(std::span<const float> x, std::span<const float> gain, std::span<const float> bias,
                 float eps, std::span<float> out) override {
    const size_t width = gain.size();
    FOLIO_CHECK(width > 0 && bias.size() == width && x.size() % width == 0 &&
                out.size() == x.size());
    ForRowRanges(x.size() / width, width, [&](size_t r0, size_t r1) {
      for (size_t off = r0 * width; off < r1 * width; off += width) {
        ops::LayerNorm<float>(x.subspan(off, width), gain, bias, eps, out.subspan(off, width));
      }
    });
  }
  void Gelu(std::span<float> x, bool tanh_form) override {
    constexpr size_t kPart = 1024;  // elements
    ForRowRanges(CeilDiv(x.size(), kPart), kPart, [&](size_t r0, size_t r1) {
      for (size_t i = r0 * kPart; i < std::min(r1 * kPart, x.size()); ++i) {
        x[i] = tanh_form ? ops::GeluTanh(x[i]) : ops::Gelu(x[i]);
      }
    });
  }
  void Rope(std::span<float> x, uint64_t rows, uint64_t head_dim, std::span<const float> cos,
            std::span<const float> sin, bool neox) override {
    FOLIO_CHECK(rows > 0 && x.size() % rows == 0 && cos.size() % rows == 0 &&
                sin.size() == cos.size());
    const uint64_t half = cos.size() / rows;  // rotated pairs per head (partial: < head_dim / 2)
    FOLIO_CHECK(2 * half <= head_dim);
    const uint64_t width = x.size() / rows;
    ForRowRanges(rows, width, [&](size_t r0, size_t r1) {
      for (uint64_t r = r0; r < r1; ++r) {
        ops::Rope<float>(x.subspan(r * width, width), head_dim, cos.subspan(r * half, half),
                         sin.subspan(r * half, half), neox);
      }
    });
  }
  void SwiGlu(std::span<float> gate, std::span<const float> up) override {
    ForSpans(gate, up, ops::SwiGlu<float>);
  }
  void GeGlu(std::span<float> gate, std::span<const float> up) override {
    ForSpans(gate, up, ops::GeGlu<float>);
  }
  void SwiGluClamped(std::span<float> gate, std::span<const float> up, float alpha,
                     float limit) override {
    FOLIO_CHECK(gate.size() == up.size());
    for (size_t i = 0; i < gate.size(); ++i) {
      const float g = std::fmin(gate[i], limit);
      const float u = std::fmax(std::fmin(up[i], limit), -limit);
      const float sigmoid = 1.0f / (1.0f + std::exp(-(g * alpha)));
      gate[i] = (u + 1.0f) * (g * sigmoid);
    }
  }
  Result<kv::PagedKvCache> CreateKvPool(const kv::PagedKvCacheConfig& config) override {
    return kv::PagedKvCache::Create(config);
  }
  Status WriteKv(kv::PagedKvCache& cache, uint64_t layer, std::span<const int64_t> slot_mapping,
                 std::span<const float> keys, std::span<const float> values) override {
    return cache.WriteRows(layer, slot_mapping, keys, values);
  }

 protected:
  // Runs fn(r0, r1) over row ranges covering [0, rows): on the pool when
  // the rows hold enough elements to pay for a parallel loop (a prefill),
  // on the caller otherwise (a decode step). Every row is computed the same
  // way wherever it runs, so the split never changes a bit.
  template <typename Fn>
  void ForRowRanges(size_t rows, size_t row_elements, Fn&& fn) {
    constexpr size_t kMinParallelElements = size_t{1} << 15;
    const size_t threads = pool_ == nullptr ? 1 : pool_->num_threads();
    if (threads == 1 || rows < 2 || rows * row_elements < kMinParallelElements) {
      fn(size_t{0}, rows);
      return;
    }
    const size_t per_task = CeilDiv(rows, std::min(rows, threads * 4));
    pool_->ParallelFor(CeilDiv(rows, per_task),
                       [&](size_t i) { fn(i * per_task, std::min(rows, (i + 1) * per_task)); });
  }
  // fn(gate part, up part) over aligned parts of the two spans, spread as
  // ForRowRanges spreads rows.
  template <typename Fn>
  void ForSpans(std::span<float> gate, std::span<const float> up, Fn&& fn) {
    FOLIO_CHECK(gate.size() == up.size());
    constexpr size_t kPart = 1024;  // elements
    ForRowRanges(CeilDiv(gate.size(), kPart), kPart, [&](size_t r0, size_t r1) {
      const size_t begin = r0 * kPart, end = std::min(r1 * kPart, gate.size());
      fn(gate.subspan(begin, end - begin), up.subspan(begin, end - begin));
    });
  }

  ThreadPool* pool_;

 private:
  ops::MatMulActivations activations_;
};

// The scalar attention plan, shared by the reference backend and the cpu
// backend's f64 K/V (which the SIMD kernel does not read).
struct ReferencePlan final : AttentionPlan {
  ReferencePlan(const attention::PagedAttentionParams& p, const kv::PagedBatchView& b)
      : params(p), batch(b) {}
  Status Run(std::span<const float> query, const kv::PagedKvView& kv, std::span<float> out,
             std::span<const float> sinks) const override {
    attention::PagedAttentionParams p = params;
    p.sinks = sinks;
    return attention::PagedAttentionReference(p, query, kv, batch, out);
  }
  attention::PagedAttentionParams params;
  kv::PagedBatchView batch;
};

Result<std::unique_ptr<AttentionPlan>> PlanReference(const attention::PagedAttentionParams& params,
                                                     std::span<const float> query,
                                                     std::span<float> out,
                                                     const kv::PagedKvView& kv,
                                                     const kv::PagedBatchView& batch) {
  FOLIO_RETURN_IF_ERROR(
      attention::ValidatePagedAttention(params, query.size(), out.size(), kv, batch));
  auto plan = std::make_unique<ReferencePlan>(params, batch);
  plan->params.sinks = {};  // each Run brings its layer's
  return std::unique_ptr<AttentionPlan>(std::move(plan));
}

class CpuBackend final : public HostBackend {
 public:
  CpuBackend(ThreadPool* pool, ops::MatMulActivations activations)
      : HostBackend(pool, activations) {}
  BackendKind kind() const override { return BackendKind::kCpu; }
  void SwiGlu(std::span<float> gate, std::span<const float> up) override {
    ForSpans(gate, up, ops::SwiGluSimd);
  }
  void GeGlu(std::span<float> gate, std::span<const float> up) override {
    ForSpans(gate, up, ops::GeGluSimd);
  }
  Status MatMul(const Weight& w, std::span<const float> x, uint64_t rows,
                std::span<float> y) override {
    if (w.packed) return ops::PackedMatMul(*w.packed, x, rows, y, pool_);
    return ops::MatMul(w.host, x, rows, y, pool_);
  }
  Status MatMuls(std::span<const Weight* const> ws, std::span<const float> x, uint64_t rows,
                 std::span<const std::span<float>> ys) override {
    thread_local std::vector<const ops::PackedMatrix*> packed;  // no allocation per call
    packed.clear();
    for (const Weight* w : ws) {
      if (!w->packed) return Backend::MatMuls(ws, x, rows, ys);
      packed.push_back(w->packed.get());
    }
    return ops::PackedMatMuls(packed, x, rows, ys, pool_);
  }
  Result<std::unique_ptr<AttentionPlan>> PlanAttention(
      const attention::PagedAttentionParams& params, std::span<const float> query,
      std::span<float> out, const kv::PagedKvView& kv, const kv::PagedBatchView& batch) override {
    if (kv.dtype == DType::kF64) return PlanReference(params, query, out, kv, batch);
    FOLIO_ASSIGN_OR_RETURN(attention::PagedAttentionPlan plan,
                           attention::PagedAttentionPlan::Create(params, query, out, kv, batch,
                                                                 pool_ ? pool_->num_threads() : 1));
    return std::unique_ptr<AttentionPlan>(new Plan(std::move(plan), pool_));
  }

 private:
  struct Plan final : AttentionPlan {
    Plan(attention::PagedAttentionPlan p, ThreadPool* threads)
        : plan(std::move(p)), pool(threads) {}
    Status Run(std::span<const float> query, const kv::PagedKvView& kv, std::span<float> out,
               std::span<const float> sinks) const override {
      return plan.Run(query, kv, out, pool, sinks);
    }
    attention::PagedAttentionPlan plan;
    ThreadPool* pool;
  };
};

// The scalar references: MatMulReference accumulates each output in double
// in index order (PackedMatMulReference runs the packed kernel's scalar
// chain); PagedAttentionReference is a two-pass softmax in double per row.
// One thread.
class ReferenceBackend final : public HostBackend {
 public:
  explicit ReferenceBackend(ops::MatMulActivations activations)
      : HostBackend(nullptr, activations) {}
  BackendKind kind() const override { return BackendKind::kReference; }
  Status MatMul(const Weight& w, std::span<const float> x, uint64_t rows,
                std::span<float> y) override {
    if (w.packed) return ops::PackedMatMulReference(*w.packed, x, rows, y);
    return ops::MatMulReference(w.host, x, rows, y);
  }
  Result<std::unique_ptr<AttentionPlan>> PlanAttention(
      const attention::PagedAttentionParams& params, std::span<const float> query,
      std::span<float> out, const kv::PagedKvView& kv, const kv::PagedBatchView& batch) override {
    return PlanReference(params, query, out, kv, batch);
  }
};

}  // namespace

std::unique_ptr<Backend> MakeBackend(BackendKind kind, ThreadPool* pool,
                                     ops::MatMulActivations activations) {
  switch (kind) {
    case BackendKind::kCpu:
      return std::make_unique<CpuBackend>(pool, activations);
    case BackendKind::kReference:
      return std::make_unique<ReferenceBackend>(activations);
  }
  FOLIO_CHECK(false, "unknown backend kind ", static_cast<int>(kind));
  return nullptr;
}

}  // namespace folio::backend
