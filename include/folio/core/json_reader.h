// Typed reads of the fields of an untrusted JSON object: look a key up,
// check its JSON type (and bounds), and give the value or a Status that
// names the field. A malformed input is a clear refusal, never a nlohmann
// exception or a misread value.
//
// folio reads three kinds of JSON, and each has always worded its
// refusals its own way; tests, HTTP clients and people reading logs know
// those words, so a reader is made with the style of its input:
//
//   kFile     files folio writes (a KV snapshot's manifest and the request
//             state inside it). InvalidArgument, prefixed by where the
//             object sits; missing and mistyped read the same:
//               manifest: page_size is missing or not an unsigned integer
//               manifest: page_size = 9000 exceeds 4096
//   kConfig   Hugging Face config.json. A missing required key is
//             NotFound, a mistyped one InvalidArgument with the key in
//             double quotes (and the value, for numbers):
//               missing key "hidden_size"
//               "hidden_size" must be a non-negative integer (got -4)
//   kRequest  HTTP request bodies (OpenAI's wording): the field in single
//             quotes and the JSON type it had:
//               'top_k' must be an integer, got string
//               'n' must be in [1, 128]
//
// Required reads (U64, I64, F64, Bool, String, TokenIds, Strings) refuse an
// absent field; Optional reads leave the output as it is when the field is
// absent or null. A reader holds a reference: the object must outlive it.
#ifndef FOLIO_CORE_JSON_READER_H_
#define FOLIO_CORE_JSON_READER_H_

#include <cstdint>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "folio/core/status.h"

namespace folio {

enum class JsonErrorStyle : uint8_t { kFile, kConfig, kRequest };

// The field's value; nullptr when the object lacks it or holds null.
template <typename Json>
const Json* FindField(const Json& object, std::string_view key);

// A value's JSON type as an error message names it: "integer" and "number"
// apart, then nlohmann's names ("string", "array", "object", "null", ...).
template <typename Json>
std::string JsonTypeName(const Json& value);

// kRequest's message for a value of the wrong type, for values no reader
// looks up (array items, nested paths, fields with several accepted
// types): "'tools[0]' must be an object, got array".
template <typename Json>
std::string WrongTypeMessage(std::string_view field, std::string_view expected, const Json& got);

template <typename Json>
class BasicJsonReader {
 public:
  // Every token id fits int32_t; a TokenIds bound above this is clamped.
  static constexpr uint64_t kMaxTokenIdBound = uint64_t{1} << 31;

  // `where` prefixes kFile's messages ("manifest", "snapshot sequence 3");
  // the other styles do not use it.
  BasicJsonReader(const Json& object, JsonErrorStyle style, std::string where = {})
      : object_(object), style_(style), where_(std::move(where)) {}

  const Json* Find(std::string_view key) const { return FindField(object_, key); }
  bool Has(std::string_view key) const { return Find(key) != nullptr; }

  // An integer in [0, max]. Parsed text stores non-negative integers
  // unsigned, JSON built in code may store them signed: both are accepted.
  Result<uint64_t> U64(std::string_view key,
                       uint64_t max = std::numeric_limits<uint64_t>::max()) const;
  // An integer in [lo, hi].
  Result<int64_t> I64(std::string_view key, int64_t lo = std::numeric_limits<int64_t>::min(),
                      int64_t hi = std::numeric_limits<int64_t>::max()) const;
  // Any number (an integer too).
  Result<double> F64(std::string_view key) const;
  // A finite number in [lo, hi], or (lo, hi] when lo_open.
  Result<double> F64(std::string_view key, double lo, double hi, bool lo_open = false) const;
  Result<bool> Bool(std::string_view key) const;
  Result<std::string> String(std::string_view key) const;
  // An array of at most max_count integers in [0, bound), bound clamped to
  // kMaxTokenIdBound (a vocabulary size, or any token id).
  Result<std::vector<int32_t>> TokenIds(
      std::string_view key, uint64_t bound = kMaxTokenIdBound,
      uint64_t max_count = std::numeric_limits<uint64_t>::max()) const;
  Result<std::vector<std::string>> Strings(std::string_view key) const;

  // The required read of T, with the bounds it takes: uint64_t is U64,
  // int64_t I64, double F64, bool Bool, std::string String,
  // std::vector<int32_t> TokenIds, std::vector<std::string> Strings.
  template <typename T, typename... Bounds>
  Result<T> Get(std::string_view key, const Bounds&... bounds) const;

  // An optional field: absent or null leaves `out` as it is; any other
  // value is read as Get of out's type reads it. `out` may be a
  // std::optional of one of Get's types.
  template <typename T, typename... Bounds>
  Status Optional(std::string_view key, T& out, const Bounds&... bounds) const;

 private:
  // What a read expects, for its messages.
  enum class Kind : uint8_t { kU64, kI64, kNumber, kBool, kString, kTokenIds, kStrings };

  // The field's value when it is there and `is` holds, else the style's
  // error for a missing or mistyped field.
  Result<const Json*> Typed(std::string_view key, Kind kind, bool (*is)(const Json&)) const;
  // The style's error for a missing (got null) or mistyped field.
  Status WrongType(std::string_view key, Kind kind, const Json* got) const;
  // The style's error for a value outside `range` ("[1, 128]"); kFile
  // words it as the limit exceeded when one is given ("4096", "the int64
  // range").
  Status OutOfRange(std::string_view key, Kind kind, std::string_view got, std::string_view range,
                    std::string_view file_limit) const;
  // The style's message prefix for a value: "where: key" or "'key'".
  std::string Name(std::string_view key) const;

  template <typename T>
  struct Unwrapped {
    using type = T;
  };
  template <typename T>
  struct Unwrapped<std::optional<T>> {
    using type = T;
  };

  const Json& object_;
  JsonErrorStyle style_;
  std::string where_;
};

using JsonReader = BasicJsonReader<nlohmann::json>;
// Over ordered_json, the type of HTTP request bodies (which keep the
// client's key order).
using OrderedJsonReader = BasicJsonReader<nlohmann::ordered_json>;

template <typename Json>
template <typename T, typename... Bounds>
Result<T> BasicJsonReader<Json>::Get(std::string_view key, const Bounds&... bounds) const {
  if constexpr (std::is_same_v<T, uint64_t>) {
    return U64(key, bounds...);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return I64(key, bounds...);
  } else if constexpr (std::is_same_v<T, double>) {
    return F64(key, bounds...);
  } else if constexpr (std::is_same_v<T, bool>) {
    return Bool(key, bounds...);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return String(key, bounds...);
  } else if constexpr (std::is_same_v<T, std::vector<int32_t>>) {
    return TokenIds(key, bounds...);
  } else {
    static_assert(std::is_same_v<T, std::vector<std::string>>, "no read for this type");
    return Strings(key, bounds...);
  }
}

template <typename Json>
template <typename T, typename... Bounds>
Status BasicJsonReader<Json>::Optional(std::string_view key, T& out,
                                       const Bounds&... bounds) const {
  if (Find(key) == nullptr) return Status::Ok();
  Result<typename Unwrapped<T>::type> value = Get<typename Unwrapped<T>::type>(key, bounds...);
  if (!value.ok()) return value.error();
  out = std::move(*value);
  return Status::Ok();
}

}  // namespace folio

#endif  // FOLIO_CORE_JSON_READER_H_
