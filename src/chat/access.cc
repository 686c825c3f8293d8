#include "chat/access.h"

#include <memory>

#include "chat/text.h"
#include "folio/core/str_cat.h"

namespace folio::chat::internal {

void MethodObject::AppendRepr(std::string& out, uint32_t, size_t) const {
  out += StrCat("<built-in method ", name, " of ", TypeName(receiver), " object>");
}

void GlobalObject::AppendRepr(std::string& out, uint32_t, size_t) const {
  out += StrCat("<function ", GlobalName(id), ">");
}

Value GlobalValue(GlobalId id) {
  auto g = std::make_shared<GlobalObject>();
  g->id = id;
  return Value::FromObject(Kind::kCallable, std::move(g));
}

Status UndefinedError(const Value& v) { return Status::InvalidArgument(v.UndefinedMessage()); }

namespace {

const char* TypeCStr(const Value& v) { return TypeName(v).data(); }

Value Method(const Value& receiver, std::string_view name) {
  auto m = std::make_shared<MethodObject>();
  m->depth = receiver.depth() + 1;
  m->receiver = receiver;
  m->name = std::string(name);
  return Value::FromObject(Kind::kCallable, std::move(m));
}

// getattr(obj, name) in the sandbox: a method (or the refusal of one), or
// nullopt where Python raises AttributeError.
std::optional<Value> PythonAttribute(const Value& obj, std::string_view name) {
  if (name.size() > 4 && name.substr(0, 2) == "__" && name.substr(name.size() - 2) == "__") {
    // Every Python object has dunder attributes; the sandbox hides them.
    return Value::Undefined(UndefinedReason::kUnsafe, name, TypeCStr(obj));
  }
  switch (LookupMethod(obj, name)) {
    case MethodLookup::kNotFound:
      break;
    case MethodLookup::kMethod:
    case MethodLookup::kUnsupported:
      return Method(obj, name);
    case MethodLookup::kUnsafe:
      return Value::Undefined(UndefinedReason::kUnsafe, name, TypeCStr(obj));
  }
  if (obj.kind() == Kind::kNamespace) {
    if (const Value* v = obj.ns().Find(name)) return *v;
  }
  return std::nullopt;
}

std::optional<int64_t> IndexOf(const Value& v) {
  if (v.is_integral()) return v.as_int();
  return std::nullopt;
}

}  // namespace

Result<Value> GetAttr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (std::optional<Value> attr = PythonAttribute(obj, name)) return *attr;
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().FindString(name)) return *v;
  }
  return Value::Undefined(UndefinedReason::kAttribute, name, TypeCStr(obj));
}

Result<Value> GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return UndefinedError(obj);
  switch (obj.kind()) {
    case Kind::kDict:
      if (Hashable(key)) {
        if (const Value* v = obj.dict().Find(key)) return *v;
      }
      break;
    case Kind::kList: {
      const ListObject& l = obj.list();
      const bool subscriptable = l.flavor == ListFlavor::kList || l.flavor == ListFlavor::kTuple ||
                                 l.flavor == ListFlavor::kRange;
      if (!subscriptable) break;
      if (std::optional<int64_t> i = IndexOf(key)) {
        const auto n = static_cast<int64_t>(l.items.size());
        const int64_t k = *i < 0 ? *i + n : *i;
        if (k >= 0 && k < n) return l.items[static_cast<size_t>(k)];
        return Value::Undefined(UndefinedReason::kElement, {}, TypeCStr(obj), *i);
      }
      break;
    }
    case Kind::kString:
      if (std::optional<int64_t> i = IndexOf(key)) {
        const std::string_view s = obj.str();
        const auto n = static_cast<int64_t>(CountCodePoints(s));
        const int64_t k = *i < 0 ? *i + n : *i;
        if (k >= 0 && k < n) {
          const size_t begin = CodePointOffset(s, static_cast<size_t>(k));
          size_t end = begin;
          DecodeUtf8(s, &end);
          return Value::Substr(obj, begin, end - begin);
        }
        return Value::Undefined(UndefinedReason::kElement, {}, TypeCStr(obj), *i);
      }
      break;
    default:
      break;
  }
  // obj[key] failed with a LookupError or TypeError: jinja2 tries the
  // attribute of that name.
  if (key.is_string()) {
    if (std::optional<Value> attr = PythonAttribute(obj, key.str())) return *attr;
    return Value::Undefined(UndefinedReason::kAttribute, key.str(), TypeCStr(obj));
  }
  return Value::Undefined(UndefinedReason::kPlain);
}

SliceIndexes AdjustSlice(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                         int64_t step) {
  int64_t lo, hi;
  if (step > 0) {
    lo = start.value_or(0);
    hi = stop.value_or(length);
    if (lo < 0) lo = std::max<int64_t>(0, lo + length);
    if (hi < 0) hi = std::max<int64_t>(0, hi + length);
    lo = std::min(lo, length);
    hi = std::min(hi, length);
    const int64_t count = hi > lo ? (hi - lo + step - 1) / step : 0;
    return {lo, hi, step, count};
  }
  lo = start.value_or(length - 1);
  hi = stop.value_or(-length - 1);
  if (lo < 0) lo = std::max<int64_t>(-1, lo + length);
  if (hi < 0) hi = std::max<int64_t>(-1, hi + length);
  lo = std::min(lo, length - 1);
  hi = std::min(hi, length - 1);
  const int64_t count = lo > hi ? (lo - hi - step - 1) / -step : 0;
  return {lo, hi, step, count};
}

Result<Value> GetSlice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) return UndefinedError(obj);
  auto bound = [](const Value& v, bool* ok) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    if (v.is_integral()) return v.as_int();
    *ok = false;
    return std::nullopt;
  };
  bool ok = true;
  const std::optional<int64_t> lo = bound(start, &ok);
  const std::optional<int64_t> hi = bound(stop, &ok);
  const std::optional<int64_t> st = bound(step, &ok);
  const bool sliceable = obj.is_string() || (obj.is_list() && (obj.flavor() == ListFlavor::kList ||
                                                               obj.flavor() == ListFlavor::kTuple ||
                                                               obj.flavor() == ListFlavor::kRange));
  // jinja2 slices with Python's own [] (not its getitem), so a type without
  // slicing or a bad bound is an error here, not an undefined value.
  if (!sliceable) {
    if (obj.is_dict()) return TypeError("unhashable type: 'slice'");
    return TypeError(StrCat("'", TypeName(obj), "' object is not subscriptable"));
  }
  if (!ok) {
    return TypeError("slice indices must be integers or None or have an __index__ method");
  }
  if (st && *st == 0) return Status::InvalidArgument("slice step cannot be zero");
  const int64_t step_v = st.value_or(1);
  if (obj.is_string()) {
    const std::string_view s = obj.str();
    if (IsAscii(s)) {
      const SliceIndexes ix = AdjustSlice(static_cast<int64_t>(s.size()), lo, hi, step_v);
      if (step_v == 1) {
        return Value::Substr(obj, static_cast<size_t>(ix.start), static_cast<size_t>(ix.count));
      }
      std::string out;
      for (int64_t k = 0; k < ix.count; ++k) out += s[static_cast<size_t>(ix.start + k * step_v)];
      return Value::Str(std::move(out));
    }
    std::vector<std::pair<size_t, size_t>> cps;  // (offset, size) per code point
    for (size_t pos = 0; pos < s.size();) {
      const size_t b = pos;
      DecodeUtf8(s, &pos);
      cps.emplace_back(b, pos - b);
    }
    const SliceIndexes ix = AdjustSlice(static_cast<int64_t>(cps.size()), lo, hi, step_v);
    if (step_v == 1) {
      if (ix.count == 0) return Value::Borrowed("");
      const size_t b = cps[static_cast<size_t>(ix.start)].first;
      const auto& last = cps[static_cast<size_t>(ix.start + ix.count - 1)];
      return Value::Substr(obj, b, last.first + last.second - b);
    }
    std::string out;
    for (int64_t k = 0; k < ix.count; ++k) {
      const auto& cp = cps[static_cast<size_t>(ix.start + k * step_v)];
      out.append(s.substr(cp.first, cp.second));
    }
    return Value::Str(std::move(out));
  }
  const ListObject& l = obj.list();
  const SliceIndexes ix = AdjustSlice(static_cast<int64_t>(l.items.size()), lo, hi, step_v);
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(ix.count));
  for (int64_t k = 0; k < ix.count; ++k) {
    items.push_back(l.items[static_cast<size_t>(ix.start + k * step_v)]);
  }
  if (l.flavor == ListFlavor::kRange) {
    // range(a, b, s)[i:j:k] is range(a + i*s, a + j*s, s*k), as Python
    // computes it (in wrapping arithmetic: only the printed bounds of a
    // range at the ends of int64 could be off).
    auto wrap = [](int64_t a, int64_t i, int64_t s) {
      return static_cast<int64_t>(static_cast<uint64_t>(a) +
                                  static_cast<uint64_t>(i) * static_cast<uint64_t>(s));
    };
    auto r = std::make_shared<ListObject>();
    r->flavor = ListFlavor::kRange;
    r->range_start = wrap(l.range_start, ix.start, l.range_step);
    r->range_stop = wrap(l.range_start, ix.stop, l.range_step);
    r->range_step = wrap(0, l.range_step, step_v);
    r->items = std::move(items);
    return Value::FromObject(Kind::kList, std::move(r));
  }
  const ListFlavor flavor = l.flavor == ListFlavor::kTuple ? ListFlavor::kTuple : ListFlavor::kList;
  return *MakeList(std::move(items), flavor);  // no deeper than obj
}

}  // namespace folio::chat::internal
