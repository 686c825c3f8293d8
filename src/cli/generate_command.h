// `folio generate`: streams a continuation of a prompt from the built-in or
// a saved model, as one request on the engine (the path serving uses).
#ifndef FOLIO_CLI_GENERATE_COMMAND_H_
#define FOLIO_CLI_GENERATE_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/constraint_flags.h"
#include "folio/engine/request.h"
#include "folio/serving/engine_args.h"

namespace folio::cli {

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
  // Structured output (at most one): --json-schema, --regex, --choice,
  // --grammar.
  ConstraintFlags constraint;
};

CLI::App* AddGenerateCommand(CLI::App& app, GenerateFlags& flags);
int RunGenerate(const GenerateFlags& flags);

}  // namespace folio::cli

#endif  // FOLIO_CLI_GENERATE_COMMAND_H_
