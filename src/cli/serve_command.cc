#include "cli/serve_command.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/served_model.h"
#include "folio/backend/backend.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"
#include "folio/model/model.h"
#include "folio/server/chat_format.h"
#include "folio/server/http_server.h"
#include "folio/tokenizer/byte_tokenizer.h"

namespace folio::cli {
namespace {

int Fail(const Status& s) {
  std::cerr << "folio serve: " << s.ToString() << "\n";
  return 1;
}

}  // namespace

CLI::App* AddServeCommand(CLI::App& app, ServeFlags& f) {
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  cmd->add_option("--model", f.model, "model folder, .gguf file, or 'builtin' (default)");
  cmd->add_option("--served-model-name", f.served_model_names,
                  "names clients may use; replies carry the first (default: builtin / the "
                  "model's file name)");
  cmd->add_option("--host", f.host, "address to bind (default loopback 127.0.0.1)");
  cmd->add_option("--port", f.port, "0 = any free port (printed)");
  cmd->add_option("--threads", f.threads, "compute threads, 0 = all cores");
  cmd->add_option("--page-size", f.page_size, "KV tokens per page");
  cmd->add_option("--num-pages", f.num_pages, "pages in the KV pool");
  cmd->add_option("--max-num-seqs", f.max_num_seqs, "requests running at once");
  cmd->add_option("--max-num-batched-tokens", f.max_num_batched_tokens, "tokens per step");
  cmd->add_option("--builtin-context", f.builtin_context, "positions of the built-in model");
  cmd->add_option(
      "--kv-dtype", f.kv_dtype,
      "f32, bf16, f16, i8 or f8e4m3 (i8 / f8e4m3: one scale per row of head_dim codes), or f64");
  AddTokenizerPreOption(*cmd, f.tokenizer_pre);
  AddChatTemplateOption(*cmd, f.chat_template);
  cmd->add_option("--backend", f.backend, "cpu (SIMD kernels) or reference (scalar)");
  AddMatMulActivationsOption(*cmd, f.matmul_activations);
  cmd->add_option("--speculative-tokens", f.speculative_tokens,
                  "most draft tokens per step for speculative decoding by prompt lookup (0: "
                  "off; requests may set num_draft_tokens); the output never changes")
      ->check(CLI::Range(uint64_t{0}, engine::kMaxDraftTokens));
  AddDraftModelOption(*cmd, f.draft_model);
  AddSpeculativeAcceptanceOption(*cmd, f.speculative_acceptance);
  cmd->add_option("--max-queue", f.max_queue, "requests waiting to run; beyond: 429");
  cmd->add_option("--max-body-bytes", f.max_body_bytes, "larger request bodies: 413");
  cmd->add_option("--max-connections", f.max_connections, "open connections; beyond: 503")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  cmd->add_option("--io-threads", f.io_threads, "threads serving the connections")
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
    return Fail(Status::InvalidArgument(
        "--host " + f.host +
        " is reachable beyond this machine: give --api-key (or FOLIO_API_KEY), or "
        "--insecure-no-auth to serve it without authentication"));
  }
  Result<ServedModel> served = LoadServedModel(f.model, f.builtin_context, f.tokenizer_pre);
  if (!served) return Fail(served.error());
  const model::Model* m = served->model.get();
  // Checked here, at load: a template folio cannot render stops the start.
  Result<server::ChatFormat> chat_format = served->MakeChatFormat(f.chat_template);
  if (!chat_format) {
    return Fail(chat_format.error().WithContext(
        f.chat_template ? *f.chat_template
                        : "the model's chat template (--chat-template FILE renders with another)"));
  }
  server::ModelInfo info = served->MakeModelInfo(
      &*chat_format, !f.served_model_names.empty() ? f.served_model_names[0]
                                                   : DefaultServedName(f.model, served->builtin));
  if (f.served_model_names.size() > 1) {
    info.aliases.assign(f.served_model_names.begin() + 1, f.served_model_names.end());
  }
  info.default_max_tokens = f.default_max_tokens;
  info.pool_positions = f.num_pages * f.page_size;

  Result<DType> kv_dtype = ParseDType(f.kv_dtype);
  if (!kv_dtype) return Fail(kv_dtype.error());
  Result<backend::BackendKind> backend = backend::ParseBackendKind(f.backend);
  if (!backend) return Fail(backend.error().WithContext("--backend"));
  Result<ops::MatMulActivations> activations = ops::ParseMatMulActivations(f.matmul_activations);
  if (!activations) return Fail(activations.error().WithContext("--matmul-activations"));
  engine::EngineConfig ec;
  ec.backend = *backend;
  ec.matmul_activations = *activations;
  ec.page_size = f.page_size;
  ec.num_pages = f.num_pages;
  ec.kv_dtype = *kv_dtype;
  ec.max_num_seqs = f.max_num_seqs;
  ec.max_num_batched_tokens = f.max_num_batched_tokens;
  ec.speculative.num_draft_tokens = f.speculative_tokens;
  std::optional<model::Model> draft;  // outlives the engine
  if (Status s = ApplySpeculativeFlags(f.speculative_acceptance, f.draft_model, f.builtin_context,
                                       ec, draft);
      !s.ok()) {
    return Fail(s);
  }
  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::Create(f.threads);
  if (!pool) return Fail(pool.error());
  Result<engine::Engine> eng = engine::Engine::Create(*m, ec, pool->get(), info.tokenizer);
  if (!eng) return Fail(eng.error());

  server::ServerConfig sc;
  sc.host = f.host;
  sc.port = f.port;
  sc.max_queue = f.max_queue;
  sc.max_body_bytes = f.max_body_bytes;
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
            << server::ChatFormatSourceName(chat_format->source()) << "), " << f.num_pages
            << " pages of " << f.page_size << " tokens\n";
  if (Status s = server::Serve(*eng, info, sc); !s.ok()) return Fail(s);
  return 0;
}

}  // namespace folio::cli
