#include "folio/server/api.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "folio/core/splitmix64.h"
#include "folio/core/str_cat.h"

namespace folio::server {
namespace {

using nlohmann::json;

constexpr std::string_view kModelPrefix = "/v1/models/";

Reply JsonReply(int status, std::string body) {
  Reply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Reply ErrorReply(const ApiError& e) { return JsonReply(e.http_status, e.Body()); }

std::string Sse(std::string_view data) { return "data: " + std::string(data) + "\n\n"; }

// A seed for a request that gave none: different for every request, so
// identical requests at temperature > 0 differ, as with OpenAI's API.
uint64_t DrawSeed() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  return rng();
}

}  // namespace

bool IsPublicPage(std::string_view path) {
  return path == "/" || path == "/ui/app.js" || path == "/ui/app.css";
}

std::string RetryAfterSeconds() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  return std::to_string(1 + rng() % 4);
}

namespace {

json ModelJson(const ModelInfo& model, const std::string& id) {
  return json{
      {"id", id},
      {"object", "model"},
      {"created", 0},
      {"owned_by", "folio"},
      {"max_model_len", model.max_positions},
      {"chat_template",
       model.chat_format ? std::string(serving::ChatFormatSourceName(model.chat_format->source()))
                         : std::string("none")}};
}

// An embedding as JSON: an array of its floats, each in the shortest text
// that reads back as the same float32, or base64 of its little-endian
// float32 bytes as a string (OpenAI's encoding_format "base64").
std::string EmbeddingJson(const std::vector<float>& v, bool base64) {
  std::string out;
  if (base64) {
    static constexpr std::string_view kAlphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bytes(v.size() * sizeof(float), '\0');
    for (size_t i = 0; i < v.size(); ++i) {
      const auto u = std::bit_cast<uint32_t>(v[i]);
      for (size_t b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<char>((u >> (8 * b)) & 0xff);
    }
    out = "\"";
    for (size_t i = 0; i < bytes.size(); i += 3) {
      uint32_t chunk = 0;
      const size_t n = std::min<size_t>(3, bytes.size() - i);
      for (size_t k = 0; k < 3; ++k) {
        chunk = chunk << 8 | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
      }
      for (size_t k = 0; k < 4; ++k) {
        out += k <= n ? kAlphabet[(chunk >> (18 - 6 * k)) & 63] : '=';
      }
    }
    return out + "\"";
  }
  out = "[";
  char text[32];
  for (size_t i = 0; i < v.size(); ++i) {
    if (i != 0) out += ", ";
    const std::to_chars_result r = std::to_chars(text, text + sizeof text, v[i]);
    out.append(text, r.ptr);
  }
  return out + "]";
}

}  // namespace

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

std::string ModelsBody(const ModelInfo& model) {
  json data = json::array({ModelJson(model, model.name)});
  for (const std::string& alias : model.aliases) data.push_back(ModelJson(model, alias));
  return json{{"object", "list"}, {"data", data}}.dump();
}

std::variant<PreparedGeneration, ApiError> PrepareGeneration(Endpoint endpoint,
                                                             std::string_view body,
                                                             const ModelInfo& model, uint64_t id) {
  ParseResult parsed = ParseRequest(endpoint, body, model);
  if (ApiError* e = std::get_if<ApiError>(&parsed)) return std::move(*e);
  ParsedRequest& r = std::get<ParsedRequest>(parsed);
  if (!r.seed_given) r.params.seed = DrawSeed();
  PreparedGeneration p;
  Generation& g = p.generation;
  g.seed = r.params.seed;
  g.stream = r.stream;
  g.include_usage = r.include_usage;
  g.n = r.n;
  g.samples = r.params.n;
  g.ctx.endpoint = endpoint;
  g.ctx.id = (endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-") + std::to_string(id);
  g.ctx.created = static_cast<int64_t>(std::time(nullptr));
  g.ctx.model = model.name;
  g.ctx.logprobs = r.logprobs;
  g.ctx.tokenizer = model.tokenizer;
  g.ctx.chat_output = std::move(r.chat_output);
  // Call ids: from the seed and the response's number, so they differ
  // between requests.
  g.ctx.chat_output.call_id_seed = SplitMix64(g.seed ^ (id * 0x9e3779b97f4a7c15ULL)).NextU64();
  p.prompt = std::move(r.prompt);
  p.params = std::move(r.params);
  return p;
}

ApiError ServerError(int status, std::string type, std::string message) {
  ApiError e;
  e.http_status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  return e;
}

Route FindRoute(std::string_view method, std::string_view path) {
  const bool get = method == "GET";
  const bool post = method == "POST";
  const auto pick = [&](bool ok, Route r) { return ok ? r : Route::kMethodNotAllowed; };
  if (path == "/v1/completions") return pick(post, Route::kCompletions);
  if (path == "/v1/chat/completions") return pick(post, Route::kChat);
  if (path == "/v1/embeddings") return pick(post, Route::kEmbeddings);
  if (path == "/v1/rerank" || path == "/rerank") return pick(post, Route::kRerank);
  if (path == "/v1/score" || path == "/score") return pick(post, Route::kScore);
  if (path == "/v1/models") return pick(get, Route::kModels);
  if (path.starts_with(kModelPrefix) && path.size() > kModelPrefix.size()) {
    return pick(get, Route::kModel);
  }
  if (path == "/tokenize") return pick(post, Route::kTokenize);
  if (path == "/detokenize") return pick(post, Route::kDetokenize);
  if (path == "/health") return pick(get, Route::kHealth);
  if (IsPublicPage(path)) return pick(get, Route::kPage);
  if (path == "/metrics") return pick(get, Route::kMetrics);
  return Route::kNotFound;
}

GenerationOutput::GenerationOutput(Generation g, Metrics& metrics)
    : g_(std::move(g)),
      embeddings_(g_.inputs),
      metrics_(metrics),
      builder_(g_.ctx, g_.samples, g_.n) {}

GenerationStep GenerationOutput::FeedEmbeddings(std::vector<Event>& events) {
  GenerationStep step;
  for (Event& e : events) {
    if (done_) break;
    const uint64_t i = e.key - g_.key;
    // Refused or failed, or cut short by the server stopping.
    if (e.kind == Event::Kind::kError ||
        (e.finish == engine::FinishReason::kAbort && !e.error.ok())) {
      ApiError err = FromEngineStatus(e.error);
      const char* field = g_.pooled == Generation::Pooled::kEmbeddings ? "input"
                          : g_.pooled == Generation::Pooled::kRerank   ? "documents"
                                                                       : "text_2";
      if (err.http_status == 400) {
        err.param = g_.inputs == 1 ? std::string(field) : StrCat(field, "[", i, "]");
      }
      metrics_.CountResponse(err.http_status);
      step.reply = ErrorReply(err);
      done_ = true;
      break;
    }
    if (e.kind != Event::Kind::kOutput || e.embedding.empty() || i >= g_.inputs) continue;
    if (embeddings_[i].empty()) ++embedded_;
    embeddings_[i] = std::move(e.embedding);
    if (embedded_ < g_.inputs) continue;
    metrics_.CountResponse(200);
    step.reply = JsonReply(200, PooledBody());
    done_ = true;
  }
  events.clear();
  step.done = done_;
  return step;
}

std::string GenerationOutput::PooledBody() const {
  const std::string usage = StrCat(", \"usage\": {\"prompt_tokens\": ", g_.prompt_tokens,
                                   ", \"total_tokens\": ", g_.prompt_tokens, "}}");
  const std::string model = json(g_.ctx.model).dump();
  if (g_.pooled == Generation::Pooled::kEmbeddings) {
    std::string body = "{\"object\": \"list\", \"data\": [";
    for (uint64_t k = 0; k < g_.inputs; ++k) {
      body += StrCat(k == 0 ? "" : ", ", "{\"object\": \"embedding\", \"index\": ", k,
                     ", \"embedding\": ", EmbeddingJson(embeddings_[k], g_.base64), "}");
    }
    return body + StrCat("], \"model\": ", model, usage);
  }
  // A cross-encoder's one logit per pair, as a probability of relevance
  // (sentence-transformers' CrossEncoder and vLLM apply the same sigmoid).
  std::vector<double> scores(g_.inputs);
  for (uint64_t k = 0; k < g_.inputs; ++k) {
    scores[k] = 1.0 / (1.0 + std::exp(-static_cast<double>(embeddings_[k].at(0))));
  }
  if (g_.pooled == Generation::Pooled::kScore) {
    std::string body = StrCat("{\"id\": \"score-", g_.key, "\", \"object\": \"list\", \"data\": [");
    for (uint64_t k = 0; k < g_.inputs; ++k) {
      body += StrCat(k == 0 ? "" : ", ", "{\"index\": ", k,
                     ", \"object\": \"score\", \"score\": ", json(scores[k]).dump(), "}");
    }
    return body + StrCat("], \"model\": ", model, usage);
  }
  std::vector<uint64_t> order(g_.inputs);
  std::iota(order.begin(), order.end(), uint64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](uint64_t a, uint64_t b) { return scores[a] > scores[b]; });
  std::string body =
      StrCat("{\"id\": \"rerank-", g_.key, "\", \"model\": ", model, ", \"results\": [");
  for (uint64_t r = 0; r < std::min(g_.top_n, g_.inputs); ++r) {
    const uint64_t k = order[r];
    body += StrCat(r == 0 ? "" : ", ", "{\"index\": ", k,
                   ", \"relevance_score\": ", json(scores[k]).dump());
    if (g_.return_documents) {
      body += StrCat(", \"document\": {\"text\": ", json(g_.documents[k]).dump(), "}");
    }
    body += "}";
  }
  return body + "]" + usage;
}

GenerationStep GenerationOutput::Feed(std::vector<Event>& events) {
  if (g_.inputs > 0) return FeedEmbeddings(events);
  GenerationStep step;
  for (const Event& e : events) {
    if (done_) break;
    if (!accepted_) {
      if (e.kind == Event::Kind::kError) {
        ApiError err = FromEngineStatus(e.error);
        metrics_.CountResponse(err.http_status);
        step.reply = ErrorReply(err);
        done_ = true;
        break;
      }
      accepted_ = true;
      prompt_tokens_ = e.prompt_tokens;
      if (g_.stream) {
        metrics_.CountResponse(200);
        step.start_stream = true;
      }
      continue;
    }
    // Cut short by the server stopping: an error (503), not a finish_reason
    // "abort", which is no OpenAI value.
    const bool stopped = e.finish == engine::FinishReason::kAbort && !e.error.ok();
    if (e.kind == Event::Kind::kError || stopped) {
      const ApiError err = stopped ? FromEngineStatus(e.error)
                                   : ServerError(500, "server_error", e.error.ToString());
      done_ = true;
      if (g_.stream) {
        step.stream_data += Sse(err.Body()) + Sse("[DONE]");
      } else {
        metrics_.CountResponse(err.http_status);
        step.reply = ErrorReply(err);
      }
      break;
    }
    cached_tokens_ = std::max(cached_tokens_, e.cached_prompt_tokens);
    for (const std::string& chunk : builder_.Add(e)) {
      if (g_.stream) step.stream_data += Sse(chunk);
    }
    if (!builder_.done()) continue;  // every choice has its finish
    done_ = true;
    if (g_.stream) {
      if (g_.include_usage) {
        step.stream_data += Sse(builder_.UsageChunk(prompt_tokens_, cached_tokens_));
      }
      step.stream_data += Sse("[DONE]");
    } else {
      metrics_.CountResponse(200);
      step.reply = JsonReply(200, builder_.Body(prompt_tokens_, cached_tokens_));
    }
    break;
  }
  events.clear();
  step.done = done_;
  if (step.reply) step.reply->headers.emplace_back("X-Folio-Seed", std::to_string(g_.seed));
  return step;
}

Api::Api(const ModelInfo& model, serving::EngineThread& thread, Metrics& metrics)
    : model_(model), thread_(thread), metrics_(metrics) {}

Reply Api::Refuse(const ApiError& e) {
  metrics_.CountResponse(e.http_status);
  return ErrorReply(e);
}

Reply Api::RefuseRetryLater(const ApiError& e) {
  Reply reply = Refuse(e);
  reply.headers.emplace_back("Retry-After", RetryAfterSeconds());
  return reply;
}

Reply Api::Answer(Route route, std::string_view path, std::string_view body) {
  switch (route) {
    case Route::kHealth: {
      const bool up = thread_.accepting();
      return JsonReply(up ? 200 : 503, json{{"status", up ? "ok" : "draining"}}.dump());
    }
    case Route::kPage: {
      const std::string_view name = path == "/" ? "index.html" : path.substr(4);
      Reply r = JsonReply(200, std::string(WebAsset(name)));
      r.content_type = name.ends_with(".html") ? "text/html; charset=utf-8"
                       : name.ends_with(".js") ? "text/javascript; charset=utf-8"
                                               : "text/css; charset=utf-8";
      // Model output is shown on this page: only the page's own scripts
      // and styles run, and it talks to this server alone.
      r.headers.emplace_back("Content-Security-Policy",
                             "default-src 'none'; script-src 'self'; style-src 'self'; "
                             "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                             "form-action 'none'; frame-ancestors 'none'");
      r.headers.emplace_back("X-Content-Type-Options", "nosniff");
      r.headers.emplace_back("Referrer-Policy", "no-referrer");
      r.headers.emplace_back("Cache-Control", "no-cache");
      metrics_.CountResponse(200);
      return r;
    }
    case Route::kMetrics: {
      Reply r = JsonReply(200, metrics_.Render(thread_.counters()));
      r.content_type = "text/plain; version=0.0.4";
      return r;
    }
    case Route::kModels: {
      metrics_.CountResponse(200);
      return JsonReply(200, ModelsBody(model_));
    }
    case Route::kModel: {
      const std::string id(path.substr(kModelPrefix.size()));
      if (!model_.Serves(id)) {
        ApiError e = InvalidField("model", "the model '" + id.substr(0, 200) + "' does not exist");
        e.http_status = 404;
        e.code = "model_not_found";
        return Refuse(e);
      }
      metrics_.CountResponse(200);
      return JsonReply(200, ModelJson(model_, id).dump());
    }
    case Route::kTokenize: {
      auto parsed = ParseTokenize(body, model_);
      if (const ApiError* e = std::get_if<ApiError>(&parsed)) return Refuse(*e);
      const auto& ids = std::get<std::vector<int32_t>>(parsed);
      metrics_.CountResponse(200);
      return JsonReply(
          200, json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", model_.max_positions}}
                   .dump());
    }
    case Route::kDetokenize: {
      auto parsed = ParseDetokenize(body, model_);
      if (const ApiError* e = std::get_if<ApiError>(&parsed)) return Refuse(*e);
      metrics_.CountResponse(200);
      return JsonReply(200, json{{"prompt", std::get<std::string>(parsed)}}.dump(
                                -1, ' ', false, json::error_handler_t::replace));
    }
    case Route::kMethodNotAllowed:
      return Refuse(
          ServerError(405, "invalid_request_error",
                      "this method is not allowed on " + std::string(path.substr(0, 200))));
    case Route::kNotFound:
    case Route::kCompletions:
    case Route::kChat:
    case Route::kEmbeddings:
    case Route::kRerank:
    case Route::kScore:
      break;
  }
  return Refuse(ServerError(404, "invalid_request_error",
                            "no such endpoint: " + std::string(path.substr(0, 200))));
}

std::variant<Generation, Reply> Api::SubmitEmbeddings(std::string_view body) {
  if (!model_.embed) {
    return Refuse(InvalidField("model", StrCat("the model '", model_.name,
                                               "' serves generation only (folio serve --task "
                                               "generate): no embeddings")));
  }
  std::variant<ParsedEmbeddings, ApiError> parsed = ParseEmbeddings(body, model_);
  if (const ApiError* e = std::get_if<ApiError>(&parsed)) return Refuse(*e);
  ParsedEmbeddings& p = std::get<ParsedEmbeddings>(parsed);
  Generation g;
  g.base64 = p.base64;
  return SubmitPooled(std::move(g), std::move(p.inputs), p.params, {});
}

std::variant<Generation, Reply> Api::SubmitPooled(Generation g,
                                                  std::vector<std::vector<int32_t>> inputs,
                                                  const engine::RequestParams& params,
                                                  std::vector<std::vector<int32_t>> token_types) {
  g.inputs = inputs.size();
  g.key = next_id_.fetch_add(g.inputs);
  g.ctx.model = model_.name;
  g.channel = std::make_shared<Channel>();
  // All at once (all or none), so the inputs are batched together.
  std::vector<serving::EngineThread::Submission> all;
  for (uint64_t i = 0; i < g.inputs; ++i) {
    g.prompt_tokens += inputs[i].size();
    engine::RequestParams p = params;
    if (!token_types.empty()) p.token_types = std::move(token_types[i]);
    all.push_back({g.key + i, std::move(inputs[i]), std::move(p), g.channel});
  }
  const Status submitted = thread_.SubmitAll(std::move(all));
  if (!submitted.ok()) {
    const bool full = submitted.code() == StatusCode::kResourceExhausted;
    return RefuseRetryLater(ServerError(
        full ? 429 : 503, full ? "rate_limit_error" : "server_error", submitted.message()));
  }
  return g;
}

std::variant<Generation, Reply> Api::SubmitScores(Route route, std::string_view body) {
  if (!model_.score) {
    return Refuse(InvalidField(
        "model", StrCat("the model '", model_.name,
                        "' scores no text pairs: /v1/rerank and /v1/score need a cross-encoder "
                        "(a *ForSequenceClassification with one label)")));
  }
  std::variant<ParsedScores, ApiError> parsed =
      route == Route::kRerank ? ParseRerank(body, model_) : ParseScore(body, model_);
  if (const ApiError* e = std::get_if<ApiError>(&parsed)) return Refuse(*e);
  ParsedScores& p = std::get<ParsedScores>(parsed);
  Generation g;
  g.pooled = route == Route::kRerank ? Generation::Pooled::kRerank : Generation::Pooled::kScore;
  g.documents = std::move(p.documents);
  g.top_n = p.top_n;
  g.return_documents = p.return_documents;
  engine::RequestParams params;
  params.pooling = engine::Pooling::kClassify;
  params.normalize = false;
  return SubmitPooled(std::move(g), std::move(p.inputs), params, std::move(p.token_types));
}

std::variant<Generation, Reply> Api::Submit(Endpoint endpoint, std::string_view body) {
  if (!model_.generate) {
    return Refuse(InvalidField(
        "model", StrCat("the model '", model_.name,
                        "' serves embeddings only (an encoder, or folio serve --task embed): "
                        "no completions or chat")));
  }
  const uint64_t key = next_id_++;
  std::variant<PreparedGeneration, ApiError> prepared =
      PrepareGeneration(endpoint, body, model_, key);
  if (const ApiError* e = std::get_if<ApiError>(&prepared)) return Refuse(*e);
  PreparedGeneration& p = std::get<PreparedGeneration>(prepared);
  Generation g = std::move(p.generation);
  g.key = key;
  g.channel = std::make_shared<Channel>();
  const Status submitted =
      thread_.Submit({key, std::move(p.prompt), std::move(p.params), g.channel});
  if (!submitted.ok()) {
    const bool full = submitted.code() == StatusCode::kResourceExhausted;
    Reply reply = RefuseRetryLater(ServerError(
        full ? 429 : 503, full ? "rate_limit_error" : "server_error", submitted.message()));
    reply.headers.emplace_back("X-Folio-Seed", std::to_string(g.seed));
    return reply;
  }
  return g;
}

}  // namespace folio::server
