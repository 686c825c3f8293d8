// build/bin/folio: the command-line front end, one file per subcommand.
//   folio layout    the worked-example report (JSON)
//   folio generate  stream a continuation from the built-in or a saved model
//   (cli/generate_command.h) folio logits    prefill logits and a greedy continuation
//   (cli/logits_command.h) folio batch     a short continuous-batching run (cli/batch_command.h)
//   folio tokenize  a model's tokenizer alone (cli/tokenize_command.h)
//   folio info      a model's shape and sizes (cli/info_command.h)
//   folio serve     OpenAI-compatible HTTP server (cli/serve_command.h)
//   folio chat      an interactive chat in the terminal (cli/chat_command.h)
//   folio template  a chat template rendered for a conversation (cli/template_command.h)
//   folio save-model  write the built-in model as config.json + safetensors
//   (cli/save_model_command.h) folio quantize  a model file as GGUF with its matrices in another
//   type (cli/quantize_command.h) folio bench attention  paged vs dense attention decode timings
//   (JSON) folio bench decode     prefill / decode tokens/s vs the bandwidth floor (JSON) folio
//   bench serve      continuous batching: dense vs gather vs paged (JSON) folio bench kv-transfer
//   export / encode / write / read / import of a KV cache (JSON) folio bench template   chat
//   template render time (JSON) folio kv export|import|inspect  KV snapshots between processes
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "bench/attention_bench.h"
#include "bench/decode_bench.h"
#include "bench/kv_accuracy_bench.h"
#include "bench/kv_transfer_bench.h"
#include "bench/parallel_bench.h"
#include "bench/serve_bench.h"
#include "bench/speculative_bench.h"
#include "bench/template_bench.h"
#include "cli/batch_command.h"
#include "cli/chat_command.h"
#include "cli/engine_flags.h"
#include "cli/flag_lists.h"
#include "cli/generate_command.h"
#include "cli/info_command.h"
#include "cli/kv_commands.h"
#include "cli/layout_report.h"
#include "cli/logits_command.h"
#include "cli/quantize_command.h"
#include "cli/save_model_command.h"
#include "cli/serve_command.h"
#include "cli/template_command.h"
#include "cli/tokenize_command.h"
#include "folio/backend/backend.h"
#include "folio/checkpoint/model_io.h"
#include "folio/checkpoint/model_tokenizer.h"
#include "folio/core/checked_math.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"
#include "folio/model/decoder.h"
#include "folio/model/model.h"
#include "folio/serving/engine_args.h"
#include "folio/tokenizer/byte_tokenizer.h"

#ifndef FOLIO_SOURCE_DIR
#define FOLIO_SOURCE_DIR "."
#endif

namespace folio::cli {
namespace {

// The subcommands written here report errors as "folio: ...".
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

void AddLayoutFlags(CLI::App& app, LayoutFlags& f) {
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

}  // namespace
}  // namespace folio::cli

int main(int argc, char** argv) {
  using namespace folio::cli;
  CLI::App app{"folio: an LLM inference engine built around a paged KV cache"};
  app.require_subcommand(1);

  LayoutFlags layout;
  CLI::App* layout_cmd = app.add_subcommand("layout", "the page-table worked example as JSON");
  AddLayoutFlags(*layout_cmd, layout);

  GenerateFlags gen;
  CLI::App* gen_cmd = AddGenerateCommand(app, gen);

  SaveModelFlags save;
  CLI::App* save_cmd = AddSaveModelCommand(app, save);

  TokenizeFlags tokenize;
  CLI::App* tokenize_cmd = AddTokenizeCommand(app, tokenize);

  LogitsFlags logits;
  CLI::App* logits_cmd = AddLogitsCommand(app, logits);

  BatchFlags batch;
  CLI::App* batch_cmd = AddBatchCommand(app, batch);

  KvFlags kv_flags;
  const KvCommands kv_cmds = AddKvCommands(app, kv_flags);

  ServeFlags serve;
  CLI::App* serve_cmd = AddServeCommand(app, serve);
  ChatFlags chat_flags;
  CLI::App* chat_cmd = AddChatCommand(app, chat_flags);

  TemplateFlags template_flags;
  CLI::App* template_cmd = AddTemplateCommand(app, template_flags);

  QuantizeFlags quantize;
  CLI::App* quantize_cmd = AddQuantizeCommand(app, quantize);

  InfoFlags info;
  CLI::App* info_cmd = AddInfoCommand(app, info);

  folio::bench::AttentionBenchOptions bench_attention;
  CLI::App* bench_cmd = app.add_subcommand("bench", "benchmarks that print JSON");
  bench_cmd->require_subcommand(1);
  CLI::App* bench_attention_cmd =
      folio::bench::AddAttentionBenchCommand(*bench_cmd, bench_attention);
  folio::bench::DecodeBenchOptions bench_decode;
  CLI::App* bench_decode_cmd = folio::bench::AddDecodeBenchCommand(*bench_cmd, bench_decode);
  folio::bench::KvTransferBenchOptions bench_kv;
  CLI::App* bench_kv_cmd = folio::bench::AddKvTransferBenchCommand(*bench_cmd, bench_kv);
  folio::bench::ServeBenchOptions bench_serve;
  CLI::App* bench_serve_cmd = folio::bench::AddServeBenchCommand(*bench_cmd, bench_serve);
  folio::bench::TemplateBenchOptions bench_template;
  CLI::App* bench_template_cmd = folio::bench::AddTemplateBenchCommand(*bench_cmd, bench_template);
  folio::bench::ParallelBenchOptions bench_parallel;
  CLI::App* bench_parallel_cmd = folio::bench::AddParallelBenchCommand(*bench_cmd, bench_parallel);
  folio::bench::SpeculativeBenchOptions bench_speculative;
  CLI::App* bench_speculative_cmd =
      folio::bench::AddSpeculativeBenchCommand(*bench_cmd, bench_speculative);
  folio::bench::KvAccuracyBenchOptions bench_kv_accuracy;
  CLI::App* bench_kv_accuracy_cmd =
      folio::bench::AddKvAccuracyBenchCommand(*bench_cmd, bench_kv_accuracy);

  CLI11_PARSE(app, argc, argv);
  if (*bench_attention_cmd) {
    return folio::bench::RunAttentionBench(bench_attention, folio::bench::CommandLine(argc, argv));
  }
  if (*bench_kv_cmd) {
    return folio::bench::RunKvTransferBench(bench_kv, folio::bench::CommandLine(argc, argv));
  }
  if (*bench_serve_cmd) {
    return folio::bench::RunServeBench(bench_serve, folio::bench::CommandLine(argc, argv));
  }
  if (*bench_template_cmd) {
    return folio::bench::RunTemplateBench(bench_template, folio::bench::CommandLine(argc, argv));
  }
  if (*bench_parallel_cmd) {
    return folio::bench::RunParallelBench(bench_parallel, folio::bench::CommandLine(argc, argv));
  }
  if (*bench_speculative_cmd) {
    return folio::bench::RunSpeculativeBench(bench_speculative,
                                             folio::bench::CommandLine(argc, argv));
  }
  if (*bench_kv_accuracy_cmd) {
    return folio::bench::RunKvAccuracyBench(bench_kv_accuracy,
                                            folio::bench::CommandLine(argc, argv));
  }
  if (*bench_decode_cmd) {
    return folio::bench::RunDecodeBench(bench_decode, folio::bench::CommandLine(argc, argv));
  }
  if (*serve_cmd) return RunServe(serve);
  if (*chat_cmd) return RunChat(chat_flags);
  if (*template_cmd) return RunTemplate(template_flags);
  if (*quantize_cmd) return RunQuantize(quantize);
  if (*logits_cmd) return RunLogits(logits);
  if (*tokenize_cmd) return RunTokenize(tokenize);
  if (*info_cmd) return RunInfo(info);
  if (*batch_cmd) return RunBatch(batch);
  if (*kv_cmds.exp) return RunKvExport(kv_flags);
  if (*kv_cmds.imp) return RunKvImport(kv_flags);
  if (*kv_cmds.inspect) return RunKvInspect(kv_flags);
  if (*layout_cmd) return RunLayout(layout);
  if (*gen_cmd) return RunGenerate(gen);
  if (*save_cmd) return RunSaveModel(save);
  return 0;
}
