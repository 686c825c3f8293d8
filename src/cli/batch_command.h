// `folio batch`: a short continuous-batching run on a byte-level model
// (the worked example's shape with room for 64 positions): several prompts
// of different lengths enter together, tokens stream step by step, and the
// summary says how pages were used, reused and freed.
#ifndef FOLIO_CLI_BATCH_COMMAND_H_
#define FOLIO_CLI_BATCH_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace folio::cli {

struct BatchFlags {
  // The last prompt shares its first pages with the third; it waits for a
  // free sequence slot and then finds them in the prefix cache.
  std::vector<std::string> prompts = {"paged attention", "kv", "a block table maps pages",
                                      "continuous batching", "a block table maps tokens"};
  uint64_t max_tokens = 8;
  uint64_t page_size = 4;
  uint64_t num_pages = 16;
  uint64_t max_num_batched_tokens = 8;
  uint64_t seed = 7;
};

CLI::App* AddBatchCommand(CLI::App& app, BatchFlags& flags);
int RunBatch(const BatchFlags& flags);

}  // namespace folio::cli

#endif  // FOLIO_CLI_BATCH_COMMAND_H_
