#include "bench/speculative_bench.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "bench/bench_model.h"
#include "bench/machine_info.h"
#include "bench/report.h"
#include "bench/timing.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"
#include "folio/ops/packed_matmul.h"

namespace folio::bench {
namespace {

// Prompts, as ChatML user turns (SmolLM2's and Qwen's chat format; a model
// with another format still sees the text).
struct Prompt {
  const char* kind;  // "grounded" or "free"
  const char* text;
};

constexpr Prompt kPrompts[] = {
    {"grounded",
     "Repeat the following paragraph exactly, but fix the spelling mistakes:\n\n"
     "The paged key-value cache stores every tokens keys and values in fixed-size pages. A "
     "block table maps each logical page of a sequence to a physical page in the pool, so "
     "sequences can grow without copying and share there common prefixes. When a request "
     "finishes, its pages go back to the pool and are handed out again to the next request "
     "that needs them."},
    {"grounded",
     "Here is a Python function. Rename the variable `total` to `acc` and return the whole "
     "function, nothing else.\n\n"
     "def mean_of_squares(values):\n"
     "    total = 0.0\n"
     "    count = 0\n"
     "    for v in values:\n"
     "        total += v * v\n"
     "        count += 1\n"
     "    if count == 0:\n"
     "        return 0.0\n"
     "    return total / count\n"},
    {"grounded",
     "Copy this list, in the same order, and add a full stop at the end of each line:\n\n"
     "- Preheat the oven to 200 degrees\n"
     "- Slice the potatoes thinly\n"
     "- Toss them with olive oil and salt\n"
     "- Spread them on a baking tray\n"
     "- Bake for thirty minutes, turning once\n"
     "- Serve hot with a green salad\n"},
    {"free", "Write a short story about a lighthouse keeper who finds a message in a bottle."},
    {"free", "Explain why the sky is blue, for a curious ten-year-old."},
    {"free", "Give me five tips for learning to cook at home."},
};

std::string ChatMl(const std::string& user) {
  return "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
}

struct Run {
  double seconds = 0;  // decode only: after the prefill step
  uint64_t tokens = 0;
  uint64_t steps = 0;
  engine::EngineStats stats;
  std::vector<int32_t> output;
  // Each timed step's rows (the pending token plus its draft) and seconds.
  std::vector<std::pair<uint64_t, double>> step_times;
};

Result<Run> Generate(const model::Model& m, const model::Model* draft,
                     std::span<const int32_t> prompt, uint64_t k, const SpeculativeBenchOptions& o,
                     ops::MatMulActivations activations, const std::vector<int32_t>& stop_ids,
                     ThreadPool& pool) {
  engine::EngineConfig ec;
  ec.page_size = 16;
  ec.num_pages = (prompt.size() + o.max_tokens + engine::kMaxDraftTokens) / 16 + 4;
  ec.max_num_seqs = 1;
  ec.max_num_batched_tokens = prompt.size() + engine::kMaxDraftTokens + 1;
  ec.prefix_caching = false;
  ec.speculative.num_draft_tokens = k;
  ec.speculative.ngram_min = o.ngram_min;
  ec.speculative.ngram_max = o.ngram_max;
  ec.speculative.draft_model = draft;
  ec.matmul_activations = activations;
  FOLIO_ASSIGN_OR_RETURN(engine::Engine eng, engine::Engine::Create(m, ec, &pool));
  engine::RequestParams params;
  params.sampling = {0.0, 0, 1.0, 0.0};
  params.max_tokens = o.max_tokens;
  params.stop_token_ids = stop_ids;
  FOLIO_ASSIGN_OR_RETURN(engine::RequestId id,
                         eng.AddRequest({prompt.begin(), prompt.end()}, params));
  (void)id;
  Run run;
  FOLIO_ASSIGN_OR_RETURN(std::vector<engine::StepOutput> first, eng.Step());  // prefill
  for (const auto& out : first)
    run.output.insert(run.output.end(), out.new_tokens.begin(), out.new_tokens.end());
  const double t0 = NowUs();
  while (eng.HasUnfinished()) {
    const uint64_t drafted_before = eng.stats().draft_tokens;
    const double step_start = NowUs();
    FOLIO_ASSIGN_OR_RETURN(std::vector<engine::StepOutput> step, eng.Step());
    const double step_seconds = (NowUs() - step_start) * 1e-6;  // the step alone
    run.step_times.emplace_back(1 + eng.stats().draft_tokens - drafted_before, step_seconds);
    ++run.steps;
    for (const auto& out : step) {
      run.tokens += out.new_tokens.size();
      run.output.insert(run.output.end(), out.new_tokens.begin(), out.new_tokens.end());
    }
  }
  run.seconds = (NowUs() - t0) * 1e-6;
  run.stats = eng.stats();
  return run;
}

}  // namespace

CLI::App* AddSpeculativeBenchCommand(CLI::App& bench, SpeculativeBenchOptions& o) {
  CLI::App* cmd = bench.add_subcommand(
      "speculative",
      "single-stream decode with and without speculative decoding (prompt lookup or a draft "
      "model), as JSON");
  cmd->add_option("--model", o.model, "model folder or .gguf (default: the built-in model)");
  cmd->add_option("--json-output,-o", o.json_output, "write the JSON here (default: stdout)");
  cmd->add_option("--draft-tokens", o.draft_tokens,
                  "most draft tokens per step, each compared with 0 (default 8,16)")
      ->delimiter(',')
      ->check(CLI::Range(uint64_t{1}, engine::kMaxDraftTokens));
  cmd->add_option("--ngram-min", o.ngram_min, "shortest suffix looked up (default 2)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--ngram-max", o.ngram_max, "longest suffix looked up (default 4)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--max-tokens", o.max_tokens, "tokens per generation (default 128)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--threads", o.threads, "compute threads (default 2)")->check(CLI::Range(1, 256));
  cmd->add_option("--matmul-activations", o.matmul_activations,
                  "q8 (default, the engine's) or f32: how quantized weights multiply");
  cmd->add_option("--draft-model", o.draft_model,
                  "draft with this model (same vocabulary) instead of prompt lookup");
  cmd->add_option("--rounds", o.rounds, "rounds; configurations alternate within each (default 3)")
      ->check(CLI::Range(1, 1000));
  return cmd;
}

int RunSpeculativeBench(const SpeculativeBenchOptions& o, const std::string& command) {
  auto fail = [](const Status& s) {
    std::cerr << "folio bench speculative: " << s.ToString() << "\n";
    return 1;
  };
  if (o.ngram_min > o.ngram_max) {
    return fail(Status::InvalidArgument("--ngram-min exceeds --ngram-max"));
  }
  Result<ops::MatMulActivations> activations = ops::ParseMatMulActivations(o.matmul_activations);
  if (!activations) return fail(activations.error().WithContext("--matmul-activations"));
  Result<BenchModel> loaded = BenchModel::Load(o.model, 2048);
  if (!loaded) return fail(loaded.error());
  const model::Model* m = &loaded->model();
  const tokenizer::Tokenizer* tok = &loaded->tokenizer();
  std::optional<BenchModel> draft;
  if (!o.draft_model.empty()) {
    Result<BenchModel> d = BenchModel::Load(o.draft_model, 2048);
    if (!d) return fail(d.error().WithContext("--draft-model"));
    draft.emplace(std::move(*d));
  }
  const model::Model* draft_model = draft ? &draft->model() : nullptr;
  // The built-in model's vocabulary has no end of sequence: it runs to max_tokens.
  std::vector<int32_t> stop_ids;
  if (!o.model.empty() && tok->eos_id()) stop_ids.push_back(*tok->eos_id());
  std::vector<std::vector<int32_t>> prompts;
  for (const Prompt& p : kPrompts) {
    Result<std::vector<int32_t>> ids = tok->Encode(ChatMl(p.text), /*add_special_tokens=*/true);
    if (!ids) return fail(ids.error());
    if (ids->size() + o.max_tokens + 1 > m->config().max_positions) {
      return fail(Status::InvalidArgument("a prompt plus --max-tokens exceeds the model's " +
                                          std::to_string(m->config().max_positions) +
                                          " positions"));
    }
    prompts.push_back(std::move(*ids));
  }
  ThreadPool pool(o.threads);
  const MachineInfo machine = ReadMachineInfo();
  const std::array<double, 3> load_start = ReadLoadAverage();
  const CpuSnapshot run_start = TakeCpuSnapshot();

  std::vector<uint64_t> configs = {0};
  configs.insert(configs.end(), o.draft_tokens.begin(), o.draft_tokens.end());
  // [kind][k] per round: seconds and tokens summed over the kind's prompts.
  struct Sum {
    double seconds = 0;
    uint64_t tokens = 0, steps = 0, verifications = 0, drafted = 0, accepted = 0;
  };
  std::map<std::string, std::map<uint64_t, std::vector<Sum>>> sums;
  std::map<uint64_t, std::vector<double>> step_seconds;  // by rows, every timed step
  // Plain decoding's outputs, from an untimed warm-up pass (caches, pages
  // and the pool's threads warm for every timed configuration alike).
  std::vector<std::vector<int32_t>> plain(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    Result<Run> run = Generate(*m, draft_model, prompts[i], 0, o, *activations, stop_ids, pool);
    if (!run) return fail(run.error());
    plain[i] = run->output;
  }
  bool identical = true;
  // Prompt by prompt, every configuration back to back (in alternating
  // order), so a slow spell of the machine hits all of them alike.
  for (uint64_t round = 0; round < o.rounds; ++round) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::vector<uint64_t> order = configs;
      if ((round + i) % 2 == 1) std::reverse(order.begin(), order.end());
      for (const uint64_t k : order) {
        Result<Run> run = Generate(*m, draft_model, prompts[i], k, o, *activations, stop_ids, pool);
        if (!run) return fail(run.error());
        auto& rounds = sums[kPrompts[i].kind][k];
        rounds.resize(o.rounds);
        Sum& s = rounds[round];
        s.seconds += run->seconds;
        s.tokens += run->tokens;
        s.steps += run->steps;
        s.verifications += run->stats.draft_verifications;
        s.drafted += run->stats.draft_tokens;
        s.accepted += run->stats.draft_accepted_tokens;
        if (run->output != plain[i]) identical = false;
        for (const auto& [rows, seconds] : run->step_times) step_seconds[rows].push_back(seconds);
      }
    }
  }

  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [kind, by_k] : sums) {
    nlohmann::json rows = nlohmann::json::array();
    const std::vector<Sum>& base = by_k.at(0);
    for (const auto& [k, rounds] : by_k) {
      std::vector<double> tps, ratio;
      Sum total;
      for (size_t r = 0; r < rounds.size(); ++r) {
        tps.push_back(static_cast<double>(rounds[r].tokens) / rounds[r].seconds);
        ratio.push_back(base[r].seconds / rounds[r].seconds);
        total.tokens += rounds[r].tokens;
        total.steps += rounds[r].steps;
        total.verifications += rounds[r].verifications;
        total.drafted += rounds[r].drafted;
        total.accepted += rounds[r].accepted;
      }
      const auto div = [](uint64_t a, uint64_t b) {
        return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b);
      };
      rows.push_back({{"draft_tokens", k},
                      {"tokens_per_s", Quantile(tps, 0.5)},
                      {"speedup",
                       {{"median", Quantile(ratio, 0.5)},
                        {"min", *std::min_element(ratio.begin(), ratio.end())},
                        {"max", *std::max_element(ratio.begin(), ratio.end())}}},
                      {"tokens", total.tokens / rounds.size()},
                      {"tokens_per_target_step", div(total.tokens, total.steps)},
                      {"acceptance_rate", div(total.accepted, total.drafted)},
                      {"accepted_per_verification", div(total.accepted, total.verifications)},
                      {"verifications_per_step", div(total.verifications, total.steps)}});
    }
    kinds[kind] = rows;
  }
  // What a target step costs by its rows: the model of the speed-up
  // (tokens per step over the cost of a step, relative to one row).
  nlohmann::json steps_by_rows = nlohmann::json::array();
  const double one_row = step_seconds.contains(1) ? Quantile(step_seconds.at(1), 0.5) : 0.0;
  for (auto& [rows, seconds] : step_seconds) {
    const double median = Quantile(seconds, 0.5);
    steps_by_rows.push_back({{"rows", rows},
                             {"steps", seconds.size()},
                             {"median_ms", median * 1e3},
                             {"relative_to_one_row", one_row > 0 ? median / one_row : 0.0}});
  }
  const nlohmann::json report = {
      {"benchmark", "speculative"},
      {"command", command},
      {"model", o.model.empty() ? "builtin" : o.model},
      {"threads", o.threads},
      {"max_tokens", o.max_tokens},
      {"drafter", o.draft_model.empty() ? std::string("ngram") : "model " + o.draft_model},
      {"matmul_activations", o.matmul_activations},
      {"ngram", {o.ngram_min, o.ngram_max}},
      {"rounds", o.rounds},
      {"outputs_identical_to_plain_decoding", identical},
      {"kinds", kinds},
      {"step_ms_by_rows", steps_by_rows},
      {"machine", MachineJson(machine, load_start, LoadBetween(run_start, TakeCpuSnapshot()))},
  };
  if (Status s = EmitJson(report, o.json_output); !s.ok()) return fail(s);
  return identical ? 0 : 1;
}

}  // namespace folio::bench
