// SaveModel and LoadModel for folders: config.json + safetensors (folio's
// own format and Hugging Face Llama, Mistral, Qwen2, Qwen3, Gemma 2,
// Gemma 3, Phi-3, Qwen3-MoE, Mixtral, Qwen2-MoE, gpt-oss, dots1 and BERT
// checkpoints).
// GGUF files are in gguf_loader.cc.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <system_error>

#include "checkpoint/loaders.h"
#include "folio/checkpoint/model_io.h"
#include "folio/checkpoint/safetensors.h"
#include "folio/core/json_reader.h"
#include "folio/model/model.h"

namespace folio::checkpoint {
namespace {

using nlohmann::json;

constexpr size_t kMaxConfigBytes = 1 << 20;

// Whether a config's value of an option fits what the architecture fixes.
bool Fits(Fixed fixed, bool value) {
  switch (fixed) {
    case Fixed::kNo:
      return true;
    case Fixed::kOff:
      return !value;
    case Fixed::kAlways:
      return value;
  }
  return false;
}

// "A, B, C" of every architecture's Hugging Face class or name, in table
// order.
std::string HfClassList() {
  std::string list;
  for (const ArchitectureTraits& t : model::kArchitectureTraits) {
    if (!list.empty()) list += ", ";
    list += t.hf_class;
  }
  return list;
}
std::string NameList() {
  std::string list;
  for (const ArchitectureTraits& t : model::kArchitectureTraits) {
    if (!list.empty()) list += ", ";
    list += t.name;
  }
  return list;
}

json RopeScalingJson(const RopeScaling& s) {
  switch (s.type) {
    case RopeScaling::Type::kNone:
      return nullptr;
    case RopeScaling::Type::kLinear:
      return {{"rope_type", "linear"}, {"factor", s.factor}};
    case RopeScaling::Type::kLlama3:
      return {{"rope_type", "llama3"},
              {"factor", s.factor},
              {"low_freq_factor", s.low_freq_factor},
              {"high_freq_factor", s.high_freq_factor},
              {"original_max_position_embeddings", s.original_max_positions}};
    case RopeScaling::Type::kLongRope:
      return {{"rope_type", "longrope"},
              {"short_factor", s.short_factor},
              {"long_factor", s.long_factor},
              {"attention_factor", s.attention_factor},
              {"original_max_position_embeddings", s.original_max_positions}};
    case RopeScaling::Type::kYarn:
      return {{"rope_type", "yarn"},
              {"factor", s.factor},
              {"beta_fast", s.beta_fast},
              {"beta_slow", s.beta_slow},
              {"truncate", s.truncate},
              {"attention_factor", s.attention_factor},
              {"original_max_position_embeddings", s.original_max_positions}};
  }
  return nullptr;
}

// Hugging Face's own class when the config is one it can express (NeoX
// RoPE, the architecture's fixed bias/norm choices); FolioForCausalLM with
// every field spelled out otherwise (e.g. a GGUF llama's interleaved RoPE).
json ConfigToJson(const ModelConfig& c) {
  if (c.block == model::Block::kBert) {  // BertModel's own keys
    json id2label = json::object();
    for (uint64_t i = 0; i < c.num_labels; ++i)
      id2label[std::to_string(i)] = "LABEL_" + std::to_string(i);
    json j = {{"architectures", {std::string(model::TraitsOf(c.architecture).hf_class)}},
              {"model_type", "bert"},
              {"hidden_size", c.hidden_size},
              {"num_attention_heads", c.num_heads},
              {"intermediate_size", c.ffn_size},
              {"num_hidden_layers", c.num_layers},
              {"max_position_embeddings", c.max_positions},
              {"vocab_size", c.vocab_size},
              {"type_vocab_size", c.type_vocab_size},
              {"layer_norm_eps", c.norm_eps},
              {"position_embedding_type", "absolute"},
              {"hidden_act", c.activation == model::Activation::kGelu ? "gelu" : "gelu_new"}};
    if (c.num_labels != 0) j["id2label"] = id2label;
    return j;
  }
  const ArchitectureTraits& arch = model::TraitsOf(c.architecture);
  const bool neox = c.rope_style == RopeStyle::kNeox;
  const bool native = arch.hf_native && neox && Fits(arch.attention_bias, c.attention_bias) &&
                      Fits(arch.qk_norm, c.qk_norm);
  const ArchitectureTraits& cls = native ? arch : model::TraitsOf(Architecture::kFolio);
  json j = {{"architectures", {cls.hf_class}},
            {"model_type", cls.name},
            {"hidden_size", c.hidden_size},
            {"num_attention_heads", c.num_heads},
            {"num_key_value_heads", c.num_kv_heads},
            {"head_dim", c.head_dim()},
            {"intermediate_size", c.ffn_size},
            {"num_hidden_layers", c.num_layers},
            {"max_position_embeddings", c.max_positions},
            {"vocab_size", c.vocab_size},
            {"rope_theta", c.rope_theta},
            {"rope_scaling", RopeScalingJson(c.rope_scaling)},
            {"rms_norm_eps", c.norm_eps},
            {"tie_word_embeddings", c.tie_embeddings},
            {"attention_bias", c.attention_bias},
            {"sliding_window", c.window == 0 ? json(nullptr) : json(c.window)},
            {"hidden_act", "silu"}};
  if (c.num_labels != 0) {
    json id2label = json::object();
    for (uint64_t i = 0; i < c.num_labels; ++i) {
      id2label[std::to_string(i)] = "LABEL_" + std::to_string(i);
    }
    j["id2label"] = id2label;
  }
  if (!native) {
    j["folio_architecture"] = arch.name;
    j["rope_style"] = neox ? "neox" : "interleaved";
    j["qk_norm"] = c.qk_norm;
  }
  return j;
}

Status ParseRopeScaling(const json& j, RopeScaling& out) {
  if (!j.is_object()) return Status::InvalidArgument("\"rope_scaling\" must be an object or null");
  const JsonReader r(j, JsonErrorStyle::kConfig);
  std::string type;
  if (r.Has("rope_type")) {
    FOLIO_ASSIGN_OR_RETURN(type, r.String("rope_type"));
  } else {
    FOLIO_ASSIGN_OR_RETURN(type, r.String("type"));
  }
  if (type == "default") return Status::Ok();
  if (type == "linear") {
    out.type = RopeScaling::Type::kLinear;
    FOLIO_ASSIGN_OR_RETURN(out.factor, r.F64("factor"));
    return Status::Ok();
  }
  if (type == "llama3") {
    out.type = RopeScaling::Type::kLlama3;
    FOLIO_ASSIGN_OR_RETURN(out.factor, r.F64("factor"));
    FOLIO_ASSIGN_OR_RETURN(out.low_freq_factor, r.F64("low_freq_factor"));
    FOLIO_ASSIGN_OR_RETURN(out.high_freq_factor, r.F64("high_freq_factor"));
    FOLIO_ASSIGN_OR_RETURN(out.original_max_positions, r.U64("original_max_position_embeddings"));
    return Status::Ok();
  }
  if (type == "longrope" || type == "su") {
    // The rest (original length, factor, attention factor, which list) is
    // settled by FinishRopeScaling once the whole config is read.
    out.type = RopeScaling::Type::kLongRope;
    for (const auto& [key, list] : {std::pair{"short_factor", &out.short_factor},
                                    std::pair{"long_factor", &out.long_factor}}) {
      auto it = j.find(key);
      if (it == j.end() || !it->is_array()) {
        return Status::InvalidArgument(std::string("longrope needs \"") + key +
                                       "\", a list of numbers");
      }
      for (const json& x : *it) {
        if (!x.is_number()) {
          return Status::InvalidArgument(std::string("\"") + key + "\" must hold numbers");
        }
        list->push_back(x.get<double>());
      }
    }
    out.attention_factor = 0;  // 0 = not given
    FOLIO_RETURN_IF_ERROR(r.Optional("attention_factor", out.attention_factor));
    out.original_max_positions = 0;
    return r.Optional("original_max_position_embeddings", out.original_max_positions);
  }
  if (type == "yarn") {
    // Transformers 5's reading: `factor` as given, the original length from
    // the object or else the config's max_position_embeddings (settled by
    // FinishRopeScaling), the attention factor as given or from mscale.
    out.type = RopeScaling::Type::kYarn;
    FOLIO_ASSIGN_OR_RETURN(out.factor, r.F64("factor"));
    out.attention_factor = 0;  // 0 = not given
    double mscale = 0, mscale_all_dim = 0;
    for (const auto& [key, value] :
         {std::pair{"attention_factor", &out.attention_factor}, std::pair{"mscale", &mscale},
          std::pair{"mscale_all_dim", &mscale_all_dim}, std::pair{"beta_fast", &out.beta_fast},
          std::pair{"beta_slow", &out.beta_slow}}) {
      FOLIO_RETURN_IF_ERROR(r.Optional(key, *value));
    }
    FOLIO_RETURN_IF_ERROR(r.Optional("truncate", out.truncate));
    model::SettleYarn(mscale, mscale_all_dim, out);
    out.original_max_positions = 0;
    return r.Optional("original_max_position_embeddings", out.original_max_positions);
  }
  return Status::Unimplemented("rope_scaling type \"" + type +
                               "\" (folio supports default, linear, llama3, longrope and yarn)");
}

// Longrope's original length from the scaling object or the config's top
// level, then the rest settled (model::SettleLongRope); yarn's from the
// object or else the config's max_position_embeddings.
Status FinishRopeScaling(const json& j, uint64_t max_positions, RopeScaling& s) {
  if (s.type == RopeScaling::Type::kYarn && s.original_max_positions == 0) {
    s.original_max_positions = max_positions;
  }
  if (s.type != RopeScaling::Type::kLongRope) return Status::Ok();
  if (s.original_max_positions == 0) {
    FOLIO_ASSIGN_OR_RETURN(
        s.original_max_positions,
        JsonReader(j, JsonErrorStyle::kConfig).U64("original_max_position_embeddings"));
  }
  if (s.original_max_positions == 0) {
    return Status::InvalidArgument("\"original_max_position_embeddings\" must be > 0");
  }
  model::SettleLongRope(max_positions, s);
  return Status::Ok();
}

// Transformers 5's rope_parameters: {"rope_type", "rope_theta", and the
// type's own keys} — rope_scaling and rope_theta in one object.
Status ParseRopeParameters(const json& j, const std::string& where, double& theta,
                           RopeScaling& scaling) {
  if (!j.is_object()) return Status::InvalidArgument(where + " must be an object");
  const Result<double> rope_theta = JsonReader(j, JsonErrorStyle::kConfig).F64("rope_theta");
  if (!rope_theta.ok()) return rope_theta.error().WithContext(where);
  theta = *rope_theta;
  if (!j.contains("rope_type") && !j.contains("type")) return Status::Ok();
  return ParseRopeScaling(j, scaling).WithContext(where);
}

// config.json's layer_types: one "sliding_attention" or "full_attention"
// per layer (sliding.size() of them) into sliding.
Status ReadLayerTypes(const json& types, std::vector<bool>& sliding) {
  if (!types.is_array() || types.size() != sliding.size()) {
    return Status::InvalidArgument("\"layer_types\" must list " + std::to_string(sliding.size()) +
                                   " layers");
  }
  for (size_t i = 0; i < sliding.size(); ++i) {
    if (types[i] != "sliding_attention" && types[i] != "full_attention") {
      return Status::InvalidArgument("layer_types[" + std::to_string(i) + "] is " +
                                     types[i].dump() + " (sliding_attention or full_attention)");
    }
    sliding[i] = types[i] == "sliding_attention";
  }
  return Status::Ok();
}

// gpt-oss: experts of width intermediate_size routed top-k then softmax,
// biases on the router and experts and (with attention_bias, always on) on
// the output projection, the clamped SwiGLU, attention sinks, and
// layer_types' sliding and full layers on one RoPE.
Status GptOssFromJson(const json& j, ModelConfig& c) {
  const JsonReader r(j, JsonErrorStyle::kConfig);
  c.expert_ffn_size = c.ffn_size;
  c.routing = model::Routing::kTopKSoftmax;
  c.norm_topk_prob = true;  // the softmax over the chosen sums to 1
  c.moe_bias = true;
  c.output_bias = true;
  c.attention_sinks = true;
  FOLIO_ASSIGN_OR_RETURN(c.swiglu_limit, r.F64("swiglu_limit"));
  FOLIO_RETURN_IF_ERROR(r.Optional("swiglu_alpha", c.swiglu_alpha));
  bool attention_bias = true;
  FOLIO_RETURN_IF_ERROR(r.Optional("attention_bias", attention_bias));
  if (!attention_bias) return Status::Unimplemented("attention_bias false (gpt-oss)");
  FOLIO_ASSIGN_OR_RETURN(c.window, r.U64("sliding_window"));
  if (c.window == 0) return Status::InvalidArgument("\"sliding_window\" must be > 0");
  // layer_types, else transformers' default: even layers slide.
  std::vector<bool> sliding(c.num_layers);
  for (uint64_t i = 0; i < c.num_layers; ++i) sliding[i] = i % 2 == 0;
  if (r.Has("layer_types")) FOLIO_RETURN_IF_ERROR(ReadLayerTypes(j["layer_types"], sliding));
  c.layers.clear();
  for (uint64_t i = 0; i < c.num_layers; ++i) {
    c.layers.push_back(LayerConfig{sliding[i] ? c.window : 0, c.rope_theta, c.rope_scaling});
  }
  return Status::Ok();
}

// dots1's DeepSeek-style mixture (Dots1Config): n_routed_experts of
// moe_intermediate_size, num_experts_per_tok of them chosen by sigmoid
// scores plus the router's e_score_correction_bias within the topk_group
// best of n_group groups, weights renormalised when norm_topk_prob (false
// by default) and times routed_scaling_factor (1); n_shared_experts
// ungated shared experts; first_k_dense_replace leading dense layers of
// intermediate_size; attention_bias on q, k, v and o alike. Sliding
// layers as transformers' Dots1Config makes them: layer_types, else layers
// from max_window_layers (62) on when sliding_window (4096) is not null.
// scoring_func, topk_method and moe_layer_freq, which transformers does
// not read, are checked to say this router.
Status DeepSeekMoeFromJson(const json& j, ModelConfig& c) {
  const JsonReader r(j, JsonErrorStyle::kConfig);
  FOLIO_ASSIGN_OR_RETURN(c.num_experts, r.U64("n_routed_experts"));
  FOLIO_ASSIGN_OR_RETURN(c.experts_per_token, r.U64("num_experts_per_tok"));
  FOLIO_ASSIGN_OR_RETURN(c.expert_ffn_size, r.U64("moe_intermediate_size"));
  FOLIO_ASSIGN_OR_RETURN(c.num_shared_experts, r.U64("n_shared_experts"));
  c.norm_topk_prob = false;  // Dots1Config's defaults
  c.expert_groups = 1;
  c.expert_groups_used = 1;
  c.routed_scale = 1.0;
  c.leading_dense_layers = 0;
  FOLIO_RETURN_IF_ERROR(r.Optional("norm_topk_prob", c.norm_topk_prob));
  FOLIO_RETURN_IF_ERROR(r.Optional("n_group", c.expert_groups));
  FOLIO_RETURN_IF_ERROR(r.Optional("topk_group", c.expert_groups_used));
  FOLIO_RETURN_IF_ERROR(r.Optional("routed_scaling_factor", c.routed_scale));
  FOLIO_RETURN_IF_ERROR(r.Optional("first_k_dense_replace", c.leading_dense_layers));
  c.router_selection_bias = true;  // the router's buffer is always there
  c.output_bias = c.attention_bias;
  for (const auto& [key, accepted] :
       {std::pair{"scoring_func", "sigmoid"}, std::pair{"topk_method", "noaux_tc"}}) {
    std::string value = accepted;
    FOLIO_RETURN_IF_ERROR(r.Optional(key, value));
    // Early dots.llm1 configs spelled the scoring "noaux_tc" too.
    const bool same =
        value == accepted || (std::string_view(key) == "scoring_func" && value == "noaux_tc");
    if (!same) {
      return Status::Unimplemented(std::string(key) + " \"" + value + "\" (dots1 routes by " +
                                   "sigmoid scores plus the selection bias: " + accepted + ")");
    }
  }
  FOLIO_RETURN_IF_ERROR(CheckRouter(c, {"\"n_group\"", "\"topk_group\"",
                                        "\"routed_scaling_factor\"", "\"first_k_dense_replace\""}));
  uint64_t freq = 1;
  FOLIO_RETURN_IF_ERROR(r.Optional("moe_layer_freq", freq));
  if (freq != 1) {
    return Status::Unimplemented("moe_layer_freq " + std::to_string(freq) +
                                 " (dense layers between mixtures)");
  }
  std::vector<bool> sliding(c.num_layers);
  std::optional<uint64_t> window = 4096;
  if (j.contains("sliding_window") && j["sliding_window"].is_null()) window.reset();
  FOLIO_RETURN_IF_ERROR(r.Optional("sliding_window", window));
  if (r.Has("layer_types")) {
    FOLIO_RETURN_IF_ERROR(ReadLayerTypes(j["layer_types"], sliding));
  } else if (window) {
    uint64_t first = 62;
    FOLIO_RETURN_IF_ERROR(r.Optional("max_window_layers", first));
    for (uint64_t i = first; i < c.num_layers; ++i) sliding[i] = true;
  }
  c.window = 0;
  c.layers.clear();
  if (std::find(sliding.begin(), sliding.end(), true) == sliding.end()) return Status::Ok();
  if (!window || *window == 0) {
    return Status::InvalidArgument("sliding layers need \"sliding_window\" > 0");
  }
  c.window = *window;
  for (uint64_t i = 0; i < c.num_layers; ++i) {
    c.layers.push_back(LayerConfig{sliding[i] ? c.window : 0, c.rope_theta, c.rope_scaling});
  }
  return Status::Ok();
}

// Gemma 2 and 3: per-layer windows from layer_types (or a period), each
// kind of layer with its RoPE, soft-caps where the family has them, and the
// family's fixed choices checked by key.
Status InterleavedLayersFromJson(const json& j, const ArchitectureTraits& t, ModelConfig& c) {
  const JsonReader r(j, JsonErrorStyle::kConfig);
  std::string act = "gelu_pytorch_tanh";
  FOLIO_RETURN_IF_ERROR(r.Optional("hidden_activation", act));
  if (act != "gelu_pytorch_tanh") {
    return Status::Unimplemented("hidden_activation \"" + act + "\" (only gelu_pytorch_tanh)");
  }
  for (const auto& [key, cap] : {std::pair{"attn_logit_softcapping", &c.attn_logit_softcap},
                                 std::pair{"final_logit_softcapping", &c.final_logit_softcap}}) {
    if (!r.Has(key)) continue;
    if (!t.softcaps) {
      return Status::Unimplemented(std::string(key) + " (logit soft-capping in " +
                                   std::string(t.name) + ")");
    }
    FOLIO_ASSIGN_OR_RETURN(*cap, r.F64(key));
  }
  bool flag = false;
  FOLIO_RETURN_IF_ERROR(r.Optional("use_bidirectional_attention", flag));
  if (flag) return Status::Unimplemented("use_bidirectional_attention true");
  if (c.attention_bias) return Status::Unimplemented("attention_bias true");
  double scalar = 0;
  FOLIO_ASSIGN_OR_RETURN(scalar, r.F64("query_pre_attn_scalar"));
  if (!(scalar > 0) || !std::isfinite(scalar)) {
    return Status::InvalidArgument("\"query_pre_attn_scalar\" must be > 0");
  }
  c.attention_scale = 1.0 / std::sqrt(scalar);
  FOLIO_ASSIGN_OR_RETURN(c.window, r.U64("sliding_window"));
  if (c.window == 0) return Status::InvalidArgument("\"sliding_window\" must be > 0");

  std::vector<bool> sliding(c.num_layers);
  if (r.Has("layer_types")) {
    FOLIO_RETURN_IF_ERROR(ReadLayerTypes(j["layer_types"], sliding));
  } else if (r.Has("sliding_window_pattern")) {
    uint64_t period = 0;
    FOLIO_ASSIGN_OR_RETURN(period, r.U64("sliding_window_pattern"));
    if (period == 0) return Status::InvalidArgument("\"sliding_window_pattern\" must be > 0");
    for (uint64_t i = 0; i < c.num_layers; ++i) sliding[i] = (i + 1) % period != 0;
  } else if (t.window_period == 2) {
    // Gemma 2's configs before layer_types: the layers simply alternate.
    for (uint64_t i = 0; i < c.num_layers; ++i) sliding[i] = (i + 1) % 2 != 0;
  } else {
    return Status::NotFound("missing key \"layer_types\" (or \"sliding_window_pattern\")");
  }

  // The two kinds' RoPE: rope_parameters keyed by layer type (or one for
  // both), or the older rope_theta + rope_scaling (global layers) and, where
  // the family has a local base, rope_local_base_freq.
  LayerConfig global{0, c.rope_theta, c.rope_scaling}, local{c.window, c.rope_theta, {}};
  const bool per_type = r.Has("rope_parameters") && j["rope_parameters"].is_object() &&
                        j["rope_parameters"].contains("full_attention");
  if (r.Has("rope_parameters") && !per_type) {
    if (t.local_rope_base != 0) {
      return Status::InvalidArgument(
          "\"rope_parameters\" must hold full_attention and sliding_attention");
    }
    FOLIO_RETURN_IF_ERROR(ParseRopeParameters(j["rope_parameters"], "rope_parameters",
                                              global.rope_theta, global.rope_scaling));
    local.rope_theta = global.rope_theta;
    local.rope_scaling = global.rope_scaling;
    c.rope_theta = global.rope_theta;
    c.rope_scaling = global.rope_scaling;
  } else if (per_type) {
    const json& rp = j["rope_parameters"];
    if (!rp.contains("sliding_attention")) {
      return Status::InvalidArgument(
          "\"rope_parameters\" must hold full_attention and sliding_attention");
    }
    FOLIO_RETURN_IF_ERROR(ParseRopeParameters(rp["full_attention"],
                                              "rope_parameters.full_attention", global.rope_theta,
                                              global.rope_scaling));
    FOLIO_RETURN_IF_ERROR(ParseRopeParameters(rp["sliding_attention"],
                                              "rope_parameters.sliding_attention", local.rope_theta,
                                              local.rope_scaling));
    c.rope_theta = global.rope_theta;
    c.rope_scaling = global.rope_scaling;
  } else {
    FOLIO_ASSIGN_OR_RETURN(global.rope_theta, r.F64("rope_theta"));
    local.rope_theta = global.rope_theta;
    if (t.local_rope_base != 0) {
      FOLIO_ASSIGN_OR_RETURN(local.rope_theta, r.F64("rope_local_base_freq"));
    }
  }
  c.layers.resize(c.num_layers);
  for (uint64_t i = 0; i < c.num_layers; ++i) c.layers[i] = sliding[i] ? local : global;
  return Status::Ok();
}

// A *ForSequenceClassification config's outputs: PretrainedConfig's
// num_labels, the size of id2label (2 by default), unless num_labels says.
Result<uint64_t> NumLabels(const json& j) {
  const JsonReader r(j, JsonErrorStyle::kConfig);
  uint64_t n = 2;
  if (r.Has("id2label")) {
    if (!j["id2label"].is_object() || j["id2label"].empty()) {
      return Status::InvalidArgument("\"id2label\" must be a non-empty object");
    }
    n = j["id2label"].size();
  }
  FOLIO_RETURN_IF_ERROR(r.Optional("num_labels", n));
  return n;
}

// BertModel's config.json: absolute positions only; the MLP's GELU exact
// ("gelu") or in its tanh form ("gelu_new", "gelu_pytorch_tanh"); an
// encoder only (a decoder or cross-attention is refused).
Result<ModelConfig> BertConfigFromJson(const json& j, Architecture architecture) {
  const JsonReader r(j, JsonErrorStyle::kConfig);
  ModelConfig c;
  c.architecture = architecture;
  c.block = model::Block::kBert;
  c.rope_style = ModelConfig().rope_style;
  c.tie_embeddings = false;
  FOLIO_ASSIGN_OR_RETURN(c.hidden_size, r.U64("hidden_size"));
  FOLIO_ASSIGN_OR_RETURN(c.num_heads, r.U64("num_attention_heads"));
  c.num_kv_heads = c.num_heads;
  FOLIO_ASSIGN_OR_RETURN(c.ffn_size, r.U64("intermediate_size"));
  FOLIO_ASSIGN_OR_RETURN(c.num_layers, r.U64("num_hidden_layers"));
  FOLIO_ASSIGN_OR_RETURN(c.max_positions, r.U64("max_position_embeddings"));
  FOLIO_ASSIGN_OR_RETURN(c.vocab_size, r.U64("vocab_size"));
  c.type_vocab_size = 2;  // BertConfig's defaults
  c.norm_eps = 1e-12;
  FOLIO_RETURN_IF_ERROR(r.Optional("type_vocab_size", c.type_vocab_size));
  FOLIO_RETURN_IF_ERROR(r.Optional("layer_norm_eps", c.norm_eps));
  std::string act = "gelu", positions = "absolute";
  FOLIO_RETURN_IF_ERROR(r.Optional("hidden_act", act));
  if (act == "gelu") {
    c.activation = model::Activation::kGelu;
  } else if (act == "gelu_new" || act == "gelu_pytorch_tanh") {
    c.activation = model::Activation::kGeluTanh;
  } else {
    return Status::Unimplemented("hidden_act \"" + act +
                                 "\" (a BERT block runs gelu, gelu_new or gelu_pytorch_tanh)");
  }
  FOLIO_RETURN_IF_ERROR(r.Optional("position_embedding_type", positions));
  if (positions != "absolute") {
    return Status::Unimplemented("position_embedding_type \"" + positions + "\" (only absolute)");
  }
  if (architecture == Architecture::kBertClassifier) {
    FOLIO_ASSIGN_OR_RETURN(c.num_labels, NumLabels(j));
  }
  for (const char* key : {"is_decoder", "add_cross_attention"}) {
    bool on = false;
    FOLIO_RETURN_IF_ERROR(r.Optional(key, on));
    if (on)
      return Status::Unimplemented(std::string(key) + " true (folio runs BERT as an encoder)");
  }
  FOLIO_RETURN_IF_ERROR(c.Validate());
  return c;
}

Result<ModelConfig> ConfigFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("config is not a JSON object");
  auto arch = j.find("architectures");
  std::optional<Architecture> cls;
  if (arch != j.end() && arch->is_array() && arch->size() == 1 && (*arch)[0].is_string()) {
    cls = model::ArchitectureFromHfClass((*arch)[0].get<std::string>());
  }
  if (!cls) {
    return Status::Unimplemented("architectures must be one of " + HfClassList() + " (got " +
                                 (arch == j.end() ? std::string("nothing") : arch->dump()) + ")");
  }
  const ArchitectureTraits& t = model::TraitsOf(*cls);
  if (t.block == model::Block::kBert) return BertConfigFromJson(j, *cls);
  const JsonReader r(j, JsonErrorStyle::kConfig);
  ModelConfig c;
  c.architecture = *cls;
  c.rope_style = RopeStyle::kNeox;
  c.tie_embeddings = false;  // the default of every supported HF class
  c.rope_theta = 10000.0;
  c.norm_eps = 1e-6;
  FOLIO_ASSIGN_OR_RETURN(c.hidden_size, r.U64("hidden_size"));
  FOLIO_ASSIGN_OR_RETURN(c.num_heads, r.U64("num_attention_heads"));
  c.num_kv_heads = c.num_heads;
  FOLIO_RETURN_IF_ERROR(r.Optional("num_key_value_heads", c.num_kv_heads));
  FOLIO_RETURN_IF_ERROR(r.Optional("head_dim", c.explicit_head_dim));
  FOLIO_ASSIGN_OR_RETURN(c.ffn_size, r.U64("intermediate_size"));
  FOLIO_ASSIGN_OR_RETURN(c.num_layers, r.U64("num_hidden_layers"));
  FOLIO_ASSIGN_OR_RETURN(c.max_positions, r.U64("max_position_embeddings"));
  FOLIO_ASSIGN_OR_RETURN(c.vocab_size, r.U64("vocab_size"));
  FOLIO_RETURN_IF_ERROR(r.Optional("rope_theta", c.rope_theta));
  FOLIO_RETURN_IF_ERROR(r.Optional("rms_norm_eps", c.norm_eps));
  FOLIO_RETURN_IF_ERROR(r.Optional("tie_word_embeddings", c.tie_embeddings));
  FOLIO_RETURN_IF_ERROR(r.Optional("attention_bias", c.attention_bias));
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    FOLIO_RETURN_IF_ERROR(ParseRopeScaling(j["rope_scaling"], c.rope_scaling));
  }
  if (r.Has("rope_parameters") && t.window_period == 0) {
    if (r.Has("rope_scaling")) {
      return Status::InvalidArgument("both \"rope_parameters\" and \"rope_scaling\"");
    }
    FOLIO_RETURN_IF_ERROR(
        ParseRopeParameters(j["rope_parameters"], "rope_parameters", c.rope_theta, c.rope_scaling));
  }
  c.activation = t.activation;
  c.norm_layout = t.norm_layout;
  c.scale_embedding = t.scale_embedding;
  c.norm_unit_offset = t.hf_norm_unit_offset;
  if (t.activation == model::Activation::kSilu) {
    std::string act = "silu";
    FOLIO_RETURN_IF_ERROR(r.Optional("hidden_act", act));
    if (act != "silu") return Status::Unimplemented("hidden_act \"" + act + "\" (only silu)");
  }
  bool mlp_bias = false;
  FOLIO_RETURN_IF_ERROR(r.Optional("mlp_bias", mlp_bias));
  if (mlp_bias) return Status::Unimplemented("mlp_bias true");
  c.routing = t.routing;
  if (t.deepseek_moe) {
    FOLIO_RETURN_IF_ERROR(DeepSeekMoeFromJson(j, c));
  } else if (t.moe) {
    // The experts: num_local_experts (transformers 5) or num_experts, the
    // chosen few, their width (Mixtral's intermediate_size is it), and
    // whether the chosen weights are renormalised (always, in Mixtral).
    const char* count = r.Has("num_local_experts") ? "num_local_experts" : "num_experts";
    FOLIO_ASSIGN_OR_RETURN(c.num_experts, r.U64(count));
    FOLIO_ASSIGN_OR_RETURN(c.experts_per_token, r.U64("num_experts_per_tok"));
    if (t.hf_mixtral_names) {
      c.expert_ffn_size = c.ffn_size;
      c.norm_topk_prob = true;
    } else if (t.hf_gpt_oss) {
      FOLIO_RETURN_IF_ERROR(GptOssFromJson(j, c));
    } else {
      FOLIO_ASSIGN_OR_RETURN(c.expert_ffn_size, r.U64("moe_intermediate_size"));
      c.norm_topk_prob = false;  // Qwen3MoeConfig's default
      FOLIO_RETURN_IF_ERROR(r.Optional("norm_topk_prob", c.norm_topk_prob));
      uint64_t step = 1;
      FOLIO_RETURN_IF_ERROR(r.Optional("decoder_sparse_step", step));
      if (step != 1) {
        return Status::Unimplemented("decoder_sparse_step " + std::to_string(step) +
                                     " (dense layers between mixtures)");
      }
      if (r.Has("mlp_only_layers") &&
          !(j["mlp_only_layers"].is_array() && j["mlp_only_layers"].empty())) {
        return Status::Unimplemented("mlp_only_layers (dense layers between mixtures)");
      }
    }
    // Qwen2-MoE's shared expert (and its sigmoid gate): always there when
    // the width is.
    FOLIO_RETURN_IF_ERROR(r.Optional("shared_expert_intermediate_size", c.shared_expert_ffn_size));
    bool qkv_bias = true;
    FOLIO_RETURN_IF_ERROR(r.Optional("qkv_bias", qkv_bias));
    if (!qkv_bias) return Status::Unimplemented("qkv_bias false");
  }
  if (t.sequence_classifier) {
    FOLIO_ASSIGN_OR_RETURN(c.num_labels, NumLabels(j));
  }
  if (t.window_period != 0) {
    if (!j.contains("tie_word_embeddings")) c.tie_embeddings = true;  // Gemma's default
    FOLIO_RETURN_IF_ERROR(InterleavedLayersFromJson(j, t, c));
  }
  bool use_sliding = t.hf_sliding_window_default;
  FOLIO_RETURN_IF_ERROR(r.Optional("use_sliding_window", use_sliding));
  if (use_sliding && t.window_period == 0 && !t.deepseek_moe) {
    FOLIO_RETURN_IF_ERROR(r.Optional("sliding_window", c.window));
    if (c.window != 0 && t.hf_window_per_layer) {
      return Status::Unimplemented("use_sliding_window with per-layer windows (Qwen)");
    }
  }
  if (t.attention_bias == Fixed::kAlways) c.attention_bias = true;
  if (t.qk_norm == Fixed::kAlways) c.qk_norm = true;
  if (!t.hf_native) {
    std::string style;
    FOLIO_ASSIGN_OR_RETURN(style, r.String("rope_style"));
    if (style != "interleaved" && style != "neox") {
      return Status::InvalidArgument("\"rope_style\" must be \"interleaved\" or \"neox\"");
    }
    c.rope_style = style == "neox" ? RopeStyle::kNeox : RopeStyle::kInterleaved;
    if (r.Has("folio_architecture")) {
      std::string name;
      FOLIO_ASSIGN_OR_RETURN(name, r.String("folio_architecture"));
      std::optional<Architecture> named = model::ArchitectureFromName(name);
      if (!named) {
        return Status::Unimplemented("\"folio_architecture\" \"" + name + "\" (folio runs " +
                                     NameList() + ")");
      }
      const ArchitectureTraits& nt = model::TraitsOf(*named);
      if (nt.norm_layout != model::NormLayout::kPre || nt.activation != model::Activation::kSilu ||
          nt.window_period != 0) {
        return Status::Unimplemented("\"folio_architecture\" \"" + name +
                                     "\": FolioForCausalLM spells out pre-norm SwiGLU blocks; " +
                                     name + " checkpoints load through " +
                                     std::string(nt.hf_class));
      }
      c.architecture = *named;
    }
    FOLIO_RETURN_IF_ERROR(r.Optional("qk_norm", c.qk_norm));
    auto tie = j.find("tie_word_embeddings");
    if (tie == j.end() || !tie->is_boolean()) {
      return Status::InvalidArgument("\"tie_word_embeddings\" must be true or false");
    }
  }
  // Partial rotary embeddings (Phi-4-mini): top level, or in
  // rope_parameters (transformers 5).
  double partial = 1.0;
  FOLIO_RETURN_IF_ERROR(r.Optional("partial_rotary_factor", partial));
  if (r.Has("rope_parameters") && j["rope_parameters"].is_object() &&
      j["rope_parameters"].contains("partial_rotary_factor")) {
    const Result<double> nested =
        JsonReader(j["rope_parameters"], JsonErrorStyle::kConfig).F64("partial_rotary_factor");
    if (!nested.ok()) return nested.error().WithContext("rope_parameters");
    partial = *nested;
  }
  if (!(partial > 0 && partial <= 1)) {
    return Status::InvalidArgument("\"partial_rotary_factor\" must be in (0, 1]");
  }
  if (partial < 1 && c.num_heads != 0) {
    // Hugging Face: int(head_dim * partial_rotary_factor) features rotate.
    c.rotary_dim = static_cast<uint64_t>(static_cast<double>(c.head_dim()) * partial);
  }
  FOLIO_RETURN_IF_ERROR(FinishRopeScaling(j, c.max_positions, c.rope_scaling));
  for (LayerConfig& l : c.layers) {
    FOLIO_RETURN_IF_ERROR(FinishRopeScaling(j, c.max_positions, l.rope_scaling));
  }
  if (c.explicit_head_dim == c.hidden_size / std::max<uint64_t>(c.num_heads, 1) &&
      c.hidden_size % std::max<uint64_t>(c.num_heads, 1) == 0) {
    c.explicit_head_dim = 0;  // canonical form: derived
  }
  FOLIO_RETURN_IF_ERROR(c.Validate());
  return c;
}

Status WriteFileAtomically(const std::filesystem::path& path, const std::string& data) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) return Status::IoError("cannot write " + tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::IoError("cannot rename " + tmp.string() + ": " + ec.message());
  return Status::Ok();
}

Result<json> ReadJsonFile(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return Status::NotFound("cannot read " + path.string() + ": " + ec.message());
  if (size > kMaxConfigBytes) {
    return Status::InvalidArgument(path.string() + " is " + std::to_string(size) +
                                   " bytes; the limit is " + std::to_string(kMaxConfigBytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  if (!in) return Status::IoError("cannot read " + path.string());
  json j = json::parse(s.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Corruption(path.string() + ": not valid JSON");
  return j;
}

Result<TensorType> FromSafetensorsDType(const TensorInfo& info, const std::string& name) {
  if (!info.unread_dtype.empty()) {
    return Status::Unimplemented("tensor " + name + " is " + std::string(info.unread_dtype) +
                                 "; weights must be a float type");
  }
  const DType d = info.dtype;
  switch (d) {
    case DType::kF64:
      return TensorType::kF64;
    case DType::kF32:
      return TensorType::kF32;
    case DType::kF16:
      return TensorType::kF16;
    case DType::kBF16:
      return TensorType::kBF16;
    case DType::kI8:
    case DType::kF8E4M3:
      break;
  }
  return Status::Unimplemented("tensor " + name + " is " + std::string(DTypeName(d)) +
                               "; weights must be a float type");
}

// The safetensors files of a folder: model.safetensors, or the shards named
// by model.safetensors.index.json.
Result<std::vector<std::shared_ptr<SafetensorsFile>>> OpenWeights(
    const std::filesystem::path& dir) {
  std::vector<std::shared_ptr<SafetensorsFile>> files;
  const auto index_path = dir / "model.safetensors.index.json";
  std::vector<std::string> names;
  if (std::filesystem::exists(index_path)) {
    FOLIO_ASSIGN_OR_RETURN(json index, ReadJsonFile(index_path));
    auto map = index.find("weight_map");
    if (!index.is_object() || map == index.end() || !map->is_object()) {
      return Status::Corruption(index_path.string() + ": missing object \"weight_map\"");
    }
    std::set<std::string> shards;
    for (const auto& [tensor, file] : map->items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos ||
          file.get<std::string>().empty()) {
        return Status::Corruption(index_path.string() + ": weight_map[\"" + tensor +
                                  "\"] must be a file name in the folder");
      }
      shards.insert(file.get<std::string>());
    }
    names.assign(shards.begin(), shards.end());
  } else {
    names.push_back("model.safetensors");
  }
  for (const std::string& name : names) {
    FOLIO_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(dir / name));
    files.push_back(std::make_shared<SafetensorsFile>(std::move(f)));
  }
  return files;
}

using FoundTensors =
    std::map<std::string, std::pair<const TensorInfo*, std::shared_ptr<SafetensorsFile>>>;

// A gpt-oss MXFP4 expert weight: the U8 tensors stored + "_blocks" and
// stored + "_scales", both added to `used`.
Status ReadGptOssMxfp4Expert(const ModelConfig& config, const FoundTensors& found,
                             const GptOssExpertPart& part, const std::filesystem::path& dir,
                             std::set<std::string>& used, Tensor& t) {
  StoredBytes stored[2];
  for (size_t i = 0; i < 2; ++i) {
    const std::string name = part.stored + (i == 0 ? "_blocks" : "_scales");
    auto it = found.find(name);
    if (it == found.end()) return Status::NotFound(dir.string() + ": missing tensor " + name);
    const auto& [info, file] = it->second;
    if (info->unread_dtype != "U8") {
      const std::string_view dtype =
          info->unread_dtype.empty() ? DTypeName(info->dtype) : info->unread_dtype;
      return Status::InvalidArgument(file->source() + ": tensor " + name + " is " +
                                     std::string(dtype) + "; MXFP4 blocks and scales are U8");
    }
    stored[i] = {name, info->shape, file->Data(*info)};
    used.insert(name);
  }
  Result<Tensor> cut = GptOssMxfp4ExpertTensor(config, stored[0], stored[1], part);
  if (!cut) return cut.error().WithContext(dir.string());
  t = *std::move(cut);
  return Status::Ok();
}

// One gpt-oss expert tensor, cut from the fused tensor that holds it (or
// from its MXFP4 blocks and scales); the stored names read go to `used`.
Status ReadGptOssExpert(const ModelConfig& config, const FoundTensors& found,
                        const GptOssExpertPart& part, const std::string& name,
                        const std::filesystem::path& dir, std::set<std::string>& used, Tensor& t) {
  auto it = found.find(part.stored);
  if (it == found.end()) {
    if (!part.bias && found.count(part.stored + "_blocks") != 0) {
      return ReadGptOssMxfp4Expert(config, found, part, dir, used, t);
    }
    return Status::NotFound(dir.string() + ": missing tensor " + part.stored);
  }
  const auto& [info, file] = it->second;
  Result<TensorType> type = FromSafetensorsDType(*info, part.stored);
  if (!type) return type.error().WithContext(file->source());
  Tensor stored;
  stored.type = *type;
  stored.shape = info->shape;
  stored.bytes = file->Data(*info);
  stored.owner = file;
  const std::optional<uint64_t> bytes = model::TensorBytes(stored.type, stored.shape);
  if (!bytes || *bytes != stored.bytes.size()) {
    return Status::InvalidArgument(file->source() + ": tensor " + part.stored +
                                   " has a byte size that does not match its shape");
  }
  Result<Tensor> cut = GptOssExpertTensor(config, stored, part, name);
  if (!cut) return cut.error().WithContext(file->source());
  t = *std::move(cut);
  used.insert(part.stored);
  return Status::Ok();
}

Result<Model> LoadFolder(const std::filesystem::path& dir) {
  const auto config_path = dir / "config.json";
  FOLIO_ASSIGN_OR_RETURN(json j, ReadJsonFile(config_path));
  Result<ModelConfig> config = ConfigFromJson(j);
  if (!config) return config.error().WithContext(config_path.string());
  FOLIO_ASSIGN_OR_RETURN(auto files, OpenWeights(dir));

  // Every tensor by name, with the file that holds it.
  FoundTensors found;
  for (const auto& f : files) {
    for (const TensorInfo& info : f->tensors()) {
      if (!found.emplace(info.name, std::pair{&info, f}).second) {
        return Status::Corruption(f->source() + ": tensor " + info.name +
                                  " appears in more than one shard");
      }
    }
  }
  ModelWeights weights;
  weights.layers.resize(config->num_layers);
  Status status;
  std::set<std::string> fused;  // fused tensors read (Phi-3, gpt-oss), split below
  ForEachTensor(*config, weights,
                [&](const std::string& name, const std::vector<uint64_t>&, Tensor& t) {
                  if (!status.ok()) return;
                  if (const auto expert = GptOssExpertPartOf(*config, name)) {
                    status = ReadGptOssExpert(*config, found, *expert, name, dir, fused, t);
                    return;
                  }
                  const std::optional<FusedPart> part = FusedPartOf(*config, name);
                  const std::string stored = part ? part->stored : HfStoredName(*config, name);
                  auto it = found.find(stored);
                  if (it == found.end() && config->IsEncoder()) {
                    it = found.find("bert." + stored);  // a BertFor* checkpoint's encoder
                  }
                  if (it == found.end()) {
                    status = Status::NotFound(dir.string() + ": missing tensor " + stored);
                    return;
                  }
                  const auto& [info, file] = it->second;
                  Result<TensorType> type = FromSafetensorsDType(*info, stored);
                  if (!type) {
                    status = type.error().WithContext(file->source());
                    return;
                  }
                  t.type = *type;
                  t.shape = info->shape;
                  t.bytes = file->Data(*info);
                  t.owner = file;
                  if (!part) {
                    found.erase(it);
                    return;
                  }
                  Result<Tensor> slice = RowSlice(t, *part, FusedRows(*config, *part), stored);
                  if (!slice) {
                    status = slice.error().WithContext(file->source());
                    return;
                  }
                  t = *std::move(slice);
                  fused.insert(stored);
                });
  FOLIO_RETURN_IF_ERROR(status);
  for (const std::string& name : fused) found.erase(name);
  for (const auto& [name, where] : found) {
    // Tied checkpoints may still carry the head; old ones carry RoPE tables.
    // A BERT checkpoint's pooler and masked-LM head are not the encoder's
    // (an embedding pools the last hidden states itself), nor are the
    // position ids it stores as a buffer.
    const bool pooler = name.starts_with("pooler.") || name.starts_with("bert.pooler.");
    const bool bert_extra =
        config->IsEncoder() && ((pooler && config->num_labels == 0) || name.starts_with("cls.") ||
                                name.ends_with("embeddings.position_ids"));
    const bool ignorable = (config->tie_embeddings && name == "lm_head.weight") ||
                           name.ends_with("rotary_emb.inv_freq") || bert_extra;
    if (!ignorable) {
      return Status::InvalidArgument(where.second->source() + ": unexpected tensor " + name);
    }
  }
  Result<Model> model = Model::Create(*config, std::move(weights), /*check_finite=*/false);
  if (!model) return model.error().WithContext(dir.string());
  return model;
}

}  // namespace

Result<Model> LoadFolderModel(const std::filesystem::path& dir) { return LoadFolder(dir); }

Status CheckRouter(const ModelConfig& c, const RouterKeys& keys) {
  const uint64_t groups = c.expert_groups, used = c.expert_groups_used;
  if (groups == 0 || c.num_experts % groups != 0 || (groups > 1 && c.num_experts / groups < 2)) {
    return Status::InvalidArgument(keys.groups + " " + std::to_string(groups) + " must split the " +
                                   std::to_string(c.num_experts) +
                                   " experts into groups of at least two");
  }
  if (used == 0 || used > groups) {
    return Status::InvalidArgument(keys.groups_used + " " + std::to_string(used) +
                                   " must be in [1, " + std::to_string(groups) + "]");
  }
  if (groups > 1 && c.experts_per_token > used * (c.num_experts / groups)) {
    return Status::InvalidArgument(keys.groups_used + " " + std::to_string(used) + " leaves " +
                                   std::to_string(used * (c.num_experts / groups)) +
                                   " experts to choose " + std::to_string(c.experts_per_token) +
                                   " from");
  }
  if (!std::isfinite(c.routed_scale) || c.routed_scale <= 0) {
    return Status::InvalidArgument(keys.scale + " must be finite and > 0 (got " +
                                   std::to_string(c.routed_scale) + ")");
  }
  if (c.leading_dense_layers > c.num_layers) {
    return Status::InvalidArgument(keys.dense_layers + " " +
                                   std::to_string(c.leading_dense_layers) + " exceeds the " +
                                   std::to_string(c.num_layers) + " layers");
  }
  return Status::Ok();
}

Result<ModelConfig> ParseHfConfig(const nlohmann::json& j) { return ConfigFromJson(j); }

Status SaveModel(const Model& model, const std::filesystem::path& dir) {
  if (model.config().HasFamilyOptions() ||
      model::TraitsOf(model.config().architecture).fused_projections) {
    return Status::Unimplemented(
        "saving a " + std::string(model::ArchitectureName(model.config().architecture)) +
        " model: folio writes folders of llama, mistral, qwen2 and qwen3 only");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create " + dir.string() + ": " + ec.message());
  std::vector<TensorToWrite> tensors;
  Status status;
  ForEachTensor(model.config(), model.weights(),
                [&](const std::string& name, const std::vector<uint64_t>&, const Tensor& t) {
                  DType d = DType::kF64;
                  switch (t.type) {
                    case TensorType::kF64:
                      d = DType::kF64;
                      break;
                    case TensorType::kF32:
                      d = DType::kF32;
                      break;
                    case TensorType::kF16:
                      d = DType::kF16;
                      break;
                    case TensorType::kBF16:
                      d = DType::kBF16;
                      break;
                    case TensorType::kQ8_0:
                    case TensorType::kQ4_0:
                    case TensorType::kQ4_1:
                    case TensorType::kQ5_0:
                    case TensorType::kQ5_1:
                    case TensorType::kQ4_K:
                    case TensorType::kQ5_K:
                    case TensorType::kQ6_K:
                    case TensorType::kQ2_K:
                    case TensorType::kQ3_K:
                    case TensorType::kIQ4_NL:
                    case TensorType::kIQ4_XS:
                    case TensorType::kMXFP4:
                      status = Status::Unimplemented("tensor " + name + " is " +
                                                     std::string(model::TensorTypeName(t.type)) +
                                                     ", which safetensors cannot hold");
                      return;
                  }
                  tensors.push_back({name, d, t.shape, t.bytes});
                });
  FOLIO_RETURN_IF_ERROR(status);
  const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                       {"folio_model_id", model.id()}};
  FOLIO_RETURN_IF_ERROR(WriteSafetensors(dir / "model.safetensors", tensors, metadata));
  return WriteFileAtomically(dir / "config.json", ConfigToJson(model.config()).dump(2) + "\n");
}

Result<Model> LoadModel(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return LoadFolderModel(path);
  if (!std::filesystem::exists(path, ec)) {
    return Status::NotFound("no model at " + path.string());
  }
  return LoadGgufModel(path);
}

}  // namespace folio::checkpoint
