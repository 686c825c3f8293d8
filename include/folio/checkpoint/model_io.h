// Model files in and out: folio's own folders, Hugging Face folders and
// GGUF files to a model::Model, and a model::Model to a folio folder. The
// checkpoint module reads files and builds the model library's types; the
// model library knows nothing of files (docs/design.md, "Modules").
#ifndef FOLIO_CHECKPOINT_MODEL_IO_H_
#define FOLIO_CHECKPOINT_MODEL_IO_H_

#include <filesystem>

#include "folio/core/status.h"
#include "folio/model/model.h"

namespace folio::checkpoint {

// A folder with config.json (Hugging Face style keys) and model.safetensors
// (tensors in their stored types with Hugging Face Llama names). Writes
// atomically per file; the folder is created if missing. Quantized tensors
// (Q8_0, the legacy 4- and 5-bit blocks, the K-quants and IQ4 types) have
// no safetensors dtype and are refused.
Status SaveModel(const model::Model& model, const std::filesystem::path& dir);

// Loads a model from
//   - a folder with config.json and model.safetensors (or sharded
//     model-*.safetensors with model.safetensors.index.json): folio's own
//     FolioForCausalLM, or Hugging Face LlamaForCausalLM,
//     MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM; tensors
//     F64, F32, F16 or BF16, memory-mapped;
//   - a .gguf file (llama, qwen2, qwen3; F32, F16, BF16, Q8_0, Q4_0, Q4_1,
//     Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS and MXFP4
//     tensors, every one kept in its stored blocks).
// Errors name the file and the field or tensor.
Result<model::Model> LoadModel(const std::filesystem::path& path);

}  // namespace folio::checkpoint

#endif  // FOLIO_CHECKPOINT_MODEL_IO_H_
