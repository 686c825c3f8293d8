// folio._folio.FrontEnd: `folio serve`'s request and response layers for an
// HTTP front end whose engines run elsewhere (python/folio/cluster/http.py,
// in front of Ray replicas). A request body is parsed and checked by the
// same code as folio serve's (server::PrepareGeneration over
// server::ParseRequest), and a generation's outputs become the same JSON
// bodies and server-sent events (server::GenerationOutput). The model is
// loaded as folio serve loads it, for its tokenizer and chat template; its
// weights are never computed with here.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "bindings.h"
#include "folio/engine/request_params.h"
#include "folio/server/api.h"
#include "folio/server/metrics.h"
#include "folio/server/request.h"
#include "folio/serving/served_model.h"

namespace nb = nanobind;

namespace folio::python {
namespace {

// (status, content type, body, headers): one whole HTTP reply.
using ReplyTuple =
    std::tuple<int, std::string, std::string, std::vector<std::pair<std::string, std::string>>>;

ReplyTuple ToTuple(const server::Reply& r) { return {r.status, r.content_type, r.body, r.headers}; }

server::Endpoint ParseEndpoint(const std::string& endpoint) {
  if (endpoint == "completions") return server::Endpoint::kCompletions;
  if (endpoint == "chat") return server::Endpoint::kChat;
  throw nb::value_error(
      ("endpoint must be 'completions' or 'chat' (got '" + endpoint + "')").c_str());
}

// One accepted generation: the parsed request, and its response as its
// outputs arrive.
class FrontEndGeneration {
 public:
  FrontEndGeneration(server::PreparedGeneration p, server::Metrics& metrics)
      : prompt_(std::move(p.prompt)),
        params_(std::move(p.params)),
        output_(std::move(p.generation), metrics) {}

  const std::vector<int32_t>& prompt() const { return prompt_; }
  const engine::RequestParams& params() const { return params_; }
  bool stream() const { return output_.generation().stream; }
  uint64_t seed() const { return output_.generation().seed; }

  // (reply or None, start the stream, stream data, done): what to write
  // next (server::GenerationStep).
  using Step = std::tuple<std::optional<ReplyTuple>, bool, std::string, bool>;

  // The engine took the request; its prompt has prompt_tokens tokens.
  Step Accept(uint64_t prompt_tokens) {
    server::Event e;
    e.kind = server::Event::Kind::kAccepted;
    e.prompt_tokens = prompt_tokens;
    return Feed(std::move(e));
  }

  // New tokens, their text and log-probs ([(token, logprob, [(id,
  // logprob), ...])]), and the finish ("stop", "length", "abort") once it
  // ends.
  Step Output(std::vector<int32_t> tokens, std::string text,
              const std::vector<std::tuple<int32_t, float, std::vector<std::pair<int32_t, float>>>>&
                  logprobs,
              const std::optional<std::string>& finish) {
    server::Event e;
    e.tokens = std::move(tokens);
    e.text = std::move(text);
    for (const auto& [token, logprob, top] : logprobs) e.logprobs.push_back({token, logprob, top});
    if (finish) {
      for (const engine::FinishReason r :
           {engine::FinishReason::kStop, engine::FinishReason::kLength,
            engine::FinishReason::kAbort}) {
        if (*finish == engine::FinishReasonName(r)) e.finish = r;
      }
      if (e.finish == engine::FinishReason::kNone) {
        throw nb::value_error(("unknown finish reason '" + *finish + "'").c_str());
      }
    }
    return Feed(std::move(e));
  }

  // The engine refused the request (before Accept: a whole error reply,
  // as folio serve's) or it failed (after: an error event).
  Step Error(const std::string& message) {
    server::Event e;
    e.kind = server::Event::Kind::kError;
    e.error = Status::InvalidArgument(message);
    return Feed(std::move(e));
  }

 private:
  Step Feed(server::Event e) {
    std::vector<server::Event> events;
    events.push_back(std::move(e));
    server::GenerationStep s = output_.Feed(events);
    std::optional<ReplyTuple> reply;
    if (s.reply) reply = ToTuple(*s.reply);
    return {std::move(reply), s.start_stream, std::move(s.stream_data), s.done};
  }

  std::vector<int32_t> prompt_;
  engine::RequestParams params_;
  server::GenerationOutput output_;
};

class FrontEnd {
 public:
  FrontEnd(const std::string& model, uint64_t builtin_context,
           const std::optional<std::string>& tokenizer_pre,
           const std::optional<std::string>& served_model_name, uint64_t pool_positions,
           uint64_t default_max_tokens) {
    const bool builtin = model.empty() || model == "builtin";
    if (!builtin && !std::filesystem::exists(model)) {
      throw nb::value_error(("no model at " + model).c_str());
    }
    Result<serving::ServedModel> served = Status::FailedPrecondition("not loaded");
    {
      nb::gil_scoped_release release;
      served = serving::LoadServedModel(model, builtin_context, tokenizer_pre);
    }
    if (!served) ThrowIfModelError(served.error());
    served_ = std::move(*served);
    Result<serving::ChatFormat> chat = served_.MakeChatFormat(std::nullopt);
    if (!chat) ThrowIfRequestError(chat.error().WithContext("the model's chat template"));
    chat_ = std::make_unique<serving::ChatFormat>(std::move(*chat));
    info_ = server::MakeModelInfo(served_, chat_.get(),
                                  served_model_name
                                      ? *served_model_name
                                      : serving::DefaultServedName(model, served_.builtin));
    info_.pool_positions = pool_positions;
    info_.default_max_tokens = default_max_tokens;
  }

  const std::string& name() const { return info_.name; }

  // A generation request's body: an accepted FrontEndGeneration, or the
  // whole error reply folio serve would give.
  std::variant<std::unique_ptr<FrontEndGeneration>, ReplyTuple> Submit(const std::string& endpoint,
                                                                       nb::bytes body) {
    const server::Endpoint ep = ParseEndpoint(endpoint);
    const std::string_view text(body.c_str(), body.size());
    std::variant<server::PreparedGeneration, server::ApiError> prepared =
        server::ApiError{};  // replaced below
    {
      nb::gil_scoped_release release;  // tokenizing a large prompt takes a while
      prepared = server::PrepareGeneration(ep, text, info_, next_id_++);
    }
    if (const server::ApiError* e = std::get_if<server::ApiError>(&prepared)) {
      metrics_.CountResponse(e->http_status);
      return ReplyTuple{e->http_status, "application/json", e->Body(), {}};
    }
    return std::make_unique<FrontEndGeneration>(
        std::move(std::get<server::PreparedGeneration>(prepared)), metrics_);
  }

  // A refusal that is not about the request (429: every replica full; 503:
  // none alive), as folio serve's: Retry-After 1.
  ReplyTuple Refusal(int status, const std::string& message) const {
    const server::ApiError e =
        server::ServerError(status, status == 429 ? "rate_limit_error" : "server_error", message);
    return {status, "application/json", e.Body(), {{"Retry-After", "1"}}};
  }

  std::string ModelsBody() const { return server::ModelsBody(info_); }

 private:
  serving::ServedModel served_;
  std::unique_ptr<serving::ChatFormat> chat_;  // info_ points at it
  server::ModelInfo info_;
  server::Metrics metrics_;
  std::atomic<uint64_t> next_id_{0};
};

}  // namespace

void BindFrontEnd(nb::module_& m) {
  nb::class_<FrontEndGeneration>(m, "FrontEndGeneration",
                                 "An accepted request and its response (FrontEnd.submit).")
      .def_prop_ro("prompt_token_ids", &FrontEndGeneration::prompt)
      .def_prop_ro("stream", &FrontEndGeneration::stream)
      .def_prop_ro("seed", &FrontEndGeneration::seed)
      .def_prop_ro(
          "params",
          [](const FrontEndGeneration& g) {
            // The engine's own JSON form (engine::RequestParamsToJson, as a
            // KV snapshot carries it: the declared parameters by name),
            // plus what a snapshot does not carry.
            const engine::RequestParams& p = g.params();
            Result<nlohmann::json> params = engine::RequestParamsToJson(p);
            if (!params.ok()) ThrowIfRequestError(params.status());
            nlohmann::json& j = *params;
            j["n"] = p.n;
            j["num_beams"] = p.beam.num_beams;
            j["num_draft_tokens"] =
                p.num_draft_tokens ? nlohmann::json(*p.num_draft_tokens) : nlohmann::json(nullptr);
            return nb::cast<nb::dict>(
                nb::module_::import_("json").attr("loads")(nb::str(j.dump().c_str())));
          },
          "The request's parameters as the engine holds them (a dict): "
          "SamplingParams._from_engine makes them a SamplingParams.")
      .def("accept", &FrontEndGeneration::Accept, nb::arg("prompt_tokens"))
      .def("output", &FrontEndGeneration::Output, nb::arg("tokens"), nb::arg("text"),
           nb::arg("logprobs"), nb::arg("finish").none())
      .def("error", &FrontEndGeneration::Error, nb::arg("message"));

  nb::class_<FrontEnd>(m, "FrontEnd",
                       "folio serve's request checks and response format, for a front end whose "
                       "engines run elsewhere (folio.cluster.http).")
      .def(nb::init<const std::string&, uint64_t, const std::optional<std::string>&,
                    const std::optional<std::string>&, uint64_t, uint64_t>(),
           nb::arg("model"), nb::arg("builtin_context"), nb::arg("tokenizer_pre").none(),
           nb::arg("served_model_name").none(), nb::arg("pool_positions"),
           nb::arg("default_max_tokens"))
      .def_prop_ro("name", &FrontEnd::name)
      .def("submit", &FrontEnd::Submit, nb::arg("endpoint"), nb::arg("body"),
           "A request body -> FrontEndGeneration, or (status, content type, body, headers).")
      .def("refusal", &FrontEnd::Refusal, nb::arg("status"), nb::arg("message"))
      .def("models_body", &FrontEnd::ModelsBody);
}

}  // namespace folio::python
