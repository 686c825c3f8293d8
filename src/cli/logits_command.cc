#include "cli/logits_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/engine_flags.h"
#include "cli/flag_lists.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"
#include "folio/serving/engine_args.h"

namespace folio::cli {
namespace {

// Errors read "folio: ...", as they always have for this command.
constexpr std::string_view kCommand = "";

}  // namespace

CLI::App* AddLogitsCommand(CLI::App& app, LogitsFlags& f) {
  CLI::App* cmd = app.add_subcommand("logits", "prefill logits and a greedy continuation, as JSON");
  f.engine.threads = 1;
  AddEngineFlags(*cmd, f.engine, {.tokenizer_pre = false});
  cmd->add_option("--tokens", f.tokens, "prompt ids, e.g. 1,2,3")->required();
  cmd->add_option("--greedy", f.greedy, "greedy tokens to generate after");
  cmd->add_option("--max-context", f.max_context, "cache positions");
  cmd->add_option("--prefill-chunk", f.prefill_chunk,
                  "prefill the prompt this many tokens per step (0 = all at once)");
  CLI::Option* logprobs = cmd->add_flag(
      "--token-logprobs", f.token_logprobs,
      "print each prompt token's log-probability (and their sum) instead of the logits");
  cmd->add_flag("--last-logits", f.last_logits,
                "print only the last prompt position's logits (the next token's distribution)")
      ->excludes(logprobs);
  return cmd;
}

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
  SizeForOneRequest(m->config(), capacity, tokens.size(), args);
  if (f.prefill_chunk != 0) {
    args.max_num_batched_tokens = std::max<uint64_t>(f.prefill_chunk, 1 + args.speculative_tokens);
  }
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
  std::vector<std::vector<float>> rows;
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
  if (f.last_logits && !rows.empty()) rows.erase(rows.begin(), rows.end() - 1);
  if (!f.token_logprobs) {
    std::cout << nlohmann::json{{"logits", rows}, {"greedy", greedy}}.dump() << "\n";
    return 0;
  }
  // log softmax(row i)[token i + 1], in double.
  std::vector<double> logprobs;
  double sum = 0;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    const std::vector<float>& row = rows[i];
    const double top = *std::max_element(row.begin(), row.end());
    double z = 0;
    for (float l : row) z += std::exp(static_cast<double>(l) - top);
    const double lp =
        static_cast<double>(row[static_cast<size_t>(tokens[i + 1])]) - top - std::log(z);
    logprobs.push_back(lp);
    sum += lp;
  }
  std::cout << nlohmann::json{{"token_logprobs", logprobs}, {"sum", sum}, {"greedy", greedy}}.dump()
            << "\n";
  return 0;
}

}  // namespace folio::cli
