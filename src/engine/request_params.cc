#include "folio/engine/request_params.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "folio/core/json_reader.h"

namespace folio::engine {

bool IsStopToken(const RequestParams& params, int32_t token) {
  const auto in = [token](const std::vector<int32_t>& ids) {
    return std::find(ids.begin(), ids.end(), token) != ids.end();
  };
  return in(params.stop_token_ids) || (!params.ignore_eos && in(params.eos_token_ids));
}

std::vector<int32_t> StopTokenIds(const RequestParams& params) {
  std::vector<int32_t> ids;
  const auto add = [&ids](const std::vector<int32_t>& more) {
    for (const int32_t t : more) {
      if (std::find(ids.begin(), ids.end(), t) == ids.end()) ids.push_back(t);
    }
  };
  add(params.stop_token_ids);
  if (!params.ignore_eos) add(params.eos_token_ids);
  return ids;
}

std::string_view CanonicalRequestParamName(std::string_view name) {
  for (const auto& [alias, declared] : kRequestParamAliases) {
    if (alias == name) return declared;
  }
  return name;
}

std::vector<RequestParamInfo> RequestParamInfos() {
  std::vector<RequestParamInfo> infos;
  RequestParams p;
  ForEachRequestParam(p, [&](const RequestParamInfo& info, auto&) { infos.push_back(info); });
  return infos;
}

namespace {

// A logit_bias is written as OpenAI sends it: {"token id": bias}.
Status ReadLogitBias(const nlohmann::json& v, const std::string& name, LogitBias& out) {
  if (!v.is_object()) return Status::InvalidArgument(name + " is not an object");
  out.clear();
  for (const auto& [key, bias] : v.items()) {
    char* end = nullptr;
    const long id = std::strtol(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || id < 0 || id > std::numeric_limits<int32_t>::max() ||
        !bias.is_number()) {
      return Status::InvalidArgument(name + " holds \"" + key + "\": " + bias.dump() +
                                     ", not a token id and a number");
    }
    out[static_cast<int32_t>(id)] = bias.get<double>();
  }
  return Status::Ok();
}

std::string Num(double x) {
  // Integral bounds exactly (int32's 2147483647, not 2.14748e+09).
  if (x == std::floor(x) && std::abs(x) < 1e15) return std::to_string(static_cast<int64_t>(x));
  std::ostringstream s;
  s << x;
  return s.str();
}

std::string Range(const RequestParamInfo& info) {
  // (Appended, not "literal" + string: GCC 12's -Wrestrict false positive.)
  std::string range(info.lo_open ? "(" : "[");
  range.append(Num(info.lo)).append(", ").append(Num(info.hi)).append("]");
  return range;
}

bool InRange(const RequestParamInfo& info, double v) {
  return std::isfinite(v) && (info.lo_open ? v > info.lo : v >= info.lo) && v <= info.hi;
}

struct Checker {
  uint64_t vocab_size;
  Status status;

  void operator()(const RequestParamInfo& info, const double& v) {
    if (!status.ok()) return;
    if (!InRange(info, v)) {
      status = Status::InvalidArgument(std::string(info.name) + " must be in " + Range(info) +
                                       " (got " + Num(v) + ")");
    }
  }
  void operator()(const RequestParamInfo& info, const int64_t& v) {
    if (!status.ok()) return;
    if (!InRange(info, static_cast<double>(v))) {
      status = Status::InvalidArgument(std::string(info.name) + " must be an integer in " +
                                       Range(info) + " (got " + std::to_string(v) + ")");
    }
  }
  void operator()(const RequestParamInfo&, const bool&) {}
  void operator()(const RequestParamInfo& info, const Strings& v) {
    if (!status.ok()) return;
    if (static_cast<double>(v.size()) > info.hi) {
      status = Status::InvalidArgument(std::string(info.name) + " has " + std::to_string(v.size()) +
                                       " strings; at most " + Num(info.hi));
      return;
    }
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].empty()) {
        status = Status::InvalidArgument(std::string(info.name) + "[" + std::to_string(i) +
                                         "] is empty");
        return;
      }
    }
  }
  void operator()(const RequestParamInfo& info, const LogitBias& bias) {
    if (!status.ok()) return;
    if (bias.size() > sampling::kMaxLogitBias) {
      status =
          Status::InvalidArgument(std::string(info.name) + " has " + std::to_string(bias.size()) +
                                  " entries; at most " + std::to_string(sampling::kMaxLogitBias));
      return;
    }
    for (const auto& [id, b] : bias) {
      if (id < 0 || static_cast<uint64_t>(id) >= vocab_size) {
        status = Status::OutOfRange(std::string(info.name) + " key " + std::to_string(id) +
                                    " is not a token id of the vocabulary [0, " +
                                    std::to_string(vocab_size) + ")");
        return;
      }
      if (!InRange(info, b)) {
        status = Status::InvalidArgument(std::string(info.name) + "[" + std::to_string(id) +
                                         "] must be in " + Range(info) + " (got " + Num(b) + ")");
        return;
      }
    }
  }
  void operator()(const RequestParamInfo& info, const TokenIds& ids) {
    if (!status.ok()) return;
    if (static_cast<double>(ids.size()) > info.hi) {
      status =
          Status::InvalidArgument(std::string(info.name) + " has " + std::to_string(ids.size()) +
                                  " ids; at most " + Num(info.hi));
      return;
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || static_cast<uint64_t>(ids[i]) >= vocab_size) {
        status = Status::OutOfRange(std::string(info.name) + "[" + std::to_string(i) +
                                    "] = " + std::to_string(ids[i]) +
                                    " is outside the vocabulary of " + std::to_string(vocab_size));
        return;
      }
    }
  }
};

}  // namespace

Status ValidateRequestParams(const RequestParams& params, uint64_t vocab_size) {
  Checker check{vocab_size, Status::Ok()};
  ForEachRequestParam(params, check);
  return check.status;
}

Result<nlohmann::json> RequestParamsToJson(const RequestParams& p) {
  if (p.grammar) {
    return Status::FailedPrecondition(
        "grammar (structured output): a compiled grammar has no JSON form here, so a request "
        "that follows one cannot be carried (KV snapshots, the cluster's front end)");
  }
  nlohmann::json j = {{"temperature", p.sampling.temperature},
                      {"top_k", p.sampling.top_k},
                      {"top_p", p.sampling.top_p},
                      {"max_tokens", p.max_tokens},
                      {"seed", p.seed},
                      {"eos_token_ids", p.eos_token_ids},
                      {"stop_strings", p.stop_strings},
                      {"logprobs", p.logprobs},
                      {"top_logprobs", p.top_logprobs},
                      {"skip_special_tokens", p.skip_special_tokens}};
  ForEachRequestParam(p, [&j](const RequestParamInfo& info, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, LogitBias>) {
      nlohmann::json bias = nlohmann::json::object();
      for (const auto& [id, b] : value) bias[std::to_string(id)] = b;
      j[std::string(info.name)] = std::move(bias);
    } else {
      j[std::string(info.name)] = value;
    }
  });
  return j;
}

Result<RequestParams> RequestParamsFromJson(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return Status::InvalidArgument(where + ": params is not an object");
  const JsonReader f(j, JsonErrorStyle::kFile, where + " params");
  RequestParams p;
  FOLIO_ASSIGN_OR_RETURN(p.sampling.temperature, f.F64("temperature"));
  FOLIO_ASSIGN_OR_RETURN(p.sampling.top_k, f.U64("top_k"));
  FOLIO_ASSIGN_OR_RETURN(p.sampling.top_p, f.F64("top_p"));
  FOLIO_ASSIGN_OR_RETURN(p.max_tokens, f.U64("max_tokens"));
  FOLIO_ASSIGN_OR_RETURN(p.seed, f.U64("seed"));
  if (j.contains("eos_token_ids")) {
    FOLIO_ASSIGN_OR_RETURN(p.eos_token_ids, f.TokenIds("eos_token_ids"));
  }
  FOLIO_ASSIGN_OR_RETURN(p.stop_strings, f.Strings("stop_strings"));
  FOLIO_ASSIGN_OR_RETURN(p.logprobs, f.Bool("logprobs"));
  FOLIO_ASSIGN_OR_RETURN(p.top_logprobs, f.U64("top_logprobs"));
  if (j.contains("skip_special_tokens")) {
    FOLIO_ASSIGN_OR_RETURN(p.skip_special_tokens, f.Bool("skip_special_tokens"));
  }
  // A declared field absent (a snapshot from before it was declared) keeps
  // its default.
  Status declared;
  ForEachRequestParam(p, [&](const RequestParamInfo& info, auto& value) {
    const std::string name(info.name);
    if (!declared.ok() || !j.contains(name)) return;
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, LogitBias>) {
      declared = ReadLogitBias(j.at(name), name, value);
    } else {
      Result<T> v = f.Get<T>(name);
      if (v.ok()) {
        value = std::move(*v);
      } else {
        declared = v.error();
      }
    }
  });
  FOLIO_RETURN_IF_ERROR(declared);
  return p;
}

std::string RequestParamsMarkdown() {
  std::ostringstream out;
  out << "| parameter | type | range | default | what it does |\n|---|---|---|---|---|\n";
  RequestParams defaults;
  ForEachRequestParam(defaults, [&](const RequestParamInfo& info, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    out << "| `" << info.name << "` | " << info.type << " | ";
    if constexpr (std::is_same_v<T, double> || std::is_same_v<T, int64_t>) {
      out << Range(info) << " | " << Num(static_cast<double>(value));
    } else if constexpr (std::is_same_v<T, bool>) {
      out << "true, false | " << (value ? "true" : "false");
    } else if constexpr (std::is_same_v<T, TokenIds>) {
      out << "up to " << Num(info.hi) << " ids | []";
    } else if constexpr (std::is_same_v<T, LogitBias>) {
      out << "up to " << sampling::kMaxLogitBias << " ids, each bias in " << Range(info) << " | {}";
    } else {
      // A string list's default as JSON, its escapes shown as typed.
      std::string shown = nlohmann::json(value).dump();
      out << "up to " << Num(info.hi) << " non-empty strings | `" << shown << "`";
    }
    out << " | " << info.doc << " |\n";
  });
  return out.str();
}

}  // namespace folio::engine
