// The two host backends: one class for what they share (host memory, the
// element-wise ops, the K/V pool), one subclass each for the kernels.
#include "folio/backend/backend.h"

#include <memory>
#include <string>
#include <utility>

#include "folio/core/check.h"
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

namespace {

// Host memory and the element-wise ops, which have one (scalar) version.
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
    for (size_t off = 0; off < x.size(); off += width) {
      ops::RmsNorm<float>(x.subspan(off, width), gain, eps, out.subspan(off, width));
    }
  }
  void Rope(std::span<float> x, uint64_t rows, uint64_t head_dim, std::span<const float> cos,
            std::span<const float> sin, bool neox) override {
    const uint64_t half = head_dim / 2;
    FOLIO_CHECK(rows > 0 && x.size() % rows == 0 && cos.size() == rows * half &&
                sin.size() == rows * half);
    const uint64_t width = x.size() / rows;
    for (uint64_t r = 0; r < rows; ++r) {
      ops::Rope<float>(x.subspan(r * width, width), head_dim, cos.subspan(r * half, half),
                       sin.subspan(r * half, half), neox);
    }
  }
  void SwiGlu(std::span<float> gate, std::span<const float> up) override {
    ops::SwiGlu<float>(gate, up);
  }
  Result<kv::PagedKvCache> CreateKvPool(const kv::PagedKvCacheConfig& config) override {
    return kv::PagedKvCache::Create(config);
  }
  Status WriteKv(kv::PagedKvCache& cache, uint64_t layer, std::span<const int64_t> slot_mapping,
                 std::span<const float> keys, std::span<const float> values) override {
    return cache.WriteRows(layer, slot_mapping, keys, values);
  }

 protected:
  ThreadPool* pool_;

 private:
  ops::MatMulActivations activations_;
};

// The scalar attention plan, shared by the reference backend and the cpu
// backend's f64 K/V (which the SIMD kernel does not read).
struct ReferencePlan final : AttentionPlan {
  ReferencePlan(const attention::PagedAttentionParams& p, const kv::PagedBatchView& b)
      : params(p), batch(b) {}
  Status Run(std::span<const float> query, const kv::PagedKvView& kv,
             std::span<float> out) const override {
    return attention::PagedAttentionReference(params, query, kv, batch, out);
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
  return std::unique_ptr<AttentionPlan>(new ReferencePlan(params, batch));
}

class CpuBackend final : public HostBackend {
 public:
  CpuBackend(ThreadPool* pool, ops::MatMulActivations activations)
      : HostBackend(pool, activations) {}
  BackendKind kind() const override { return BackendKind::kCpu; }
  Status MatMul(const Weight& w, std::span<const float> x, uint64_t rows,
                std::span<float> y) override {
    if (w.packed) return ops::PackedMatMul(*w.packed, x, rows, y, pool_);
    return ops::MatMul(w.host, x, rows, y, pool_);
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
    Status Run(std::span<const float> query, const kv::PagedKvView& kv,
               std::span<float> out) const override {
      return plan.Run(query, kv, out, pool);
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
