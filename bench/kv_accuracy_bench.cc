#include "bench/kv_accuracy_bench.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/bench_model.h"
#include "bench/machine_info.h"
#include "bench/quick_defaults.h"
#include "bench/report.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"
#include "folio/engine/kv_cache_manager.h"
#include "folio/kv/paged_kv_cache.h"
#include "folio/ops/packed_matmul.h"

namespace folio::bench {
namespace {

constexpr uint64_t kPageSize = 16;

// What one row of the report varies: the KV cache's dtype and how the
// quantized weights multiply. The reference is f32 and f32 (exact).
struct Variant {
  DType kv = DType::kF32;
  ops::MatMulActivations activations = ops::MatMulActivations::kF32;
  auto operator<=>(const Variant&) const = default;
  bool exact() const { return *this == Variant{}; }
  std::string name() const {
    return std::string(DTypeName(kv)) + "/" + std::string(ops::MatMulActivationsName(activations));
  }
};

// One window's prompt logits, [tokens, vocab], from an engine set up as
// `variant` says.
Result<std::vector<float>> PromptLogits(const model::Model& m, std::span<const int32_t> tokens,
                                        Variant variant, ThreadPool& pool) {
  engine::EngineConfig ec;
  ec.page_size = kPageSize;
  ec.num_pages = engine::MaxPagesHeld(m.config(), kPageSize, tokens.size(), tokens.size()) + 1;
  ec.max_num_seqs = 1;
  ec.max_num_batched_tokens = tokens.size();
  ec.prefix_caching = false;
  ec.kv_dtype = variant.kv;
  ec.matmul_activations = variant.activations;
  FOLIO_ASSIGN_OR_RETURN(engine::Engine eng, engine::Engine::Create(m, ec, &pool));
  engine::RequestParams params;
  params.sampling = {0.0, 0, 1.0, 0.0};
  params.max_tokens = 1;
  params.prompt_logits = true;
  FOLIO_ASSIGN_OR_RETURN(engine::RequestId id,
                         eng.AddRequest({tokens.begin(), tokens.end()}, params));
  (void)id;
  std::vector<float> logits;
  while (eng.HasUnfinished()) {
    FOLIO_ASSIGN_OR_RETURN(std::vector<engine::StepOutput> step, eng.Step());
    for (const auto& o : step)
      logits.insert(logits.end(), o.prompt_logits.begin(), o.prompt_logits.end());
  }
  return logits;
}

// Greedy continuations of every prompt, batched in one engine.
Result<std::vector<std::vector<int32_t>>> Greedy(const model::Model& m,
                                                 const std::vector<std::vector<int32_t>>& prompts,
                                                 uint64_t max_tokens, Variant variant,
                                                 ThreadPool& pool) {
  engine::EngineConfig ec;
  ec.page_size = kPageSize;
  uint64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<uint64_t>(longest, p.size());
  ec.max_num_seqs = prompts.size();
  ec.max_num_batched_tokens = std::max<uint64_t>(longest, prompts.size());
  uint64_t pages = 0;
  for (const auto& p : prompts) {
    pages += engine::MaxPagesHeld(m.config(), kPageSize, p.size() + max_tokens,
                                  ec.max_num_batched_tokens);
  }
  ec.num_pages = pages + 1;
  ec.prefix_caching = false;
  ec.kv_dtype = variant.kv;
  ec.matmul_activations = variant.activations;
  FOLIO_ASSIGN_OR_RETURN(engine::Engine eng, engine::Engine::Create(m, ec, &pool));
  engine::RequestParams params;
  params.sampling = {0.0, 0, 1.0, 0.0};
  params.max_tokens = max_tokens;
  std::map<engine::RequestId, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    FOLIO_ASSIGN_OR_RETURN(engine::RequestId id, eng.AddRequest(prompts[i], params));
    index[id] = i;
  }
  std::vector<std::vector<int32_t>> out(prompts.size());
  while (eng.HasUnfinished()) {
    FOLIO_ASSIGN_OR_RETURN(std::vector<engine::StepOutput> step, eng.Step());
    for (const auto& o : step) {
      auto& dst = out[index.at(o.id)];
      dst.insert(dst.end(), o.new_tokens.begin(), o.new_tokens.end());
    }
  }
  return out;
}

// -log p(next token) for rows [0, n - 1) of a window's logits.
double SumNll(std::span<const float> logits, std::span<const int32_t> tokens, uint64_t vocab) {
  double nll = 0;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    const float* row = logits.data() + i * vocab;
    const double mx = *std::max_element(row, row + vocab);
    double sum = 0;
    for (uint64_t v = 0; v < vocab; ++v) sum += std::exp(double{row[v]} - mx);
    nll += mx + std::log(sum) - double{row[static_cast<size_t>(tokens[i + 1])]};
  }
  return nll;
}

// What the cache holds per K/V element, row scales included.
double BytesPerElement(const model::ModelConfig& c, DType dtype) {
  const kv::PagedKvCacheConfig kc{
      c.num_layers, c.num_kv_heads, c.head_dim(), kPageSize, 1, dtype, {}, 0};
  return static_cast<double>(kv::PagedKvCache::BytesPerPage(kc)) /
         static_cast<double>(2 * c.num_layers * c.num_kv_heads * kPageSize * c.head_dim());
}

struct VariantResult {
  double nll = 0;
  uint64_t scored = 0;
  double max_abs = 0, sum_abs = 0;
  uint64_t compared = 0, argmax_rows = 0, argmax_agree = 0;
  std::vector<std::vector<int32_t>> greedy;
};

}  // namespace

CLI::App* AddKvAccuracyBenchCommand(CLI::App& bench, KvAccuracyBenchOptions& o) {
  CLI::App* cmd = bench.add_subcommand(
      "kv-accuracy",
      "perplexity, logit error and greedy agreement of KV dtypes and matmul activations against "
      "f32 KV and f32 activations, as JSON");
  cmd->add_option("--model", o.model, "model folder or .gguf (default: the built-in model)");
  cmd->add_option("--corpus", o.corpus, "UTF-8 text to score (default bench/data/kv_corpus.txt)");
  cmd->add_option("--json-output,-o", o.json_output, "write the JSON here (default: stdout)");
  cmd->add_option("--kv-dtypes", o.kv_dtypes, "KV dtypes besides f32 (default all)")
      ->delimiter(',');
  cmd->add_option("--matmul-activations", o.matmul_activations,
                  "how quantized weights multiply, each with every KV dtype: f32 (default: the "
                  "exact mode, so the rows isolate the KV dtype), q8, or both (f32,q8)")
      ->delimiter(',');
  cmd->add_option("--window", o.window, "tokens per perplexity window (default 512)")
      ->check(CLI::Range(2, 1 << 16));
  cmd->add_option("--prompts", o.prompts, "greedy prompts (default 16)")->check(CLI::Range(1, 256));
  cmd->add_option("--prompt-len", o.prompt_len, "tokens per greedy prompt (default 64)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--max-tokens", o.max_tokens, "greedy tokens per prompt (default 256)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--threads", o.threads, "compute threads (default 2)")->check(CLI::Range(1, 256));
  cmd->add_flag("--quick", o.quick, "a short run: 128-token windows, 4 prompts of 32 tokens");
  SetQuickDefaults(cmd, &o.quick,
                   {{"--window", [&o] { o.window = 128; }},
                    {"--prompts", [&o] { o.prompts = 4; }},
                    {"--max-tokens", [&o] { o.max_tokens = 32; }}});
  return cmd;
}

int RunKvAccuracyBench(const KvAccuracyBenchOptions& o, const std::string& command) {
  auto fail = [](const Status& s) {
    std::cerr << "folio bench kv-accuracy: " << s.ToString() << "\n";
    return 1;
  };
  // The exact variant first: it is what every other one is compared with.
  std::vector<DType> dtypes = {DType::kF32};
  for (const std::string& name : o.kv_dtypes) {
    Result<DType> d = ParseDType(name);
    if (!d) return fail(d.error().WithContext("--kv-dtypes"));
    if (*d == DType::kF64) return fail(Status::InvalidArgument("--kv-dtypes: f64 is no KV dtype"));
    if (std::find(dtypes.begin(), dtypes.end(), *d) == dtypes.end()) dtypes.push_back(*d);
  }
  std::vector<Variant> variants = {Variant{}};
  for (const std::string& name : o.matmul_activations) {
    Result<ops::MatMulActivations> a = ops::ParseMatMulActivations(name);
    if (!a) return fail(a.error().WithContext("--matmul-activations"));
    for (const DType d : dtypes) {
      const Variant v{d, *a};
      if (std::find(variants.begin(), variants.end(), v) == variants.end()) variants.push_back(v);
    }
  }
  std::ifstream in(o.corpus, std::ios::binary);
  if (!in) return fail(Status::IoError("cannot read the corpus " + o.corpus));
  std::stringstream text;
  text << in.rdbuf();

  Result<BenchModel> loaded = BenchModel::Load(o.model, 2048);
  if (!loaded) return fail(loaded.error());
  const model::Model* m = &loaded->model();
  const tokenizer::Tokenizer* tok = &loaded->tokenizer();
  Result<std::vector<int32_t>> ids = tok->Encode(text.str(), /*add_special_tokens=*/false);
  if (!ids) return fail(ids.error().WithContext(o.corpus));
  const uint64_t vocab = m->config().vocab_size;
  const uint64_t window = std::min<uint64_t>(o.window, m->config().max_positions);
  if (ids->size() < std::max(window, o.prompt_len)) {
    return fail(Status::InvalidArgument("the corpus has " + std::to_string(ids->size()) +
                                        " tokens, fewer than one window or prompt"));
  }
  if (o.prompt_len + o.max_tokens > m->config().max_positions) {
    return fail(Status::InvalidArgument("--prompt-len plus --max-tokens exceeds the model's " +
                                        std::to_string(m->config().max_positions) + " positions"));
  }
  ThreadPool pool(o.threads);
  const MachineInfo machine = ReadMachineInfo();
  const std::array<double, 3> load_start = ReadLoadAverage();
  const CpuSnapshot run_start = TakeCpuSnapshot();

  std::map<Variant, VariantResult> results;
  const uint64_t num_windows = ids->size() / window;
  for (uint64_t w = 0; w < num_windows; ++w) {
    const std::span<const int32_t> tokens(ids->data() + w * window, window);
    std::vector<float> reference;
    for (const Variant v : variants) {
      VariantResult& r = results[v];
      Result<std::vector<float>> logits = PromptLogits(*m, tokens, v, pool);
      if (!logits) return fail(logits.error().WithContext(v.name()));
      if (logits->size() != window * vocab) {
        return fail(Status::FailedPrecondition("the engine returned " +
                                               std::to_string(logits->size() / vocab) +
                                               " logit rows, not " + std::to_string(window)));
      }
      r.nll += SumNll(*logits, tokens, vocab);
      r.scored += window - 1;
      if (v.exact()) {
        reference = std::move(*logits);
        continue;
      }
      for (size_t row = 0; row < window; ++row) {
        const float* a = reference.data() + row * vocab;
        const float* b = logits->data() + row * vocab;
        for (uint64_t t = 0; t < vocab; ++t) {
          const double diff = std::abs(double{a[t]} - double{b[t]});
          r.max_abs = std::max(r.max_abs, diff);
          r.sum_abs += diff;
        }
        r.compared += vocab;
        ++r.argmax_rows;
        if (std::max_element(a, a + vocab) - a == std::max_element(b, b + vocab) - b) {
          ++r.argmax_agree;
        }
      }
    }
  }
  // Greedy prompts spread evenly over the corpus.
  std::vector<std::vector<int32_t>> prompts;
  for (uint64_t i = 0; i < o.prompts; ++i) {
    const uint64_t at = i * (ids->size() - o.prompt_len) / o.prompts;
    prompts.emplace_back(ids->begin() + static_cast<std::ptrdiff_t>(at),
                         ids->begin() + static_cast<std::ptrdiff_t>(at + o.prompt_len));
  }
  for (const Variant v : variants) {
    VariantResult& r = results[v];
    Result<std::vector<std::vector<int32_t>>> out = Greedy(*m, prompts, o.max_tokens, v, pool);
    if (!out) return fail(out.error().WithContext(v.name()));
    r.greedy = std::move(*out);
  }

  const VariantResult& ref = results.at(Variant{});
  const double ref_ppl = std::exp(ref.nll / static_cast<double>(ref.scored));
  nlohmann::json rows = nlohmann::json::array();
  for (const Variant v : variants) {
    const VariantResult& r = results.at(v);
    const double ppl = std::exp(r.nll / static_cast<double>(r.scored));
    uint64_t common = 0, identical = 0, total = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const auto& a = ref.greedy[i];
      const auto& b = r.greedy[i];
      size_t k = 0;
      while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
      common += k;
      total += a.size();
      if (a == b) ++identical;
    }
    nlohmann::json row = {
        {"kv_dtype", DTypeName(v.kv)},
        {"matmul_activations", ops::MatMulActivationsName(v.activations)},
        {"bytes_per_element", BytesPerElement(m->config(), v.kv)},
        {"perplexity", ppl},
        {"perplexity_vs_f32", ppl / ref_ppl - 1.0},
        {"greedy_common_prefix", static_cast<double>(common) / static_cast<double>(total)},
        {"greedy_identical", static_cast<double>(identical) / static_cast<double>(prompts.size())}};
    if (!v.exact()) {
      row["logit_max_abs_error"] = r.max_abs;
      row["logit_mean_abs_error"] = r.sum_abs / static_cast<double>(r.compared);
      row["argmax_agreement"] =
          static_cast<double>(r.argmax_agree) / static_cast<double>(r.argmax_rows);
    }
    rows.push_back(row);
  }
  const nlohmann::json report = {
      {"benchmark", "kv-accuracy"},
      {"command", command},
      {"model", o.model.empty() ? "builtin" : o.model},
      {"corpus", o.corpus},
      {"corpus_tokens", ids->size()},
      {"windows", num_windows},
      {"window", window},
      {"scored_tokens", ref.scored},
      {"greedy",
       {{"prompts", prompts.size()}, {"prompt_len", o.prompt_len}, {"max_tokens", o.max_tokens}}},
      {"threads", o.threads},
      {"results", rows},
      {"machine", MachineJson(machine, load_start, LoadBetween(run_start, TakeCpuSnapshot()))},
  };
  if (Status s = EmitJson(report, o.json_output); !s.ok()) return fail(s);
  return 0;
}

}  // namespace folio::bench
