// Methods of str, dict and list values (x.strip(), d.items(), ...), the
// ones chat templates call; the sandbox refuses those that would change a
// list or dict.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/access.h"
#include "chat/builtins.h"
#include "chat/builtins_internal.h"
#include "chat/operators.h"
#include "chat/text.h"
#include "folio/core/str_cat.h"

namespace folio::chat::internal {
namespace {

constexpr std::string_view kStrMethods[] = {
    "capitalize",   "casefold", "center",    "count",      "endswith",   "find",
    "format",       "index",    "isalnum",   "isalpha",    "isascii",    "isdecimal",
    "isdigit",      "islower",  "isnumeric", "isspace",    "istitle",    "isupper",
    "join",         "ljust",    "lower",     "lstrip",     "partition",  "removeprefix",
    "removesuffix", "replace",  "rfind",     "rindex",     "rjust",      "rpartition",
    "rsplit",       "rstrip",   "split",     "splitlines", "startswith", "strip",
    "swapcase",     "title",    "upper",     "zfill"};
constexpr std::string_view kStrUnsupported[] = {
    "encode", "expandtabs", "format_map", "isidentifier", "isprintable", "maketrans", "translate"};
constexpr std::string_view kDictMethods[] = {"copy", "get", "items", "keys", "values"};
constexpr std::string_view kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::string_view kListUnsafe[] = {"append", "clear",  "extend",  "insert",
                                            "pop",    "remove", "reverse", "sort"};

template <size_t N>
bool In(const std::string_view (&set)[N], std::string_view name) {
  return std::find(std::begin(set), std::end(set), name) != std::end(set);
}

// Code point offsets of s (offsets[i] = byte offset of code point i; one
// extra entry for the end).
std::vector<size_t> CodePoints(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t pos = 0; pos < s.size();) {
    offsets.push_back(pos);
    DecodeUtf8(s, &pos);
  }
  offsets.push_back(s.size());
  return offsets;
}

Result<std::string_view> StrArg(const std::optional<Value>& v, std::string_view what) {
  if (!v || !v->is_string()) {
    return TypeError(StrCat(what, " must be str, not ", v ? TypeName(*v) : "nothing"));
  }
  return v->str();
}

Result<int64_t> IntArg(const std::optional<Value>& v, int64_t fallback) {
  if (!v || v->is_none()) return fallback;
  if (v->is_integral()) return v->as_int();
  return TypeError(StrCat("'", TypeName(*v), "' object cannot be interpreted as an integer"));
}

// s[start:end] for find/count/startswith, in code points: the byte range.
Result<std::pair<size_t, size_t>> Window(std::string_view s, const std::optional<Value>& start,
                                         const std::optional<Value>& end) {
  if ((!start || start->is_none()) && (!end || end->is_none()))
    return std::make_pair<size_t, size_t>(0, s.size());
  const std::vector<size_t> cps = CodePoints(s);
  const auto n = static_cast<int64_t>(cps.size() - 1);
  std::optional<int64_t> lo, hi;
  if (start && !start->is_none()) {
    FOLIO_ASSIGN_OR_RETURN(lo, IntArg(start, 0));
  }
  if (end && !end->is_none()) {
    FOLIO_ASSIGN_OR_RETURN(hi, IntArg(end, n));
  }
  const SliceIndexes ix = AdjustSlice(n, lo, hi, 1);
  if (ix.count == 0 && lo && *lo > n) return std::make_pair(s.size() + 1, s.size() + 1);
  return std::make_pair(cps[static_cast<size_t>(ix.start)],
                        cps[static_cast<size_t>(ix.start + ix.count)]);
}

int64_t CodePointIndex(std::string_view s, size_t byte_offset) {
  return static_cast<int64_t>(CountCodePoints(s.substr(0, byte_offset)));
}

Result<Value> Split(std::string_view s, const std::optional<Value>& sep_v,
                    const std::optional<Value>& max_v, bool from_right, const BuiltinContext& ctx) {
  FOLIO_ASSIGN_OR_RETURN(int64_t maxsplit, IntArg(max_v, -1));
  std::vector<std::string_view> parts;
  if (!sep_v || sep_v->is_none()) {
    // Runs of whitespace; no empty strings.
    std::vector<std::pair<size_t, size_t>> words;  // byte ranges
    size_t pos = 0;
    while (pos < s.size()) {
      size_t next = pos;
      if (IsPySpace(DecodeUtf8(s, &next))) {
        pos = next;
        continue;
      }
      size_t end = pos;
      while (end < s.size()) {
        size_t n2 = end;
        if (IsPySpace(DecodeUtf8(s, &n2))) break;
        end = n2;
      }
      words.emplace_back(pos, end);
      pos = end;
    }
    if (maxsplit < 0 || static_cast<size_t>(maxsplit) >= words.size()) {
      for (const auto& [b, e] : words) parts.push_back(s.substr(b, e - b));
    } else if (!from_right) {
      for (int64_t i = 0; i < maxsplit; ++i) {
        parts.push_back(
            s.substr(words[static_cast<size_t>(i)].first,
                     words[static_cast<size_t>(i)].second - words[static_cast<size_t>(i)].first));
      }
      // The rest is kept as it is, trailing whitespace included.
      parts.push_back(s.substr(words[static_cast<size_t>(maxsplit)].first));
    } else {
      const size_t keep = words.size() - static_cast<size_t>(maxsplit);
      const size_t e = words[keep - 1].second;
      parts.push_back(s.substr(0, e));
      for (size_t i = keep; i < words.size(); ++i) {
        parts.push_back(s.substr(words[i].first, words[i].second - words[i].first));
      }
    }
  } else {
    FOLIO_ASSIGN_OR_RETURN(std::string_view sep, StrArg(sep_v, "sep"));
    if (sep.empty()) return Status::InvalidArgument("empty separator");
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        const size_t at = s.find(sep, pos);
        if (at == std::string_view::npos) break;
        parts.push_back(s.substr(pos, at - pos));
        pos = at + sep.size();
      }
      parts.push_back(s.substr(pos));
    } else {
      size_t end = s.size();
      std::vector<std::string_view> rev;
      while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
        if (end < sep.size()) break;
        const size_t at = s.rfind(sep, end - sep.size());
        if (at == std::string_view::npos) break;
        rev.push_back(s.substr(at + sep.size(), end - at - sep.size()));
        end = at;
      }
      parts.push_back(s.substr(0, end));
      parts.insert(parts.end(), rev.rbegin(), rev.rend());
    }
  }
  std::vector<Value> items;
  items.reserve(parts.size());
  for (std::string_view p : parts) items.push_back(Value::Str(std::string(p)));
  return ListResult(std::move(items), ctx);
}

Result<Value> Replace(std::string_view s, std::string_view old, std::string_view repl,
                      int64_t count, const BuiltinContext& ctx) {
  std::string out;
  auto check = [&]() -> Status {
    if (out.size() > ctx.max_bytes) {
      return Status::ResourceExhausted(
          StrCat("a string exceeds max_output_bytes (", ctx.max_bytes, ")"));
    }
    return Status::Ok();
  };
  if (old.empty()) {
    // Python inserts `repl` before every code point and at the end.
    int64_t done = 0;
    size_t pos = 0;
    while (pos < s.size()) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      const size_t b = pos;
      DecodeUtf8(s, &pos);
      out.append(s.substr(b, pos - b));
      FOLIO_RETURN_IF_ERROR(check());
    }
    if (count < 0 || done < count) out += repl;
    FOLIO_RETURN_IF_ERROR(check());
    return Value::Str(std::move(out));
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, pos);
    if (at == std::string_view::npos) break;
    out.append(s.substr(pos, at - pos));
    out += repl;
    pos = at + old.size();
    ++done;
    FOLIO_RETURN_IF_ERROR(check());
  }
  out.append(s.substr(pos));
  FOLIO_RETURN_IF_ERROR(check());
  return Value::Str(std::move(out));
}

Result<Value> Justify(std::string_view name, std::string_view s, CallArgs& args,
                      const BuiltinContext& ctx) {
  FOLIO_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"width", "fillchar"}));
  if (!p[0]) return TypeError(StrCat(name, "() takes at least 1 argument"));
  FOLIO_ASSIGN_OR_RETURN(int64_t width, IntArg(p[0], 0));
  std::string fill = " ";
  if (p[1]) {
    FOLIO_ASSIGN_OR_RETURN(std::string_view f, StrArg(p[1], "fillchar"));
    if (CountCodePoints(f) != 1) {
      return TypeError("The fill character must be exactly one character long");
    }
    fill = std::string(f);
  }
  const auto len = static_cast<int64_t>(CountCodePoints(s));
  if (width <= len) return Value::Str(std::string(s));
  if (width > static_cast<int64_t>(ctx.max_bytes)) return Status::ResourceExhausted("width");
  const int64_t marg = width - len;
  int64_t left = 0;
  if (name == "rjust") left = marg;
  if (name == "center") left = marg / 2 + (marg & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = left; i < marg; ++i) out += fill;
  return Value::Str(std::move(out));
}

// str.format: {} {0} {name} fields with !r / !s and no format spec.
Result<Value> Format(std::string_view fmt, CallArgs& args, const BuiltinContext& ctx) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      return Status::InvalidArgument("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string_view::npos) {
      return Status::InvalidArgument("Single '{' encountered in format string");
    }
    std::string_view field = fmt.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 0;
    if (const size_t colon = field.find(':'); colon != std::string_view::npos) {
      if (colon + 1 < field.size()) {
        return Status::Unimplemented("format specs in str.format are not supported");
      }
      field = field.substr(0, colon);
    }
    if (const size_t bang = field.find('!'); bang != std::string_view::npos) {
      if (bang + 2 != field.size()) return Status::InvalidArgument("invalid conversion");
      conversion = field[bang + 1];
      field = field.substr(0, bang);
    }
    if (field.find_first_of(".[") != std::string_view::npos) {
      return Status::Unimplemented("attribute and index fields in str.format are not supported");
    }
    const Value* arg = nullptr;
    if (field.empty() ||
        std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t idx = field.empty() ? auto_index++ : std::stoul(std::string(field.substr(0, 9)));
      if (idx >= args.args.size()) {
        return Status::InvalidArgument(
            StrCat("Replacement index ", idx, " out of range for positional args tuple"));
      }
      arg = &args.args[idx];
    } else {
      for (const auto& [k, v] : args.kwargs) {
        if (k == field) arg = &v;
      }
      if (arg == nullptr) return Status::InvalidArgument(StrCat("KeyError: '", field, "'"));
    }
    if (conversion == 'r' || conversion == 'a') {
      AppendRepr(out, *arg, ctx.max_bytes);
    } else if (conversion == 's' || conversion == 0) {
      AppendStr(out, *arg, ctx.max_bytes);
    } else {
      return Status::InvalidArgument(
          StrCat("Unknown conversion specifier ", std::string(1, conversion)));
    }
    if (out.size() > ctx.max_bytes) return StrResult(std::move(out), ctx);
  }
  return StrResult(std::move(out), ctx);
}

// A predicate over every code point (isalpha, isdigit, ...): false for "".
template <typename Pred>
Value AllOf(std::string_view s, Pred pred) {
  if (s.empty()) return Value::Bool(false);
  for (size_t pos = 0; pos < s.size();) {
    if (!pred(DecodeUtf8(s, &pos))) return Value::Bool(false);
  }
  return Value::Bool(true);
}

Result<Value> StrMethod(const Value& self, std::string_view name, CallArgs& args,
                        const BuiltinContext& ctx) {
  const std::string_view s = self.str();
  auto none = [&]() -> Status {
    if (!args.args.empty() || !args.kwargs.empty()) {
      return TypeError(StrCat("str.", name, "() takes no arguments"));
    }
    return Status::Ok();
  };
  if (name == "upper" || name == "lower" || name == "casefold") {
    FOLIO_RETURN_IF_ERROR(none());
    return StrResult(ToCase(s, name == "upper" ? CaseMap::kUpper : CaseMap::kLower), ctx);
  }
  if (name == "title") {
    FOLIO_RETURN_IF_ERROR(none());
    return StrResult(PyTitle(s), ctx);
  }
  if (name == "capitalize") {
    FOLIO_RETURN_IF_ERROR(none());
    return StrResult(PyCapitalize(s), ctx);
  }
  if (name == "swapcase") {
    FOLIO_RETURN_IF_ERROR(none());
    std::string out;
    for (size_t pos = 0; pos < s.size();) {
      const char32_t cp = DecodeUtf8(s, &pos);
      AppendCase(out, cp, IsUpperCp(cp) ? CaseMap::kLower : CaseMap::kUpper);
    }
    return StrResult(std::move(out), ctx);
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    FOLIO_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"chars"}));
    const bool left = name != "rstrip", right = name != "lstrip";
    std::string_view t;
    if (!p[0] || p[0]->is_none()) {
      t = StripSpace(s, left, right);
    } else {
      FOLIO_ASSIGN_OR_RETURN(std::string_view chars, StrArg(p[0], "strip arg"));
      std::vector<char32_t> set;
      for (size_t pos = 0; pos < chars.size();) set.push_back(DecodeUtf8(chars, &pos));
      auto in = [&](char32_t cp) { return std::find(set.begin(), set.end(), cp) != set.end(); };
      size_t b = 0, e = s.size();
      if (left) {
        while (b < e) {
          size_t n = b;
          if (!in(DecodeUtf8(s, &n))) break;
          b = n;
        }
      }
      if (right) {
        size_t content_end = b;
        for (size_t pos = b; pos < e;) {
          if (!in(DecodeUtf8(s, &pos))) content_end = pos;
        }
        e = content_end;
      }
      t = s.substr(b, e - b);
    }
    return Value::Substr(self, static_cast<size_t>(t.data() - s.data()), t.size());
  }
  if (name == "split" || name == "rsplit") {
    FOLIO_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"sep", "maxsplit"}));
    return Split(s, p[0], p[1], name == "rsplit", ctx);
  }
  if (name == "splitlines") {
    FOLIO_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"keepends"}));
    std::vector<Value> items;
    for (std::string_view line : SplitLines(s, FlagOf(p[0], false))) {
      items.push_back(Value::Str(std::string(line)));
    }
    return ListResult(std::move(items), ctx);
  }
  if (name == "startswith" || name == "endswith") {
    FOLIO_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"prefix", "start", "end"}));
    if (!p[0]) return TypeError(StrCat(name, "() takes at least 1 argument (0 given)"));
    std::vector<Value> candidates;
    if (p[0]->is_list() && p[0]->flavor() == ListFlavor::kTuple) {
      candidates = p[0]->list().items;
    } else if (p[0]->is_string()) {
      candidates.push_back(*p[0]);
    } else {
      return TypeError(
          StrCat(name, " first arg must be str or a tuple of str, not ", TypeName(*p[0])));
    }
    FOLIO_ASSIGN_OR_RETURN(auto window, Window(s, p[1], p[2]));
    if (window.first > s.size()) return Value::Bool(false);
    const std::string_view w = s.substr(window.first, window.second - window.first);
    for (const Value& c : candidates) {
      if (!c.is_string()) {
        return TypeError(StrCat("tuple for ", name, " must only contain str, not ", TypeName(c)));
      }
      const bool hit = name == "startswith" ? w.starts_with(c.str()) : w.ends_with(c.str());
      if (hit) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (name == "replace") {
    FOLIO_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"old", "new", "count"}));
    FOLIO_ASSIGN_OR_RETURN(std::string_view old, StrArg(p[0], "replace() argument 1"));
    FOLIO_ASSIGN_OR_RETURN(std::string_view repl, StrArg(p[1], "replace() argument 2"));
    FOLIO_ASSIGN_OR_RETURN(int64_t count, IntArg(p[2], -1));
    return Replace(s, old, repl, count, ctx);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    FOLIO_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"sub", "start", "end"}));
    FOLIO_ASSIGN_OR_RETURN(std::string_view sub, StrArg(p[0], "must be str"));
    FOLIO_ASSIGN_OR_RETURN(auto window, Window(s, p[1], p[2]));
    if (window.first > s.size()) {
      if (name == "count") return Value::Int(0);
      if (name == "index" || name == "rindex")
        return Status::InvalidArgument("substring not found");
      return Value::Int(-1);
    }
    const std::string_view w = s.substr(window.first, window.second - window.first);
    if (name == "count") {
      if (sub.empty()) return Value::Int(static_cast<int64_t>(CountCodePoints(w)) + 1);
      int64_t n = 0;
      for (size_t at = w.find(sub); at != std::string_view::npos;
           at = w.find(sub, at + sub.size())) {
        ++n;
      }
      return Value::Int(n);
    }
    const size_t at = name == "find" || name == "index" ? w.find(sub) : w.rfind(sub);
    if (at == std::string_view::npos) {
      if (name == "index" || name == "rindex")
        return Status::InvalidArgument("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(CodePointIndex(s, window.first + at));
  }
  if (name == "join") {
    FOLIO_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"iterable"}));
    if (!p[0]) return TypeError("str.join() takes exactly one argument (0 given)");
    FOLIO_ASSIGN_OR_RETURN(std::vector<Value> items, Items(*p[0]));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return TypeError(
            StrCat("sequence item ", i, ": expected str instance, ", TypeName(items[i]), " found"));
      }
      if (i) out += s;
      out += items[i].str();
      if (out.size() > ctx.max_bytes) break;
    }
    return StrResult(std::move(out), ctx);
  }
  if (name == "format") return Format(s, args, ctx);
  if (name == "center" || name == "ljust" || name == "rjust") return Justify(name, s, args, ctx);
  if (name == "zfill") {
    FOLIO_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"width"}));
    FOLIO_ASSIGN_OR_RETURN(int64_t width, IntArg(p[0], 0));
    const auto len = static_cast<int64_t>(CountCodePoints(s));
    if (width <= len) return Value::Str(std::string(s));
    if (width > static_cast<int64_t>(ctx.max_bytes)) return Status::ResourceExhausted("width");
    const size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-');
    return Value::Str(std::string(s.substr(0, sign)) +
                      std::string(static_cast<size_t>(width - len), '0') +
                      std::string(s.substr(sign)));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    FOLIO_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"affix"}));
    FOLIO_ASSIGN_OR_RETURN(std::string_view affix, StrArg(p[0], StrCat(name, "() argument")));
    if (name == "removeprefix" && s.starts_with(affix)) {
      return Value::Substr(self, affix.size(), s.size() - affix.size());
    }
    if (name == "removesuffix" && !affix.empty() && s.ends_with(affix)) {
      return Value::Substr(self, 0, s.size() - affix.size());
    }
    return self;
  }
  if (name == "partition" || name == "rpartition") {
    FOLIO_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"sep"}));
    FOLIO_ASSIGN_OR_RETURN(std::string_view sep, StrArg(p[0], "sep"));
    if (sep.empty()) return Status::InvalidArgument("empty separator");
    const size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    std::vector<Value> parts;
    if (at == std::string_view::npos) {
      if (name == "partition") {
        parts = {self, Value::Borrowed(""), Value::Borrowed("")};
      } else {
        parts = {Value::Borrowed(""), Value::Borrowed(""), self};
      }
    } else {
      parts = {Value::Substr(self, 0, at), Value::Substr(self, at, sep.size()),
               Value::Substr(self, at + sep.size(), s.size() - at - sep.size())};
    }
    return ListResult(std::move(parts), ctx, ListFlavor::kTuple);
  }
  FOLIO_RETURN_IF_ERROR(none());
  if (name == "isalpha") return AllOf(s, IsAlphaCp);
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") return AllOf(s, IsDigitCp);
  if (name == "isalnum") return AllOf(s, [](char32_t c) { return IsAlphaCp(c) || IsDigitCp(c); });
  if (name == "isspace") return AllOf(s, IsPySpace);
  if (name == "isascii") return Value::Bool(IsAscii(s));
  if (name == "islower" || name == "isupper") {
    bool cased = false;
    for (size_t pos = 0; pos < s.size();) {
      const char32_t cp = DecodeUtf8(s, &pos);
      if (name == "islower" ? IsUpperCp(cp) : IsLowerCp(cp)) return Value::Bool(false);
      if (IsCasedCp(cp)) cased = true;
    }
    return Value::Bool(cased);
  }
  if (name == "istitle") {
    bool cased = false, previous_cased = false;
    for (size_t pos = 0; pos < s.size();) {
      const char32_t cp = DecodeUtf8(s, &pos);
      if (IsUpperCp(cp)) {
        if (previous_cased) return Value::Bool(false);
        previous_cased = cased = true;
      } else if (IsLowerCp(cp)) {
        if (!previous_cased) return Value::Bool(false);
        previous_cased = cased = true;
      } else {
        previous_cased = false;
      }
    }
    return Value::Bool(cased);
  }
  return Status::Unimplemented(StrCat("the str method '", name, "' is not supported"));
}

Result<Value> DictMethod(const Value& self, std::string_view name, CallArgs& args,
                         const BuiltinContext& ctx) {
  const DictObject& d = self.dict();
  if (name == "get") {
    FOLIO_ASSIGN_OR_RETURN(auto p, Bind("get", args, {"key", "default"}));
    if (!p[0]) return TypeError("get expected at least 1 argument, got 0");
    if (!Hashable(*p[0])) return TypeError(StrCat("unhashable type: '", TypeName(*p[0]), "'"));
    if (const Value* v = d.Find(*p[0])) return *v;
    return p[1] ? *p[1] : Value::None();
  }
  if (!args.args.empty() || !args.kwargs.empty()) {
    return TypeError(StrCat("dict.", name, "() takes no arguments"));
  }
  if (name == "copy") return self;
  std::vector<Value> items;
  items.reserve(d.items.size());
  for (const auto& [k, v] : d.items) {
    if (name == "keys") {
      items.push_back(k);
    } else if (name == "values") {
      items.push_back(v);
    } else {
      items.push_back(*MakeList({k, v}, ListFlavor::kTuple));
    }
  }
  const ListFlavor flavor = name == "keys"     ? ListFlavor::kDictKeys
                            : name == "values" ? ListFlavor::kDictValues
                                               : ListFlavor::kDictItems;
  return ListResult(std::move(items), ctx, flavor);
}

Result<Value> ListMethod(const Value& self, std::string_view name, CallArgs& args,
                         const BuiltinContext& ctx) {
  const auto& items = self.list().items;
  if (name == "copy") {
    if (!args.args.empty() || !args.kwargs.empty()) return TypeError("copy() takes no arguments");
    return ListResult(items, ctx, self.flavor());
  }
  FOLIO_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"value", "start", "stop"}));
  if (!p[0]) return TypeError(StrCat(name, "() takes at least 1 argument (0 given)"));
  if (name == "count") {
    return Value::Int(static_cast<int64_t>(std::count_if(
        items.begin(), items.end(), [&](const Value& v) { return Equals(v, *p[0]); })));
  }
  FOLIO_ASSIGN_OR_RETURN(int64_t start, IntArg(p[1], 0));
  FOLIO_ASSIGN_OR_RETURN(int64_t stop, IntArg(p[2], static_cast<int64_t>(items.size())));
  const SliceIndexes ix = AdjustSlice(static_cast<int64_t>(items.size()), start, stop, 1);
  for (int64_t i = ix.start; i < ix.start + ix.count; ++i) {
    if (Equals(items[static_cast<size_t>(i)], *p[0])) return Value::Int(i);
  }
  return Status::InvalidArgument(StrCat(TypeName(self), ".index(x): x not in ", TypeName(self)));
}

}  // namespace

MethodLookup LookupMethod(const Value& receiver, std::string_view name) {
  switch (receiver.kind()) {
    case Kind::kString:
      if (In(kStrMethods, name)) return MethodLookup::kMethod;
      if (In(kStrUnsupported, name)) return MethodLookup::kUnsupported;
      return MethodLookup::kNotFound;
    case Kind::kDict:
      if (In(kDictMethods, name)) return MethodLookup::kMethod;
      if (In(kDictUnsafe, name)) return MethodLookup::kUnsafe;
      if (name == "fromkeys") return MethodLookup::kUnsupported;
      return MethodLookup::kNotFound;
    case Kind::kList:
      switch (receiver.flavor()) {
        case ListFlavor::kList:
          if (name == "count" || name == "index" || name == "copy") return MethodLookup::kMethod;
          if (In(kListUnsafe, name)) return MethodLookup::kUnsafe;
          return MethodLookup::kNotFound;
        case ListFlavor::kTuple:
        case ListFlavor::kRange:
          if (name == "count" || name == "index") return MethodLookup::kMethod;
          return MethodLookup::kNotFound;
        case ListFlavor::kDictKeys:
        case ListFlavor::kDictItems:
          if (name == "isdisjoint" || name == "mapping") return MethodLookup::kUnsupported;
          return MethodLookup::kNotFound;
        case ListFlavor::kDictValues:
          if (name == "mapping") return MethodLookup::kUnsupported;
          return MethodLookup::kNotFound;
        case ListFlavor::kIterator:
          if (name == "send" || name == "throw" || name == "close") {
            return MethodLookup::kUnsupported;
          }
          return MethodLookup::kNotFound;
      }
      return MethodLookup::kNotFound;
    default:
      return MethodLookup::kNotFound;
  }
}

Result<Value> CallMethod(const Value& receiver, std::string_view name, CallArgs& args,
                         const BuiltinContext& ctx) {
  switch (LookupMethod(receiver, name)) {
    case MethodLookup::kNotFound:
      return TypeError(StrCat("'", TypeName(receiver), "' object has no method '", name, "'"));
    case MethodLookup::kUnsafe:
      return Status::InvalidArgument(StrCat("access to attribute '", name, "' of '",
                                            TypeName(receiver), "' object is unsafe."));
    case MethodLookup::kUnsupported:
      return Status::Unimplemented(
          StrCat("the ", TypeName(receiver), " method '", name, "' is not supported"));
    case MethodLookup::kMethod:
      break;
  }
  if (receiver.is_string()) return StrMethod(receiver, name, args, ctx);
  if (receiver.is_dict()) return DictMethod(receiver, name, args, ctx);
  return ListMethod(receiver, name, args, ctx);
}

}  // namespace folio::chat::internal
