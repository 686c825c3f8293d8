// jinja2's filters (jinja2/filters.py) and Hugging Face's tojson.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "chat/access.h"
#include "chat/builtins.h"
#include "chat/builtins_internal.h"
#include "chat/operators.h"
#include "chat/text.h"
#include "folio/core/str_cat.h"

namespace folio::chat::internal {
namespace {

std::string S(const Value& v) { return ToStr(v); }

Result<Value> Iterator(std::vector<Value> items, const BuiltinContext& ctx) {
  return ListResult(std::move(items), ctx, ListFlavor::kIterator);
}

// jinja2's ignore_case: strings lower-cased, everything else as it is.
Value IgnoreCase(const Value& v) {
  if (!v.is_string()) return v;
  return Value::Str(ToCase(v.str(), CaseMap::kLower));
}

Status NoArgs(std::string_view name, const CallArgs& args) {
  if (!args.args.empty() || !args.kwargs.empty()) {
    return TypeError(StrCat(name, "() takes no arguments"));
  }
  return Status::Ok();
}

Result<int64_t> IntParam(const std::optional<Value>& v, int64_t fallback, std::string_view what) {
  if (!v) return fallback;
  if (v->is_integral()) return v->as_int();
  if (v->is_undefined()) return UndefinedError(*v);
  return TypeError(
      StrCat("'", TypeName(*v), "' object cannot be interpreted as an integer (", what, ")"));
}

// Python's float(str): surrounding whitespace, a sign, digits with single
// underscores between them, an exponent, or inf/infinity/nan.
std::optional<double> ParseFloat(std::string_view s) {
  s = StripSpace(s, true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      const bool between = i > 0 && i + 1 < s.size() &&
                           std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
                           std::isdigit(static_cast<unsigned char>(s[i + 1]));
      if (!between) return std::nullopt;
      continue;
    }
    clean += s[i];
  }
  if (clean.empty()) return std::nullopt;
  std::string lower = ToCase(clean, CaseMap::kLower);
  std::string_view body = lower;
  double sign = 1.0;
  if (body[0] == '+' || body[0] == '-') {
    if (body[0] == '-') sign = -1.0;
    body.remove_prefix(1);
  }
  if (body == "inf" || body == "infinity") return sign * HUGE_VAL;
  if (body == "nan") return std::nan("");
  // digits [. digits] [e [sign] digits], at least one digit before the exponent
  size_t i = 0, digits = 0;
  while (i < body.size() && std::isdigit(static_cast<unsigned char>(body[i]))) ++i, ++digits;
  if (i < body.size() && body[i] == '.') {
    ++i;
    while (i < body.size() && std::isdigit(static_cast<unsigned char>(body[i]))) ++i, ++digits;
  }
  if (digits == 0) return std::nullopt;
  if (i < body.size() && body[i] == 'e') {
    ++i;
    if (i < body.size() && (body[i] == '+' || body[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < body.size() && std::isdigit(static_cast<unsigned char>(body[i]))) ++i, ++exp_digits;
    if (exp_digits == 0) return std::nullopt;
  }
  if (i != body.size()) return std::nullopt;
  return std::strtod(clean.c_str(), nullptr);
}

// Python's int(str, base): whitespace, sign, optional prefix matching the
// base (any prefix for base 0), digits with single underscores.
std::optional<int64_t> ParseInt(std::string_view s, int64_t base, bool* overflow) {
  s = StripSpace(s, true, true);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  auto prefix_base = [&](char c) -> int64_t {
    c = static_cast<char>(c | 0x20);
    return c == 'x' ? 16 : c == 'o' ? 8 : c == 'b' ? 2 : 0;
  };
  bool had_prefix = false;
  if (s.size() >= 2 && s[0] == '0' && prefix_base(s[1]) != 0 &&
      (base == 0 || base == prefix_base(s[1]))) {
    base = prefix_base(s[1]);
    s.remove_prefix(2);
    had_prefix = true;
  }
  if (base == 0) {
    base = 10;
    // Base 0 refuses leading zeros on a non-zero decimal.
    if (s.size() > 1 && s[0] == '0' && s.find_first_not_of("0_") != std::string_view::npos) {
      return std::nullopt;
    }
  }
  if (base < 2 || base > 36 || s.empty()) return std::nullopt;
  __extension__ using Wide = __int128;
  Wide value = 0;
  bool prev_digit = had_prefix;  // "0x_1f" allows an underscore after the prefix
  size_t ndigits = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '_') {
      if (!prev_digit || i + 1 >= s.size()) return std::nullopt;
      prev_digit = false;
      continue;
    }
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') d = (c | 0x20) - 'a' + 10;
    if (d < 0 || d >= base) return std::nullopt;
    value = value * base + d;
    if (value > (static_cast<Wide>(1) << 64)) *overflow = true, value = static_cast<Wide>(1) << 64;
    prev_digit = true;
    ++ndigits;
  }
  if (ndigits == 0) return std::nullopt;
  if (negative) value = -value;
  if (value > INT64_MAX || value < INT64_MIN) {
    *overflow = true;
    return std::nullopt;
  }
  return static_cast<int64_t>(value);
}

Result<Value> DoInt(const Value& v, CallArgs& args) {
  FOLIO_ASSIGN_OR_RETURN(auto p, Bind("do_int", args, {"default", "base"}));
  const Value fallback = p[0] ? *p[0] : Value::Int(0);
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_integral()) return Value::Int(v.as_int());
  if (v.kind() == Kind::kFloat) {
    const double d = v.as_float();
    if (std::isnan(d)) return fallback;
    if (std::isinf(d)) return Status::InvalidArgument("cannot convert float infinity to integer");
    if (d >= 9.2233720368547758e18 || d < -9.2233720368547758e18) {
      return Status::Unimplemented("an integer past 64 bits");
    }
    return Value::Int(static_cast<int64_t>(d));
  }
  if (v.is_string()) {
    FOLIO_ASSIGN_OR_RETURN(int64_t base, IntParam(p[1], 10, "base"));
    bool overflow = false;
    if (std::optional<int64_t> i = ParseInt(v.str(), base, &overflow)) return Value::Int(*i);
    if (overflow) return Status::Unimplemented("an integer past 64 bits");
    // jinja2's quirk: "42.23"|int is int(float("42.23")).
    if (std::optional<double> d = ParseFloat(v.str())) {
      if (std::isnan(*d) || std::isinf(*d)) return fallback;
      if (*d >= 9.2233720368547758e18 || *d < -9.2233720368547758e18) {
        return Status::Unimplemented("an integer past 64 bits");
      }
      return Value::Int(static_cast<int64_t>(*d));
    }
  }
  return fallback;
}

Result<Value> DoFloat(const Value& v, CallArgs& args) {
  FOLIO_ASSIGN_OR_RETURN(auto p, Bind("do_float", args, {"default"}));
  const Value fallback = p[0] ? *p[0] : Value::Float(0.0);
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_number()) return Value::Float(v.as_float());
  if (v.is_string()) {
    if (std::optional<double> d = ParseFloat(v.str())) return Value::Float(*d);
  }
  return fallback;
}

// Python's round(x, ndigits).
Result<Value> RoundCommon(const Value& v, int64_t ndigits) {
  if (v.is_integral()) {
    if (ndigits >= 0) return Value::Int(v.as_int());
    if (ndigits < -18) return Value::Int(0);
    int64_t p = 1;
    for (int64_t i = 0; i < -ndigits; ++i) p *= 10;
    const int64_t x = v.as_int();
    int64_t q = x / p, r = x % p;
    if (r < 0) r += p, q -= 1;
    if (2 * r > p || (2 * r == p && (q & 1))) ++q;  // half to even
    int64_t out = 0;
    if (__builtin_mul_overflow(q, p, &out)) return Status::Unimplemented("an integer past 64 bits");
    return Value::Int(out);
  }
  const double x = v.as_float();
  if (!std::isfinite(x) || ndigits > 308) return Value::Float(x);
  if (ndigits == 0) return Value::Float(std::nearbyint(x));
  if (ndigits > 0) {
    // printf rounds the exact binary value half to even, as Python does.
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(ndigits, 340)), x);
    return Value::Float(std::strtod(buf, nullptr));
  }
  const double p = std::pow(10.0, static_cast<double>(-ndigits));
  return Value::Float(std::nearbyint(x / p) * p);
}

Result<Value> DoRound(const Value& v, CallArgs& args) {
  FOLIO_ASSIGN_OR_RETURN(auto p, Bind("do_round", args, {"precision", "method"}));
  std::string method = "common";
  if (p[1]) method = S(*p[1]);
  if (method != "common" && method != "ceil" && method != "floor") {
    return Status::InvalidArgument("method must be common, ceil or floor");
  }
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_number()) {
    return TypeError(StrCat("type ", TypeName(v), " doesn't define __round__ method"));
  }
  FOLIO_ASSIGN_OR_RETURN(int64_t precision, IntParam(p[0], 0, "precision"));
  if (method == "common") return RoundCommon(v, precision);
  // math.ceil / math.floor of value * 10**precision, divided back: a float.
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double scaled = v.as_float() * scale;
  if (!std::isfinite(scaled)) {
    return Status::InvalidArgument("cannot convert float infinity to integer");
  }
  const double r = method == "ceil" ? std::ceil(scaled) : std::floor(scaled);
  return Value::Float(r / scale);
}

}  // namespace

std::string Escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '"':
        out += "&#34;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

// str.strip(chars): chars nullopt = whitespace.
std::string_view StripChars(std::string_view s, const std::optional<std::string_view>& chars,
                            bool left, bool right) {
  if (!chars) return StripSpace(s, left, right);
  std::vector<char32_t> set;
  for (size_t pos = 0; pos < chars->size();) set.push_back(DecodeUtf8(*chars, &pos));
  auto in_set = [&](char32_t cp) { return std::find(set.begin(), set.end(), cp) != set.end(); };
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      size_t next = begin;
      if (!in_set(DecodeUtf8(s, &next))) break;
      begin = next;
    }
  }
  if (right) {
    size_t content_end = begin;
    for (size_t pos = begin; pos < end;) {
      if (!in_set(DecodeUtf8(s, &pos))) content_end = pos;
    }
    end = content_end;
  }
  return s.substr(begin, end - begin);
}

Result<Value> DoIndent(const Value& v, CallArgs& args, const BuiltinContext& ctx) {
  FOLIO_ASSIGN_OR_RETURN(auto p, Bind("do_indent", args, {"width", "first", "blank"}));
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_string()) {
    return TypeError(StrCat("unsupported operand type(s) for +=: '", TypeName(v), "' and 'str'"));
  }
  std::string indention;
  if (!p[0]) {
    indention = "    ";
  } else if (p[0]->is_string()) {
    indention = std::string(p[0]->str());
  } else if (p[0]->is_integral()) {
    const int64_t n = p[0]->as_int();
    if (n > static_cast<int64_t>(ctx.max_bytes))
      return Status::ResourceExhausted("indent too wide");
    indention = std::string(static_cast<size_t>(std::max<int64_t>(0, n)), ' ');
  } else {
    return TypeError(StrCat("can't multiply sequence by non-int of type '", TypeName(*p[0]), "'"));
  }
  const bool first = FlagOf(p[1], false), blank = FlagOf(p[2], false);
  const std::string s = std::string(v.str()) + "\n";
  const std::vector<std::string_view> lines = SplitLines(s, false);
  std::string rv;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      rv += '\n';
      if (blank || !lines[i].empty()) rv += indention;
    }
    rv += lines[i];
    if (rv.size() > ctx.max_bytes) return StrResult(std::move(rv), ctx);
  }
  if (first) rv = indention + rv;
  return StrResult(std::move(rv), ctx);
}

Result<Value> DoJoin(const Value& v, CallArgs& args, const BuiltinContext& ctx) {
  FOLIO_ASSIGN_OR_RETURN(auto p, Bind("do_join", args, {"d", "attribute"}));
  FOLIO_ASSIGN_OR_RETURN(std::vector<Value> items, Items(v));
  const std::string sep = p[0] ? S(*p[0]) : std::string();
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    if (p[1] && !p[1]->is_none()) {
      FOLIO_ASSIGN_OR_RETURN(Value item, AttrPath(items[i], *p[1]));
      AppendStr(out, item, ctx.max_bytes);
    } else {
      AppendStr(out, items[i], ctx.max_bytes);
    }
    if (out.size() > ctx.max_bytes) break;
  }
  return StrResult(std::move(out), ctx);
}

Result<Value> DoLast(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      break;
    case Kind::kString:
    case Kind::kDict: {
      FOLIO_ASSIGN_OR_RETURN(std::vector<Value> items, Items(v));
      if (!items.empty()) return items.back();
      break;
    }
    case Kind::kList:
      if (v.flavor() == ListFlavor::kIterator) {
        return TypeError("'generator' object is not reversible");
      }
      if (!v.list().items.empty()) return v.list().items.back();
      break;
    default:
      return TypeError(StrCat("'", TypeName(v), "' object is not reversible"));
  }
  return Value::Undefined(UndefinedReason::kMessage, "No last item, sequence was empty.");
}

Result<Value> DoReverse(const Value& v, const BuiltinContext& ctx) {
  if (v.is_string()) {
    std::vector<std::string_view> cps;
    const std::string_view s = v.str();
    for (size_t pos = 0; pos < s.size();) {
      const size_t b = pos;
      DecodeUtf8(s, &pos);
      cps.push_back(s.substr(b, pos - b));
    }
    std::string out;
    out.reserve(s.size());
    for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
    return Value::Str(std::move(out));
  }
  if (v.is_list() && v.flavor() == ListFlavor::kIterator) {
    // reversed() refuses a generator; jinja2 then reverses list(value).
    FOLIO_ASSIGN_OR_RETURN(std::vector<Value> items, Items(v));
    std::reverse(items.begin(), items.end());
    return ListResult(std::move(items), ctx);
  }
  if (v.is_undefined() || v.is_list() || v.is_dict()) {
    FOLIO_ASSIGN_OR_RETURN(std::vector<Value> items, Items(v));
    std::reverse(items.begin(), items.end());
    return Iterator(std::move(items), ctx);
  }
  return Status::InvalidArgument("argument must be iterable");
}

// The key sort, min, max and unique compare: the attribute path(s), with
// strings lower-cased unless case-sensitive.
struct KeyFn {
  std::optional<Value> attribute;
  bool multi = false;  // sort: "a,b" names several keys
  bool case_sensitive = false;

  Result<Value> operator()(const Value& item) const {
    auto one = [&](const Value& attr) -> Result<Value> {
      FOLIO_ASSIGN_OR_RETURN(Value k, attr.is_none() ? Result<Value>(item) : AttrPath(item, attr));
      return case_sensitive ? k : IgnoreCase(k);
    };
    if (multi && (!attribute || !attribute->is_string())) {
      // jinja2's make_multi_attrgetter: the key is a list, even of one.
      FOLIO_ASSIGN_OR_RETURN(Value k, one(attribute ? *attribute : Value::None()));
      return *MakeList({std::move(k)});
    }
    if (!attribute || attribute->is_none()) return one(Value::None());
    if (multi && attribute->is_string()) {
      std::vector<Value> keys;
      std::string_view rest = attribute->str();
      while (true) {
        const size_t comma = rest.find(',');
        FOLIO_ASSIGN_OR_RETURN(Value k, one(Value::Borrowed(rest.substr(0, comma))));
        keys.push_back(std::move(k));
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
      return *MakeList(std::move(keys));
    }
    return one(*attribute);
  }
};

Result<bool> Less(const Value& a, const Value& b) { return CompareOperation(CompareOp::kLt, a, b); }

Result<Value> DoSort(const Value& v, CallArgs& args, const BuiltinContext& ctx) {
  FOLIO_ASSIGN_OR_RETURN(auto p, Bind("do_sort", args, {"reverse", "case_sensitive", "attribute"}));
  FOLIO_ASSIGN_OR_RETURN(std::vector<Value> items, Items(v));
  const KeyFn key{p[2], true, FlagOf(p[1], false)};
  const bool reverse = FlagOf(p[0], false);
  std::vector<std::pair<Value, size_t>> keyed;
  keyed.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    FOLIO_ASSIGN_OR_RETURN(Value k, key(items[i]));
    keyed.emplace_back(std::move(k), i);
  }
  Status error;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    if (!error.ok()) return false;
    Result<bool> lt = reverse ? Less(y.first, x.first) : Less(x.first, y.first);
    if (!lt) {
      error = lt.error();
      return false;
    }
    return *lt;
  });
  FOLIO_RETURN_IF_ERROR(error);
  std::vector<Value> out;
  out.reserve(items.size());
  for (const auto& [k, i] : keyed) out.push_back(items[i]);
  return ListResult(std::move(out), ctx);
}

Result<Value> DoMinMax(const Value& v, CallArgs& args, bool max) {
  FOLIO_ASSIGN_OR_RETURN(auto p,
                         Bind(max ? "do_max" : "do_min", args, {"case_sensitive", "attribute"}));
  FOLIO_ASSIGN_OR_RETURN(std::vector<Value> items, Items(v));
  if (items.empty()) {
    return Value::Undefined(UndefinedReason::kMessage, "No aggregated item, sequence was empty.");
  }
  const KeyFn key{p[1], false, FlagOf(p[0], false)};
  size_t best = 0;
  FOLIO_ASSIGN_OR_RETURN(Value best_key, key(items[0]));
  for (size_t i = 1; i < items.size(); ++i) {
    FOLIO_ASSIGN_OR_RETURN(Value k, key(items[i]));
    FOLIO_ASSIGN_OR_RETURN(bool better, max ? Less(best_key, k) : Less(k, best_key));
    if (better) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

Status UniqueBody(const Value& v, const std::vector<std::optional<Value>>& p,
                  std::vector<Value>& out) {
  FOLIO_ASSIGN_OR_RETURN(std::vector<Value> items, Items(v));
  const KeyFn key{p[1], false, FlagOf(p[0], false)};
  std::vector<Value> seen;
  for (const Value& item : items) {
    FOLIO_ASSIGN_OR_RETURN(Value k, key(item));
    if (!Hashable(k)) return TypeError(StrCat("unhashable type: '", TypeName(k), "'"));
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& x) { return Equals(x, k); })) {
      seen.push_back(std::move(k));
      out.push_back(item);
    }
  }
  return Status::Ok();
}

Result<Value> DoUnique(const Value& v, CallArgs& args, const BuiltinContext& ctx) {
  FOLIO_ASSIGN_OR_RETURN(auto p, Bind("do_unique", args, {"case_sensitive", "attribute"}));
  std::vector<Value> out;
  const Status s = UniqueBody(v, p, out);
  return Generator(std::move(out), s, ctx);
}

Result<Value> DoSum(const Value& v, CallArgs& args, const BuiltinContext& ctx) {
  FOLIO_ASSIGN_OR_RETURN(auto p, Bind("sync_do_sum", args, {"attribute", "start"}));
  FOLIO_ASSIGN_OR_RETURN(std::vector<Value> items, Items(v));
  Value acc = p[1] ? *p[1] : Value::Int(0);
  if (acc.is_string()) return TypeError("sum() can't sum strings [use ''.join(seq) instead]");
  for (const Value& item : items) {
    Value x = item;
    if (p[0] && !p[0]->is_none()) {
      FOLIO_ASSIGN_OR_RETURN(x, AttrPath(item, *p[0]));
    }
    FOLIO_ASSIGN_OR_RETURN(acc, Arithmetic(BinaryOp::kAdd, acc, x, ctx.max_bytes));
  }
  return acc;
}

// map, select, reject, selectattr, rejectattr, unique, items, batch and
// slice are generators in jinja2: their bodies run when iterated, so what
// fails there fails only then (Generator keeps the error for that).

Status MapBody(const Value& v, CallArgs& args, const BuiltinContext& ctx, std::vector<Value>& out) {
  if (!Truthy(v)) return Status::Ok();
  FOLIO_ASSIGN_OR_RETURN(std::vector<Value> items, Items(v));
  if (args.args.empty()) {
    std::optional<Value> attribute, fallback;
    for (auto& [k, val] : args.kwargs) {
      if (k == "attribute") {
        attribute = val;
      } else if (k == "default") {
        fallback = val;
      } else {
        return Status::InvalidArgument(StrCat("Unexpected keyword argument '", k, "'"));
      }
    }
    if (!attribute) return Status::InvalidArgument("map requires a filter argument");
    for (const Value& item : items) {
      FOLIO_ASSIGN_OR_RETURN(Value x, AttrPath(item, *attribute));
      if (fallback && !fallback->is_none() && x.is_undefined()) x = *fallback;
      out.push_back(std::move(x));
    }
    return Status::Ok();
  }
  const std::string name = S(args.args[0]);
  for (const Value& item : items) {
    CallArgs rest;
    rest.args.assign(args.args.begin() + 1, args.args.end());
    rest.kwargs = args.kwargs;
    FOLIO_ASSIGN_OR_RETURN(Value x, ApplyFilterByName(name, item, rest, ctx));
    out.push_back(std::move(x));
  }
  return Status::Ok();
}

Status SelectBody(const Value& v, CallArgs& args, const BuiltinContext& ctx, bool keep,
                  bool by_attribute, std::vector<Value>& out) {
  if (!Truthy(v)) return Status::Ok();
  size_t off = 0;
  std::optional<Value> attribute;
  if (by_attribute) {
    if (args.args.empty()) {
      return Status::InvalidArgument("Missing parameter for attribute name");
    }
    attribute = args.args[0];
    off = 1;
  }
  std::optional<std::string> test;
  if (args.args.size() > off) test = S(args.args[off]);
  FOLIO_ASSIGN_OR_RETURN(std::vector<Value> items, Items(v));
  for (const Value& item : items) {
    Value x = item;
    if (attribute) {
      FOLIO_ASSIGN_OR_RETURN(x, AttrPath(item, *attribute));
    }
    bool pass = false;
    if (test) {
      CallArgs rest;
      rest.args.assign(args.args.begin() + static_cast<ptrdiff_t>(off + 1), args.args.end());
      rest.kwargs = args.kwargs;
      FOLIO_ASSIGN_OR_RETURN(pass, ApplyTestByName(*test, x, rest, ctx));
    } else {
      pass = Truthy(x);
    }
    if (pass == keep) out.push_back(item);
  }
  return Status::Ok();
}

Result<Value> DoMap(const Value& v, CallArgs& args, const BuiltinContext& ctx) {
  std::vector<Value> out;
  const Status s = MapBody(v, args, ctx, out);
  return Generator(std::move(out), s, ctx);
}

Result<Value> DoSelect(const Value& v, CallArgs& args, const BuiltinContext& ctx, bool keep,
                       bool by_attribute) {
  std::vector<Value> out;
  const Status s = SelectBody(v, args, ctx, keep, by_attribute, out);
  return Generator(std::move(out), s, ctx);
}

Status BatchBody(const Value& v, const std::vector<std::optional<Value>>& p,
                 const BuiltinContext& ctx, std::vector<Value>& groups) {
  FOLIO_ASSIGN_OR_RETURN(std::vector<Value> items, Items(v));
  const std::optional<Value> fill = p[1] && !p[1]->is_none() ? p[1] : std::optional<Value>();
  auto group = [&](std::vector<Value> g) -> Status {
    FOLIO_ASSIGN_OR_RETURN(Value l, ListResult(std::move(g), ctx));
    groups.push_back(std::move(l));
    return Status::Ok();
  };
  // jinja2 compares len(tmp) == linecount, so a non-int never closes a batch.
  const bool sized = p[0]->is_integral();
  const int64_t n = sized ? p[0]->as_int() : -1;
  std::vector<Value> tmp;
  for (const Value& item : items) {
    if (sized && static_cast<int64_t>(tmp.size()) == n) {
      FOLIO_RETURN_IF_ERROR(group(std::move(tmp)));
      tmp.clear();
    }
    tmp.push_back(item);
  }
  if (!tmp.empty()) {
    if (fill && sized && static_cast<int64_t>(tmp.size()) < n) {
      if (n > static_cast<int64_t>(ctx.max_bytes)) {
        return Status::ResourceExhausted("batch too large");
      }
      tmp.resize(static_cast<size_t>(n), *fill);
    }
    FOLIO_RETURN_IF_ERROR(group(std::move(tmp)));
  }
  return Status::Ok();
}

Status SliceBody(const Value& v, const std::vector<std::optional<Value>>& p,
                 const BuiltinContext& ctx, std::vector<Value>& groups) {
  FOLIO_ASSIGN_OR_RETURN(std::vector<Value> items, Items(v));
  const std::optional<Value> fill = p[1] && !p[1]->is_none() ? p[1] : std::optional<Value>();
  FOLIO_ASSIGN_OR_RETURN(int64_t slices, IntParam(p[0], 0, "slices"));
  if (slices == 0) return Status::InvalidArgument("integer division or modulo by zero");
  if (slices > static_cast<int64_t>(ctx.max_bytes)) {
    return Status::ResourceExhausted("too many slices");
  }
  const auto length = static_cast<int64_t>(items.size());
  // Python's floor division and modulo, for a negative count too.
  int64_t per = length / slices, extra = length % slices;
  if (extra != 0 && ((extra < 0) != (slices < 0))) extra += slices, per -= 1;
  int64_t offset = 0;
  for (int64_t n = 0; n < slices; ++n) {
    const int64_t start = offset + n * per;
    if (n < extra) ++offset;
    const int64_t end = offset + (n + 1) * per;
    const SliceIndexes ix = AdjustSlice(length, start, end, 1);
    std::vector<Value> tmp(items.begin() + ix.start, items.begin() + ix.start + ix.count);
    if (fill && n >= extra) tmp.push_back(*fill);
    FOLIO_ASSIGN_OR_RETURN(Value l, ListResult(std::move(tmp), ctx));
    groups.push_back(std::move(l));
  }
  return Status::Ok();
}

Result<Value> DoBatchOrSlice(const Value& v, CallArgs& args, const BuiltinContext& ctx,
                             bool batch) {
  FOLIO_ASSIGN_OR_RETURN(auto p, Bind(batch ? "do_batch" : "do_slice", args,
                                      {batch ? "linecount" : "slices", "fill_with"}));
  if (!p[0]) return TypeError("missing required argument");
  std::vector<Value> groups;
  const Status s = batch ? BatchBody(v, p, ctx, groups) : SliceBody(v, p, ctx, groups);
  return Generator(std::move(groups), s, ctx);
}

Result<Value> DoDictsort(const Value& v, CallArgs& args, const BuiltinContext& ctx) {
  FOLIO_ASSIGN_OR_RETURN(auto p, Bind("do_dictsort", args, {"case_sensitive", "by", "reverse"}));
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_dict()) return TypeError(StrCat("'", TypeName(v), "' object has no attribute 'items'"));
  size_t pos = 0;
  if (p[1]) {
    const std::string by = S(*p[1]);
    if (by == "value") {
      pos = 1;
    } else if (by != "key") {
      return Status::InvalidArgument("You can only sort by either \"key\" or \"value\"");
    }
  }
  const bool case_sensitive = FlagOf(p[0], false), reverse = FlagOf(p[2], false);
  std::vector<std::pair<Value, Value>> pairs = v.dict().items;
  Status error;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const auto& x, const auto& y) {
    if (!error.ok()) return false;
    Value a = pos == 0 ? x.first : x.second, b = pos == 0 ? y.first : y.second;
    if (!case_sensitive) a = IgnoreCase(a), b = IgnoreCase(b);
    Result<bool> lt = reverse ? Less(b, a) : Less(a, b);
    if (!lt) {
      error = lt.error();
      return false;
    }
    return *lt;
  });
  FOLIO_RETURN_IF_ERROR(error);
  std::vector<Value> out;
  for (auto& [k, val] : pairs) out.push_back(*MakeList({k, val}, ListFlavor::kTuple));
  return ListResult(std::move(out), ctx);
}

// jinja2's do_title: each run between [-\s({[<] separators starts upper.
std::string Title(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool at_start = true;
  for (size_t pos = 0; pos < s.size();) {
    const char32_t cp = DecodeUtf8(s, &pos);
    const bool separator =
        cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || IsPySpace(cp);
    if (separator) {
      AppendUtf8(out, cp);
      at_start = true;
      continue;
    }
    AppendCase(out, cp, at_start ? CaseMap::kUpper : CaseMap::kLower);
    at_start = false;
  }
  return out;
}

bool IsWordCp(char32_t cp) {
  return cp == '_' || IsDigitCp(cp) || IsAlphaCp(cp) ||
         (cp >= 0x80 && !IsPySpace(cp) && !(cp >= 0x2000 && cp <= 0x206F) &&
          !(cp >= 0x3000 && cp <= 0x303F) && !(cp >= 0xFF00 && cp <= 0xFF0F) && cp != 0xA0 &&
          !(cp >= 0xA1 && cp <= 0xBF && cp != 0xAA && cp != 0xB5 && cp != 0xBA) && cp != 0xD7 &&
          cp != 0xF7);
}

Result<Value> DoTojson(const Value& v, CallArgs& args, const BuiltinContext& ctx) {
  FOLIO_ASSIGN_OR_RETURN(
      auto p, Bind("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonOptions o;
  o.ensure_ascii = FlagOf(p[0], false);
  o.sort_keys = FlagOf(p[3], false);
  if (p[1] && !p[1]->is_none()) {
    if (p[1]->is_string()) {
      o.indent = std::string(p[1]->str());
    } else if (p[1]->is_integral()) {
      const int64_t n = p[1]->as_int();
      if (n > 4096) return Status::ResourceExhausted("tojson indent too wide");
      o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, n)), ' ');
    } else {
      return TypeError(
          StrCat("can't multiply sequence by non-int of type '", TypeName(*p[1]), "'"));
    }
    o.item_separator = ",";
  }
  if (p[2] && !p[2]->is_none()) {
    FOLIO_ASSIGN_OR_RETURN(std::vector<Value> seps, Items(*p[2]));
    if (seps.size() != 2) {
      return Status::InvalidArgument(StrCat("separators: expected 2 values, got ", seps.size()));
    }
    o.item_separator = S(seps[0]);
    o.key_separator = S(seps[1]);
  }
  FOLIO_ASSIGN_OR_RETURN(std::string text, JsonDumps(v, o, ctx.max_bytes));
  return StrResult(std::move(text), ctx);
}

}  // namespace

Result<Value> ApplyFilter(FilterId id, const Value& v, CallArgs& args, const BuiltinContext& ctx) {
  switch (id) {
    case FilterId::kAbs:
      FOLIO_RETURN_IF_ERROR(NoArgs("abs", args));
      if (v.kind() == Kind::kFloat) return Value::Float(std::fabs(v.as_float()));
      if (v.is_integral()) {
        if (v.as_int() == INT64_MIN) return Status::Unimplemented("an integer past 64 bits");
        return Value::Int(v.as_int() < 0 ? -v.as_int() : v.as_int());
      }
      return TypeError(StrCat("bad operand type for abs(): '", TypeName(v), "'"));
    case FilterId::kAttr: {
      FOLIO_ASSIGN_OR_RETURN(auto p, Bind("do_attr", args, {"name"}));
      if (!p[0]) return TypeError("do_attr() missing 1 required positional argument: 'name'");
      if (!p[0]->is_string()) return TypeError("attribute name must be string");
      if (v.is_undefined()) return UndefinedError(v);
      if (v.is_dict() && LookupMethod(v, p[0]->str()) == MethodLookup::kNotFound) {
        return Value::Undefined(UndefinedReason::kAttribute, p[0]->str(), "dict");
      }
      return GetAttr(v, p[0]->str());
    }
    case FilterId::kBatch:
      return DoBatchOrSlice(v, args, ctx, true);
    case FilterId::kCapitalize:
      FOLIO_RETURN_IF_ERROR(NoArgs("do_capitalize", args));
      return Value::Str(PyCapitalize(S(v)));
    case FilterId::kCenter: {
      FOLIO_ASSIGN_OR_RETURN(auto p, Bind("do_center", args, {"width"}));
      FOLIO_ASSIGN_OR_RETURN(int64_t width, IntParam(p[0], 80, "width"));
      const std::string s = S(v);
      const auto len = static_cast<int64_t>(CountCodePoints(s));
      if (width <= len) return Value::Str(s);
      if (width > static_cast<int64_t>(ctx.max_bytes))
        return Status::ResourceExhausted("center too wide");
      const int64_t marg = width - len;
      const int64_t left = marg / 2 + (marg & width & 1);
      return Value::Str(std::string(static_cast<size_t>(left), ' ') + s +
                        std::string(static_cast<size_t>(marg - left), ' '));
    }
    case FilterId::kDefault: {
      FOLIO_ASSIGN_OR_RETURN(auto p, Bind("do_default", args, {"default_value", "boolean"}));
      if (v.is_undefined() || (FlagOf(p[1], false) && !Truthy(v))) {
        return p[0] ? *p[0] : Value::Borrowed("");
      }
      return v;
    }
    case FilterId::kDictsort:
      return DoDictsort(v, args, ctx);
    case FilterId::kEscape: {
      FOLIO_RETURN_IF_ERROR(NoArgs("escape", args));
      if (v.is_string() && v.markup()) return v;  // already safe
      FOLIO_ASSIGN_OR_RETURN(Value e, StrResult(Escape(S(v)), ctx));
      return Value::Markup(std::move(e));
    }
    case FilterId::kFirst: {
      FOLIO_RETURN_IF_ERROR(NoArgs("sync_do_first", args));
      if (v.is_list() && v.flavor() == ListFlavor::kIterator) {
        const ListObject& l = v.list();
        if (l.consumed < l.items.size()) return l.items[l.consumed++];
        if (l.error) return *l.error;
      } else {
        FOLIO_ASSIGN_OR_RETURN(std::vector<Value> items, Items(v));
        if (!items.empty()) return items.front();
      }
      return Value::Undefined(UndefinedReason::kMessage, "No first item, sequence was empty.");
    }
    case FilterId::kFloat:
      return DoFloat(v, args);
    case FilterId::kFormat: {
      if (!args.args.empty() && !args.kwargs.empty()) {
        return Status::InvalidArgument(
            "can't handle positional and keyword arguments at the same time");
      }
      Value params;
      if (!args.kwargs.empty()) {
        std::vector<std::pair<Value, Value>> kw;
        for (auto& [k, val] : args.kwargs) kw.emplace_back(Value::Borrowed(k), val);
        params = *MakeDict(std::move(kw));
      } else {
        FOLIO_ASSIGN_OR_RETURN(params, ListResult(args.args, ctx, ListFlavor::kTuple));
      }
      return PercentFormat(S(v), params, ctx.max_bytes);
    }
    case FilterId::kIndent:
      return DoIndent(v, args, ctx);
    case FilterId::kInt:
      return DoInt(v, args);
    case FilterId::kItems: {
      FOLIO_RETURN_IF_ERROR(NoArgs("do_items", args));
      if (v.is_undefined()) return Iterator({}, ctx);
      if (!v.is_dict()) {
        return Generator({}, TypeError("Can only get item pairs from a mapping."), ctx);
      }
      std::vector<Value> pairs;
      for (const auto& [k, val] : v.dict().items) {
        pairs.push_back(*MakeList({k, val}, ListFlavor::kTuple));
      }
      return Iterator(std::move(pairs), ctx);
    }
    case FilterId::kJoin:
      return DoJoin(v, args, ctx);
    case FilterId::kLast:
      FOLIO_RETURN_IF_ERROR(NoArgs("do_last", args));
      return DoLast(v);
    case FilterId::kLength: {
      FOLIO_RETURN_IF_ERROR(NoArgs("len", args));
      std::optional<int64_t> n = Length(v);
      if (!n) return TypeError(StrCat("object of type '", TypeName(v), "' has no len()"));
      return Value::Int(*n);
    }
    case FilterId::kList: {
      FOLIO_RETURN_IF_ERROR(NoArgs("sync_do_list", args));
      FOLIO_ASSIGN_OR_RETURN(std::vector<Value> items, Items(v));
      return ListResult(std::move(items), ctx);
    }
    case FilterId::kLower:
      FOLIO_RETURN_IF_ERROR(NoArgs("do_lower", args));
      return Value::Str(ToCase(S(v), CaseMap::kLower));
    case FilterId::kUpper:
      FOLIO_RETURN_IF_ERROR(NoArgs("do_upper", args));
      return StrResult(ToCase(S(v), CaseMap::kUpper), ctx);
    case FilterId::kMap:
      return DoMap(v, args, ctx);
    case FilterId::kMax:
    case FilterId::kMin:
      return DoMinMax(v, args, id == FilterId::kMax);
    case FilterId::kSelect:
    case FilterId::kReject:
      return DoSelect(v, args, ctx, id == FilterId::kSelect, false);
    case FilterId::kSelectattr:
    case FilterId::kRejectattr:
      return DoSelect(v, args, ctx, id == FilterId::kSelectattr, true);
    case FilterId::kReplace: {
      FOLIO_ASSIGN_OR_RETURN(auto p, Bind("do_replace", args, {"old", "new", "count"}));
      if (!p[0] || !p[1]) return TypeError("do_replace() missing required arguments");
      int64_t count = -1;
      if (p[2] && !p[2]->is_none()) {
        FOLIO_ASSIGN_OR_RETURN(count, IntParam(p[2], -1, "count"));
      }
      CallArgs m;
      m.args = {Value::Str(S(*p[0])), Value::Str(S(*p[1])), Value::Int(count)};
      return CallMethod(Value::Str(S(v)), "replace", m, ctx);
    }
    case FilterId::kReverse:
      FOLIO_RETURN_IF_ERROR(NoArgs("do_reverse", args));
      return DoReverse(v, ctx);
    case FilterId::kRound:
      return DoRound(v, args);
    case FilterId::kSafe:
      FOLIO_RETURN_IF_ERROR(NoArgs("do_mark_safe", args));
      return Value::Markup(v.is_string() ? v : Value::Str(S(v)));
    case FilterId::kSlice:
      return DoBatchOrSlice(v, args, ctx, false);
    case FilterId::kSort:
      return DoSort(v, args, ctx);
    case FilterId::kString:
      FOLIO_RETURN_IF_ERROR(NoArgs("soft_str", args));
      return v.is_string() ? v : Value::Str(S(v));
    case FilterId::kSum:
      return DoSum(v, args, ctx);
    case FilterId::kTitle:
      FOLIO_RETURN_IF_ERROR(NoArgs("do_title", args));
      return Value::Str(Title(S(v)));
    case FilterId::kTojson:
      return DoTojson(v, args, ctx);
    case FilterId::kTrim: {
      FOLIO_ASSIGN_OR_RETURN(auto p, Bind("do_trim", args, {"chars"}));
      std::optional<std::string_view> chars;
      if (p[0] && !p[0]->is_none()) {
        if (!p[0]->is_string()) {
          return TypeError(StrCat("strip arg must be None or str, not ", TypeName(*p[0])));
        }
        chars = p[0]->str();
      }
      if (v.is_string()) {
        const std::string_view t = StripChars(v.str(), chars, true, true);
        return Value::Substr(v, static_cast<size_t>(t.data() - v.str().data()), t.size());
      }
      return Value::Str(std::string(StripChars(S(v), chars, true, true)));
    }
    case FilterId::kUnique:
      return DoUnique(v, args, ctx);
    case FilterId::kWordcount: {
      FOLIO_RETURN_IF_ERROR(NoArgs("do_wordcount", args));
      const std::string s = S(v);
      int64_t words = 0;
      bool in_word = false;
      for (size_t pos = 0; pos < s.size();) {
        const bool w = IsWordCp(DecodeUtf8(s, &pos));
        if (w && !in_word) ++words;
        in_word = w;
      }
      return Value::Int(words);
    }
  }
  return Status::Unimplemented("filter");
}

}  // namespace folio::chat::internal
