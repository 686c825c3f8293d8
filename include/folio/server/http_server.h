// `folio serve`: an OpenAI-compatible HTTP front end over one Engine.
//
//   POST /v1/completions, POST /v1/chat/completions  (stream: true -> SSE)
//   GET  /v1/models, /v1/models/{id}, /health, /metrics (Prometheus text)
//   POST /tokenize, /detokenize (as vLLM's: {"prompt"} or {"messages"} ->
//        {"tokens", "count", "max_model_len"}; {"tokens"} -> {"prompt"})
//
// With an API key every endpoint but /health (unless auth_health) needs
// "Authorization: Bearer KEY", compared in constant time; otherwise 401.
// A request without a seed gets a random one, sent back in the
// X-Folio-Seed response header (as is the one a request gave).
//
// Browsers: a request with an Origin header is refused (403) unless the
// origin is in allowed_origins ("*" allows any), so a web page cannot
// start generations on a local server with a "simple" cross-origin POST.
// The Host header must name an allowed host (allowed_hosts, by name with
// or without a port; empty = any); Serve fills loopback names in when it
// binds a loopback address and none are given, which defeats DNS
// rebinding (a page's own name resolving to 127.0.0.1).
//
// Threads: event-driven I/O threads (Boost.Beast over Asio) serve every
// connection, so an idle, slow or streaming client costs a socket, not a
// thread: one front thread accepts, reads a new connection's first header
// and answers body-less constant-work routes (/health, /metrics, ...);
// io_threads bulk threads read bodies, linger and stream replies, and take
// a connection over for good once it needs them. Work threads parse and
// tokenize generation requests: two for bodies up to 64 KiB, one for
// larger ones, so a flood of large bodies neither delays a normal request
// nor takes more than a core; one engine thread
// (serving::EngineThread) owns the Engine. A generation
// is validated (request.h), submitted to the engine thread's bounded queue (429 +
// Retry-After when full) and followed through its Channel, whose events
// wake the connection. A client that goes away, streamed or not, is
// noticed by a read that watches its socket; the request is then aborted,
// which frees its pages.
//
// Limits, enforced while reading: header bytes (431) and lines (431), body
// bytes, chunked or not (413; a declared Content-Length over the limit is
// refused before any body byte), no compressed bodies (415). Deadlines:
// read_timeout for a request's header and for its body, keep_alive_timeout
// for an idle connection between requests, write_timeout for each write.
// Past max_connections, 16 more connections are read for one request
// each: /health answers, anything else gets 503. Range headers are
// ignored. Bodies held at once are bounded (max_held_body_bytes: 503), and
// a request whose client left before it was parsed is dropped unparsed.
//
// On SIGINT/SIGTERM new requests get 503, in-flight ones finish (up to
// drain_timeout, then they are aborted), and Serve returns whatever clients
// do. A second signal skips the wait.
#ifndef FOLIO_SERVER_HTTP_SERVER_H_
#define FOLIO_SERVER_HTTP_SERVER_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "folio/core/status.h"
#include "folio/engine/engine.h"
#include "folio/server/request.h"

namespace folio::server {

struct ServerConfig {
  std::string host = "127.0.0.1";     // loopback unless asked otherwise
  int port = 8000;                    // 0 = any free port (printed)
  uint64_t max_queue = 32;            // requests waiting to run; more -> 429
  uint64_t max_body_bytes = 1 << 20;  // larger bodies -> 413
  // Request bodies being read or waiting to be parsed, all connections
  // together (a chunked one counts max_body_bytes); a body that would pass
  // it -> 503 with Retry-After, before it is read.
  uint64_t max_held_body_bytes = 128 << 20;
  uint64_t max_headers = 64;             // more header lines -> 431
  uint64_t max_header_bytes = 16 << 10;  // a longer header -> 431
  uint64_t max_connections = 2048;       // more open connections -> 503
  uint64_t io_threads = 2;               // bulk I/O threads (plus one front thread)
  int listen_backlog = 1024;
  std::chrono::seconds read_timeout{10};       // a request's header; its body
  std::chrono::seconds write_timeout{10};      // each write to a client
  std::chrono::seconds keep_alive_timeout{5};  // idle between requests
  std::chrono::seconds drain_timeout{30};
  std::chrono::microseconds step_delay{0};   // serving::EngineThreadConfig::step_delay
  std::string api_key;                       // empty: no authentication
  bool auth_health = false;                  // /health needs the key too
  std::vector<std::string> allowed_origins;  // Origin values accepted; "*" = any
  std::vector<std::string> allowed_hosts;    // Host names accepted; empty = any
};

// Serves until SIGINT/SIGTERM, drains, returns. Writes one line
// "folio serve: listening on http://HOST:PORT" to stderr once bound.
// Errors: the address cannot be bound.
Status Serve(engine::Engine& engine, const ModelInfo& model, const ServerConfig& config);

}  // namespace folio::server

#endif  // FOLIO_SERVER_HTTP_SERVER_H_
