// `folio chat`: an interactive chat in the terminal with a model, rendered
// with its own chat template (or --chat-template FILE, or ChatML / plain
// when it ships none), each reply streamed as it is generated. Each turn is
// prepared and read as `folio serve` prepares and reads a chat request
// (serving/chat_request.h): with --tools, the model sees the tools, its
// calls are shown, and the user types each tool's result.
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
  // --tools FILE: a JSON array of OpenAI function tools; --tool-choice
  // auto (default), none, required or a function's name, for the first
  // reply to each user line (replies to tool results use auto);
  // --tool-call-parser as folio serve's.
  std::string tools_file;
  std::string tool_choice = "auto";
  std::string tool_call_parser = "auto";
};

CLI::App* AddChatCommand(CLI::App& app, ChatFlags& flags);

// Model replies after tool results, per user line, before the chat asks
// for the next line (a model that keeps calling tools is stopped there).
inline constexpr uint64_t kMaxToolRounds = 8;

// Reads user turns from standard input, one per line, until end of input
// (Ctrl-D); "/reset" starts over (keeping --system), "/exit" leaves.
// Replies stream to standard output; prompts, notes and reasoning go to
// standard error, so a piped transcript holds only the replies. A reply's
// tool calls are printed as "[call NAME ARGUMENTS]" lines; then one line of
// input per call is that tool's result, and the model replies again (at
// most kMaxToolRounds times per user line).
int RunChat(const ChatFlags& flags);

}  // namespace folio::cli

#endif  // FOLIO_CLI_CHAT_COMMAND_H_
