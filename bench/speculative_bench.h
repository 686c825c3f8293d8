// `folio bench speculative`: single-stream greedy decode with and without
// speculative decoding (prompt lookup), side by side in one run, on two
// kinds of prompts: input-grounded ones (repeat, correct or edit a given
// passage: the output copies the input, where lookup shines) and free
// generation (where it has little to find). Per kind and draft length:
// tokens/s, the speed-up over plain decoding per round (median, min, max),
// acceptance rate, accepted tokens per verification and tokens per target
// step. Every run's tokens must equal plain decoding's (exit 1 otherwise).
#ifndef FOLIO_BENCH_SPECULATIVE_BENCH_H_
#define FOLIO_BENCH_SPECULATIVE_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace folio::bench {

struct SpeculativeBenchOptions {
  std::string model;  // "" = the built-in byte-level model (a smoke run)
  std::string json_output;
  std::vector<uint64_t> draft_tokens = {8, 16};
  uint64_t ngram_min = 2;
  uint64_t ngram_max = 4;
  uint64_t max_tokens = 128;
  uint64_t threads = 2;
  uint64_t rounds = 3;
  std::string draft_model;                // "" = prompt lookup; else a draft model's path
  std::string matmul_activations = "q8";  // ops::MatMulActivations, by name
};

CLI::App* AddSpeculativeBenchCommand(CLI::App& bench, SpeculativeBenchOptions& options);
int RunSpeculativeBench(const SpeculativeBenchOptions& options, const std::string& command);

}  // namespace folio::bench

#endif  // FOLIO_BENCH_SPECULATIVE_BENCH_H_
