// `folio bench kv-transfer`: what moving a KV cache between engine processes
// costs. A batch of prompts is prefilled, then each stage of a transfer is
// timed on its own: export (pages copied out of the pool and converted from
// its head-major [heads, page_size, dim] pages to the interchange's
// token-major [page_size, heads, dim]), encode (descriptors, CRC-32), write
// the file, read and decode it (CRC-32 and every check), and import into a
// fresh engine (conversion back). A memcpy of the same K/V bytes gives the
// floor. docs/benchmarks.md ("KV transfer") explains the fields.
#ifndef FOLIO_BENCH_KV_TRANSFER_BENCH_H_
#define FOLIO_BENCH_KV_TRANSFER_BENCH_H_

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace folio::bench {

struct KvTransferBenchOptions {
  std::string model;        // "" = the synthetic serving model (bench serve's)
  std::string json_output;  // "" = stdout
  std::string file;         // "" = a temporary file
  bool quick = false;       // command line: 4 x 256 tokens, 3 repeats where not given
  uint64_t num_seqs = 8;
  uint64_t prompt_len = 1024;
  uint64_t page_size = 16;
  std::string kv_dtype = "bf16";
  uint64_t repeats = 5;
  uint64_t threads = 0;
  uint64_t seed = 7;
};

CLI::App* AddKvTransferBenchCommand(CLI::App& bench, KvTransferBenchOptions& options);
int RunKvTransferBench(const KvTransferBenchOptions& options, const std::string& command);

}  // namespace folio::bench

#endif  // FOLIO_BENCH_KV_TRANSFER_BENCH_H_
