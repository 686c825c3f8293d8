// Quantizing a model file into a GGUF file: what `folio quantize` runs.
//
// Any model LoadModel reads (a GGUF file; a Hugging Face or folio folder of
// a llama, mistral, qwen2, qwen3, qwen3moe, qwen2moe, mixtral or gpt-oss
// model) comes out as a GGUF file that LoadModel, llama.cpp and the gguf
// Python package read. Matrices take the scheme's types (ops::QuantizeRow
// encodes them, from the source decoded to f32 by ops::DequantizeRow);
// 1-D tensors (norms, biases, attention sinks) are written as f32.
//
// Mixtures of experts are written as llama.cpp's converter writes them: per
// layer the router blk.N.ffn_gate_inp.weight [experts, hidden] (and gpt-oss's
// bias), each projection's experts stacked into one 3-D tensor
// blk.N.ffn_{gate,up}_exps.weight [experts, expert_ffn, hidden] and
// blk.N.ffn_down_exps.weight [experts, hidden, expert_ffn] (expert j's rows
// the j-th block; gpt-oss's expert biases likewise as 2-D
// blk.N.ffn_{gate,up,down}_exps.bias [experts, n]), and Qwen2-MoE's shared
// expert as blk.N.ffn_{gate,up,down}_shexp.weight with its gate
// blk.N.ffn_gate_inp_shexp.weight [1, hidden]. Shapes here are row-major
// (GGUF lists them innermost first).
//
// Schemes (--type): f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k,
// q3_k, q4_k, q5_k, q6_k, iq4_nl and iq4_xs put every matrix in that type,
// expert stacks included (as llama-quantize --pure does; its default would
// also raise the output head to Q6_K); q3_k_m, q4_k_m and q5_k_m are
// llama.cpp's Q3_K_M, Q4_K_M and Q5_K_M mixes, and mxfp4_moe its MXFP4_MOE
// (PlanQuantization). In every scheme the routers (ffn_gate_inp,
// ffn_gate_inp_shexp) stay f32: llama.cpp's converter writes them f32 and
// llama-quantize never quantizes them (it skips ffn_gate_inp.weight by
// name, and ffn_gate_inp_shexp is one row). folio writes them f32 from a
// GGUF source too, where llama-quantize would keep the source's type: f32
// holds any source type exactly.
//
// Metadata: from a GGUF source every key is copied in order, with
// general.file_type set to the scheme's llama.cpp file type and
// general.quantization_version to 2 when a tensor is quantized; its
// tensors keep their names, order and shapes. From a folder, llama.cpp's
// keys for the config (GgufMetadataFor) and the chat template of
// tokenizer_config.json; tokenizer.ggml.* keys when the folder's
// tokenizer.json has a GGUF form, else none, and such a file has no
// tokenizer for `folio generate` (the model loads).
#ifndef FOLIO_CHECKPOINT_QUANTIZE_MODEL_H_
#define FOLIO_CHECKPOINT_QUANTIZE_MODEL_H_

#include <cstdint>
#include <filesystem>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "folio/checkpoint/gguf_writer.h"
#include "folio/core/status.h"
#include "folio/core/thread_pool.h"
#include "folio/model/config.h"
#include "folio/ops/weight_type.h"

namespace folio::checkpoint {

// How a scheme varies the type from tensor to tensor.
enum class QuantizeMix : uint8_t {
  kPure,  // every matrix in the base type
  kKM,    // llama.cpp's Q4_K_M and Q5_K_M mixes (PlanQuantization)
  kQ3KM,  // llama.cpp's Q3_K_M (PlanQuantization)
  // llama.cpp's MXFP4_MOE: expert stacks MXFP4, other matrices Q8_0
  // (PlanQuantization)
  kMxfp4Moe,
};

struct QuantizeScheme {
  std::string_view name;  // the --type spelling
  ops::WeightType base;   // the type of (most) matrices
  QuantizeMix mix;
  // llama.cpp's LLAMA_FTYPE: ALL_F32 0, MOSTLY_F16 1, Q4_0 2, Q4_1 3, Q8_0
  // 7, Q5_0 8, Q5_1 9, Q2_K 10, Q3_K_S 11, Q3_K_M 12, Q4_K_S 14, Q4_K_M 15,
  // Q5_K_S 16, Q5_K_M 17, Q6_K 18, IQ4_NL 25, IQ4_XS 30, BF16 32,
  // MXFP4_MOE 38. A pure q2_k, q3_k, q4_k or q5_k file says Q2_K, Q3_K_S,
  // Q4_K_S or Q5_K_S, the llama.cpp types closest to it.
  uint32_t file_type;
};

inline constexpr QuantizeScheme kQuantizeSchemes[] = {
    {"f32", ops::WeightType::kF32, QuantizeMix::kPure, 0},
    {"f16", ops::WeightType::kF16, QuantizeMix::kPure, 1},
    {"bf16", ops::WeightType::kBF16, QuantizeMix::kPure, 32},
    {"q8_0", ops::WeightType::kQ8_0, QuantizeMix::kPure, 7},
    {"q4_0", ops::WeightType::kQ4_0, QuantizeMix::kPure, 2},
    {"q4_1", ops::WeightType::kQ4_1, QuantizeMix::kPure, 3},
    {"q5_0", ops::WeightType::kQ5_0, QuantizeMix::kPure, 8},
    {"q5_1", ops::WeightType::kQ5_1, QuantizeMix::kPure, 9},
    {"q2_k", ops::WeightType::kQ2_K, QuantizeMix::kPure, 10},
    {"q3_k", ops::WeightType::kQ3_K, QuantizeMix::kPure, 11},
    {"q4_k", ops::WeightType::kQ4_K, QuantizeMix::kPure, 14},
    {"q5_k", ops::WeightType::kQ5_K, QuantizeMix::kPure, 16},
    {"q6_k", ops::WeightType::kQ6_K, QuantizeMix::kPure, 18},
    {"iq4_nl", ops::WeightType::kIQ4_NL, QuantizeMix::kPure, 25},
    {"iq4_xs", ops::WeightType::kIQ4_XS, QuantizeMix::kPure, 30},
    {"q3_k_m", ops::WeightType::kQ3_K, QuantizeMix::kQ3KM, 12},
    {"q4_k_m", ops::WeightType::kQ4_K, QuantizeMix::kKM, 15},
    {"q5_k_m", ops::WeightType::kQ5_K, QuantizeMix::kKM, 17},
    {"mxfp4_moe", ops::WeightType::kMXFP4, QuantizeMix::kMxfp4Moe, 38},
};

// The scheme called `name`, or InvalidArgument listing the names.
Result<QuantizeScheme> ParseQuantizeScheme(std::string_view name);

// One tensor's decision.
struct TensorQuantization {
  std::string name;  // its GGUF name ("blk.0.attn_q.weight")
  // Row-major: [out, in] for a matrix, [experts, out, in] for an expert
  // stack, [experts, n] for a stack of expert biases.
  std::vector<uint64_t> shape;
  ops::WeightType wanted;  // what the scheme asks for
  ops::WeightType type;    // what is written: wanted, or its fallback
  bool fallback() const { return type != wanted; }
};

// The type a matrix with rows of `cols` elements takes when they are not
// whole blocks of `wanted`: llama.cpp's fallbacks, Q4_K -> Q5_0, Q5_K ->
// Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL, Q2_K and Q3_K -> Q4_0 (block 32,
// about the same bits), and f16 when that does not fit either, or for a
// 32-element type.
// `wanted` itself when cols is whole blocks of it.
ops::WeightType FallbackType(ops::WeightType wanted, uint64_t cols);

// Layer i of n gets the _K_M mixes' extra bits: the first and last eighth
// of the layers and every third layer between (llama.cpp's use_more_bits:
// i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2, integer division).
bool MoreBitsLayer(uint64_t i, uint64_t n);

// Each GGUF tensor of a model of `config`, in ForEachTensor order (an
// expert stack, or a tensor stored fused, where its first part comes), with
// its type: llama.cpp's llama_tensor_get_type restated, then FallbackType.
//
// In every scheme: 1-D tensors, biases (a stack of expert biases too) and
// the routers (ffn_gate_inp.weight, ffn_gate_inp_shexp.weight) f32.
//
// Pure schemes: every other matrix the base type, expert stacks included.
//
// mxfp4_moe (llama.cpp's MXFP4_MOE branch): a 3-D tensor of more than one
// expert (ne[2] > 1: the ffn_{gate,up,down}_exps stacks) MXFP4; every
// other matrix Q8_0: attention, the shared expert's ffn_*_shexp, a dense
// MLP, the token embedding and the output head (tied or not). Rows that
// are not whole 32-blocks fall back to f16, MXFP4 and Q8_0 alike.
//
// _K_M mixes (llama.cpp's Q4_K_M and Q5_K_M): the output head
// (output.weight, or token_embd.weight when tied) Q6_K; attn_v (and a fused
// attn_qkv, which llama.cpp counts as attn_v) Q6_K in MoreBitsLayer
// layers; every ffn_down of a MoreBitsLayer layer Q6_K: the dense
// ffn_down, the experts' ffn_down_exps and the shared expert's
// ffn_down_shexp alike (llama.cpp reads an MoE tensor's layer from its
// name); the rest the base type.
//
// q3_k_m (llama.cpp's Q3_K_M; base Q3_K): the output head Q6_K; attn_v
// (and attn_qkv) of layers 0 and 1 Q5_K, of the others Q4_K (llama.cpp
// counts the attn_v tensors it has met: the layer, in a file's order);
// attn_output Q4_K; every ffn_down Q5_K in the first sixteenth of the
// layers (i < n / 16), Q4_K after; the rest, the token embedding included,
// Q3_K.
//
// With exactly 8 experts (llama.cpp's n_expert == 8 rules, written for
// Mixtral 8x7B), in each of these mixes: attn_v and attn_k Q8_0,
// attn_output Q5_K. folio leaves out llama.cpp's rule for 70B models
// (attn_v Q5_K where Q3_K or Q4_K), which reads its model-size guess, and
// its rules for Falcon, which folio does not read.
std::vector<TensorQuantization> PlanQuantization(const model::ModelConfig& config,
                                                 const QuantizeScheme& scheme);

// llama.cpp's metadata for a model of `config` (from a folder):
// general.architecture (its GGUF name; mistral and mixtral say llama),
// general.name, general.file_type, general.quantization_version when
// `quantized`, and {arch}.context_length, embedding_length, block_count,
// feed_forward_length, attention.head_count, attention.head_count_kv,
// attention.layer_norm_rms_epsilon (f32), rope.freq_base (f32),
// rope.dimension_count, vocab_size, attention.key_length and value_length
// (with an explicit head dim), attention.sliding_window (with a window),
// rope.scaling.type and factor (linear), and for YaRN rope.scaling.type,
// factor and original_context_length, yarn_beta_fast and yarn_beta_slow
// when not 32 and 1, and yarn_attn_factor when the attention factor is not
// YaRN's own for the factor (as folio's reader, YarnFromGguf, reads them).
// Experts: expert_count, expert_used_count, expert_feed_forward_length
// (qwen3moe, qwen2moe, gpt-oss; llama's experts are feed_forward_length
// wide), expert_shared_feed_forward_length (qwen2moe), and
// expert_weights_norm when the renormalisation of the chosen experts'
// weights is not what folio's reader assumes without it (qwen2moe: off;
// the others: on). llama.cpp's graphs for these architectures fix that
// choice and do not read the key: such a file runs as its source in folio,
// not in llama.cpp. gpt-oss's files say no more (GptOssFromGguf): the
// layer pattern, sinks, biases, routing and clamp are the architecture's.
// Unimplemented for what a GGUF file cannot say to folio's loader and
// llama.cpp: the folio architecture (no GGUF name), llama3 RoPE scaling
// (llama.cpp stores it as a rope_freqs tensor), a bias or q/k-norm choice
// the GGUF architecture fixes otherwise, interleaved RoPE for an
// architecture whose GGUF files rotate NeoX halves, experts in an
// architecture without them (or none in one with them), a shared expert
// outside qwen2moe (or qwen2moe without one), llama experts of another
// width than feed_forward_length, a YaRN ramp truncated otherwise than the
// reader assumes (rounded bounds; gpt-oss: not rounded), and gpt-oss
// settings other than those its GGUF files imply (even layers slide with
// the window on one RoPE, swiglu_limit 7 and alpha 1.702).
Result<std::vector<GgufKeyValue>> GgufMetadataFor(const model::ModelConfig& config,
                                                  std::string name, uint32_t file_type,
                                                  bool quantized);

// Sums over the weights of some tensors.
struct QuantizeStats {
  uint64_t tensors = 0;
  uint64_t elements = 0;
  uint64_t bytes = 0;            // as written, without padding
  double sum_sq_error = 0.0;     // sum (written - source)^2, in double
  double sum_sq_weight = 0.0;    // sum source^2
  double BitsPerWeight() const;  // 8 bytes / elements; 0 when empty
  // sqrt(sum_sq_error / sum_sq_weight); 0 when the weights are all 0.
  double RmsRelativeError() const;
};

struct QuantizeReport {
  std::string source_format;  // "gguf" or "folder"
  // A folder's tokenizer.json: "pre-tokenizer NAME, N tokens" when written
  // as GGUF keys, else "not written: WHY"; a GGUF source's keys are kept.
  std::string tokenizer;
  std::vector<TensorQuantization> tensors;  // the plan, as written
  // One per weight type written, in WeightType order.
  std::vector<std::pair<ops::WeightType, QuantizeStats>> by_type;
  QuantizeStats total;
  uint64_t file_bytes = 0;
};

// Reads `in`, plans (PlanQuantization), encodes every tensor's rows in
// parallel on `pool` (each row's error is summed in double, then the rows'
// sums in row order, so the report does not depend on the thread count),
// writes `out` atomically (WriteGgufFile) and checks, before the rename,
// that LoadModel reads what was written. Llama-family sources whose Q/K
// rows are in Hugging Face's NeoX order are permuted into GGUF llama's
// interleaved order (as llama.cpp's converter does); a GGUF source's rows
// are kept as they are, and so is the order of its tensors
// (report.tensors lists them in the order written).
// Errors: LoadModel's for `in`; GgufMetadataFor's; InvalidArgument naming
// the tensor and row for a non-finite weight, OutOfRange for one beyond the
// target type's range (QuantizeRow); IoError for the output. On any error
// `out` is left as it was.
Result<QuantizeReport> QuantizeModel(const std::filesystem::path& in,
                                     const std::filesystem::path& out, const QuantizeScheme& scheme,
                                     ThreadPool& pool);

}  // namespace folio::checkpoint

#endif  // FOLIO_CHECKPOINT_QUANTIZE_MODEL_H_
