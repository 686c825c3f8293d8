#include "cli/serve_command.h"

#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/engine_flags.h"
#include "folio/core/str_cat.h"
#include "folio/server/http_server.h"
#include "folio/server/request.h"
#include "folio/serving/chat_request.h"
#include "folio/serving/engine_args.h"

namespace folio::cli {
namespace {

constexpr std::string_view kCommand = "serve";

// What the start-up log says of tool calls: the format replies are read in.
std::string ToolCallsName(const serving::ChatParsers& p, const serving::ChatFormat& f) {
  if (std::optional<serving::ToolCallFormat> format = p.ToolFormatFor(f)) {
    return std::string(serving::ToolCallFormatName(*format));
  }
  if (p.HarmonyFor(f)) return "nothing (harmony replies; requests with tools are refused)";
  return "nothing (requests with tools are refused)";
}

}  // namespace

CLI::App* AddServeCommand(CLI::App& app, ServeFlags& f) {
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  f.engine.num_pages = 256;
  AddEngineFlags(
      *cmd, f.engine,
      {.num_pages = true, .scheduling = true, .builtin_context = true, .speculative = true});
  cmd->get_option("--max-num-batched-tokens")->each([&f](const std::string&) {
    f.budget_given = true;
  });
  cmd->add_option("--task", f.task,
                  "what to serve: auto (what the model can), generate (completions, chat), "
                  "embed (/v1/embeddings) or rerank (/v1/rerank, /v1/score)")
      ->check(CLI::IsMember({"auto", "generate", "embed", "rerank"}));
  cmd->add_option("--served-model-name", f.served_model_names,
                  "names clients may use; replies carry the first (default: builtin / the "
                  "model's file name)");
  cmd->add_option("--host", f.host, "address to bind (default loopback 127.0.0.1)");
  cmd->add_option("--port", f.port, "0 = any free port (printed)");
  AddChatTemplateOption(*cmd, f.chat_template);
  cmd->add_option("--tool-call-parser", f.tool_call_parser,
                  "how tool calls are read from chat replies: auto (the chat template's "
                  "format; generic when it shows no tools), hermes, llama3_json, mistral, "
                  "generic, harmony (gpt-oss: the whole reply read by channel), or none "
                  "(requests with tools are refused)")
      ->check(CLI::IsMember(
          {"auto", "none", "hermes", "llama3_json", "mistral", "generic", "harmony"}));
  cmd->add_option("--reasoning-parser", f.reasoning_parser,
                  "<think>...</think> in chat replies becomes reasoning_content: auto (when the "
                  "chat template mentions </think>), think (always; also deepseek_r1, qwen3), "
                  "or none")
      ->check(CLI::IsMember({"auto", "think", "deepseek_r1", "qwen3", "none"}));
  cmd->add_option("--max-queue", f.max_queue, "requests waiting to run; beyond: 429");
  cmd->add_option("--max-body-bytes", f.max_body_bytes, "larger request bodies: 413");
  cmd->add_option("--max-held-body-bytes", f.max_held_body_bytes,
                  "request bodies being read or waiting to be parsed, all connections; a body "
                  "past it: 503 before it is read");
  cmd->add_option("--max-connections", f.max_connections, "open connections; beyond: 503")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  cmd->add_option("--io-threads", f.io_threads,
                  "threads reading request bodies and writing replies (one more thread accepts "
                  "connections and answers /health and /metrics)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--read-timeout", f.read_timeout_s,
                  "seconds a client has to send a request's header, and then its body")
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--keep-alive-timeout", f.keep_alive_timeout_s,
                  "seconds an idle connection is kept between requests")
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--drain-timeout", f.drain_timeout_s,
                  "seconds in-flight requests get to finish on SIGINT/SIGTERM");
  cmd->add_option("--step-delay-us", f.step_delay_us,
                  "sleep after each engine step (tests, demos: a slower model)");
  cmd->add_option("--default-max-tokens", f.default_max_tokens,
                  "max_tokens of a chat request that gives none (0: the rest of the context)");
  cmd->add_option("--api-key", f.api_key,
                  "require 'Authorization: Bearer KEY' (default: $FOLIO_API_KEY; none if unset)");
  cmd->add_flag("--auth-health", f.auth_health, "require the key on /health too");
  cmd->add_flag("--insecure-no-auth", f.insecure_no_auth,
                "allow binding a non-loopback address without an API key");
  cmd->add_option("--allowed-origins", f.allowed_origins,
                  "browser Origins allowed to call the API ('*': any; default none)")
      ->delimiter(',');
  cmd->add_option("--allowed-hosts", f.allowed_hosts,
                  "Host header names accepted (default: loopback names when bound to loopback, "
                  "else any)")
      ->delimiter(',');
  return cmd;
}

int RunServe(const ServeFlags& flags) {
  ServeFlags f = flags;
  if (f.api_key.empty()) {
    if (const char* env = std::getenv("FOLIO_API_KEY"); env != nullptr) f.api_key = env;
  }
  const bool loopback = f.host == "127.0.0.1" || f.host == "localhost" || f.host == "::1";
  if (!loopback && f.api_key.empty() && !f.insecure_no_auth) {
    return Fail(kCommand,
                Status::InvalidArgument(
                    "--host " + f.host +
                    " is reachable beyond this machine: give --api-key (or FOLIO_API_KEY), or "
                    "--insecure-no-auth to serve it without authentication"));
  }
  if (Status s = f.engine.Validate(serving::ArgNames::Flag()); !s.ok()) return Fail(kCommand, s);
  Result<serving::ServedModel> loaded =
      serving::LoadServedModel(f.engine.model, f.engine.builtin_positions, f.engine.tokenizer_pre);
  if (!loaded) return Fail(kCommand, loaded.error());
  serving::EngineArgs args = f.engine;
  const model::ModelConfig& mc = loaded->model->config();
  if (mc.IsEncoder() && !f.budget_given && args.max_num_batched_tokens < mc.max_positions) {
    // An encoder computes an input in one step: by default a step takes
    // the longest input the model reads.
    args.max_num_batched_tokens = mc.max_positions;
    std::cerr << "folio serve: an encoder computes an input in one step: "
              << "--max-num-batched-tokens " << mc.max_positions << " (its context)\n";
  }
  Result<std::unique_ptr<serving::ServingEngine>> engine =
      serving::ServingEngine::Create(std::move(*loaded), args, serving::ArgNames::Flag());
  if (!engine) return Fail(kCommand, engine.error());
  const serving::ServedModel& served = (*engine)->served();
  // Checked here, at load: a template folio cannot render stops the start.
  Result<serving::ChatFormat> chat_format = served.MakeChatFormat(f.chat_template);
  if (!chat_format) {
    return Fail(kCommand,
                chat_format.error().WithContext(
                    f.chat_template
                        ? *f.chat_template
                        : "the model's chat template (--chat-template FILE renders with another)"));
  }
  Result<serving::ChatParsers> parsers =
      serving::MakeChatParsers(f.tool_call_parser, f.reasoning_parser);
  if (!parsers) return Fail(kCommand, parsers.error());
  server::ModelInfo info = server::MakeModelInfo(
      served, &*chat_format,
      !f.served_model_names.empty() ? f.served_model_names[0]
                                    : serving::DefaultServedName(f.engine.model, served.builtin));
  if (f.served_model_names.size() > 1) {
    info.aliases.assign(f.served_model_names.begin() + 1, f.served_model_names.end());
  }
  if (f.task == "generate") {
    if (!info.generate) {  // an encoder or a sequence classifier
      const model::ModelConfig& c = served.model->config();
      return Fail(
          kCommand,
          Status::InvalidArgument(StrCat(
              "--task generate: the model (", model::ArchitectureName(c.architecture), ") is ",
              c.IsEncoder() ? "an encoder" : "a sequence classifier", ": it generates nothing")));
    }
    info.embed = false;
    info.score = false;
  } else if (f.task == "embed") {
    info.generate = false;
    info.score = false;
  } else if (f.task == "rerank") {
    if (!info.score) {
      return Fail(kCommand, Status::InvalidArgument(
                                "--task rerank: the model has no relevance head (a cross-encoder "
                                "is a *ForSequenceClassification with one label)"));
    }
    info.generate = false;
    info.embed = false;
  }
  info.default_max_tokens = f.default_max_tokens;
  info.chat_parsers = *parsers;
  const engine::EngineConfig& ec = (*engine)->config();
  info.pool_positions = ec.num_pages * ec.page_size;

  server::ServerConfig sc;
  sc.host = f.host;
  sc.port = f.port;
  sc.max_queue = f.max_queue;
  sc.max_body_bytes = f.max_body_bytes;
  sc.max_held_body_bytes = f.max_held_body_bytes;
  sc.max_connections = f.max_connections;
  sc.io_threads = f.io_threads;
  sc.read_timeout = std::chrono::seconds(f.read_timeout_s);
  sc.keep_alive_timeout = std::chrono::seconds(f.keep_alive_timeout_s);
  sc.drain_timeout = std::chrono::seconds(f.drain_timeout_s);
  sc.step_delay = std::chrono::microseconds(f.step_delay_us);
  sc.api_key = f.api_key;
  sc.auth_health = f.auth_health;
  sc.allowed_origins = f.allowed_origins;
  sc.allowed_hosts = f.allowed_hosts;
  if (sc.allowed_hosts.empty() && loopback) sc.allowed_hosts = {"localhost", "127.0.0.1", "::1"};
  if (!loopback) {
    std::cerr << "folio serve: binding " << f.host << ", reachable beyond this machine"
              << (f.api_key.empty() ? ", WITHOUT authentication\n" : "\n");
  }
  std::cerr << "folio serve: model " << info.name << " (" << info.max_positions
            << " positions, vocabulary " << info.vocab_size << ", chat template "
            << serving::ChatFormatSourceName(chat_format->source()) << "), " << ec.num_pages
            << " pages of " << ec.page_size << " tokens\n";
  std::vector<std::string> served_apis;
  if (info.generate) served_apis.push_back("completions, chat");
  if (info.embed) {
    served_apis.push_back(
        StrCat("embeddings (pooling ", engine::PoolingName(info.default_pooling), " by default)"));
  }
  if (info.score) served_apis.push_back("rerank, score");
  std::cerr << "folio serve: serving ";
  for (size_t i = 0; i < served_apis.size(); ++i) {
    std::cerr << (i == 0 ? "" : "; ") << served_apis[i];
  }
  std::cerr << "\n";
  std::cerr << "folio serve: tool calls read as " << ToolCallsName(*parsers, *chat_format)
            << "; reasoning " << (parsers->SplitsReasoningFor(*chat_format) ? "split" : "not split")
            << "\n";
  if (Status s = server::Serve((*engine)->engine(), info, sc); !s.ok()) return Fail(kCommand, s);
  return 0;
}

}  // namespace folio::cli
