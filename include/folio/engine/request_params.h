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
// A row: X(name, type, member, lo, hi, doc). type is
//   double       finite, in [lo, hi] (lo written Exclusive(v): in (v, hi]);
//   int64_t      an integer in [lo, hi];
//   bool;
//   TokenIds     at most hi ids, each in the vocabulary;
//   LogitBias    token id -> bias in [lo, hi], at most kMaxLogitBias
//                entries, each id in the vocabulary;
//   Strings      at most hi strings, none empty.
#ifndef FOLIO_ENGINE_REQUEST_PARAMS_H_
#define FOLIO_ENGINE_REQUEST_PARAMS_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "folio/core/status.h"
#include "folio/engine/request.h"
#include "folio/sampling/logits_processors.h"

namespace folio::engine {

using TokenIds = std::vector<int32_t>;
using LogitBias = std::map<int32_t, double>;
using Strings = std::vector<std::string>;

// Most ids in a request's stop_token_ids.
inline constexpr uint64_t kMaxStopTokenIds = 64;
// Most ids in allowed_token_ids (the largest vocabularies have 256k tokens).
inline constexpr uint64_t kMaxAllowedTokenIds = uint64_t{1} << 18;
// Most bad_words.
inline constexpr uint64_t kMaxBadWords = 128;
// Integers a count or window may take (int32's range, as llama.cpp's).
inline constexpr int64_t kMaxCount = 2147483647;

// A lower bound a value must exceed rather than reach.
struct Bound {
  double value = 0;
  bool open = false;
};
constexpr Bound Exclusive(double v) { return {v, true}; }
constexpr Bound LowBound(Bound b) { return b; }
constexpr Bound LowBound(double v) { return {v, false}; }

#define FOLIO_REQUEST_PARAMS(X)                                                                 \
  X(min_p, double, sampling.min_p, 0.0, 1.0,                                                    \
    "Drop candidates below min_p times the most likely one's probability (0: off).")            \
  X(typical_p, double, sampling.typical_p, 0.0, 1.0,                                            \
    "Locally typical sampling: keep the candidates closest to the distribution's entropy "      \
    "until they hold typical_p of its mass (1: off).")                                          \
  X(top_n_sigma, double, sampling.top_n_sigma, 0.0, 100.0,                                      \
    "Drop candidates whose logit is below the top logit minus top_n_sigma standard deviations " \
    "of the logits (0: off).")                                                                  \
  X(repetition_penalty, double, processors.repetition_penalty, Exclusive(0.0), 100.0,           \
    "Divide the positive logits of tokens in the prompt and output (within penalty_last_n) by " \
    "this, multiply the negative ones (1: off).")                                               \
  X(presence_penalty, double, processors.presence_penalty, -2.0, 2.0,                           \
    "Subtract this from the logit of every token the output already holds (0: off).")           \
  X(frequency_penalty, double, processors.frequency_penalty, -2.0, 2.0,                         \
    "Subtract this times its count in the output from each token's logit (0: off).")            \
  X(penalty_last_n, int64_t, processors.penalty_last_n, -1, kMaxCount,                          \
    "The penalties see only the last penalty_last_n tokens of prompt and output (-1: all, 0: "  \
    "none).")                                                                                   \
  X(logit_bias, LogitBias, processors.logit_bias, -100.0, 100.0,                                \
    "Token id -> a bias added to its logit (-100 bans it in practice).")                        \
  X(allowed_token_ids, TokenIds, processors.allowed_token_ids, 0, kMaxAllowedTokenIds,          \
    "Only these tokens can be selected (empty: every token).")                                  \
  X(bad_words, Strings, bad_words, 0, kMaxBadWords,                                             \
    "Words the output never completes: each word's tokens, with and without a leading space, "  \
    "never end the text.")                                                                      \
  X(min_tokens, int64_t, processors.min_tokens, 0, kMaxCount,                                   \
    "No end-of-sequence or stop token, and no stop string, before this many output tokens.")    \
  X(stop_token_ids, TokenIds, stop_token_ids, 0, kMaxStopTokenIds,                              \
    "Token ids that end the request when sampled (kept in the output), besides the model's "    \
    "end of sequence.")                                                                         \
  X(ignore_eos, bool, ignore_eos, 0, 1,                                                         \
    "Go on past the model's end-of-sequence id and a chat template's end-of-turn ids "          \
    "(stop_token_ids and stop strings still apply).")                                           \
  X(include_stop_str_in_output, bool, include_stop_str_in_output, 0, 1,                         \
    "Keep the stop string that ended the text at its end.")                                     \
  X(dry_multiplier, double, processors.dry.multiplier, 0.0, 100.0,                              \
    "DRY: penalize tokens that would extend a repeat of earlier text (0: off).")                \
  X(dry_base, double, processors.dry.base, 1.0, 100.0,                                          \
    "DRY: the penalty grows as dry_base to the power of the repeat's length beyond "            \
    "dry_allowed_length.")                                                                      \
  X(dry_allowed_length, int64_t, processors.dry.allowed_length, 0, kMaxCount,                   \
    "DRY: repeats up to this many tokens go unpenalized.")                                      \
  X(dry_penalty_last_n, int64_t, processors.dry.penalty_last_n, -1, kMaxCount,                  \
    "DRY: look for repeats in the last dry_penalty_last_n tokens (-1: all, 0: off).")           \
  X(dry_sequence_breakers, Strings, dry_sequence_breakers, 0, sampling::kMaxDryBreakers,        \
    "DRY: strings a repeat never extends across.")                                              \
  X(xtc_probability, double, sampling.xtc_probability, 0.0, 1.0,                                \
    "XTC: the chance, each token, of excluding the top choices (0: off).")                      \
  X(xtc_threshold, double, sampling.xtc_threshold, 0.0, 1.0,                                    \
    "XTC: the candidates at least this likely, except the least likely of them, are the top "   \
    "choices (above 0.5: off).")

// Other names clients send for a declared parameter (llama.cpp's server):
// accepted by the HTTP parser and as CLI flags; giving both names is an
// error naming them.
inline constexpr std::pair<std::string_view, std::string_view> kRequestParamAliases[] = {
    {"repeat_penalty", "repetition_penalty"},
    {"repeat_last_n", "penalty_last_n"},
};

// One row's name, range and documentation.
struct RequestParamInfo {
  std::string_view name;
  std::string_view type;  // "number", "integer", "boolean", "token ids", "token bias", "strings"
  double lo = 0;
  double hi = 0;
  bool lo_open = false;  // the value must exceed lo
  std::string_view doc;
};

// A row's type as the docs name it.
template <typename T>
constexpr std::string_view RequestParamTypeName() {
  static_assert(std::is_same_v<T, double> || std::is_same_v<T, int64_t> ||
                std::is_same_v<T, bool> || std::is_same_v<T, TokenIds> ||
                std::is_same_v<T, LogitBias> || std::is_same_v<T, Strings>);
  if constexpr (std::is_same_v<T, double>) return "number";
  if constexpr (std::is_same_v<T, int64_t>) return "integer";
  if constexpr (std::is_same_v<T, bool>) return "boolean";
  if constexpr (std::is_same_v<T, TokenIds>) return "token ids";
  if constexpr (std::is_same_v<T, LogitBias>) return "token bias";
  return "strings";
}

// Calls f(info, member) for every declared parameter of `params`, in
// declaration order; member is a double&, int64_t&, bool&, TokenIds&,
// LogitBias& or Strings& (const for a const params).
template <typename Params, typename F>
void ForEachRequestParam(Params& params, F&& f) {
#define FOLIO_REQUEST_PARAM_VISIT(name, type, member, lo, hi, doc)                   \
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(params.member)>, type>); \
  f(RequestParamInfo{#name, RequestParamTypeName<type>(), LowBound(lo).value,        \
                     static_cast<double>(hi), LowBound(lo).open, doc},               \
    params.member);
  FOLIO_REQUEST_PARAMS(FOLIO_REQUEST_PARAM_VISIT)
#undef FOLIO_REQUEST_PARAM_VISIT
}

// The declared name an alias stands for, or the name itself.
std::string_view CanonicalRequestParamName(std::string_view name);

// Every declared parameter's info, in order.
std::vector<RequestParamInfo> RequestParamInfos();

// Checks every declared parameter's value against its row: numbers finite
// and in range, integers in range, at most hi token ids (or strings, none
// empty), each id in [0, vocab_size); a logit_bias of at most
// kMaxLogitBias entries, ids in the vocabulary, biases in range.
// InvalidArgument or OutOfRange naming the parameter and its range.
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
