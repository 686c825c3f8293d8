#include "bench/parallel_bench.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "bench/bench_model.h"
#include "bench/machine_info.h"
#include "bench/report.h"
#include "bench/timing.h"
#include "folio/core/checked_math.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"

namespace folio::bench {
namespace {

struct Work {
  std::vector<int32_t> prompt;
  uint64_t max_tokens;
};

// ShareGPT-like lengths: log-normal with vLLM's ShareGPT means (161 prompt,
// 338 output tokens), sigma 0.8, clamped to [4, max_len].
std::vector<Work> Workload(uint64_t requests, uint64_t max_len, uint64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double sigma = 0.8;
  const auto length = [&](double mean) {
    std::lognormal_distribution<double> d(std::log(mean) - sigma * sigma / 2, sigma);
    return std::clamp<uint64_t>(static_cast<uint64_t>(d(rng)), 4, max_len);
  };
  std::vector<Work> w;
  for (uint64_t r = 0; r < requests; ++r) {
    Work x;
    x.prompt.resize(length(161));
    for (int32_t& t : x.prompt) t = static_cast<int32_t>(2 + rng() % (vocab - 2));
    x.max_tokens = length(338);
    w.push_back(std::move(x));
  }
  return w;
}

struct Outcome {
  uint64_t peak_pages = 0;
  uint64_t tokens = 0;
  uint64_t preemptions = 0;
  double seconds = 0;
};

// The engine both runs use: 64 running sequences (at least a group's),
// no prefix cache (its sharing would blur the forks').
engine::EngineConfig Config(uint64_t page_size, uint64_t num_pages, uint64_t group) {
  engine::EngineConfig ec;
  ec.page_size = page_size;
  ec.num_pages = num_pages;
  ec.max_num_seqs = std::max<uint64_t>(64, group);
  ec.max_num_batched_tokens = 2048;
  ec.prefix_caching = false;
  return ec;
}

// Runs the workload: n samples per request (shared) or n requests per
// prompt (unshared), every sample to its max_tokens (no stop tokens).
Result<Outcome> RunWorkload(const model::Model& m, const std::vector<Work>& work, uint64_t n,
                            bool shared, uint64_t page_size, uint64_t num_pages, ThreadPool& pool) {
  FOLIO_ASSIGN_OR_RETURN(engine::Engine eng,
                         engine::Engine::Create(m, Config(page_size, num_pages, n), &pool));
  for (size_t r = 0; r < work.size(); ++r) {
    engine::RequestParams p;
    p.sampling = {1.0, 0, 1.0, 0.0};
    p.max_tokens = work[r].max_tokens;
    p.seed = r;
    if (shared) {
      p.n = n;
      FOLIO_RETURN_IF_ERROR(eng.AddRequest(work[r].prompt, p).status());
    } else {
      for (uint64_t i = 0; i < n; ++i) {
        engine::RequestParams q = p;
        q.seed = engine::SampleSeed(p.seed, i);
        FOLIO_RETURN_IF_ERROR(eng.AddRequest(work[r].prompt, q).status());
      }
    }
  }
  Outcome o;
  const double t0 = NowUs();
  while (eng.HasUnfinished()) {
    FOLIO_ASSIGN_OR_RETURN(std::vector<engine::StepOutput> step, eng.Step());
    for (const auto& s : step) o.tokens += s.new_tokens.size();
    o.peak_pages = std::max<uint64_t>(o.peak_pages, eng.cache().pool().num_used());
  }
  o.seconds = (NowUs() - t0) * 1e-6;
  o.preemptions = eng.stats().preemptions;
  return o;
}

// Beam search of width w on every prompt, to its max_tokens (no end
// tokens): the pool's peak pages (beams forked, sharing what they have in
// common) against the peak of the pages the same beams would hold each
// with its own copy (the sum of their lengths in pages), in the same run.
struct BeamOutcome {
  uint64_t peak_pages = 0;
  uint64_t peak_copied_pages = 0;
  uint64_t tokens = 0;
  double seconds = 0;
};

Result<BeamOutcome> RunBeams(const model::Model& m, const std::vector<Work>& work, uint64_t width,
                             uint64_t page_size, uint64_t num_pages, ThreadPool& pool) {
  FOLIO_ASSIGN_OR_RETURN(engine::Engine eng,
                         engine::Engine::Create(m, Config(page_size, num_pages, width), &pool));
  for (const Work& w : work) {
    engine::RequestParams p;
    p.max_tokens = w.max_tokens;
    p.beam = {width, 1.0, engine::EarlyStopping::kHeuristic};
    FOLIO_RETURN_IF_ERROR(eng.AddRequest(w.prompt, p).status());
  }
  BeamOutcome o;
  const double t0 = NowUs();
  while (eng.HasUnfinished()) {
    FOLIO_ASSIGN_OR_RETURN(std::vector<engine::StepOutput> step, eng.Step());
    for (const auto& s : step) o.tokens += s.new_tokens.size();
    o.peak_pages = std::max<uint64_t>(o.peak_pages, eng.cache().pool().num_used());
    uint64_t copied = 0;
    for (const engine::RequestId id : eng.scheduler().running()) {
      copied += CeilDiv(eng.scheduler().sequence(id).num_computed, page_size);
    }
    o.peak_copied_pages = std::max(o.peak_copied_pages, copied);
  }
  o.seconds = (NowUs() - t0) * 1e-6;
  return o;
}

nlohmann::json OutcomeJson(const Outcome& o) {
  return {{"peak_pages", o.peak_pages},
          {"tokens", o.tokens},
          {"preemptions", o.preemptions},
          {"seconds", o.seconds},
          {"tokens_per_s", o.seconds > 0 ? static_cast<double>(o.tokens) / o.seconds : 0.0}};
}

}  // namespace

CLI::App* AddParallelBenchCommand(CLI::App& bench, ParallelBenchOptions& o) {
  CLI::App* cmd = bench.add_subcommand(
      "parallel", "KV pages saved by forking parallel samples, and throughput at a fixed budget");
  cmd->add_option("--model", o.model, "model folder or .gguf (default: the built-in model)");
  cmd->add_option("--json-output,-o", o.json_output, "write the JSON here (default: stdout)");
  cmd->add_option("--n-list", o.n_list, "samples per request (default 2,4,8)")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  cmd->add_option("--beam-widths", o.beam_widths, "beam search widths (default 2,4,8)")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  cmd->add_option("--requests", o.requests, "requests (default 16)")->check(CLI::Range(1, 10000));
  cmd->add_option("--page-size", o.page_size, "KV page size (default 16)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--budget-fraction", o.budget_fraction,
                  "fixed KV budget as a fraction of the unshared peak (default 0.5)")
      ->check(CLI::Range(0.05, 1.0));
  cmd->add_option("--max-len", o.max_len, "cap on prompt and output lengths (default 1024)")
      ->check(CLI::Range(8, 1 << 20));
  cmd->add_option("--seed", o.seed, "workload seed");
  cmd->add_option("--threads", o.threads, "compute threads (default 2)")->check(CLI::Range(1, 256));
  return cmd;
}

int RunParallelBench(const ParallelBenchOptions& o, const std::string& command) {
  auto fail = [](const Status& s) {
    std::cerr << "folio bench parallel: " << s.ToString() << "\n";
    return 1;
  };
  Result<BenchModel> loaded = BenchModel::Load(o.model, 2 * o.max_len + 1);
  if (!loaded) return fail(loaded.error());
  const model::Model* m = &loaded->model();
  if (2 * o.max_len > m->config().max_positions) {
    return fail(Status::InvalidArgument("--max-len: prompt + output may exceed the model's " +
                                        std::to_string(m->config().max_positions) + " positions"));
  }
  const std::vector<Work> work = Workload(o.requests, o.max_len, m->config().vocab_size, o.seed);
  ThreadPool pool(o.threads);
  const MachineInfo machine = ReadMachineInfo();
  const std::array<double, 3> load_start = ReadLoadAverage();
  const CpuSnapshot run_start = TakeCpuSnapshot();
  nlohmann::json rows = nlohmann::json::array();
  for (const uint64_t n : o.n_list) {
    // Unbounded: every sample's whole length fits at once.
    uint64_t unbounded = 0;
    for (const Work& w : work) {
      unbounded += n * (CeilDiv(w.prompt.size() + w.max_tokens, o.page_size) + 1);
    }
    Result<Outcome> shared = RunWorkload(*m, work, n, true, o.page_size, unbounded, pool);
    if (!shared) return fail(shared.error());
    Result<Outcome> copied = RunWorkload(*m, work, n, false, o.page_size, unbounded, pool);
    if (!copied) return fail(copied.error());
    uint64_t longest = 0;
    for (const Work& w : work) {
      longest = std::max<uint64_t>(longest, CeilDiv(w.prompt.size() + w.max_tokens, o.page_size));
    }
    const uint64_t budget = std::max<uint64_t>(
        longest * n + 1,
        static_cast<uint64_t>(o.budget_fraction * static_cast<double>(copied->peak_pages)));
    Result<Outcome> shared_b = RunWorkload(*m, work, n, true, o.page_size, budget, pool);
    if (!shared_b) return fail(shared_b.error());
    Result<Outcome> copied_b = RunWorkload(*m, work, n, false, o.page_size, budget, pool);
    if (!copied_b) return fail(copied_b.error());
    rows.push_back(
        {{"n", n},
         {"unbounded", {{"shared", OutcomeJson(*shared)}, {"copied", OutcomeJson(*copied)}}},
         {"pages_saved_fraction",
          1.0 - static_cast<double>(shared->peak_pages) / static_cast<double>(copied->peak_pages)},
         {"budget_pages", budget},
         {"at_budget", {{"shared", OutcomeJson(*shared_b)}, {"copied", OutcomeJson(*copied_b)}}},
         {"throughput_ratio_at_budget",
          (static_cast<double>(shared_b->tokens) / shared_b->seconds) /
              (static_cast<double>(copied_b->tokens) / copied_b->seconds)}});
  }
  nlohmann::json beam_rows = nlohmann::json::array();
  for (const uint64_t width : o.beam_widths) {
    uint64_t unbounded = 0;
    for (const Work& w : work) {
      unbounded += width * (CeilDiv(w.prompt.size() + w.max_tokens, o.page_size) + 1);
    }
    Result<BeamOutcome> b = RunBeams(*m, work, width, o.page_size, unbounded, pool);
    if (!b) return fail(b.error());
    beam_rows.push_back(
        {{"num_beams", width},
         {"peak_pages", b->peak_pages},
         {"peak_copied_pages", b->peak_copied_pages},
         {"pages_saved_fraction",
          1.0 - static_cast<double>(b->peak_pages) / static_cast<double>(b->peak_copied_pages)},
         {"tokens_returned", b->tokens},
         {"seconds", b->seconds}});
  }
  const nlohmann::json report = {
      {"benchmark", "parallel"},
      {"command", command},
      {"model", o.model.empty() ? "builtin" : o.model},
      {"workload",
       {{"requests", o.requests},
        {"lengths", "log-normal, means 161 prompt / 338 output tokens, sigma 0.8, clamped to [4, " +
                        std::to_string(o.max_len) + "]"},
        {"seed", o.seed}}},
      {"page_size", o.page_size},
      {"rows", rows},
      {"beam_rows", beam_rows},
      {"machine", MachineJson(machine, load_start, LoadBetween(run_start, TakeCpuSnapshot()))},
  };
  if (Status s = EmitJson(report, o.json_output); !s.ok()) return fail(s);
  return 0;
}

}  // namespace folio::bench
