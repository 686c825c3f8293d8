#include "cli/kv_commands.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/served_model.h"
#include "folio/engine/engine.h"
#include "folio/format/kv_snapshot.h"

namespace folio::cli {
namespace {

using nlohmann::json;

int Fail(const Status& s) {
  std::cerr << "folio kv: " << s.ToString() << "\n";
  return 1;
}

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// The built-in model's positions here (folio serve has its own flag).
constexpr uint64_t kBuiltinPositions = 256;

Result<engine::Engine> MakeEngine(const ServedModel& s, const KvFlags& f) {
  engine::EngineConfig c;
  c.page_size = f.page_size;
  c.num_pages = f.num_pages;
  FOLIO_ASSIGN_OR_RETURN(c.kv_dtype, ParseDType(f.kv_dtype));
  return engine::Engine::Create(*s.model, c, nullptr, &s.tokenizer());
}

}  // namespace

KvCommands AddKvCommands(CLI::App& app, KvFlags& f) {
  CLI::App* kv = app.add_subcommand("kv", "KV snapshots: export, import, inspect");
  kv->require_subcommand(1);
  auto engine_flags = [&](CLI::App* cmd) {
    cmd->add_option("--model", f.model, "model folder or .gguf (default: built-in)");
    cmd->add_option("--page-size", f.page_size, "KV page size")->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--num-pages", f.num_pages, "KV pool pages")->check(CLI::Range(1, 1 << 30));
    cmd->add_option("--kv-dtype", f.kv_dtype, "f32, bf16, f16 or i8");
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
  Result<ServedModel> s = LoadServedModel(f.model, kBuiltinPositions);
  if (!s) return Fail(s.error());
  Result<engine::Engine> eng = MakeEngine(*s, f);
  if (!eng) return Fail(eng.error());
  std::vector<engine::RequestId> ids;
  std::map<engine::RequestId, size_t> index;
  for (size_t i = 0; i < f.prompts.size(); ++i) {
    Result<std::vector<int32_t>> prompt = s->EncodePrompt(f.prompts[i]);
    if (!prompt) return Fail(prompt.error().WithContext("prompt " + std::to_string(i)));
    engine::RequestParams p;
    p.sampling.temperature = f.temperature;
    p.sampling.top_k = f.top_k;
    p.max_tokens = f.max_tokens;
    p.seed = f.seed + i;
    Result<engine::RequestId> id = eng->AddRequest(std::move(*prompt), p);
    if (!id) return Fail(id.error().WithContext("prompt " + std::to_string(i)));
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
    if (Status st = run_step(); !st.ok()) return Fail(st);
  }
  std::vector<engine::RequestId> live;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!finished[i]) live.push_back(ids[i]);
  }
  const auto t0 = std::chrono::steady_clock::now();
  Result<format::KvSnapshot> snap = eng->ExportSnapshot(live);
  if (!snap) return Fail(snap.error());
  const double export_ms = MsSince(t0);
  const auto t1 = std::chrono::steady_clock::now();
  if (Status st = format::WriteSnapshotFile(*snap, f.file); !st.ok()) return Fail(st);
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
      if (Status st = run_step(); !st.ok()) return Fail(st);
    }
    report["reference_tokens"] = tokens;
  }
  std::cout << report.dump(2) << "\n";
  return 0;
}

int RunKvImport(const KvFlags& f) {
  const auto t0 = std::chrono::steady_clock::now();
  Result<format::KvSnapshot> snap = format::ReadSnapshotFile(f.file);
  if (!snap) return Fail(snap.error());
  const double read_ms = MsSince(t0);
  Result<ServedModel> s = LoadServedModel(f.model, kBuiltinPositions);
  if (!s) return Fail(s.error());
  KvFlags engine_flags = f;
  engine_flags.kv_dtype = std::string(format::ElementTypeName(snap->kv_dtype));
  Result<engine::Engine> eng = MakeEngine(*s, engine_flags);
  if (!eng) return Fail(eng.error());
  const auto t1 = std::chrono::steady_clock::now();
  Result<std::vector<engine::RequestId>> ids = eng->ImportSnapshot(*snap);
  if (!ids) return Fail(ids.error());
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
    if (!out) return Fail(out.error());
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
  if (!snap) return Fail(snap.error());
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
