#include "cli/layout_command.h"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "cli/engine_flags.h"
#include "cli/flag_lists.h"
#include "cli/layout_report.h"
#include "folio/core/dtype.h"

namespace folio::cli {
namespace {

// Errors read "folio: ...", as they always have for this command.
constexpr std::string_view kCommand = "";

void PrintSummary(const nlohmann::json& r, const std::string& path) {
  const auto& layer = r["per_layer_payloads"]["layers"][0];
  const auto& c = r["model_comparison"];
  const auto& g = r["generation"];
  std::vector<uint64_t> indices;
  for (const auto& m : r["mappings"]) indices.push_back(m["key_scalar_index"]);
  std::cout << "worked example, page table " << r["config"]["cache"]["page_table"].dump()
            << ", page size " << r["config"]["cache"]["page_size"] << "\n"
            << "  positions 0.." << indices.size() - 1 << " at K/V scalar indices "
            << nlohmann::json(indices).dump() << "\n"
            << "  per layer: " << layer["allocated_payload_bytes"] << " B allocated, "
            << layer["live_payload_bytes"] << " B live, " << layer["active_page_tail_payload_bytes"]
            << " B partial-page tail, " << layer["inactive_page_payload_bytes"]
            << " B inactive pages\n"
            << "  " << c["logits_compared"]
            << " logits: paged == contiguous bit for bit: " << c["same_cached_bits"] << "; within "
            << c["tolerance"].get<double>() << " of the full forward: " << c["within_tolerance"]
            << "\n"
            << "  greedy from " << g["prompt"].dump() << ": " << g["generated_ids"].dump() << " ("
            << g["stop_reason"].get<std::string>() << ", cache length " << g["final_cache_length"]
            << ", same in both layouts: " << g["same_steps"] << ")\n"
            << "  full report: " << path << "\n";
}

}  // namespace

CLI::App* AddLayoutCommand(CLI::App& parent, LayoutFlags& f) {
  CLI::App* cmd = parent.add_subcommand("layout", "the page-table worked example as JSON");
  CLI::App& app = *cmd;
  app.add_option("--config", f.config_path, "TOML config (default: the worked example)");
  app.add_option("--output,-o", f.output, "write the JSON here instead of stdout");
  app.add_flag("--summary", f.summary, "with --output: print a short human summary");
  app.add_option("--hidden-size", f.hidden_size);
  app.add_option("--num-heads", f.num_heads);
  app.add_option("--num-kv-heads", f.num_kv_heads);
  app.add_option("--ffn-size", f.ffn_size);
  app.add_option("--num-layers", f.num_layers);
  app.add_option("--window", f.window, "sliding window, 0 = none");
  app.add_option("--seed", f.seed, "initialisation seed");
  app.add_option("--capacity", f.capacity, "cache capacity = max positions");
  app.add_option("--page-size", f.page_size);
  app.add_option("--page-table", f.page_table, "logical->physical pages, e.g. 2,0,3,1");
  app.add_option("--batch", f.batch);
  app.add_option("--kv-dtype", f.kv_dtype, "f64, f32, bf16 or f16");
  app.add_option("--compute", f.compute, "f64 or f32");
  app.add_option("--document", f.document);
  app.add_option("--prompt-tokens", f.prompt_tokens);
  app.add_option("--max-new-tokens", f.max_new_tokens);
  app.add_option("--temperature", f.temperature);
  app.add_option("--top-k", f.top_k);
  app.add_option("--sampling-seed", f.sampling_seed);
  app.add_option("--rounding-capacity", f.rounding_capacity);
  app.add_option("--rounding-page-size", f.rounding_page_size);
  return cmd;
}

int RunLayout(const LayoutFlags& f) {
  Result<LayoutRunConfig> loaded = LoadLayoutConfig(f.config_path);
  if (!loaded) return Fail(kCommand, loaded.error());
  LayoutRunConfig c = *loaded;
  auto set = [](auto& dst, const auto& src) {
    if (src) dst = *src;
  };
  set(c.model.hidden_size, f.hidden_size);
  set(c.model.num_heads, f.num_heads);
  set(c.model.num_kv_heads, f.num_kv_heads);
  set(c.model.ffn_size, f.ffn_size);
  set(c.model.num_layers, f.num_layers);
  set(c.model.window, f.window);
  set(c.seed, f.seed);
  set(c.model.max_positions, f.capacity);
  set(c.page_size, f.page_size);
  set(c.batch, f.batch);
  set(c.document, f.document);
  set(c.prompt_tokens, f.prompt_tokens);
  set(c.max_new_tokens, f.max_new_tokens);
  set(c.temperature, f.temperature);
  set(c.top_k, f.top_k);
  set(c.sampling_seed, f.sampling_seed);
  set(c.rounding_capacity, f.rounding_capacity);
  set(c.rounding_page_size, f.rounding_page_size);
  if (f.page_table) {
    Result<std::vector<uint64_t>> t = ParseUintList("--page-table", *f.page_table);
    if (!t) return Fail(kCommand, t.error());
    c.page_table = *t;
  }
  for (auto [flag, dst] :
       {std::pair{&f.kv_dtype, &c.kv_dtype}, std::pair{&f.compute, &c.compute}}) {
    if (!*flag) continue;
    Result<DType> d = ParseDType(**flag);
    if (!d) return Fail(kCommand, d.error());
    *dst = *d;
  }
  Result<nlohmann::json> report = BuildLayoutReport(c);
  if (!report) return Fail(kCommand, report.error());
  const std::string text = report->dump(2) + "\n";
  if (f.output.empty()) {
    std::cout << text;
    return 0;
  }
  std::ofstream out(f.output, std::ios::trunc);
  out << text;
  if (!out) return Fail(kCommand, Status::IoError("cannot write " + f.output));
  if (f.summary) PrintSummary(*report, f.output);
  return 0;
}

}  // namespace folio::cli
