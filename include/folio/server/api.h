// The server's endpoints, apart from any transport: what each route answers,
// and how a generation's engine events become a reply or a stream. The HTTP
// front end (http_server.cc) reads requests off sockets, checks their
// headers, and hands method, path and body here; it writes back what comes
// out. Nothing here blocks on a client.
#ifndef FOLIO_SERVER_API_H_
#define FOLIO_SERVER_API_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "folio/core/status.h"
#include "folio/server/channel.h"
#include "folio/server/metrics.h"
#include "folio/server/request.h"
#include "folio/server/response.h"
#include "folio/serving/engine_thread.h"

namespace folio::server {

// One whole HTTP reply.
struct Reply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // beyond Content-Type
};

ApiError ServerError(int status, std::string type, std::string message);

// A Retry-After value for a 429 or 503: whole seconds drawn from [1, 4], so
// clients refused together do not all come back in the same second.
std::string RetryAfterSeconds();

enum class Route {
  kNotFound,
  kMethodNotAllowed,
  kCompletions,
  kChat,
  kEmbeddings,
  kRerank,  // /v1/rerank, /rerank
  kScore,   // /v1/score, /score
  kModels,
  kModel,  // /v1/models/{id}
  kTokenize,
  kDetokenize,
  kHealth,
  kMetrics,
  kPage,  // GET /, /ui/app.js, /ui/app.css: the chat page (web/)
};

// The chat page's file `name` (index.html, app.js, app.css), embedded at
// build time; empty for any other name.
std::string_view WebAsset(std::string_view name);
// Whether a request for `path` needs no API key: the page's own files,
// which hold no data and must load before the user can enter a key.
bool IsPublicPage(std::string_view path);

// The route of a method and a path (query string already removed).
Route FindRoute(std::string_view method, std::string_view path);

// A generation the engine accepted into its queue.
struct Generation {
  uint64_t key = 0;  // the engine thread's name for it (and the response id's number)
  std::shared_ptr<Channel> channel;
  ResponseContext ctx;
  bool stream = false;
  bool include_usage = false;
  uint64_t seed = 0;
  uint64_t n = 1;        // choices returned
  uint64_t samples = 1;  // samples generated (best_of)
  // /v1/embeddings: one engine request per input, keys key .. key +
  // inputs - 1, on one channel; 0 for a generation.
  uint64_t inputs = 0;
  bool base64 = false;         // encoding_format "base64"
  uint64_t prompt_tokens = 0;  // the inputs' tokens, for usage
  // What the inputs' vectors become: embeddings, or relevance scores
  // (sigmoid of each pair's logit) as /v1/rerank or /v1/score lists them.
  enum class Pooled : uint8_t { kEmbeddings, kRerank, kScore };
  Pooled pooled = Pooled::kEmbeddings;
  std::vector<std::string> documents;  // rerank: returned with the results
  uint64_t top_n = 0;                  // rerank: results returned
  bool return_documents = true;
};

// A generation request parsed and checked (ParseRequest), its seed drawn
// when it gave none, its response context set: what Api::Submit hands the
// engine loop, and what a front end whose engines run elsewhere (the Python
// cluster's, python/folio/cluster) starts from. id numbers the response
// ("cmpl-<id>"). An ApiError when the request is refused.
struct PreparedGeneration {
  Generation generation;  // no channel yet
  std::vector<int32_t> prompt;
  engine::RequestParams params;
};
std::variant<PreparedGeneration, ApiError> PrepareGeneration(Endpoint endpoint,
                                                             std::string_view body,
                                                             const ModelInfo& model, uint64_t id);
// GET /v1/models: the served name and its aliases.
std::string ModelsBody(const ModelInfo& model);
// An engine's refusal of a parsed request at admission, as the client sees it.
ApiError FromEngineStatus(const Status& s);

// What a generation's events say to write next.
struct GenerationStep {
  std::optional<Reply> reply;  // a whole reply (non-streaming, or refused before it began)
  bool start_stream = false;   // write the stream's header first
  std::string stream_data;     // server-sent events to write
  bool done = false;           // nothing more will come
};

// Turns one generation's events, in order, into its reply: a whole JSON
// body, or server-sent events (one chunk per output, a usage chunk when
// asked, then [DONE]). Before the engine accepts the request an error
// event becomes a whole error reply, streaming or not.
// For /v1/embeddings (Generation::inputs > 0) the events of every input
// become one whole reply once each has its vector: OpenAI's list of
// embeddings, floats written in their shortest exact form or base64 of
// little-endian float32; an engine refusal of any input is the reply.
class GenerationOutput {
 public:
  GenerationOutput(Generation g, Metrics& metrics);
  GenerationStep Feed(std::vector<Event>& events);
  const Generation& generation() const { return g_; }
  bool done() const { return done_; }

 private:
  GenerationStep FeedEmbeddings(std::vector<Event>& events);
  std::string PooledBody() const;  // every input's vector in, the reply's JSON

  Generation g_;
  std::vector<std::vector<float>> embeddings_;  // by input
  uint64_t embedded_ = 0;
  Metrics& metrics_;
  ResponseBuilder builder_;
  bool accepted_ = false;
  bool done_ = false;
  uint64_t prompt_tokens_ = 0;
  uint64_t cached_tokens_ = 0;  // from the prefix cache (usage.prompt_tokens_details)
};

class Api {
 public:
  // model, thread and metrics must outlive the Api.
  Api(const ModelInfo& model, serving::EngineThread& thread, Metrics& metrics);

  // Every route but the two generation ones. path is the request's path
  // (for kModel, the id follows "/v1/models/"). Counted in the metrics,
  // except /health and /metrics.
  Reply Answer(Route route, std::string_view path, std::string_view body);
  // Parses a generation request, gives it a seed if it has none and hands
  // it to the engine thread. May take a while (tokenization of a large
  // prompt): call it off the I/O threads.
  std::variant<Generation, Reply> Submit(Endpoint endpoint, std::string_view body);
  // The same for POST /v1/embeddings: every input is its own engine
  // request (Generation::inputs).
  std::variant<Generation, Reply> SubmitEmbeddings(std::string_view body);
  // The same for POST /v1/rerank and /v1/score (route): one engine request
  // per text pair, scored by the model's classification head.
  std::variant<Generation, Reply> SubmitScores(Route route, std::string_view body);
  // An error reply, counted.
  Reply Refuse(const ApiError& e);
  // Refuse, for a 429 or 503 the client may retry: with Retry-After.
  Reply RefuseRetryLater(const ApiError& e);

  serving::EngineThread& thread() { return thread_; }
  Metrics& metrics() { return metrics_; }

 private:
  // Hands a pooled request's inputs to the engine thread together (all or
  // none, so they share steps), keys g.key .. g.key + inputs - 1, each
  // with params and its token types (token_types empty: none).
  std::variant<Generation, Reply> SubmitPooled(Generation g,
                                               std::vector<std::vector<int32_t>> inputs,
                                               const engine::RequestParams& params,
                                               std::vector<std::vector<int32_t>> token_types);

  const ModelInfo& model_;
  serving::EngineThread& thread_;
  Metrics& metrics_;
  std::atomic<uint64_t> next_id_{0};
};

}  // namespace folio::server

#endif  // FOLIO_SERVER_API_H_
