// `folio bench attention`: the CPU paged-attention decode kernel on a
// Llama-3-8B layer shape (32 query heads, 8 K/V heads, head_dim 128, one
// query row per sequence, page_size 16), in three memory layouts that the
// same kernel reads:
//   contiguous  each sequence's K/V in one page of `context` slots (dense);
//   gather      K/V in a shuffled paged pool, copied to the dense layout
//               inside every timed call, then the dense kernel;
//   paged       the kernel reads the shuffled pool through the block table.
// Times are set against the machine's streaming read bandwidth, measured in
// the same run: at its start and end, and out of cache also in rounds with
// each of contiguous and paged. Output is JSON (rows and the verdict on the performance
// targets) plus an SVG plot; docs/benchmarks.md explains the fields.
#ifndef FOLIO_BENCH_ATTENTION_BENCH_H_
#define FOLIO_BENCH_ATTENTION_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace folio::bench {

struct AttentionBenchOptions {
  uint64_t threads = 0;     // 0 = std::thread::hardware_concurrency()
  std::string json_output;  // "" = stdout
  std::string plot;         // "" = beside json_output, else ./attention_bench.svg
  bool no_plot = false;
  bool quick = false;              // contexts 1024 and 16384, batch 1, bf16
  std::vector<uint64_t> contexts;  // empty = the grid's (or --quick's)
  std::vector<uint64_t> batches;
  std::vector<std::string> kv_dtypes;
  bool sequential = false;              // time modes one after another, not in rounds
  uint64_t repeats = 15;                // samples per row (fewer, >= 5, for slow rows)
  uint64_t passes = 1;                  // walks of the grid; a row pools every pass's samples
  uint64_t page_size = 16;              // of the paged pool
  std::string page_order = "shuffled";  // shuffled, pool or engine (attention_fixture.h)
  uint64_t seed = 20;
  uint64_t bandwidth_mib = 2048;  // streaming-read buffer
  uint64_t bandwidth_passes = 5;
  double out_of_cache_factor = 2.0;  // K+V > factor * LLC = out of cache
};

// Adds the `attention` subcommand and its flags to `bench`.
CLI::App* AddAttentionBenchCommand(CLI::App& bench, AttentionBenchOptions& options);

// Runs the benchmark; returns the process exit code: 0, 1 on an error, 2
// when the three layouts' outputs are not bit-identical.
int RunAttentionBench(const AttentionBenchOptions& options, const std::string& command);

// argv joined with spaces, quoting arguments that need it: the `command`
// a report records.
std::string CommandLine(int argc, char** argv);

}  // namespace folio::bench

#endif  // FOLIO_BENCH_ATTENTION_BENCH_H_
