// `folio layout`: the page-table worked example (configs/worked_example.toml,
// or any --config and overrides) as one JSON document: the scalar index of
// every position, byte accounting per layer, paged against contiguous
// logits, and a greedy or sampled generation on the engine's paged cache
// with the given page table (cli/layout_report.h builds it).
#ifndef FOLIO_CLI_LAYOUT_COMMAND_H_
#define FOLIO_CLI_LAYOUT_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#ifndef FOLIO_SOURCE_DIR
#define FOLIO_SOURCE_DIR "."
#endif

namespace folio::cli {

struct LayoutFlags {
  std::string config_path = std::string(FOLIO_SOURCE_DIR) + "/configs/worked_example.toml";
  std::string output;
  bool summary = false;
  std::optional<uint64_t> hidden_size, num_heads, num_kv_heads, ffn_size, num_layers, window, seed,
      capacity, page_size, batch, prompt_tokens, max_new_tokens, top_k, sampling_seed,
      rounding_capacity, rounding_page_size;
  std::optional<double> temperature;
  std::optional<std::string> page_table, kv_dtype, compute, document;
};

CLI::App* AddLayoutCommand(CLI::App& app, LayoutFlags& flags);
int RunLayout(const LayoutFlags& flags);

}  // namespace folio::cli

#endif  // FOLIO_CLI_LAYOUT_COMMAND_H_
