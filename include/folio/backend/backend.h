// The compute backend seam: everything a forward pass does that touches
// device memory or computes goes through one Backend, so the model is
// written once and a device (a GPU, later) plugs in here without touching
// the scheduler or the model.
//
//   weights     Upload a stored matrix once; MatMul and Embed take the handle
//   K/V pools   CreateKvPool; WriteKv writes a step's rows through the slot
//               mapping
//   ops         MatMul, Embed, RmsNorm, Rope, SwiGlu (f32 activations)
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
// is the host view itself. Results differ between backends only by the
// kernels' rounding (stated in docs/design.md); within one backend they
// follow the determinism contract (independent of batch, placement,
// chunking and thread count).
#ifndef FOLIO_BACKEND_BACKEND_H_
#define FOLIO_BACKEND_BACKEND_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "folio/attention/paged_attention.h"
#include "folio/core/status.h"
#include "folio/core/thread_pool.h"
#include "folio/kv/paged_kv_cache.h"
#include "folio/ops/matmul.h"
#include "folio/ops/packed_matmul.h"

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

// A step's attention plan: made once by Backend::PlanAttention, run for
// every layer. It knows its backend's kernel, so running it dispatches
// once, through this call.
class AttentionPlan {
 public:
  virtual ~AttentionPlan() = default;
  // One layer: out = attention of query over kv (a pool of the planned
  // shape; the planned query and out buffers), with the layer's attention
  // sinks (empty, or one per query head; PagedAttentionParams::sinks).
  virtual Status Run(std::span<const float> query, const kv::PagedKvView& kv, std::span<float> out,
                     std::span<const float> sinks) const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;

  // Errors: an invalid view (ops::ValidateWeightView).
  virtual Result<Weight> Upload(const ops::WeightView& w) = 0;
  // y [rows, w.rows] = x [rows, w.cols] times W transposed.
  virtual Status MatMul(const Weight& w, std::span<const float> x, uint64_t rows,
                        std::span<float> y) = 0;
  // MatMul of several weights of the same width on one input x (a layer's
  // q/k/v projections, its gate and up): ys[i] [rows, ws[i]->rows] = x
  // times ws[i] transposed, each with the bits MatMul gives it alone. A
  // backend may share work on x between them (the cpu backend's packed
  // kernel quantizes x once and runs every weight in one parallel loop);
  // by default it calls MatMul per weight.
  virtual Status MatMuls(std::span<const Weight* const> ws, std::span<const float> x, uint64_t rows,
                         std::span<const std::span<float>> ys);
  // out [ids.size(), w.cols]: the rows of w named by ids (each < w.rows; checked).
  virtual void Embed(const Weight& w, std::span<const int32_t> ids, std::span<float> out) = 0;
  // Per row of x ([rows, gain.size()]): out = x / rms(x) * gain.
  virtual void RmsNorm(std::span<const float> x, std::span<const float> gain, float eps,
                       std::span<float> out) = 0;
  // Per row of x ([rows, gain.size()]): ops::LayerNorm with gain and bias.
  virtual void LayerNorm(std::span<const float> x, std::span<const float> gain,
                         std::span<const float> bias, float eps, std::span<float> out) = 0;
  // Rotates each head_dim-wide head of x's row r by angles cos/sin [rows,
  // pairs]: the first 2 * pairs features of each head (ops::Rope).
  virtual void Rope(std::span<float> x, uint64_t rows, uint64_t head_dim,
                    std::span<const float> cos, std::span<const float> sin, bool neox) = 0;
  // gate = silu(gate) * up, element-wise.
  virtual void SwiGlu(std::span<float> gate, std::span<const float> up) = 0;
  // gate = gelu_tanh(gate) * up, element-wise.
  virtual void GeGlu(std::span<float> gate, std::span<const float> up) = 0;
  // x = act(x) element-wise, for a plain (ungated) MLP: GELU (erf) or its
  // tanh form (ops::Gelu, ops::GeluTanh).
  virtual void Gelu(std::span<float> x, bool tanh_form) = 0;
  // gpt-oss's clamped SwiGLU, element-wise in f32: g = min(gate, limit),
  // u = clamp(up, -limit, limit), gate = (u + 1) * g * sigmoid(alpha * g).
  virtual void SwiGluClamped(std::span<float> gate, std::span<const float> up, float alpha,
                             float limit) = 0;

  virtual Result<kv::PagedKvCache> CreateKvPool(const kv::PagedKvCacheConfig& config) = 0;
  // PagedKvCache::WriteRows' contract.
  virtual Status WriteKv(kv::PagedKvCache& cache, uint64_t layer,
                         std::span<const int64_t> slot_mapping, std::span<const float> keys,
                         std::span<const float> values) = 0;

  // Plans a step's attention for query/out buffers that every layer reuses
  // (PagedAttentionPlan's contract: batch's arrays and the buffers outlive
  // the plan). Errors: the metadata's, named.
  virtual Result<std::unique_ptr<AttentionPlan>> PlanAttention(
      const attention::PagedAttentionParams& params, std::span<const float> query,
      std::span<float> out, const kv::PagedKvView& kv, const kv::PagedBatchView& batch) = 0;
};

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
