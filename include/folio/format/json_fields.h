// Typed reads of fields of an untrusted JSON object (a KV snapshot's
// manifest and the request state inside it). Every failure is an
// InvalidArgument that names where the object sits, the field and what it
// should have been, so a malformed file is a clear refusal, never a
// nlohmann exception or a misread value.
#ifndef FOLIO_FORMAT_JSON_FIELDS_H_
#define FOLIO_FORMAT_JSON_FIELDS_H_

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "folio/core/status.h"

namespace folio::format {

class JsonFields {
 public:
  // `where` prefixes every message ("manifest", "snapshot sequence 3").
  // The object must outlive this reader.
  JsonFields(const nlohmann::json& object, std::string where)
      : j_(object), where_(std::move(where)) {}

  Result<uint64_t> U64(const char* key, uint64_t max = std::numeric_limits<uint64_t>::max()) const {
    const nlohmann::json* v = nullptr;
    // Parsed text stores non-negative integers unsigned, JSON built in code
    // may store them signed: both are accepted, negatives are not.
    FOLIO_RETURN_IF_ERROR(Find(key, &nlohmann::json::is_number_integer, "an unsigned integer", v));
    if (!v->is_number_unsigned() && v->get<int64_t>() < 0) {
      return Status::InvalidArgument(where_ + ": " + key +
                                     " is missing or not an unsigned integer");
    }
    const auto x = v->get<uint64_t>();
    if (x > max) {
      return Status::InvalidArgument(where_ + ": " + key + " = " + std::to_string(x) + " exceeds " +
                                     std::to_string(max));
    }
    return x;
  }
  Result<int64_t> I64(const char* key) const {
    const nlohmann::json* v = nullptr;
    FOLIO_RETURN_IF_ERROR(Find(key, &nlohmann::json::is_number_integer, "an integer", v));
    if (v->is_number_unsigned() &&
        v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Status::InvalidArgument(where_ + ": " + key + " = " + v->dump() +
                                     " exceeds the int64 range");
    }
    return v->get<int64_t>();
  }
  Result<double> Double(const char* key) const {
    const nlohmann::json* v = nullptr;
    FOLIO_RETURN_IF_ERROR(Find(key, &nlohmann::json::is_number, "a number", v));
    return v->get<double>();
  }
  Result<bool> Bool(const char* key) const {
    const nlohmann::json* v = nullptr;
    FOLIO_RETURN_IF_ERROR(Find(key, &nlohmann::json::is_boolean, "a boolean", v));
    return v->get<bool>();
  }
  Result<std::string> String(const char* key) const {
    const nlohmann::json* v = nullptr;
    FOLIO_RETURN_IF_ERROR(Find(key, &nlohmann::json::is_string, "a string", v));
    return v->get<std::string>();
  }
  // An array of integers in [0, INT32_MAX] (token ids).
  Result<std::vector<int32_t>> Tokens(const char* key) const {
    const nlohmann::json* v = nullptr;
    FOLIO_RETURN_IF_ERROR(Find(key, &nlohmann::json::is_array, "an array", v));
    std::vector<int32_t> out;
    for (const nlohmann::json& t : *v) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return Status::InvalidArgument(where_ + ": " + key + " holds " + t.dump() +
                                       ", not a token id");
      }
      out.push_back(t.get<int32_t>());
    }
    return out;
  }
  Result<std::vector<std::string>> Strings(const char* key) const {
    const nlohmann::json* v = nullptr;
    FOLIO_RETURN_IF_ERROR(Find(key, &nlohmann::json::is_array, "an array", v));
    std::vector<std::string> out;
    for (const nlohmann::json& t : *v) {
      if (!t.is_string()) {
        return Status::InvalidArgument(where_ + ": " + key + " holds " + t.dump() +
                                       ", not a string");
      }
      out.push_back(t.get<std::string>());
    }
    return out;
  }

 private:
  Status Find(const char* key, bool (nlohmann::json::*is)() const noexcept, const char* what,
              const nlohmann::json*& out) const {
    const auto it = j_.find(key);
    if (it == j_.end() || !((*it).*is)()) {
      return Status::InvalidArgument(where_ + ": " + key + " is missing or not " + what);
    }
    out = &*it;
    return Status::Ok();
  }

  const nlohmann::json& j_;
  std::string where_;
};

}  // namespace folio::format

#endif  // FOLIO_FORMAT_JSON_FIELDS_H_
