// `folio bench kv-accuracy`: what a narrower KV cache, or 8-bit matmul
// activations, cost in accuracy, against an f32 KV cache and f32
// activations (the exact mode) on the same model in the same run.
//
// Per KV dtype and activation mode: perplexity of a text corpus (cut into windows, each one
// request whose prompt logits score every next token), the largest and
// mean absolute difference of those logits from f32's, how often their
// argmax agrees, and greedy continuations of prompts taken from the corpus:
// how many tokens each keeps in common with f32's before the first
// difference.
#ifndef FOLIO_BENCH_KV_ACCURACY_BENCH_H_
#define FOLIO_BENCH_KV_ACCURACY_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace folio::bench {

struct KvAccuracyBenchOptions {
  std::string model;  // "" = the built-in byte-level model
  std::string corpus = "bench/data/kv_corpus.txt";
  std::string json_output;
  std::vector<std::string> kv_dtypes = {"f32", "bf16", "f16", "i8", "f8e4m3"};
  // Each with every KV dtype; f32 (exact) by default, so that the rows
  // isolate what the KV dtype costs.
  std::vector<std::string> matmul_activations = {"f32"};
  uint64_t window = 512;      // tokens per perplexity window
  uint64_t prompts = 16;      // greedy prompts
  uint64_t prompt_len = 64;   // tokens per greedy prompt
  uint64_t max_tokens = 256;  // greedy tokens per prompt
  uint64_t threads = 2;
  bool quick = false;
};

CLI::App* AddKvAccuracyBenchCommand(CLI::App& bench, KvAccuracyBenchOptions& options);
int RunKvAccuracyBench(const KvAccuracyBenchOptions& options, const std::string& command);

}  // namespace folio::bench

#endif  // FOLIO_BENCH_KV_ACCURACY_BENCH_H_
