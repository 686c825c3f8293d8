#include "cli/info_command.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/engine_flags.h"
#include "folio/checkpoint/model_io.h"
#include "folio/engine/kv_cache_manager.h"
#include "folio/kv/paged_kv_cache.h"
#include "folio/model/model.h"
#include "folio/model/tensor.h"

namespace folio::cli {
namespace {

// Errors read "folio: ...", as they always have for this command.
constexpr std::string_view kCommand = "";

}  // namespace

CLI::App* AddInfoCommand(CLI::App& app, InfoFlags& f) {
  CLI::App* cmd = app.add_subcommand("info", "architecture, sizes, dtypes, KV bytes per token");
  cmd->add_option("model", f.path, "model folder or .gguf file")->required();
  return cmd;
}

int RunInfo(const InfoFlags& f) {
  const std::string& path = f.path;
  Result<model::Model> m = checkpoint::LoadModel(path);
  if (!m) return Fail(kCommand, m.error());
  const model::ModelConfig& c = m->config();
  // Per stored type: tensors, elements, bytes and bits per weight (a
  // quantized type's scales included), and the same for the whole model.
  struct TypeTotals {
    uint64_t tensors = 0, elements = 0, bytes = 0;
  };
  std::map<std::string, TypeTotals> by_type;
  uint64_t total_bytes = 0, total_elements = 0;
  // What one token's decode step reads: every tensor but the experts and an
  // embedding that is not the output head (one row of it; an encoder's
  // position table likewise), and experts_per_token of each layer's
  // experts (their mean size times k, exact when a layer's experts share a
  // type, as files store them).
  const bool embedding_is_head = c.tie_embeddings && c.num_labels == 0 && !c.IsEncoder();
  uint64_t expert_bytes = 0, embedding_row_bytes = 0, position_row_bytes = 0;
  model::ForEachTensor(
      c, m->weights(),
      [&](const std::string& name, const std::vector<uint64_t>& shape, const model::Tensor& t) {
        uint64_t elements = 1;
        for (const uint64_t d : shape) elements *= d;
        if (name.find(".mlp.experts.") != std::string::npos) {
          expert_bytes += t.bytes.size();
        } else if ((name == "model.embed_tokens.weight" ||
                    name == "embeddings.word_embeddings.weight") &&
                   !embedding_is_head) {
          embedding_row_bytes = t.bytes.size() / c.vocab_size;
        } else if (name == "embeddings.position_embeddings.weight") {
          position_row_bytes = t.bytes.size() / c.max_positions;
        }
        TypeTotals& tt = by_type[std::string(model::TensorTypeName(t.type))];
        ++tt.tensors;
        tt.elements += elements;
        tt.bytes += t.bytes.size();
        total_bytes += t.bytes.size();
        total_elements += elements;
      });
  auto bits_per_weight = [](uint64_t bytes, uint64_t elements) {
    return elements == 0 ? 0.0 : 8.0 * static_cast<double>(bytes) / static_cast<double>(elements);
  };
  nlohmann::json bytes_by_type, types;
  for (const auto& [name, tt] : by_type) {
    bytes_by_type[name] = tt.bytes;
    types[name] = {{"tensors", tt.tensors},
                   {"elements", tt.elements},
                   {"bytes", tt.bytes},
                   {"bits_per_weight", bits_per_weight(tt.bytes, tt.elements)}};
  }
  const uint64_t kv_elems_per_token = 2 * c.num_layers * c.num_kv_heads * c.head_dim();
  nlohmann::json j = {
      {"path", path},
      {"architecture", model::ArchitectureName(c.architecture)},
      {"layers", c.num_layers},
      {"hidden_size", c.hidden_size},
      {"num_heads", c.num_heads},
      {"num_kv_heads", c.num_kv_heads},
      {"head_dim", c.head_dim()},
      {"ffn_size", c.ffn_size},
      {"vocab_size", c.vocab_size},
      {"max_positions", c.max_positions},
      {"rope",
       {{"theta", c.rope_theta},
        {"style", c.rope_style == model::RopeStyle::kNeox ? "neox" : "interleaved"}}},
      {"tie_embeddings", c.tie_embeddings},
      {"sliding_window", c.window},
      {"parameters", c.ParameterCount()},
      {"weight_bytes", total_bytes},
      {"weight_bytes_by_type", bytes_by_type},
      {"weight_types", types},
      {"bits_per_weight", bits_per_weight(total_bytes, total_elements)},
      {"kv_bytes_per_token", {{"f32", kv_elems_per_token * 4}, {"bf16", kv_elems_per_token * 2}}},
  };
  uint64_t active_bytes = total_bytes - expert_bytes;
  uint64_t active_parameters = c.ParameterCount();
  if (!embedding_is_head) active_bytes -= embedding_row_bytes * (c.vocab_size - 1);
  active_bytes -= position_row_bytes * (c.max_positions > 0 ? c.max_positions - 1 : 0);
  if (c.IsMoe()) {
    const uint64_t idle = c.num_experts - c.experts_per_token;
    active_bytes += expert_bytes / c.num_experts * c.experts_per_token;
    const uint64_t per_expert = 3 * c.hidden_size * c.expert_ffn_size +
                                (c.moe_bias ? 2 * c.expert_ffn_size + c.hidden_size : 0);
    active_parameters -= c.NumMoeLayers() * idle * per_expert;
    const char* routing = "softmax-topk";
    switch (c.routing) {
      case model::Routing::kSoftmaxTopK:
        break;
      case model::Routing::kTopKSoftmax:
        routing = "topk-softmax";
        break;
      case model::Routing::kSigmoidTopK:
        routing = "sigmoid-topk";
        break;
    }
    j["experts"] = {
        {"num_experts", c.num_experts},         {"experts_per_token", c.experts_per_token},
        {"expert_ffn_size", c.expert_ffn_size}, {"routing", routing},
        {"norm_topk_prob", c.norm_topk_prob},   {"expert_weight_bytes", expert_bytes}};
    // The DeepSeek-style options, only where a model has them.
    nlohmann::json& x = j["experts"];
    if (c.router_selection_bias) x["selection_bias"] = true;
    if (c.expert_groups != 1) {
      x["expert_groups"] = c.expert_groups;
      x["expert_groups_used"] = c.expert_groups_used;
    }
    if (c.routed_scale != 1.0) x["routed_scale"] = c.routed_scale;
    if (c.leading_dense_layers != 0) x["leading_dense_layers"] = c.leading_dense_layers;
    if (c.num_shared_experts != 0) x["num_shared_experts"] = c.num_shared_experts;
    if (c.SharedExpertFfnSize() != 0) x["shared_expert_ffn_size"] = c.SharedExpertFfnSize();
  }
  // A token's active parameters (the routed experts only) and the weight
  // bytes its decode step reads: the floor of decode time is this over
  // memory bandwidth.
  j["active_parameters"] = active_parameters;
  j["active_weight_bytes_per_token"] = active_bytes;
  if (c.IsEncoder()) {  // no RoPE: a learned position table, and token types
    j.erase("rope");
    j["positions"] = "absolute";
    j["encoder"] = true;
    j["type_vocab_size"] = c.type_vocab_size;
  }
  if (c.num_labels != 0) j["num_labels"] = c.num_labels;  // a sequence classifier's head
  if (!c.layers.empty()) {
    // Per layer, in order: its window (0 = global) and RoPE base.
    std::vector<uint64_t> windows;
    std::vector<double> thetas;
    for (uint64_t i = 0; i < c.num_layers; ++i) {
      windows.push_back(c.Layer(i).window);
      thetas.push_back(c.Layer(i).rope_theta);
    }
    j["layer_windows"] = windows;
    j["layer_rope_theta"] = thetas;
  }
  // The KV cache's layer groups (kv::PagedKvCache, "Layer groups"): a page
  // holds one group's layers.
  const std::vector<kv::LayerGroup> groups =
      kv::GroupLayers(engine::KvCacheConfigFor(c, 16, 1, DType::kBF16));
  nlohmann::json kv_groups = nlohmann::json::array();
  for (const kv::LayerGroup& g : groups) {
    kv_groups.push_back({{"window", g.window}, {"layers", g.layers}});
  }
  j["kv_layer_groups"] = kv_groups;
  std::cout << j.dump(2) << "\n";
  return 0;
}

}  // namespace folio::cli
