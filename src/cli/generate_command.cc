#include "cli/generate_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/engine_flags.h"
#include "folio/core/printable.h"
#include "folio/core/str_cat.h"
#include "folio/engine/engine.h"
#include "folio/grammar/structured_output.h"
#include "folio/model/model.h"
#include "folio/serving/engine_args.h"
#include "folio/tokenizer/byte_tokenizer.h"

namespace folio::cli {
namespace {

// Errors read "folio: ...", as they always have for this command.
constexpr std::string_view kCommand = "";

}  // namespace

CLI::App* AddGenerateCommand(CLI::App& app, GenerateFlags& f) {
  CLI::App* cmd = app.add_subcommand("generate", "stream a continuation of a prompt");
  f.engine.builtin_positions = model::WorkedExampleConfig().max_positions;
  AddEngineFlags(*cmd, f.engine, {.speculative = true});
  cmd->add_option("--prompt", f.prompt);
  cmd->add_option("--max-tokens", f.max_tokens);
  cmd->add_option("--temperature", f.temperature, "0 = greedy");
  cmd->add_option("--top-k", f.top_k, "0 = all");
  cmd->add_option("--top-p", f.top_p, "nucleus mass in (0, 1]");
  cmd->add_option("--seed", f.seed, "sampling seed");
  cmd->add_option("--max-context", f.max_context, "cache positions");
  cmd->add_flag("--raw", f.raw, "write bytes as generated (default escapes non-ASCII)");
  AddRequestParamFlags(*cmd, f.request);
  AddConstraintFlags(*cmd, f.constraint);
  return cmd;
}

namespace {

// The constraint the flags give, compiled; null when none is given.
Result<std::shared_ptr<const grammar::Grammar>> Compiled(const ConstraintFlags& f,
                                                         grammar::GrammarCache& cache) {
  FOLIO_ASSIGN_OR_RETURN(std::optional<Constraint> c, ConstraintFromFlags(f));
  if (!c) return std::shared_ptr<const grammar::Grammar>();
  Result<std::shared_ptr<const grammar::Grammar>> g = cache.Get(c->output);
  if (!g) return g.error().WithContext(c->flag);
  return g;
}

}  // namespace

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
  Result<std::shared_ptr<const grammar::Grammar>> constraint =
      Compiled(f.constraint, *served->grammars);
  if (!constraint) return Fail(kCommand, constraint.error());
  const uint64_t capacity =
      std::min<uint64_t>(served->model->config().max_positions, f.max_context);
  if (prompt.size() > capacity) {
    return Fail(kCommand,
                Status::OutOfRange("prompt of " + std::to_string(prompt.size()) +
                                   " tokens exceeds the context of " + std::to_string(capacity)));
  }
  // The serving path: one request on the engine. Generation stops at the
  // context's end (the last token selected is never fed).
  SizeForOneRequest(served->model->config(), capacity, prompt.size(), args);
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
  params.grammar = std::move(*constraint);
  Result<engine::RequestId> id = eng->AddRequest(prompt, params);
  if (!id) return Fail(kCommand, id.error());

  std::cout << (f.raw || text ? f.prompt : Printable(f.prompt)) << std::flush;
  const auto start = std::chrono::steady_clock::now();
  uint64_t generated = 0;
  engine::FinishReason finish = engine::FinishReason::kNone;
  int32_t last = -1;
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
      if (!o.new_tokens.empty()) last = o.new_tokens.back();
      if (o.finish != engine::FinishReason::kNone) finish = o.finish;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "\n";
  const std::vector<int32_t> stops = engine::StopTokenIds(params);
  const bool end_token = finish == engine::FinishReason::kStop &&
                         std::find(stops.begin(), stops.end(), last) != stops.end();
  const char* stop = end_token                               ? "end_token"
                     : finish == engine::FinishReason::kStop ? "grammar_complete"
                     : finish == engine::FinishReason::kAbort
                         ? (params.grammar ? "grammar_dead_end" : "every_token_banned")
                     : params.max_tokens < f.max_tokens ? "capacity"
                                                        : "max_tokens";
  if (end_token) --generated;  // the end token is not output
  std::cerr << "[" << prompt.size() << " prompt + " << generated << " generated tokens in "
            << seconds << " s, stop: " << stop << "]\n";
  return 0;
}

}  // namespace folio::cli
