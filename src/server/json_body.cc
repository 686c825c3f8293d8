#include "server/json_body.h"

#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace folio::server {
namespace {

using json = nlohmann::ordered_json;

// nlohmann's SAX interface, building the DOM without a search per key.
class Builder {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  explicit Builder(const JsonBodyLimits& limits) : limits_(limits) {}

  bool null() { return Put(nullptr); }
  bool boolean(bool v) { return Put(v); }
  bool number_integer(number_integer_t v) { return Put(v); }
  bool number_unsigned(number_unsigned_t v) { return Put(v); }
  bool number_float(number_float_t v, const string_t&) { return Put(v); }
  bool string(string_t& v) { return Put(std::move(v)); }
  bool binary(binary_t&) { return Fail("binary values are not JSON"); }

  bool start_object(std::size_t) { return Open(json::object()); }
  bool key(string_t& k) {
    Frame& f = stack_.back();
    if (++keys_ > limits_.max_keys) {
      return Fail("the request body has more than " + std::to_string(limits_.max_keys) +
                  " object keys");
    }
    if (!f.keys.insert(k).second) {
      return Fail("the request body gives the key \"" + k.substr(0, 64) + "\" twice in one object");
    }
    f.value->get_ref<json::object_t&>().emplace_back(std::move(k), nullptr);
    return true;
  }
  bool end_object() { return Close(); }
  bool start_array(std::size_t) { return Open(json::array()); }
  bool end_array() { return Close(); }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) {
    if (error_.empty()) {
      error_ = "the request body is not valid JSON (at byte " + std::to_string(position) + ")";
    }
    return false;
  }

  json& result() { return root_; }
  const std::string& error() const { return error_; }

 private:
  struct Frame {
    json* value;
    std::unordered_set<std::string> keys;  // an object's keys so far
  };

  // Where the next value goes: the root, an array's end or the last key's
  // slot. Only the innermost open container grows, so the pointers to the
  // open ones on the stack stay valid.
  json* Slot() {
    if (stack_.empty()) return &root_;
    json* v = stack_.back().value;
    if (v->is_array()) {
      v->get_ref<json::array_t&>().emplace_back();
      return &v->get_ref<json::array_t&>().back();
    }
    return &v->get_ref<json::object_t&>().back().second;
  }
  bool Put(json v) {
    *Slot() = std::move(v);
    return true;
  }
  bool Open(json container) {
    if (stack_.size() >= limits_.max_depth) {
      return Fail("the request body nests deeper than " + std::to_string(limits_.max_depth) +
                  " levels");
    }
    json* slot = Slot();
    *slot = std::move(container);
    stack_.push_back({slot, {}});
    return true;
  }
  bool Close() {
    stack_.pop_back();
    return true;
  }
  bool Fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  const JsonBodyLimits& limits_;
  json root_;
  std::vector<Frame> stack_;
  uint64_t keys_ = 0;
  std::string error_;
};

}  // namespace

Result<nlohmann::ordered_json> ParseJsonBody(std::string_view body, const JsonBodyLimits& limits) {
  Builder builder(limits);
  const bool ok = json::sax_parse(body.begin(), body.end(), &builder);
  if (!ok) {
    return Status::InvalidArgument(builder.error().empty() ? "the request body is not valid JSON"
                                                           : builder.error());
  }
  return std::move(builder.result());
}

}  // namespace folio::server
