#include "bench/serve_bench.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "bench/decode_bench.h"
#include "bench/engine_baselines.h"
#include "bench/machine_info.h"
#include "bench/quick_defaults.h"
#include "bench/report.h"
#include "bench/svg_plot.h"
#include "bench/timing.h"
#include "folio/core/checked_math.h"
#include "folio/core/dtype.h"
#include "folio/core/splitmix64.h"
#include "folio/engine/engine.h"
#include "folio/engine/kv_cache_manager.h"
#include "folio/kv/paged_kv_cache.h"
#include "folio/model/model.h"

namespace folio::bench {
namespace {

using nlohmann::json;

struct Workload {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<uint64_t> output_lens;  // each request stops after this many
  uint64_t max_tokens = 0;            // what every request asks for (the cap)
  uint64_t prompt_tokens = 0;
  uint64_t output_tokens = 0;
};

Workload MakeWorkload(const ServeBenchOptions& o, uint64_t vocab) {
  Workload w;
  SplitMix64 rng(o.seed ^ 0x5e7eull);
  auto uniform = [&](uint64_t lo, uint64_t hi) { return lo + rng.NextU64() % (hi - lo + 1); };
  for (uint64_t i = 0; i < o.num_seqs; ++i) {
    std::vector<int32_t> p(uniform(o.min_input_len, o.max_input_len));
    for (int32_t& t : p) t = static_cast<int32_t>(rng.NextU64() % vocab);
    w.prompt_tokens += p.size();
    w.prompts.push_back(std::move(p));
    w.output_lens.push_back(uniform(o.min_output_len, o.max_output_len));
    w.output_tokens += w.output_lens.back();
  }
  w.max_tokens = o.max_output_len;
  return w;
}

// What one run of the workload measured.
struct RunResult {
  double total_s = 0.0, prefill_s = 0.0, decode_s = 0.0;
  uint64_t prefill_tokens = 0, decode_tokens = 0, output_tokens = 0;
  std::vector<double> decode_step_ms, ttft_ms, itl_ms;
  uint64_t peak_kv_bytes = 0, kv_copy_bytes = 0, reused_page_allocations = 0;
  double peak_tail_waste = 0.0;
  uint64_t waste_slots = 0, allocated_slots = 0;     // summed over steps
  uint64_t page_pairs = 0, adjacent_page_pairs = 0;  // summed over steps
  uint64_t peak_running = 0;
  double mean_running = 0.0;  // over steps
  uint64_t preemptions = 0, steps = 0;
};

struct ModeSpec {
  std::string name;
  bool reserve;  // MaxLengthReservation admission (else folio's)
  bool gather;   // GatherAttention (else direct page reads)
};

// A mode's engine settings and the baselines it plugs in.
struct ModeConfig {
  engine::EngineConfig config;
  bool reserve = false;
  bool gather = false;
};

// One engine working through the workload, a step at a time, recording
// what RunResult holds. Several can advance in lockstep (RunLockstep), so
// that modes are compared step by step under the same machine load.
class WorkloadRun {
 public:
  static Result<std::unique_ptr<WorkloadRun>> Start(const model::Model& m, ThreadPool* pool,
                                                    const Workload& w, const ModeConfig& mode,
                                                    std::string label) {
    engine::EnginePolicies policies;
    std::shared_ptr<MaxLengthReservation> reservation;
    std::shared_ptr<GatherAttention> gather;
    if (mode.reserve) {
      reservation = std::make_shared<MaxLengthReservation>(mode.config.page_size);
      policies.admission = reservation;
    }
    if (mode.gather) {
      gather = std::make_shared<GatherAttention>(pool);
      policies.attention = gather;
    }
    FOLIO_ASSIGN_OR_RETURN(engine::Engine eng,
                           engine::Engine::Create(m, mode.config, pool, nullptr, policies));
    std::unique_ptr<WorkloadRun> run(
        new WorkloadRun(std::move(eng), w, mode.config, std::move(label)));
    run->reservation_ = std::move(reservation);
    run->gather_ = std::move(gather);
    engine::RequestParams params;
    params.max_tokens = w.max_tokens;  // greedy; ends early at its drawn length
    for (size_t i = 0; i < w.prompts.size(); ++i) {
      FOLIO_ASSIGN_OR_RETURN(engine::RequestId id, run->eng_.AddRequest(w.prompts[i], params));
      run->index_[id] = i;
    }
    run->start_us_ = run->last_progress_us_ = NowUs();
    return run;
  }

  bool done() const { return !eng_.HasUnfinished(); }
  const std::vector<double>& step_ms() const { return step_ms_; }
  const std::vector<bool>& step_is_decode() const { return step_is_decode_; }

  // One engine step; its wall time counts towards the run's total.
  Status Step() {
    const uint64_t prompt_before = eng_.stats().prompt_tokens_computed;
    const double t0 = NowUs();
    FOLIO_ASSIGN_OR_RETURN(std::vector<engine::StepOutput> out, eng_.Step());
    const double t1 = NowUs();
    busy_us_ += t1 - t0;
    const double now = busy_us_;  // the run's own clock: its steps only
    const uint64_t prompt_now = eng_.stats().prompt_tokens_computed - prompt_before;
    const double step_s = (t1 - t0) / 1e6;
    running_sum_ += eng_.num_running();
    uint64_t tokens = 0;
    for (const engine::StepOutput& o : out) {
      const size_t i = index_.at(o.id);
      for (size_t k = 0; k < o.new_tokens.size(); ++k) {
        if (produced_[i] == 0) {
          r_.ttft_ms.push_back(now / 1e3);
        } else {
          r_.itl_ms.push_back((now - last_token_us_[i]) / 1e3);
        }
        last_token_us_[i] = now;
        ++produced_[i];
        ++tokens;
      }
      // The request's answer is complete: it ends as if at its end token.
      if (o.finish == engine::FinishReason::kNone && produced_[i] == w_.output_lens[i]) {
        FOLIO_RETURN_IF_ERROR(eng_.Abort(o.id));
      }
      if (produced_[i] == w_.output_lens[i] || o.finish != engine::FinishReason::kNone) ++done_;
    }
    r_.output_tokens += tokens;
    step_ms_.push_back(step_s * 1e3);
    step_is_decode_.push_back(prompt_now == 0 && tokens > 0);
    if (prompt_now > 0) {
      r_.prefill_s += step_s;
      r_.prefill_tokens += prompt_now;
    } else if (tokens > 0) {
      r_.decode_s += step_s;
      r_.decode_tokens += tokens;
      r_.decode_step_ms.push_back(step_s * 1e3);
    }
    // Memory: what a contiguous engine holds is its reservations; a paged
    // one holds its used pages.
    const kv::PoolStats st = eng_.cache().Stats();
    r_.page_pairs += st.page_pairs;
    r_.adjacent_page_pairs += st.adjacent_page_pairs;
    const uint64_t held_pages = reservation_ ? reservation_->reserved_pages() : st.pages_used;
    const uint64_t held_slots = held_pages * config_.page_size;
    const uint64_t live_slots = st.pages_used * config_.page_size - st.tail_slots_unwritten;
    if (held_slots > 0) {
      r_.peak_tail_waste =
          std::max(r_.peak_tail_waste,
                   static_cast<double>(held_slots - live_slots) / static_cast<double>(held_slots));
      r_.waste_slots += held_slots - live_slots;
      r_.allocated_slots += held_slots;
    }
    if (t1 - last_progress_us_ > 5e6) {
      std::cerr << "  " << label_ << ": " << done_ << "/" << w_.prompts.size() << " requests, "
                << eng_.stats().steps << " steps, " << Fixed((t1 - start_us_) / 1e6, 0) << " s\n";
      last_progress_us_ = t1;
    }
    return Status::Ok();
  }

  Result<RunResult> Finish() {
    RunResult r = std::move(r_);
    r.total_s = busy_us_ / 1e6;
    const engine::EngineStats es = eng_.stats();
    r.steps = es.steps;
    r.preemptions = es.preemptions;
    r.peak_running = es.peak_running;
    r.mean_running =
        es.steps ? static_cast<double>(running_sum_) / static_cast<double>(es.steps) : 0.0;
    r.kv_copy_bytes = gather_ ? gather_->kv_copy_bytes() : 0;
    const kv::BlockPool& bp = eng_.cache().pool();
    const uint64_t page_bytes = eng_.cache().Stats().kv_bytes_total / config_.num_pages;
    r.peak_kv_bytes =
        (reservation_ ? reservation_->peak_reserved_pages() : bp.peak_used()) * page_bytes;
    r.reused_page_allocations = bp.total_allocations() - bp.peak_used();
    if (bp.num_used() != 0) {
      return Status::FailedPrecondition(label_ + ": " + std::to_string(bp.num_used()) +
                                        " pages still used after every request finished");
    }
    return r;
  }

 private:
  WorkloadRun(engine::Engine eng, const Workload& w, const engine::EngineConfig& config,
              std::string label)
      : eng_(std::move(eng)),
        w_(w),
        config_(config),
        label_(std::move(label)),
        produced_(w.prompts.size(), 0),
        last_token_us_(w.prompts.size(), 0.0) {}

  engine::Engine eng_;
  const Workload& w_;
  engine::EngineConfig config_;
  std::shared_ptr<MaxLengthReservation> reservation_;  // the reserve modes only
  std::shared_ptr<GatherAttention> gather_;            // the gather modes only
  std::string label_;
  std::map<engine::RequestId, size_t> index_;
  std::vector<uint64_t> produced_;
  std::vector<double> last_token_us_;
  std::vector<double> step_ms_;
  std::vector<bool> step_is_decode_;
  RunResult r_;
  uint64_t done_ = 0, running_sum_ = 0;
  double start_us_ = 0.0, last_progress_us_ = 0.0, busy_us_ = 0.0;
};

// Advances every run one step at a time, rotating which goes first, until
// all are done.
Status RunLockstep(std::vector<std::unique_ptr<WorkloadRun>>& runs) {
  for (uint64_t round = 0;; ++round) {
    bool any = false;
    for (size_t k = 0; k < runs.size(); ++k) {
      WorkloadRun& run = *runs[(round + k) % runs.size()];
      if (run.done()) continue;
      FOLIO_RETURN_IF_ERROR(run.Step());
      any = true;
    }
    if (!any) return Status::Ok();
  }
}

double Rate(double n, double s) { return s > 0 ? n / s : 0.0; }

json ModeJson(const std::vector<RunResult>& runs, uint64_t num_requests) {
  // Throughputs: the median run; latencies: every sample of every run.
  auto median_of = [&](auto field) {
    std::vector<double> v;
    for (const RunResult& r : runs) v.push_back(field(r));
    return Quantile(v, 0.5);
  };
  std::vector<double> steps, ttft, itl, output_tps;
  for (const RunResult& r : runs) {
    steps.insert(steps.end(), r.decode_step_ms.begin(), r.decode_step_ms.end());
    ttft.insert(ttft.end(), r.ttft_ms.begin(), r.ttft_ms.end());
    itl.insert(itl.end(), r.itl_ms.begin(), r.itl_ms.end());
    output_tps.push_back(Rate(static_cast<double>(r.output_tokens), r.total_s));
  }
  const RunResult& first = runs.front();
  uint64_t waste = 0, allocated = 0;
  for (const RunResult& r : runs) {
    waste += r.waste_slots;
    allocated += r.allocated_slots;
  }
  return {
      {"prefill_tokens_per_second", median_of([](const RunResult& r) {
         return Rate(static_cast<double>(r.prefill_tokens), r.prefill_s);
       })},
      {"output_tokens_per_second", Quantile(output_tps, 0.5)},
      {"output_tokens_per_second_runs", output_tps},
      {"decode_tokens_per_second", median_of([](const RunResult& r) {
         return Rate(static_cast<double>(r.decode_tokens), r.decode_s);
       })},
      {"requests_per_second", median_of([&](const RunResult& r) {
         return Rate(static_cast<double>(num_requests), r.total_s);
       })},
      {"total_seconds", median_of([](const RunResult& r) { return r.total_s; })},
      {"decode_step_median_ms", Quantile(steps, 0.5)},
      {"decode_step_p95_ms", Quantile(steps, 0.95)},
      {"decode_step_max_ms", steps.empty() ? 0.0 : *std::max_element(steps.begin(), steps.end())},
      {"ttft_median_ms", Quantile(ttft, 0.5)},
      {"ttft_p95_ms", Quantile(ttft, 0.95)},
      {"itl_median_ms", Quantile(itl, 0.5)},
      {"itl_p95_ms", Quantile(itl, 0.95)},
      {"peak_kv_bytes", first.peak_kv_bytes},
      {"kv_copy_bytes", first.kv_copy_bytes},
      {"reused_page_allocations", first.reused_page_allocations},
      {"peak_tail_waste_fraction", first.peak_tail_waste},
      {"mean_tail_waste_fraction",
       allocated ? static_cast<double>(waste) / static_cast<double>(allocated) : 0.0},
      {"adjacent_page_fraction", first.page_pairs ? static_cast<double>(first.adjacent_page_pairs) /
                                                        static_cast<double>(first.page_pairs)
                                                  : 0.0},
      {"peak_running", first.peak_running},
      {"mean_running", first.mean_running},
      {"preemptions", first.preemptions},
      {"steps", first.steps},
  };
}

Status WritePlots(const std::string& base, const json& sweep) {
  LinePlot conc, tput;
  conc.title = "Requests running at once under a KV budget";
  conc.x_label = "KV budget (MiB)";
  conc.y_label = "peak concurrent requests";
  tput.title = "Output throughput under a KV budget";
  tput.x_label = "KV budget (MiB)";
  tput.y_label = "output tokens / s";
  PlotSeries pc, rc;
  pc.label = "paged (on demand)";
  rc.label = "reserved (max length)";
  rc.color = "#ff7f0e";
  rc.dash = "6 3";
  PlotSeries pt = pc, rt = rc;
  for (const json& row : sweep) {
    const double mib = row["kv_budget_bytes"].get<double>() / (1 << 20);
    pc.points.emplace_back(mib, row["paged_concurrent"].get<double>());
    rc.points.emplace_back(mib, row["reserved_concurrent"].get<double>());
    pt.points.emplace_back(mib, row["paged_output_tokens_per_second"].get<double>());
    rt.points.emplace_back(mib, row["reserved_output_tokens_per_second"].get<double>());
  }
  conc.series = {pc, rc};
  tput.series = {pt, rt};
  FOLIO_RETURN_IF_ERROR(WriteTextFile(base + "-concurrency.svg", RenderSvg(conc)));
  return WriteTextFile(base + "-throughput.svg", RenderSvg(tput));
}

}  // namespace

model::ModelConfig ServeModelConfig(bool quick) {
  model::ModelConfig c = SyntheticConfig(quick ? 2 : 4);
  c.hidden_size = quick ? 512 : 1024;
  c.num_heads = quick ? 8 : 16;
  c.num_kv_heads = quick ? 2 : 4;
  c.ffn_size = quick ? 1408 : 2816;
  c.vocab_size = quick ? 4096 : 8192;
  c.max_positions = 4096;
  return c;
}

CLI::App* AddServeBenchCommand(CLI::App& bench, ServeBenchOptions& o) {
  CLI::App* cmd = bench.add_subcommand(
      "serve",
      "continuous batching: dense vs paged+gather vs direct paged, and an admission "
      "sweep under KV budgets, as JSON");
  cmd->add_option("--model", o.model, "model folder or .gguf (default: synthetic serving model)");
  cmd->add_option("--json-output,-o", o.json_output, "write the JSON here (default: stdout)");
  cmd->add_option("--plot-output", o.plot_output,
                  "SVG path prefix (default: the JSON path without .json)");
  cmd->add_flag("--quick", o.quick,
                "2-layer model, 8 requests of 64-256 + 16-32 tokens (under two minutes)");
  cmd->add_option("--num-seqs", o.num_seqs, "requests")->check(CLI::Range(1, 100000));
  cmd->add_option("--batch-size", o.batch_size, "running sequences at most")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--min-input-len", o.min_input_len)->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-input-len", o.max_input_len)->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--min-output-len", o.min_output_len)->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-output-len", o.max_output_len)->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--prefill-step", o.prefill_step, "tokens per engine step")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--repeats", o.repeats, "runs of each mode (interleaved)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--page-size", o.page_size)->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--kv-dtype", o.kv_dtype,
                  "f32, bf16 or f16 (the dense and gather modes need a float cache)");
  cmd->add_option("--threads", o.threads, "worker threads (0 = every core)");
  cmd->add_option("--seed", o.seed, "workload and weight seed");
  cmd->add_option("--sweep-requests", o.sweep_requests,
                  "admission sweep budgets, in maximum-length requests (default 2,4,8)")
      ->delimiter(',');
  cmd->add_flag("--no-sweep", o.no_sweep, "skip the admission sweep");
  cmd->add_option("--capacity-kv-dtypes", o.capacity_kv_dtypes,
                  "capacity sweep: run the paged mode at each sweep budget's bytes (sized in "
                  "--kv-dtype) once per KV dtype listed, e.g. f32,bf16,i8,f8e4m3")
      ->delimiter(',');
  SetQuickDefaults(cmd, &o.quick,
                   {{"--num-seqs", [&o] { o.num_seqs = 8; }},
                    {"--min-input-len", [&o] { o.min_input_len = 64; }},
                    {"--max-input-len", [&o] { o.max_input_len = 256; }},
                    {"--min-output-len", [&o] { o.min_output_len = 16; }},
                    {"--max-output-len", [&o] { o.max_output_len = 32; }},
                    {"--prefill-step", [&o] { o.prefill_step = 64; }},
                    {"--sweep-requests", [&o] {
                       o.sweep_requests = {2, 4};
                     }}});
  return cmd;
}

int RunServeBench(const ServeBenchOptions& o, const std::string& command) {
  auto fail = [](const Status& s) {
    std::cerr << "folio bench serve: " << s.ToString() << "\n";
    return 1;
  };
  if (o.min_input_len > o.max_input_len || o.min_output_len > o.max_output_len) {
    return fail(Status::InvalidArgument("--min-*-len must not exceed --max-*-len"));
  }
  if (o.prefill_step < o.batch_size) {
    return fail(Status::InvalidArgument("--prefill-step must be >= --batch-size"));
  }
  Result<DType> kv_dtype = ParseDType(o.kv_dtype);
  if (!kv_dtype) return fail(kv_dtype.error().WithContext("--kv-dtype"));
  std::vector<DType> capacity_dtypes;
  for (const std::string& name : o.capacity_kv_dtypes) {
    Result<DType> d = ParseDType(name);
    if (!d) return fail(d.error().WithContext("--capacity-kv-dtypes"));
    capacity_dtypes.push_back(*d);
  }

  const MachineInfo machine = ReadMachineInfo();
  const std::array<double, 3> load_start = ReadLoadAverage();
  const CpuSnapshot run_start = TakeCpuSnapshot();
  ThreadPool pool(o.threads);

  Result<std::unique_ptr<model::Model>> loaded =
      LoadOrSynthesize(o.model, ServeModelConfig(o.quick), o.seed, &pool);
  if (!loaded) return fail(loaded.error());
  const std::unique_ptr<model::Model> m = std::move(*loaded);
  const std::string model_name = !o.model.empty() ? o.model
                                 : o.quick        ? "synthetic-serve-quick"
                                                  : "synthetic-serve";
  const model::ModelConfig& mc = m->config();
  const Workload w = MakeWorkload(o, mc.vocab_size);
  const uint64_t max_len = o.max_input_len + o.max_output_len;
  if (max_len > mc.max_positions) {
    return fail(Status::InvalidArgument("max input + output length exceeds the model's " +
                                        std::to_string(mc.max_positions) + " positions"));
  }
  const uint64_t bytes_per_token =
      2 * mc.num_layers * mc.num_kv_heads * mc.head_dim() * DTypeSize(*kv_dtype);
  const uint64_t pages_per_max_request = CeilDiv(max_len, o.page_size);
  std::cerr << "workload: " << o.num_seqs << " requests, " << w.prompt_tokens << " prompt tokens, "
            << w.output_tokens << " output tokens; model " << model_name << " ("
            << mc.ParameterCount() << " parameters), " << pool.num_threads() << " threads\n";

  auto config_for = [&](bool reserve, bool gather, uint64_t num_pages, uint64_t max_seqs,
                        std::optional<DType> dtype = std::nullopt) {
    ModeConfig mode;
    mode.reserve = reserve;
    mode.gather = gather;
    engine::EngineConfig& c = mode.config;
    c.page_size = o.page_size;
    c.num_pages = num_pages;
    c.kv_dtype = dtype.value_or(*kv_dtype);
    c.max_num_batched_tokens = o.prefill_step;
    c.max_num_seqs = max_seqs;
    c.prefix_caching = false;  // random prompts share nothing; keep modes alike
    return mode;
  };

  // Modes: one budget that holds batch_size maximum-length requests, so
  // every mode runs batch_size sequences and only the K/V path differs.
  const std::vector<ModeSpec> modes = {
      {"dense", true, true}, {"paged_gather", false, true}, {"paged", false, false}};
  const uint64_t mode_pages = o.batch_size * pages_per_max_request;
  std::map<std::string, std::vector<RunResult>> results;
  // Paired decode-step ratios: every mode schedules the same steps (the
  // same admissions), so step i of one mode is step i of another.
  std::map<std::string, std::vector<double>> paged_over;
  for (uint64_t rep = 0; rep < o.repeats; ++rep) {
    std::cerr << "running the three modes in lockstep, repeat " << rep + 1 << "\n";
    std::vector<std::unique_ptr<WorkloadRun>> runs;
    for (const ModeSpec& mode : modes) {
      Result<std::unique_ptr<WorkloadRun>> run = WorkloadRun::Start(
          *m, &pool, w, config_for(mode.reserve, mode.gather, mode_pages, o.batch_size), mode.name);
      if (!run) return fail(run.error().WithContext(mode.name));
      runs.push_back(std::move(*run));
    }
    if (Status s = RunLockstep(runs); !s.ok()) return fail(s);
    const WorkloadRun& paged = *runs[2];
    for (size_t k = 0; k < 2; ++k) {
      const WorkloadRun& other = *runs[k];
      if (other.step_ms().size() != paged.step_ms().size()) continue;  // not paired
      for (size_t i = 0; i < paged.step_ms().size(); ++i) {
        if (paged.step_is_decode()[i] && other.step_is_decode()[i]) {
          paged_over[modes[k].name].push_back(paged.step_ms()[i] / other.step_ms()[i]);
        }
      }
    }
    for (size_t k = 0; k < modes.size(); ++k) {
      Result<RunResult> r = runs[k]->Finish();
      if (!r) return fail(r.error());
      std::cerr << "  " << modes[k].name << ": " << Fixed(r->total_s, 1) << " s, "
                << Fixed(Rate(static_cast<double>(r->output_tokens), r->total_s), 1)
                << " output tokens/s\n";
      results[modes[k].name].push_back(std::move(*r));
    }
  }
  json modes_json;
  for (const ModeSpec& mode : modes)
    modes_json[mode.name] = ModeJson(results[mode.name], o.num_seqs);
  json paired = json::object();
  for (const auto& [name, ratios] : paged_over) {
    paired["paged_over_" + name] = {{"median", Quantile(ratios, 0.5)},
                                    {"p10", Quantile(ratios, 0.1)},
                                    {"p90", Quantile(ratios, 0.9)},
                                    {"steps", ratios.size()}};
  }

  json sweep = json::array();
  if (!o.no_sweep) {
    for (const uint64_t k : o.sweep_requests) {
      const uint64_t pages = k * pages_per_max_request;
      // static_slots_concurrent: what an engine that gives every request
      // a slot of the workload's maximum length (max input + max output)
      // could run: the budget is exactly k such slots.
      json row = {{"kv_budget_bytes", pages * o.page_size * bytes_per_token},
                  {"kv_budget_max_length_requests", k},
                  {"static_slots_concurrent", k}};
      for (const bool reserve : {false, true}) {
        const std::string name = reserve ? "reserved" : "paged";
        const std::string label = "sweep " + name + " budget " + std::to_string(k);
        std::cerr << "running " << label << "\n";
        Result<std::unique_ptr<WorkloadRun>> run =
            WorkloadRun::Start(*m, &pool, w, config_for(reserve, false, pages, o.num_seqs), label);
        if (!run) return fail(run.error().WithContext(label));
        while (!(*run)->done()) {
          if (Status s = (*run)->Step(); !s.ok()) return fail(s.WithContext(label));
        }
        Result<RunResult> r = (*run)->Finish();
        if (!r) return fail(r.error().WithContext(label));
        row[name + "_concurrent"] = r->peak_running;
        row[name + "_mean_concurrent"] = r->mean_running;
        row[name + "_output_tokens_per_second"] =
            Rate(static_cast<double>(r->output_tokens), r->total_s);
        row[name + "_preemptions"] = r->preemptions;
      }
      sweep.push_back(row);
    }
  }

  // Capacity: the same bytes, in pages of each KV dtype (scales included).
  json capacity = json::array();
  const auto page_cost = [&](DType d) {
    return kv::PagedKvCache::BytesPerPage(engine::KvCacheConfigFor(mc, o.page_size, 1, d));
  };
  for (const uint64_t k : o.sweep_requests) {
    const uint64_t budget = k * pages_per_max_request * page_cost(*kv_dtype);
    for (const DType d : capacity_dtypes) {
      const uint64_t pages = budget / page_cost(d);
      const std::string label =
          "capacity " + std::string(DTypeName(d)) + " budget " + std::to_string(k);
      std::cerr << "running " << label << " (" << pages << " pages)\n";
      Result<std::unique_ptr<WorkloadRun>> run =
          WorkloadRun::Start(*m, &pool, w, config_for(false, false, pages, o.num_seqs, d), label);
      if (!run) return fail(run.error().WithContext(label));
      while (!(*run)->done()) {
        if (Status s = (*run)->Step(); !s.ok()) return fail(s.WithContext(label));
      }
      Result<RunResult> r = (*run)->Finish();
      if (!r) return fail(r.error().WithContext(label));
      capacity.push_back(
          {{"kv_budget_bytes", budget},
           {"kv_budget_max_length_requests", k},
           {"kv_dtype", DTypeName(d)},
           {"pages", pages},
           {"concurrent", r->peak_running},
           {"mean_concurrent", r->mean_running},
           {"output_tokens_per_second", Rate(static_cast<double>(r->output_tokens), r->total_s)},
           {"preemptions", r->preemptions}});
    }
  }

  const json& paged = modes_json["paged"];
  json targets = {
      {"paged_mean_tail_waste_under_4pct", paged["mean_tail_waste_fraction"].get<double>() < 0.04},
      {"paged_peak_tail_waste_under_4pct", paged["peak_tail_waste_fraction"].get<double>() < 0.04},
      {"paged_decode_faster_than_dense",
       paged["decode_tokens_per_second"].get<double>() >
           modes_json["dense"]["decode_tokens_per_second"].get<double>()},
      {"paged_decode_faster_than_paged_gather",
       paged["decode_tokens_per_second"].get<double>() >
           modes_json["paged_gather"]["decode_tokens_per_second"].get<double>()},
      {"paired_paged_decode_step_faster_than_both",
       paired.contains("paged_over_dense") && paired.contains("paged_over_paged_gather") &&
           paired["paged_over_dense"]["median"].get<double>() < 1.0 &&
           paired["paged_over_paged_gather"]["median"].get<double>() < 1.0},
  };
  if (!sweep.empty()) {
    double worst = 1e300;
    for (const json& row : sweep) {
      worst = std::min(worst, row["paged_concurrent"].get<double>() /
                                  std::max(1.0, row["reserved_concurrent"].get<double>()));
    }
    targets["worst_paged_over_reserved_concurrency"] = worst;
    targets["paged_admits_2x_reserved"] = worst >= 2.0;
  }

  json report;
  report["benchmark"] = "serve";
  report["command"] = command;
  report["machine"] = MachineJson(machine, load_start, LoadBetween(run_start, TakeCpuSnapshot()));
  report["model"] = {{"name", model_name},
                     {"parameters", mc.ParameterCount()},
                     {"num_layers", mc.num_layers},
                     {"num_kv_heads", mc.num_kv_heads},
                     {"head_dim", mc.head_dim()},
                     {"kv_dtype", DTypeName(*kv_dtype)},
                     {"kv_bytes_per_token", bytes_per_token}};
  report["workload"] = {{"num_seqs", o.num_seqs},
                        {"batch_size", o.batch_size},
                        {"input_len", {o.min_input_len, o.max_input_len}},
                        {"output_len", {o.min_output_len, o.max_output_len}},
                        {"max_tokens", w.max_tokens},
                        {"prefill_step", o.prefill_step},
                        {"page_size", o.page_size},
                        {"prompt_tokens", w.prompt_tokens},
                        {"output_tokens", w.output_tokens},
                        {"repeats", o.repeats},
                        {"threads", pool.num_threads()},
                        {"mode_kv_budget_bytes", mode_pages * o.page_size * bytes_per_token}};
  report["modes"] = modes_json;
  // Decode-step time of direct paged over each baseline, step by step (the
  // modes ran in lockstep, so each pair saw the same machine load).
  report["paired_decode_step_ratios"] = paired;
  report["admission_sweep"] = sweep;
  if (!capacity.empty()) report["capacity_by_kv_dtype"] = capacity;
  report["targets"] = targets;

  if (Status s = EmitJson(report, o.json_output); !s.ok()) return fail(s);
  std::string plot = o.plot_output;
  if (plot.empty() && !o.json_output.empty()) {
    plot = o.json_output;
    if (plot.size() > 5 && plot.ends_with(".json")) plot.resize(plot.size() - 5);
  }
  if (!plot.empty() && !sweep.empty()) {
    if (Status s = WritePlots(plot, sweep); !s.ok()) return fail(s);
    std::cerr << "plots: " << plot << "-concurrency.svg, " << plot << "-throughput.svg\n";
  }
  return 0;
}

}  // namespace folio::bench
