// Model loaders behind LoadModel (model.h), one per file format.
#ifndef FOLIO_MODEL_LOADERS_H_
#define FOLIO_MODEL_LOADERS_H_

#include <filesystem>
#include <nlohmann/json.hpp>

#include "folio/model/model.h"

namespace folio::model {

// A Hugging Face (or folio) config.json object -> ModelConfig.
Result<ModelConfig> ParseHfConfig(const nlohmann::json& config);

// A GGUF file (gguf_loader.cc).
Result<Model> LoadGgufModel(const std::filesystem::path& path);

}  // namespace folio::model

#endif  // FOLIO_MODEL_LOADERS_H_
