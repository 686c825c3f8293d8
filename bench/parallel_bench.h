// `folio bench parallel`: what forking parallel samples off one prefill
// saves. For n samples per request over a ShareGPT-like workload (prompt
// and output lengths log-normal around vLLM's ShareGPT means, 161 and 338
// tokens, sigma 0.8, capped), the peak KV pages with sharing (one request
// with n samples: forks share the prompt's pages) against the same work
// without (n separate requests, each its own copy, prefix caching off), on
// an unbounded pool; then both runs at a fixed KV budget (a fraction of
// the unshared peak), timed, with their preemptions. The built-in model
// unless --model: page counts do not depend on the model's size.
#ifndef FOLIO_BENCH_PARALLEL_BENCH_H_
#define FOLIO_BENCH_PARALLEL_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace folio::bench {

struct ParallelBenchOptions {
  std::string model;
  std::string json_output;
  std::vector<uint64_t> n_list = {2, 4, 8};
  std::vector<uint64_t> beam_widths = {2, 4, 8};
  uint64_t requests = 16;
  uint64_t page_size = 16;
  double budget_fraction = 0.5;  // of the unshared peak
  uint64_t max_len = 1024;       // cap on prompt and output lengths
  uint64_t seed = 1;
  uint64_t threads = 2;
};

CLI::App* AddParallelBenchCommand(CLI::App& bench, ParallelBenchOptions& options);
int RunParallelBench(const ParallelBenchOptions& options, const std::string& command);

}  // namespace folio::bench

#endif  // FOLIO_BENCH_PARALLEL_BENCH_H_
