// `folio bench decode`: prefill and decode tokens/s of the full model
// forward pass (folio::model::Decoder over a paged KV cache), for
// each thread count, set against the decode floor: the weight bytes every
// decoded token must read over the memory bandwidth measured in the same
// run. Without --model it builds a synthetic Llama-style model of about 1B
// parameters with random bf16 weights. docs/benchmarks.md explains the
// fields ("Decode throughput").
#ifndef FOLIO_BENCH_DECODE_BENCH_H_
#define FOLIO_BENCH_DECODE_BENCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "folio/core/status.h"
#include "folio/core/thread_pool.h"
#include "folio/model/config.h"
#include "folio/model/model.h"
#include "folio/model/weights.h"
#include "folio/ops/weight_type.h"

namespace CLI {
class App;
}

namespace folio::bench {

struct DecodeBenchOptions {
  std::string model;        // "" = the synthetic model
  std::string json_output;  // "" = stdout
  bool quick = false;       // 4 synthetic layers, 64 + 16 tokens
  std::vector<uint64_t> threads_list = {1, 2};
  uint64_t prompt_tokens = 0;  // 0 = 128 (quick: 64)
  uint64_t decode_tokens = 0;  // 0 = 32 (quick: 16)
  uint64_t layers = 0;         // synthetic only; 0 = 16 (quick: 4)
  // Synthetic only: a mixture of experts in place of each layer's MLP
  // (0 = dense), Qwen3-MoE-shaped: experts of expert_ffn, experts_per_token
  // of them per token, weights renormalised.
  uint64_t experts = 0;
  uint64_t experts_per_token = 4;
  uint64_t expert_ffn = 768;
  std::string kv_dtype = "bf16";
  uint64_t page_size = 16;
  uint64_t seed = 7;
  uint64_t bandwidth_mib = 0;        // 0 = 2048 (quick: 1024)
  uint64_t bandwidth_passes = 0;     // 0 = 5 (quick: 3)
  bool no_matmul_only = false;       // skip timing the matmuls alone
  std::string weight_type = "bf16";  // the synthetic model's matrices (ops::WeightType name)
  // Decode batches to time besides the single stream: for each B > 1, B
  // requests decode together, one token each per engine step.
  std::vector<uint64_t> batch_sizes;
  // Each thread count runs once per mode, in this order (ops::MatMulActivations).
  std::vector<std::string> matmul_activations{"q8"};
};

// The synthetic model's config: hidden 2048, 32 heads, 8 K/V heads (head
// dim 64), ffn 8192, vocab 32000, 4096 positions, NeoX RoPE, architecture
// "llama", tied embedding; `layers` layers. With experts > 0 each MLP is a
// mixture of `experts` experts of width expert_ffn, experts_per_token per
// token (llama with experts: Mixtral's block).
model::ModelConfig SyntheticConfig(uint64_t layers, uint64_t experts = 0,
                                   uint64_t experts_per_token = 0, uint64_t expert_ffn = 0);

// Weights for `config` (any config without biases or q/k norms): every
// matrix bf16, uniform in [-0.05, 0.05) from SplitMix64 streams seeded from
// `seed` (one draw gives four values), norm gains f32 ones. The fill runs
// over `pool` when given.
Result<model::ModelWeights> SyntheticWeights(const model::ModelConfig& config, uint64_t seed,
                                             ThreadPool* pool = nullptr);

// The model at `path` (a folder or .gguf, loaded with checkpoint::LoadModel), or,
// when path is empty, `synthetic` with SyntheticWeights(seed) over `pool`,
// its matrices then quantized to `weight_type` (ops::QuantizeRow) unless
// that is bf16. Says on stderr what it is doing; a benchmark's models are
// big.
Result<std::unique_ptr<model::Model>> LoadOrSynthesize(
    const std::string& path, const model::ModelConfig& synthetic, uint64_t seed, ThreadPool* pool,
    ops::WeightType weight_type = ops::WeightType::kBF16);

// Bytes of weights one decoded token reads: every matrix the decoder
// multiplies (per layer q, k, v, o, gate, up, down; then the output head,
// which is the embedding when tied), each once. In a mixture the router
// and experts_per_token experts (the first ones: the bench's experts are
// all the same size) stand for gate, up and down. The embedding lookup
// reads one row and is not counted unless the table is the head; norm
// gains and biases (vectors) are not counted.
uint64_t WeightBytesPerToken(const model::ModelConfig& config, const model::ModelWeights& weights);

CLI::App* AddDecodeBenchCommand(CLI::App& bench, DecodeBenchOptions& options);

// Runs the benchmark; returns the process exit code (0, or 1 on an error).
int RunDecodeBench(const DecodeBenchOptions& options, const std::string& command);

}  // namespace folio::bench

#endif  // FOLIO_BENCH_DECODE_BENCH_H_
