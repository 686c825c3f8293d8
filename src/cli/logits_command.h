// `folio logits`: the prefill logits of every prompt position (or each
// prompt token's log-probability) and a greedy continuation, as JSON; the checks against
// independent implementations (tests/python) drive folio through it.
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
  // Print each prompt token's log-probability given the tokens before it
  // (the first has none) instead of every logit: what perplexity needs,
  // without a large vocabulary's megabytes of JSON per row.
  bool token_logprobs = false;
  // Print only the last prompt position's logits (the next token's
  // distribution), as the one row of "logits": an oracle's step needs no
  // more, and the whole prompt's rows are megabytes of JSON.
  bool last_logits = false;
  // Prefill the prompt in steps of this many tokens (chunked prefill); 0 =
  // the whole prompt in one step.
  uint64_t prefill_chunk = 0;
};

CLI::App* AddLogitsCommand(CLI::App& app, LogitsFlags& flags);
int RunLogits(const LogitsFlags& flags);

}  // namespace folio::cli

#endif  // FOLIO_CLI_LOGITS_COMMAND_H_
