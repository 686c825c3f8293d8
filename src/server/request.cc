#include "folio/server/request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "folio/core/check.h"
#include "folio/core/json_reader.h"
#include "folio/core/str_cat.h"
#include "folio/engine/request_params.h"
#include "folio/sampling/sampler.h"
#include "folio/serving/chat_request.h"
#include "folio/tokenizer/byte_tokenizer.h"
#include "server/json_body.h"

namespace folio::server {
namespace {

// Ordered, so every object keeps the client's key order: a chat template
// that prints a message or a tool schema sees it as the client wrote it,
// as jinja2 under transformers does.
using json = nlohmann::ordered_json;

// The fields each endpoint acts on besides the declared ones
// (engine/request_params.h) and their aliases. Anything else is refused by
// name, except kIgnoredFields.
const std::set<std::string, std::less<>> kCommonFields = {"model",
                                                          "max_tokens",
                                                          "temperature",
                                                          "top_p",
                                                          "top_k",
                                                          "seed",
                                                          "stop",
                                                          "n",
                                                          "logprobs",
                                                          "stream",
                                                          "stream_options",
                                                          "response_format",
                                                          "tools",
                                                          "functions",
                                                          "tool_choice",
                                                          "num_draft_tokens",
                                                          "beam_search",
                                                          "structured_outputs",
                                                          "guided_json",
                                                          "guided_regex",
                                                          "guided_choice",
                                                          "guided_grammar",
                                                          "guided_decoding_backend",
                                                          "guided_whitespace_pattern",
                                                          "grammar",
                                                          "json_schema"};
const std::set<std::string, std::less<>> kCompletionFields = {"prompt", "echo", "best_of",
                                                              "suffix"};
// Accepted and ignored on purpose: they describe the caller or ask the
// provider to keep the exchange, and cannot change a reply here
// (docs/server.md lists them). The type is still checked.
const std::set<std::string, std::less<>> kIgnoredFields = {"user", "metadata", "store",
                                                           "service_tier"};
const std::set<std::string, std::less<>> kChatFields = {"messages",
                                                        "top_logprobs",
                                                        "max_completion_tokens",
                                                        "parallel_tool_calls",
                                                        "chat_template_kwargs",
                                                        "reasoning_effort",
                                                        "split_reasoning"};

ApiError WrongType(std::string_view field, std::string_view expected, const json& got) {
  return InvalidField(std::string(field), WrongTypeMessage(field, expected, got));
}

// An optional field of the body (absent or null leaves `out` empty), read
// with the bounds OrderedJsonReader::Get takes for its type; an error is
// the 400 that names the field.
template <typename T, typename... Bounds>
std::optional<ApiError> Read(const OrderedJsonReader& f, std::string_view key,
                             std::optional<T>& out, const Bounds&... bounds) {
  const Status s = f.Optional(key, out, bounds...);
  if (s.ok()) return std::nullopt;
  return InvalidField(std::string(key), s.message());
}

#define FOLIO_RETURN_API_ERROR(expr)                                    \
  do {                                                                  \
    if (std::optional<ApiError> e_ = (expr); e_) return std::move(*e_); \
  } while (0)

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

// The model's ids for text: its prepended id (built-in byte models), then
// the tokenizer's, with the tokenizer's special tokens when both the model
// and `special` want them. prepend false leaves the prepended id out too.
std::optional<ApiError> EncodeText(const ModelInfo& m, std::string_view text,
                                   std::string_view field, std::vector<int32_t>& out,
                                   bool special = true, bool prepend = true) {
  if (prepend && m.prepend_id) out.push_back(*m.prepend_id);
  Result<std::vector<int32_t>> ids = m.tokenizer->Encode(text, m.add_special_tokens && special);
  if (!ids) {
    return InvalidField(std::string(field),
                        StrCat("'", field, "' does not tokenize: ", ids.error().message()));
  }
  out.insert(out.end(), ids->begin(), ids->end());
  return std::nullopt;
}

// Text too long for the model's context whatever it encodes to: more
// bytes than the most tokens the context holds can stand for
// (Tokenizer::max_bytes_per_token). Refused before it is tokenized, so a
// 1 MiB prompt costs no tokenizer memory; the exact count is checked after.
std::optional<ApiError> CheckTextCanFit(const ModelInfo& m, std::string_view text,
                                        std::string_view field) {
  const std::optional<uint64_t> per_token = m.tokenizer->max_bytes_per_token();
  const uint64_t limit = std::min(m.max_positions, m.pool_positions);
  if (!per_token || text.size() / *per_token <= limit) return std::nullopt;
  return InvalidField(std::string(field),
                      StrCat("'", field, "' has ", text.size(), " bytes, more than ", limit,
                             " tokens of this tokenizer can hold (at most ", *per_token,
                             " bytes each); the limit is ", limit, " tokens (model context ",
                             m.max_positions, ", KV pool ", m.pool_positions, ")"));
}

std::optional<ApiError> ParsePrompt(const json& body, const ModelInfo& m,
                                    std::vector<int32_t>& out) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return InvalidField("prompt", "'prompt' is required");
  const json& p = *it;
  const json* text = p.is_string()                                       ? &p
                     : p.is_array() && p.size() == 1 && p[0].is_string() ? &p[0]
                                                                         : nullptr;
  if (text != nullptr) {
    FOLIO_RETURN_API_ERROR(CheckTextCanFit(m, text->get_ref<const std::string&>(), "prompt"));
    return EncodeText(m, text->get_ref<const std::string&>(), "prompt", out);
  }
  if (!p.is_array()) return WrongType("prompt", "a string or an array of token ids", p);
  for (size_t i = 0; i < p.size(); ++i) {
    const json& t = p[i];
    if (t.is_string() || t.is_array()) {
      return InvalidField("prompt", "only one prompt per request is supported");
    }
    if (!t.is_number_integer()) {
      return InvalidField("prompt",
                          StrCat("prompt token ", i, " must be an integer, got ", JsonTypeName(t)));
    }
    const bool negative = !t.is_number_unsigned() && t.get<int64_t>() < 0;
    if (negative || t.get<uint64_t>() >= m.vocab_size) {
      return InvalidField("prompt", StrCat("prompt token ", i, " has id ", t.dump(),
                                           " outside the vocabulary [0, ", m.vocab_size, ")"));
    }
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return std::nullopt;
}

// A chat request's prompt (serving/chat_request.h: messages, tools,
// template arguments), and how its reply is read.
std::optional<ApiError> ParseMessages(const json& body, const ModelInfo& m,
                                      std::vector<int32_t>& out,
                                      serving::PreparedChat* prepared = nullptr) {
  FOLIO_CHECK(m.chat_format != nullptr, "ModelInfo::chat_format is required for chat");
  std::variant<serving::ChatRequest, serving::FieldError> request = serving::ParseChatRequest(body);
  if (auto* e = std::get_if<serving::FieldError>(&request)) {
    return InvalidField(std::move(e->field), std::move(e->message));
  }
  std::variant<serving::PreparedChat, serving::FieldError> chat =
      serving::PrepareChat(*m.chat_format, std::get<serving::ChatRequest>(request), m.chat_parsers);
  if (auto* e = std::get_if<serving::FieldError>(&chat)) {
    return InvalidField(std::move(e->field), std::move(e->message));
  }
  serving::PreparedChat& p = std::get<serving::PreparedChat>(chat);
  FOLIO_RETURN_API_ERROR(CheckTextCanFit(m, p.prompt.text, "messages"));
  FOLIO_RETURN_API_ERROR(
      EncodeText(m, p.prompt.text, "messages", out, p.prompt.add_special_tokens));
  if (prepared != nullptr) *prepared = std::move(p);
  return std::nullopt;
}

std::optional<ApiError> ParseStop(const json& body, std::vector<std::string>& out) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return std::nullopt;
  std::vector<const json*> items;
  if (it->is_string()) {
    items.push_back(&*it);
  } else if (it->is_array()) {
    if (it->size() > kMaxStopStrings) {
      return InvalidField("stop", StrCat("at most ", kMaxStopStrings, " stop strings"));
    }
    for (const json& s : *it) items.push_back(&s);
  } else {
    return WrongType("stop", "a string or an array of strings", *it);
  }
  for (const json* s : items) {
    if (!s->is_string()) return WrongType("stop", "a string or an array of strings", *s);
    const std::string& str = s->get_ref<const std::string&>();
    if (str.empty()) return InvalidField("stop", "stop strings must not be empty");
    if (str.size() > kMaxStopBytes) {
      return InvalidField("stop", StrCat("stop strings are at most ", kMaxStopBytes, " bytes"));
    }
    out.push_back(str);
  }
  return std::nullopt;
}

// Options folio does not implement, accepted only at their neutral value.
std::optional<ApiError> CheckNeutral(const OrderedJsonReader& f, uint64_t n, bool chat) {
  // OpenAI's legacy function calling (tools replaced it). Tools are chat's
  // (serving/chat_request.h); a completion has no tools to choose from.
  for (const char* key : {"functions", "tools"}) {
    const bool legacy = std::string_view(key) == "functions";
    if (chat && !legacy) continue;
    if (const json* v = f.Find(key); v != nullptr) {
      if (!v->is_array()) return WrongType(key, "an array", *v);
      if (!v->empty()) {
        return InvalidField(key, StrCat("'", key, "' is not supported",
                                        legacy ? " (send 'tools')" : " (tools are for chat)"));
      }
    }
  }
  if (const json* v = f.Find("tool_choice"); v != nullptr && !chat) {
    if (!v->is_string() || (*v != "none" && *v != "auto")) {
      return InvalidField("tool_choice", "'tool_choice' can only be \"none\" or \"auto\"");
    }
  }
  // Completions only (chat refuses them as unknown fields).
  std::optional<bool> echo;
  FOLIO_RETURN_API_ERROR(Read(f, "echo", echo));
  if (echo.value_or(false)) return InvalidField("echo", "'echo' is not supported");
  std::optional<int64_t> best_of;
  FOLIO_RETURN_API_ERROR(
      Read(f, "best_of", best_of, int64_t{1}, static_cast<int64_t>(kMaxChoices)));
  if (best_of && static_cast<uint64_t>(*best_of) < n) {
    return InvalidField("best_of", "best_of must be at least n (n = " + std::to_string(n) + ")");
  }
  std::optional<std::string> suffix;
  FOLIO_RETURN_API_ERROR(Read(f, "suffix", suffix));
  if (suffix && !suffix->empty()) return InvalidField("suffix", "'suffix' is not supported");
  return std::nullopt;
}

// A JSON Schema given as an object or as JSON text (vLLM takes both).
std::optional<ApiError> SchemaValue(const json& v, std::string_view field, json& out) {
  if (v.is_object() || v.is_boolean()) {
    out = v;
    return std::nullopt;
  }
  if (v.is_string()) {
    json parsed = json::parse(v.get_ref<const std::string&>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean())) {
      return InvalidField(std::string(field),
                          StrCat("'", field, "' must be a JSON Schema (an object, or its text)"));
    }
    out = std::move(parsed);
    return std::nullopt;
  }
  return WrongType(field, "a JSON Schema object", v);
}

std::optional<ApiError> ChoiceValue(const json& v, std::string_view field,
                                    std::vector<std::string>& out) {
  if (!v.is_array() || v.empty()) return WrongType(field, "a non-empty array of strings", v);
  for (const json& c : v) {
    if (!c.is_string()) return WrongType(field, "a non-empty array of strings", c);
    out.push_back(c.get<std::string>());
  }
  return std::nullopt;
}

std::optional<ApiError> TextValue(const json& v, std::string_view field, std::string& out) {
  if (!v.is_string()) return WrongType(field, "a string", v);
  out = v.get<std::string>();
  return std::nullopt;
}

// The output constraint, from whichever of the fields clients use the
// body has (at most one): OpenAI's response_format, vLLM's
// structured_outputs and guided_*, llama.cpp's grammar and json_schema.
std::optional<ApiError> ParseStructuredOutput(const OrderedJsonReader& f,
                                              std::optional<grammar::StructuredOutput>& out,
                                              std::string& field) {
  using Kind = grammar::StructuredOutput::Kind;
  std::vector<std::string> given;
  auto take = [&](std::string name) -> grammar::StructuredOutput& {
    given.push_back(std::move(name));
    out.emplace();
    return *out;
  };
  for (const char* key : {"guided_decoding_backend", "guided_whitespace_pattern"}) {
    if (f.Find(key) != nullptr) {
      return InvalidField(key, StrCat("'", key,
                                      "' is not supported (folio has one grammar engine and "
                                      "JSON's whitespace rules)"));
    }
  }
  if (const json* v = f.Find("response_format"); v != nullptr) {
    if (!v->is_object()) return WrongType("response_format", "an object", *v);
    const OrderedJsonReader rf(*v, JsonErrorStyle::kRequest);
    std::optional<std::string> type;
    FOLIO_RETURN_API_ERROR(Read(rf, "type", type));
    if (!type) return InvalidField("response_format", "'response_format' needs a 'type'");
    for (const auto& [key, value] : v->items()) {
      if (key != "type" && !(key == "json_schema" && *type == "json_schema")) {
        return InvalidField("response_format", StrCat("'response_format' has no field ", Quote(key),
                                                      " for type ", Quote(*type)));
      }
    }
    if (*type == "json_object") {
      take("response_format").kind = Kind::kJsonObject;
    } else if (*type == "json_schema") {
      const json* js = rf.Find("json_schema");
      if (js == nullptr || !js->is_object()) {
        return InvalidField("response_format",
                            "'response_format' of type json_schema needs a 'json_schema' object "
                            "({\"name\", \"schema\", \"strict\", \"description\"})");
      }
      for (const auto& [key, value] : js->items()) {
        if (key != "name" && key != "schema" && key != "strict" && key != "description") {
          return InvalidField("response_format",
                              StrCat("'response_format.json_schema' has no field ", Quote(key)));
        }
      }
      const OrderedJsonReader jsf(*js, JsonErrorStyle::kRequest);
      std::optional<std::string> name, description;
      std::optional<bool> strict;
      FOLIO_RETURN_API_ERROR(Read(jsf, "name", name));
      FOLIO_RETURN_API_ERROR(Read(jsf, "description", description));
      FOLIO_RETURN_API_ERROR(Read(jsf, "strict", strict));
      const json* schema = jsf.Find("schema");
      if (schema == nullptr) {
        return InvalidField("response_format", "'response_format.json_schema' needs a 'schema'");
      }
      grammar::StructuredOutput& o = take("response_format");
      o.kind = Kind::kJsonSchema;
      FOLIO_RETURN_API_ERROR(SchemaValue(*schema, "response_format", o.schema));
    } else if (*type != "text") {
      return InvalidField("response_format",
                          StrCat("'response_format' type ", Quote(*type),
                                 " is not one of text, json_object, json_schema"));
    }
  }
  if (const json* v = f.Find("structured_outputs"); v != nullptr) {
    if (!v->is_object()) return WrongType("structured_outputs", "an object", *v);
    size_t kinds = 0;
    for (const auto& [key, value] : v->items()) {
      if (value.is_null()) continue;
      const std::string at = StrCat("structured_outputs.", key);
      if (key == "json") {
        FOLIO_RETURN_API_ERROR(SchemaValue(value, at, take(at).schema));
        out->kind = Kind::kJsonSchema;
      } else if (key == "regex") {
        FOLIO_RETURN_API_ERROR(TextValue(value, at, take(at).text));
        out->kind = Kind::kRegex;
      } else if (key == "choice") {
        FOLIO_RETURN_API_ERROR(ChoiceValue(value, at, take(at).choices));
        out->kind = Kind::kChoice;
      } else if (key == "grammar") {
        FOLIO_RETURN_API_ERROR(TextValue(value, at, take(at).text));
        out->kind = Kind::kGrammar;
      } else if (key == "json_object") {
        if (!value.is_boolean()) return WrongType(at, "a boolean", value);
        if (!value.get<bool>()) continue;
        take(at).kind = Kind::kJsonObject;
      } else {
        return InvalidField(at, StrCat("'", at,
                                       "' is not supported (structured_outputs takes json, "
                                       "regex, choice, grammar or json_object)"));
      }
      ++kinds;
    }
    if (kinds == 0) {
      return InvalidField("structured_outputs",
                          "'structured_outputs' needs one of json, regex, choice, grammar, "
                          "json_object");
    }
  }
  if (const json* v = f.Find("guided_json"); v != nullptr) {
    FOLIO_RETURN_API_ERROR(SchemaValue(*v, "guided_json", take("guided_json").schema));
    out->kind = Kind::kJsonSchema;
  }
  if (const json* v = f.Find("json_schema"); v != nullptr) {
    FOLIO_RETURN_API_ERROR(SchemaValue(*v, "json_schema", take("json_schema").schema));
    out->kind = Kind::kJsonSchema;
  }
  if (const json* v = f.Find("guided_regex"); v != nullptr) {
    FOLIO_RETURN_API_ERROR(TextValue(*v, "guided_regex", take("guided_regex").text));
    out->kind = Kind::kRegex;
  }
  if (const json* v = f.Find("guided_choice"); v != nullptr) {
    FOLIO_RETURN_API_ERROR(ChoiceValue(*v, "guided_choice", take("guided_choice").choices));
    out->kind = Kind::kChoice;
  }
  for (const char* key : {"guided_grammar", "grammar"}) {
    if (const json* v = f.Find(key); v != nullptr) {
      FOLIO_RETURN_API_ERROR(TextValue(*v, key, take(key).text));
      out->kind = Kind::kGrammar;
    }
  }
  if (given.size() > 1) {
    return InvalidField(given[1], StrCat("give one output constraint, not both ", Quote(given[0]),
                                         " and ", Quote(given[1])));
  }
  if (!given.empty()) field = given[0];
  return std::nullopt;
}

// Compiles the constraint (cached); an error names the field it came from.
std::optional<ApiError> CompileStructuredOutput(const ModelInfo& m,
                                                const grammar::StructuredOutput& o,
                                                const std::string& field,
                                                std::shared_ptr<const grammar::Grammar>& out) {
  if (m.grammars == nullptr) {
    return InvalidField(field, StrCat("'", field, "': structured output is not available here"));
  }
  Result<std::shared_ptr<const grammar::Grammar>> g = m.grammars->Get(o);
  if (!g.ok()) {
    return InvalidField(field, StrCat("'", field, "' (", grammar::KindName(o.kind),
                                      ") is refused: ", g.error().message()));
  }
  out = std::move(*g);
  return std::nullopt;
}

// folio's extension "beam_search": {"num_beams": int, "length_penalty":
// number (default 1), "early_stopping": true, false or "never" (default
// false)}, Hugging Face's parameters (engine/beam_search.h).
std::optional<ApiError> ParseBeamSearch(const OrderedJsonReader& f, engine::BeamSearchParams& out) {
  const json* v = f.Find("beam_search");
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) return WrongType("beam_search", "an object", *v);
  for (const auto& [key, value] : v->items()) {
    if (key != "num_beams" && key != "length_penalty" && key != "early_stopping") {
      return InvalidField("beam_search", StrCat("'beam_search' has no field ", Quote(key),
                                                " (num_beams, length_penalty, early_stopping)"));
    }
  }
  const OrderedJsonReader beam(*v, JsonErrorStyle::kRequest);
  std::optional<int64_t> num_beams;
  FOLIO_RETURN_API_ERROR(
      Read(beam, "num_beams", num_beams, int64_t{1}, static_cast<int64_t>(kMaxChoices)));
  if (!num_beams) return InvalidField("beam_search", "'beam_search' needs 'num_beams'");
  std::optional<double> length_penalty;
  FOLIO_RETURN_API_ERROR(Read(beam, "length_penalty", length_penalty, -1e6, 1e6, false));
  out.num_beams = static_cast<uint64_t>(*num_beams);
  out.length_penalty = length_penalty.value_or(1.0);
  out.early_stopping = engine::EarlyStopping::kHeuristic;
  if (const json* e = beam.Find("early_stopping"); e != nullptr) {
    if (e->is_boolean()) {
      out.early_stopping =
          e->get<bool>() ? engine::EarlyStopping::kTrue : engine::EarlyStopping::kHeuristic;
    } else if (e->is_string() && *e == "never") {
      out.early_stopping = engine::EarlyStopping::kNever;
    } else {
      return InvalidField(
          "early_stopping",
          "'early_stopping' must be true, false or \"never\", got " + Clip(e->dump()));
    }
  }
  return std::nullopt;
}

std::string Range(const engine::RequestParamInfo& info) {
  const auto fmt = [](double x) {
    return x == std::floor(x) && std::abs(x) < 1e15 ? std::to_string(static_cast<int64_t>(x))
                                                    : json(x).dump();
  };
  return StrCat(info.lo_open ? "(" : "[", fmt(info.lo), ", ", fmt(info.hi), "]");
}

// A logit_bias: {"token id": bias}, OpenAI's form (keys are strings).
std::optional<ApiError> ParseLogitBias(const OrderedJsonReader& f, std::string_view key,
                                       const engine::RequestParamInfo& info, uint64_t vocab_size,
                                       engine::LogitBias& out) {
  const json* v = f.Find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) return WrongType(key, "an object of token id -> bias", *v);
  if (v->size() > sampling::kMaxLogitBias) {
    return InvalidField(std::string(key), StrCat("'", key, "' has ", v->size(),
                                                 " entries; at most ", sampling::kMaxLogitBias));
  }
  engine::LogitBias bias;
  for (const auto& [id_text, b] : v->items()) {
    uint64_t id = 0;
    const bool digits =
        !id_text.empty() && id_text.size() <= 10 &&
        std::all_of(id_text.begin(), id_text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) id = std::stoull(id_text);
    if (!digits || id >= vocab_size) {
      return InvalidField(std::string(key),
                          StrCat("'", key, "' key ", Quote(id_text),
                                 " is not a token id of the vocabulary [0, ", vocab_size, ")"));
    }
    const bool in_range = b.is_number() && std::isfinite(b.get<double>()) &&
                          b.get<double>() >= info.lo && b.get<double>() <= info.hi;
    if (!in_range) {
      return InvalidField(std::string(key),
                          StrCat("'", key, "' biases must be numbers in ", Range(info), ", got ",
                                 Clip(b.dump()), " for token ", id_text));
    }
    bias[static_cast<int32_t>(id)] = b.get<double>();
  }
  out = std::move(bias);
  return std::nullopt;
}

// An array of at most max_count non-empty strings.
std::optional<ApiError> ParseStrings(const OrderedJsonReader& f, std::string_view key,
                                     uint64_t max_count, std::vector<std::string>& out) {
  const json* v = f.Find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) return WrongType(key, "an array of strings", *v);
  if (v->size() > max_count) {
    return InvalidField(std::string(key),
                        StrCat("'", key, "' has ", v->size(), " strings; at most ", max_count));
  }
  std::vector<std::string> strings;
  for (const json& s : *v) {
    if (!s.is_string() || s.get_ref<const std::string&>().empty()) {
      return InvalidField(std::string(key),
                          StrCat("'", key, "' must hold non-empty strings, got ", Clip(s.dump())));
    }
    strings.push_back(s.get<std::string>());
  }
  out = std::move(strings);
  return std::nullopt;
}

// The name the body gives a declared parameter under: its own, or an
// alias (engine::kRequestParamAliases); both is an error naming them.
std::variant<std::string_view, ApiError> KeyFor(const json& body, std::string_view name) {
  std::string_view key = name;
  for (const auto& [alias, declared] : engine::kRequestParamAliases) {
    if (declared != name) continue;
    auto it = body.find(alias);
    if (it == body.end() || it->is_null()) continue;
    auto own = body.find(name);
    if (key != name || (own != body.end() && !own->is_null())) {
      return InvalidField(std::string(alias),
                          StrCat("give one of ", Quote(name), " and ", Quote(alias), ", not both"));
    }
    key = alias;
  }
  return key;
}

// Every declared parameter (engine/request_params.h) the body gives, by
// its type; the first error wins.
std::optional<ApiError> ParseDeclared(const json& body, const OrderedJsonReader& f,
                                      uint64_t vocab_size, engine::RequestParams& params) {
  std::optional<ApiError> error;
  engine::ForEachRequestParam(params, [&](const engine::RequestParamInfo& info, auto& member) {
    if (error) return;
    std::variant<std::string_view, ApiError> found = KeyFor(body, info.name);
    if (ApiError* e = std::get_if<ApiError>(&found)) {
      error = std::move(*e);
      return;
    }
    const std::string_view key = std::get<std::string_view>(found);
    using T = std::decay_t<decltype(member)>;
    if constexpr (std::is_same_v<T, double>) {
      std::optional<double> v;
      error = Read(f, key, v, info.lo, info.hi, info.lo_open);
      if (v) member = *v;
    } else if constexpr (std::is_same_v<T, int64_t>) {
      std::optional<int64_t> v;
      error = Read(f, key, v, static_cast<int64_t>(info.lo), static_cast<int64_t>(info.hi));
      if (v) member = *v;
    } else if constexpr (std::is_same_v<T, bool>) {
      std::optional<bool> v;
      error = Read(f, key, v);
      if (v) member = *v;
    } else if constexpr (std::is_same_v<T, engine::TokenIds>) {
      std::optional<std::vector<int32_t>> v;
      error = Read(f, key, v, vocab_size, static_cast<uint64_t>(info.hi));
      if (v) member = std::move(*v);
    } else if constexpr (std::is_same_v<T, engine::LogitBias>) {
      error = ParseLogitBias(f, key, info, vocab_size, member);
    } else {
      static_assert(std::is_same_v<T, engine::Strings>);
      error = ParseStrings(f, key, static_cast<uint64_t>(info.hi), member);
    }
  });
  return error;
}

bool IsDeclared(std::string_view key) {
  static const std::vector<engine::RequestParamInfo> infos = engine::RequestParamInfos();
  const std::string_view name = engine::CanonicalRequestParamName(key);
  return std::any_of(infos.begin(), infos.end(),
                     [name](const engine::RequestParamInfo& i) { return i.name == name; });
}

}  // namespace

std::string ApiError::Body() const {
  json e = {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}};
  return json{{"error", e}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

ApiError InvalidField(std::string param, std::string message) {
  ApiError e;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}
// A "model" that names neither the served model nor an alias: 404.
ApiError ModelNotFound(const std::string& name, const ModelInfo& m) {
  ApiError e = InvalidField("model", StrCat("the model ", Quote(name),
                                            " does not exist; this server serves ", Quote(m.name)));
  e.http_status = 404;
  e.code = "model_not_found";
  return e;
}

namespace {

// The body as a JSON object and its "model" checked, or the error.
std::variant<json, ApiError> ObjectWithModel(std::string_view body, const ModelInfo& m) {
  Result<json> parsed = ParseJsonBody(body);
  if (!parsed.ok()) return InvalidField("", parsed.error().message());
  json j = std::move(*parsed);
  if (!j.is_object()) return InvalidField("", "the request body must be a JSON object");
  std::optional<std::string> model_name;
  FOLIO_RETURN_API_ERROR(Read(OrderedJsonReader(j, JsonErrorStyle::kRequest), "model", model_name));
  if (model_name && !m.Serves(*model_name)) return ModelNotFound(*model_name, m);
  return j;
}

}  // namespace

std::variant<std::vector<int32_t>, ApiError> ParseTokenize(std::string_view body,
                                                           const ModelInfo& m) {
  std::variant<json, ApiError> parsed = ObjectWithModel(body, m);
  if (ApiError* e = std::get_if<ApiError>(&parsed)) return std::move(*e);
  const json& j = std::get<json>(parsed);
  std::vector<int32_t> ids;
  if (j.contains("messages") && !j["messages"].is_null()) {
    FOLIO_RETURN_API_ERROR(ParseMessages(j, m, ids));
    return ids;
  }
  const OrderedJsonReader f(j, JsonErrorStyle::kRequest);
  std::optional<std::string> prompt;
  FOLIO_RETURN_API_ERROR(Read(f, "prompt", prompt));
  if (!prompt) return InvalidField("prompt", "'prompt' (a string) or 'messages' is required");
  std::optional<bool> add_special;
  FOLIO_RETURN_API_ERROR(Read(f, "add_special_tokens", add_special));
  const bool special = add_special.value_or(true);
  FOLIO_RETURN_API_ERROR(EncodeText(m, *prompt, "prompt", ids, special, special));
  return ids;
}

std::variant<std::string, ApiError> ParseDetokenize(std::string_view body, const ModelInfo& m) {
  std::variant<json, ApiError> parsed = ObjectWithModel(body, m);
  if (ApiError* e = std::get_if<ApiError>(&parsed)) return std::move(*e);
  const json& j = std::get<json>(parsed);
  auto it = j.find("tokens");
  if (it == j.end() || !it->is_array()) {
    return InvalidField("tokens", "'tokens' (an array of token ids) is required");
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const bool in_range = t.is_number_integer() &&
                          (t.is_number_unsigned() || t.get<int64_t>() >= 0) &&
                          t.get<uint64_t>() < m.vocab_size;
    if (!in_range) {
      return InvalidField("tokens", StrCat("token ", i, " (", Clip(t.dump()),
                                           ") is not an id in [0, ", m.vocab_size, ")"));
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  Result<std::string> text = m.tokenizer->Decode(ids, /*skip_special_tokens=*/false);
  if (!text) return InvalidField("tokens", text.error().message());
  return *text;
}

ModelInfo MakeModelInfo(const serving::ServedModel& served, const serving::ChatFormat* chat_format,
                        std::string name) {
  ModelInfo info;
  info.tokenizer = &served.tokenizer();
  if (served.byte_level()) {
    info.add_special_tokens = false;
    info.prepend_id = tokenizer::ByteTokenizer::kBegin;
  }
  info.eos_token_ids = served.StopTokenIds();
  info.chat_format = chat_format;
  info.grammars = served.grammars.get();
  info.name = std::move(name);
  info.vocab_size = served.model->config().vocab_size;
  info.max_positions = served.model->config().max_positions;
  info.hidden_size = served.model->config().hidden_size;
  info.generate = !served.model->config().IsEncoder() && served.model->config().num_labels == 0;
  info.score = served.model->config().num_labels == 1;
  info.token_types = served.model->config().IsEncoder();
  info.default_pooling = served.DefaultPooling();
  return info;
}

bool ModelInfo::Serves(std::string_view model) const {
  if (model == name) return true;
  for (const std::string& alias : aliases) {
    if (model == alias) return true;
  }
  return false;
}

std::variant<ParsedEmbeddings, ApiError> ParseEmbeddings(std::string_view body,
                                                         const ModelInfo& m) {
  FOLIO_CHECK(m.tokenizer != nullptr);
  Result<json> parsed = ParseJsonBody(body);
  if (!parsed.ok()) return InvalidField("", parsed.error().message());
  const json j = std::move(*parsed);
  if (!j.is_object()) return InvalidField("", "the request body must be a JSON object");
  static const std::set<std::string, std::less<>> kFields = {
      "model",   "input",     "encoding_format",        "dimensions",
      "pooling", "normalize", "truncate_prompt_tokens", "user"};
  for (const auto& [key, value] : j.items()) {
    if (!kFields.contains(key)) {
      return InvalidField(key, StrCat("unknown field ", Quote(key),
                                      ": /v1/embeddings does not take it (docs/embeddings.md "
                                      "lists the fields)"));
    }
  }
  const OrderedJsonReader f(j, JsonErrorStyle::kRequest);
  std::optional<std::string> model_name, user, format, pooling;
  FOLIO_RETURN_API_ERROR(Read(f, "model", model_name));
  if (model_name && !m.Serves(*model_name)) return ModelNotFound(*model_name, m);
  FOLIO_RETURN_API_ERROR(Read(f, "user", user));
  ParsedEmbeddings out;
  FOLIO_RETURN_API_ERROR(Read(f, "encoding_format", format));
  if (format && *format != "float" && *format != "base64") {
    return InvalidField("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
  }
  out.base64 = format == "base64";
  FOLIO_RETURN_API_ERROR(Read(f, "pooling", pooling));
  out.params.pooling = m.default_pooling;
  if (pooling) {
    const std::optional<engine::Pooling> p = engine::PoolingFromName(*pooling);
    if (!p || *p == engine::Pooling::kNone) {
      return InvalidField("pooling", "'pooling' must be \"last\", \"mean\" or \"cls\"");
    }
    out.params.pooling = *p;
  }
  std::optional<bool> normalize;
  FOLIO_RETURN_API_ERROR(Read(f, "normalize", normalize));
  out.params.normalize = normalize.value_or(true);
  std::optional<int64_t> dimensions, truncate;
  FOLIO_RETURN_API_ERROR(Read(f, "dimensions", dimensions, int64_t{1},
                              static_cast<int64_t>(std::max<uint64_t>(m.hidden_size, 1))));
  out.params.dimensions = static_cast<uint64_t>(dimensions.value_or(0));
  FOLIO_RETURN_API_ERROR(Read(f, "truncate_prompt_tokens", truncate, int64_t{1}, INT64_MAX));
  // The inputs: one string or id list, or an array of them.
  const json* input = f.Find("input");
  if (input == nullptr) return InvalidField("input", "'input' is required");
  std::vector<const json*> items;
  const bool one = input->is_string() ||
                   (input->is_array() && !input->empty() && (*input)[0].is_number_integer());
  if (one) {
    items.push_back(input);
  } else if (input->is_array()) {
    for (const json& item : *input) items.push_back(&item);
  } else {
    return WrongType("input", "a string, token ids, or an array of either", *input);
  }
  if (items.empty()) return InvalidField("input", "'input' is empty");
  if (items.size() > kMaxEmbeddingInputs) {
    return InvalidField("input", StrCat("'input' has ", items.size(), " items; at most ",
                                        kMaxEmbeddingInputs, " per request"));
  }
  const uint64_t limit = std::min(m.max_positions, m.pool_positions);
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string field = one ? "input" : StrCat("input[", i, "]");
    const json& item = *items[i];
    std::vector<int32_t> ids;
    if (item.is_string()) {
      if (item.get_ref<const std::string&>().empty()) {
        return InvalidField(field, StrCat("'", field, "' is an empty string"));
      }
      if (!truncate) {
        FOLIO_RETURN_API_ERROR(CheckTextCanFit(m, item.get_ref<const std::string&>(), field));
      }
      FOLIO_RETURN_API_ERROR(EncodeText(m, item.get_ref<const std::string&>(), field, ids));
    } else if (item.is_array()) {
      for (size_t t = 0; t < item.size(); ++t) {
        const json& id = item[t];
        if (!id.is_number_integer() || (!id.is_number_unsigned() && id.get<int64_t>() < 0) ||
            id.get<uint64_t>() >= m.vocab_size) {
          return InvalidField(field,
                              StrCat("'", field, "' token ", t, " is ", id.dump(),
                                     ", not an id in the vocabulary [0, ", m.vocab_size, ")"));
        }
        ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
      }
    } else {
      return WrongType(field, "a string or an array of token ids", item);
    }
    if (ids.empty()) return InvalidField(field, StrCat("'", field, "' has no tokens"));
    if (truncate && ids.size() > static_cast<uint64_t>(*truncate)) {
      ids.erase(ids.begin(), ids.end() - *truncate);
    }
    if (ids.size() > limit) {
      return InvalidField(
          field, StrCat("'", field, "' has ", ids.size(), " tokens; the limit is ", limit,
                        " (model context ", m.max_positions, ", KV pool ", m.pool_positions,
                        "); truncate_prompt_tokens keeps the last ones"));
    }
    out.inputs.push_back(std::move(ids));
  }
  return out;
}

namespace {

// The fields of a score request, each known field once.
std::optional<ApiError> CheckFields(const json& j, const std::set<std::string, std::less<>>& known,
                                    std::string_view endpoint) {
  for (const auto& [key, value] : j.items()) {
    if (!known.contains(key)) {
      return InvalidField(key, StrCat("unknown field ", Quote(key), ": ", endpoint,
                                      " does not take it (docs/embeddings.md lists the fields)"));
    }
  }
  return std::nullopt;
}

// A non-empty string field's text (field names it in errors).
std::variant<std::string, ApiError> Text(const json& v, const std::string& field) {
  if (!v.is_string()) return WrongType(field, "a string", v);
  if (v.get_ref<const std::string&>().empty()) {
    return InvalidField(field, StrCat("'", field, "' is an empty string"));
  }
  return v.get<std::string>();
}

// One pair encoded, checked against the context, added to out.
std::optional<ApiError> AddPair(const ModelInfo& m, const std::string& a, const std::string& b,
                                const std::string& field, ParsedScores& out) {
  Result<tokenizer::Encoding> e = m.tokenizer->EncodePair(a, b);
  if (!e) return InvalidField(field, StrCat("'", field, "': ", e.error().message()));
  const uint64_t limit = std::min(m.max_positions, m.pool_positions);
  if (e->ids.size() > limit) {
    return InvalidField(field, StrCat("'", field, "' makes a pair of ", e->ids.size(),
                                      " tokens; the limit is ", limit, " (model context ",
                                      m.max_positions, ", KV pool ", m.pool_positions, ")"));
  }
  out.inputs.push_back(std::move(e->ids));
  out.token_types.push_back(m.token_types ? std::move(e->type_ids) : std::vector<int32_t>());
  return std::nullopt;
}

std::variant<json, ApiError> ScoreBody(std::string_view body, const ModelInfo& m,
                                       const std::set<std::string, std::less<>>& known,
                                       std::string_view endpoint) {
  FOLIO_CHECK(m.tokenizer != nullptr);
  Result<json> parsed = ParseJsonBody(body);
  if (!parsed.ok()) return InvalidField("", parsed.error().message());
  json j = std::move(*parsed);
  if (!j.is_object()) return InvalidField("", "the request body must be a JSON object");
  FOLIO_RETURN_API_ERROR(CheckFields(j, known, endpoint));
  const OrderedJsonReader f(j, JsonErrorStyle::kRequest);
  std::optional<std::string> model_name;
  FOLIO_RETURN_API_ERROR(Read(f, "model", model_name));
  if (model_name && !m.Serves(*model_name)) return ModelNotFound(*model_name, m);
  return j;
}

}  // namespace

std::variant<ParsedScores, ApiError> ParseRerank(std::string_view body, const ModelInfo& m) {
  static const std::set<std::string, std::less<>> kFields = {"model", "query", "documents", "top_n",
                                                             "return_documents"};
  std::variant<json, ApiError> parsed = ScoreBody(body, m, kFields, "/v1/rerank");
  if (ApiError* e = std::get_if<ApiError>(&parsed)) return std::move(*e);
  const json& j = std::get<json>(parsed);
  const OrderedJsonReader f(j, JsonErrorStyle::kRequest);
  ParsedScores out;
  std::optional<bool> return_documents;
  FOLIO_RETURN_API_ERROR(Read(f, "return_documents", return_documents));
  out.return_documents = return_documents.value_or(true);
  const json* query = f.Find("query");
  if (query == nullptr) return InvalidField("query", "'query' is required");
  std::variant<std::string, ApiError> q = Text(*query, "query");
  if (ApiError* e = std::get_if<ApiError>(&q)) return std::move(*e);
  const json* documents = f.Find("documents");
  if (documents == nullptr) return InvalidField("documents", "'documents' is required");
  if (!documents->is_array()) return WrongType("documents", "an array", *documents);
  if (documents->empty()) return InvalidField("documents", "'documents' is empty");
  if (documents->size() > kMaxEmbeddingInputs) {
    return InvalidField("documents", StrCat("'documents' has ", documents->size(),
                                            " items; at most ", kMaxEmbeddingInputs));
  }
  std::optional<int64_t> top_n;
  FOLIO_RETURN_API_ERROR(Read(f, "top_n", top_n, int64_t{1}, kI64Max));
  out.top_n = std::min<uint64_t>(static_cast<uint64_t>(top_n.value_or(kI64Max)), documents->size());
  for (size_t i = 0; i < documents->size(); ++i) {
    const std::string field = StrCat("documents[", i, "]");
    const json& d = (*documents)[i];
    const json* text = &d;
    if (d.is_object()) {
      if (d.size() != 1 || !d.contains("text")) {
        return InvalidField(field, StrCat("'", field, "' must be a string or {\"text\": string}"));
      }
      text = &d["text"];
    }
    std::variant<std::string, ApiError> t = Text(*text, field);
    if (ApiError* e = std::get_if<ApiError>(&t)) return std::move(*e);
    FOLIO_RETURN_API_ERROR(
        AddPair(m, std::get<std::string>(q), std::get<std::string>(t), field, out));
    out.documents.push_back(std::move(std::get<std::string>(t)));
  }
  return out;
}

std::variant<ParsedScores, ApiError> ParseScore(std::string_view body, const ModelInfo& m) {
  static const std::set<std::string, std::less<>> kFields = {"model", "text_1", "text_2"};
  std::variant<json, ApiError> parsed = ScoreBody(body, m, kFields, "/v1/score");
  if (ApiError* e = std::get_if<ApiError>(&parsed)) return std::move(*e);
  const json& j = std::get<json>(parsed);
  std::vector<std::string> sides[2];
  for (int s = 0; s < 2; ++s) {
    const std::string name = s == 0 ? "text_1" : "text_2";
    auto it = j.find(name);
    if (it == j.end()) return InvalidField(name, StrCat("'", name, "' is required"));
    if (it->is_array()) {
      if (it->empty()) return InvalidField(name, StrCat("'", name, "' is empty"));
      if (it->size() > kMaxEmbeddingInputs) {
        return InvalidField(
            name, StrCat("'", name, "' has ", it->size(), " items; at most ", kMaxEmbeddingInputs));
      }
      for (size_t i = 0; i < it->size(); ++i) {
        std::variant<std::string, ApiError> t = Text((*it)[i], StrCat(name, "[", i, "]"));
        if (ApiError* e = std::get_if<ApiError>(&t)) return std::move(*e);
        sides[s].push_back(std::move(std::get<std::string>(t)));
      }
    } else {
      std::variant<std::string, ApiError> t = Text(*it, name);
      if (ApiError* e = std::get_if<ApiError>(&t)) return std::move(*e);
      sides[s].push_back(std::move(std::get<std::string>(t)));
    }
  }
  const bool lists = j["text_1"].is_array() && j["text_2"].is_array();
  if (lists && sides[0].size() != sides[1].size()) {
    return InvalidField("text_2", StrCat("'text_1' has ", sides[0].size(), " texts and 'text_2' ",
                                         sides[1].size(), ": two lists pair by index"));
  }
  const size_t pairs = std::max(sides[0].size(), sides[1].size());
  ParsedScores out;
  for (size_t i = 0; i < pairs; ++i) {
    const std::string& a = sides[0][sides[0].size() == 1 && !lists ? 0 : i];
    const std::string& b = sides[1][sides[1].size() == 1 && !lists ? 0 : i];
    // The pair's field: the list side's item (text_2's when both are).
    const std::string field = j["text_2"].is_array()   ? StrCat("text_2[", i, "]")
                              : j["text_1"].is_array() ? StrCat("text_1[", i, "]")
                                                       : std::string("text_2");
    FOLIO_RETURN_API_ERROR(AddPair(m, a, b, field, out));
  }
  return out;
}

ParseResult ParseRequest(Endpoint endpoint, std::string_view body, const ModelInfo& m) {
  FOLIO_CHECK(m.tokenizer != nullptr);
  Result<json> parsed = ParseJsonBody(body);
  if (!parsed.ok()) return InvalidField("", parsed.error().message());
  const json j = std::move(*parsed);
  if (!j.is_object()) return InvalidField("", "the request body must be a JSON object");
  const bool chat = endpoint == Endpoint::kChat;
  const OrderedJsonReader f(j, JsonErrorStyle::kRequest);
  ParsedRequest r;
  r.endpoint = endpoint;
  for (const auto& [key, value] : j.items()) {
    if (!kCommonFields.contains(key) && !(chat ? kChatFields : kCompletionFields).contains(key) &&
        !IsDeclared(key) && !kIgnoredFields.contains(key)) {
      return InvalidField(key, StrCat("unknown field ", Quote(key), ": ",
                                      chat ? "/v1/chat/completions" : "/v1/completions",
                                      " does not take it (folio refuses what it would not act "
                                      "on; docs/server.md lists the fields)"));
    }
  }

  std::optional<std::string> model_name;
  FOLIO_RETURN_API_ERROR(Read(f, "model", model_name));
  if (model_name && !m.Serves(*model_name)) return ModelNotFound(*model_name, m);
  std::optional<std::string> user;
  FOLIO_RETURN_API_ERROR(Read(f, "user", user));
  std::optional<bool> store;
  FOLIO_RETURN_API_ERROR(Read(f, "store", store));
  std::optional<std::string> service_tier;
  FOLIO_RETURN_API_ERROR(Read(f, "service_tier", service_tier));
  if (const json* v = f.Find("metadata"); v != nullptr && !v->is_object()) {
    return WrongType("metadata", "an object", *v);
  }
  std::optional<int64_t> n;
  FOLIO_RETURN_API_ERROR(Read(f, "n", n, int64_t{1}, static_cast<int64_t>(kMaxChoices)));
  r.n = static_cast<uint64_t>(n.value_or(1));
  FOLIO_RETURN_API_ERROR(CheckNeutral(f, r.n, chat));
  std::optional<int64_t> best_of;
  if (!chat) {
    FOLIO_RETURN_API_ERROR(
        Read(f, "best_of", best_of, int64_t{1}, static_cast<int64_t>(kMaxChoices)));
  }
  r.params.n = best_of ? static_cast<uint64_t>(*best_of) : r.n;
  FOLIO_RETURN_API_ERROR(ParseBeamSearch(f, r.params.beam));
  const bool beams = r.params.beam.num_beams > 0;
  if (beams && best_of) return InvalidField("best_of", "'best_of' does not apply to beam search");

  std::optional<double> temperature, top_p;
  FOLIO_RETURN_API_ERROR(Read(f, "temperature", temperature, 0.0, kMaxTemperature, false));
  FOLIO_RETURN_API_ERROR(Read(f, "top_p", top_p, 0.0, 1.0, /*lo_open=*/true));
  FOLIO_RETURN_API_ERROR(ParseDeclared(j, f, m.vocab_size, r.params));
  std::optional<int64_t> top_k, seed;
  FOLIO_RETURN_API_ERROR(Read(f, "top_k", top_k, int64_t{-1}, kI64Max));
  if (const json* s = f.Find("seed"); s != nullptr && s->is_number_unsigned()) {
    seed = static_cast<int64_t>(s->get<uint64_t>());  // the full uint64 range
  } else {
    FOLIO_RETURN_API_ERROR(Read(f, "seed", seed, std::numeric_limits<int64_t>::min(), kI64Max));
  }
  // Beam search scores the model's own log-probabilities: no temperature
  // unless one is given (which the engine then refuses by name).
  r.params.sampling.temperature = temperature.value_or(beams ? 0.0 : 1.0);
  r.params.sampling.top_p = top_p.value_or(1.0);
  r.params.sampling.top_k = top_k && *top_k > 0 ? static_cast<uint64_t>(*top_k) : 0;
  r.params.seed = static_cast<uint64_t>(seed.value_or(0));
  r.seed_given = seed.has_value();
  // folio's extension: speculative decoding for this request, at most this
  // many draft tokens per step (0: off; absent: the server's
  // --speculative-tokens). The output is the same.
  std::optional<int64_t> num_draft_tokens;
  FOLIO_RETURN_API_ERROR(Read(f, "num_draft_tokens", num_draft_tokens, int64_t{0},
                              static_cast<int64_t>(engine::kMaxDraftTokens)));
  if (num_draft_tokens) r.params.num_draft_tokens = static_cast<uint64_t>(*num_draft_tokens);

  std::optional<bool> stream;
  FOLIO_RETURN_API_ERROR(Read(f, "stream", stream));
  r.stream = stream.value_or(false);
  if (r.stream && r.params.n > r.n) {
    return InvalidField("best_of", "best_of > n cannot be streamed");
  }
  if (r.stream && beams) {
    return InvalidField("beam_search",
                        "beam search cannot be streamed (beams change until the end)");
  }
  if (const json* v = f.Find("stream_options"); v != nullptr) {
    if (!v->is_object()) return WrongType("stream_options", "an object", *v);
    const OrderedJsonReader options(*v, JsonErrorStyle::kRequest);
    std::optional<bool> include_usage;
    FOLIO_RETURN_API_ERROR(Read(options, "include_usage", include_usage));
    r.include_usage = include_usage.value_or(false);
  }
  FOLIO_RETURN_API_ERROR(ParseStop(j, r.params.stop_strings));
  std::optional<grammar::StructuredOutput> structured;
  FOLIO_RETURN_API_ERROR(ParseStructuredOutput(f, structured, r.grammar_field));

  const auto max_top = static_cast<int64_t>(sampling::kMaxTopLogprobs);
  if (chat) {
    std::optional<bool> logprobs;
    FOLIO_RETURN_API_ERROR(Read(f, "logprobs", logprobs));
    std::optional<int64_t> top_logprobs;
    FOLIO_RETURN_API_ERROR(Read(f, "top_logprobs", top_logprobs, int64_t{0}, int64_t{max_top}));
    if (top_logprobs && !logprobs.value_or(false)) {
      return InvalidField("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    }
    r.logprobs = logprobs.value_or(false);
    r.params.top_logprobs = static_cast<uint64_t>(top_logprobs.value_or(0));
  } else {
    std::optional<int64_t> logprobs;
    FOLIO_RETURN_API_ERROR(Read(f, "logprobs", logprobs, int64_t{0}, int64_t{max_top}));
    r.logprobs = logprobs.has_value();
    r.params.top_logprobs = static_cast<uint64_t>(logprobs.value_or(0));
  }
  // Ranking best_of samples needs every token's log-probability.
  r.params.logprobs = r.logprobs || r.params.n > r.n;

  std::optional<int64_t> max_tokens;
  const char* max_tokens_field = "max_tokens";
  FOLIO_RETURN_API_ERROR(Read(f, "max_tokens", max_tokens, int64_t{1}, kI64Max));
  if (chat && !max_tokens) {
    max_tokens_field = "max_completion_tokens";
    FOLIO_RETURN_API_ERROR(Read(f, "max_completion_tokens", max_tokens, int64_t{1}, kI64Max));
  }

  serving::PreparedChat prepared;
  FOLIO_RETURN_API_ERROR(chat ? ParseMessages(j, m, r.prompt, &prepared)
                              : ParsePrompt(j, m, r.prompt));
  r.chat_output = std::move(prepared.output);
  // A harmony reply's parser reads its special tokens.
  if (r.chat_output.harmony) r.params.skip_special_tokens = false;
  const char* prompt_field = chat ? "messages" : "prompt";
  if (r.prompt.empty()) return InvalidField(prompt_field, "the prompt has no tokens");
  // The engine caches prompt + max_tokens - 1 positions (the last token is
  // never fed back), in the model's context and in the pool.
  const uint64_t limit = std::min(m.max_positions, m.pool_positions);
  if (r.prompt.size() > limit) {
    return InvalidField(prompt_field, StrCat("the prompt has ", r.prompt.size(),
                                             " tokens; the limit is ", limit, " (model context ",
                                             m.max_positions, ", KV pool ", m.pool_positions, ")"));
  }
  const uint64_t room = limit - r.prompt.size() + 1;
  if (max_tokens && static_cast<uint64_t>(*max_tokens) > room) {
    return InvalidField(
        max_tokens_field,
        StrCat("prompt of ", r.prompt.size(), " tokens + ", max_tokens_field, " ", *max_tokens,
               " exceeds the limit of ", limit, " positions (model context ", m.max_positions,
               ", KV pool ", m.pool_positions, ")"));
  }
  uint64_t chat_default = room;
  if (m.default_max_tokens > 0) chat_default = std::min(chat_default, m.default_max_tokens);
  r.params.max_tokens = max_tokens ? static_cast<uint64_t>(*max_tokens)
                                   : (chat ? chat_default : std::min<uint64_t>(16, room));

  r.params.eos_token_ids = m.eos_token_ids;
  if (chat) {
    const std::vector<int32_t>& ends = m.chat_format->end_of_turn_ids();
    r.params.eos_token_ids.insert(r.params.eos_token_ids.end(), ends.begin(), ends.end());
  }
  // Compiled last: the cheap checks refuse a bad request first.
  if (prepared.tool_grammar) {
    // tool_choice "required" or a named function forces the call; a strict
    // tool under "auto" holds a call to its schema once it starts.
    if (structured) {
      return InvalidField(r.grammar_field, StrCat("'", r.grammar_field,
                                                  "' cannot be combined with a tool_choice "
                                                  "that forces a call, or with a strict tool"));
    }
    if (beams) {
      return InvalidField("tool_choice",
                          "a tool_choice that forces a call, or a strict tool, cannot be "
                          "combined with beam_search");
    }
    r.grammar_field = "tool_choice";
    grammar::StructuredOutput tool_call;
    tool_call.kind = grammar::StructuredOutput::Kind::kGrammar;
    tool_call.text = std::move(*prepared.tool_grammar);
    FOLIO_RETURN_API_ERROR(CompileStructuredOutput(m, tool_call, "tool_choice", r.params.grammar));
  }
  if (structured) {
    if (beams) {
      return InvalidField(r.grammar_field,
                          StrCat("'", r.grammar_field, "' cannot be combined with beam_search"));
    }
    FOLIO_RETURN_API_ERROR(
        CompileStructuredOutput(m, *structured, r.grammar_field, r.params.grammar));
  }
  // The engine's own checks, so nothing it would refuse gets past here.
  if (Status s = r.params.sampling.Validate(); !s.ok()) return InvalidField("", s.message());
  return r;
}

}  // namespace folio::server
