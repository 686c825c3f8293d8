// The float64 reference forward pass: the worked example's decoder, and the
// independent oracle tests hold the float32 decoder and the model loaders
// against. Not a production module (production computes in float32,
// model/decoder.h); `folio layout` and tests link it.
//
// Every weight is widened to float64 once and every op is the scalar one
// (ops/ops.h), each reduction in increasing index order. Cached steps run on
// the engine's paged cache exactly as model::Decoder::Step does: K/V rows go
// through the step's slot_mapping (kv::PagedKvCache::WriteRows, float64 rows)
// and attention reads the pages through the block tables
// (reference/float64_attention.h). So for any page size and placement,
// cached logits equal the cache-free Forward's bit for bit (with f64 K/V).
#ifndef FOLIO_TOOLS_REFERENCE_FLOAT64_DECODER_H_
#define FOLIO_TOOLS_REFERENCE_FLOAT64_DECODER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "folio/core/status.h"
#include "folio/kv/paged_kv_cache.h"
#include "folio/model/decoder.h"
#include "folio/model/model.h"

namespace folio::reference {

class Float64Decoder {
 public:
  explicit Float64Decoder(const model::Model& model);
  ~Float64Decoder();
  Float64Decoder(Float64Decoder&&) noexcept;

  const model::ModelConfig& config() const { return config_; }
  const std::string& model_id() const { return model_id_; }

  // The full-prefix forward pass with no cache: tokens [batch, n] at
  // positions 0..n-1, logits [batch, n, vocab]. Errors: tokens.size() not a
  // multiple of the batch, a token id outside the vocabulary, n beyond
  // max_positions, a non-finite logit.
  Result<std::vector<double>> Forward(std::span<const int32_t> tokens, uint64_t batch) const;

  // One step over sequences of a PagedKvCache with model::Decoder::Step's
  // contract (meta from cache.BuildBatchMetadata with the step's plan; the
  // caller commits or aborts), in float64. The cache may hold f64, f32,
  // bf16 or f16 K/V.
  Result<std::vector<double>> Step(kv::PagedKvCache& cache, const kv::BatchMetadata& meta,
                                   std::span<const int32_t> tokens,
                                   model::LogitRows rows = model::LogitRows::kLast) const;

 private:
  struct Weights;
  struct RowPlan {
    std::span<const int32_t> tokens;       // [rows]
    std::span<const uint64_t> positions;   // [rows]
    std::span<const uint64_t> logit_rows;  // indices into [rows], ascending
  };
  Status CheckTokens(std::span<const int32_t> tokens, uint64_t batch) const;
  // Every layer over the plan's rows; attend(layer, q, k, v, out) stores the
  // layer's K/V rows (token-major [rows, kv_heads * head_dim]) and writes
  // attention of q ([rows, num_heads * head_dim]) into out.
  template <typename AttendFn>
  Result<std::vector<double>> Run(const RowPlan& plan, AttendFn&& attend) const;

  model::ModelConfig config_;
  std::string model_id_;
  std::unique_ptr<const Weights> weights_;
};

}  // namespace folio::reference

#endif  // FOLIO_TOOLS_REFERENCE_FLOAT64_DECODER_H_
