#include "folio/server/http_server.h"

#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "folio/server/engine_loop.h"
#include "folio/server/metrics.h"
#include "server/response.h"

namespace folio::server {
namespace {

using nlohmann::json;

// SIGINT/SIGTERM write one byte here; the watcher thread reads it. A pipe
// because write() is async-signal-safe and a condition variable is not.
int g_signal_pipe[2] = {-1, -1};

void OnSignal(int) {
  const char byte = 's';
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &byte, 1);
}

// True when a byte arrived within timeout_ms.
bool WaitSignal(int timeout_ms) {
  pollfd p{g_signal_pipe[0], POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return false;
  char byte;
  return read(g_signal_pipe[0], &byte, 1) == 1;
}

void SetJson(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

void SetError(httplib::Response& res, const ApiError& e) { SetJson(res, e.http_status, e.Body()); }

ApiError ServerError(int status, std::string type, std::string message) {
  ApiError e;
  e.http_status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  return e;
}

// An engine refusal at admission, as the client should see it.
ApiError FromEngineStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kResourceExhausted:
      return InvalidField("max_tokens", "the request could never fit the KV pool: " + s.message());
    case StatusCode::kOutOfRange:
      return InvalidField("max_tokens", s.message());
    case StatusCode::kFailedPrecondition:
      return ServerError(503, "server_error", s.message());
    case StatusCode::kInvalidArgument:
      return InvalidField("", s.message());
    default:
      return ServerError(500, "server_error", s.ToString());
  }
}

std::string_view StatusText(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 411:
      return "Length Required";
    case 415:
      return "Unsupported Media Type";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 416:
      return "Range Not Satisfiable";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Error";
  }
}

std::string Sse(const std::string& data) { return "data: " + data + "\n\n"; }

// a == b without an early exit, so the time taken does not say how much of
// a guessed key was right.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (b.empty() ? 0 : b[i % b.size()]));
  }
  return diff == 0;
}

// The host name of a Host header value: "name", "name:port", "[v6]" or
// "[v6]:port" -> "name" / "v6".
std::string_view HostName(std::string_view host) {
  if (host.starts_with('[')) {
    const size_t end = host.find(']');
    return end == std::string_view::npos ? host : host.substr(1, end - 1);
  }
  const size_t colon = host.find(':');
  return colon == std::string_view::npos ? host : host.substr(0, colon);
}

bool Contains(const std::vector<std::string>& list, std::string_view value) {
  for (const std::string& s : list) {
    if (s == value) return true;
  }
  return false;
}

// A seed for a request that gave none: different for every request, so
// identical requests at temperature > 0 differ, as with OpenAI's API.
uint64_t DrawSeed() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  return rng();
}

class Handlers {
 public:
  Handlers(const ModelInfo& model, EngineLoop& loop, Metrics& metrics)
      : model_(model), loop_(loop), metrics_(metrics) {}

  // Requests whose response is not yet handed to httplib in full: a
  // handler running, or a stream not yet ended.
  uint64_t active() const { return active_.load(); }

  void Generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
    struct Guard {  // a stream's release callback does the decrement
      std::atomic<uint64_t>& active;
      bool streaming = false;
      ~Guard() {
        if (!streaming) --active;
      }
    };
    ++active_;
    Guard guard{active_};
    GenerateImpl(endpoint, req, res, guard.streaming);
  }

  void GenerateImpl(Endpoint endpoint, const httplib::Request& req, httplib::Response& res,
                    bool& streaming) {
    ParseResult parsed = ParseRequest(endpoint, req.body, model_);
    if (const ApiError* e = std::get_if<ApiError>(&parsed)) return Reply(res, *e);
    ParsedRequest& r = std::get<ParsedRequest>(parsed);
    NoteIgnored(r.ignored_fields);
    if (!r.seed_given) r.params.seed = DrawSeed();
    res.set_header("X-Folio-Seed", std::to_string(r.params.seed));
    const bool include_usage = r.include_usage;
    ResponseContext ctx;
    ctx.endpoint = endpoint;
    ctx.id = (endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++);
    ctx.created = static_cast<int64_t>(std::time(nullptr));
    ctx.model = model_.name;
    ctx.logprobs = r.logprobs;
    ctx.tokenizer = model_.tokenizer;

    Result<std::shared_ptr<Channel>> channel =
        loop_.Submit(std::move(r.prompt), std::move(r.params));
    if (!channel) {
      const bool full = channel.error().code() == StatusCode::kResourceExhausted;
      ApiError e = ServerError(full ? 429 : 503, full ? "rate_limit_error" : "server_error",
                               channel.error().message());
      res.set_header("Retry-After", "1");
      return Reply(res, e);
    }
    std::shared_ptr<Channel> ch = *channel;
    std::vector<Event> events;
    while (events.empty()) ch->Wait(events, std::chrono::seconds(1));
    if (events[0].kind == Event::Kind::kError) {
      return Reply(res, FromEngineStatus(events[0].error));
    }
    const uint64_t prompt_tokens = events[0].prompt_tokens;
    events.erase(events.begin());
    if (!r.stream) return Whole(res, ch, std::move(ctx), prompt_tokens, std::move(events));
    streaming = true;
    Stream(res, ch, std::move(ctx), prompt_tokens, include_usage, std::move(events));
  }

  json ModelJson(const std::string& id) const {
    return {{"id", id},
            {"object", "model"},
            {"created", 0},
            {"owned_by", "folio"},
            {"max_model_len", model_.max_positions},
            {"chat_template", model_.chat_format
                                  ? std::string(ChatFormatSourceName(model_.chat_format->source()))
                                  : std::string("none")}};
  }

  void Models(httplib::Response& res) {
    json data = json::array({ModelJson(model_.name)});
    for (const std::string& alias : model_.aliases) data.push_back(ModelJson(alias));
    SetJson(res, 200, json{{"object", "list"}, {"data", data}}.dump());
  }

  // GET /v1/models/{id}.
  void Model(const std::string& id, httplib::Response& res) {
    if (!model_.Serves(id)) {
      ApiError e = InvalidField("model", "the model '" + id + "' does not exist");
      e.http_status = 404;
      e.code = "model_not_found";
      return Reply(res, e);
    }
    SetJson(res, 200, ModelJson(id).dump());
  }

  void Tokenize(const httplib::Request& req, httplib::Response& res) {
    auto parsed = ParseTokenize(req.body, model_);
    if (const ApiError* e = std::get_if<ApiError>(&parsed)) return Reply(res, *e);
    const auto& ids = std::get<std::vector<int32_t>>(parsed);
    metrics_.CountResponse(200);
    SetJson(res, 200,
            json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", model_.max_positions}}
                .dump());
  }

  void Detokenize(const httplib::Request& req, httplib::Response& res) {
    auto parsed = ParseDetokenize(req.body, model_);
    if (const ApiError* e = std::get_if<ApiError>(&parsed)) return Reply(res, *e);
    metrics_.CountResponse(200);
    SetJson(res, 200,
            json{{"prompt", std::get<std::string>(parsed)}}.dump(-1, ' ', false,
                                                                 json::error_handler_t::replace));
  }

  void Reply(httplib::Response& res, const ApiError& e) {
    metrics_.CountResponse(e.http_status);
    SetError(res, e);
  }

 private:
  // Non-streaming: waits for the finish, answers once.
  void Whole(httplib::Response& res, const std::shared_ptr<Channel>& ch, ResponseContext ctx,
             uint64_t prompt_tokens, std::vector<Event> events) {
    ResponseBuilder builder(std::move(ctx));
    for (;;) {
      for (const Event& e : events) {
        if (e.kind == Event::Kind::kError) {
          return Reply(res, ServerError(500, "server_error", e.error.ToString()));
        }
        builder.Add(e);
        if (e.finish != engine::FinishReason::kNone) {
          metrics_.CountResponse(200);
          return SetJson(res, 200, builder.Body(prompt_tokens));
        }
      }
      events.clear();
      while (events.empty()) ch->Wait(events, std::chrono::seconds(1));
    }
  }

  // Logs each ignored request field name once per server.
  void NoteIgnored(const std::vector<std::string>& fields) {
    if (fields.empty()) return;
    std::lock_guard<std::mutex> lock(ignored_mu_);
    for (const std::string& f : fields) {
      if (ignored_.size() < 256 && ignored_.insert(f).second) {
        std::cerr << "folio serve: ignoring request field '" << f.substr(0, 64)
                  << "' (not used by folio; logged once)\n";
      }
    }
  }

  // Streaming: server-sent events, one chunk per engine output, then (if
  // asked) a usage chunk, and [DONE]. The provider runs on this
  // connection's worker thread until the stream ends or a write fails (the
  // client left).
  void Stream(httplib::Response& res, const std::shared_ptr<Channel>& ch, ResponseContext ctx,
              uint64_t prompt_tokens, bool include_usage, std::vector<Event> events) {
    struct State {
      std::shared_ptr<Channel> channel;
      ResponseBuilder builder;
      uint64_t prompt_tokens;
      bool include_usage;
      std::vector<Event> pending;
      bool finished = false;
      std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
    };
    auto state = std::make_shared<State>(State{ch, ResponseBuilder(std::move(ctx)), prompt_tokens,
                                               include_usage, std::move(events)});
    metrics_.CountResponse(200);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [state](size_t, httplib::DataSink& sink) {
          std::vector<Event> evs;
          evs.swap(state->pending);
          if (evs.empty()) state->channel->Wait(evs, std::chrono::milliseconds(200));
          auto write = [&](const std::string& s) {
            state->last_write = std::chrono::steady_clock::now();
            return sink.write(s.data(), s.size());
          };
          for (const Event& e : evs) {
            if (e.kind == Event::Kind::kError) {
              state->finished = true;
              const ApiError err = ServerError(500, "server_error", e.error.ToString());
              write(Sse(err.Body()));
              write(Sse("[DONE]"));
              sink.done();
              return true;
            }
            const std::string chunk = state->builder.Add(e);
            if (!chunk.empty() && !write(Sse(chunk))) return false;
            if (e.finish != engine::FinishReason::kNone) {
              state->finished = true;
              if (state->include_usage &&
                  !write(Sse(state->builder.UsageChunk(state->prompt_tokens)))) {
                return false;
              }
              if (!write(Sse("[DONE]"))) return false;
              sink.done();
              return true;
            }
          }
          // Nothing to say for a while (queued behind others): an SSE
          // comment, so a client that left is noticed by the failed write.
          if (std::chrono::steady_clock::now() - state->last_write > std::chrono::seconds(1)) {
            if (!write(": keep-alive\n\n")) return false;
          }
          return true;
        },
        [state, loop = &loop_, active = &active_](bool) {
          if (!state->finished) loop->Abort(state->channel);
          --*active;
        });
  }

  const ModelInfo& model_;
  EngineLoop& loop_;
  Metrics& metrics_;
  std::atomic<uint64_t> next_id_{0};
  std::atomic<uint64_t> active_{0};
  std::mutex ignored_mu_;
  std::set<std::string> ignored_;
};

}  // namespace

Status Serve(engine::Engine& engine, const ModelInfo& model, const ServerConfig& config) {
  Metrics metrics;
  EngineLoopConfig loop_config;
  loop_config.max_queue = config.max_queue;
  loop_config.step_delay = config.step_delay;
  EngineLoop loop(engine, loop_config, metrics);
  Handlers handlers(model, loop, metrics);

  httplib::Server svr;
  const uint64_t threads = std::max<uint64_t>(config.http_threads, 1);
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  svr.set_payload_max_length(config.max_body_bytes);
  svr.set_read_timeout(config.read_timeout.count(), 0);
  svr.set_write_timeout(config.write_timeout.count(), 0);
  int listen_fd = -1;
  svr.set_socket_options([&listen_fd](int fd) {
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd = fd;
  });
  const uint64_t max_headers = config.max_headers;
  svr.set_pre_routing_handler(
      [&handlers, &config, max_headers](const httplib::Request& req, httplib::Response& res) {
        // Runs after the headers are read and before any body byte is.
        // Replies are whole JSON bodies: a Range header would have httplib
        // cut them up (a few KB of ranges made /metrics 8 MB); the request
        // object is httplib's own, non-const one.
        const_cast<httplib::Request&>(req).ranges.clear();
        const auto refuse = [&](int status, std::string message) {
          handlers.Reply(res, ServerError(status, "invalid_request_error", std::move(message)));
          return httplib::Server::HandlerResponse::Handled;
        };
        // Bodies: a declared length over the limit is refused before it
        // is read; chunked bodies, whose length httplib does not bound
        // while reading, and compressed ones, which it would inflate, are
        // refused.
        if (req.has_header("Content-Length")) {
          const std::string length = req.get_header_value("Content-Length");
          const bool digits = !length.empty() && length.size() <= 19 &&
                              length.find_first_not_of("0123456789") == std::string::npos;
          if (!digits) return refuse(400, "Content-Length is not a byte count");
          if (std::stoull(length) > config.max_body_bytes) {
            return refuse(413, "the request body is larger than " +
                                   std::to_string(config.max_body_bytes) + " bytes");
          }
        }
        if (req.has_header("Transfer-Encoding")) {
          return refuse(411, "chunked request bodies are not accepted: send Content-Length");
        }
        if (req.has_header("Content-Encoding") &&
            req.get_header_value("Content-Encoding") != "identity") {
          return refuse(415, "compressed request bodies are not accepted (Content-Encoding)");
        }
        if (req.headers.size() > max_headers) {
          ApiError e = ServerError(431, "invalid_request_error",
                                   "more than " + std::to_string(max_headers) + " header lines");
          handlers.Reply(res, e);
          return httplib::Server::HandlerResponse::Handled;
        }
        if (!config.allowed_hosts.empty() &&
            !Contains(config.allowed_hosts, HostName(req.get_header_value("Host")))) {
          handlers.Reply(res, ServerError(403, "invalid_request_error",
                                          "the Host header does not name this server "
                                          "(--allowed-hosts)"));
          return httplib::Server::HandlerResponse::Handled;
        }
        if (req.has_header("Origin") && !Contains(config.allowed_origins, "*") &&
            !Contains(config.allowed_origins, req.get_header_value("Origin"))) {
          handlers.Reply(res, ServerError(403, "invalid_request_error",
                                          "requests from browser origin '" +
                                              req.get_header_value("Origin").substr(0, 100) +
                                              "' are not allowed (--allowed-origins)"));
          return httplib::Server::HandlerResponse::Handled;
        }
        if (!config.api_key.empty() && (req.path != "/health" || config.auth_health)) {
          const std::string given = req.get_header_value("Authorization");
          constexpr std::string_view kBearer = "Bearer ";
          const bool bearer = given.size() >= kBearer.size() && given.starts_with(kBearer);
          if (!ConstantTimeEquals(bearer ? given.substr(kBearer.size()) : "", config.api_key)) {
            ApiError e = ServerError(401, "invalid_request_error",
                                     "a valid API key is required: Authorization: Bearer KEY");
            e.code = "invalid_api_key";
            res.set_header("WWW-Authenticate", "Bearer");
            handlers.Reply(res, e);
            return httplib::Server::HandlerResponse::Handled;
          }
        }
        return httplib::Server::HandlerResponse::Unhandled;
      });
  // httplib's own refusals (413 body too large, 404 no route, 400 bad
  // request line) get an OpenAI-style body too; handlers' bodies are kept.
  svr.set_error_handler(httplib::Server::HandlerWithResponse(
      [&metrics](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty() || res.is_chunked_content_provider_) {
          return httplib::Server::HandlerResponse::Unhandled;
        }
        metrics.CountResponse(res.status);
        std::string message =
            "HTTP " + std::to_string(res.status) + " " + std::string(StatusText(res.status));
        SetError(res, ServerError(res.status, "invalid_request_error", message));
        return httplib::Server::HandlerResponse::Handled;
      }));
  svr.set_exception_handler(
      [&metrics](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& ex) {
          what = ex.what();
        } catch (...) {
        }
        metrics.CountResponse(500);
        SetError(res, ServerError(500, "server_error", what));
      });

  svr.Post("/v1/completions", [&](const httplib::Request& req, httplib::Response& res) {
    handlers.Generate(Endpoint::kCompletions, req, res);
  });
  svr.Post("/v1/chat/completions", [&](const httplib::Request& req, httplib::Response& res) {
    handlers.Generate(Endpoint::kChat, req, res);
  });
  svr.Get("/v1/models",
          [&](const httplib::Request&, httplib::Response& res) { handlers.Models(res); });
  svr.Get(R"(/v1/models/(.+))", [&](const httplib::Request& req, httplib::Response& res) {
    handlers.Model(req.matches[1], res);
  });
  svr.Post("/tokenize", [&](const httplib::Request& req, httplib::Response& res) {
    handlers.Tokenize(req, res);
  });
  svr.Post("/detokenize", [&](const httplib::Request& req, httplib::Response& res) {
    handlers.Detokenize(req, res);
  });
  svr.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    const bool up = loop.accepting();
    SetJson(res, up ? 200 : 503, json{{"status", up ? "ok" : "draining"}}.dump());
  });
  svr.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.Render(loop.snapshot()), "text/plain; version=0.0.4");
  });

  int port = config.port;
  if (port == 0) {
    port = svr.bind_to_any_port(config.host);
    if (port < 0) return Status::IoError("cannot bind " + config.host + " to any port");
  } else if (!svr.bind_to_port(config.host, port)) {
    return Status::IoError("cannot bind " + config.host + ":" + std::to_string(port));
  }
  // httplib listens with a backlog of 5; a burst of clients deserves more.
  // Linux takes a second listen() on a listening socket as a new backlog.
  if (listen_fd >= 0) (void)::listen(listen_fd, config.listen_backlog);

  if (pipe(g_signal_pipe) != 0) return Status::IoError("pipe() failed");
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return

  std::thread watcher([&] {
    while (!WaitSignal(1000)) {
    }
    if (!svr.is_running() && !loop.accepting()) return;  // Serve is leaving
    std::cerr << "folio serve: draining " << loop.in_flight() << " requests\n";
    loop.StopAccepting();
    const auto deadline = std::chrono::steady_clock::now() + config.drain_timeout;
    while ((loop.in_flight() > 0 || handlers.active() > 0) &&
           std::chrono::steady_clock::now() < deadline) {
      if (WaitSignal(10)) break;  // a second signal: stop waiting
    }
    loop.Stop();  // aborts whatever is left; each handler gets its answer
    // Streams end within one provider wait after their last event; give
    // them that long before the listener stops (which cuts streams short).
    const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (handlers.active() > 0 && std::chrono::steady_clock::now() < grace) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    svr.stop();
  });
  std::cerr << "folio serve: listening on http://" << config.host << ":" << port << std::endl;
  const bool ok = svr.listen_after_bind();
  if (!ok) {
    // listen ended without a signal: wake the watcher and leave.
    loop.StopAccepting();
    OnSignal(0);
  }
  watcher.join();
  loop.Stop();
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  close(g_signal_pipe[0]);
  close(g_signal_pipe[1]);
  std::cerr << "folio serve: stopped\n";
  return ok ? Status::Ok() : Status::IoError("the server stopped unexpectedly");
}

}  // namespace folio::server
