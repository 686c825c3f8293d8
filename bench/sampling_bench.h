// `folio bench sampling`: what the logits processors (penalties, bias, bad
// words, min_tokens, DRY) cost per token against plain sampling, sampled
// (temperature 1, nothing else: the server's default) and greedy, and the
// processors with the candidate filters (top-n-sigma, typical_p, min_p,
// XTC) too, at each batch size; and how that compares with one decode step
// of the model.
//
// All are timed on the engine's own path (engine::OutputProcessor::Process:
// copy the row, apply the processors over the request's tokens, select,
// detokenize), with one request state per row of the batch, each with its
// own history (prompt_tokens random ids, then generated_tokens drawn from
// 200 ids so that they repeat), on random logits rows of the model's
// vocabulary; the five are sampled in interleaved rounds. The decode step is
// Engine::Step at that batch, greedy, after a prefill of decode_prompt
// tokens per request. Prints JSON.
#ifndef FOLIO_BENCH_SAMPLING_BENCH_H_
#define FOLIO_BENCH_SAMPLING_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace folio::bench {

struct SamplingBenchOptions {
  std::string model;  // "" = the built-in byte-level model (a smoke run)
  std::string json_output;
  std::vector<uint64_t> batches = {1, 16};
  uint64_t prompt_tokens = 512;     // each row's history: prompt ...
  uint64_t generated_tokens = 256;  // ... then generated tokens
  uint64_t decode_prompt = 64;      // prompt per request for the decode-step timing
  uint64_t decode_steps = 16;       // decode steps timed
  uint64_t threads = 2;
  uint64_t repeats = 15;
};

CLI::App* AddSamplingBenchCommand(CLI::App& bench, SamplingBenchOptions& options);
int RunSamplingBench(const SamplingBenchOptions& options, const std::string& command);

}  // namespace folio::bench

#endif  // FOLIO_BENCH_SAMPLING_BENCH_H_
