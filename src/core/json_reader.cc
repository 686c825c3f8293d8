#include "folio/core/json_reader.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "folio/core/str_cat.h"

namespace folio {
namespace {

// A bound as people write it: integral values as integers ([-2, 2], not
// [-2.0, 2.0]), others in JSON's shortest form.
std::string BoundText(double x) {
  if (x == std::floor(x) && std::abs(x) < 1e15) return std::to_string(static_cast<int64_t>(x));
  return nlohmann::json(x).dump();
}

}  // namespace

template <typename Json>
const Json* FindField(const Json& object, std::string_view key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

template <typename Json>
std::string JsonTypeName(const Json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number_float()) return "number";
  return value.type_name();
}

template <typename Json>
std::string WrongTypeMessage(std::string_view field, std::string_view expected, const Json& got) {
  return StrCat("'", field, "' must be ", expected, ", got ", JsonTypeName(got));
}

template <typename Json>
std::string BasicJsonReader<Json>::Name(std::string_view key) const {
  switch (style_) {
    case JsonErrorStyle::kFile:
      return StrCat(where_, ": ", key);
    case JsonErrorStyle::kConfig:
      return StrCat("\"", key, "\"");
    case JsonErrorStyle::kRequest:
      return StrCat("'", key, "'");
  }
  return std::string(key);
}

template <typename Json>
Status BasicJsonReader<Json>::WrongType(std::string_view key, Kind kind, const Json* got) const {
  // What was expected, in each style's words.
  const bool file = style_ == JsonErrorStyle::kFile;
  std::string_view what;
  switch (kind) {
    case Kind::kU64:
      what = file ? "an unsigned integer" : "a non-negative integer";
      break;
    case Kind::kI64:
      what = "an integer";
      break;
    case Kind::kNumber:
      what = "a number";
      break;
    case Kind::kBool:
      what = style_ == JsonErrorStyle::kConfig ? "true or false" : "a boolean";
      break;
    case Kind::kString:
      what = "a string";
      break;
    case Kind::kTokenIds:
      what = file ? "an array" : "an array of token ids";
      break;
    case Kind::kStrings:
      what = file ? "an array" : "an array of strings";
      break;
  }
  switch (style_) {
    case JsonErrorStyle::kFile:
      return Status::InvalidArgument(StrCat(Name(key), " is missing or not ", what));
    case JsonErrorStyle::kConfig: {
      if (got == nullptr) return Status::NotFound(StrCat("missing key ", Name(key)));
      // config.json's messages have always shown the value of a number only.
      const bool number = kind == Kind::kU64 || kind == Kind::kI64 || kind == Kind::kNumber;
      return Status::InvalidArgument(StrCat(
          Name(key), " must be ", what, number ? StrCat(" (got ", Clip(got->dump()), ")") : ""));
    }
    case JsonErrorStyle::kRequest:
      if (got == nullptr) return Status::InvalidArgument(StrCat(Name(key), " is required"));
      return Status::InvalidArgument(WrongTypeMessage(key, what, *got));
  }
  return Status::InvalidArgument(Name(key));
}

template <typename Json>
Result<const Json*> BasicJsonReader<Json>::Typed(std::string_view key, Kind kind,
                                                 bool (*is)(const Json&)) const {
  const auto it = object_.find(key);
  if (it == object_.end()) return WrongType(key, kind, nullptr);
  if (!is(*it)) return WrongType(key, kind, &*it);
  return &*it;
}

template <typename Json>
Status BasicJsonReader<Json>::OutOfRange(std::string_view key, Kind kind, std::string_view got,
                                         std::string_view range,
                                         std::string_view file_limit) const {
  switch (style_) {
    case JsonErrorStyle::kFile:
      if (!file_limit.empty()) {
        return Status::InvalidArgument(StrCat(Name(key), " = ", got, " exceeds ", file_limit));
      }
      return Status::InvalidArgument(StrCat(Name(key), " = ", got, " is outside ", range));
    case JsonErrorStyle::kConfig:
      return Status::InvalidArgument(StrCat(Name(key), " must be in ", range, " (got ", got, ")"));
    case JsonErrorStyle::kRequest:
      // Integers have always been refused without their value, numbers with it.
      return Status::InvalidArgument(StrCat(Name(key), " must be in ", range,
                                            kind == Kind::kNumber ? StrCat(", got ", got) : ""));
  }
  return Status::InvalidArgument(Name(key));
}

template <typename Json>
Result<uint64_t> BasicJsonReader<Json>::U64(std::string_view key, uint64_t max) const {
  FOLIO_ASSIGN_OR_RETURN(const Json* v, Typed(key, Kind::kU64, [](const Json& j) {
                           return j.is_number_unsigned() ||
                                  (j.is_number_integer() && j.template get<int64_t>() >= 0);
                         }));
  const auto x = v->template get<uint64_t>();
  if (x > max) return OutOfRange(key, Kind::kU64, StrCat(x), StrCat("[0, ", max, "]"), StrCat(max));
  return x;
}

template <typename Json>
Result<int64_t> BasicJsonReader<Json>::I64(std::string_view key, int64_t lo, int64_t hi) const {
  FOLIO_ASSIGN_OR_RETURN(
      const Json* v, Typed(key, Kind::kI64, [](const Json& j) { return j.is_number_integer(); }));
  const bool above_int64 =
      v->is_number_unsigned() &&
      v->template get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  const bool in_range =
      !above_int64 && v->template get<int64_t>() >= lo && v->template get<int64_t>() <= hi;
  if (!in_range) {
    return OutOfRange(key, Kind::kI64, v->dump(), StrCat("[", lo, ", ", hi, "]"),
                      above_int64 ? "the int64 range" : "");
  }
  return v->template get<int64_t>();
}

template <typename Json>
Result<double> BasicJsonReader<Json>::F64(std::string_view key) const {
  FOLIO_ASSIGN_OR_RETURN(const Json* v,
                         Typed(key, Kind::kNumber, [](const Json& j) { return j.is_number(); }));
  return v->template get<double>();
}

template <typename Json>
Result<double> BasicJsonReader<Json>::F64(std::string_view key, double lo, double hi,
                                          bool lo_open) const {
  FOLIO_ASSIGN_OR_RETURN(const Json* v,
                         Typed(key, Kind::kNumber, [](const Json& j) { return j.is_number(); }));
  const auto x = v->template get<double>();
  if (std::isfinite(x) && x >= lo && !(lo_open && x == lo) && x <= hi) return x;
  const std::string range = StrCat(lo_open ? "(" : "[", BoundText(lo), ", ", BoundText(hi), "]");
  return OutOfRange(key, Kind::kNumber, Clip(v->dump()), range, "");
}

template <typename Json>
Result<bool> BasicJsonReader<Json>::Bool(std::string_view key) const {
  FOLIO_ASSIGN_OR_RETURN(const Json* v,
                         Typed(key, Kind::kBool, [](const Json& j) { return j.is_boolean(); }));
  return v->template get<bool>();
}

template <typename Json>
Result<std::string> BasicJsonReader<Json>::String(std::string_view key) const {
  FOLIO_ASSIGN_OR_RETURN(const Json* v,
                         Typed(key, Kind::kString, [](const Json& j) { return j.is_string(); }));
  return v->template get<std::string>();
}

template <typename Json>
Result<std::vector<int32_t>> BasicJsonReader<Json>::TokenIds(std::string_view key, uint64_t bound,
                                                             uint64_t max_count) const {
  FOLIO_ASSIGN_OR_RETURN(const Json* v,
                         Typed(key, Kind::kTokenIds, [](const Json& j) { return j.is_array(); }));
  if (v->size() > max_count) {
    return Status::InvalidArgument(
        StrCat(Name(key), " has ", v->size(), " ids; at most ", max_count));
  }
  const uint64_t below = std::min(bound, kMaxTokenIdBound);
  std::vector<int32_t> ids;
  ids.reserve(v->size());
  for (const Json& t : *v) {
    const bool id = t.is_number_integer() &&
                    (t.is_number_unsigned() || t.template get<int64_t>() >= 0) &&
                    t.template get<uint64_t>() < below;
    if (!id) {
      // The bound is named when it is a vocabulary's, not int32's.
      return Status::InvalidArgument(
          StrCat(Name(key), " holds ", Clip(t.dump()), ", not a token id",
                 bound < kMaxTokenIdBound ? StrCat(" below the vocabulary size ", bound) : ""));
    }
    ids.push_back(t.template get<int32_t>());
  }
  return ids;
}

template <typename Json>
Result<std::vector<std::string>> BasicJsonReader<Json>::Strings(std::string_view key) const {
  FOLIO_ASSIGN_OR_RETURN(const Json* v,
                         Typed(key, Kind::kStrings, [](const Json& j) { return j.is_array(); }));
  std::vector<std::string> out;
  out.reserve(v->size());
  for (const Json& s : *v) {
    if (!s.is_string()) {
      return Status::InvalidArgument(
          StrCat(Name(key), " holds ", Clip(s.dump()), ", not a string"));
    }
    out.push_back(s.template get<std::string>());
  }
  return out;
}

// The two JSON types folio reads: nlohmann::json (files, configs) and
// ordered_json (request bodies).
#define FOLIO_JSON_READER_INSTANTIATE(Json)                                                     \
  template const Json* FindField<Json>(const Json&, std::string_view);                          \
  template std::string JsonTypeName<Json>(const Json&);                                         \
  template std::string WrongTypeMessage<Json>(std::string_view, std::string_view, const Json&); \
  template class BasicJsonReader<Json>;
FOLIO_JSON_READER_INSTANTIATE(nlohmann::json)
FOLIO_JSON_READER_INSTANTIATE(nlohmann::ordered_json)
#undef FOLIO_JSON_READER_INSTANTIATE

}  // namespace folio
