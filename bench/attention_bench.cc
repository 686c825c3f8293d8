#include "bench/attention_bench.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "bench/attention_fixture.h"
#include "bench/machine_info.h"
#include "bench/memory_bandwidth.h"
#include "bench/report.h"
#include "bench/svg_plot.h"
#include "bench/timing.h"
#include "folio/attention/paged_attention.h"

namespace folio::bench {
namespace {

using nlohmann::json;

constexpr const char* kModes[] = {"contiguous", "gather", "paged"};

struct Grid {
  std::vector<uint64_t> contexts, batches;
  std::vector<DType> dtypes;
};

Result<Grid> GridOf(const AttentionBenchOptions& o) {
  Grid g;
  g.contexts =
      o.quick ? std::vector<uint64_t>{1024, 16384} : std::vector<uint64_t>{128, 1024, 4096, 16384};
  g.batches = o.quick ? std::vector<uint64_t>{1} : std::vector<uint64_t>{1, 8};
  std::vector<std::string> names =
      o.quick ? std::vector<std::string>{"bf16"} : std::vector<std::string>{"f32", "bf16"};
  if (!o.contexts.empty()) g.contexts = o.contexts;
  if (!o.batches.empty()) g.batches = o.batches;
  if (!o.kv_dtypes.empty()) names = o.kv_dtypes;
  for (const std::string& n : names) {
    Result<DType> d = ParseDType(n);
    if (!d) return d.error().WithContext("--kv-dtypes");
    if (*d == DType::kF64) {
      return Status::InvalidArgument(
          "--kv-dtypes: the kernel reads f32, bf16, f16, i8 or f8e4m3 (got " + n + ")");
    }
    g.dtypes.push_back(*d);
  }
  for (const auto* list : {&g.contexts, &g.batches}) {
    if (list->empty() || std::find(list->begin(), list->end(), 0u) != list->end()) {
      return Status::InvalidArgument("--contexts and --batches must be non-empty and > 0");
    }
  }
  return g;
}

std::string MiB(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

std::string ConfigName(const json& row) {
  return row["kv_dtype"].get<std::string>() + " batch " +
         std::to_string(row["batch"].get<uint64_t>()) + " context " +
         std::to_string(row["context"].get<uint64_t>());
}

// Achieved GB/s: `bytes` read in `us` microseconds.
double Gbps(uint64_t bytes, double us) { return static_cast<double>(bytes) / (us * 1e-6) / 1e9; }

// scale * a.samples[r] / b.samples[r] for every round r.
std::vector<double> PerRoundRatios(const Timing& a, const Timing& b, double scale = 1.0) {
  std::vector<double> ratios;
  for (size_t r = 0; r < a.samples_us.size() && r < b.samples_us.size(); ++r) {
    ratios.push_back(scale * a.samples_us[r] / b.samples_us[r]);
  }
  return ratios;
}

// Median over rounds of a.samples[r] / b.samples[r].
double PairedRatio(const Timing& a, const Timing& b) { return Quantile(PerRoundRatios(a, b), 0.5); }

// A mode and the bandwidth probe, timed in the same rounds.
struct BesideProbe {
  Timing kernel, probe;

  // Per round, (K+V bytes / kernel time) / (probe bytes / probe time): the
  // kernel's fraction of the bandwidth the probe read beside it.
  std::vector<double> Fractions(uint64_t kv_bytes, uint64_t probe_bytes) const {
    return PerRoundRatios(probe, kernel,
                          static_cast<double>(kv_bytes) / static_cast<double>(probe_bytes));
  }
};

// One configuration's measurements, gathered over every pass of the grid.
struct ConfigResult {
  AttentionShape shape;
  bool in_cache = true;  // K+V within the out-of-cache threshold
  // Per mode (contiguous, gather, paged): the samples of every pass, in
  // order. Interleaved, paged's come from its rounds with contiguous, and
  // paged_beside_gather holds its samples from the rounds with gather.
  std::vector<Timing> times;
  Timing paged_beside_gather;
  // Out of cache, interleaved: contiguous ([0]) and paged ([1]) each timed
  // in rounds with one pass of the bandwidth probe, so that each round's
  // fraction of bandwidth sets the two side by side.
  std::array<BesideProbe, 2> beside_probe;
  uint64_t copied = 0;  // gather's bytes per call
  bool same = true;     // the three layouts' outputs, every pass
  bool finite = true;
  double adjacent_pages = 0.0;                  // the paged table's adjacent_page_fraction
  double other_cores = 0.0, steal_cores = 0.0;  // summed over passes
  uint64_t passes = 0;
};

// Measures r.shape once and folds it into r: the untimed bit-identity
// check, then the three timed modes, and out of cache contiguous and paged
// each beside `probe`.
Status MeasureConfig(const AttentionBenchOptions& o, ThreadPool& pool, const ReadProbe& probe,
                     ConfigResult& r) {
  const AttentionShape& shape = r.shape;
  const std::optional<PageOrder> order = ParsePageOrder(o.page_order);
  if (!order) {
    return Status::InvalidArgument("--page-order " + o.page_order +
                                   ": want shuffled, pool or engine");
  }
  FOLIO_ASSIGN_OR_RETURN(AttentionFixture f, AttentionFixture::Create(shape, o.seed, *order, pool));
  r.adjacent_pages = f.adjacent_page_fraction();
  const attention::PagedAttentionParams params = f.params();
  const size_t out_size = f.query().size();
  Status failure;
  auto kernel = [&](bool paged, std::vector<float>& out) {
    Status s = attention::PagedAttention(params, f.query(), paged ? f.paged_kv() : f.dense_kv(),
                                         paged ? f.paged_batch() : f.dense_batch(), out, &pool);
    if (!s.ok() && failure.ok()) failure = s;
  };
  std::vector<float> outs[3] = {std::vector<float>(out_size, -1.0f),
                                std::vector<float>(out_size, -2.0f),
                                std::vector<float>(out_size, -3.0f)};
  std::vector<float>& scratch = outs[0];
  uint64_t copied = 0;
  const std::function<void()> calls[3] = {[&] { kernel(false, scratch); },
                                          [&] {
                                            copied = f.Gather(pool);
                                            kernel(false, scratch);
                                          },
                                          [&] { kernel(true, scratch); }};

  // Untimed check: same bits whatever the layout (contract 3). The gather
  // mode runs on a freshly gathered copy, so a wrong gather shows here too.
  kernel(false, outs[0]);
  copied = f.Gather(pool);
  kernel(false, outs[1]);
  kernel(true, outs[2]);
  FOLIO_RETURN_IF_ERROR(failure);
  const bool same = std::memcmp(outs[0].data(), outs[1].data(), out_size * 4) == 0 &&
                    std::memcmp(outs[0].data(), outs[2].data(), out_size * 4) == 0;
  const bool finite =
      std::all_of(outs[0].begin(), outs[0].end(), [](float v) { return std::isfinite(v); });

  const uint64_t bytes = shape.kv_bytes();
  std::cerr << "  " << DTypeName(shape.kv_dtype) << " batch " << shape.batch << " context "
            << shape.context << ": K+V " << MiB(bytes)
            << (r.in_cache ? " (in cache)" : " (out of cache)")
            << ", outputs identical: " << (same ? "yes" : "NO") << (finite ? "" : ", NON-FINITE")
            << "\n   ";
  TimingOptions timing;
  timing.repeats = o.repeats;
  timing.budget_us = 20e6;
  std::vector<Timing> times;
  Timing paged_beside_gather;
  std::array<BesideProbe, 2> beside_probe;
  const bool with_probe = !r.in_cache && !o.sequential;
  const CpuSnapshot before = TakeCpuSnapshot();
  if (o.sequential) {
    for (const auto& call : calls) times.push_back(TimeCalls(call, timing));
  } else {
    // Paged is compared with each other mode in rounds of their own, so
    // that each of the pair always follows the other. In rounds of all
    // three, gather (which reads the paged pool, then writes and reads the
    // dense buffer) ran just before paged in two rounds of three and
    // before contiguous in one, leaving the cache to the dense layout.
    const std::vector<Timing> cp = TimeInterleaved({calls[0], calls[2]}, timing);
    const std::vector<Timing> gp = TimeInterleaved({calls[1], calls[2]}, timing);
    times = {cp[0], gp[0], cp[1]};
    paged_beside_gather = gp[1];
    // The probe's best pass at the start or end of the run may come from a
    // quicker spell of a shared machine than the kernel's samples; paired
    // round by round, the two meet the same conditions.
    const std::function<void()> probe_pass = [&] { static_cast<void>(probe.Pass()); };
    for (size_t k = 0; with_probe && k < 2; ++k) {
      const std::vector<Timing> t = TimeInterleaved({calls[k == 0 ? 0 : 2], probe_pass}, timing);
      beside_probe[k] = {t[0], t[1]};
    }
  }
  const OtherLoad load = LoadBetween(before, TakeCpuSnapshot());
  FOLIO_RETURN_IF_ERROR(failure);
  for (int m = 0; m < 3; ++m) {
    const Timing& t = times[static_cast<size_t>(m)];
    std::cerr << " " << kModes[m] << " " << Fixed(t.median_us, 1) << " us ("
              << Fixed(Gbps(bytes, t.median_us), 1) << " GB/s)";
  }
  for (size_t k = 0; with_probe && k < 2; ++k) {
    const std::vector<double> fractions = beside_probe[k].Fractions(bytes, probe.bytes());
    std::cerr << (k == 0 ? "\n    beside the probe: contiguous " : ", paged ")
              << Fixed(Quantile(fractions, 0.5), 2) << " of its bandwidth";
  }
  std::cerr << "\n    other processes kept " << Fixed(load.other_cores, 2)
            << " cores busy meanwhile, hypervisor steal " << Fixed(load.steal_cores, 2) << "\n";

  if (r.passes++ == 0) {
    r.times = std::move(times);
    r.paged_beside_gather = std::move(paged_beside_gather);
    r.beside_probe = std::move(beside_probe);
  } else {
    // Rounds stay paired across passes: both modes of a pair get the same
    // number of samples in a pass.
    const auto pool_into = [](Timing& into, const Timing& more) {
      into.samples_us.insert(into.samples_us.end(), more.samples_us.begin(), more.samples_us.end());
      Summarize(into);
    };
    for (size_t m = 0; m < 3; ++m) pool_into(r.times[m], times[m]);
    pool_into(r.paged_beside_gather, paged_beside_gather);
    for (size_t k = 0; k < 2; ++k) {
      pool_into(r.beside_probe[k].kernel, beside_probe[k].kernel);
      pool_into(r.beside_probe[k].probe, beside_probe[k].probe);
    }
  }
  r.copied = copied;
  r.same = r.same && same;
  r.finite = r.finite && finite;
  r.other_cores += load.other_cores;
  r.steal_cores += load.steal_cores;
  return Status::Ok();
}

// One row per mode of a measured configuration.
void AppendRows(const ConfigResult& r, const AttentionBenchOptions& o, uint64_t probe_bytes,
                json& rows) {
  const AttentionShape& shape = r.shape;
  const std::vector<Timing>& times = r.times;
  const uint64_t bytes = shape.kv_bytes();
  const auto passes = static_cast<double>(r.passes);
  for (int m = 0; m < 3; ++m) {
    const Timing& t = times[static_cast<size_t>(m)];
    json row = {{"mode", kModes[m]},
                {"context", shape.context},
                {"batch", shape.batch},
                {"kv_dtype", std::string(DTypeName(shape.kv_dtype))},
                {"median_us", t.median_us},
                {"p10_us", t.p10_us},
                {"p90_us", t.p90_us},
                {"min_us", t.min_us},
                {"repeats", t.repeats},
                {"calls_per_sample", t.calls_per_sample},
                {"bytes_read", bytes},
                {"gbps", Gbps(bytes, t.median_us)},
                {"time_vs_contiguous", t.median_us / times[0].median_us},
                {"in_cache", r.in_cache},
                {"outputs_identical", r.same},
                {"outputs_finite", r.finite},
                {"adjacent_page_fraction", r.adjacent_pages},
                {"other_load_cores", r.other_cores / passes},
                {"steal_cores", r.steal_cores / passes},
                {"samples_us", t.samples_us}};
    if (!o.sequential && m == 2) {
      // Sample i of a pair comes from the same round: the median of the
      // per-round ratios cancels most of a shared machine's drift.
      row["paired_time_vs_contiguous"] = PairedRatio(t, times[0]);
      row["paired_time_vs_gather"] = PairedRatio(r.paged_beside_gather, times[1]);
      row["samples_beside_gather_us"] = r.paged_beside_gather.samples_us;
    }
    if (m == 1) row["gather_bytes_copied"] = r.copied;
    const auto k = static_cast<size_t>(m / 2);  // contiguous 0, paged 1
    if (m != 1 && !r.beside_probe[k].kernel.samples_us.empty()) {
      const auto& [kernel, probe] = r.beside_probe[k];
      const std::vector<double> f = r.beside_probe[k].Fractions(bytes, probe_bytes);
      row["paired_fraction_of_bandwidth"] = Quantile(f, 0.5);
      row["paired_fraction_p10"] = Quantile(f, 0.1);
      row["paired_fraction_p90"] = Quantile(f, 0.9);
      row["samples_beside_probe_us"] = kernel.samples_us;
      row["probe_samples_us"] = probe.samples_us;
      row["probe_bytes"] = probe_bytes;
    }
    rows.push_back(std::move(row));
  }
}

// One target's verdict: met when every applicable config passes; the worst
// config is named. No applicable config (e.g. nothing out of cache): met is
// null.
class Verdict {
 public:
  Verdict(double threshold, bool higher_is_better)
      : threshold_(threshold), higher_is_better_(higher_is_better) {}

  void Add(double value, const std::string& config) {
    const bool pass = higher_is_better_ ? value >= threshold_ : value <= threshold_;
    met_ = met_ && pass;
    const bool worse = higher_is_better_ ? value < worst_ : value > worst_;
    if (count_++ == 0 || worse) {
      worst_ = value;
      worst_config_ = config;
    }
  }

  json ToJson(const char* value_name) const {
    json j = {{"met", count_ == 0 ? json(nullptr) : json(met_)},
              {"threshold", threshold_},
              {"configs", count_}};
    if (count_ > 0) {
      j[value_name] = worst_;
      j["worst_config"] = worst_config_;
    }
    return j;
  }

 private:
  double threshold_;
  bool higher_is_better_;
  bool met_ = true;
  uint64_t count_ = 0;
  double worst_ = 0.0;
  std::string worst_config_;
};

// The verdicts on the three performance targets (docs/performance.md), from
// rows that come in (contiguous, gather, paged) triples. Ratios are of
// medians; with interleaved timing the medians of per-round ratios are
// given too, as `paired`.
json Targets(const json& rows) {
  Verdict within(1.05, false), faster(1.0, false), fraction(0.8, true);
  Verdict within_paired(1.05, false), faster_paired(1.0, false), fraction_paired(0.8, true);
  for (size_t i = 0; i + 2 < rows.size(); i += 3) {
    const json& p = rows[i + 2];
    const std::string name = ConfigName(p);
    const double paged_us = p["median_us"].get<double>();
    within.Add(paged_us / rows[i]["median_us"].get<double>(), name);
    if (p.contains("paired_time_vs_contiguous")) {
      within_paired.Add(p["paired_time_vs_contiguous"].get<double>(), name);
    }
    if (p["context"].get<uint64_t>() >= 1024) {
      faster.Add(paged_us / rows[i + 1]["median_us"].get<double>(), name);
      if (p.contains("paired_time_vs_gather")) {
        faster_paired.Add(p["paired_time_vs_gather"].get<double>(), name);
      }
    }
    if (!p["in_cache"].get<bool>()) {
      fraction.Add(p["fraction_of_bandwidth"].get<double>(), name);
      if (p.contains("paired_fraction_of_bandwidth")) {
        fraction_paired.Add(p["paired_fraction_of_bandwidth"].get<double>(), name);
      }
    }
  }
  json t = {{"paged_within_5pct_of_contiguous", within.ToJson("worst_paged_over_contiguous")},
            {"paged_faster_than_gather_from_1024", faster.ToJson("worst_paged_over_gather")},
            {"paged_out_of_cache_at_least_80pct_of_bandwidth",
             fraction.ToJson("worst_fraction_of_bandwidth")}};
  if (rows.size() >= 3 && rows[2].contains("paired_time_vs_contiguous")) {
    t["paged_within_5pct_of_contiguous"]["paired"] =
        within_paired.ToJson("worst_paged_over_contiguous");
    t["paged_faster_than_gather_from_1024"]["paired"] =
        faster_paired.ToJson("worst_paged_over_gather");
    t["paged_out_of_cache_at_least_80pct_of_bandwidth"]["paired"] =
        fraction_paired.ToJson("worst_fraction_of_bandwidth");
  }
  return t;
}

std::string PlotPath(const AttentionBenchOptions& o) {
  if (!o.plot.empty()) return o.plot;
  if (o.json_output.empty()) return "attention_bench.svg";
  const size_t slash = o.json_output.find_last_of('/');
  const size_t dot = o.json_output.find_last_of('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return (has_ext ? o.json_output.substr(0, dot) : o.json_output) + ".svg";
}

std::string PlotSvg(const json& report) {
  LinePlot plot;
  plot.title = "folio paged attention decode: achieved GB/s against context";
  plot.subtitle = "32 query / 8 K/V heads x 128, page " +
                  std::to_string(report["shape"]["page_size"].get<uint64_t>()) +
                  ", one query row per sequence; " +
                  std::to_string(report["threads"].get<uint64_t>()) + " threads on " +
                  report["machine"]["cpu_model"].get<std::string>();
  plot.x_label = "context (tokens per sequence, log scale)";
  plot.y_label = "achieved GB/s (K+V bytes / median time)";
  plot.log_x = true;
  const std::pair<const char*, const char*> colors[] = {// batch 1, batch >1
                                                        {"#6baed6", "#08519c"},
                                                        {"#fdae6b", "#a63603"},
                                                        {"#74c476", "#006d2c"}};
  std::vector<std::tuple<std::string, uint64_t, std::string>> keys;
  for (const json& row : report["rows"]) {
    auto key = std::make_tuple(row["mode"].get<std::string>(), row["batch"].get<uint64_t>(),
                               row["kv_dtype"].get<std::string>());
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  std::sort(keys.begin(), keys.end());
  for (const auto& [mode, batch, dtype] : keys) {
    PlotSeries s;
    const int m = mode == "contiguous" ? 0 : mode == "gather" ? 1 : 2;
    s.label = mode + ", batch " + std::to_string(batch) + ", " + dtype;
    s.color = batch == 1 ? colors[m].first : colors[m].second;
    s.dash = dtype == "f32" ? "7 4" : "";
    s.width = batch == 1 ? 1.8 : 2.8;
    for (const json& row : report["rows"]) {
      if (row["mode"] == mode && row["batch"] == batch && row["kv_dtype"] == dtype) {
        s.points.emplace_back(row["context"].get<double>(), row["gbps"].get<double>());
      }
    }
    plot.series.push_back(std::move(s));
  }
  const double bw = report["memory_bandwidth_gbps"].get<double>();
  plot.hlines.push_back(
      {bw, "measured read bandwidth " + Fixed(bw, 1) + " GB/s", "#d62728", "10 5"});
  return RenderSvg(plot);
}

// One bandwidth measurement with the other processes' load during it.
Result<json> MeasureBandwidthJson(const AttentionBenchOptions& o, const ReadProbe& probe) {
  const CpuSnapshot before = TakeCpuSnapshot();
  FOLIO_ASSIGN_OR_RETURN(const BandwidthResult r, MeasureReadBandwidth(probe, o.bandwidth_passes));
  const OtherLoad load = LoadBetween(before, TakeCpuSnapshot());
  return json{{"best_gbps", r.best_gbps},
              {"pass_gbps", r.pass_gbps},
              {"buffer_bytes", r.buffer_bytes},
              {"other_load_cores", load.other_cores},
              {"steal_cores", load.steal_cores}};
}

}  // namespace

std::string CommandLine(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i > 0) out += ' ';
    out += a.find_first_of(" \t\"'$") == std::string::npos ? a : "'" + a + "'";
  }
  return out;
}

CLI::App* AddAttentionBenchCommand(CLI::App& bench, AttentionBenchOptions& o) {
  CLI::App* cmd = bench.add_subcommand(
      "attention", "paged vs contiguous vs gather+dense attention decode, as JSON");
  cmd->add_option("--threads", o.threads, "kernel threads (default: all cores)");
  cmd->add_option("--json-output,-o", o.json_output, "write the JSON here (default: stdout)");
  cmd->add_option("--plot", o.plot,
                  "SVG plot path (default: beside --json-output, "
                  "else ./attention_bench.svg)");
  cmd->add_flag("--no-plot", o.no_plot, "skip the SVG");
  cmd->add_flag("--quick", o.quick, "contexts 1024,16384, batch 1, bf16");
  cmd->add_option("--contexts", o.contexts, "override the contexts")->delimiter(',');
  cmd->add_option("--batches", o.batches, "override the batch sizes")->delimiter(',');
  cmd->add_option("--kv-dtypes", o.kv_dtypes,
                  "override the K/V dtypes (f32, bf16, f16, i8, f8e4m3)")
      ->delimiter(',');
  cmd->add_option("--repeats", o.repeats, "timed samples per row (>= 5)")
      ->check(CLI::Range(5, 100000));
  cmd->add_option("--passes", o.passes,
                  "walk the grid this many times; each row pools the samples "
                  "of every pass")
      ->check(CLI::Range(1, 100));
  cmd->add_flag("--sequential", o.sequential,
                "time each mode in its own block (default: paged alternates "
                "with each other mode in rounds of the pair)");
  cmd->add_option("--page-size", o.page_size, "page size of the paged pool")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--page-order", o.page_order,
                  "where the paged pool puts pages: shuffled (default, the worst case), pool "
                  "(in order, no scatter) or engine (the tables the KV cache's allocator hands "
                  "out serving the batch with churn)")
      ->check(CLI::IsMember({"shuffled", "pool", "engine"}));
  cmd->add_option("--seed", o.seed, "K/V, query and shuffle seed");
  cmd->add_option("--bandwidth-mib", o.bandwidth_mib, "streaming-read buffer (MiB)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--bandwidth-passes", o.bandwidth_passes, "timed passes, best counts")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--out-of-cache-factor", o.out_of_cache_factor,
                  "K+V above this many LLCs counts as out of cache")
      ->check(CLI::PositiveNumber);
  return cmd;
}

int RunAttentionBench(const AttentionBenchOptions& o, const std::string& command) {
  auto fail = [](const Status& s) {
    std::cerr << "folio bench attention: " << s.ToString() << "\n";
    return 1;
  };
  Result<Grid> grid = GridOf(o);
  if (!grid) return fail(grid.error());
  ThreadPool pool(o.threads);
  const MachineInfo machine = ReadMachineInfo();
  const std::array<double, 3> load_start = ReadLoadAverage();
  const CpuSnapshot run_start = TakeCpuSnapshot();

  std::cerr << "measuring read bandwidth: " << o.bandwidth_mib << " MiB, " << pool.num_threads()
            << " threads, best of " << o.bandwidth_passes << " passes...\n";
  // One buffer for the bandwidth at the start and end of the run and the
  // passes beside out-of-cache configurations.
  Result<ReadProbe> probe = ReadProbe::Create(o.bandwidth_mib << 20, pool);
  if (!probe) return fail(probe.error());
  Result<json> bw_start = MeasureBandwidthJson(o, *probe);
  if (!bw_start) return fail(bw_start.error());
  std::cerr << "  " << Fixed((*bw_start)["best_gbps"].get<double>(), 2) << " GB/s; LLC "
            << MiB(machine.llc_bytes) << " (" << machine.llc_source << "), SIMD target "
            << DispatchedSimdTarget() << "\n";

  const auto out_of_cache_bytes =
      static_cast<uint64_t>(o.out_of_cache_factor * static_cast<double>(machine.llc_bytes));
  std::vector<ConfigResult> configs;
  for (DType dtype : grid->dtypes) {
    for (uint64_t batch : grid->batches) {
      for (uint64_t context : grid->contexts) {
        ConfigResult r;
        r.shape.context = context;
        r.shape.batch = batch;
        r.shape.kv_dtype = dtype;
        r.shape.page_size = o.page_size;
        r.in_cache = r.shape.kv_bytes() <= out_of_cache_bytes;
        configs.push_back(std::move(r));
      }
    }
  }
  // Each pass walks the whole grid, so a configuration's samples spread
  // over the run instead of sitting in one slow or quick spell.
  for (uint64_t pass = 0; pass < o.passes; ++pass) {
    for (size_t i = 0; i < configs.size(); ++i) {
      if (o.passes > 1) std::cerr << "[pass " << pass + 1 << "/" << o.passes << "]";
      std::cerr << "[" << i + 1 << "/" << configs.size() << "]";
      ConfigResult& r = configs[i];
      if (Status s = MeasureConfig(o, pool, *probe, r); !s.ok()) {
        return fail(
            s.WithContext(ConfigName({{"kv_dtype", std::string(DTypeName(r.shape.kv_dtype))},
                                      {"batch", r.shape.batch},
                                      {"context", r.shape.context}})));
      }
    }
  }
  json rows = json::array();
  bool identical = true;
  for (const ConfigResult& r : configs) {
    AppendRows(r, o, probe->bytes(), rows);
    identical = identical && r.same;
  }

  // Measured again at the end: a large gap between the two says the run
  // shared the machine. The better one is the reference.
  Result<json> bw_end = MeasureBandwidthJson(o, *probe);
  if (!bw_end) return fail(bw_end.error());
  const double bandwidth =
      std::max((*bw_start)["best_gbps"].get<double>(), (*bw_end)["best_gbps"].get<double>());
  std::cerr << "read bandwidth again: " << Fixed((*bw_end)["best_gbps"].get<double>(), 2)
            << " GB/s\n";
  const OtherLoad run_load = LoadBetween(run_start, TakeCpuSnapshot());
  for (json& row : rows) {
    row["fraction_of_bandwidth"] = row["gbps"].get<double>() / bandwidth;
    row["floor_us"] = static_cast<double>(row["bytes_read"].get<uint64_t>()) / bandwidth / 1e3;
  }

  json report;
  report["benchmark"] = "attention";
  report["command"] = command;
  report["machine"] = MachineJson(machine, load_start, run_load);
  report["threads"] = pool.num_threads();
  report["passes"] = o.passes;
  report["memory_bandwidth_gbps"] = bandwidth;
  report["memory_bandwidth"] = {{"method",
                                 "sum of 64-bit words, SIMD loads, one slice per thread, "
                                 "best pass"},
                                {"start", *bw_start},
                                {"end", *bw_end}};
  const AttentionShape shape;
  report["shape"] = {{"num_q_heads", shape.num_q_heads},
                     {"num_kv_heads", shape.num_kv_heads},
                     {"head_dim", shape.head_dim},
                     {"page_size", o.page_size},
                     {"page_order", o.page_order},
                     {"query_rows_per_sequence", 1},
                     {"seed", o.seed}};
  report["out_of_cache_threshold_bytes"] = out_of_cache_bytes;
  report["outputs_identical"] = identical;
  report["targets"] = Targets(rows);
  report["rows"] = rows;

  if (Status s = EmitJson(report, o.json_output); !s.ok()) return fail(s);
  if (!o.no_plot) {
    const std::string path = PlotPath(o);
    if (Status s = WriteTextFile(path, PlotSvg(report)); !s.ok()) return fail(s);
    std::cerr << "plot: " << path << "\n";
  }
  if (!identical) {
    std::cerr << "folio bench attention: outputs differ between layouts\n";
    return 2;
  }
  return 0;
}

}  // namespace folio::bench
