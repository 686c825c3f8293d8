#include "chat/value.h"

#include <algorithm>
#include <cmath>

#include "chat/text.h"

namespace folio::chat::internal {

Value Value::Str(std::string s) {
  auto obj = std::make_shared<StringObject>(std::move(s));
  Value v(Kind::kString);
  v.s_ = obj->text;
  v.obj_ = std::move(obj);
  return v;
}

const ListObject& Value::list() const { return static_cast<const ListObject&>(*obj_); }
const DictObject& Value::dict() const { return static_cast<const DictObject&>(*obj_); }
NamespaceObject& Value::ns() const { return static_cast<NamespaceObject&>(*obj_); }
ListFlavor Value::flavor() const { return list().flavor; }

std::string Value::UndefinedMessage() const {
  std::string out;
  auto quoted = [&](std::string_view s) { AppendPyRepr(out, s); };
  const std::string_view type = type_ ? type_ : "object";
  switch (reason_) {
    case UndefinedReason::kPlain:
      out = "undefined value";
      break;
    case UndefinedReason::kName:
      quoted(s_);
      out += " is undefined";
      break;
    case UndefinedReason::kAttribute:
      out += '\'';
      out += type;
      out += " object' has no attribute ";
      quoted(s_);
      break;
    case UndefinedReason::kElement:
      out += '\'';
      out += type;
      out += " object' has no element ";
      AppendInt(out, i_);
      break;
    case UndefinedReason::kUnsafe:
      out = "access to attribute ";
      quoted(s_);
      out += " of '";
      out += type;
      out += "' object is unsafe.";
      break;
    case UndefinedReason::kMessage:
      out = s_;
      break;
    case UndefinedReason::kParameter:
      out = "parameter ";
      quoted(s_);
      out += " was not provided";
      break;
  }
  return out;
}

namespace {

bool KeyEquals(const Value& a, const Value& b) {
  if (a.is_string() && b.is_string()) return a.str() == b.str();
  return Equals(a, b);
}

uint32_t MaxDepth(const std::vector<Value>& items) {
  uint32_t d = 0;
  for (const Value& v : items) d = std::max(d, v.depth());
  return d;
}

}  // namespace

const Value* DictObject::Find(const Value& key) const {
  for (const auto& [k, v] : items) {
    if (KeyEquals(k, key)) return &v;
  }
  return nullptr;
}

const Value* DictObject::FindString(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

const Value* NamespaceObject::Find(std::string_view name) const {
  for (const auto& [k, v] : attrs) {
    if (k == name) return &v;
  }
  return nullptr;
}

bool NamespaceObject::Set(std::string_view name, Value v) {
  if (v.depth() + 1 > kMaxNesting) return false;
  depth = std::max(depth, v.depth() + 1);
  for (auto& [k, old] : attrs) {
    if (k == name) {
      old = std::move(v);
      return true;
    }
  }
  attrs.emplace_back(std::string(name), std::move(v));
  return true;
}

void NamespaceObject::AppendRepr(std::string& out, uint32_t level, size_t limit) const {
  out += "<Namespace {";
  bool first = true;
  for (const auto& [k, v] : attrs) {
    if (!first) out += ", ";
    first = false;
    AppendPyRepr(out, k);
    out += ": ";
    AppendReprLimited(out, v, level + 1, limit);
    if (out.size() > limit) return;
  }
  out += "}>";
}

std::optional<Value> MakeList(std::vector<Value> items, ListFlavor flavor) {
  const uint32_t depth = MaxDepth(items) + 1;
  if (depth > kMaxNesting) return std::nullopt;
  auto obj = std::make_shared<ListObject>();
  obj->depth = depth;
  obj->items = std::move(items);
  obj->flavor = flavor;
  return Value::FromObject(Kind::kList, std::move(obj));
}

std::optional<Value> MakeDict(std::vector<std::pair<Value, Value>> items) {
  uint32_t depth = 0;
  for (const auto& [k, v] : items) depth = std::max({depth, k.depth(), v.depth()});
  if (depth + 1 > kMaxNesting) return std::nullopt;
  auto obj = std::make_shared<DictObject>();
  obj->depth = depth + 1;
  obj->items = std::move(items);
  return Value::FromObject(Kind::kDict, std::move(obj));
}

std::string_view TypeName(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      switch (v.flavor()) {
        case ListFlavor::kList:
          return "list";
        case ListFlavor::kTuple:
          return "tuple";
        case ListFlavor::kRange:
          return "range";
        case ListFlavor::kDictKeys:
          return "dict_keys";
        case ListFlavor::kDictValues:
          return "dict_values";
        case ListFlavor::kDictItems:
          return "dict_items";
        case ListFlavor::kIterator:
          return "generator";
      }
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return "function";
    case Kind::kLoop:
      return "LoopContext";
  }
  return "object";
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return v.as_int() != 0;
    case Kind::kFloat:
      return v.as_float() != 0.0;
    case Kind::kString:
      return !v.str().empty();
    case Kind::kList:
      // Iterators and dict views of a generator kind are always true;
      // dict views have a length.
      return v.flavor() == ListFlavor::kIterator || !v.list().items.empty();
    case Kind::kDict:
      return !v.dict().items.empty();
    case Kind::kNamespace:
    case Kind::kCallable:
    case Kind::kLoop:
      return true;
  }
  return true;
}

namespace {

void AppendSequence(std::string& out, const std::vector<Value>& items, char open, char close,
                    bool one_tuple, uint32_t depth, size_t limit) {
  out += open;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    AppendReprLimited(out, items[i], depth + 1, limit);
    if (out.size() > limit) return;
  }
  if (one_tuple && items.size() == 1) out += ',';
  out += close;
}

}  // namespace

void AppendRepr(std::string& out, const Value& v, size_t limit) {
  AppendReprLimited(out, v, 0, limit);
}

void AppendReprLimited(std::string& out, const Value& v, uint32_t depth, size_t limit) {
  if (depth > kMaxNesting) {
    out += "...";
    return;
  }
  switch (v.kind()) {
    case Kind::kUndefined:
      out += "Undefined";
      return;
    case Kind::kNone:
      out += "None";
      return;
    case Kind::kBool:
      out += v.as_bool() ? "True" : "False";
      return;
    case Kind::kInt:
      AppendInt(out, v.as_int());
      return;
    case Kind::kFloat:
      AppendPyFloat(out, v.as_float());
      return;
    case Kind::kString:
      AppendPyRepr(out, v.str());
      return;
    case Kind::kList: {
      const ListObject& l = v.list();
      switch (l.flavor) {
        case ListFlavor::kList:
          AppendSequence(out, l.items, '[', ']', false, depth, limit);
          return;
        case ListFlavor::kTuple:
          AppendSequence(out, l.items, '(', ')', true, depth, limit);
          return;
        case ListFlavor::kRange:
          out += "range(";
          AppendInt(out, l.range_start);
          out += ", ";
          AppendInt(out, l.range_stop);
          if (l.range_step != 1) {
            out += ", ";
            AppendInt(out, l.range_step);
          }
          out += ')';
          return;
        case ListFlavor::kDictKeys:
          out += "dict_keys(";
          AppendSequence(out, l.items, '[', ']', false, depth, limit);
          out += ')';
          return;
        case ListFlavor::kDictValues:
          out += "dict_values(";
          AppendSequence(out, l.items, '[', ']', false, depth, limit);
          out += ')';
          return;
        case ListFlavor::kDictItems:
          out += "dict_items(";
          AppendSequence(out, l.items, '[', ']', false, depth, limit);
          out += ')';
          return;
        case ListFlavor::kIterator:
          out += "<generator object>";
          return;
      }
      return;
    }
    case Kind::kDict: {
      out += '{';
      bool first = true;
      for (const auto& [k, val] : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        AppendReprLimited(out, k, depth + 1, limit);
        out += ": ";
        AppendReprLimited(out, val, depth + 1, limit);
        if (out.size() > limit) return;
      }
      out += '}';
      return;
    }
    case Kind::kNamespace:
    case Kind::kCallable:
    case Kind::kLoop:
      v.object<Object>().AppendRepr(out, depth, limit);
      return;
  }
}

void AppendStr(std::string& out, const Value& v, size_t limit) {
  if (v.is_string()) {
    out += v.str();
  } else if (!v.is_undefined()) {
    AppendReprLimited(out, v, 0, limit);
  }
}

std::string ToStr(const Value& v) {
  if (v.is_string()) return std::string(v.str());
  std::string out;
  AppendStr(out, v);
  return out;
}

namespace {

// int == float the way Python compares them: exactly.
bool IntEqualsFloat(int64_t i, double d) {
  if (!std::isfinite(d) || d != std::trunc(d)) return false;
  if (d < -9.2233720368547758e18 || d >= 9.2233720368547758e18) return false;
  return static_cast<int64_t>(d) == i;
}

bool ItemsEqual(const std::vector<Value>& a, const std::vector<Value>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!Equals(a[i], b[i])) return false;
  }
  return true;
}

// Set equality of two dict views (keys or items).
bool SameElements(const std::vector<Value>& a, const std::vector<Value>& b) {
  if (a.size() != b.size()) return false;
  for (const Value& x : a) {
    if (std::none_of(b.begin(), b.end(), [&](const Value& y) { return Equals(x, y); })) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat && b.kind() == Kind::kFloat) return a.as_float() == b.as_float();
    if (a.kind() == Kind::kFloat) return IntEqualsFloat(b.as_int(), a.as_float());
    if (b.kind() == Kind::kFloat) return IntEqualsFloat(a.as_int(), b.as_float());
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
      return false;  // handled above
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kList: {
      const ListObject& x = a.list();
      const ListObject& y = b.list();
      if (&x == &y) return true;
      if (x.flavor != y.flavor) return false;
      switch (x.flavor) {
        case ListFlavor::kList:
        case ListFlavor::kTuple:
        case ListFlavor::kRange:
          return ItemsEqual(x.items, y.items);
        case ListFlavor::kDictKeys:
        case ListFlavor::kDictItems:
          return SameElements(x.items, y.items);
        case ListFlavor::kDictValues:
        case ListFlavor::kIterator:
          return false;  // compared by identity in Python
      }
      return false;
    }
    case Kind::kDict: {
      const DictObject& x = a.dict();
      const DictObject& y = b.dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.Find(k);
        if (w == nullptr || !Equals(v, *w)) return false;
      }
      return true;
    }
    case Kind::kNamespace:
    case Kind::kCallable:
    case Kind::kLoop:
      return a.object_ptr() == b.object_ptr();
  }
  return false;
}

std::optional<int> Compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() != Kind::kFloat && b.kind() != Kind::kFloat) {
      return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    }
    const double x = a.as_float(), y = b.as_float();
    if (x < y) return -1;
    if (x > y) return 1;
    return 0;  // equal, or NaN (every comparison false: the caller sees 0)
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order is code point order.
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.flavor() == b.flavor() &&
      (a.flavor() == ListFlavor::kList || a.flavor() == ListFlavor::kTuple)) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(x[i], y[i])) continue;
      return Compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  return std::nullopt;
}

bool Hashable(const Value& v) {
  switch (v.kind()) {
    case Kind::kList:
      if (v.flavor() == ListFlavor::kTuple) {
        return std::all_of(v.list().items.begin(), v.list().items.end(), Hashable);
      }
      return v.flavor() == ListFlavor::kRange || v.flavor() == ListFlavor::kIterator;
    case Kind::kDict:
      return false;
    default:
      return true;
  }
}

Result<std::vector<Value>> Iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return std::vector<Value>{};
    case Kind::kString: {
      std::vector<Value> chars;
      const std::string_view s = v.str();
      chars.reserve(s.size());
      for (size_t pos = 0; pos < s.size();) {
        const size_t start = pos;
        DecodeUtf8(s, &pos);
        chars.push_back(Value::Substr(v, start, pos - start));
      }
      return chars;
    }
    case Kind::kList: {
      const ListObject& l = v.list();
      if (l.flavor != ListFlavor::kIterator) return l.items;
      std::vector<Value> rest(l.items.begin() + static_cast<ptrdiff_t>(l.consumed), l.items.end());
      l.consumed = l.items.size();
      if (l.error) return *l.error;
      return rest;
    }
    case Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().items.size());
      for (const auto& kv : v.dict().items) keys.push_back(kv.first);
      return keys;
    }
    case Kind::kNone:
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
    case Kind::kNamespace:
    case Kind::kCallable:
    case Kind::kLoop:
      break;
  }
  std::string message = "'";
  message += TypeName(v);
  message += "' object is not iterable";
  return Status::InvalidArgument(std::move(message));
}

std::optional<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return 0;
    case Kind::kString:
      return static_cast<int64_t>(CountCodePoints(v.str()));
    case Kind::kList:
      if (v.flavor() == ListFlavor::kIterator) return std::nullopt;
      return static_cast<int64_t>(v.list().items.size());
    case Kind::kDict:
      return static_cast<int64_t>(v.dict().items.size());
    case Kind::kNamespace:
    case Kind::kNone:
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
    case Kind::kCallable:
    case Kind::kLoop:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace folio::chat::internal
