// LoadModel for GGUF files: llama, qwen2, qwen3, gemma3, gemma2, phi3, qwen3moe, gpt-oss, bert,
// qwen2moe and dots1 architectures with the
// tensor types WeightTypeOf maps (F64, F32, F16, BF16, Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS and MXFP4),
// memory-mapped in place.
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "checkpoint/loaders.h"
#include "folio/checkpoint/gguf.h"
#include "folio/ops/block_scales.h"

namespace folio::checkpoint {
namespace {

// A decoder's names; the layout says which norm is which.
std::string DecoderGgufTensorName(const std::string& hf, model::NormLayout layout) {
  // The sandwich layout's norms (Gemma): Hugging Face's
  // post_attention_layernorm follows attention there.
  static const std::vector<std::pair<std::string, std::string>> kSandwich = {
      {"post_attention_layernorm.weight", "post_attention_norm.weight"},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"}};
  static const std::vector<std::pair<std::string, std::string>> kLayer = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.o_proj.bias", "attn_output.bias"},
      {"self_attn.sinks", "attn_sinks.weight"},          // gpt-oss
      {"self_attn.qkv_proj.weight", "attn_qkv.weight"},  // fused (Phi-3)
      {"mlp.gate_up_proj.weight", "ffn_up.weight"},      // fused (Phi-3): gate rows, then up
      {"mlp.gate.weight", "ffn_gate_inp.weight"},        // a mixture's router
      {"mlp.gate.bias", "ffn_gate_inp.bias"},            // its bias (gpt-oss)
      {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},  // Qwen2-MoE
      {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
      {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
      {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
      {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"},  // dots1
      {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
      {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
      {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"}};
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const std::string prefix = "model.layers.";
  const size_t dot = hf.find('.', prefix.size());
  const std::string index = hf.substr(prefix.size(), dot - prefix.size());
  const std::string rest = hf.substr(dot + 1);
  if (layout == model::NormLayout::kSandwich) {
    for (const auto& [from, to] : kSandwich) {
      if (rest == from) return "blk." + index + "." + to;
    }
  }
  for (const auto& [from, to] : kLayer) {
    if (rest == from) return "blk." + index + "." + to;
  }
  return hf;
}

// "a, b and c": the GGUF architectures folio loads, in table order.
std::string GgufNameList() {
  std::vector<std::string_view> names;
  for (const ArchitectureTraits& t : model::kArchitectureTraits) {
    if (!t.gguf_name.empty()) names.push_back(t.gguf_name);
  }
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) list += i + 1 == names.size() ? " and " : ", ";
    list += names[i];
  }
  return list;
}

// Interleaved sliding-window and global layers (Gemma 2 and 3): every
// window_period-th layer is global, with rope.freq_base and the file's RoPE
// scaling, unless attention.sliding_window_pattern says otherwise (a
// period, or one bool per layer, true = sliding); the others see the last
// attention.sliding_window positions with the base rope.freq_base_swa (the
// family's local base when absent) and no scaling — llama.cpp's reading of
// these files.
Status InterleavedLayersFromGguf(const GgufFile& f, const std::string& arch,
                                 const ArchitectureTraits& t, ModelConfig& c) {
  auto key = [&](const char* k) { return arch + "." + k; };
  if (!f.Has(key("attention.sliding_window"))) {
    return Status::NotFound("missing key " + key("attention.sliding_window") + " (" + arch +
                            " interleaves sliding-window and global layers)");
  }
  FOLIO_ASSIGN_OR_RETURN(const uint64_t window, f.GetUint(key("attention.sliding_window")));
  if (window == 0) return Status::InvalidArgument(key("attention.sliding_window") + " is 0");
  std::vector<bool> global(c.num_layers);
  uint64_t period = t.window_period;
  const std::string pk = key("attention.sliding_window_pattern");
  if (f.Has(pk)) {
    FOLIO_ASSIGN_OR_RETURN(const GgufValue v, f.Get(pk));
    if (const auto* flags = std::get_if<std::vector<GgufValue>>(&v.data)) {
      if (v.element_type != GgufValueType::kBool || flags->size() != c.num_layers) {
        return Status::InvalidArgument(pk + " must be an integer or " +
                                       std::to_string(c.num_layers) + " bools, one per layer");
      }
      for (uint64_t i = 0; i < c.num_layers; ++i) global[i] = !std::get<bool>((*flags)[i].data);
      period = 0;
    } else {
      FOLIO_ASSIGN_OR_RETURN(period, f.GetUint(pk));
      if (period == 0) return Status::InvalidArgument(pk + " is 0");
    }
  }
  if (period != 0) {
    for (uint64_t i = 0; i < c.num_layers; ++i) global[i] = (i + 1) % period == 0;
  }
  double local_base = t.local_rope_base != 0 ? t.local_rope_base : c.rope_theta;
  if (f.Has(key("rope.freq_base_swa"))) {
    FOLIO_ASSIGN_OR_RETURN(local_base, f.GetFloat(key("rope.freq_base_swa")));
  }
  c.window = window;
  c.layers.resize(c.num_layers);
  for (uint64_t i = 0; i < c.num_layers; ++i) {
    c.layers[i] = global[i] ? LayerConfig{0, c.rope_theta, c.rope_scaling}
                            : LayerConfig{window, local_base, RopeScaling{}};
  }
  const uint64_t scalar =
      c.num_layers == t.gguf_width_scaled_layers ? c.hidden_size / c.num_heads : c.head_dim();
  c.attention_scale = 1.0 / std::sqrt(static_cast<double>(scalar));
  return Status::Ok();
}

// Yarn as llama.cpp reads it: rope.scaling.factor and
// original_context_length, the ramp's yarn_beta_fast and yarn_beta_slow
// (32 and 1 when absent), bounds always floored and ceiled, and cos and
// sin times yarn_attn_factor (1 when absent) * (1 + 0.1 ln factor).
// DeepSeek's yarn_log_multiplier and an ext_factor other than 1 are
// refused by name.
Status YarnFromGguf(const GgufFile& f, const std::string& arch, RopeScaling& s) {
  auto key = [&](const char* k) { return arch + "." + k; };
  s.type = RopeScaling::Type::kYarn;
  FOLIO_ASSIGN_OR_RETURN(s.factor, f.GetFloat(key("rope.scaling.factor")));
  const std::string orig = key("rope.scaling.original_context_length");
  if (!f.Has(orig)) return Status::NotFound("missing key " + orig + " (yarn)");
  FOLIO_ASSIGN_OR_RETURN(s.original_max_positions, f.GetUint(orig));
  for (const auto& [k, value] : {std::pair{"rope.scaling.yarn_beta_fast", &s.beta_fast},
                                 std::pair{"rope.scaling.yarn_beta_slow", &s.beta_slow}}) {
    if (f.Has(key(k))) {
      FOLIO_ASSIGN_OR_RETURN(*value, f.GetFloat(key(k)));
    }
  }
  for (const auto& [k, neutral] : {std::pair{"rope.scaling.yarn_log_multiplier", 0.0},
                                   std::pair{"rope.scaling.yarn_ext_factor", 1.0}}) {
    if (!f.Has(key(k))) continue;
    FOLIO_ASSIGN_OR_RETURN(const double v, f.GetFloat(key(k)));
    if (v != neutral) {
      return Status::Unimplemented(key(k) + " " + std::to_string(v) + " (folio's yarn has " +
                                   std::to_string(neutral) + ")");
    }
  }
  double attn = 1.0;
  if (f.Has(key("rope.scaling.yarn_attn_factor"))) {
    FOLIO_ASSIGN_OR_RETURN(attn, f.GetFloat(key("rope.scaling.yarn_attn_factor")));
  }
  s.truncate = true;
  s.attention_factor = 0;
  model::SettleYarn(0, 0, s);
  s.attention_factor *= attn;
  return Status::Ok();
}

// Longrope (Phi-3.5, Phi-4-mini): the factor lists are the f32 tensors
// rope_factors_long/short.weight, the original context
// rope.scaling.original_context_length, the attention factor
// rope.scaling.attn_factor (else Hugging Face's default); folio takes the
// long list when the model's context exceeds the original one
// (config.h, RopeScaling).
Status LongRopeFromGguf(const GgufFile& f, const std::string& arch,
                        const GgufFile::TensorInfo* long_factors,
                        const GgufFile::TensorInfo* short_factors, ModelConfig& c) {
  auto key = [&](const char* k) { return arch + "." + k; };
  RopeScaling& s = c.rope_scaling;
  if (long_factors == nullptr || short_factors == nullptr) {
    return Status::NotFound(
        "longrope needs both rope_factors_long.weight and "
        "rope_factors_short.weight");
  }
  if (s.type != RopeScaling::Type::kNone) {
    return Status::InvalidArgument("rope factor tensors beside " + key("rope.scaling.type"));
  }
  s.type = RopeScaling::Type::kLongRope;
  for (const auto& [info, list] :
       {std::pair{long_factors, &s.long_factor}, std::pair{short_factors, &s.short_factor}}) {
    if (info->type != GgmlType::kF32 || info->dims.size() != 1) {
      return Status::InvalidArgument(info->name + " must be a 1-D f32 tensor");
    }
    const std::span<const std::byte> bytes = f.Data(*info);
    for (uint64_t i = 0; i < info->dims[0]; ++i) {
      float x;
      std::memcpy(&x, bytes.data() + 4 * i, 4);
      list->push_back(x);
    }
  }
  const std::string orig = key("rope.scaling.original_context_length");
  if (!f.Has(orig)) return Status::NotFound("missing key " + orig + " (longrope)");
  FOLIO_ASSIGN_OR_RETURN(s.original_max_positions, f.GetUint(orig));
  if (s.original_max_positions == 0) return Status::InvalidArgument(orig + " is 0");
  if (f.Has(key("rope.scaling.attn_factor"))) {
    FOLIO_ASSIGN_OR_RETURN(s.attention_factor, f.GetFloat(key("rope.scaling.attn_factor")));
  } else {
    s.attention_factor = 0;  // Hugging Face's default, below
  }
  model::SettleLongRope(c.max_positions, s);
  return Status::Ok();
}

// The keys every architecture's file carries: context, width, depth, MLP
// width and heads (K/V heads = heads unless the caller reads more).
Status ShapeFromGguf(const GgufFile& f, const std::string& arch, ModelConfig& c) {
  auto key = [&](const char* k) { return arch + "." + k; };
  FOLIO_ASSIGN_OR_RETURN(c.max_positions, f.GetUint(key("context_length")));
  FOLIO_ASSIGN_OR_RETURN(c.hidden_size, f.GetUint(key("embedding_length")));
  FOLIO_ASSIGN_OR_RETURN(c.num_layers, f.GetUint(key("block_count")));
  FOLIO_ASSIGN_OR_RETURN(c.ffn_size, f.GetUint(key("feed_forward_length")));
  FOLIO_ASSIGN_OR_RETURN(c.num_heads, f.GetUint(key("attention.head_count")));
  c.num_kv_heads = c.num_heads;
  return Status::Ok();
}

// A BERT block's GGUF names (llama.cpp's bert): the embeddings'
// token_embd, position_embd, token_types and token_embd_norm; per block
// attn_{q,k,v,output}, attn_output_norm (after attention), ffn_up,
// ffn_down and layer_output_norm (after the MLP), weights and biases.
std::string BertGgufTensorName(const std::string& hf) {
  static const std::vector<std::pair<std::string, std::string>> kEmbeddings = {
      {"embeddings.word_embeddings.weight", "token_embd.weight"},
      {"embeddings.position_embeddings.weight", "position_embd.weight"},
      {"embeddings.token_type_embeddings.weight", "token_types.weight"},
      {"embeddings.LayerNorm.weight", "token_embd_norm.weight"},
      {"embeddings.LayerNorm.bias", "token_embd_norm.bias"}};
  static const std::vector<std::pair<std::string, std::string>> kLayer = {
      {"attention.self.query.", "attn_q."},
      {"attention.self.key.", "attn_k."},
      {"attention.self.value.", "attn_v."},
      {"attention.output.dense.", "attn_output."},
      {"attention.output.LayerNorm.", "attn_output_norm."},
      {"intermediate.dense.", "ffn_up."},
      {"output.dense.", "ffn_down."},
      {"output.LayerNorm.", "layer_output_norm."}};
  for (const auto& [from, to] : kEmbeddings) {
    if (hf == from) return to;
  }
  const std::string prefix = "encoder.layer.";
  const size_t dot = hf.find('.', prefix.size());
  if (!hf.starts_with(prefix) || dot == std::string::npos) return hf;
  const std::string index = hf.substr(prefix.size(), dot - prefix.size());
  const std::string rest = hf.substr(dot + 1);
  for (const auto& [from, to] : kLayer) {
    if (rest.starts_with(from)) return "blk." + index + "." + to + rest.substr(from.size());
  }
  return hf;
}

// llama.cpp's bert keys. The files do not record the MLP's activation:
// folio runs BERT's own (GELU with erf, Hugging Face's "gelu"), where
// llama.cpp's graph uses GELU's tanh approximation.
Result<ModelConfig> BertConfigFromGguf(const GgufFile& f, const std::string& arch) {
  auto key = [&](const char* k) { return arch + "." + k; };
  ModelConfig c;
  c.architecture = Architecture::kBert;
  c.block = model::Block::kBert;
  c.activation = model::Activation::kGelu;
  c.tie_embeddings = false;
  FOLIO_RETURN_IF_ERROR(ShapeFromGguf(f, arch, c));
  FOLIO_ASSIGN_OR_RETURN(c.norm_eps, f.GetFloat(key("attention.layer_norm_epsilon")));
  if (f.Has(key("attention.causal"))) {
    FOLIO_ASSIGN_OR_RETURN(bool causal, f.GetBool(key("attention.causal")));
    if (causal) return Status::Unimplemented(key("attention.causal") + " true (a BERT decoder)");
  }
  for (const char* name : {"token_embd.weight", "token_types.weight"}) {
    const GgufFile::TensorInfo* t = f.Find(name);
    if (t == nullptr) return Status::NotFound(std::string("missing tensor ") + name);
    if (t->dims.size() != 2) return Status::InvalidArgument(std::string(name) + " must be 2-D");
    (std::string_view(name) == "token_embd.weight" ? c.vocab_size : c.type_vocab_size) = t->dims[1];
  }
  FOLIO_RETURN_IF_ERROR(c.Validate());
  return c;
}

// gpt-oss as llama.cpp's converter writes it. The file records the
// window (attention.sliding_window) and the experts' width; llama.cpp's
// graph fixes the rest, and so does folio: even layers slide (its swa
// pattern 2, transformers' default layer_types), routing by the k largest
// logits then a softmax over them, biases on the router and the experts,
// the clamped SwiGLU with alpha 1.702 and limit 7.0 (the published
// configs' swiglu_limit), attention sinks and an output bias. The YaRN
// ramp is not truncated: the published configs say truncate false and
// transformers follows them, where llama.cpp rounds the ramp's bounds.
Status GptOssFromGguf(const GgufFile& f, const std::string& arch, ModelConfig& c) {
  auto key = [&](const char* k) { return arch + "." + k; };
  for (const char* k : {"swiglu_clamp_exp", "attention.sliding_window_pattern"}) {
    if (f.Has(key(k))) return Status::Unimplemented(key(k) + " (gpt-oss fixes it)");
  }
  if (!f.Has(key("attention.sliding_window"))) {
    return Status::NotFound("missing key " + key("attention.sliding_window") +
                            " (gpt-oss's even layers slide)");
  }
  if (c.window == 0) return Status::InvalidArgument(key("attention.sliding_window") + " is 0");
  c.routing = model::Routing::kTopKSoftmax;
  c.norm_topk_prob = true;  // the softmax over the chosen sums to 1
  c.moe_bias = true;
  c.output_bias = true;
  c.attention_sinks = true;
  c.swiglu_limit = 7.0;
  c.swiglu_alpha = 1.702;
  if (c.rope_scaling.type == RopeScaling::Type::kYarn) c.rope_scaling.truncate = false;
  c.layers.clear();
  for (uint64_t i = 0; i < c.num_layers; ++i) {
    c.layers.push_back(LayerConfig{i % 2 == 0 ? c.window : 0, c.rope_theta, c.rope_scaling});
  }
  return Status::Ok();
}

// llama.cpp's expert_gating_func: 1 softmax, 2 sigmoid, 3 a softmax over
// the chosen logits (gpt-oss's routing); 0 (none) and 4 (the square root
// of softplus) folio does not run.
Result<model::Routing> GatingFromGguf(const std::string& k, uint64_t v) {
  switch (v) {
    case 1:
      return model::Routing::kSoftmaxTopK;
    case 2:
      return model::Routing::kSigmoidTopK;
    case 3:
      return model::Routing::kTopKSoftmax;
    default:
      return Status::Unimplemented(k + " " + std::to_string(v) +
                                   " (folio routes by 1 softmax, 2 sigmoid or 3 softmax over the "
                                   "chosen)");
  }
}

// A mixture's router. Where llama.cpp's graph fixes the family's routing
// (llama, qwen2moe, qwen3moe, gpt-oss), expert_gating_func may only agree
// with it, and the DeepSeek-style keys are refused by name. dots1 reads
// them as llama.cpp does: expert_gating_func (softmax or sigmoid; sigmoid,
// its router's, when absent), expert_weights_scale (0 or absent = 1),
// expert_shared_count (required), expert_group_count and
// expert_group_used_count (absent or 0 = no groups), and
// leading_dense_block_count (0 when absent); the first mixture layer's
// exp_probs_b.bias says whether the router has a selection bias.
Status RouterFromGguf(const GgufFile& f, const std::string& arch, const ArchitectureTraits& t,
                      ModelConfig& c) {
  auto key = [&](const char* k) { return arch + "." + k; };
  c.routing = t.routing;
  if (const std::string k = key("expert_gating_func"); f.Has(k)) {
    FOLIO_ASSIGN_OR_RETURN(const uint64_t v, f.GetUint(k));
    FOLIO_ASSIGN_OR_RETURN(const model::Routing gating, GatingFromGguf(k, v));
    if (t.deepseek_moe ? gating == model::Routing::kTopKSoftmax : gating != t.routing) {
      return Status::Unimplemented(k + " " + std::to_string(v) + " (" + arch +
                                   (t.deepseek_moe ? " routes by softmax or sigmoid scores)"
                                                   : "'s router is llama.cpp's fixed one)"));
    }
    c.routing = gating;
  }
  const char* const deepseek_keys[] = {"expert_shared_count", "expert_weights_scale",
                                       "expert_group_count", "expert_group_used_count",
                                       "leading_dense_block_count"};
  if (!t.deepseek_moe) {
    for (const char* k : deepseek_keys) {
      if (f.Has(key(k))) {
        return Status::Unimplemented(key(k) + " (DeepSeek-style experts in " + arch + ")");
      }
    }
    return Status::Ok();
  }
  if (!f.Has(key("expert_shared_count"))) {
    return Status::NotFound("missing key " + key("expert_shared_count"));
  }
  FOLIO_ASSIGN_OR_RETURN(c.num_shared_experts, f.GetUint(key("expert_shared_count")));
  if (f.Has(key("expert_weights_scale"))) {
    FOLIO_ASSIGN_OR_RETURN(c.routed_scale, f.GetFloat(key("expert_weights_scale")));
    if (c.routed_scale == 0) c.routed_scale = 1.0;  // llama.cpp: 0 scales nothing
  }
  if (f.Has(key("leading_dense_block_count"))) {
    FOLIO_ASSIGN_OR_RETURN(c.leading_dense_layers, f.GetUint(key("leading_dense_block_count")));
  }
  if (f.Has(key("expert_group_count"))) {
    FOLIO_ASSIGN_OR_RETURN(c.expert_groups, f.GetUint(key("expert_group_count")));
    if (c.expert_groups == 0) c.expert_groups = 1;  // llama.cpp: groups only above 1
  }
  if (c.expert_groups > 1) {
    if (!f.Has(key("expert_group_used_count"))) {
      return Status::NotFound("missing key " + key("expert_group_used_count") + " (" +
                              std::to_string(c.expert_groups) + " expert groups)");
    }
    FOLIO_ASSIGN_OR_RETURN(c.expert_groups_used, f.GetUint(key("expert_group_used_count")));
  }
  FOLIO_RETURN_IF_ERROR(
      CheckRouter(c, {key("expert_group_count"), key("expert_group_used_count"),
                      key("expert_weights_scale"), key("leading_dense_block_count")}));
  c.router_selection_bias =
      f.Find("blk." + std::to_string(c.leading_dense_layers) + ".exp_probs_b.bias") != nullptr;
  return Status::Ok();
}

Result<ModelConfig> ConfigFromGguf(const GgufFile& f) {
  FOLIO_ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  const std::optional<Architecture> known = model::ArchitectureFromGgufName(arch);
  if (!known) {
    return Status::Unimplemented("general.architecture \"" + arch + "\" (folio loads " +
                                 GgufNameList() + ")");
  }
  const ArchitectureTraits& t = model::TraitsOf(*known);
  if (t.block == model::Block::kBert) return BertConfigFromGguf(f, arch);
  auto key = [&](const char* k) { return arch + "." + k; };
  ModelConfig c;
  c.architecture = *known;
  c.rope_style = t.gguf_rope_style;
  c.attention_bias = t.attention_bias == Fixed::kAlways;
  c.qk_norm = t.qk_norm == Fixed::kAlways;
  c.activation = t.activation;
  c.norm_layout = t.norm_layout;
  c.scale_embedding = t.scale_embedding;
  c.norm_unit_offset = false;  // GGUF gains hold 1 + w already
  FOLIO_RETURN_IF_ERROR(ShapeFromGguf(f, arch, c));
  if (f.Has(key("attention.head_count_kv"))) {
    FOLIO_ASSIGN_OR_RETURN(c.num_kv_heads, f.GetUint(key("attention.head_count_kv")));
  }
  FOLIO_ASSIGN_OR_RETURN(c.norm_eps, f.GetFloat(key("attention.layer_norm_rms_epsilon")));
  c.rope_theta = 10000.0;
  if (f.Has(key("rope.freq_base"))) {
    FOLIO_ASSIGN_OR_RETURN(c.rope_theta, f.GetFloat(key("rope.freq_base")));
  }
  if (f.Has(key("attention.key_length"))) {
    FOLIO_ASSIGN_OR_RETURN(c.explicit_head_dim, f.GetUint(key("attention.key_length")));
    if (c.num_heads != 0 && c.explicit_head_dim * c.num_heads == c.hidden_size) {
      c.explicit_head_dim = 0;
    }
  }
  if (f.Has(key("rope.dimension_count"))) {
    FOLIO_ASSIGN_OR_RETURN(uint64_t rot, f.GetUint(key("rope.dimension_count")));
    // Fewer than head_dim: partial rotary embeddings (Phi-4-mini).
    if (c.num_heads != 0 && rot != c.head_dim()) c.rotary_dim = rot;
  }
  if (f.Has(key("rope.scaling.type"))) {
    FOLIO_ASSIGN_OR_RETURN(std::string type, f.GetString(key("rope.scaling.type")));
    if (type == "linear") {
      c.rope_scaling.type = RopeScaling::Type::kLinear;
      FOLIO_ASSIGN_OR_RETURN(c.rope_scaling.factor, f.GetFloat(key("rope.scaling.factor")));
    } else if (type == "yarn") {
      FOLIO_RETURN_IF_ERROR(YarnFromGguf(f, arch, c.rope_scaling));
    } else if (type != "none") {
      return Status::Unimplemented(key("rope.scaling.type") + " \"" + type + "\"");
    }
  }
  if (f.Has(key("expert_count")) || t.moe) {
    // A mixture of experts (qwen3moe; llama files of Mixtral). llama.cpp
    // renormalises the chosen experts' weights for both.
    if (!f.Has(key("expert_count"))) {
      return Status::NotFound("missing key " + key("expert_count") + " (" + arch +
                              " is a mixture of experts)");
    }
    FOLIO_ASSIGN_OR_RETURN(c.num_experts, f.GetUint(key("expert_count")));
    if (c.num_experts != 0) {
      if (!f.Has(key("expert_used_count"))) {
        return Status::NotFound("missing key " + key("expert_used_count"));
      }
      FOLIO_ASSIGN_OR_RETURN(c.experts_per_token, f.GetUint(key("expert_used_count")));
      c.expert_ffn_size = c.ffn_size;
      if (f.Has(key("expert_feed_forward_length"))) {
        FOLIO_ASSIGN_OR_RETURN(c.expert_ffn_size, f.GetUint(key("expert_feed_forward_length")));
      }
      // Renormalised unless the file says otherwise; qwen2moe never (as
      // llama.cpp runs both); dots1 as llama.cpp's default, never.
      c.norm_topk_prob = *known != Architecture::kQwen2Moe && !t.deepseek_moe;
      if (f.Has(key("expert_weights_norm"))) {
        FOLIO_ASSIGN_OR_RETURN(c.norm_topk_prob, f.GetBool(key("expert_weights_norm")));
      }
      if (f.Has(key("expert_shared_feed_forward_length"))) {
        if (t.deepseek_moe) {
          return Status::Unimplemented(key("expert_shared_feed_forward_length") + " (" + arch +
                                       " sizes its shared experts by expert_shared_count)");
        }
        FOLIO_ASSIGN_OR_RETURN(c.shared_expert_ffn_size,
                               f.GetUint(key("expert_shared_feed_forward_length")));
      }
      FOLIO_RETURN_IF_ERROR(RouterFromGguf(f, arch, t, c));
    }
  }
  if (t.window_period != 0) {
    FOLIO_RETURN_IF_ERROR(InterleavedLayersFromGguf(f, arch, t, c));
  } else if (f.Has(key("attention.sliding_window"))) {
    if (*known == Architecture::kDots1) {  // a window on every layer is not what llama.cpp runs
      return Status::Unimplemented(key("attention.sliding_window") +
                                   " (llama.cpp's dots1 has no sliding layers)");
    }
    FOLIO_ASSIGN_OR_RETURN(c.window, f.GetUint(key("attention.sliding_window")));
  }
  if (*known == Architecture::kGptOss) FOLIO_RETURN_IF_ERROR(GptOssFromGguf(f, arch, c));
  for (const auto& [k, cap] : {std::pair{"attn_logit_softcapping", &c.attn_logit_softcap},
                               std::pair{"final_logit_softcapping", &c.final_logit_softcap}}) {
    if (t.softcaps) {  // the family's files always carry them
      if (!f.Has(key(k))) return Status::NotFound("missing key " + key(k));
      FOLIO_ASSIGN_OR_RETURN(*cap, f.GetFloat(key(k)));
    } else if (f.Has(key(k))) {
      return Status::Unimplemented(key(k) + " (logit soft-capping in " + arch + ")");
    }
  }
  const GgufFile::TensorInfo* embd = f.Find("token_embd.weight");
  if (embd == nullptr) return Status::NotFound("missing tensor token_embd.weight");
  if (embd->dims.size() != 2) return Status::InvalidArgument("token_embd.weight must be 2-D");
  c.vocab_size = embd->dims[1];
  c.tie_embeddings = f.Find("output.weight") == nullptr;
  const GgufFile::TensorInfo* long_factors = f.Find("rope_factors_long.weight");
  const GgufFile::TensorInfo* short_factors = f.Find("rope_factors_short.weight");
  if (long_factors != nullptr || short_factors != nullptr) {
    FOLIO_RETURN_IF_ERROR(LongRopeFromGguf(f, arch, long_factors, short_factors, c));
  }
  if (f.Find("rope_freqs.weight") != nullptr) {
    return Status::Unimplemented("rope_freqs.weight (per-frequency RoPE factors)");
  }
  FOLIO_RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace

std::string GgufTensorName(const std::string& hf_name, const ModelConfig& config) {
  if (config.IsEncoder()) return BertGgufTensorName(hf_name);
  // gpt-oss's files name the norm before its MLP (Hugging Face's
  // post_attention_layernorm) post_attention_norm, as the sandwich layout's
  // names have it, where the other families' say ffn_norm.
  if (config.architecture == Architecture::kGptOss &&
      hf_name.ends_with(".post_attention_layernorm.weight")) {
    return DecoderGgufTensorName(hf_name, model::NormLayout::kSandwich);
  }
  return DecoderGgufTensorName(hf_name, config.norm_layout);
}

Result<Model> LoadGgufModel(const std::filesystem::path& path) {
  FOLIO_ASSIGN_OR_RETURN(GgufFile opened, GgufFile::Open(path));
  return GgufModel(std::make_shared<const GgufFile>(std::move(opened)), path);
}

Result<Model> GgufModel(std::shared_ptr<const GgufFile> file, const std::filesystem::path& path) {
  Result<ModelConfig> config = ConfigFromGguf(*file);
  if (!config) return config.error().WithContext(path.string());

  std::map<std::string, const GgufFile::TensorInfo*> unused;
  for (const auto& info : file->tensors()) unused.emplace(info.name, &info);
  if (config->rope_scaling.type == RopeScaling::Type::kLongRope) {
    // Read into the config (LongRopeFromGguf).
    unused.erase("rope_factors_long.weight");
    unused.erase("rope_factors_short.weight");
  }
  ModelWeights weights;
  weights.layers.resize(config->num_layers);
  Status status;
  std::map<std::string, Tensor> fused;  // fused tensors read (Phi-3), by GGUF name
  ForEachTensor(
      *config, weights, [&](const std::string& hf_name, const std::vector<uint64_t>&, Tensor& t) {
        if (!status.ok()) return;
        // A fused projection or one expert: rows of a larger tensor.
        const std::optional<GgufPart> gp = GgufPartOf(*config, hf_name);
        const std::optional<FusedPart> part =
            gp ? std::optional<FusedPart>(FusedPart{gp->name, gp->first_row, gp->rows})
               : std::nullopt;
        const std::string name = gp ? gp->name : GgufTensorName(hf_name, *config);
        // A part's stored tensor is read once, then sliced for each part.
        const auto f = part ? fused.find(name) : fused.end();
        if (f == fused.end()) {
          auto it = unused.find(name);
          if (it == unused.end()) {
            status = Status::NotFound(path.string() + ": missing tensor " + name);
            return;
          }
          const GgufFile::TensorInfo& info = *it->second;
          Result<TensorType> type = WeightTypeOf(info);
          if (!type) {
            status = type.error().WithContext(path.string());
            return;
          }
          t.type = *type;
          t.shape.assign(info.dims.rbegin(), info.dims.rend());  // ggml lists innermost first
          // The shared expert's gate is one row; files store it as [hidden].
          if (name.ends_with("ffn_gate_inp_shexp.weight") && t.shape.size() == 1) {
            t.shape.insert(t.shape.begin(), 1);
          }
          t.bytes = file->Data(info);
          if (Status s = ops::CheckBlockScales(t.type, t.bytes); !s.ok()) {
            status = s.WithContext(path.string() + ": tensor " + name);
            return;
          }
          t.owner = file;
          unused.erase(it);
          if (!part) return;
        }
        const Tensor& whole = f != fused.end() ? f->second : fused.emplace(name, t).first->second;
        Result<Tensor> slice = RowSlice(whole, *part, gp->total_rows, name);
        if (!slice) {
          status = slice.error().WithContext(path.string());
          return;
        }
        t = *std::move(slice);
        if (gp->vector) t.shape = {t.shape.back()};
      });
  FOLIO_RETURN_IF_ERROR(status);
  if (!unused.empty()) {
    return Status::InvalidArgument(path.string() + ": unexpected tensor " + unused.begin()->first);
  }
  Result<Model> model = Model::Create(*config, std::move(weights), /*check_finite=*/false);
  if (!model) return model.error().WithContext(path.string());
  return model;
}

}  // namespace folio::checkpoint
