#include "cli/kv_commands.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/engine_flags.h"
#include "folio/engine/engine.h"
#include "folio/format/kv_snapshot.h"
#include "folio/serving/engine_args.h"

namespace folio::cli {
namespace {

using nlohmann::json;

constexpr std::string_view kCommand = "kv";

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

KvCommands AddKvCommands(CLI::App& app, KvFlags& f) {
  CLI::App* kv = app.add_subcommand("kv", "KV snapshots: export, import, inspect");
  kv->require_subcommand(1);
  // The built-in model's positions here (folio serve has its own flag);
  // one compute thread.
  f.engine.builtin_positions = 256;
  f.engine.num_pages = 512;
  f.engine.threads = 1;
  auto engine_flags = [&](CLI::App* cmd) {
    AddEngineFlags(*cmd, f.engine,
                   {.tokenizer_pre = false,
                    .num_pages = true,
                    .threads = false,
                    .backend = false,
                    .matmul_activations = false});
  };
  KvCommands c;
  c.exp = kv->add_subcommand("export", "prefill prompts, decode a few tokens, write a snapshot");
  engine_flags(c.exp);
  c.exp->add_option("--prompt", f.prompts, "a prompt (repeat for several)");
  c.exp->add_option("--max-tokens", f.max_tokens)->check(CLI::Range(1, 1 << 20));
  c.exp
      ->add_option("--decode-steps", f.decode_steps,
                   "tokens each request generates before the export")
      ->check(CLI::Range(1, 1 << 20));
  c.exp->add_option("--temperature", f.temperature);
  c.exp->add_option("--top-k", f.top_k);
  c.exp->add_option("--seed", f.seed, "request i samples with seed + i");
  c.exp->add_option("--output,-o", f.file, "snapshot file")->required();
  c.exp->add_flag("--reference", f.reference,
                  "after exporting, finish the requests here too and print their tokens");
  c.imp = kv->add_subcommand("import", "continue a snapshot's requests to the end");
  engine_flags(c.imp);
  c.imp->add_option("file", f.file, "snapshot file")->required();
  c.inspect = kv->add_subcommand("inspect", "summarise a snapshot file");
  c.inspect->add_option("file", f.file, "snapshot file")->required();
  c.inspect->add_flag("--json", f.json, "print the summary as JSON");
  return c;
}

int RunKvExport(const KvFlags& f) {
  Result<std::unique_ptr<serving::ServingEngine>> built =
      serving::ServingEngine::Load(f.engine, serving::ArgNames::Flag());
  if (!built) return Fail(kCommand, built.error());
  const serving::ServedModel* s = &(*built)->served();
  engine::Engine* eng = &(*built)->engine();
  std::vector<engine::RequestId> ids;
  std::map<engine::RequestId, size_t> index;
  for (size_t i = 0; i < f.prompts.size(); ++i) {
    Result<std::vector<int32_t>> prompt = s->EncodePrompt(f.prompts[i]);
    if (!prompt) return Fail(kCommand, prompt.error().WithContext("prompt " + std::to_string(i)));
    engine::RequestParams p;
    p.sampling.temperature = f.temperature;
    p.sampling.top_k = f.top_k;
    p.max_tokens = f.max_tokens;
    p.seed = f.seed + i;
    Result<engine::RequestId> id = eng->AddRequest(std::move(*prompt), p);
    if (!id) return Fail(kCommand, id.error().WithContext("prompt " + std::to_string(i)));
    index[*id] = i;
    ids.push_back(*id);
  }
  std::vector<std::vector<int32_t>> tokens(f.prompts.size());
  std::vector<bool> finished(f.prompts.size(), false);
  auto run_step = [&]() -> Status {
    FOLIO_ASSIGN_OR_RETURN(std::vector<engine::StepOutput> out, eng->Step());
    for (const engine::StepOutput& o : out) {
      const size_t i = index.at(o.id);
      tokens[i].insert(tokens[i].end(), o.new_tokens.begin(), o.new_tokens.end());
      if (o.finish != engine::FinishReason::kNone) finished[i] = true;
    }
    return Status::Ok();
  };
  auto ready = [&] {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (!finished[i] && tokens[i].size() < f.decode_steps) return false;
    }
    return true;
  };
  while (!ready()) {
    if (Status st = run_step(); !st.ok()) return Fail(kCommand, st);
  }
  std::vector<engine::RequestId> live;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!finished[i]) live.push_back(ids[i]);
  }
  const auto t0 = std::chrono::steady_clock::now();
  Result<format::KvSnapshot> snap = eng->ExportSnapshot(live);
  if (!snap) return Fail(kCommand, snap.error());
  const double export_ms = MsSince(t0);
  const auto t1 = std::chrono::steady_clock::now();
  if (Status st = format::WriteSnapshotFile(*snap, f.file); !st.ok()) return Fail(kCommand, st);
  const double write_ms = MsSince(t1);
  json report = {{"file", f.file},
                 {"file_bytes", std::filesystem::file_size(f.file)},
                 {"exported_requests", live.size()},
                 {"pages", snap->num_pages},
                 {"export_ms", export_ms},
                 {"write_ms", write_ms},
                 {"tokens_before_export", tokens}};
  if (f.reference) {
    while (eng->HasUnfinished()) {
      if (Status st = run_step(); !st.ok()) return Fail(kCommand, st);
    }
    report["reference_tokens"] = tokens;
  }
  std::cout << report.dump(2) << "\n";
  return 0;
}

int RunKvImport(const KvFlags& f) {
  const auto t0 = std::chrono::steady_clock::now();
  Result<format::KvSnapshot> snap = format::ReadSnapshotFile(f.file);
  if (!snap) return Fail(kCommand, snap.error());
  const double read_ms = MsSince(t0);
  serving::EngineArgs args = f.engine;
  args.kv_dtype = std::string(format::ElementTypeName(snap->kv_dtype));
  Result<std::unique_ptr<serving::ServingEngine>> built =
      serving::ServingEngine::Load(args, serving::ArgNames::Flag());
  if (!built) return Fail(kCommand, built.error());
  const serving::ServedModel* s = &(*built)->served();
  engine::Engine* eng = &(*built)->engine();
  const auto t1 = std::chrono::steady_clock::now();
  Result<std::vector<engine::RequestId>> ids = eng->ImportSnapshot(*snap);
  if (!ids) return Fail(kCommand, ids.error());
  const double import_ms = MsSince(t1);
  std::map<engine::RequestId, size_t> index;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::string> finish(ids->size(), "none");
  for (size_t i = 0; i < ids->size(); ++i) {
    index[(*ids)[i]] = i;
    tokens.push_back(snap->sequences[i].request["output"].get<std::vector<int32_t>>());
  }
  while (eng->HasUnfinished()) {
    Result<std::vector<engine::StepOutput>> out = eng->Step();
    if (!out) return Fail(kCommand, out.error());
    for (const engine::StepOutput& o : *out) {
      const size_t i = index.at(o.id);
      tokens[i].insert(tokens[i].end(), o.new_tokens.begin(), o.new_tokens.end());
      if (o.finish != engine::FinishReason::kNone) {
        finish[i] = std::string(engine::FinishReasonName(o.finish));
      }
    }
  }
  json texts = json::array();
  for (const auto& t : tokens) {
    Result<std::string> text = s->tokenizer().Decode(t, true);
    texts.push_back(text ? *text : std::string());
  }
  const json report = {{"file", f.file},         {"read_ms", read_ms},
                       {"import_ms", import_ms}, {"imported_requests", ids->size()},
                       {"tokens", tokens},       {"text", texts},
                       {"finish", finish}};
  std::cout << report.dump(2) << "\n";
  return 0;
}

int RunKvInspect(const KvFlags& f) {
  Result<format::KvSnapshot> snap = format::ReadSnapshotFile(f.file);
  if (!snap) return Fail(kCommand, snap.error());
  const json summary = format::SnapshotSummary(*snap, std::filesystem::file_size(f.file));
  if (f.json) {
    std::cout << summary.dump(2) << "\n";
    return 0;
  }
  std::cout << f.file << ": folio KV snapshot v" << format::kSnapshotVersion << ", "
            << summary["file_bytes"].get<uint64_t>() << " bytes\n"
            << "  model " << snap->model_id << "\n"
            << "  KV " << format::ElementTypeName(snap->kv_dtype) << ", " << snap->num_layers
            << " layers x " << snap->num_kv_heads << " heads x " << snap->head_dim
            << " dims, pages of " << snap->page_size << " tokens\n"
            << "  " << snap->num_pages << " pages (" << summary["kv_bytes"].get<uint64_t>()
            << " K/V bytes), " << summary["shared_page_references"].get<uint64_t>()
            << " page references shared between sequences\n";
  for (size_t i = 0; i < snap->sequences.size(); ++i) {
    const format::SnapshotSequence& q = snap->sequences[i];
    const json& r = q.request;
    std::cout << "  sequence " << i << ": " << q.num_tokens << " tokens with K/V in "
              << q.block_table.size() << " pages";
    if (r.contains("prompt") && r["prompt"].is_array() && r.contains("output") &&
        r["output"].is_array()) {
      std::cout << "; prompt " << r["prompt"].size() << " tokens, " << r["output"].size()
                << " generated";
    }
    std::cout << "\n";
  }
  return 0;
}

}  // namespace folio::cli
