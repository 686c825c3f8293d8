// The decoder's hyperparameters.
//
// A pre-norm decoder: token embedding (optionally scaled by sqrt(hidden));
// per layer RMSNorm -> Q/K/V projections with grouped-query attention ->
// (QK-norm) -> RoPE on logical positions -> causal attention, global or in a
// sliding window -> output projection (-> a post-attention norm) ->
// residual; RMSNorm -> gated MLP (SwiGLU or GeGLU) (-> a post-MLP norm) ->
// residual; a final norm; an output head that may be tied to the embedding
// (and a soft-cap on its logits).
//
// Model-wide fields say what every layer shares; `layers` says what differs
// between layers (the attention window, RoPE's base and scaling), one entry
// per layer, or is empty when every layer uses the model-wide window and
// RoPE. Layer(i) is the one accessor the decoder reads.
#ifndef FOLIO_MODEL_CONFIG_H_
#define FOLIO_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "folio/core/status.h"
#include "folio/model/architecture.h"

namespace folio::model {

// Frequency scaling of RoPE (Hugging Face's rope_scaling).
//
// kLongRope (Phi-3.5, Phi-4-mini; "su" before it): pair p's frequency is
// divided by short_factor[p] or long_factor[p], and cos and sin are
// multiplied by attention_factor. Hugging Face switches to the long
// factors while the sequence is longer than original_max_positions, which
// would rotate a cached key differently from the same key recomputed;
// folio decides once per model, as llama.cpp does per context: the long
// factors when the model's context (max_positions) exceeds
// original_max_positions (use_long, set by the loaders), else the short.
//
// kYarn (Qwen3 at long context, gpt-oss): "NTK-by-parts" interpolation.
// Pairs that turn more than beta_fast times over original_max_positions
// keep their frequency, pairs that turn fewer than beta_slow times are
// slowed by `factor`, and a linear ramp over pair indices joins the two
// (the bounds floored and ceiled when `truncate`); cos and sin are
// multiplied by attention_factor (settled by SettleYarn).
struct RopeScaling {
  enum class Type : uint8_t { kNone, kLinear, kLlama3, kLongRope, kYarn };
  Type type = Type::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;                   // llama3
  double high_freq_factor = 4.0;                  // llama3
  uint64_t original_max_positions = 8192;         // llama3, longrope, yarn
  std::vector<double> short_factor, long_factor;  // longrope: one per rotated pair
  double attention_factor = 1.0;                  // longrope, yarn
  bool use_long = false;                          // longrope
  double beta_fast = 32.0, beta_slow = 1.0;       // yarn
  bool truncate = true;                           // yarn
  friend bool operator==(const RopeScaling&, const RopeScaling&) = default;
};

// What cos and sin are multiplied by (longrope's and yarn's
// attention_factor; else 1).
double RopeAttentionFactor(const RopeScaling& scaling);

// Settles a longrope scaling once its factor lists and original length
// (> 0) are read, as Hugging Face's _compute_longrope_parameters does:
// factor = max_positions / original; attention_factor, unless given (> 0),
// sqrt(1 + ln factor / ln original) (1 when factor <= 1); and folio's one
// choice of list, the long one when max_positions exceeds the original.
// The loaders of both formats call it. No-op for other types.
void SettleLongRope(uint64_t max_positions, RopeScaling& scaling);

// Settles a yarn scaling's attention factor, as Hugging Face's
// _compute_yarn_parameters does, unless one was given (> 0): with both
// mscale and mscale_all_dim (> 0), m(factor, mscale) / m(factor,
// mscale_all_dim), else m(factor, 1), where m(s, k) = 0.1 k ln s + 1 for
// s > 1 and 1 otherwise. No-op for other types.
void SettleYarn(double mscale, double mscale_all_dim, RopeScaling& scaling);

// What may differ between layers.
struct LayerConfig {
  // Sliding window W: the query at position p sees keys p - W < j <= p;
  // 0 = every earlier key (a global layer).
  uint64_t window = 0;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  friend bool operator==(const LayerConfig&, const LayerConfig&) = default;
};

struct ModelConfig {
  Architecture architecture = Architecture::kFolio;
  uint64_t hidden_size = 8;   // model width D
  uint64_t num_heads = 4;     // query heads H_q
  uint64_t num_kv_heads = 2;  // shared K/V heads H_kv
  uint64_t ffn_size = 12;     // SwiGLU inner width F
  uint64_t num_layers = 2;
  uint64_t max_positions = 12;  // context capacity
  uint64_t vocab_size = 258;
  double rope_theta = 10000.0;
  double norm_eps = 1e-6;
  bool tie_embeddings = true;      // output head = embedding table
  uint64_t window = 0;             // sliding window; 0 = full context
  uint64_t explicit_head_dim = 0;  // 0 = hidden_size / num_heads
  RopeStyle rope_style = RopeStyle::kInterleaved;
  RopeScaling rope_scaling;
  bool attention_bias = false;  // biases on the q, k, v projections (Qwen2)
  bool qk_norm = false;         // per-head RMSNorm of q and k before RoPE (Qwen3)
  // Per layer; empty = every layer {window, rope_theta, rope_scaling}. When
  // set, it alone says what runs; the model-wide three then keep the file's
  // own values (its sliding window, its global RoPE) for reports.
  std::vector<LayerConfig> layers;
  Activation activation = Activation::kSilu;
  NormLayout norm_layout = NormLayout::kPre;
  // Norm gains are stored as w and multiply as (1 + w) (Hugging Face's
  // Gemma; llama.cpp's converter adds the 1 into GGUF files).
  bool norm_unit_offset = false;
  bool scale_embedding = false;  // embeddings times sqrt(hidden_size) (Gemma)
  // Attention scores are q.k times this; 0 = 1 / sqrt(head_dim). Gemma:
  // query_pre_attn_scalar^-1/2.
  double attention_scale = 0.0;
  // Logits become cap * tanh(logit / cap) (Gemma 2); 0 = none.
  double final_logit_softcap = 0.0;
  // Attention scores (after the scale) likewise (Gemma 2); 0 = none.
  double attn_logit_softcap = 0.0;
  // RoPE rotates the first rotary_dim features of each head, the rest pass
  // through (partial rotary embeddings, Phi-4-mini); 0 = all of head_dim.
  uint64_t rotary_dim = 0;
  // Mixture of experts (Mixtral, Qwen3-MoE, dots1): every layer's MLP
  // (but the leading dense layers') is num_experts SwiGLU experts of width
  // expert_ffn_size (ffn_size is then the dense layers' width); a router
  // scores them per token (`routing`: a softmax over its logits, or a
  // sigmoid of each), the experts_per_token best run, and their outputs
  // are summed weighted by those scores (renormalised to sum to 1 when
  // norm_topk_prob). 0 experts = a dense MLP.
  uint64_t num_experts = 0;
  uint64_t experts_per_token = 0;
  uint64_t expert_ffn_size = 0;
  // A shared expert (Qwen2-MoE): a SwiGLU MLP of this width that every
  // token runs besides its routed experts, its output scaled by
  // sigmoid(shared_expert_gate . h) and added; 0 = none.
  uint64_t shared_expert_ffn_size = 0;
  bool norm_topk_prob = true;
  Routing routing = Routing::kSoftmaxTopK;
  // DeepSeek-style mixtures (dots1), each a refinement of any routing:
  // A per-layer selection bias [num_experts] (Hugging Face's
  // e_score_correction_bias, GGUF's exp_probs_b) added to the experts'
  // scores for choosing them only: the weights are the unbiased scores.
  bool router_selection_bias = false;
  // Group-limited choice: the experts form expert_groups groups of
  // consecutive indices; a group's score is the sum of its two best
  // (biased) scores, and only the expert_groups_used best groups' experts
  // may be chosen (ties to the lower index). 1 group = no limit.
  uint64_t expert_groups = 1;
  uint64_t expert_groups_used = 1;
  // The chosen experts' weights, after norm_topk_prob, times this
  // (routed_scaling_factor; GGUF expert_weights_scale).
  double routed_scale = 1.0;
  // The first leading_dense_layers layers have a dense SwiGLU MLP of
  // ffn_size instead of experts (first_k_dense_replace; GGUF
  // leading_dense_block_count).
  uint64_t leading_dense_layers = 0;
  // Shared experts without a gate: one SwiGLU MLP of width
  // num_shared_experts * expert_ffn_size that every token of a mixture
  // layer runs, its output added to the routed experts'
  // (n_shared_experts; GGUF expert_shared_count). Exclusive with the gated
  // shared expert above; 0 = none.
  uint64_t num_shared_experts = 0;
  // gpt-oss's block: a bias on the router and on every expert projection
  // (moe_bias); its experts' clamped SwiGLU (swiglu_limit > 0): gate =
  // min(gate, limit), up = clamp(up, -limit, limit), out = (up + 1) *
  // gate * sigmoid(alpha * gate); a bias on the output projection
  // (output_bias); and attention sinks, a learned logit per query head in
  // every softmax denominator (attention_sinks).
  bool moe_bias = false;
  double swiglu_limit = 0.0;  // 0 = the plain SwiGLU
  double swiglu_alpha = 1.702;
  bool output_bias = false;
  bool attention_sinks = false;
  // The layer's whole shape (family.h). Under Block::kBert the fields
  // above that describe decoders keep their defaults (Validate checks),
  // activation is kGelu or kGeluTanh, max_positions is the position
  // table's length, and type_vocab_size (>= 1) the token-type table's;
  // tie_embeddings is unused (there is no output head).
  Block block = Block::kDecoder;
  uint64_t type_vocab_size = 0;  // kBert only
  // A sequence-classification head's outputs; 0 = none. kBert: the pooler,
  // tanh(W h + b) of the first position's state, then a linear classifier
  // to num_labels logits. kDecoder: a score head, W h of the last
  // position's final state, in place of the output head (such a model
  // scores and generates nothing).
  uint64_t num_labels = 0;

  // Attention sees later positions too (an encoder): a prompt is computed
  // in one step, its K/V depend on what follows, and it yields hidden
  // states, never tokens.
  bool IsEncoder() const { return block == Block::kBert; }

  // Layer i's window and RoPE (i < num_layers).
  LayerConfig Layer(uint64_t i) const;
  // The scale of attention scores (attention_scale or 1 / sqrt(head_dim)).
  double AttentionScale() const;
  // Whether any field outside the original Llama set is not its default
  // (the model id hashes them only then, so older ids stay as they were).
  bool HasFamilyOptions() const;

  uint64_t head_dim() const {
    return explicit_head_dim != 0 ? explicit_head_dim : hidden_size / num_heads;
  }
  uint64_t RotaryDim() const { return rotary_dim != 0 ? rotary_dim : head_dim(); }
  bool IsMoe() const { return num_experts != 0; }
  // Whether layer i's MLP is the mixture (not one of the leading dense
  // layers).
  bool IsMoeLayer(uint64_t i) const { return IsMoe() && i >= leading_dense_layers; }
  // The number of mixture layers.
  uint64_t NumMoeLayers() const { return IsMoe() ? num_layers - leading_dense_layers : 0; }
  // The shared expert's width, gated (shared_expert_ffn_size) or not
  // (num_shared_experts experts' worth); 0 = none.
  uint64_t SharedExpertFfnSize() const {
    return shared_expert_ffn_size != 0 ? shared_expert_ffn_size
                                       : num_shared_experts * expert_ffn_size;
  }
  // The router's options (ops/router.h).
  ops::RouterOptions Router() const {
    return {routing,       num_experts,        experts_per_token, norm_topk_prob,
            expert_groups, expert_groups_used, routed_scale};
  }
  uint64_t q_size() const { return num_heads * head_dim(); }
  uint64_t kv_size() const { return num_kv_heads * head_dim(); }

  // Errors: a zero size; hidden_size not divisible by num_heads (without an
  // explicit head dim); an odd head dim (RoPE rotates pairs); num_heads not a
  // multiple of num_kv_heads; bad rope scaling parameters;
  // rope_theta or norm_eps not finite and > 0; vocab beyond int32; sizes so
  // large the parameter count overflows; `layers` neither empty nor one per
  // layer, or a layer's RoPE invalid; attention_scale or a soft-cap negative
  // or not finite; rotary_dim odd or beyond head_dim; experts without
  // experts_per_token in [1, num_experts] and an expert width; expert
  // options (biases, the clamped SwiGLU, a routing other than
  // softmax-then-top-k, a selection bias, groups, a routed scale, leading
  // dense layers, shared experts) without experts, or a clamp that is not
  // finite and > 0; expert groups that do not divide the experts, groups
  // of fewer than two experts, expert_groups_used outside [1,
  // expert_groups] or too few experts in them for experts_per_token; a
  // routed scale that is not finite and > 0; more leading dense layers
  // than layers; both kinds of shared expert; a BERT block with a
  // decoder's option set, or a decoder with token types or plain GELU.
  Status Validate() const;

  // The number of parameters (norm gains included).
  uint64_t ParameterCount() const;

  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

// The inverse frequencies of RoPE, one per rotated pair (RotaryDim() / 2),
// with the config's scaling applied, in double: the angle of pair p at
// position pos is pos * inv_freq[p].
std::vector<double> RopeInverseFrequencies(const ModelConfig& config);
// The same for a layer's own RoPE base and scaling, over rotary_dim
// features.
std::vector<double> RopeInverseFrequencies(uint64_t rotary_dim, double rope_theta,
                                           const RopeScaling& scaling);

// The page-table chapter's worked example (docs/design.md, "The worked example"):
// width 8, 4 query heads, 2 K/V heads, ffn 12, 2 layers, 12 positions,
// vocabulary 258, tied embedding, no window.
ModelConfig WorkedExampleConfig();

}  // namespace folio::model

#endif  // FOLIO_MODEL_CONFIG_H_
