// Model loaders behind LoadModel (checkpoint/model_io.h), one per file format.
#ifndef FOLIO_CHECKPOINT_LOADERS_H_
#define FOLIO_CHECKPOINT_LOADERS_H_

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "folio/checkpoint/gguf.h"
#include "folio/model/model.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::checkpoint {

// The model library's types the loaders build.
using model::Architecture;
using model::ArchitectureTraits;
using model::Fixed;
using model::LayerConfig;
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
// The model in an open GGUF file, whose tensors it maps in place (the model
// keeps `file` alive); errors name `path`.
Result<Model> GgufModel(std::shared_ptr<const GgufFile> file, const std::filesystem::path& path);

// llama.cpp's GGUF name of a tensor ForEachTensor names the Hugging Face
// way ("model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight"),
// in config's family (a BERT block's names; which norm is which in the
// sandwich layout and gpt-oss); other names unchanged (gguf_loader.cc).
std::string GgufTensorName(const std::string& hf_name, const ModelConfig& config);

// Where a family that fuses projections stores a tensor ForEachTensor
// names (by its Hugging Face name): the fused tensor's Hugging Face name
// and the rows that are this one (fused_tensors.cc). nullopt: stored under
// its own name.
struct FusedPart {
  std::string stored;  // e.g. model.layers.3.self_attn.qkv_proj.weight
  uint64_t first_row;
  uint64_t rows;
};
std::optional<FusedPart> FusedPartOf(const ModelConfig& config, const std::string& hf_name);
// part's rows of the fused 2-D tensor t (total_rows rows), sharing its
// bytes and owner; errors name `name` when t's shape or size is not that.
Result<Tensor> RowSlice(const Tensor& t, const FusedPart& part, uint64_t total_rows,
                        const std::string& name);
// The stored name of a tensor ForEachTensor names, in a Hugging Face
// folder of the model's family (Mixtral's block_sparse_moe names).
std::string HfStoredName(const ModelConfig& config, const std::string& hf_name);
// gpt-oss's experts as Hugging Face stores them (hf_gpt_oss): per layer
// mlp.experts.gate_up_proj [experts, hidden, 2 * ffn] (gate and up
// interleaved by column) and down_proj [experts, ffn, hidden], each with a
// _bias ([experts, 2 * ffn], [experts, hidden]). A per-expert tensor
// ForEachTensor names is cut from them (transposed, de-interleaved) into
// an owned f32 tensor.
struct GptOssExpertPart {
  std::string stored;  // e.g. model.layers.3.mlp.experts.gate_up_proj
  uint64_t expert;
  enum class Role : uint8_t { kGate, kUp, kDown } role;
  bool bias;
};
std::optional<GptOssExpertPart> GptOssExpertPartOf(const ModelConfig& config,
                                                   const std::string& hf_name);
// Errors name the stored tensor and `name`: a stored shape that is not the one above, or a type
// other than f32, f16, bf16 and f64.
Result<Tensor> GptOssExpertTensor(const ModelConfig& config, const Tensor& stored,
                                  const GptOssExpertPart& part, const std::string& name);
// The published gpt-oss checkpoints store the weights (not the biases) as
// MXFP4 instead: part.stored + "_blocks" [experts, rows, cols / 32, 16] u8
// and part.stored + "_scales" [experts, rows, cols / 32] u8, where a row is
// an output (gate_up: 2 * ffn rows, gate and up interleaved by row; down:
// hidden rows) and cols the input (hidden; ffn). A block's scale byte is
// E8M0 (2^(e - 127)) and byte i of its 16 holds element 2i in its low
// nibble and element 2i + 1 in its high one, each an E2M1 code
// (transformers' convert_moe_packed_tensors). A U8 tensor's name, shape
// and bytes as the file has them:
struct StoredBytes {
  std::string name;
  std::vector<uint64_t> shape;
  std::span<const std::byte> bytes;  // product(shape) bytes
};
// The expert's rows of `part` ([ffn, hidden] for gate and up, [hidden,
// ffn] for down), re-packed into ggml's block_mxfp4 order (kMXFP4: the
// same scale and codes, element j < 16 in the low nibble of qs[j], j + 16
// in its high nibble) in an owned tensor: no values change. Errors
// (InvalidArgument) name the tensor: shapes that are not the ones above
// or that disagree with each other, rows not whole 32-element blocks, or
// a scale byte 0xff (E8M0's NaN).
Result<Tensor> GptOssMxfp4ExpertTensor(const ModelConfig& config, const StoredBytes& blocks,
                                       const StoredBytes& scales, const GptOssExpertPart& part);
// Where a GGUF file keeps a tensor that is part of a larger one: a fused
// projection (Phi-3) or one expert of the stacked ffn_*_exps tensors.
struct GgufPart {
  std::string name;  // the GGUF tensor holding it
  uint64_t first_row, rows, total_rows;
  bool vector = false;  // one row of a stack of biases [experts, n], read as [n]
};
std::optional<GgufPart> GgufPartOf(const ModelConfig& config, const std::string& hf_name);
// The rows of a fused tensor: q + 2 kv, or 2 ffn.
inline uint64_t FusedRows(const ModelConfig& c, const FusedPart& part) {
  return part.stored.ends_with("qkv_proj.weight") ? c.q_size() + 2 * c.kv_size() : 2 * c.ffn_size;
}

// A DeepSeek-style router's values as a file gives them, refused under the
// file's own key names (ModelConfig::Validate, the backstop, names
// folio's fields): expert groups that do not split the experts into
// groups of at least two (a group's score sums its two best), groups used
// outside [1, groups] or too few experts in them for experts_per_token, a
// routed scale that is not finite and > 0, more leading dense layers than
// layers (model_io.cc).
struct RouterKeys {
  std::string groups, groups_used, scale, dense_layers;
};
Status CheckRouter(const ModelConfig& config, const RouterKeys& keys);

// A folio or Hugging Face folder (model_io.cc).
Result<Model> LoadFolderModel(const std::filesystem::path& dir);

// A folder's chat template: chat_template.jinja when the folder has one
// (newer Hugging Face repositories, gpt-oss's among them, keep it there;
// transformers prefers it), else tokenizer_config.json's "chat_template", a
// string or a list of named templates ("default" preferred, else the
// first); empty when absent or unreadable (checkpoint.cc).
std::string FolderChatTemplate(const std::filesystem::path& dir);

// The tokenizer a GGUF file's tokenizer.ggml.* metadata describes
// (model_tokenizer.cc), pre_tokenizer replacing tokenizer.ggml.pre when
// given; errors name the key.
Result<tokenizer::Tokenizer> GgufTokenizer(
    const GgufFile& file, const std::optional<std::string>& pre_tokenizer = std::nullopt);

}  // namespace folio::checkpoint

#endif  // FOLIO_CHECKPOINT_LOADERS_H_
