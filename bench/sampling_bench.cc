#include "bench/sampling_bench.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench/bench_model.h"
#include "bench/machine_info.h"
#include "bench/report.h"
#include "bench/timing.h"
#include "folio/core/splitmix64.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"
#include "folio/engine/output_processor.h"

namespace folio::bench {
namespace {

// Every logits processor on, at values people send; with `filters`, the
// candidate filters too.
engine::RequestParams WithProcessors(double temperature, bool filters, uint64_t vocab,
                                     uint64_t generated) {
  SplitMix64 rng(vocab);
  engine::RequestParams p;
  p.sampling.temperature = temperature;
  if (filters) {
    p.sampling.min_p = 0.02;
    p.sampling.typical_p = 0.95;
    p.sampling.top_n_sigma = 3.0;
    p.sampling.xtc_probability = 0.5;
    p.sampling.xtc_threshold = 0.1;
  }
  sampling::ProcessorParams& q = p.processors;
  q.repetition_penalty = 1.1;
  q.presence_penalty = 0.3;
  q.frequency_penalty = 0.2;
  q.penalty_last_n = -1;
  for (int i = 0; i < 50; ++i) q.logit_bias[static_cast<int32_t>(rng.NextU64() % vocab)] = 1.5;
  q.min_tokens = static_cast<int64_t>(generated + 1000);  // the end ids stay banned
  q.dry.multiplier = 0.8;
  p.bad_words = {"however", "delve", "tapestry"};
  p.max_tokens = uint64_t{1} << 40;
  return p;
}

struct Rows {
  std::vector<std::vector<float>> logits;    // [batch][vocab]
  std::vector<std::vector<int32_t>> tokens;  // [batch][history]
};

Rows MakeRows(uint64_t batch, uint64_t vocab, const SamplingBenchOptions& o, SplitMix64& rng) {
  Rows r;
  for (uint64_t b = 0; b < batch; ++b) {
    std::vector<float> row(vocab);
    // Roughly normal logits (a sum of four uniforms), spread as a model's.
    for (float& x : row) {
      double s = 0;
      for (int k = 0; k < 4; ++k) s += rng.NextUnit();
      x = static_cast<float>((s - 2.0) * 5.0);
    }
    r.logits.push_back(std::move(row));
    std::vector<int32_t> t;
    for (uint64_t i = 0; i < o.prompt_tokens; ++i) {
      t.push_back(static_cast<int32_t>(rng.NextU64() % vocab));
    }
    for (uint64_t i = 0; i < o.generated_tokens; ++i) {
      t.push_back(static_cast<int32_t>(rng.NextU64() % std::min<uint64_t>(200, vocab)));
    }
    r.tokens.push_back(std::move(t));
  }
  return r;
}

// Median microseconds of one decode step of `batch` greedy requests.
Result<double> DecodeStepUs(const model::Model& m, uint64_t batch, const SamplingBenchOptions& o,
                            ThreadPool& pool) {
  engine::EngineConfig ec;
  ec.page_size = 16;
  ec.num_pages = batch * ((o.decode_prompt + o.decode_steps + 2) / 16 + 2);
  ec.max_num_seqs = batch;
  ec.max_num_batched_tokens = batch * o.decode_prompt;
  ec.prefix_caching = false;
  FOLIO_ASSIGN_OR_RETURN(engine::Engine eng, engine::Engine::Create(m, ec, &pool));
  SplitMix64 rng(7);
  const uint64_t vocab = m.config().vocab_size;
  engine::RequestParams params;
  params.max_tokens = o.decode_steps + 1;
  for (uint64_t b = 0; b < batch; ++b) {
    std::vector<int32_t> prompt;
    for (uint64_t i = 0; i < o.decode_prompt; ++i) {
      prompt.push_back(static_cast<int32_t>(rng.NextU64() % vocab));
    }
    FOLIO_RETURN_IF_ERROR(eng.AddRequest(prompt, params).status());
  }
  FOLIO_RETURN_IF_ERROR(eng.Step().status());  // the prefill
  Timing t;
  while (eng.HasUnfinished()) {
    const double start = NowUs();
    FOLIO_RETURN_IF_ERROR(eng.Step().status());
    t.samples_us.push_back(NowUs() - start);
  }
  Summarize(t);
  return t.median_us;
}

nlohmann::json TimingJson(const Timing& t, double per) {
  return {{"median", t.median_us / per},
          {"p10", t.p10_us / per},
          {"p90", t.p90_us / per},
          {"samples", t.repeats}};
}

}  // namespace

CLI::App* AddSamplingBenchCommand(CLI::App& bench, SamplingBenchOptions& o) {
  CLI::App* cmd = bench.add_subcommand(
      "sampling",
      "per-token cost of the logits processors and sampling filters vs plain sampling, and a "
      "decode step, as JSON");
  cmd->add_option("--model", o.model, "model folder or .gguf (default: the built-in model)");
  cmd->add_option("--json-output,-o", o.json_output, "write the JSON here (default: stdout)");
  cmd->add_option("--batches", o.batches, "batch sizes (default 1,16)")
      ->delimiter(',')
      ->check(CLI::Range(1, 256));
  cmd->add_option("--prompt-tokens", o.prompt_tokens, "prompt tokens in each row's history")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--generated-tokens", o.generated_tokens,
                  "generated tokens in each row's history")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--decode-prompt", o.decode_prompt, "prompt per request for the decode step")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--decode-steps", o.decode_steps, "decode steps timed")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--threads", o.threads, "compute threads (default 2)")->check(CLI::Range(1, 256));
  cmd->add_option("--repeats", o.repeats, "timed samples")->check(CLI::Range(1, 1000));
  return cmd;
}

int RunSamplingBench(const SamplingBenchOptions& o, const std::string& command) {
  auto fail = [](const Status& s) {
    std::cerr << "folio bench sampling: " << s.ToString() << "\n";
    return 1;
  };
  Result<BenchModel> loaded = BenchModel::Load(o.model, 4096);
  if (!loaded) return fail(loaded.error());
  const model::Model& m = loaded->model();
  const uint64_t vocab = m.config().vocab_size;
  ThreadPool pool(o.threads);
  nlohmann::json rows = nlohmann::json::array();
  for (const uint64_t batch : o.batches) {
    SplitMix64 rng(batch);
    const Rows r = MakeRows(batch, vocab, o, rng);
    // The configurations, each on its own output processor (one request
    // state per row), timed in interleaved rounds.
    engine::RequestParams plain_params;
    plain_params.sampling.temperature = 1.0;
    plain_params.max_tokens = uint64_t{1} << 40;
    engine::RequestParams greedy_params = plain_params;
    greedy_params.sampling.temperature = 0.0;
    const std::vector<engine::RequestParams> configs = {
        plain_params, WithProcessors(1.0, false, vocab, o.generated_tokens),
        WithProcessors(1.0, true, vocab, o.generated_tokens), greedy_params,
        WithProcessors(0.0, false, vocab, o.generated_tokens)};
    std::vector<std::unique_ptr<engine::OutputProcessor>> processors;
    // Per configuration, one state per row of the batch.
    std::vector<std::vector<engine::OutputProcessor::State>> states(configs.size());
    for (const engine::RequestParams& params : configs) {
      processors.push_back(std::make_unique<engine::OutputProcessor>(&loaded->tokenizer(), vocab));
      for (uint64_t b = 0; b < batch; ++b) {
        Result<engine::OutputProcessor::State> state = processors.back()->NewState(params);
        if (!state) return fail(state.error());
        states[processors.size() - 1].push_back(std::move(*state));
      }
    }
    Status error;
    std::vector<std::function<void()>> steps;
    for (size_t c = 0; c < processors.size(); ++c) {
      steps.push_back([&, c] {
        for (uint64_t b = 0; b < batch; ++b) {
          Result<engine::StepOutput> step = processors[c]->Process(
              states[c][b], r.logits[b], o.generated_tokens + 1, r.tokens[b]);
          if (!step.ok() && error.ok()) error = step.error();
        }
      });
    }
    TimingOptions topt;
    topt.repeats = o.repeats;
    const std::vector<Timing> t = TimeInterleaved(steps, topt);
    if (!error.ok()) return fail(error);
    Result<double> decode = DecodeStepUs(m, batch, o, pool);
    if (!decode) return fail(decode.error());
    const auto b = static_cast<double>(batch);
    const auto extra = [&](size_t with, size_t without) {
      const double per_token = (t[with].median_us - t[without].median_us) / b;
      return nlohmann::json{{"us_per_token", per_token},
                            {"fraction_of_decode_step", per_token * b / *decode}};
    };
    rows.push_back({{"batch", batch},
                    {"decode_step_us", *decode},
                    {"us_per_token",
                     {{"sampled_plain", TimingJson(t[0], b)},
                      {"sampled_processors", TimingJson(t[1], b)},
                      {"sampled_processors_and_filters", TimingJson(t[2], b)},
                      {"greedy_plain", TimingJson(t[3], b)},
                      {"greedy_processors", TimingJson(t[4], b)}}},
                    {"processors_extra_sampled", extra(1, 0)},
                    {"processors_extra_greedy", extra(4, 3)},
                    {"processors_and_filters_extra_sampled", extra(2, 0)},
                    {"sampled_plain_fraction_of_decode_step", t[0].median_us / *decode}});
  }
  const MachineInfo machine = ReadMachineInfo();
  nlohmann::json report = {
      {"benchmark", "sampling"},
      {"command", command},
      {"model", o.model.empty() ? "builtin" : o.model},
      {"vocab_size", vocab},
      {"history", {{"prompt_tokens", o.prompt_tokens}, {"generated_tokens", o.generated_tokens}}},
      {"sampled_plain", "temperature 1, every token a candidate (the server's default)"},
      {"greedy_plain", "temperature 0"},
      {"processors",
       "repetition_penalty 1.1, presence 0.3, frequency 0.2 (over the whole history), 50 "
       "logit_bias entries, 3 bad_words, min_tokens banning the end ids, DRY 0.8 (llama.cpp's "
       "breakers)"},
      {"filters", "min_p 0.02, typical_p 0.95, top_n_sigma 3, XTC 0.5 / 0.1"},
      {"decode",
       {{"prompt_tokens", o.decode_prompt}, {"steps", o.decode_steps}, {"threads", o.threads}}},
      {"rows", rows},
      {"machine", {{"cpu_model", machine.cpu_model}, {"cores", machine.cores}}},
  };
  if (Status s = EmitJson(report, o.json_output); !s.ok()) return fail(s);
  return 0;
}

}  // namespace folio::bench
