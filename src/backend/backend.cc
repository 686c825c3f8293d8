// The two host backends: one class for what they share (host memory, the
// element-wise ops, the K/V pool), one subclass each for the kernels.
#include "folio/backend/backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "folio/core/check.h"
#include "folio/core/checked_math.h"
#include "folio/core/thread_pool.h"
#include "folio/kv/host_kv_storage.h"
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

Transfers Backend::transfers() const {
  Transfers t;
  t.writes = writes_.load(std::memory_order_relaxed);
  t.write_bytes = write_bytes_.load(std::memory_order_relaxed);
  t.reads = reads_.load(std::memory_order_relaxed);
  t.read_bytes = read_bytes_.load(std::memory_order_relaxed);
  t.host_views = host_views_.load(std::memory_order_relaxed);
  return t;
}

Status Backend::MatMuls(std::span<const Weight* const> ws, DeviceSpan<const float> x, uint64_t rows,
                        std::span<const DeviceSpan<float>> ys) {
  if (ws.size() != ys.size()) {
    return Status::InvalidArgument(std::to_string(ws.size()) + " weights for " +
                                   std::to_string(ys.size()) + " outputs");
  }
  for (size_t i = 0; i < ws.size(); ++i) FOLIO_RETURN_IF_ERROR(MatMul(*ws[i], x, rows, ys[i]));
  return Status::Ok();
}

Result<kv::PagedKvCache> Backend::CreateKvPool(const kv::PagedKvCacheConfig& config) {
  FOLIO_RETURN_IF_ERROR(kv::PagedKvCache::ValidateConfig(config));
  FOLIO_ASSIGN_OR_RETURN(std::unique_ptr<kv::KvStorage> storage, CreateKvStorage(config));
  return kv::PagedKvCache::Create(config, std::move(storage));
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
  bool host_memory() const override { return true; }
  // A buffer of a host backend in place, for this file's attention plans.
  template <typename T>
  static std::span<T> InPlace(DeviceSpan<T> s) {
    return Host(s);
  }
  Result<Weight> Upload(const ops::WeightView& w) override {
    FOLIO_RETURN_IF_ERROR(ops::ValidateWeightView(w));
    Weight weight{w, nullptr};
    if (activations_ == ops::MatMulActivations::kQ8 && ops::HasPackedKernel(w.type)) {
      FOLIO_ASSIGN_OR_RETURN(ops::PackedMatrix packed, ops::PackedMatrix::Pack(w, pool_));
      weight.packed = std::make_shared<const ops::PackedMatrix>(std::move(packed));
    }
    return weight;
  }
  void Embed(const Weight& w, DeviceSpan<const int32_t> ids_buffer,
             DeviceSpan<float> out_buffer) override {
    const std::span<const int32_t> ids = Host(ids_buffer);
    const std::span<float> out = Host(out_buffer);
    const uint64_t cols = w.host.cols;
    FOLIO_CHECK(out.size() == ids.size() * cols);
    for (size_t r = 0; r < ids.size(); ++r) {
      FOLIO_CHECK(ids[r] >= 0 && static_cast<uint64_t>(ids[r]) < w.host.rows, "id ", ids[r]);
      ops::WidenRow(w.host, static_cast<uint64_t>(ids[r]), out.subspan(r * cols, cols));
    }
  }
  void RmsNorm(DeviceSpan<const float> x_buffer, DeviceSpan<const float> gain_buffer, float eps,
               DeviceSpan<float> out_buffer) override {
    const std::span<const float> x = Host(x_buffer), gain = Host(gain_buffer);
    const std::span<float> out = Host(out_buffer);
    const size_t width = gain.size();
    FOLIO_CHECK(width > 0 && x.size() % width == 0 && out.size() == x.size());
    ForRowRanges(x.size() / width, width, [&](size_t r0, size_t r1) {
      for (size_t off = r0 * width; off < r1 * width; off += width) {
        ops::RmsNorm<float>(x.subspan(off, width), gain, eps, out.subspan(off, width));
      }
    });
  }
  void LayerNorm(DeviceSpan<const float> x_buffer, DeviceSpan<const float> gain_buffer,
                 DeviceSpan<const float> bias_buffer, float eps,
                 DeviceSpan<float> out_buffer) override {
    const std::span<const float> x = Host(x_buffer), gain = Host(gain_buffer),
                                 bias = Host(bias_buffer);
    const std::span<float> out = Host(out_buffer);
    const size_t width = gain.size();
    FOLIO_CHECK(width > 0 && bias.size() == width && x.size() % width == 0 &&
                out.size() == x.size());
    ForRowRanges(x.size() / width, width, [&](size_t r0, size_t r1) {
      for (size_t off = r0 * width; off < r1 * width; off += width) {
        ops::LayerNorm<float>(x.subspan(off, width), gain, bias, eps, out.subspan(off, width));
      }
    });
  }
  void Gelu(DeviceSpan<float> x, bool tanh_form) override {
    ForElements(Host(x),
                [tanh_form](float& v) { v = tanh_form ? ops::GeluTanh(v) : ops::Gelu(v); });
  }
  void Rope(DeviceSpan<float> x_buffer, uint64_t rows, uint64_t head_dim,
            DeviceSpan<const float> cos_buffer, DeviceSpan<const float> sin_buffer,
            bool neox) override {
    const std::span<float> x = Host(x_buffer);
    const std::span<const float> cos = Host(cos_buffer), sin = Host(sin_buffer);
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
  void SwiGlu(DeviceSpan<float> gate, DeviceSpan<const float> up) override {
    ForSpans(Host(gate), Host(up), ops::SwiGlu<float>);
  }
  void GeGlu(DeviceSpan<float> gate, DeviceSpan<const float> up) override {
    ForSpans(Host(gate), Host(up), ops::GeGlu<float>);
  }
  void SwiGluClamped(DeviceSpan<float> gate_buffer, DeviceSpan<const float> up_buffer, float alpha,
                     float limit) override {
    const std::span<float> gate = Host(gate_buffer);
    const std::span<const float> up = Host(up_buffer);
    FOLIO_CHECK(gate.size() == up.size());
    for (size_t i = 0; i < gate.size(); ++i) {
      const float g = std::fmin(gate[i], limit);
      const float u = std::fmax(std::fmin(up[i], limit), -limit);
      const float sigmoid = 1.0f / (1.0f + std::exp(-(g * alpha)));
      gate[i] = (u + 1.0f) * (g * sigmoid);
    }
  }
  void Add(DeviceSpan<float> x_buffer, DeviceSpan<const float> y_buffer) override {
    const std::span<float> x = Host(x_buffer);
    const std::span<const float> y = Host(y_buffer);
    FOLIO_CHECK(x.size() == y.size(), x.size(), " += ", y.size(), " elements");
    for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  }
  void AddBias(DeviceSpan<float> y_buffer, DeviceSpan<const float> bias_buffer) override {
    const std::span<float> y = Host(y_buffer);
    const std::span<const float> bias = Host(bias_buffer);
    FOLIO_CHECK(!bias.empty() && y.size() % bias.size() == 0, "rows of ", y.size(),
                " elements += a bias of ", bias.size());
    for (size_t off = 0; off < y.size(); off += bias.size()) {
      for (size_t i = 0; i < bias.size(); ++i) y[off + i] += bias[i];
    }
  }
  void Scale(DeviceSpan<float> x, float s) override {
    ForElements(Host(x), [s](float& v) { v *= s; });
  }
  void SoftCap(DeviceSpan<float> x, float cap) override {
    ForElements(Host(x), [cap](float& v) { v = std::tanh(v / cap) * cap; });
  }
  void Sigmoid(DeviceSpan<float> x) override {
    ForElements(Host(x), [](float& v) { v = 1.0f / (1.0f + std::exp(-v)); });
  }
  void AddScaledRows(DeviceSpan<float> out_buffer, DeviceSpan<const float> y_buffer,
                     DeviceSpan<const float> scales_buffer) override {
    const std::span<float> out = Host(out_buffer);
    const std::span<const float> y = Host(y_buffer), scales = Host(scales_buffer);
    FOLIO_CHECK(!scales.empty() && out.size() == y.size() && out.size() % scales.size() == 0);
    const size_t width = out.size() / scales.size();
    for (size_t r = 0; r < scales.size(); ++r) {
      for (size_t i = r * width; i < (r + 1) * width; ++i) out[i] += scales[r] * y[i];
    }
  }
  void Fill(DeviceSpan<float> x, float value) override {
    const std::span<float> h = Host(x);
    std::fill(h.begin(), h.end(), value);
  }
  void GatherRows(DeviceSpan<const float> src_buffer, DeviceSpan<const int32_t> idx_buffer,
                  DeviceSpan<float> dst_buffer) override {
    MoveRows(Host(src_buffer), Host(idx_buffer), Host(dst_buffer), /*gather=*/true);
  }
  void ScatterRows(DeviceSpan<const float> src_buffer, DeviceSpan<const int32_t> idx_buffer,
                   DeviceSpan<float> dst_buffer) override {
    MoveRows(Host(src_buffer), Host(idx_buffer), Host(dst_buffer), /*gather=*/false);
  }
  // The host's routing reads the logits in place; every other step runs
  // through this backend's own ops, as a device backend's would.
  Status Experts(const Mixture& m, DeviceSpan<const float> logits_buffer, DeviceSpan<const float> h,
                 uint64_t rows, DeviceSpan<float> out) override {
    const uint64_t n_exp = m.router.num_experts, k = m.router.experts_per_token;
    FOLIO_CHECK(m.experts.size() == n_exp && n_exp > 0 && rows * k <= INT32_MAX);
    const uint64_t d = m.experts[0].down->host.rows, f = m.experts[0].gate->host.rows;
    const std::span<const float> logits = Host(logits_buffer);
    FOLIO_CHECK(logits.size() == rows * n_exp && h.size() == rows * d && out.size() == rows * d);
    // weight [k, rows]: slot s of row r's expert weight, slot-major so that
    // each slot's weights are one run for AddScaledRows.
    const DeviceBuffer<float> weight_buffer = Allocate<float>(k * rows);
    const std::span<float> weight = Host(weight_buffer.span());
    std::vector<float> row_weights(k);
    std::vector<uint32_t> chosen(k);
    std::vector<std::vector<std::pair<uint32_t, uint32_t>>> routed(n_exp);  // (row, slot)
    ops::RouterScratch scratch;
    for (uint64_t r = 0; r < rows; ++r) {
      ops::RouteRow(m.router, logits.subspan(r * n_exp, n_exp), Host(m.selection_bias), scratch,
                    chosen, row_weights);
      for (uint64_t s = 0; s < k; ++s) {
        weight[s * rows + r] = row_weights[s];
        routed[chosen[s]].emplace_back(static_cast<uint32_t>(r), static_cast<uint32_t>(s));
      }
    }
    // idx [2, rows * k]: each expert's rows in turn (gathered as its
    // input), then where each of its outputs goes in ys (slot * rows + row).
    const DeviceBuffer<int32_t> idx_buffer = Allocate<int32_t>(2 * rows * k);
    const std::span<int32_t> idx = Host(idx_buffer.span());
    std::vector<uint64_t> first(n_exp + 1, 0);
    for (uint64_t e = 0; e < n_exp; ++e) {
      first[e + 1] = first[e] + routed[e].size();
      for (uint64_t i = 0; i < routed[e].size(); ++i) {
        const auto [r, s] = routed[e][i];
        idx[first[e] + i] = static_cast<int32_t>(r);
        idx[rows * k + first[e] + i] = static_cast<int32_t>(s * rows + r);
      }
    }
    const DeviceBuffer<float> ys = Allocate<float>(k * rows * d);  // [k, rows, hidden]
    // An expert sees at most every row once.
    const DeviceBuffer<float> xe = Allocate<float>(rows * d), ye = Allocate<float>(rows * d);
    const DeviceBuffer<float> ge = Allocate<float>(rows * f), ue = Allocate<float>(rows * f);
    for (uint64_t e = 0; e < n_exp; ++e) {
      const uint64_t n = routed[e].size();
      if (n == 0) continue;
      const Expert& ex = m.experts[e];
      const DeviceSpan<float> x_e = xe.span().first(n * d), y_e = ye.span().first(n * d);
      const DeviceSpan<float> g_e = ge.span().first(n * f), u_e = ue.span().first(n * f);
      GatherRows(h, idx_buffer.span().subspan(first[e], n), x_e);
      const Weight* gate_up[] = {ex.gate, ex.up};
      const DeviceSpan<float> gu[] = {g_e, u_e};
      FOLIO_RETURN_IF_ERROR(MatMuls(gate_up, x_e, n, gu));
      if (!ex.gate_bias.empty()) AddBias(g_e, ex.gate_bias);
      if (!ex.up_bias.empty()) AddBias(u_e, ex.up_bias);
      if (m.swiglu_limit != 0) {
        SwiGluClamped(g_e, u_e, m.swiglu_alpha, m.swiglu_limit);
      } else {
        SwiGlu(g_e, u_e);
      }
      FOLIO_RETURN_IF_ERROR(MatMul(*ex.down, g_e, n, y_e));
      if (!ex.down_bias.empty()) AddBias(y_e, ex.down_bias);
      ScatterRows(y_e, idx_buffer.span().subspan(rows * k + first[e], n), ys);
    }
    Fill(out, 0.0f);
    for (uint64_t s = 0; s < k; ++s) {
      AddScaledRows(out, ys.span().subspan(s * rows * d, rows * d),
                    weight_buffer.span().subspan(s * rows, rows));
    }
    return Status::Ok();
  }
  std::optional<uint64_t> FindNonFinite(DeviceSpan<const float> x_buffer) override {
    const std::span<const float> x = Host(x_buffer);
    for (size_t i = 0; i < x.size(); ++i) {
      if (!std::isfinite(x[i])) return i;
    }
    return std::nullopt;
  }
  Result<std::unique_ptr<kv::KvStorage>> CreateKvStorage(
      const kv::PagedKvCacheConfig& config) override {
    return kv::MakeHostKvStorage(kv::PagedKvCache::StorageShape(config));
  }
  Status WriteKv(kv::PagedKvCache& cache, uint64_t layer, std::span<const int64_t> slot_mapping,
                 DeviceSpan<const float> keys, DeviceSpan<const float> values) override {
    return cache.WriteRows(layer, slot_mapping, Host(keys), Host(values));
  }

 protected:
  std::shared_ptr<std::byte> AllocateBytes(uint64_t bytes) override {
    // 64-byte aligned and zeroed, like AlignedBuffer.
    constexpr std::align_val_t kAlign{64};
    auto* p = static_cast<std::byte*>(::operator new(bytes, kAlign));
    std::memset(p, 0, bytes);
    return std::shared_ptr<std::byte>(p, [](std::byte* q) { ::operator delete(q, kAlign); });
  }
  void CopyIn(std::byte* dst, const std::byte* src, uint64_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void CopyOut(std::byte* dst, const std::byte* src, uint64_t bytes) override {
    std::memcpy(dst, src, bytes);
  }

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
  // fn(element) for every element of x, spread as ForSpans.
  template <typename Fn>
  void ForElements(std::span<float> x, Fn&& fn) {
    constexpr size_t kPart = 1024;  // elements
    ForRowRanges(CeilDiv(x.size(), kPart), kPart, [&](size_t r0, size_t r1) {
      for (size_t i = r0 * kPart; i < std::min(r1 * kPart, x.size()); ++i) fn(x[i]);
    });
  }

  ThreadPool* pool_;

 private:
  static void MoveRows(std::span<const float> src, std::span<const int32_t> idx,
                       std::span<float> dst, bool gather) {
    if (idx.empty()) return;
    const std::span<const float> moved = gather ? std::span<const float>(dst) : src;
    const std::span<const float> table = gather ? src : std::span<const float>(dst);
    FOLIO_CHECK(moved.size() % idx.size() == 0);
    const size_t width = moved.size() / idx.size();
    FOLIO_CHECK(width > 0 && table.size() % width == 0);
    const size_t n = table.size() / width;
    for (size_t i = 0; i < idx.size(); ++i) {
      FOLIO_CHECK(idx[i] >= 0 && static_cast<size_t>(idx[i]) < n, "row ", idx[i], " of ", n);
      const size_t r = static_cast<size_t>(idx[i]);
      if (gather) {
        std::copy_n(src.begin() + static_cast<ptrdiff_t>(r * width), width,
                    dst.begin() + static_cast<ptrdiff_t>(i * width));
      } else {
        std::copy_n(src.begin() + static_cast<ptrdiff_t>(i * width), width,
                    dst.begin() + static_cast<ptrdiff_t>(r * width));
      }
    }
  }

  ops::MatMulActivations activations_;
};

// The scalar attention plan, shared by the reference backend and the cpu
// backend's f64 K/V (which the SIMD kernel does not read).
struct ReferencePlan final : AttentionPlan {
  ReferencePlan(const attention::PagedAttentionParams& p, const kv::PagedBatchView& b)
      : params(p), batch(b) {}
  Status Run(DeviceSpan<const float> query, const kv::PagedKvView& kv, DeviceSpan<float> out,
             DeviceSpan<const float> sinks) const override {
    attention::PagedAttentionParams p = params;
    p.sinks = HostBackend::InPlace(sinks);
    return attention::PagedAttentionReference(p, HostBackend::InPlace(query), kv, batch,
                                              HostBackend::InPlace(out));
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
  void SwiGlu(DeviceSpan<float> gate, DeviceSpan<const float> up) override {
    ForSpans(Host(gate), Host(up), ops::SwiGluSimd);
  }
  void GeGlu(DeviceSpan<float> gate, DeviceSpan<const float> up) override {
    ForSpans(Host(gate), Host(up), ops::GeGluSimd);
  }
  Status MatMul(const Weight& w, DeviceSpan<const float> x, uint64_t rows,
                DeviceSpan<float> y) override {
    if (w.packed) return ops::PackedMatMul(*w.packed, Host(x), rows, Host(y), pool_);
    return ops::MatMul(w.host, Host(x), rows, Host(y), pool_);
  }
  Status MatMuls(std::span<const Weight* const> ws, DeviceSpan<const float> x, uint64_t rows,
                 std::span<const DeviceSpan<float>> ys) override {
    // No allocation per call.
    thread_local std::vector<const ops::PackedMatrix*> packed;
    thread_local std::vector<std::span<float>> outs;
    packed.clear();
    for (const Weight* w : ws) {
      if (!w->packed) return Backend::MatMuls(ws, x, rows, ys);
      packed.push_back(w->packed.get());
    }
    outs.clear();
    for (const DeviceSpan<float>& y : ys) outs.push_back(Host(y));
    return ops::PackedMatMuls(packed, Host(x), rows, outs, pool_);
  }
  Result<std::unique_ptr<AttentionPlan>> PlanAttention(
      const attention::PagedAttentionParams& params, DeviceSpan<const float> query,
      DeviceSpan<float> out, const kv::PagedKvView& kv, const kv::PagedBatchView& batch) override {
    if (kv.dtype == DType::kF64) return PlanReference(params, Host(query), Host(out), kv, batch);
    FOLIO_ASSIGN_OR_RETURN(
        attention::PagedAttentionPlan plan,
        attention::PagedAttentionPlan::Create(params, Host(query), Host(out), kv, batch,
                                              pool_ ? pool_->num_threads() : 1));
    return std::unique_ptr<AttentionPlan>(new Plan(std::move(plan), pool_));
  }

 private:
  struct Plan final : AttentionPlan {
    Plan(attention::PagedAttentionPlan p, ThreadPool* threads)
        : plan(std::move(p)), pool(threads) {}
    Status Run(DeviceSpan<const float> query, const kv::PagedKvView& kv, DeviceSpan<float> out,
               DeviceSpan<const float> sinks) const override {
      return plan.Run(InPlace(query), kv, InPlace(out), pool, InPlace(sinks));
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
  Status MatMul(const Weight& w, DeviceSpan<const float> x, uint64_t rows,
                DeviceSpan<float> y) override {
    if (w.packed) return ops::PackedMatMulReference(*w.packed, Host(x), rows, Host(y));
    return ops::MatMulReference(w.host, Host(x), rows, Host(y));
  }
  Result<std::unique_ptr<AttentionPlan>> PlanAttention(
      const attention::PagedAttentionParams& params, DeviceSpan<const float> query,
      DeviceSpan<float> out, const kv::PagedKvView& kv, const kv::PagedBatchView& batch) override {
    return PlanReference(params, Host(query), Host(out), kv, batch);
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
