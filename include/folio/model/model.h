// A validated decoder model: config, weights in their stored types, and the
// model id.
//
// The id is SHA-256 over a canonical encoding of the config and every
// tensor's type, shape and bytes (docs/spec/model-id.md). It names the
// weights, not any cache: caches bind to it, snapshots record it, and a
// save/load round trip preserves it. It is computed on first use (hashing a
// large checkpoint takes a moment) and then cached.
#ifndef FOLIO_MODEL_MODEL_H_
#define FOLIO_MODEL_MODEL_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "folio/core/splitmix64.h"
#include "folio/core/status.h"
#include "folio/core/thread_pool.h"
#include "folio/model/config.h"
#include "folio/model/weights.h"

namespace folio::model {

class Model {
 public:
  // Errors: an invalid config; a missing tensor, or one of the wrong shape,
  // type or byte size (named); with check_finite, a non-finite parameter
  // (named with its tensor and index). File loaders validate structure and
  // leave values to the decoder, which refuses non-finite logits.
  static Result<Model> Create(ModelConfig config, ModelWeights weights, bool check_finite = true);

  // Deterministic initialisation, exactly as the worked example's course:
  // one SplitMix64 stream from `seed`; Xavier-uniform
  // w = sqrt(6 / (fan_in + fan_out)) * (2u - 1) drawn row-major over
  // [fan_in, fan_out] in the order embedding [vocab, hidden], then per layer
  // q, k, v, o, gate, up, down (each [in, out]), then, untied only, the
  // output head [hidden, vocab]. Norm gains are 1 and biases 0, taking no
  // draws. Tensors are float64.
  static Result<Model> FromSeed(const ModelConfig& config, uint64_t seed);

  Model(Model&&) noexcept = default;
  Model& operator=(Model&&) noexcept = default;

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  // 64 lowercase hex digits.
  const std::string& id() const;

 private:
  struct IdCache {
    std::once_flag once;
    std::string id;
  };
  Model(ModelConfig config, ModelWeights weights)
      : config_(std::move(config)),
        weights_(std::move(weights)),
        id_(std::make_shared<IdCache>()) {}
  ModelConfig config_;
  ModelWeights weights_;
  std::shared_ptr<IdCache> id_;
};

// Draws Xavier-uniform weights from `rng` in the course's order (see
// Model::FromSeed); exposed so tests can check the stream's final state.
ModelWeights InitializeWeights(const ModelConfig& config, SplitMix64& rng);

// SHA-256 of the canonical encoding of config and tensors.
std::string ComputeModelId(const ModelConfig& config, const ModelWeights& weights);

// The same weights with every matrix (2-D tensor) re-encoded as `type`,
// row by row over `pool` (optional); vectors stay as they are. For
// benchmarks and tests that need a model in a quantized type. Errors: a type
// ops::QuantizeRow cannot write, or rows that are not whole blocks of it.
Result<ModelWeights> QuantizeMatrices(const ModelWeights& w, ops::WeightType type,
                                      ThreadPool* pool = nullptr);

}  // namespace folio::model

#endif  // FOLIO_MODEL_MODEL_H_
