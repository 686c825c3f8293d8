// The HTTP/1.1 front end on Boost.Beast over Asio: a few I/O threads serve
// every connection; a connection costs a socket and a small buffer, never a
// thread. Each connection is a Session on its own strand:
//
//   read header (deadline: read_timeout, or keep_alive_timeout between
//   requests) -> check it (limits, Host, Origin, key, encoding)
//   -> read body (deadline: read_timeout; size bounded while reading,
//   chunked or not; dropped at once when the client closes) -> route
//   -> simple route: answer at once
//   -> /tokenize, /detokenize: answered on a work pool (their cost grows
//      with the body)
//   -> generation: parse and submit on a work pool (tokenizing a large
//      prompt must not hold an I/O thread), then follow the request's
//      Channel: the engine thread's Push posts a wake-up to the strand,
//      which writes what arrived (each write under write_timeout). Meanwhile
//      a read on the socket watches for the client leaving; if it leaves,
//      the request is aborted and its pages freed, streamed or not.
//
// A reply that refuses a request before its body was read closes the
// connection after a bounded lingering read, so the client sees the reply
// rather than a reset.
//
// Two work pools: bodies up to kSmallBodyBytes go to the quick one (two
// threads), larger ones to the large one (one thread), so a normal request
// never waits behind a flood of megabyte bodies, and those take at most
// one core.
//
// Two I/O contexts: the front one (one thread) accepts connections, reads
// each new connection's first header and answers it when it is a simple
// route without a body (/health, /metrics, /v1/models, the page); anything
// that reads a body, lingers, or generates moves the connection to the
// bulk context (io_threads threads) for the rest of its life. The front
// thread's handlers are all small, so a health probe never queues behind
// body bytes: 1,500 clients pushing 1 MB bodies load the bulk threads, not
// it.
#include "folio/server/http_server.h"

#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <deque>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "folio/server/api.h"
#include "folio/server/metrics.h"
#include "folio/serving/engine_thread.h"

namespace folio::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

// Bytes a refused connection may still send before it is closed, so that
// it reads the refusal instead of a reset.
constexpr uint64_t kLingerBytes = 4 << 20;
constexpr std::chrono::seconds kLingerTime{2};
// Connections past --max-connections that are still read for their
// request (Session::AnswerOverflow): /health is answered, anything else
// gets its 503, never a reset. They have this long to send their header,
// and a newcomer past the slice evicts the oldest one still silent, so
// clients that hold connections open cannot keep a probe out.
constexpr uint64_t kOverflowConnections = 16;
constexpr std::chrono::seconds kOverflowReadTime{2};
// Bytes a client may pipeline behind a running generation; past it the
// connection is no longer watched for departure until the reply is done.
constexpr size_t kWatchBufferBytes = 64 << 10;
// Bodies up to this size are parsed on the quick work pool (ServerState).
constexpr size_t kSmallBodyBytes = 64 << 10;

// a == b without an early exit, so the time taken does not say how much of
// a guessed key was right.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (b.empty() ? 0 : b[i % b.size()]));
  }
  return diff == 0;
}

// s without leading and trailing spaces and tabs.
std::string_view Trimmed(std::string_view s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string_view::npos) return {};
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

// The token of an "Authorization: Bearer TOKEN" value, the scheme in any
// case (RFC 9110 11.1) and one or more spaces after it; empty otherwise.
std::string_view BearerToken(std::string_view value) {
  const size_t space = value.find(' ');
  if (space == std::string_view::npos || !beast::iequals(value.substr(0, space), "Bearer")) {
    return {};
  }
  return Trimmed(value.substr(space));
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

std::string_view View(beast::string_view s) { return {s.data(), s.size()}; }

ApiError BadRequest(int status, std::string message) {
  return ServerError(status, "invalid_request_error", std::move(message));
}

class Session;

// Shared by every session.
struct ServerState {
  const ServerConfig& config;
  Api& api;
  net::thread_pool& quick;          // work for bodies up to kSmallBodyBytes
  net::thread_pool& large;          // work for larger bodies
  net::io_context* bulk = nullptr;  // where connections go to read bodies and generate
  std::atomic<uint64_t> connections{0};
  // Bytes of request bodies being read or waiting to be parsed, all
  // connections (ServerConfig::max_held_body_bytes).
  std::atomic<uint64_t> held_body_bytes{0};
  // Sessions past max_connections, oldest first (only the listener touches
  // it; expired ones are dropped as it goes).
  std::deque<std::weak_ptr<Session>> overflow_sessions{};
  // Generations whose reply is not yet written in full.
  std::atomic<uint64_t> generating{0};
};

// A share of ServerState::held_body_bytes, given back when destroyed (or
// moved from): a request body's bytes from before it is read until it is
// parsed and handed on, whatever path it takes.
class HeldBytes {
 public:
  HeldBytes() = default;
  // Takes n bytes of the pool when they fit under limit; nullopt otherwise.
  static std::optional<HeldBytes> Take(std::atomic<uint64_t>& pool, uint64_t n, uint64_t limit) {
    uint64_t held = pool.load();
    do {
      if (n > limit || held > limit - n) return std::nullopt;
    } while (!pool.compare_exchange_weak(held, held + n));
    return HeldBytes(&pool, n);
  }
  HeldBytes(HeldBytes&& o) noexcept : pool_(std::exchange(o.pool_, nullptr)), n_(o.n_) {}
  HeldBytes& operator=(HeldBytes&& o) noexcept {
    if (this != &o) {
      Release();
      pool_ = std::exchange(o.pool_, nullptr);
      n_ = o.n_;
    }
    return *this;
  }
  HeldBytes(const HeldBytes&) = delete;
  HeldBytes& operator=(const HeldBytes&) = delete;
  ~HeldBytes() { Release(); }

 private:
  HeldBytes(std::atomic<uint64_t>* pool, uint64_t n) : pool_(pool), n_(n) {}
  void Release() {
    if (pool_ != nullptr) pool_->fetch_sub(n_);
    pool_ = nullptr;
  }
  std::atomic<uint64_t>* pool_ = nullptr;
  uint64_t n_ = 0;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  // overflow: a connection past max_connections, answered once
  // (AnswerOverflow) and closed.
  Session(tcp::socket socket, ServerState& state, bool overflow = false)
      : socket_(std::move(socket)),
        deadline_(socket_.get_executor()),
        state_(state),
        overflow_(overflow) {
    if (!overflow_) ++state_.connections;
    beast::error_code ignored;  // stream chunks leave at once, not after a delayed ack
    socket_.set_option(tcp::no_delay(true), ignored);
  }
  ~Session() {
    EndGeneration();
    if (!overflow_) --state_.connections;
  }

  void Start() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
  }
  // An overflow session closed to make room for a newer one, unless its
  // request already came (it is being answered).
  void Evict() {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      if (self->requests_ == 0) self->Close();
    });
  }

 private:
  const ServerConfig& config() const { return state_.config; }

  // Deadlines: one timer; a new Arm replaces the previous deadline, and a
  // wait that fires for a replaced deadline does nothing.
  void Arm(std::chrono::steady_clock::duration d) {
    const uint64_t gen = ++deadline_gen_;
    deadline_.expires_after(d);
    deadline_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
      if (!ec && gen == self->deadline_gen_) self->Close();
    });
  }
  void Disarm() {
    ++deadline_gen_;
    deadline_.cancel();
  }

  // Ends the connection now: pending operations complete with errors and
  // do nothing more; an unfinished generation is aborted.
  void Close() {
    if (closed_) return;
    closed_ = true;
    Disarm();
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    EndGeneration();
  }

  void ReadHeader() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(config().max_header_bytes));
    parser_->body_limit(config().max_body_bytes);
    Clock::duration wait = requests_ == 0 ? Clock::duration(config().read_timeout)
                                          : Clock::duration(config().keep_alive_timeout);
    if (overflow_) wait = std::min<Clock::duration>(wait, kOverflowReadTime);
    Arm(wait);
    http::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (closed_) return;
    if (ec) return OnReadError(ec);
    ++requests_;
    const auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    if (std::optional<ApiError> e = CheckHeader(req)) {
      Reply reply = state_.api.Refuse(*e);
      if (e->http_status == 401) reply.headers.emplace_back("WWW-Authenticate", "Bearer");
      return Send(std::move(reply), /*close=*/!parser_->is_done());
    }
    if (overflow_) return AnswerOverflow();
    if (parser_->is_done()) return Dispatch();
    // The body's bytes (all the limit allows when chunked) must fit the
    // server-wide budget before any is read.
    const uint64_t body_bytes = parser_->content_length().value_or(config().max_body_bytes);
    std::optional<HeldBytes> held =
        HeldBytes::Take(state_.held_body_bytes, body_bytes, config().max_held_body_bytes);
    if (!held) {
      return Send(
          state_.api.RefuseRetryLater(ServerError(
              503, "server_error", "the server holds too many request bodies; retry later")),
          /*close=*/true);
    }
    held_ = std::move(*held);
    if (on_front_) {
      return MoveToBulk([](Session& self) { self.StartBody(); });
    }
    StartBody();
  }

  // After the header, a body follows: asks for it when the client waits
  // to be asked (Expect: 100-continue), then reads it.
  void StartBody() {
    const auto& req = parser_->get();
    const auto expect = req.find(http::field::expect);
    if (expect != req.end() && beast::iequals(expect->value(), "100-continue")) {
      // The client waits for this before it sends the body.
      continue_.emplace(http::status::continue_, req.version());
      Arm(config().write_timeout);
      return http::async_write(socket_, *continue_,
                               [self = shared_from_this()](beast::error_code wec, size_t) {
                                 if (self->closed_) return;
                                 if (wec) return self->Close();
                                 self->ReadBody();
                               });
    }
    ReadBody();
  }

  // A connection past max_connections: /health is answered (so a probe
  // sees the server alive when it is full), anything else gets a 503 with
  // Retry-After; then the connection closes, lingering over an unread body
  // so the client reads the 503 rather than a reset.
  void AnswerOverflow() {
    const auto& req = parser_->get();
    const std::string_view path = Path(req);
    if (FindRoute(View(req.method_string()), path) == Route::kHealth) {
      return Send(Answer(Route::kHealth, path, {}), /*close=*/true);
    }
    Send(state_.api.RefuseRetryLater(ServerError(503, "server_error", "too many open connections")),
         /*close=*/true);
  }

  void ReadBody() {
    Arm(config().read_timeout);
    ReadBodySome();
  }
  // The body a read at a time; between reads, a client that has closed its
  // side is dropped at once. Its request would be dropped unparsed anyway
  // (PeerGone), and closing now leaves the bytes it sent unread in the
  // kernel instead of copying them through this thread. (A client that
  // half-closes after a whole request is taken as gone, as PeerGone takes
  // it.)
  void ReadBodySome() {
    if (PeerClosed()) return Close();
    http::async_read_some(socket_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (self->closed_) return;
                            if (ec) return self->OnReadError(ec);
                            if (self->parser_->is_done()) return self->Dispatch();
                            self->ReadBodySome();
                          });
  }

  // A request that could not be read: answer what deserves an answer, then
  // close; a timeout or a client that left just closes.
  void OnReadError(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
        ec == net::error::eof || ec == net::error::operation_aborted ||
        ec == net::error::connection_reset) {
      return Close();  // the client left (or its deadline passed): nobody to answer
    }
    ApiError e;
    if (ec == http::error::header_limit) {
      e = BadRequest(431, "the request header is larger than " +
                              std::to_string(config().max_header_bytes) + " bytes");
    } else if (ec == http::error::body_limit) {
      e = BadRequest(413, "the request body is larger than " +
                              std::to_string(config().max_body_bytes) + " bytes");
    } else if (ec == http::error::bad_content_length) {
      e = BadRequest(400, "Content-Length is not a byte count");
    } else {
      e = BadRequest(400, "malformed HTTP request: " + ec.message());
    }
    Send(state_.api.Refuse(e), /*close=*/true);
  }

  // The checks a request's header must pass before its body is read.
  std::optional<ApiError> CheckHeader(const http::request<http::string_body>& req) const {
    uint64_t count = 0;
    for ([[maybe_unused]] const auto& field : req) ++count;
    if (count > config().max_headers) {
      return BadRequest(431, "more than " + std::to_string(config().max_headers) + " header lines");
    }
    const auto encoding = req.find(http::field::content_encoding);
    if (encoding != req.end() && !beast::iequals(encoding->value(), "identity")) {
      return BadRequest(415, "compressed request bodies are not accepted (Content-Encoding)");
    }
    // The only transfer coding read is chunked (RFC 9112 6.1: a server
    // answers one it does not implement with 501).
    const auto transfer = req.find(http::field::transfer_encoding);
    if (transfer != req.end() && !beast::iequals(Trimmed(View(transfer->value())), "chunked")) {
      return BadRequest(501, "Transfer-Encoding '" +
                                 std::string(View(transfer->value()).substr(0, 100)) +
                                 "' is not implemented; send the body as it is or chunked");
    }
    // RFC 9112 3.2: an HTTP/1.1 request has exactly one Host header.
    if (req.version() >= 11 && req.count(http::field::host) != 1) {
      return BadRequest(400, req.count(http::field::host) == 0
                                 ? "an HTTP/1.1 request needs a Host header"
                                 : "a request has one Host header");
    }
    if (!config().allowed_hosts.empty() &&
        !Contains(config().allowed_hosts, HostName(View(req[http::field::host])))) {
      return BadRequest(403, "the Host header does not name this server (--allowed-hosts)");
    }
    const auto origin = req.find(http::field::origin);
    if (origin != req.end() && !Contains(config().allowed_origins, "*") &&
        !Contains(config().allowed_origins, View(origin->value())) &&
        !SameOrigin(View(origin->value()), View(req[http::field::host]))) {
      return BadRequest(403, "requests from browser origin '" +
                                 std::string(View(origin->value()).substr(0, 100)) +
                                 "' are not allowed (--allowed-origins)");
    }
    if (!config().api_key.empty() && !IsPublicPage(Path(req)) &&
        (Path(req) != "/health" || config().auth_health)) {
      if (!ConstantTimeEquals(BearerToken(View(req[http::field::authorization])),
                              config().api_key)) {
        ApiError e = BadRequest(401, "a valid API key is required: Authorization: Bearer KEY");
        e.code = "invalid_api_key";
        return e;
      }
    }
    return std::nullopt;
  }

  // The chat page served here calls this server: its origin is
  // http://HOST. Trusted only where the Host is (an allow-list of names,
  // the default on loopback, which stops DNS rebinding) or an API key
  // guards every call anyway.
  bool SameOrigin(std::string_view origin, std::string_view host) const {
    if (config().allowed_hosts.empty() && config().api_key.empty()) return false;
    return !host.empty() && origin.size() == 7 + host.size() &&
           beast::iequals(origin.substr(0, 7), "http://") && beast::iequals(origin.substr(7), host);
  }

  static std::string_view Path(const http::request<http::string_body>& req) {
    std::string_view target = View(req.target());
    return target.substr(0, target.find('?'));
  }

  void Dispatch() {
    Disarm();
    const auto& req = parser_->get();
    const std::string_view path = Path(req);
    const Route route = FindRoute(View(req.method_string()), path);
    if (on_front_ && !IsConstantWork(route)) {
      return MoveToBulk([](Session& self) { self.Dispatch(); });
    }
    if (route == Route::kTokenize || route == Route::kDetokenize) {
      // Work that grows with the body (parsing, tokenizing a 1 MiB prompt)
      // runs on a work pool, as generation requests do, so /health and
      // every other connection never wait behind it.
      net::thread_pool& pool = WorkPool();  // before the body moves into the task
      net::post(pool, [self = shared_from_this(), route, path = std::string(path),
                       body = std::move(parser_->get().body()), held = std::move(held_)]() mutable {
        if (self->PeerGone()) {
          held = HeldBytes();
          return net::post(self->socket_.get_executor(), [self] { self->Close(); });
        }
        Reply reply = self->Answer(route, path, body);
        net::post(self->socket_.get_executor(), [self, reply = std::move(reply)]() mutable {
          if (!self->closed_) self->Send(std::move(reply), !self->keep_alive_);
        });
      });
      return;
    }
    if (IsConstantWork(route)) {
      Reply reply = Answer(route, path, req.body());
      held_ = HeldBytes();  // the body is read and answered
      return Send(std::move(reply), !keep_alive_);
    }
    ++state_.generating;
    generating_ = true;
    const Endpoint endpoint = route == Route::kChat ? Endpoint::kChat : Endpoint::kCompletions;
    net::thread_pool& pool = WorkPool();  // before the body moves into the task
    net::post(pool, [self = shared_from_this(), endpoint, route,
                     body = std::move(parser_->get().body()), held = std::move(held_)]() mutable {
      // A client that left while its request waited for the pool: nothing
      // to parse or run for it.
      if (self->PeerGone()) {
        held = HeldBytes();
        return net::post(self->socket_.get_executor(), [self] { self->Close(); });
      }
      std::variant<Generation, Reply> submitted;
      try {
        submitted = route == Route::kEmbeddings ? self->state_.api.SubmitEmbeddings(body)
                    : route == Route::kRerank || route == Route::kScore
                        ? self->state_.api.SubmitScores(route, body)
                        : self->state_.api.Submit(endpoint, body);
      } catch (const std::exception& e) {
        submitted = self->state_.api.Refuse(ServerError(500, "server_error", e.what()));
      }
      net::post(self->socket_.get_executor(), [self, submitted = std::move(submitted)]() mutable {
        self->OnSubmitted(std::move(submitted));
      });
    });
  }

  // Whether the client has closed its side: a peek that reads EOF (or
  // finds the connection reset). Runs on a work thread while the session
  // waits for it with nothing pending on the socket; it changes nothing.
  bool PeerGone() {
    char c = 0;
    const ssize_t n = ::recv(socket_.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }
  // Whether the client has closed its side or the connection failed, even
  // with bytes it sent still unread (POLLRDHUP: its FIN has arrived).
  bool PeerClosed() {
    pollfd p{.fd = socket_.native_handle(), .events = POLLRDHUP, .revents = 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  }

  // The work pool for the request just read, by its body's size.
  net::thread_pool& WorkPool() {
    return parser_->get().body().size() <= kSmallBodyBytes ? state_.quick : state_.large;
  }

  // Routes whose answer costs the same whatever the request: everything
  // but tokenization and the generations (those run on a work pool).
  static bool IsConstantWork(Route route) {
    return route != Route::kTokenize && route != Route::kDetokenize &&
           route != Route::kCompletions && route != Route::kChat && route != Route::kEmbeddings &&
           route != Route::kRerank && route != Route::kScore;
  }

  // Moves the connection from the front context to the bulk one for good,
  // then runs then(*this) there. Called on the front thread from a
  // completion handler, when nothing is pending on the socket but the
  // deadline's wait, which is disarmed first (should it have fired
  // already, its handler finds a newer generation and does nothing).
  template <typename Then>
  void MoveToBulk(Then then) {
    Disarm();
    beast::error_code ec;
    const tcp::endpoint local = socket_.local_endpoint(ec);
    tcp::socket moved(net::make_strand(*state_.bulk));
    if (!ec) {
      const tcp::socket::native_handle_type fd = socket_.release(ec);
      if (!ec) {
        moved.assign(local.protocol(), fd, ec);
        if (ec) ::close(fd);
      }
    }
    if (ec) return Close();
    socket_ = std::move(moved);
    deadline_ = net::steady_timer(socket_.get_executor());
    on_front_ = false;
    net::post(socket_.get_executor(), [self = shared_from_this(), then] {
      if (!self->closed_) then(*self);
    });
  }

  // Api::Answer, an exception becoming a 500.
  Reply Answer(Route route, std::string_view path, std::string_view body) {
    try {
      return state_.api.Answer(route, path, body);
    } catch (const std::exception& e) {
      return state_.api.Refuse(ServerError(500, "server_error", e.what()));
    }
  }

  void OnSubmitted(std::variant<Generation, Reply> submitted) {
    if (Reply* reply = std::get_if<Reply>(&submitted)) {
      EndGeneration();
      return Send(std::move(*reply), !keep_alive_);
    }
    output_.emplace(std::move(std::get<Generation>(submitted)), state_.api.metrics());
    if (closed_) return EndGeneration();  // left while the request was parsed
    std::weak_ptr<Session> weak = weak_from_this();
    output_->generation().channel->SetNotify([weak, executor = socket_.get_executor()] {
      net::post(executor, [weak] {
        if (auto self = weak.lock()) self->Pump();
      });
    });
    Watch();
    Pump();
  }

  // Reads while a generation runs: a read error means the client left;
  // bytes that arrive are kept for the next request.
  void Watch() {
    watching_ = true;
    socket_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->watching_ = false;
                              if (self->closed_) return;
                              if (ec == net::error::operation_aborted && self->after_watch_) {
                                auto next = std::move(self->after_watch_);
                                self->after_watch_ = nullptr;
                                return next();
                              }
                              if (ec)
                                return self->Close();  // the client left: aborts the generation
                              self->buffer_.commit(n);
                              if (!self->output_ || self->output_->done()) {
                                if (self->after_watch_) {
                                  auto next = std::move(self->after_watch_);
                                  self->after_watch_ = nullptr;
                                  return next();
                                }
                                return;
                              }
                              if (self->buffer_.size() < kWatchBufferBytes) self->Watch();
                            });
  }

  // Writes what the generation's channel holds, one write at a time.
  void Pump() {
    if (closed_ || writing_ || !output_ || pumped_done_) return;
    std::vector<Event> events;
    output_->generation().channel->TryTake(events);
    GenerationStep step = output_->Feed(events);
    if (step.reply) {
      pumped_done_ = true;
      return Send(std::move(*step.reply), !keep_alive_);
    }
    if (step.start_stream) StartStream();
    if (!step.stream_data.empty()) {
      if (version_ >= 11) {
        std::ostringstream chunk;
        chunk << std::hex << step.stream_data.size() << "\r\n";
        pending_ += chunk.str() + step.stream_data + "\r\n";
      } else {
        pending_ += step.stream_data;  // HTTP/1.0: no chunks; the close ends the body
      }
    }
    if (step.done) {
      pumped_done_ = true;
      if (version_ >= 11) pending_ += "0\r\n\r\n";
    }
    Flush();
  }

  void StartStream() {
    http::response<http::empty_body> head{http::status::ok, version_};
    head.set(http::field::content_type, "text/event-stream");
    head.set(http::field::cache_control, "no-cache");
    head.set("X-Folio-Seed", std::to_string(output_->generation().seed));
    if (version_ >= 11) {
      head.chunked(true);
      head.keep_alive(keep_alive_);
    } else {
      keep_alive_ = false;
      head.keep_alive(false);
    }
    std::ostringstream os;
    os << head.base();
    pending_ = os.str() + pending_;
  }

  void Flush() {
    if (writing_ || closed_) return;
    if (pending_.empty()) {
      if (pumped_done_) FinishStream();
      return;
    }
    writing_ = true;
    out_.swap(pending_);
    pending_.clear();
    Arm(config().write_timeout);
    net::async_write(socket_, net::buffer(out_),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->writing_ = false;
                       if (self->closed_) return;
                       if (ec) return self->Close();
                       self->Disarm();
                       self->Pump();
                       self->Flush();
                     });
  }

  void FinishStream() {
    EndGeneration();
    if (!keep_alive_) return Close();
    Next();
  }

  // The generation is over (replied, refused or the client gone).
  void EndGeneration() {
    if (output_) {
      output_->generation().channel->SetNotify(nullptr);
      const Generation& g = output_->generation();
      // Embeddings: an input refused ends the reply, so the others go too
      // (aborting a finished request changes nothing).
      if (!output_->done() || g.inputs > 0) {
        for (uint64_t k = 0; k < std::max<uint64_t>(g.inputs, 1); ++k) {
          state_.api.thread().Abort(g.key + k);
        }
      }
    }
    output_.reset();
    if (generating_) {
      generating_ = false;
      --state_.generating;
    }
  }

  // On to the connection's next request, once the watch read is back.
  void Next() {
    pumped_done_ = false;
    if (watching_) {
      after_watch_ = [this] { ReadHeader(); };
      beast::error_code ignored;
      socket_.cancel(ignored);
      return;
    }
    ReadHeader();
  }

  void Send(Reply reply, bool close) {
    if (closed_) return;
    EndGeneration();
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(reply.status), version_);
    res->set(http::field::content_type, reply.content_type);
    for (auto& [name, value] : reply.headers) res->set(name, value);
    res->body() = std::move(reply.body);
    res->keep_alive(!close && keep_alive_);
    res->prepare_payload();
    const bool linger = close && parser_ && !parser_->is_done();
    Arm(config().write_timeout);
    http::async_write(
        socket_, *res,
        [self = shared_from_this(), res, close, linger](beast::error_code ec, size_t) {
          if (self->closed_) return;
          if (ec) return self->Close();
          self->Disarm();
          if (linger) return self->Linger();
          if (close || !res->keep_alive()) return self->Close();
          self->Next();
        });
  }

  // After refusing a request whose body was not read: stop sending, read
  // and drop what the client still sends (bounded in bytes and time), then
  // close, so the client reads the refusal instead of a reset.
  void Linger() {
    if (on_front_) {
      return MoveToBulk([](Session& self) { self.Linger(); });
    }
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    Arm(kLingerTime);
    LingerRead();
  }
  // The bytes are discarded in the kernel (recv with MSG_TRUNC on a TCP
  // socket copies nothing), so a flood of refused bodies costs this thread
  // little more than their wake-ups.
  void LingerRead() {
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      if (self->closed_) return;
      if (ec) return self->Close();
      for (;;) {
        const ssize_t n =
            ::recv(self->socket_.native_handle(), nullptr, kLingerBytes, MSG_TRUNC | MSG_DONTWAIT);
        if (n == 0) return self->Close();  // the client is done sending
        if (n < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          return self->Close();
        }
        self->lingered_ += static_cast<uint64_t>(n);
        if (self->lingered_ > kLingerBytes) return self->Close();
      }
      self->LingerRead();
    });
  }

  tcp::socket socket_;
  net::steady_timer deadline_;
  ServerState& state_;
  const bool overflow_;
  bool on_front_ = true;  // socket_ and deadline_ belong to the front context
  HeldBytes held_;        // the body being read (ServerState::held_body_bytes)
  // Atomic: a wait that expired on the front context just before the
  // connection moved (MoveToBulk) still runs there, and reads it.
  std::atomic<uint64_t> deadline_gen_{0};
  beast::flat_buffer buffer_{1 << 20};
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::empty_body>> continue_;
  uint64_t requests_ = 0;
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool closed_ = false;
  // A generation in progress.
  bool generating_ = false;
  std::optional<GenerationOutput> output_;
  bool pumped_done_ = false;
  bool writing_ = false;
  bool watching_ = false;
  std::function<void()> after_watch_;
  std::string pending_, out_;
  uint64_t lingered_ = 0;
};

// Accepts connections. Past max_connections, up to kOverflowConnections
// more are read for one request each (Session::AnswerOverflow); a newcomer
// past those evicts the oldest.
class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(net::io_context& ioc, tcp::acceptor& acceptor, ServerState& state)
      : ioc_(ioc), acceptor_(acceptor), retry_(ioc), state_(state) {}

  void Accept() {
    acceptor_.async_accept(net::make_strand(ioc_),
                           [self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
                             self->OnAccept(ec, std::move(socket));
                           });
  }

 private:
  void OnAccept(beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      // Out of file descriptors and the like: say so once, back off a little.
      if (!warned_) std::cerr << "folio serve: accept failed: " << ec.message() << "\n";
      warned_ = true;
      retry_.expires_after(std::chrono::milliseconds(50));
      retry_.async_wait([self = shared_from_this()](beast::error_code) { self->Accept(); });
      return;
    }
    Admit(std::move(socket));
    // Connections already waiting are taken now, not one per trip through
    // the handler queue, so a probe that arrives with a burst of
    // connections is not accepted after all of them have been served a turn.
    for (int i = 0; i < kAcceptBurst; ++i) {
      tcp::socket next(net::make_strand(ioc_));
      acceptor_.accept(next, ec);  // the acceptor does not block
      if (ec) break;               // none waiting (or an error the next async accept reports)
      Admit(std::move(next));
    }
    Accept();
  }

  void Admit(tcp::socket socket) {
    if (state_.connections.load() >= state_.config.max_connections) {
      std::deque<std::weak_ptr<Session>>& older = state_.overflow_sessions;
      std::erase_if(older, [](const std::weak_ptr<Session>& w) { return w.expired(); });
      if (older.size() >= kOverflowConnections) {
        if (std::shared_ptr<Session> oldest = older.front().lock()) oldest->Evict();
        older.pop_front();
      }
      auto session = std::make_shared<Session>(std::move(socket), state_, /*overflow=*/true);
      older.push_back(session);
      session->Start();
    } else {
      std::make_shared<Session>(std::move(socket), state_)->Start();
    }
  }

  static constexpr int kAcceptBurst = 64;

  net::io_context& ioc_;
  tcp::acceptor& acceptor_;
  net::steady_timer retry_;
  ServerState& state_;
  bool warned_ = false;
};

// Descriptors kept for everything but client sockets (the listener, the
// I/O context, the model file, standard streams, the process's pipes).
constexpr uint64_t kReservedDescriptors = 64;

// Room for max_connections sockets: raises the soft descriptor limit
// toward the hard one. Returns the connections that fit under the limit it
// got (max_connections when they all do), so that the cap, not accept()
// failing, answers the connection past it.
uint64_t RaiseDescriptorLimit(uint64_t connections) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return connections;
  constexpr uint64_t kKept = kReservedDescriptors + kOverflowConnections;
  const rlim_t want = static_cast<rlim_t>(connections + kKept);
  if (lim.rlim_cur < want) {
    lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? want : std::min(want, lim.rlim_max);
    setrlimit(RLIMIT_NOFILE, &lim);
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return connections;
  }
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= want) return connections;
  const uint64_t fit = lim.rlim_cur > kKept + 1 ? static_cast<uint64_t>(lim.rlim_cur) - kKept : 1;
  return std::min(connections, fit);
}

}  // namespace

Status Serve(engine::Engine& engine, const ModelInfo& model, const ServerConfig& config) {
  // Request bodies and their parses are the server's large short-lived
  // allocations (up to --max-body-bytes each). glibc raises its mmap
  // threshold each time such a block is freed, after which they come from
  // the heap and stay with the process once freed; a fixed threshold keeps
  // every one of them mapped and returned to the system when freed.
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  Metrics metrics;
  serving::EngineThread loop(
      engine,
      {.max_queue = config.max_queue, .step_delay = config.step_delay, .observer = &metrics});
  Api api(model, loop, metrics);
  ServerConfig clamped = config;
  clamped.max_connections = RaiseDescriptorLimit(config.max_connections);
  if (clamped.max_connections < config.max_connections) {
    std::cerr << "folio serve: --max-connections " << config.max_connections << " lowered to "
              << clamped.max_connections << ": the process may open "
              << clamped.max_connections + kReservedDescriptors + kOverflowConnections
              << " descriptors (ulimit -n), and keeps " << kReservedDescriptors
              << " for itself and " << kOverflowConnections
              << " for connections past the cap (answered: /health, else 503)\n";
  }
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return

  // Destroyed in reverse: the I/O contexts (and every session with them)
  // before the state the sessions count in, the work pool and the loop;
  // the front context first, since a handler of its may still hold a
  // session that moved to the bulk context.
  net::thread_pool quick(2);
  net::thread_pool large(1);
  ServerState state{clamped, api, quick, large};
  net::io_context bulk;
  net::io_context front;
  state.bulk = &bulk;
  // Both run until stopped, even while they have nothing to do.
  auto bulk_guard = net::make_work_guard(bulk);
  auto front_guard = net::make_work_guard(front);

  tcp::acceptor acceptor(front);
  {
    beast::error_code ec;
    const net::ip::address address = net::ip::make_address(config.host, ec);
    if (ec) return Status::InvalidArgument("--host " + config.host + " is not an IP address");
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(config.port));
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(config.listen_backlog, ec);
    if (!ec) acceptor.non_blocking(true, ec);
    if (ec) {
      return Status::IoError("cannot bind " + config.host + ":" + std::to_string(config.port) +
                             ": " + ec.message());
    }
  }
  const int port = acceptor.local_endpoint().port();
  std::make_shared<Listener>(front, acceptor, state)->Accept();

  // SIGINT/SIGTERM: refuse new requests (503), let in-flight ones finish
  // (up to drain_timeout, or until a second signal), abort the rest, give
  // streams a moment to send their last events, stop.
  auto control = net::make_strand(front);  // the handlers below never run at once
  net::signal_set signals(control, SIGINT, SIGTERM);
  net::steady_timer poll(control);
  bool skip_wait = false;
  Clock::time_point deadline, grace;
  std::function<void()> drain, finish;
  drain = [&] {
    if (skip_wait || (loop.in_flight() == 0 && state.generating.load() == 0) ||
        Clock::now() >= deadline) {
      loop.Stop();  // aborts whatever is left; each session gets its last event
      grace = Clock::now() + std::chrono::seconds(2);
      return finish();
    }
    poll.expires_after(std::chrono::milliseconds(10));
    poll.async_wait([&](beast::error_code) { drain(); });
  };
  finish = [&] {
    if (state.generating.load() == 0 || Clock::now() >= grace) {
      beast::error_code ignored;
      acceptor.close(ignored);
      front.stop();
      bulk.stop();
      return;
    }
    poll.expires_after(std::chrono::milliseconds(5));
    poll.async_wait([&](beast::error_code) { finish(); });
  };
  signals.async_wait([&](beast::error_code ec, int) {
    if (ec) return;
    std::cerr << "folio serve: draining " << loop.in_flight() << " requests\n";
    loop.StopAccepting();
    deadline = Clock::now() + config.drain_timeout;
    signals.async_wait([&](beast::error_code ec2, int) {
      if (!ec2) skip_wait = true;
    });
    drain();
  });

  std::cerr << "folio serve: listening on http://" << config.host << ":" << port << std::endl;
  // A handler that throws (out of memory, say) loses its connection, not
  // the server: the thread logs it and runs on.
  const auto run = [](net::io_context& ioc) {
    for (;;) {
      try {
        ioc.run();
        return;
      } catch (const std::exception& e) {
        std::cerr << "folio serve: a connection failed: " << e.what() << "\n";
      }
    }
  };
  std::vector<std::thread> threads;
  const uint64_t io_threads = std::max<uint64_t>(config.io_threads, 1);
  for (uint64_t i = 0; i < io_threads; ++i) threads.emplace_back(run, std::ref(bulk));
  run(front);
  for (std::thread& t : threads) t.join();
  loop.Stop();
  quick.join();
  large.join();
  std::cerr << "folio serve: stopped\n";
  return Status::Ok();
}

}  // namespace folio::server
