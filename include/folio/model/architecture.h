// The model architectures folio runs: one enum, one table row per
// architecture.
//
// A row says everything that differs between architectures outside the
// config's numbers: folio's name (hashed into model ids), the Hugging Face
// class and GGUF general.architecture that name it in files, GGUF's RoPE
// layout, and which of the decoder's options the architecture fixes. Files
// name architectures by string only at the edge: the loaders look a name up
// here and refuse, by name, one that has no row. As with ops::WeightType,
// IsArchitecture switches exhaustively with no `default` and a static_assert
// ties the table to the enum, so a new enumerator does not compile until it
// has its row.
#ifndef FOLIO_MODEL_ARCHITECTURE_H_
#define FOLIO_MODEL_ARCHITECTURE_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>

#include "folio/model/family.h"

namespace folio::model {

// How RoPE pairs features inside a head. kInterleaved rotates (2p, 2p+1)
// (the worked example; GGUF llama files, whose converter permuted Q/K rows
// to match); kNeox rotates (p, p + head_dim/2) (Hugging Face Llama, Qwen).
enum class RopeStyle : uint8_t { kInterleaved, kNeox };

// Values are the table's row indices; add new architectures at the end.
//   kFolio: folio's own FolioForCausalLM (the worked example; any config a
//     Hugging Face class cannot express, every option spelled out).
//   kLlama, kMistral, kQwen2, kQwen3: the Hugging Face families. GGUF files
//     of Mistral models say "llama" and load as kLlama.
//   kGemma3: Gemma 3's text decoder (Gemma3ForCausalLM): sandwich norms
//     with (1 + w) gains, GeGLU, a scaled embedding, QK-norm, and
//     interleaved sliding-window and global layers with their own RoPE.
//   kGemma2: Gemma 2 (Gemma2ForCausalLM): Gemma 3's block without QK-norm,
//     alternating sliding and global layers on one RoPE, and soft-capped
//     attention scores and logits.
//   kPhi3: Phi-3, Phi-3.5 and Phi-4-mini (Phi3ForCausalLM): Llama's block
//     with fused q/k/v and gate/up projections (split at load), optional
//     partial rotary embeddings and a sliding window.
//   kQwen3Moe: Qwen3's block with a mixture of experts for its MLP.
//   kMixtral: Mistral's block with a mixture of experts (Hugging Face's
//     MixtralForCausalLM; GGUF files of it say "llama" and load as kLlama
//     with experts).
//   kGptOss: gpt-oss (GptOssForCausalLM): biased q/k/v/o projections,
//     attention sinks, alternating sliding-window and global layers, YaRN,
//     and a mixture whose router and experts carry biases, routing by
//     top-k logits then softmax, with a clamped SwiGLU (Hugging Face
//     folders, MXFP4 experts included, and GGUF "gpt-oss").
//   kBert: the BERT encoder (BertModel; GGUF "bert"): Block::kBert, for
//     embeddings (sentence-transformers' MiniLM, BGE, E5).
//   kBertClassifier: BertForSequenceClassification, the BERT encoder with
//     its pooler and classifier (ModelConfig::num_labels): cross-encoder
//     rerankers such as ms-marco-MiniLM.
//   kQwen2Moe: Qwen2's block (q/k/v biases) with a mixture of experts and
//     a shared expert, gated by a sigmoid, that every token runs
//     (Qwen2MoeForCausalLM; GGUF "qwen2moe").
//   kQwen3Classifier: Qwen3ForSequenceClassification, Qwen3's decoder with
//     a score head on the last position instead of the output head (the
//     Qwen3-Reranker checkpoints converted to one relevance logit).
//   kDots1: rednote's dots.llm1 (Dots1ForCausalLM; GGUF "dots1"): Qwen3's
//     attention with DeepSeek-V3's mixture — sigmoid scores, a selection
//     bias, expert groups, a routed scale, ungated shared experts and
//     leading dense layers.
enum class Architecture : uint8_t {
  kFolio,
  kLlama,
  kMistral,
  kQwen2,
  kQwen3,
  kGemma3,
  kGemma2,
  kPhi3,
  kQwen3Moe,
  kMixtral,
  kGptOss,
  kBert,
  kBertClassifier,
  kQwen3Classifier,
  kQwen2Moe,
  kDots1
};

// Whether an architecture fixes one of the decoder's options.
enum class Fixed : uint8_t {
  kNo,     // the config says (config.json's key, folio's own field)
  kOff,    // always off: a config with it on needs folio's own class
  kAlways  // always on: the loaders set it
};

struct ArchitectureTraits {
  Architecture architecture;
  // ModelConfig's name; model ids hash it (docs/spec/model-id.md): never
  // rename one.
  std::string_view name;
  std::string_view hf_class;   // config.json "architectures"
  std::string_view gguf_name;  // GGUF general.architecture; "" = none
  RopeStyle gguf_rope_style;   // how a GGUF file of it rotates
  // A Hugging Face class: NeoX RoPE and the choices below. false for
  // folio's own class, which spells out rope_style, qk_norm and
  // folio_architecture in config.json.
  bool hf_native;
  Fixed attention_bias;  // biases on the q, k, v projections
  Fixed qk_norm;         // per-head RMSNorm of q and k before RoPE
  // config.json's use_sliding_window when it is absent.
  bool hf_sliding_window_default;
  // A sliding window in config.json is per layer (Qwen): refused.
  bool hf_window_per_layer;
  // The block's shape, fixed by the family.
  Activation activation = Activation::kSilu;
  NormLayout norm_layout = NormLayout::kPre;
  bool scale_embedding = false;  // embeddings times sqrt(hidden_size)
  // Hugging Face stores norm gains as w, applied as (1 + w); GGUF files
  // hold 1 + w already (llama.cpp's converter adds it).
  bool hf_norm_unit_offset = false;
  // Sliding-window layers between global ones: every window_period-th
  // layer is global (config.json's layer_types may say otherwise; GGUF
  // files rely on this period unless they carry a pattern); 0 = no such
  // interleaving.
  uint64_t window_period = 0;
  // The sliding layers' RoPE base when a GGUF file does not say
  // (rope.freq_base_swa) and the Hugging Face config's older form carries
  // it as rope_local_base_freq; 0 = the global base (Gemma 2).
  double local_rope_base = 0;
  // GGUF files do not record query_pre_attn_scalar: it is head_dim, except
  // in the model with this many layers (the 27B), where it is hidden /
  // heads — llama.cpp's rule. 0 = no such exception.
  uint64_t gguf_width_scaled_layers = 0;
  // Attention-score and final-logit soft-caps (Gemma 2); refused otherwise.
  bool softcaps = false;
  // Files store q/k/v as one qkv projection and gate/up as one gate_up
  // (gate rows first) — Hugging Face's qkv_proj / gate_up_proj, GGUF's
  // attn_qkv / ffn_up — which the loaders split by rows (Phi-3).
  bool fused_projections = false;
  // A mixture of experts in every layer (config.json's expert keys are
  // read; GGUF files say so with expert_count in any architecture).
  bool moe = false;
  // The family's routing (family.h); a GGUF file's expert_gating_func
  // must agree unless deepseek_moe.
  Routing routing = Routing::kSoftmaxTopK;
  // DeepSeek-style mixture keys (config.h: router_selection_bias,
  // expert_groups, routed_scale, leading_dense_layers,
  // num_shared_experts): Hugging Face's n_routed_experts,
  // n_shared_experts, n_group, topk_group, routed_scaling_factor,
  // first_k_dense_replace and the router's e_score_correction_bias; GGUF's
  // expert_gating_func (softmax or sigmoid), expert_shared_count,
  // expert_weights_scale, expert_group_count, expert_group_used_count,
  // leading_dense_block_count and exp_probs_b.
  bool deepseek_moe = false;
  // Hugging Face names the experts block_sparse_moe.{gate, experts.j.w1
  // (gate), w3 (up), w2 (down)} (Mixtral) rather than mlp.{gate,
  // experts.j.{gate,up,down}_proj}.
  bool hf_mixtral_names = false;
  // gpt-oss's block (config.h: routing, moe_bias, swiglu_limit,
  // output_bias, attention_sinks), its layer_types, and its experts stored
  // fused: gate_up_proj [experts, hidden, 2 * ffn] with gate and up
  // interleaved by column, down_proj [experts, ffn, hidden], each with a
  // bias; the router is mlp.router.
  bool hf_gpt_oss = false;
  // Hugging Face's *ForSequenceClassification of a decoder: a score head
  // (score.weight, [num_labels, hidden]) on the last position instead of
  // the output head; config.json's id2label gives num_labels.
  bool sequence_classifier = false;
  // The layer's whole shape (family.h); every other field above describes
  // kDecoder blocks.
  Block block = Block::kDecoder;
};

// The table, indexed by Architecture.
inline constexpr ArchitectureTraits kArchitectureTraits[] = {
    {.architecture = Architecture::kFolio,
     .name = "folio",
     .hf_class = "FolioForCausalLM",
     .gguf_name = "",
     .gguf_rope_style = RopeStyle::kInterleaved,
     .hf_native = false,
     .attention_bias = Fixed::kNo,
     .qk_norm = Fixed::kNo,
     .hf_sliding_window_default = true,
     .hf_window_per_layer = false},
    // llama.cpp's converter permutes llama's Q/K rows so that adjacent
    // pairs rotate together.
    {.architecture = Architecture::kLlama,
     .name = "llama",
     .hf_class = "LlamaForCausalLM",
     .gguf_name = "llama",
     .gguf_rope_style = RopeStyle::kInterleaved,
     .hf_native = true,
     .attention_bias = Fixed::kNo,
     .qk_norm = Fixed::kOff,
     .hf_sliding_window_default = false,
     .hf_window_per_layer = false},
    {.architecture = Architecture::kMistral,
     .name = "mistral",
     .hf_class = "MistralForCausalLM",
     .gguf_name = "",
     .gguf_rope_style = RopeStyle::kInterleaved,
     .hf_native = true,
     .attention_bias = Fixed::kOff,
     .qk_norm = Fixed::kOff,
     .hf_sliding_window_default = true,
     .hf_window_per_layer = false},
    // Qwen GGUF files keep Hugging Face's NeoX halves.
    {.architecture = Architecture::kQwen2,
     .name = "qwen2",
     .hf_class = "Qwen2ForCausalLM",
     .gguf_name = "qwen2",
     .gguf_rope_style = RopeStyle::kNeox,
     .hf_native = true,
     .attention_bias = Fixed::kAlways,
     .qk_norm = Fixed::kOff,
     .hf_sliding_window_default = false,
     .hf_window_per_layer = true},
    {.architecture = Architecture::kQwen3,
     .name = "qwen3",
     .hf_class = "Qwen3ForCausalLM",
     .gguf_name = "qwen3",
     .gguf_rope_style = RopeStyle::kNeox,
     .hf_native = true,
     .attention_bias = Fixed::kNo,
     .qk_norm = Fixed::kAlways,
     .hf_sliding_window_default = false,
     .hf_window_per_layer = true},
    {.architecture = Architecture::kGemma3,
     .name = "gemma3",
     .hf_class = "Gemma3ForCausalLM",
     .gguf_name = "gemma3",
     .gguf_rope_style = RopeStyle::kNeox,
     .hf_native = true,
     .attention_bias = Fixed::kOff,
     .qk_norm = Fixed::kAlways,
     .hf_sliding_window_default = false,
     .hf_window_per_layer = false,
     .activation = Activation::kGeluTanh,
     .norm_layout = NormLayout::kSandwich,
     .scale_embedding = true,
     .hf_norm_unit_offset = true,
     .window_period = 6,
     .local_rope_base = 10000.0,
     .gguf_width_scaled_layers = 62},
    {.architecture = Architecture::kGemma2,
     .name = "gemma2",
     .hf_class = "Gemma2ForCausalLM",
     .gguf_name = "gemma2",
     .gguf_rope_style = RopeStyle::kNeox,
     .hf_native = true,
     .attention_bias = Fixed::kOff,
     .qk_norm = Fixed::kOff,
     .hf_sliding_window_default = false,
     .hf_window_per_layer = false,
     .activation = Activation::kGeluTanh,
     .norm_layout = NormLayout::kSandwich,
     .scale_embedding = true,
     .hf_norm_unit_offset = true,
     .window_period = 2,
     .local_rope_base = 0,
     .gguf_width_scaled_layers = 46,
     .softcaps = true},
    {.architecture = Architecture::kPhi3,
     .name = "phi3",
     .hf_class = "Phi3ForCausalLM",
     .gguf_name = "phi3",
     .gguf_rope_style = RopeStyle::kNeox,
     .hf_native = true,
     .attention_bias = Fixed::kOff,
     .qk_norm = Fixed::kOff,
     .hf_sliding_window_default = true,
     .hf_window_per_layer = false,
     .fused_projections = true},
    {.architecture = Architecture::kQwen3Moe,
     .name = "qwen3moe",
     .hf_class = "Qwen3MoeForCausalLM",
     .gguf_name = "qwen3moe",
     .gguf_rope_style = RopeStyle::kNeox,
     .hf_native = true,
     .attention_bias = Fixed::kNo,
     .qk_norm = Fixed::kAlways,
     .hf_sliding_window_default = false,
     .hf_window_per_layer = true,
     .moe = true},
    {.architecture = Architecture::kMixtral,
     .name = "mixtral",
     .hf_class = "MixtralForCausalLM",
     .gguf_name = "",
     .gguf_rope_style = RopeStyle::kInterleaved,
     .hf_native = true,
     .attention_bias = Fixed::kOff,
     .qk_norm = Fixed::kOff,
     .hf_sliding_window_default = true,
     .hf_window_per_layer = false,
     .moe = true,
     .hf_mixtral_names = true},
    {.architecture = Architecture::kGptOss,
     .name = "gpt-oss",
     .hf_class = "GptOssForCausalLM",
     .gguf_name = "gpt-oss",
     .gguf_rope_style = RopeStyle::kNeox,
     .hf_native = true,
     .attention_bias = Fixed::kAlways,
     .qk_norm = Fixed::kOff,
     .hf_sliding_window_default = false,
     .hf_window_per_layer = false,
     .moe = true,
     .routing = Routing::kTopKSoftmax,
     .hf_gpt_oss = true},
    {.architecture = Architecture::kBert,
     .name = "bert",
     .hf_class = "BertModel",
     .gguf_name = "bert",
     .gguf_rope_style = RopeStyle::kNeox,  // no RoPE
     .hf_native = true,
     .attention_bias = Fixed::kOff,  // the block has its own biases
     .qk_norm = Fixed::kOff,
     .hf_sliding_window_default = false,
     .hf_window_per_layer = false,
     .activation = Activation::kGelu,
     .block = Block::kBert},
    {.architecture = Architecture::kBertClassifier,
     .name = "bert-classifier",
     .hf_class = "BertForSequenceClassification",
     .gguf_name = "",
     .gguf_rope_style = RopeStyle::kNeox,  // no RoPE
     .hf_native = true,
     .attention_bias = Fixed::kOff,
     .qk_norm = Fixed::kOff,
     .hf_sliding_window_default = false,
     .hf_window_per_layer = false,
     .activation = Activation::kGelu,
     .block = Block::kBert},
    {.architecture = Architecture::kQwen3Classifier,
     .name = "qwen3-classifier",
     .hf_class = "Qwen3ForSequenceClassification",
     .gguf_name = "",
     .gguf_rope_style = RopeStyle::kNeox,
     .hf_native = true,
     .attention_bias = Fixed::kNo,
     .qk_norm = Fixed::kAlways,
     .hf_sliding_window_default = false,
     .hf_window_per_layer = true,
     .sequence_classifier = true},
    {.architecture = Architecture::kQwen2Moe,
     .name = "qwen2moe",
     .hf_class = "Qwen2MoeForCausalLM",
     .gguf_name = "qwen2moe",
     .gguf_rope_style = RopeStyle::kNeox,
     .hf_native = true,
     .attention_bias = Fixed::kAlways,
     .qk_norm = Fixed::kOff,
     .hf_sliding_window_default = false,
     .hf_window_per_layer = true,
     .moe = true},
    // Its sliding layers (folders only) come from layer_types, or
    // sliding_window and max_window_layers.
    {.architecture = Architecture::kDots1,
     .name = "dots1",
     .hf_class = "Dots1ForCausalLM",
     .gguf_name = "dots1",
     .gguf_rope_style = RopeStyle::kNeox,
     .hf_native = true,
     .attention_bias = Fixed::kNo,
     .qk_norm = Fixed::kAlways,
     .hf_sliding_window_default = false,
     .hf_window_per_layer = false,
     .moe = true,
     .routing = Routing::kSigmoidTopK,
     .deepseek_moe = true},
};
inline constexpr size_t kNumArchitectures = std::size(kArchitectureTraits);

// True for every enumerator, false for any other value. Its switch is
// what makes a new enumerator fail to compile until it is listed here.
constexpr bool IsArchitecture(Architecture a) {
  switch (a) {
    case Architecture::kFolio:
    case Architecture::kLlama:
    case Architecture::kMistral:
    case Architecture::kQwen2:
    case Architecture::kQwen3:
    case Architecture::kGemma3:
    case Architecture::kGemma2:
    case Architecture::kPhi3:
    case Architecture::kQwen3Moe:
    case Architecture::kMixtral:
    case Architecture::kGptOss:
    case Architecture::kBert:
    case Architecture::kBertClassifier:
    case Architecture::kQwen3Classifier:
    case Architecture::kQwen2Moe:
    case Architecture::kDots1:
      return true;
  }
  return false;
}

namespace internal {
// Row i describes the architecture with value i, and the value after the
// last row is none: so the table has exactly one row per enumerator.
constexpr bool ArchitectureTableIsComplete() {
  for (size_t i = 0; i < kNumArchitectures; ++i) {
    if (static_cast<size_t>(kArchitectureTraits[i].architecture) != i) return false;
    if (!IsArchitecture(static_cast<Architecture>(i))) return false;
  }
  return !IsArchitecture(static_cast<Architecture>(kNumArchitectures));
}
[[noreturn]] void BadArchitecture(Architecture a);  // a FOLIO_CHECK failure
}  // namespace internal
static_assert(internal::ArchitectureTableIsComplete(),
              "kArchitectureTraits needs exactly one row per Architecture, in enum order");

// The row of `a`; a value outside the enum is a FOLIO_CHECK failure.
constexpr const ArchitectureTraits& TraitsOf(Architecture a) {
  if (!IsArchitecture(a)) internal::BadArchitecture(a);
  return kArchitectureTraits[static_cast<size_t>(a)];
}
constexpr std::string_view ArchitectureName(Architecture a) { return TraitsOf(a).name; }

// Lookups by the names files use; nullopt for a name with no row (an empty
// GGUF name never matches).
std::optional<Architecture> ArchitectureFromName(std::string_view name);
std::optional<Architecture> ArchitectureFromHfClass(std::string_view hf_class);
std::optional<Architecture> ArchitectureFromGgufName(std::string_view gguf_name);

}  // namespace folio::model

#endif  // FOLIO_MODEL_ARCHITECTURE_H_
