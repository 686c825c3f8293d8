// The name tables, the tests and the globals.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <memory>

#include "chat/access.h"
#include "chat/builtins.h"
#include "chat/builtins_internal.h"
#include "chat/operators.h"
#include "chat/text.h"
#include "folio/core/str_cat.h"

namespace folio::chat::internal {

Status TypeError(std::string message) { return Status::InvalidArgument(std::move(message)); }

namespace {

struct FilterName {
  std::string_view name;
  FilterId id;
};
constexpr FilterName kFilters[] = {
    {"abs", FilterId::kAbs},           {"attr", FilterId::kAttr},
    {"batch", FilterId::kBatch},       {"capitalize", FilterId::kCapitalize},
    {"center", FilterId::kCenter},     {"count", FilterId::kLength},
    {"d", FilterId::kDefault},         {"default", FilterId::kDefault},
    {"dictsort", FilterId::kDictsort}, {"e", FilterId::kEscape},
    {"escape", FilterId::kEscape},     {"first", FilterId::kFirst},
    {"float", FilterId::kFloat},       {"forceescape", FilterId::kEscape},
    {"format", FilterId::kFormat},     {"indent", FilterId::kIndent},
    {"int", FilterId::kInt},           {"items", FilterId::kItems},
    {"join", FilterId::kJoin},         {"last", FilterId::kLast},
    {"length", FilterId::kLength},     {"list", FilterId::kList},
    {"lower", FilterId::kLower},       {"map", FilterId::kMap},
    {"max", FilterId::kMax},           {"min", FilterId::kMin},
    {"reject", FilterId::kReject},     {"rejectattr", FilterId::kRejectattr},
    {"replace", FilterId::kReplace},   {"reverse", FilterId::kReverse},
    {"round", FilterId::kRound},       {"safe", FilterId::kSafe},
    {"select", FilterId::kSelect},     {"selectattr", FilterId::kSelectattr},
    {"slice", FilterId::kSlice},       {"sort", FilterId::kSort},
    {"string", FilterId::kString},     {"sum", FilterId::kSum},
    {"title", FilterId::kTitle},       {"tojson", FilterId::kTojson},
    {"trim", FilterId::kTrim},         {"unique", FilterId::kUnique},
    {"upper", FilterId::kUpper},       {"wordcount", FilterId::kWordcount},
};
// jinja2's other filters: accepted by jinja2, refused by folio.
constexpr std::string_view kJinjaOnlyFilters[] = {
    "filesizeformat", "groupby",   "pprint", "random",   "striptags",
    "truncate",       "urlencode", "urlize", "wordwrap", "xmlattr"};

struct TestName {
  std::string_view name;
  TestId id;
};
constexpr TestName kTests[] = {
    {"!=", TestId::kNe},
    {"<", TestId::kLt},
    {"<=", TestId::kLe},
    {"==", TestId::kEq},
    {">", TestId::kGt},
    {">=", TestId::kGe},
    {"boolean", TestId::kBoolean},
    {"callable", TestId::kCallable},
    {"defined", TestId::kDefined},
    {"divisibleby", TestId::kDivisibleby},
    {"eq", TestId::kEq},
    {"equalto", TestId::kEq},
    {"escaped", TestId::kEscaped},
    {"even", TestId::kEven},
    {"false", TestId::kFalse},
    {"filter", TestId::kFilter},
    {"float", TestId::kFloat},
    {"ge", TestId::kGe},
    {"greaterthan", TestId::kGt},
    {"gt", TestId::kGt},
    {"in", TestId::kIn},
    {"integer", TestId::kInteger},
    {"iterable", TestId::kIterable},
    {"le", TestId::kLe},
    {"lessthan", TestId::kLt},
    {"lower", TestId::kLower},
    {"lt", TestId::kLt},
    {"mapping", TestId::kMapping},
    {"ne", TestId::kNe},
    {"none", TestId::kNone},
    {"number", TestId::kNumber},
    {"odd", TestId::kOdd},
    {"sameas", TestId::kSameas},
    {"sequence", TestId::kSequence},
    {"string", TestId::kString},
    {"test", TestId::kTest},
    {"true", TestId::kTrue},
    {"undefined", TestId::kUndefined},
    {"upper", TestId::kUpper},
};

struct GlobalName_ {
  std::string_view name;
  GlobalId id;
};
constexpr GlobalName_ kGlobals[] = {
    {"range", GlobalId::kRange},
    {"namespace", GlobalId::kNamespace},
    {"dict", GlobalId::kDict},
    {"raise_exception", GlobalId::kRaiseException},
    {"strftime_now", GlobalId::kStrftimeNow},
    {"cycler", GlobalId::kCycler},
    {"joiner", GlobalId::kJoiner},
    {"lipsum", GlobalId::kLipsum},
};

}  // namespace

std::optional<FilterId> LookupFilter(std::string_view name, bool* known_to_jinja) {
  for (const FilterName& f : kFilters) {
    if (f.name == name) {
      *known_to_jinja = true;
      return f.id;
    }
  }
  *known_to_jinja = std::find(std::begin(kJinjaOnlyFilters), std::end(kJinjaOnlyFilters), name) !=
                    std::end(kJinjaOnlyFilters);
  return std::nullopt;
}

std::optional<TestId> LookupTest(std::string_view name, bool* known_to_jinja) {
  for (const TestName& t : kTests) {
    if (t.name == name) {
      *known_to_jinja = true;
      return t.id;
    }
  }
  *known_to_jinja = false;
  return std::nullopt;
}

GlobalId LookupGlobal(std::string_view name) {
  for (const auto& g : kGlobals) {
    if (g.name == name) return g.id;
  }
  return GlobalId::kNone;
}

std::string_view GlobalName(GlobalId id) {
  for (const auto& g : kGlobals) {
    if (g.id == id) return g.name;
  }
  return "?";
}

// --- shared helpers -------------------------------------------------------

Result<std::vector<std::optional<Value>>> Bind(std::string_view function, CallArgs& args,
                                               std::initializer_list<std::string_view> params) {
  std::vector<std::optional<Value>> slots(params.size());
  if (args.args.size() > params.size()) {
    return TypeError(StrCat(function, "() takes at most ", params.size(), " argument(s) (",
                            args.args.size(), " given)"));
  }
  for (size_t i = 0; i < args.args.size(); ++i) slots[i] = std::move(args.args[i]);
  for (auto& [name, v] : args.kwargs) {
    const auto it = std::find(params.begin(), params.end(), name);
    if (it == params.end()) {
      return TypeError(StrCat(function, "() got an unexpected keyword argument '", name, "'"));
    }
    auto& slot = slots[static_cast<size_t>(it - params.begin())];
    if (slot) {
      return TypeError(StrCat(function, "() got multiple values for argument '", name, "'"));
    }
    slot = std::move(v);
  }
  return slots;
}

Result<Value> ListResult(std::vector<Value> items, const BuiltinContext& ctx, ListFlavor flavor) {
  if (items.size() > ctx.max_bytes) {
    return Status::ResourceExhausted(StrCat(
        "a list of ", items.size(), " items exceeds max_output_bytes (", ctx.max_bytes, ")"));
  }
  std::optional<Value> v = MakeList(std::move(items), flavor);
  if (!v) return Status::ResourceExhausted(StrCat("a value nests deeper than ", kMaxNesting));
  return *v;
}

Result<Value> StrResult(std::string s, const BuiltinContext& ctx) {
  if (s.size() > ctx.max_bytes) {
    return Status::ResourceExhausted(
        StrCat("a string of ", s.size(), " bytes exceeds max_output_bytes (", ctx.max_bytes, ")"));
  }
  return Value::Str(std::move(s));
}

Result<std::vector<Value>> Items(const Value& v) { return Iterate(v); }

Result<Value> Generator(std::vector<Value> items, const Status& error, const BuiltinContext& ctx) {
  FOLIO_ASSIGN_OR_RETURN(Value v, ListResult(std::move(items), ctx, ListFlavor::kIterator));
  if (!error.ok()) const_cast<ListObject&>(v.list()).error = error;
  return v;
}

Result<Value> AttrPath(const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return GetItem(item, attribute);
  Value cur = item;
  std::string_view path = attribute.str();
  while (true) {
    const size_t dot = path.find('.');
    const std::string_view part = path.substr(0, dot);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    if (digits && part.size() < 19) {
      FOLIO_ASSIGN_OR_RETURN(cur, GetItem(cur, Value::Int(std::stoll(std::string(part)))));
    } else {
      FOLIO_ASSIGN_OR_RETURN(cur, GetItem(cur, Value::Borrowed(part)));
    }
    if (dot == std::string_view::npos) return cur;
    path.remove_prefix(dot + 1);
  }
}

bool FlagOf(const std::optional<Value>& v, bool fallback) { return v ? Truthy(*v) : fallback; }

std::vector<std::string_view> SplitLines(std::string_view s, bool keepends) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  for (size_t pos = 0; pos < s.size();) {
    const size_t at = pos;
    const char32_t cp = DecodeUtf8(s, &pos);
    const bool brk = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C ||
                     cp == 0x1D || cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!brk) continue;
    if (cp == '\r' && pos < s.size() && s[pos] == '\n') ++pos;
    lines.push_back(s.substr(start, (keepends ? pos : at) - start));
    start = pos;
  }
  if (start < s.size()) lines.push_back(s.substr(start));
  return lines;
}

// --- tests ----------------------------------------------------------------

namespace {

Result<bool> Remainder(const Value& v, const Value& divisor, int64_t want) {
  FOLIO_ASSIGN_OR_RETURN(Value r, Arithmetic(BinaryOp::kMod, v, divisor, 1 << 20));
  return Equals(r, Value::Int(want));
}

bool SameAs(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
      return false;
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return a.as_bool() == b.as_bool();
    case Kind::kInt:  // CPython keeps one object for each of -5..256
      return a.as_int() == b.as_int() && a.as_int() >= -5 && a.as_int() <= 256;
    case Kind::kFloat:
      return false;
    case Kind::kString:
      return a.str().data() == b.str().data() && a.str().size() == b.str().size();
    default:
      return a.object_ptr() == b.object_ptr();
  }
}

}  // namespace

Result<bool> ApplyTest(TestId id, const Value& v, CallArgs& args, const BuiltinContext& ctx) {
  (void)ctx;
  auto one_arg = [&](std::string_view name) -> Result<Value> {
    FOLIO_ASSIGN_OR_RETURN(auto slots, Bind(name, args, {"other"}));
    if (!slots[0]) {
      return TypeError(StrCat(name, "() missing 1 required positional argument"));
    }
    return *slots[0];
  };
  auto no_args = [&](std::string_view name) -> Status {
    if (!args.args.empty() || !args.kwargs.empty()) {
      return TypeError(StrCat("test_", name, "() takes 1 positional argument"));
    }
    return Status::Ok();
  };
  switch (id) {
    case TestId::kDefined:
      FOLIO_RETURN_IF_ERROR(no_args("defined"));
      return !v.is_undefined();
    case TestId::kUndefined:
      FOLIO_RETURN_IF_ERROR(no_args("undefined"));
      return v.is_undefined();
    case TestId::kNone:
      FOLIO_RETURN_IF_ERROR(no_args("none"));
      return v.is_none();
    case TestId::kBoolean:
      FOLIO_RETURN_IF_ERROR(no_args("boolean"));
      return v.kind() == Kind::kBool;
    case TestId::kTrue:
      FOLIO_RETURN_IF_ERROR(no_args("true"));
      return v.kind() == Kind::kBool && v.as_bool();
    case TestId::kFalse:
      FOLIO_RETURN_IF_ERROR(no_args("false"));
      return v.kind() == Kind::kBool && !v.as_bool();
    case TestId::kInteger:
      FOLIO_RETURN_IF_ERROR(no_args("integer"));
      return v.kind() == Kind::kInt;
    case TestId::kFloat:
      FOLIO_RETURN_IF_ERROR(no_args("float"));
      return v.kind() == Kind::kFloat;
    case TestId::kNumber:
      FOLIO_RETURN_IF_ERROR(no_args("number"));
      return v.is_number();
    case TestId::kString:
      FOLIO_RETURN_IF_ERROR(no_args("string"));
      return v.is_string();
    case TestId::kMapping:
      FOLIO_RETURN_IF_ERROR(no_args("mapping"));
      return v.is_dict();
    case TestId::kIterable:
      FOLIO_RETURN_IF_ERROR(no_args("iterable"));
      return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict() ||
             v.kind() == Kind::kLoop;
    case TestId::kSequence:
      FOLIO_RETURN_IF_ERROR(no_args("sequence"));
      if (v.is_list()) {
        const ListFlavor f = v.flavor();
        return f == ListFlavor::kList || f == ListFlavor::kTuple || f == ListFlavor::kRange;
      }
      return v.is_undefined() || v.is_string() || v.is_dict();
    case TestId::kCallable:
      FOLIO_RETURN_IF_ERROR(no_args("callable"));
      return v.kind() == Kind::kCallable || v.is_undefined() || v.kind() == Kind::kLoop;
    case TestId::kEscaped:
      FOLIO_RETURN_IF_ERROR(no_args("escaped"));
      return v.is_string() && v.markup();
    case TestId::kLower:
    case TestId::kUpper: {
      FOLIO_RETURN_IF_ERROR(no_args(id == TestId::kLower ? "lower" : "upper"));
      // str.islower(): some cased character, and none of the other case.
      const std::string s = ToStr(v);
      bool cased = false;
      for (size_t pos = 0; pos < s.size();) {
        const char32_t cp = DecodeUtf8(s, &pos);
        if (id == TestId::kLower ? IsUpperCp(cp) : IsLowerCp(cp)) return false;
        if (id == TestId::kLower ? IsLowerCp(cp) : IsUpperCp(cp)) cased = true;
      }
      return cased;
    }
    case TestId::kOdd:
      FOLIO_RETURN_IF_ERROR(no_args("odd"));
      return Remainder(v, Value::Int(2), 1);
    case TestId::kEven:
      FOLIO_RETURN_IF_ERROR(no_args("even"));
      return Remainder(v, Value::Int(2), 0);
    case TestId::kDivisibleby: {
      FOLIO_ASSIGN_OR_RETURN(Value n, one_arg("test_divisibleby"));
      return Remainder(v, n, 0);
    }
    case TestId::kSameas: {
      FOLIO_ASSIGN_OR_RETURN(Value other, one_arg("test_sameas"));
      return SameAs(v, other);
    }
    case TestId::kIn: {
      FOLIO_ASSIGN_OR_RETURN(Value seq, one_arg("test_in"));
      return Contains(seq, v);
    }
    case TestId::kFilter:
    case TestId::kTest: {
      FOLIO_RETURN_IF_ERROR(no_args(id == TestId::kFilter ? "filter" : "test"));
      if (!v.is_string()) return false;
      bool known = false;
      if (id == TestId::kFilter) {
        LookupFilter(v.str(), &known);
      } else {
        LookupTest(v.str(), &known);
      }
      return known;
    }
    case TestId::kEq:
    case TestId::kNe:
    case TestId::kLt:
    case TestId::kLe:
    case TestId::kGt:
    case TestId::kGe: {
      FOLIO_ASSIGN_OR_RETURN(Value other, one_arg("operator"));
      const CompareOp op = id == TestId::kEq   ? CompareOp::kEq
                           : id == TestId::kNe ? CompareOp::kNe
                           : id == TestId::kLt ? CompareOp::kLt
                           : id == TestId::kLe ? CompareOp::kLe
                           : id == TestId::kGt ? CompareOp::kGt
                                               : CompareOp::kGe;
      return CompareOperation(op, v, other);
    }
  }
  return false;
}

Result<bool> ApplyTestByName(std::string_view name, const Value& v, CallArgs& args,
                             const BuiltinContext& ctx) {
  bool known = false;
  std::optional<TestId> id = LookupTest(name, &known);
  if (!id) return Status::InvalidArgument(StrCat("No test named '", name, "'."));
  return ApplyTest(*id, v, args, ctx);
}

Result<Value> ApplyFilterByName(std::string_view name, const Value& v, CallArgs& args,
                                const BuiltinContext& ctx) {
  bool known = false;
  std::optional<FilterId> id = LookupFilter(name, &known);
  if (!id) {
    if (known)
      return Status::Unimplemented(StrCat("the jinja2 filter '", name, "' is not supported"));
    return Status::InvalidArgument(StrCat("No filter named '", name, "'."));
  }
  return ApplyFilter(*id, v, args, ctx);
}

// --- globals ----------------------------------------------------------------

namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

Result<int64_t> IntArg(const Value& v) {
  if (v.is_integral()) return v.as_int();
  if (v.is_undefined()) return UndefinedError(v);
  return TypeError(StrCat("'", TypeName(v), "' object cannot be interpreted as an integer"));
}

Result<Value> Range(CallArgs& args, const BuiltinContext& ctx) {
  if (!args.kwargs.empty()) return TypeError("range() takes no keyword arguments");
  const size_t n = args.args.size();
  if (n < 1 || n > 3) return TypeError(StrCat("range expected 1 to 3 arguments, got ", n));
  int64_t start = 0, stop = 0, step = 1;
  if (n == 1) {
    FOLIO_ASSIGN_OR_RETURN(stop, IntArg(args.args[0]));
  } else {
    FOLIO_ASSIGN_OR_RETURN(start, IntArg(args.args[0]));
    FOLIO_ASSIGN_OR_RETURN(stop, IntArg(args.args[1]));
    if (n == 3) {
      FOLIO_ASSIGN_OR_RETURN(step, IntArg(args.args[2]));
    }
  }
  if (step == 0) return Status::InvalidArgument("range() arg 3 must not be zero");
  // len(range(start, stop, step)), in unsigned arithmetic that cannot overflow.
  uint64_t count = 0;
  if (step > 0 && stop > start) {
    const uint64_t span = static_cast<uint64_t>(stop) - static_cast<uint64_t>(start);
    count = (span - 1) / static_cast<uint64_t>(step) + 1;
  } else if (step < 0 && start > stop) {
    const uint64_t span = static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
    count = (span - 1) / (static_cast<uint64_t>(-(step + 1)) + 1) + 1;
  }
  if (count > static_cast<uint64_t>(kMaxRange)) {
    return Status::InvalidArgument(
        "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  if (count > ctx.max_bytes) {
    return Status::ResourceExhausted(
        StrCat("a range of ", count, " items exceeds max_output_bytes (", ctx.max_bytes, ")"));
  }
  auto l = std::make_shared<ListObject>();
  l->flavor = ListFlavor::kRange;
  l->range_start = start;
  l->range_stop = stop;
  l->range_step = step;
  l->items.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    // Unsigned: the product may pass 2^63 though the sum lands in range.
    l->items.push_back(Value::Int(
        static_cast<int64_t>(static_cast<uint64_t>(start) + i * static_cast<uint64_t>(step))));
  }
  Value v = Value::FromObject(Kind::kList, std::move(l));
  return v;
}

// dict(*args, **kwargs): one mapping or iterable of pairs, then keywords.
Result<std::vector<std::pair<Value, Value>>> DictItems(CallArgs& args, std::string_view fn) {
  std::vector<std::pair<Value, Value>> items;
  auto put = [&](Value k, Value v) -> Status {
    if (!Hashable(k)) return TypeError(StrCat("unhashable type: '", TypeName(k), "'"));
    for (auto& [old_k, old_v] : items) {
      if (Equals(old_k, k)) {
        old_v = std::move(v);
        return Status::Ok();
      }
    }
    items.emplace_back(std::move(k), std::move(v));
    return Status::Ok();
  };
  if (args.args.size() > 1) {
    return TypeError(StrCat(fn, " expected at most 1 argument, got ", args.args.size()));
  }
  if (args.args.size() == 1) {
    const Value& src = args.args[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.dict().items) FOLIO_RETURN_IF_ERROR(put(k, v));
    } else if (src.kind() == Kind::kNamespace) {
      return TypeError(StrCat("'Namespace' object is not iterable"));
    } else {
      FOLIO_ASSIGN_OR_RETURN(std::vector<Value> pairs, Items(src));
      for (size_t i = 0; i < pairs.size(); ++i) {
        FOLIO_ASSIGN_OR_RETURN(std::vector<Value> kv, Items(pairs[i]));
        if (kv.size() != 2) {
          return Status::InvalidArgument(StrCat("dictionary update sequence element #", i,
                                                " has length ", kv.size(), "; 2 is required"));
        }
        FOLIO_RETURN_IF_ERROR(put(kv[0], kv[1]));
      }
    }
  }
  for (auto& [k, v] : args.kwargs) FOLIO_RETURN_IF_ERROR(put(Value::Borrowed(k), v));
  return items;
}

// datetime.strftime(fmt): C strftime, with datetime's own %f
// (microseconds), %z and %Z. The local clock is HF's naive datetime.now()
// (no zone: %z and %Z are empty); the fixed clock is a UTC datetime
// (+0000, UTC).
Result<Value> StrftimeNow(CallArgs& args, const BuiltinContext& ctx) {
  FOLIO_ASSIGN_OR_RETURN(auto slots, Bind("strftime_now", args, {"format"}));
  if (!slots[0])
    return TypeError("strftime_now() missing 1 required positional argument: 'format'");
  if (!slots[0]->is_string()) {
    return TypeError(StrCat("strftime() argument 1 must be str, not ", TypeName(*slots[0])));
  }
  const std::string_view format = slots[0]->str();
  std::tm tm{};
  long micros = 0;
  if (ctx.now_epoch_seconds) {
    const std::time_t t = static_cast<std::time_t>(*ctx.now_epoch_seconds);
    if (gmtime_r(&t, &tm) == nullptr) return Status::InvalidArgument("time out of range");
  } else {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    if (localtime_r(&ts.tv_sec, &tm) == nullptr) return Status::InvalidArgument("no local time");
    micros = ts.tv_nsec / 1000;
  }
  std::string fmt;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      const char c = format[i + 1];
      if (c == 'f') {
        char buf[24];
        std::snprintf(buf, sizeof buf, "%06ld", micros);
        fmt += buf;
        ++i;
        continue;
      }
      if (c == 'z' || c == 'Z') {
        if (ctx.now_epoch_seconds) fmt += c == 'z' ? "+0000" : "UTC";
        ++i;
        continue;
      }
      fmt += format[i];
      fmt += c;
      ++i;
      continue;
    }
    if (format[i] == '\0') return Status::InvalidArgument("embedded null character");
    fmt += format[i];
  }
  // A leading byte tells an empty result from a buffer too small.
  fmt.insert(fmt.begin(), 'x');
  std::string buf(fmt.size() * 4 + 64, '\0');
  while (true) {
    const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    if (n > 0) {
      buf.resize(n);
      break;
    }
    if (buf.size() > ctx.max_bytes + 64) {
      return Status::ResourceExhausted("strftime_now's result exceeds max_output_bytes");
    }
    buf.resize(buf.size() * 2);
  }
  return StrResult(buf.substr(1), ctx);
}

}  // namespace

Result<Value> CallGlobal(GlobalId id, CallArgs& args, const BuiltinContext& ctx) {
  switch (id) {
    case GlobalId::kNone:
      return TypeError("not callable");
    case GlobalId::kRange:
      return Range(args, ctx);
    case GlobalId::kDict: {
      FOLIO_ASSIGN_OR_RETURN(auto items, DictItems(args, "dict"));
      std::optional<Value> v = MakeDict(std::move(items));
      if (!v) return Status::ResourceExhausted("a value nests too deep");
      return *v;
    }
    case GlobalId::kNamespace: {
      FOLIO_ASSIGN_OR_RETURN(auto items, DictItems(args, "namespace"));
      auto ns = std::make_shared<NamespaceObject>();
      for (auto& [k, v] : items) {
        if (!k.is_string()) return TypeError("keywords must be strings");
        if (!ns->Set(k.str(), std::move(v))) {
          return Status::ResourceExhausted("a value nests too deep");
        }
      }
      ctx.namespaces->push_back(ns);
      return Value::FromObject(Kind::kNamespace, std::move(ns));
    }
    case GlobalId::kRaiseException: {
      FOLIO_ASSIGN_OR_RETURN(auto slots, Bind("raise_exception", args, {"message"}));
      if (!slots[0]) {
        return TypeError("raise_exception() missing 1 required positional argument: 'message'");
      }
      std::string message(kRaisedPrefix);
      AppendStr(message, *slots[0], ctx.max_bytes);
      return Status::InvalidArgument(std::move(message));
    }
    case GlobalId::kStrftimeNow:
      return StrftimeNow(args, ctx);
    case GlobalId::kCycler:
    case GlobalId::kJoiner:
    case GlobalId::kLipsum:
      return Status::Unimplemented(
          StrCat("the jinja2 global '", GlobalName(id), "' is not supported"));
  }
  return TypeError("not callable");
}

}  // namespace folio::chat::internal
