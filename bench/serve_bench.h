// `folio bench serve`: what paging buys a continuous-batching server.
//
// One workload (seeded random prompts and output lengths) runs through the
// engine in three modes that share weights, kernels and scheduler:
//
//   dense         each request reserves its maximum length (prompt +
//                 max_tokens) up front, as a contiguous K/V allocation must,
//                 and attention runs on a dense K/V batch rebuilt (copied)
//                 every step;
//   paged_gather  pages on demand, but the pages are gathered into a dense
//                 batch before attention every step;
//   paged         pages on demand, attention reads them through the block
//                 tables (folio's path).
//
// Every request asks for max_tokens = --max-output-len and stops after its
// own drawn output length (as a request ending at its end-of-sequence token
// would), so reservations are for the cap while outputs are shorter.
// All requests arrive at time 0; time to first token includes queueing.
//
// An admission sweep then fixes KV byte budgets and runs the workload
// paged (on demand) and reserved (maximum length), reporting how many
// requests ran at once and the output throughput. With --capacity-kv-dtypes
// a capacity sweep holds each budget's bytes fixed (sized in --kv-dtype)
// and runs the paged mode once per KV dtype: a narrower cache fits more
// pages, so more requests. docs/benchmarks.md ("Serving") defines every
// field.
#ifndef FOLIO_BENCH_SERVE_BENCH_H_
#define FOLIO_BENCH_SERVE_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "folio/model/config.h"

namespace CLI {
class App;
}

namespace folio::bench {

struct ServeBenchOptions {
  std::string model;        // "" = the synthetic serving model
  std::string json_output;  // "" = stdout
  std::string plot_output;  // "" = <json_output without .json>.svg, none for stdout
  // The 2-layer model; on the command line also 8 requests of 64-256 +
  // 16-32 tokens, prefill step 64, sweep 2,4 (where not given; under two
  // minutes).
  bool quick = false;
  uint64_t num_seqs = 16;
  uint64_t batch_size = 4;  // running sequences (max_num_seqs)
  uint64_t min_input_len = 128;
  uint64_t max_input_len = 1024;
  uint64_t min_output_len = 32;
  uint64_t max_output_len = 128;
  uint64_t prefill_step = 128;  // tokens per step (max_num_batched_tokens)
  uint64_t repeats = 1;
  uint64_t page_size = 16;
  std::string kv_dtype = "f32";
  uint64_t threads = 0;  // 0 = every core
  uint64_t seed = 7;
  // Admission sweep budgets, in maximum-length requests' worth of KV.
  std::vector<uint64_t> sweep_requests = {2, 4, 8};
  bool no_sweep = false;
  // KV dtypes the capacity sweep compares at equal bytes (empty: none).
  std::vector<std::string> capacity_kv_dtypes;
};

// The synthetic serving model: Llama-style with bf16 weights, 4 layers,
// hidden 1024, 16 heads, 4 K/V heads, ffn 2816, vocab 8192 (quick: 2
// layers, hidden 512, 8 heads, 2 K/V heads, ffn 1408, vocab 4096), small
// enough that the default workload runs in minutes on two cores with K/V
// traffic a visible share of a decode step.
model::ModelConfig ServeModelConfig(bool quick);

CLI::App* AddServeBenchCommand(CLI::App& bench, ServeBenchOptions& options);

// Runs the benchmark; returns the process exit code (0, or 1 on an error).
int RunServeBench(const ServeBenchOptions& options, const std::string& command);

}  // namespace folio::bench

#endif  // FOLIO_BENCH_SERVE_BENCH_H_
