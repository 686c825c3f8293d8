// build/bin/folio: the command-line front end.
//   folio layout    the worked-example report (JSON)
//   folio generate  stream a continuation from the built-in or a saved model
//   folio serve     OpenAI-compatible HTTP server (cli/serve_command.h)
//   folio chat      an interactive chat in the terminal (cli/chat_command.h)
//   folio template  a chat template rendered for a conversation (cli/template_command.h)
//   folio save-model  write the built-in model as config.json + safetensors
//   folio quantize  a model file as GGUF with its matrices in another type (cli/quantize_command.h)
//   folio bench attention  paged vs dense attention decode timings (JSON)
//   folio bench decode     prefill / decode tokens/s vs the bandwidth floor (JSON)
//   folio bench serve      continuous batching: dense vs gather vs paged (JSON)
//   folio bench kv-transfer  export / encode / write / read / import of a KV cache (JSON)
//   folio bench template   chat template render time (JSON)
//   folio kv export|import|inspect  KV snapshots between processes
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
#include "cli/chat_command.h"
#include "cli/engine_flags.h"
#include "cli/flag_lists.h"
#include "cli/kv_commands.h"
#include "cli/layout_report.h"
#include "cli/quantize_command.h"
#include "cli/serve_command.h"
#include "cli/template_command.h"
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

// Printable ASCII as is; every other byte as \xNN, so an untrained model's
// output stays readable on a terminal.
std::string Printable(std::string_view bytes) {
  std::string out;
  for (char ch : bytes) {
    const auto u = static_cast<unsigned char>(ch);
    if (u >= 0x20 && u < 0x7f) {
      out += ch;
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    }
  }
  return out;
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

// An engine for one request at a time over `capacity` positions: the
// prompt prefilled in one step, no prefix caching (one request shares
// nothing). generate and logits run through it, the path serving uses.
void SingleRequestEngine(uint64_t capacity, uint64_t prompt_tokens, serving::EngineArgs& a) {
  a.page_size = std::max<uint64_t>(1, std::min(a.page_size, capacity));
  a.num_pages = std::max<uint64_t>(1, CeilDiv(capacity, a.page_size));
  a.kv_bytes.reset();
  a.max_num_batched_tokens = std::max<uint64_t>({prompt_tokens, 1, 1 + a.speculative_tokens});
  a.max_num_seqs = 1;
  a.prefix_caching = false;
}

struct GenerateFlags {
  // --model (default: the built-in worked example) and its engine
  // (cli/engine_flags.h); one request, sized by SingleRequestEngine.
  serving::EngineArgs engine;
  // The declared request parameters (--min-p, --stop-token-ids,
  // --ignore-eos, ...: AddRequestParamFlags); the rest below.
  engine::RequestParams request;
  std::string prompt = "a";
  uint64_t max_tokens = 8;
  double temperature = 0.0;
  uint64_t top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 20;
  uint64_t max_context = 4096;
  bool raw = false;
};

int RunGenerate(const GenerateFlags& f) {
  serving::EngineArgs args = f.engine;
  if (Status s = args.Validate(serving::ArgNames::Flag()); !s.ok()) return Fail(kCommand, s);
  Result<serving::ServedModel> served =
      serving::LoadServedModel(args.model, args.builtin_positions, args.tokenizer_pre);
  if (!served) return Fail(kCommand, served.error());
  // Byte-level output is printed byte by byte (escaped unless --raw); a
  // real tokenizer streams complete UTF-8.
  const bool text = !served->byte_level();
  Result<std::vector<int32_t>> ids = served->EncodePrompt(f.prompt);
  if (!ids) return Fail(kCommand, ids.error());
  const std::vector<int32_t> prompt = std::move(*ids);
  const uint64_t capacity =
      std::min<uint64_t>(served->model->config().max_positions, f.max_context);
  if (prompt.size() > capacity) {
    return Fail(kCommand,
                Status::OutOfRange("prompt of " + std::to_string(prompt.size()) +
                                   " tokens exceeds the context of " + std::to_string(capacity)));
  }
  // The serving path: one request on the engine. Generation stops at the
  // context's end (the last token selected is never fed).
  SingleRequestEngine(capacity, prompt.size(), args);
  // The draft model, if any, has the target's context.
  args.builtin_positions = capacity;
  std::vector<int32_t> eos = served->StopTokenIds();
  Result<std::unique_ptr<serving::ServingEngine>> built =
      serving::ServingEngine::Create(std::move(*served), args, serving::ArgNames::Flag());
  if (!built) return Fail(kCommand, built.error());
  engine::Engine* eng = &(*built)->engine();
  engine::RequestParams params = f.request;
  const uint64_t room = capacity - prompt.size() + 1;
  params.max_tokens = std::min(f.max_tokens, room);
  params.sampling.temperature = f.temperature;
  params.sampling.top_k = f.top_k;
  params.sampling.top_p = f.top_p;
  params.seed = f.seed;
  params.eos_token_ids = std::move(eos);
  Result<engine::RequestId> id = eng->AddRequest(prompt, params);
  if (!id) return Fail(kCommand, id.error());

  std::cout << (f.raw || text ? f.prompt : Printable(f.prompt)) << std::flush;
  const auto start = std::chrono::steady_clock::now();
  uint64_t generated = 0;
  engine::FinishReason finish = engine::FinishReason::kNone;
  while (eng->HasUnfinished()) {
    Result<std::vector<engine::StepOutput>> step = eng->Step();
    if (!step) return Fail(kCommand, step.error());
    for (const engine::StepOutput& o : *step) {
      // A real tokenizer streams complete UTF-8 (the end token adds no
      // text); the built-in byte model's bytes are printed one by one,
      // escaped unless --raw.
      const std::string piece = text ? o.text : *tokenizer::ByteTokenizer::Decode(o.new_tokens);
      std::cout << (f.raw || text ? piece : Printable(piece)) << std::flush;
      generated += o.new_tokens.size();
      if (o.finish != engine::FinishReason::kNone) finish = o.finish;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "\n";
  const char* stop = finish == engine::FinishReason::kStop ? "end_token"
                     : params.max_tokens < f.max_tokens    ? "capacity"
                                                           : "max_tokens";
  if (finish == engine::FinishReason::kStop) --generated;  // the end token is not output
  std::cerr << "[" << prompt.size() << " prompt + " << generated << " generated tokens in "
            << seconds << " s, stop: " << stop << "]\n";
  return 0;
}

// `folio batch`: a short continuous-batching run on a byte-level model
// (the worked example's shape with room for 64 positions): several prompts
// of different lengths enter together, tokens stream step by step, and the
// summary says how pages were used, reused and freed.
struct BatchFlags {
  // The last prompt shares its first pages with the third; it waits for a
  // free sequence slot and then finds them in the prefix cache.
  std::vector<std::string> prompts = {"paged attention", "kv", "a block table maps pages",
                                      "continuous batching", "a block table maps tokens"};
  uint64_t max_tokens = 8;
  uint64_t page_size = 4;
  uint64_t num_pages = 16;
  uint64_t max_num_batched_tokens = 8;
  uint64_t seed = 7;
};

int RunBatch(const BatchFlags& f) {
  model::ModelConfig c = model::WorkedExampleConfig();
  c.max_positions = 64;
  Result<model::Model> m = model::Model::FromSeed(c, 20);
  if (!m) return Fail(kCommand, m.error());
  engine::EngineConfig ec;
  ec.page_size = f.page_size;
  ec.num_pages = f.num_pages;
  ec.max_num_batched_tokens = f.max_num_batched_tokens;
  ec.max_num_seqs = std::min<uint64_t>({f.prompts.size(), f.max_num_batched_tokens, 4});
  Result<engine::Engine> eng =
      engine::Engine::Create(*m, ec, nullptr, &tokenizer::ByteTokenizer::AsTokenizer());
  if (!eng) return Fail(kCommand, eng.error());
  std::map<engine::RequestId, size_t> index;
  for (size_t i = 0; i < f.prompts.size(); ++i) {
    engine::RequestParams p;
    p.sampling = {0.8, 40, 1.0, 0.0};
    p.max_tokens = f.max_tokens;
    p.seed = f.seed + i;
    Result<engine::RequestId> id =
        eng->AddRequest(tokenizer::ByteTokenizer::Encode(f.prompts[i], true, false), p);
    if (!id) return Fail(kCommand, id.error());
    index[*id] = i;
    std::cout << "request " << i << ": \"" << f.prompts[i] << "\" (" << f.prompts[i].size() + 1
              << " prompt tokens)\n";
  }
  std::vector<std::string> text(f.prompts.size());
  while (eng->HasUnfinished()) {
    Result<std::vector<engine::StepOutput>> step = eng->Step();
    if (!step) return Fail(kCommand, step.error());
    const kv::PoolStats stats = eng->cache().Stats();
    std::cout << "step " << eng->stats().steps << " (pages " << stats.pages_used << "/"
              << stats.pages_total << ", " << stats.pages_held_only << " only cached):";
    for (const engine::StepOutput& o : *step) {
      text[index[o.id]] += o.text;
      std::cout << "  [" << index[o.id] << "] +" << Printable(o.text);
      if (o.finish != engine::FinishReason::kNone) {
        std::cout << " (" << engine::FinishReasonName(o.finish) << ")";
      }
    }
    std::cout << "\n";
  }
  const kv::BlockPool& pool = eng->cache().pool();
  const engine::EngineStats st = eng->stats();
  // A fresh pool hands out pages 0, 1, 2, ... and reuses released ones
  // first, so the pages ever touched are exactly the peak in use; every
  // allocation beyond that reused a page another request had freed.
  std::cout << "summary: " << f.prompts.size() << " requests in " << st.steps << " steps, "
            << st.preemptions << " preemptions\n"
            << "  pages: peak " << pool.peak_used() << " of " << pool.num_pages() << ", "
            << pool.total_allocations() << " allocations of which "
            << pool.total_allocations() - pool.peak_used() << " reused freed pages\n"
            << "  prefix cache: " << st.prefix_hit_tokens << " of " << st.prefix_query_tokens
            << " cacheable prompt tokens reused ("
            << static_cast<int>(100.0 * st.prefix_hit_rate() + 0.5) << "%), " << st.prefix_evictions
            << " pages evicted, " << eng->cached_pages() << " still cached\n";
  if (Status s = eng->ClearPrefixCache(); !s.ok()) return Fail(kCommand, s);
  std::cout << "  after clearing the prefix cache: " << pool.num_used() << " pages in use, "
            << pool.num_free() << " free\n";
  return pool.num_used() == 0 ? 0 : 1;
}

// `folio logits`: prefill logits of every prompt position and a greedy
// continuation, as JSON. The checks against independent implementations
// (tests/python) drive folio through this command.
struct LogitsFlags {
  // --model (default: the built-in one) and its engine (cli/engine_flags.h);
  // one request, sized by SingleRequestEngine, one compute thread.
  serving::EngineArgs engine;
  std::string tokens;
  uint64_t greedy = 0;
  uint64_t max_context = 4096;
};

int RunLogits(const LogitsFlags& f) {
  // The flags are checked before the (slow) model load.
  Result<std::vector<uint64_t>> parsed = ParseUintList("--tokens", f.tokens);
  if (!parsed) return Fail(kCommand, parsed.error());
  std::vector<int32_t> tokens;
  for (uint64_t t : *parsed) {
    if (t > INT32_MAX) return Fail(kCommand, Status::OutOfRange("token id " + std::to_string(t)));
    tokens.push_back(static_cast<int32_t>(t));
  }
  if (tokens.empty()) return Fail(kCommand, Status::InvalidArgument("--tokens is empty"));
  serving::EngineArgs args = f.engine;
  if (Status s = args.Validate(serving::ArgNames::Flag()); !s.ok()) return Fail(kCommand, s);
  // No tokenizer: logits checks models that ship none.
  Result<model::Model> m = serving::LoadModelOrBuiltin(args.model, f.max_context);
  if (!m) return Fail(kCommand, m.error());
  // The serving path: one request on the engine, prompt logits on, greedy.
  const uint64_t capacity = std::min<uint64_t>(m->config().max_positions, f.max_context);
  SingleRequestEngine(capacity, tokens.size(), args);
  Result<engine::EngineConfig> ec = args.ToEngineConfig(m->config(), serving::ArgNames::Flag());
  if (!ec) return Fail(kCommand, ec.error());
  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::Create(args.threads);
  if (!pool) return Fail(kCommand, pool.error());
  Result<engine::Engine> eng = engine::Engine::Create(*m, *ec, pool->get());
  if (!eng) return Fail(kCommand, eng.error());
  engine::RequestParams params;
  params.max_tokens = std::max<uint64_t>(f.greedy, 1);
  params.prompt_logits = true;
  Result<engine::RequestId> id = eng->AddRequest(tokens, params);
  if (!id) return Fail(kCommand, id.error());
  const uint64_t vocab = m->config().vocab_size;
  nlohmann::json rows = nlohmann::json::array();
  std::vector<int32_t> greedy;
  while (eng->HasUnfinished()) {
    Result<std::vector<engine::StepOutput>> step = eng->Step();
    if (!step) return Fail(kCommand, step.error());
    for (const engine::StepOutput& o : *step) {
      for (size_t r = 0; r < o.prompt_logits.size() / vocab; ++r) {
        const auto row = o.prompt_logits.begin() + static_cast<ptrdiff_t>(r * vocab);
        rows.push_back(std::vector<float>(row, row + static_cast<ptrdiff_t>(vocab)));
      }
      greedy.insert(greedy.end(), o.new_tokens.begin(), o.new_tokens.end());
    }
  }
  greedy.resize(f.greedy);
  std::cout << nlohmann::json{{"logits", rows}, {"greedy", greedy}}.dump() << "\n";
  return 0;
}

// `folio tokenize`: a model's tokenizer alone (a model folder, a GGUF file
// with or without tensors, or a bare tokenizer.json), so its ids can be
// checked against another tool's. Text comes from --text or standard
// input; ids go out as JSON. --decode reads comma-separated ids instead.
struct TokenizeFlags {
  std::string model;
  std::optional<std::string> text;
  bool decode = false;
  bool no_special = false;  // encode: no bos/eos; decode: keep special tokens' text
  std::optional<std::string> tokenizer_pre;  // replaces the GGUF's tokenizer.ggml.pre
};

int RunTokenize(const TokenizeFlags& f) {
  Result<tokenizer::Tokenizer> tok = [&]() -> Result<tokenizer::Tokenizer> {
    if (std::filesystem::path(f.model).extension() == ".json") {
      if (f.tokenizer_pre) {
        return Status::InvalidArgument("--tokenizer-pre applies to a GGUF file; " + f.model +
                                       " is a tokenizer.json, which names its own pre-tokenizer");
      }
      return tokenizer::Tokenizer::FromTokenizerJson(f.model);
    }
    FOLIO_ASSIGN_OR_RETURN(std::optional<tokenizer::Tokenizer> t,
                           checkpoint::LoadModelTokenizer(f.model, f.tokenizer_pre));
    if (!t) return Status::NotFound(f.model + " has no tokenizer (no tokenizer.json)");
    return std::move(*t);
  }();
  if (!tok) return Fail(kCommand, tok.error());
  std::string text;
  if (f.text) {
    text = *f.text;
  } else {
    std::ostringstream in;
    in << std::cin.rdbuf();
    text = in.str();
  }
  if (f.decode) {
    Result<std::vector<uint64_t>> parsed = cli::ParseUintList("--text", text);
    if (!parsed) return Fail(kCommand, parsed.error());
    std::vector<int32_t> ids;
    for (const uint64_t id : *parsed) {
      if (id > INT32_MAX)
        return Fail(kCommand, Status::OutOfRange("token id " + std::to_string(id)));
      ids.push_back(static_cast<int32_t>(id));
    }
    Result<std::string> decoded = tok->Decode(ids, /*skip_special_tokens=*/!f.no_special);
    if (!decoded) return Fail(kCommand, decoded.error());
    std::cout << nlohmann::json{{"text", *decoded}}.dump() << "\n";
    return 0;
  }
  Result<std::vector<int32_t>> ids = tok->Encode(text, /*add_special_tokens=*/!f.no_special);
  if (!ids) return Fail(kCommand, ids.error());
  std::cout << nlohmann::json{{"ids", *ids}}.dump() << "\n";
  return 0;
}

// `folio info MODEL`: what a model is and what it costs to run.
int RunInfo(const std::string& path) {
  Result<model::Model> m = checkpoint::LoadModel(path);
  if (!m) return Fail(kCommand, m.error());
  const model::ModelConfig& c = m->config();
  // Per stored type: tensors, elements, bytes and bits per weight (a
  // quantized type's scales included), and the same for the whole model.
  struct TypeTotals {
    uint64_t tensors = 0, elements = 0, bytes = 0;
  };
  std::map<std::string, TypeTotals> by_type;
  uint64_t total_bytes = 0, total_elements = 0;
  model::ForEachTensor(
      c, m->weights(),
      [&](const std::string&, const std::vector<uint64_t>& shape, const model::Tensor& t) {
        uint64_t elements = 1;
        for (const uint64_t d : shape) elements *= d;
        TypeTotals& tt = by_type[std::string(model::TensorTypeName(t.type))];
        ++tt.tensors;
        tt.elements += elements;
        tt.bytes += t.bytes.size();
        total_bytes += t.bytes.size();
        total_elements += elements;
      });
  auto bits_per_weight = [](uint64_t bytes, uint64_t elements) {
    return elements == 0 ? 0.0 : 8.0 * static_cast<double>(bytes) / static_cast<double>(elements);
  };
  nlohmann::json bytes_by_type, types;
  for (const auto& [name, tt] : by_type) {
    bytes_by_type[name] = tt.bytes;
    types[name] = {{"tensors", tt.tensors},
                   {"elements", tt.elements},
                   {"bytes", tt.bytes},
                   {"bits_per_weight", bits_per_weight(tt.bytes, tt.elements)}};
  }
  const uint64_t kv_elems_per_token = 2 * c.num_layers * c.num_kv_heads * c.head_dim();
  nlohmann::json j = {
      {"path", path},
      {"architecture", model::ArchitectureName(c.architecture)},
      {"layers", c.num_layers},
      {"hidden_size", c.hidden_size},
      {"num_heads", c.num_heads},
      {"num_kv_heads", c.num_kv_heads},
      {"head_dim", c.head_dim()},
      {"ffn_size", c.ffn_size},
      {"vocab_size", c.vocab_size},
      {"max_positions", c.max_positions},
      {"rope",
       {{"theta", c.rope_theta},
        {"style", c.rope_style == model::RopeStyle::kNeox ? "neox" : "interleaved"}}},
      {"tie_embeddings", c.tie_embeddings},
      {"sliding_window", c.window},
      {"parameters", c.ParameterCount()},
      {"weight_bytes", total_bytes},
      {"weight_bytes_by_type", bytes_by_type},
      {"weight_types", types},
      {"bits_per_weight", bits_per_weight(total_bytes, total_elements)},
      {"kv_bytes_per_token", {{"f32", kv_elems_per_token * 4}, {"bf16", kv_elems_per_token * 2}}},
  };
  std::cout << j.dump(2) << "\n";
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
  CLI::App* gen_cmd = app.add_subcommand("generate", "stream a continuation of a prompt");
  gen.engine.builtin_positions = folio::model::WorkedExampleConfig().max_positions;
  AddEngineFlags(*gen_cmd, gen.engine, {.speculative = true});
  gen_cmd->add_option("--prompt", gen.prompt);
  gen_cmd->add_option("--max-tokens", gen.max_tokens);
  gen_cmd->add_option("--temperature", gen.temperature, "0 = greedy");
  gen_cmd->add_option("--top-k", gen.top_k, "0 = all");
  gen_cmd->add_option("--top-p", gen.top_p, "nucleus mass in (0, 1]");
  gen_cmd->add_option("--seed", gen.seed, "sampling seed");
  gen_cmd->add_option("--max-context", gen.max_context, "cache positions");
  gen_cmd->add_flag("--raw", gen.raw, "write bytes as generated (default escapes non-ASCII)");
  AddRequestParamFlags(*gen_cmd, gen.request);

  std::string save_dir;
  uint64_t save_seed = 20;
  CLI::App* save_cmd = app.add_subcommand("save-model", "write the built-in model to a folder");
  save_cmd->add_option("dir", save_dir)->required();
  save_cmd->add_option("--seed", save_seed);

  TokenizeFlags tokenize;
  CLI::App* tokenize_cmd = app.add_subcommand(
      "tokenize", "a model's tokenizer alone: text to ids (or ids to text), as JSON");
  tokenize_cmd->add_option("--model", tokenize.model, "model folder, .gguf file or tokenizer.json")
      ->required();
  tokenize_cmd->add_option("--text", tokenize.text, "the text (default: standard input)");
  tokenize_cmd->add_flag("--decode", tokenize.decode, "read comma-separated ids, print the text");
  tokenize_cmd->add_flag("--no-special", tokenize.no_special,
                         "encode without bos/eos; decode special tokens as text");
  AddTokenizerPreOption(*tokenize_cmd, tokenize.tokenizer_pre);

  LogitsFlags logits;
  CLI::App* logits_cmd =
      app.add_subcommand("logits", "prefill logits and a greedy continuation, as JSON");
  logits.engine.threads = 1;
  AddEngineFlags(*logits_cmd, logits.engine, {.tokenizer_pre = false});
  logits_cmd->add_option("--tokens", logits.tokens, "prompt ids, e.g. 1,2,3")->required();
  logits_cmd->add_option("--greedy", logits.greedy, "greedy tokens to generate after");
  logits_cmd->add_option("--max-context", logits.max_context, "cache positions");

  BatchFlags batch;
  CLI::App* batch_cmd =
      app.add_subcommand("batch", "a short continuous-batching run, streamed step by step");
  batch_cmd->add_option("--prompt", batch.prompts, "repeat for several requests");
  batch_cmd->add_option("--max-tokens", batch.max_tokens);
  batch_cmd->add_option("--page-size", batch.page_size);
  batch_cmd->add_option("--num-pages", batch.num_pages);
  batch_cmd->add_option("--max-num-batched-tokens", batch.max_num_batched_tokens);
  batch_cmd->add_option("--seed", batch.seed);

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

  std::string info_path;
  CLI::App* info_cmd =
      app.add_subcommand("info", "architecture, sizes, dtypes, KV bytes per token");
  info_cmd->add_option("model", info_path, "model folder or .gguf file")->required();

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
  if (*info_cmd) return RunInfo(info_path);
  if (*batch_cmd) return RunBatch(batch);
  if (*kv_cmds.exp) return RunKvExport(kv_flags);
  if (*kv_cmds.imp) return RunKvImport(kv_flags);
  if (*kv_cmds.inspect) return RunKvInspect(kv_flags);
  if (*layout_cmd) return RunLayout(layout);
  if (*gen_cmd) return RunGenerate(gen);
  if (*save_cmd) {
    auto m = folio::model::Model::FromSeed(folio::model::WorkedExampleConfig(), save_seed);
    if (!m) return Fail(kCommand, m.error());
    folio::Status s = folio::checkpoint::SaveModel(*m, save_dir);
    if (!s.ok()) return Fail(kCommand, s);
    std::cout << "saved model " << m->id() << " to " << save_dir << "\n";
    return 0;
  }
  return 0;
}
