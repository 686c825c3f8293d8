// A validated decoder model: config, float64 master weights and the model id.
//
// The id is SHA-256 over a canonical encoding of the config and every
// tensor's bytes (docs/spec/model-id.md). It names the weights, not any
// cache: caches bind to it, snapshots record it, and a save/load round trip
// preserves it.
#ifndef FOLIO_MODEL_MODEL_H_
#define FOLIO_MODEL_MODEL_H_

#include <cstdint>
#include <filesystem>
#include <string>

#include "folio/core/splitmix64.h"
#include "folio/core/status.h"
#include "folio/model/config.h"
#include "folio/model/weights.h"

namespace folio::model {

class Model {
 public:
  // Errors: an invalid config; a tensor of the wrong size; a non-finite
  // parameter (named with its tensor and index).
  static Result<Model> Create(ModelConfig config, ModelWeights<double> weights);

  // Deterministic initialisation, exactly as the worked example's course:
  // one SplitMix64 stream from `seed`; Xavier-uniform
  // w = sqrt(6 / (fan_in + fan_out)) * (2u - 1) drawn row-major over
  // [fan_in, fan_out] in the order embedding [vocab, hidden], then per layer
  // q, k, v, o, gate, up, down (each [in, out]), then, untied only, the
  // output head [hidden, vocab]. Norm gains are 1 and take no draws.
  static Result<Model> FromSeed(const ModelConfig& config, uint64_t seed);

  Model(Model&&) noexcept = default;
  Model& operator=(Model&&) noexcept = default;

  const ModelConfig& config() const { return config_; }
  const ModelWeights<double>& weights() const { return weights_; }
  // 64 lowercase hex digits.
  const std::string& id() const { return id_; }

 private:
  Model(ModelConfig config, ModelWeights<double> weights, std::string id)
      : config_(config), weights_(std::move(weights)), id_(std::move(id)) {}
  ModelConfig config_;
  ModelWeights<double> weights_;
  std::string id_;
};

// Draws Xavier-uniform weights from `rng` in the course's order (see
// Model::FromSeed); exposed so tests can check the stream's final state.
ModelWeights<double> InitializeWeights(const ModelConfig& config, SplitMix64& rng);

// SHA-256 of the canonical encoding of config and tensors.
std::string ComputeModelId(const ModelConfig& config,
                           const ModelWeights<double>& weights);

// A folder with config.json (Hugging Face style keys) and model.safetensors
// (float64 tensors with Hugging Face Llama names). Writes atomically per
// file; the folder is created if missing.
Status SaveModel(const Model& model, const std::filesystem::path& dir);

// Loads what SaveModel writes. Tensors may be F64, F32, BF16 or F16 (widened
// to float64). Errors name the file and the field or tensor: a missing or
// unexpected tensor, a wrong shape or dtype, a bad config value.
Result<Model> LoadModel(const std::filesystem::path& dir);

}  // namespace folio::model

#endif  // FOLIO_MODEL_MODEL_H_
