// `folio serve`: loads a model (or builds the built-in one) and runs the
// OpenAI-compatible server (folio/server/http_server.h) until a signal.
#ifndef FOLIO_CLI_SERVE_COMMAND_H_
#define FOLIO_CLI_SERVE_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "folio/serving/engine_args.h"

namespace folio::cli {

struct ServeFlags {
  // The model and its engine: --model, the KV pool, scheduling, compute and
  // speculative decoding (cli/engine_flags.h). AddServeCommand sets serve's
  // defaults: 256 pages.
  serving::EngineArgs engine;
  std::vector<std::string> served_model_names;  // first: replies' name; default: file name
  // What the server answers: auto (what the model can: an encoder embeds,
  // a cross-encoder also scores pairs, a decoder generates and embeds),
  // generate, embed or rerank.
  std::string task = "auto";
  // Whether --max-num-batched-tokens was given (an encoder's default is
  // its context: it computes an input in one step).
  bool budget_given = false;
  std::optional<std::string> chat_template;  // a template file instead of the model's
  // How chat replies are read (serving/chat_request.h, ChatParsers):
  // "auto", "none" or hermes / llama3_json / mistral; "auto", "think" or
  // "none".
  std::string tool_call_parser = "auto";
  std::string reasoning_parser = "auto";
  std::string host = "127.0.0.1";
  int port = 8000;
  uint64_t max_queue = 32;
  uint64_t max_body_bytes = 1 << 20;
  uint64_t max_held_body_bytes = 128 << 20;
  uint64_t max_connections = 2048;
  uint64_t io_threads = 2;
  uint64_t read_timeout_s = 10;
  uint64_t keep_alive_timeout_s = 5;
  uint64_t drain_timeout_s = 30;
  uint64_t step_delay_us = 0;
  uint64_t default_max_tokens = 4096;  // chat requests without max_tokens; 0 = no cap
  std::string api_key;                 // also FOLIO_API_KEY; empty = none
  bool auth_health = false;
  bool insecure_no_auth = false;  // allow a non-loopback host without a key
  std::vector<std::string> allowed_origins;
  std::vector<std::string> allowed_hosts;
};

CLI::App* AddServeCommand(CLI::App& app, ServeFlags& flags);
int RunServe(const ServeFlags& flags);

}  // namespace folio::cli

#endif  // FOLIO_CLI_SERVE_COMMAND_H_
