// json.dumps as Hugging Face's tojson filter calls it.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/builtins.h"
#include "chat/builtins_internal.h"
#include "chat/text.h"
#include "folio/core/str_cat.h"

namespace folio::chat::internal {
namespace {

class Dumper {
 public:
  Dumper(const JsonOptions& o, uint64_t max_bytes) : o_(o), max_bytes_(max_bytes) {}

  Status Dump(const Value& v, uint32_t level) {
    if (out.size() > max_bytes_) {
      return Status::ResourceExhausted(
          StrCat("tojson output exceeds max_output_bytes (", max_bytes_, ")"));
    }
    switch (v.kind()) {
      case Kind::kNone:
        out += "null";
        return Status::Ok();
      case Kind::kBool:
        out += v.as_bool() ? "true" : "false";
        return Status::Ok();
      case Kind::kInt:
        AppendInt(out, v.as_int());
        return Status::Ok();
      case Kind::kFloat:
        Float(v.as_float());
        return Status::Ok();
      case Kind::kString:
        String(v.str());
        return Status::Ok();
      case Kind::kList: {
        const ListFlavor f = v.flavor();
        if (f != ListFlavor::kList && f != ListFlavor::kTuple) break;
        const auto& items = v.list().items;
        if (items.empty()) {
          out += "[]";
          return Status::Ok();
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += o_.item_separator;
          Newline(level + 1);
          FOLIO_RETURN_IF_ERROR(Dump(items[i], level + 1));
        }
        Newline(level);
        out += ']';
        return Status::Ok();
      }
      case Kind::kDict:
        return Dict(v.dict(), level);
      case Kind::kUndefined:
      case Kind::kNamespace:
      case Kind::kCallable:
      case Kind::kLoop:
        break;
    }
    std::string_view type = TypeName(v);
    if (v.kind() == Kind::kCallable) type = "function";
    return TypeError(StrCat("Object of type ", type, " is not JSON serializable"));
  }

  std::string out;

 private:
  void Newline(uint32_t level) {
    if (!o_.indent) return;
    out += '\n';
    for (uint32_t i = 0; i < level && out.size() <= max_bytes_; ++i) out += *o_.indent;
  }

  void Float(double d) {
    if (std::isnan(d)) {
      out += "NaN";
    } else if (std::isinf(d)) {
      out += d < 0 ? "-Infinity" : "Infinity";
    } else {
      AppendPyFloat(out, d);
    }
  }

  void String(std::string_view s) {
    out += '"';
    for (size_t pos = 0; pos < s.size();) {
      const size_t start = pos;
      const char32_t cp = DecodeUtf8(s, &pos);
      switch (cp) {
        case '"':
          out += "\\\"";
          continue;
        case '\\':
          out += "\\\\";
          continue;
        case '\n':
          out += "\\n";
          continue;
        case '\r':
          out += "\\r";
          continue;
        case '\t':
          out += "\\t";
          continue;
        case '\b':
          out += "\\b";
          continue;
        case '\f':
          out += "\\f";
          continue;
        default:
          break;
      }
      char buf[16];
      if (cp < 0x20) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
        out += buf;
      } else if (cp < 0x7F || !o_.ensure_ascii) {
        out.append(s.substr(start, pos - start));
      } else if (cp < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
        out += buf;
      } else {
        const char32_t u = cp - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (u >> 10)),
                      static_cast<unsigned>(0xDC00 + (u & 0x3FF)));
        out += buf;
      }
    }
    out += '"';
  }

  // A key as json.dumps writes it: str as is; int, float, bool and None
  // converted; anything else refused.
  Result<std::string> Key(const Value& k) {
    switch (k.kind()) {
      case Kind::kString:
        return std::string(k.str());
      case Kind::kNone:
        return std::string("null");
      case Kind::kBool:
        return std::string(k.as_bool() ? "true" : "false");
      case Kind::kInt: {
        std::string s;
        AppendInt(s, k.as_int());
        return s;
      }
      case Kind::kFloat: {
        std::string s;
        const double d = k.as_float();
        if (std::isnan(d)) return std::string("NaN");
        if (std::isinf(d)) return std::string(d < 0 ? "-Infinity" : "Infinity");
        AppendPyFloat(s, d);
        return s;
      }
      default:
        return TypeError(StrCat("keys must be str, int, float, bool or None, not ", TypeName(k)));
    }
  }

  Status Dict(const DictObject& d, uint32_t level) {
    if (d.items.empty()) {
      out += "{}";
      return Status::Ok();
    }
    std::vector<const std::pair<Value, Value>*> items;
    for (const auto& kv : d.items) items.push_back(&kv);
    if (o_.sort_keys) {
      Status error;
      std::stable_sort(items.begin(), items.end(), [&](const auto* a, const auto* b) {
        std::optional<int> c = Compare(a->first, b->first);
        if (!c) {
          if (error.ok()) {
            error = TypeError(StrCat("'<' not supported between instances of '", TypeName(b->first),
                                     "' and '", TypeName(a->first), "'"));
          }
          return false;
        }
        return *c < 0;
      });
      FOLIO_RETURN_IF_ERROR(error);
    }
    out += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += o_.item_separator;
      Newline(level + 1);
      FOLIO_ASSIGN_OR_RETURN(std::string key, Key(items[i]->first));
      String(key);
      out += o_.key_separator;
      FOLIO_RETURN_IF_ERROR(Dump(items[i]->second, level + 1));
    }
    Newline(level);
    out += '}';
    return Status::Ok();
  }

  const JsonOptions& o_;
  uint64_t max_bytes_;
};

}  // namespace

Result<std::string> JsonDumps(const Value& v, const JsonOptions& options, uint64_t max_bytes) {
  Dumper d(options, max_bytes);
  FOLIO_RETURN_IF_ERROR(d.Dump(v, 0));
  if (d.out.size() > max_bytes) {
    return Status::ResourceExhausted(
        StrCat("tojson output exceeds max_output_bytes (", max_bytes, ")"));
  }
  return std::move(d.out);
}

}  // namespace folio::chat::internal
