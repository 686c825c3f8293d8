#include "cli/quantize_command.h"

#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <vector>

#include "cli/engine_flags.h"
#include "folio/core/thread_pool.h"

namespace folio::cli {
namespace {

constexpr std::string_view kCommand = "quantize";

nlohmann::json StatsJson(const checkpoint::QuantizeStats& s) {
  return {{"tensors", s.tensors},
          {"elements", s.elements},
          {"bytes", s.bytes},
          {"bits_per_weight", s.BitsPerWeight()},
          {"rms_relative_error", s.RmsRelativeError()}};
}

}  // namespace

CLI::App* AddQuantizeCommand(CLI::App& app, QuantizeFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "quantize", "write a model as a GGUF file with its matrices in another type (JSON summary)");
  cmd->add_option("input", f.input, "model folder (Hugging Face or folio) or .gguf file")
      ->required();
  cmd->add_option("output", f.output, "the GGUF file to write (atomically)")->required();
  std::string types;
  for (const checkpoint::QuantizeScheme& s : checkpoint::kQuantizeSchemes) {
    types += types.empty() ? "" : ", ";
    types += s.name;
  }
  cmd->add_option("--type", f.type, types)->required();
  cmd->add_option("--threads", f.threads, "0 = all cores");
  return cmd;
}

nlohmann::json QuantizeReportJson(const QuantizeFlags& f, const checkpoint::QuantizeScheme& scheme,
                                  const checkpoint::QuantizeReport& r) {
  nlohmann::json types = nlohmann::json::object();
  for (const auto& [type, stats] : r.by_type) {
    types[std::string(ops::WeightTypeName(type))] = StatsJson(stats);
  }
  nlohmann::json fallbacks = nlohmann::json::array();
  for (const checkpoint::TensorQuantization& t : r.tensors) {
    if (!t.fallback()) continue;
    const std::string wanted(ops::WeightTypeName(t.wanted));
    fallbacks.push_back(
        {{"tensor", t.name},
         {"shape", t.shape},
         {"wanted", wanted},
         {"used", ops::WeightTypeName(t.type)},
         {"reason", "rows of " + std::to_string(t.shape.back()) + " are not whole " + wanted +
                        " blocks of " + std::to_string(ops::TraitsOf(t.wanted).block_size)}});
  }
  nlohmann::json j = {
      {"input", f.input},           {"output", f.output},  {"source_format", r.source_format},
      {"tokenizer", r.tokenizer},   {"type", scheme.name}, {"file_type", scheme.file_type},
      {"file_bytes", r.file_bytes}, {"types", types},      {"fallbacks", fallbacks}};
  const nlohmann::json total = StatsJson(r.total);
  for (const auto& [key, value] : total.items()) j[key] = value;
  return j;
}

int RunQuantize(const QuantizeFlags& f) {
  Result<checkpoint::QuantizeScheme> scheme = checkpoint::ParseQuantizeScheme(f.type);
  if (!scheme) return Fail(kCommand, scheme.error());
  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::Create(f.threads);
  if (!pool) return Fail(kCommand, pool.error());
  const auto start = std::chrono::steady_clock::now();
  Result<checkpoint::QuantizeReport> report =
      checkpoint::QuantizeModel(f.input, f.output, *scheme, **pool);
  if (!report) return Fail(kCommand, report.error());
  const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
  // One line per kind of fallback (the JSON lists every tensor).
  std::map<std::string, std::vector<std::string>> fallbacks;
  for (const checkpoint::TensorQuantization& t : report->tensors) {
    if (!t.fallback()) continue;
    fallbacks[std::string("rows of ") + std::to_string(t.shape.back()) + " are not whole " +
              std::string(ops::WeightTypeName(t.wanted)) + " blocks: wrote " +
              std::string(ops::WeightTypeName(t.type))]
        .push_back(t.name);
  }
  for (const auto& [what, names] : fallbacks) {
    std::cerr << "folio quantize: " << names.size() << (names.size() == 1 ? " tensor" : " tensors")
              << " (" << names.front() << (names.size() > 1 ? ", ..." : "") << "): " << what
              << "\n";
  }
  nlohmann::json j = QuantizeReportJson(f, *scheme, *report);
  j["threads"] = (*pool)->num_threads();
  j["seconds"] = seconds.count();
  std::cout << j.dump(2) << "\n";
  return 0;
}

}  // namespace folio::cli
