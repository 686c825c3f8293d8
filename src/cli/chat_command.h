// `folio chat`: an interactive chat in the terminal with a model, rendered
// with its own chat template (or --chat-template FILE, or ChatML / plain
// when it ships none), each reply streamed as it is generated.
#ifndef FOLIO_CLI_CHAT_COMMAND_H_
#define FOLIO_CLI_CHAT_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "folio/serving/engine_args.h"

namespace folio::cli {

struct ChatFlags {
  // --model and its engine (cli/engine_flags.h); AddChatCommand sets chat's
  // defaults: one sequence, prefix caching on.
  serving::EngineArgs engine;
  std::optional<std::string> chat_template;
  // The declared request parameters (--min-p, --stop-token-ids,
  // --ignore-eos, ...), for every reply.
  engine::RequestParams request;
  std::optional<std::string> system;  // a system message first
  uint64_t max_tokens = 512;          // per reply
  double temperature = 0.0;
  uint64_t top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
  uint64_t max_context = 4096;
};

CLI::App* AddChatCommand(CLI::App& app, ChatFlags& flags);

// Reads user turns from standard input, one per line, until end of input
// (Ctrl-D); "/reset" starts over (keeping --system), "/exit" leaves.
// Replies stream to standard output; prompts and notes go to standard
// error, so a piped transcript holds only the replies.
int RunChat(const ChatFlags& flags);

}  // namespace folio::cli

#endif  // FOLIO_CLI_CHAT_COMMAND_H_
