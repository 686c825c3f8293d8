// The compute backend seam: everything a forward pass does that touches
// device memory or computes goes through one Backend, so the model is
// written once and a device (a GPU, later) plugs in here without touching
// the scheduler or the model.
//
//   weights     Upload a stored matrix once; MatMul and Embed take the handle
//   K/V pools   CreateKvStorage (the pages' rows, in the backend's memory),
//               CreateKvPool (a cache of host tables over it); WriteKv
//               writes a step's rows through the slot mapping
//   memory      activations live in buffers the backend allocates
//               (device_buffer.h); the host reaches them only through
//               Write / Read, which the backend counts
//   ops         MatMul, Embed, RmsNorm, Rope, SwiGlu, the element-wise
//               arithmetic and row moves (f32 activations), so a forward
//               pass runs no host loop between backend calls
//   attention   PlanAttention once per step (metadata validated, work
//               split), AttentionPlan::Run per layer (FlashInfer's plan/run)
//
// Two backends live here:
//   cpu        today's kernels: Highway SIMD matmul and paged attention,
//              spread over a thread pool;
//   reference  the scalar references that sit beside every kernel (the
//              double-accumulating matmul, the float64 two-pass attention),
//              one thread: slow, simple, and the oracle a new backend is
//              checked against.
// Both keep weights, K/V pools and activations in host memory, so a handle
// points at host memory (but only the backend dereferences it). Results differ between backends
// only by the kernels' rounding (stated in docs/design.md); within one backend they follow the
// determinism contract (independent of batch, placement, chunking and thread count).
#ifndef FOLIO_BACKEND_BACKEND_H_
#define FOLIO_BACKEND_BACKEND_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "folio/attention/paged_attention.h"
#include "folio/backend/device_buffer.h"
#include "folio/core/checked_math.h"
#include "folio/core/status.h"
#include "folio/core/thread_pool.h"
#include "folio/kv/paged_kv_cache.h"
#include "folio/ops/matmul.h"
#include "folio/ops/packed_matmul.h"
#include "folio/ops/router.h"

namespace folio::backend {

enum class BackendKind : uint8_t { kCpu, kReference };
std::string_view BackendName(BackendKind kind);
// "cpu" or "reference"; anything else is InvalidArgument naming the choices.
Result<BackendKind> ParseBackendKind(std::string_view name);

// A matrix as a backend holds it. The host backends keep the caller's view
// (its bytes must outlive the handle) and, for a quantized type with a
// packed integer kernel under q8 activations, their own repacked copy
// (ops/packed_matmul.h); a device backend would keep its own copy here.
struct Weight {
  ops::WeightView host;
  std::shared_ptr<const ops::PackedMatrix> packed;  // null: the float kernel
};

// One expert of a mixture as a backend holds it: a SwiGLU MLP (gate, up,
// down) with optional biases (gpt-oss; empty: none).
struct Expert {
  const Weight* gate = nullptr;
  const Weight* up = nullptr;
  const Weight* down = nullptr;
  DeviceSpan<const float> gate_bias, up_bias, down_bias;
};

// A mixture layer's routed experts (Backend::Experts).
struct Mixture {
  ops::RouterOptions router;
  // [num_experts] added to the scores for choosing only (dots1); empty: none.
  DeviceSpan<const float> selection_bias;
  std::span<const Expert> experts;  // [num_experts]
  // gpt-oss's clamped SwiGLU (Backend::SwiGluClamped) when limit > 0.
  float swiglu_alpha = 0.0f, swiglu_limit = 0.0f;
};

// A step's attention plan: made once by Backend::PlanAttention, run for
// every layer. It knows its backend's kernel, so running it dispatches
// once, through this call.
class AttentionPlan {
 public:
  virtual ~AttentionPlan() = default;
  // One layer: out = attention of query over kv (a pool of the planned
  // shape; the planned query and out buffers), with the layer's attention
  // sinks (empty, or one per query head; PagedAttentionParams::sinks).
  virtual Status Run(DeviceSpan<const float> query, const kv::PagedKvView& kv,
                     DeviceSpan<float> out, DeviceSpan<const float> sinks) const = 0;
};

// How often activations crossed between the host and a backend's memory
// (Backend::Write / Read / HostView), and how many bytes.
struct Transfers {
  uint64_t writes = 0, write_bytes = 0;  // host -> backend
  uint64_t reads = 0, read_bytes = 0;    // backend -> host
  uint64_t host_views = 0;               // a host backend's memory seen in place
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;

  // Memory (device_buffer.h). Allocate gives `count` elements of T, zeroed.
  // Write and Read copy between the host and the backend's memory (sizes
  // equal, checked); ToDevice and ToHost allocate the other side. Each
  // crossing is counted in transfers().
  template <typename T>
  DeviceBuffer<T> Allocate(uint64_t count);
  template <typename T>
  void Write(std::span<const T> host, DeviceSpan<T> dst);
  template <typename T>
  void Read(DeviceSpan<const T> src, std::span<T> host);
  template <typename T>
  DeviceBuffer<T> ToDevice(std::span<const T> host);
  template <typename T>
  std::vector<T> ToHost(DeviceSpan<const T> src);
  // True where the backend's memory is the host's (cpu, reference). Only
  // then may a caller see a buffer in place, for host-only code such as a
  // benchmark's attention baseline (checked); counted like a transfer.
  virtual bool host_memory() const = 0;
  template <typename T>
  std::span<T> HostView(DeviceSpan<T> s);
  Transfers transfers() const;

  // Errors: an invalid view (ops::ValidateWeightView).
  virtual Result<Weight> Upload(const ops::WeightView& w) = 0;
  // y [rows, w.rows] = x [rows, w.cols] times W transposed.
  virtual Status MatMul(const Weight& w, DeviceSpan<const float> x, uint64_t rows,
                        DeviceSpan<float> y) = 0;
  // MatMul of several weights of the same width on one input x (a layer's
  // q/k/v projections, its gate and up): ys[i] [rows, ws[i]->rows] = x
  // times ws[i] transposed, each with the bits MatMul gives it alone. A
  // backend may share work on x between them (the cpu backend's packed
  // kernel quantizes x once and runs every weight in one parallel loop);
  // by default it calls MatMul per weight.
  virtual Status MatMuls(std::span<const Weight* const> ws, DeviceSpan<const float> x,
                         uint64_t rows, std::span<const DeviceSpan<float>> ys);
  // out [ids.size(), w.cols]: the rows of w named by ids (each < w.rows; checked).
  virtual void Embed(const Weight& w, DeviceSpan<const int32_t> ids, DeviceSpan<float> out) = 0;
  // Per row of x ([rows, gain.size()]): out = x / rms(x) * gain.
  virtual void RmsNorm(DeviceSpan<const float> x, DeviceSpan<const float> gain, float eps,
                       DeviceSpan<float> out) = 0;
  // Per row of x ([rows, gain.size()]): ops::LayerNorm with gain and bias.
  virtual void LayerNorm(DeviceSpan<const float> x, DeviceSpan<const float> gain,
                         DeviceSpan<const float> bias, float eps, DeviceSpan<float> out) = 0;
  // Rotates each head_dim-wide head of x's row r by angles cos/sin [rows,
  // pairs]: the first 2 * pairs features of each head (ops::Rope).
  virtual void Rope(DeviceSpan<float> x, uint64_t rows, uint64_t head_dim,
                    DeviceSpan<const float> cos, DeviceSpan<const float> sin, bool neox) = 0;
  // gate = silu(gate) * up, element-wise.
  virtual void SwiGlu(DeviceSpan<float> gate, DeviceSpan<const float> up) = 0;
  // gate = gelu_tanh(gate) * up, element-wise.
  virtual void GeGlu(DeviceSpan<float> gate, DeviceSpan<const float> up) = 0;
  // x = act(x) element-wise, for a plain (ungated) MLP: GELU (erf) or its
  // tanh form (ops::Gelu, ops::GeluTanh).
  virtual void Gelu(DeviceSpan<float> x, bool tanh_form) = 0;
  // gpt-oss's clamped SwiGLU, element-wise in f32: g = min(gate, limit),
  // u = clamp(up, -limit, limit), gate = (u + 1) * g * sigmoid(alpha * g).
  virtual void SwiGluClamped(DeviceSpan<float> gate, DeviceSpan<const float> up, float alpha,
                             float limit) = 0;

  // Element-wise f32 arithmetic, each one rounding per element, so that any
  // backend gives the bits of the scalar loop it names.
  // x[i] += y[i] (sizes equal).
  virtual void Add(DeviceSpan<float> x, DeviceSpan<const float> y) = 0;
  // Each row of y ([rows, bias.size()]) += bias.
  virtual void AddBias(DeviceSpan<float> y, DeviceSpan<const float> bias) = 0;
  // x[i] *= s.
  virtual void Scale(DeviceSpan<float> x, float s) = 0;
  // x[i] = tanh(x[i] / cap) * cap (Gemma 2's soft-capping; cap 1 is tanh).
  virtual void SoftCap(DeviceSpan<float> x, float cap) = 0;
  // x[i] = 1 / (1 + exp(-x[i])).
  virtual void Sigmoid(DeviceSpan<float> x) = 0;
  // out[r, i] += scales[r] * y[r, i] for out and y [scales.size(), width].
  virtual void AddScaledRows(DeviceSpan<float> out, DeviceSpan<const float> y,
                             DeviceSpan<const float> scales) = 0;
  // x[i] = value.
  virtual void Fill(DeviceSpan<float> x, float value) = 0;
  // Row moves between [n, width] tables, width = dst.size() / idx.size()
  // (Gather) or src.size() / idx.size() (Scatter); every index < n
  // (checked). Gather: dst[i] = src[idx[i]]. Scatter: dst[idx[i]] = src[i].
  virtual void GatherRows(DeviceSpan<const float> src, DeviceSpan<const int32_t> idx,
                          DeviceSpan<float> dst) = 0;
  virtual void ScatterRows(DeviceSpan<const float> src, DeviceSpan<const int32_t> idx,
                           DeviceSpan<float> dst) = 0;
  // A mixture of experts on rows h [rows, hidden] into out [rows, hidden],
  // routed by the router's logits [rows, num_experts] (its bias added):
  // each row's experts and weights by ops::RouteRow; then, per expert, the
  // rows that chose it as one matrix product (llama.cpp's mul_mat_id),
  // read once for the step (biases added, SwiGLU or the clamped SwiGLU); a
  // row's output is the sum of its experts' outputs times their weights,
  // from zero, in increasing expert order. Every row's bits depend on that
  // row alone. Errors: a matmul's.
  virtual Status Experts(const Mixture& mixture, DeviceSpan<const float> logits,
                         DeviceSpan<const float> h, uint64_t rows, DeviceSpan<float> out) = 0;
  // The index of x's first element that is not finite; nullopt if none.
  virtual std::optional<uint64_t> FindNonFinite(DeviceSpan<const float> x) = 0;

  // K/V storage of PagedKvCache::StorageShape(config) in this backend's
  // memory (the host backends: kv::MakeHostKvStorage).
  virtual Result<std::unique_ptr<kv::KvStorage>> CreateKvStorage(
      const kv::PagedKvCacheConfig& config) = 0;
  // A cache over CreateKvStorage's storage. Errors: PagedKvCache::Create's,
  // before any storage is made.
  Result<kv::PagedKvCache> CreateKvPool(const kv::PagedKvCacheConfig& config);
  // PagedKvCache::WriteRows' contract.
  virtual Status WriteKv(kv::PagedKvCache& cache, uint64_t layer,
                         std::span<const int64_t> slot_mapping, DeviceSpan<const float> keys,
                         DeviceSpan<const float> values) = 0;

  // Plans a step's attention for query/out buffers that every layer reuses
  // (PagedAttentionPlan's contract: batch's arrays and the buffers outlive
  // the plan). The batch metadata is the host's: a device backend uploads
  // it here, once per step. Errors: the metadata's, named.
  virtual Result<std::unique_ptr<AttentionPlan>> PlanAttention(
      const attention::PagedAttentionParams& params, DeviceSpan<const float> query,
      DeviceSpan<float> out, const kv::PagedKvView& kv, const kv::PagedBatchView& batch) = 0;

 protected:
  // What a backend provides under the memory calls: an allocation of
  // `bytes` (zeroed, aligned for any element type, freed by the pointer's
  // deleter) and copies in and out of it.
  virtual std::shared_ptr<std::byte> AllocateBytes(uint64_t bytes) = 0;
  virtual void CopyIn(std::byte* dst, const std::byte* src, uint64_t bytes) = 0;
  virtual void CopyOut(std::byte* dst, const std::byte* src, uint64_t bytes) = 0;
  // A host backend's ops see their buffers in place (uncounted: this is the
  // backend's own memory, not a crossing).
  template <typename T>
  static std::span<T> Host(DeviceSpan<T> s) {
    return {s.data_, s.size_};
  }

 private:
  std::atomic<uint64_t> writes_{0}, write_bytes_{0}, reads_{0}, read_bytes_{0}, host_views_{0};
};

template <typename T>
DeviceBuffer<T> Backend::Allocate(uint64_t count) {
  if (count == 0) return {};
  const std::optional<uint64_t> bytes = CheckedMul(count, sizeof(T));
  FOLIO_CHECK(bytes.has_value(), count, " elements of ", sizeof(T), " bytes overflow");
  std::shared_ptr<std::byte> memory = AllocateBytes(*bytes);
  T* data = reinterpret_cast<T*>(memory.get());
  return DeviceBuffer<T>(std::move(memory), data, count);
}

template <typename T>
void Backend::Write(std::span<const T> host, DeviceSpan<T> dst) {
  FOLIO_CHECK(host.size() == dst.size(), "writing ", host.size(), " elements into ", dst.size());
  if (host.empty()) return;
  CopyIn(reinterpret_cast<std::byte*>(dst.data_), reinterpret_cast<const std::byte*>(host.data()),
         host.size_bytes());
  writes_.fetch_add(1, std::memory_order_relaxed);
  write_bytes_.fetch_add(host.size_bytes(), std::memory_order_relaxed);
}

template <typename T>
void Backend::Read(DeviceSpan<const T> src, std::span<T> host) {
  FOLIO_CHECK(host.size() == src.size(), "reading ", src.size(), " elements into ", host.size());
  if (host.empty()) return;
  CopyOut(reinterpret_cast<std::byte*>(host.data()), reinterpret_cast<const std::byte*>(src.data_),
          host.size_bytes());
  reads_.fetch_add(1, std::memory_order_relaxed);
  read_bytes_.fetch_add(host.size_bytes(), std::memory_order_relaxed);
}

template <typename T>
DeviceBuffer<T> Backend::ToDevice(std::span<const T> host) {
  DeviceBuffer<T> buffer = Allocate<T>(host.size());
  Write<T>(host, buffer);
  return buffer;
}

template <typename T>
std::vector<T> Backend::ToHost(DeviceSpan<const T> src) {
  std::vector<T> host(src.size());
  Read<T>(src, host);
  return host;
}

template <typename T>
std::span<T> Backend::HostView(DeviceSpan<T> s) {
  FOLIO_CHECK(host_memory(), "a ", BackendName(kind()), " buffer seen from the host");
  host_views_.fetch_add(1, std::memory_order_relaxed);
  return Host(s);
}

// pool (optional, cpu only) spreads the kernels; it must outlive the backend.
// activations: how quantized weights multiply (ops::MatMulActivations);
// under kQ8 the weights of every type with a packed kernel are repacked at
// Upload and multiplied by 8-bit activations, by the SIMD kernel (cpu) or
// its scalar chain (reference), which give the same bits.
std::unique_ptr<Backend> MakeBackend(
    BackendKind kind, ThreadPool* pool = nullptr,
    ops::MatMulActivations activations = ops::MatMulActivations::kF32);

}  // namespace folio::backend

#endif  // FOLIO_BACKEND_BACKEND_H_
