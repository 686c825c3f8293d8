// Model loaders behind LoadModel (checkpoint/model_io.h), one per file format.
#ifndef FOLIO_CHECKPOINT_LOADERS_H_
#define FOLIO_CHECKPOINT_LOADERS_H_

#include <filesystem>
#include <nlohmann/json.hpp>

#include "folio/model/model.h"

namespace folio::checkpoint {

// The model library's types the loaders build.
using model::Architecture;
using model::ArchitectureTraits;
using model::Fixed;
using model::Model;
using model::ModelConfig;
using model::ModelWeights;
using model::RopeScaling;
using model::RopeStyle;
using model::Tensor;
using model::TensorType;

// A Hugging Face (or folio) config.json object -> ModelConfig.
Result<ModelConfig> ParseHfConfig(const nlohmann::json& config);

// A GGUF file (gguf_loader.cc).
Result<Model> LoadGgufModel(const std::filesystem::path& path);

}  // namespace folio::checkpoint

#endif  // FOLIO_CHECKPOINT_LOADERS_H_
