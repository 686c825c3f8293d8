// The request parameters every front end takes under one name, declared
// once. Each row is one RequestParams member with the name clients use
// (HTTP bodies, folio.SamplingParams, CLI flags as --kebab-case), its
// range and its documentation; what reads or writes request parameters
// walks this list instead of spelling the fields out:
//
//   the HTTP parser         server/request.cc      (both endpoints; 400 naming the field)
//   Python's keywords       python/src/llm.cc      (RequestParams(**kwargs), request_params())
//   CLI flags               cli/engine_flags.h     (generate, chat)
//   KV snapshots            engine/snapshot.cc     (written and read back)
//   range checks            Engine::ValidateRequest
//   the docs' table         docs/request-params.md (request_params_test.cc keeps it equal)
//
// So a new parameter is its row here, its effect (the sampler or the
// engine) and its tests. Parameters whose meaning a front end shapes
// (temperature's default, top_k's -1, seed's sign, max_tokens' default,
// stop strings, logprobs, n / best_of, beams, and the grammar that
// structured output's many spellings compile to) are parsed by each front
// end and are not listed.
//
// A row: X(name, type, member, lo, hi, doc). type is double (finite, in
// [lo, hi]), bool, or TokenIds (at most hi ids, each in the vocabulary).
#ifndef FOLIO_ENGINE_REQUEST_PARAMS_H_
#define FOLIO_ENGINE_REQUEST_PARAMS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "folio/core/status.h"
#include "folio/engine/request.h"

namespace folio::engine {

using TokenIds = std::vector<int32_t>;

// Most ids in a request's stop_token_ids.
inline constexpr uint64_t kMaxStopTokenIds = 64;

#define FOLIO_REQUEST_PARAMS(X)                                                              \
  X(min_p, double, sampling.min_p, 0.0, 1.0,                                                 \
    "Drop candidates below min_p times the most likely one's probability (0: off).")         \
  X(stop_token_ids, TokenIds, stop_token_ids, 0, kMaxStopTokenIds,                           \
    "Token ids that end the request when sampled (kept in the output), besides the model's " \
    "end of sequence.")                                                                      \
  X(ignore_eos, bool, ignore_eos, 0, 1,                                                      \
    "Go on past the model's end-of-sequence id and a chat template's end-of-turn ids "       \
    "(stop_token_ids and stop strings still apply).")

// One row's name, range and documentation.
struct RequestParamInfo {
  std::string_view name;
  std::string_view type;  // "number", "boolean" or "token ids"
  double lo = 0;
  double hi = 0;
  std::string_view doc;
};

// A row's type as the docs name it.
template <typename T>
constexpr std::string_view RequestParamTypeName() {
  static_assert(std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                std::is_same_v<T, TokenIds>);
  if constexpr (std::is_same_v<T, double>) return "number";
  if constexpr (std::is_same_v<T, bool>) return "boolean";
  return "token ids";
}

// Calls f(info, member) for every declared parameter of `params`, in
// declaration order; member is a double&, bool& or TokenIds& (const for a
// const params).
template <typename Params, typename F>
void ForEachRequestParam(Params& params, F&& f) {
#define FOLIO_REQUEST_PARAM_VISIT(name, type, member, lo, hi, doc)                 \
  f(RequestParamInfo{#name, RequestParamTypeName<type>(), static_cast<double>(lo), \
                     static_cast<double>(hi), doc},                                \
    params.member);
  FOLIO_REQUEST_PARAMS(FOLIO_REQUEST_PARAM_VISIT)
#undef FOLIO_REQUEST_PARAM_VISIT
}

// Every declared parameter's info, in order.
std::vector<RequestParamInfo> RequestParamInfos();

// Checks every declared parameter's value against its row: numbers finite
// and in range, at most hi token ids, each in [0, vocab_size).
// InvalidArgument or OutOfRange naming the parameter.
Status ValidateRequestParams(const RequestParams& params, uint64_t vocab_size);

// A request's parameters as JSON, as KV snapshots carry them and the
// cluster's front end hands them on: the fields front ends shape
// (temperature, top_k, top_p, max_tokens, seed, eos_token_ids,
// stop_strings, logprobs, top_logprobs), then every declared one under its
// own name. Not carried: n, beams, drafts, prompt logits (a snapshot holds
// one plain stream). Errors: FailedPrecondition naming `grammar` for a
// request that follows one (it cannot be written here, and dropping it
// would silently unconstrain the request where it is read back).
Result<nlohmann::json> RequestParamsToJson(const RequestParams& params);
// Back; errors name `where` and the field. A declared field that is absent
// (written before it was declared) keeps its default.
Result<RequestParams> RequestParamsFromJson(const nlohmann::json& j, const std::string& where);

// The docs' table (docs/request-params.md): a Markdown table of name,
// type, range and documentation, one row per parameter.
std::string RequestParamsMarkdown();

}  // namespace folio::engine

#endif  // FOLIO_ENGINE_REQUEST_PARAMS_H_
