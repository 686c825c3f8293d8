#include "bench/kv_transfer_bench.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "bench/decode_bench.h"
#include "bench/machine_info.h"
#include "bench/quick_defaults.h"
#include "bench/report.h"
#include "bench/serve_bench.h"
#include "bench/timing.h"
#include "folio/core/aligned_buffer.h"
#include "folio/core/checked_math.h"
#include "folio/core/splitmix64.h"
#include "folio/engine/engine.h"
#include "folio/format/kv_snapshot.h"
#include "folio/model/model.h"

namespace folio::bench {
namespace {

using nlohmann::json;

struct Stage {
  std::string name;
  std::vector<double> ms;
};

}  // namespace

CLI::App* AddKvTransferBenchCommand(CLI::App& bench, KvTransferBenchOptions& o) {
  CLI::App* cmd =
      bench.add_subcommand("kv-transfer",
                           "time and bytes of moving a KV cache between engines (export, encode, "
                           "write, read, decode, import), as JSON");
  cmd->add_option("--model", o.model, "model folder or .gguf (default: synthetic)");
  cmd->add_option("--json-output,-o", o.json_output, "write the JSON here (default: stdout)");
  cmd->add_option("--file", o.file, "snapshot path (default: a temporary file)");
  cmd->add_flag("--quick", o.quick, "4 sequences of 256 tokens, 3 repeats");
  cmd->add_option("--num-seqs", o.num_seqs)->check(CLI::Range(1, 4096));
  cmd->add_option("--prompt-len", o.prompt_len)->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--page-size", o.page_size)->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--kv-dtype", o.kv_dtype, "f32, bf16 or f16");
  cmd->add_option("--repeats", o.repeats)->check(CLI::Range(1, 1000));
  cmd->add_option("--threads", o.threads, "prefill threads (0 = every core)");
  cmd->add_option("--seed", o.seed);
  SetQuickDefaults(cmd, &o.quick,
                   {{"--num-seqs", [&o] { o.num_seqs = 4; }},
                    {"--prompt-len", [&o] { o.prompt_len = 256; }},
                    {"--repeats", [&o] { o.repeats = 3; }}});
  return cmd;
}

int RunKvTransferBench(const KvTransferBenchOptions& o, const std::string& command) {
  auto fail = [](const Status& s) {
    std::cerr << "folio bench kv-transfer: " << s.ToString() << "\n";
    return 1;
  };
  Result<DType> kv_dtype = ParseDType(o.kv_dtype);
  if (!kv_dtype) return fail(kv_dtype.error().WithContext("--kv-dtype"));
  const MachineInfo machine = ReadMachineInfo();
  const std::array<double, 3> load_start = ReadLoadAverage();
  const CpuSnapshot run_start = TakeCpuSnapshot();
  ThreadPool pool(o.threads);

  // The model only has to produce K/V of a realistic shape: the serving
  // model's layers and heads, with a small FFN and vocabulary so that the
  // prefill before the measurement is quick.
  model::ModelConfig kv_shape = ServeModelConfig(false);
  kv_shape.ffn_size = 256;
  kv_shape.vocab_size = 1024;
  Result<std::unique_ptr<model::Model>> loaded = LoadOrSynthesize(o.model, kv_shape, o.seed, &pool);
  if (!loaded) return fail(loaded.error());
  const std::unique_ptr<model::Model> m = std::move(*loaded);
  const std::string model_name = o.model.empty() ? "synthetic-serve-kv-shape" : o.model;
  engine::EngineConfig ec;
  ec.page_size = o.page_size;
  ec.kv_dtype = *kv_dtype;
  ec.num_pages = o.num_seqs * CeilDiv(o.prompt_len + 64, o.page_size);
  ec.max_num_seqs = o.num_seqs;
  ec.max_num_batched_tokens = std::max<uint64_t>(512, o.num_seqs);
  ec.prefix_caching = false;
  Result<engine::Engine> sender = engine::Engine::Create(*m, ec, &pool);
  if (!sender) return fail(sender.error());
  SplitMix64 rng(o.seed);
  std::vector<engine::RequestId> ids;
  engine::RequestParams params;
  params.max_tokens = 64;  // far from done when the export happens
  for (uint64_t i = 0; i < o.num_seqs; ++i) {
    std::vector<int32_t> prompt(o.prompt_len);
    for (int32_t& t : prompt) t = static_cast<int32_t>(rng.NextU64() % m->config().vocab_size);
    Result<engine::RequestId> id = sender->AddRequest(prompt, params);
    if (!id) return fail(id.error());
    ids.push_back(*id);
  }
  std::cerr << "prefilling " << o.num_seqs << " x " << o.prompt_len << " tokens...\n";
  // Until every request has its first token (prefill done).
  std::set<engine::RequestId> started;
  while (started.size() < o.num_seqs) {
    Result<std::vector<engine::StepOutput>> out = sender->Step();
    if (!out) return fail(out.error());
    for (const engine::StepOutput& x : *out) started.insert(x.id);
  }

  const std::filesystem::path path =
      o.file.empty() ? std::filesystem::temp_directory_path() /
                           ("folio_kv_transfer_" + std::to_string(::getpid()) + ".kvs")
                     : std::filesystem::path(o.file);
  std::vector<Stage> stages = {{"export", {}},      {"encode", {}}, {"write", {}},
                               {"read_decode", {}}, {"import", {}}, {"memcpy_floor", {}}};
  uint64_t kv_bytes = 0, file_bytes = 0, pages = 0;
  for (uint64_t rep = 0; rep < o.repeats; ++rep) {
    double t = NowUs();
    auto lap = [&](size_t stage) {
      const double now = NowUs();
      stages[stage].ms.push_back((now - t) / 1e3);
      t = now;
    };
    Result<format::KvSnapshot> snap = sender->ExportSnapshot(ids);
    if (!snap) return fail(snap.error());
    lap(0);
    const std::vector<std::byte> bytes = format::EncodeSnapshot(*snap);
    lap(1);
    if (Status s = WriteTextFile(
            path.string(), std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
        !s.ok()) {
      return fail(s);
    }
    lap(2);
    Result<format::KvSnapshot> back = format::ReadSnapshotFile(path);
    if (!back) return fail(back.error());
    lap(3);
    Result<engine::Engine> receiver = engine::Engine::Create(*m, ec, &pool);
    if (!receiver) return fail(receiver.error());
    t = NowUs();  // engine creation (pool allocation) is not transfer work
    Result<std::vector<engine::RequestId>> imported = receiver->ImportSnapshot(*back);
    if (!imported) return fail(imported.error());
    lap(4);
    kv_bytes = 2 * snap->num_layers * snap->num_pages * snap->page_bytes();
    pages = snap->num_pages;
    file_bytes = bytes.size();
    // The floor: copying the same K/V bytes once.
    AlignedBuffer from(kv_bytes), to(kv_bytes);
    std::memset(from.data(), 1, kv_bytes);
    std::memset(to.data(), 0, kv_bytes);
    t = NowUs();
    std::memcpy(to.data(), from.data(), kv_bytes);
    lap(5);
  }
  std::filesystem::remove(path);

  json stage_json = json::object();
  for (const Stage& s : stages) {
    const double median = Quantile(s.ms, 0.5);
    stage_json[s.name] = {
        {"median_ms", median},
        {"p10_ms", Quantile(s.ms, 0.1)},
        {"p90_ms", Quantile(s.ms, 0.9)},
        {"kv_gbps", median > 0 ? static_cast<double>(kv_bytes) / median / 1e6 : 0.0}};
  }
  json report;
  report["benchmark"] = "kv-transfer";
  report["command"] = command;
  report["machine"] = MachineJson(machine, load_start, LoadBetween(run_start, TakeCpuSnapshot()));
  report["model"] = {{"name", model_name},
                     {"num_layers", m->config().num_layers},
                     {"num_kv_heads", m->config().num_kv_heads},
                     {"head_dim", m->config().head_dim()}};
  report["workload"] = {{"num_seqs", o.num_seqs},   {"prompt_len", o.prompt_len},
                        {"page_size", o.page_size}, {"kv_dtype", DTypeName(*kv_dtype)},
                        {"repeats", o.repeats},     {"pages", pages}};
  report["kv_bytes"] = kv_bytes;
  report["file_bytes"] = file_bytes;
  report["file_overhead_bytes"] = file_bytes - kv_bytes;
  report["stages"] = stage_json;
  report["notes"] =
      "export and import include the conversion between the pool's head-major pages and the "
      "token-major interchange pages; read_decode maps the file and checks its CRC-32 and "
      "every field; kv_gbps = kv_bytes / stage time";
  if (Status s = EmitJson(report, o.json_output); !s.ok()) return fail(s);
  return 0;
}

}  // namespace folio::bench
