// `folio logits`: the prefill logits of every prompt position and a greedy
// continuation, as JSON; the checks against independent implementations
// (tests/python) drive folio through it.
#ifndef FOLIO_CLI_LOGITS_COMMAND_H_
#define FOLIO_CLI_LOGITS_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "folio/serving/engine_args.h"

namespace folio::cli {

struct LogitsFlags {
  // --model (default: the built-in one) and its engine (cli/engine_flags.h);
  // one request, sized by SingleRequestEngine, one compute thread.
  serving::EngineArgs engine;
  std::string tokens;
  uint64_t greedy = 0;
  uint64_t max_context = 4096;
};

CLI::App* AddLogitsCommand(CLI::App& app, LogitsFlags& flags);
int RunLogits(const LogitsFlags& flags);

}  // namespace folio::cli

#endif  // FOLIO_CLI_LOGITS_COMMAND_H_
