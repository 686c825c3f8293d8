// The values a template computes with, as Python sees them under jinja2:
// jinja2's Undefined, None, bool, int, float, str, list (and the other
// sequences a template meets: tuple, range, dict views, generators), dict,
// namespace(), macros and builtin functions, and a for loop's `loop`.
//
// A Value is small and cheap to copy: scalars inline, a string as a view
// (into the template, the caller's JSON, or a shared buffer the value
// owns), everything else behind a shared pointer. Lists and dicts are never
// changed after they are made (HF renders in jinja2's immutable sandbox);
// namespaces and loops are the only mutable objects.
#ifndef FOLIO_CHAT_VALUE_H_
#define FOLIO_CHAT_VALUE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "folio/core/status.h"

namespace folio::chat::internal {

// Containers nest at most this deep (Python's repr and json.dumps stop
// near 1000 levels); a deeper value is a resource error, so that printing,
// comparing and freeing values never recurse without bound.
inline constexpr uint32_t kMaxNesting = 200;

enum class Kind : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,  // any sequence: see ListFlavor
  kDict,
  kNamespace,
  kCallable,
  kLoop,
};

// Which Python type a kList stands for: it decides printing, tojson,
// indexing, len() and truthiness.
enum class ListFlavor : uint8_t {
  kList,
  kTuple,
  kRange,       // range(start, stop, step)
  kDictKeys,    // dict.keys()
  kDictValues,  // dict.values()
  kDictItems,   // dict.items()
  kIterator,    // a generator or iterator (map, select, reverse, ...): single use
};

// What an undefined value was, for the error raised when it is used.
enum class UndefinedReason : uint8_t {
  kPlain,      // no hint
  kName,       // 'name' is undefined
  kAttribute,  // 'T object' has no attribute 'name'
  kElement,    // 'T object' has no element i
  kUnsafe,     // access to attribute 'name' of 'T' object is unsafe.
  kMessage,    // a fixed message (text)
  kParameter,  // parameter 'name' was not provided
};

struct Object {
  virtual ~Object() = default;
  // repr() of a namespace, callable or loop; `depth` and `limit` as in
  // AppendReprLimited.
  virtual void AppendRepr(std::string& out, uint32_t /*depth*/, size_t /*limit*/) const {
    out += "<object>";
  }
  uint32_t depth = 1;  // nesting: 1 + the deepest value held
};

class Value;
struct ListObject;
struct DictObject;
struct NamespaceObject;
struct StringObject;

class Value {
 public:
  Value() = default;  // undefined, no hint
  // `type` is a static string (the owner's Python type name).
  static Value Undefined(UndefinedReason reason, std::string_view text = {},
                         const char* type = nullptr, int64_t element = 0) {
    Value v;
    v.reason_ = reason;
    v.s_ = text;
    v.type_ = type;
    v.i_ = element;
    return v;
  }
  static Value None() { return Value(Kind::kNone); }
  static Value Bool(bool b) {
    Value v(Kind::kBool);
    v.i_ = b ? 1 : 0;
    return v;
  }
  static Value Int(int64_t i) {
    Value v(Kind::kInt);
    v.i_ = i;
    return v;
  }
  static Value Float(double d) {
    Value v(Kind::kFloat);
    v.f_ = d;
    return v;
  }
  // A string that outlives the render (template text, the caller's JSON).
  static Value Borrowed(std::string_view s) {
    Value v(Kind::kString);
    v.s_ = s;
    return v;
  }
  static Value Str(std::string s);
  // s[offset, offset + size) of the string value s, sharing its buffer.
  static Value Substr(const Value& s, size_t offset, size_t size) {
    Value v = s;
    v.s_ = s.s_.substr(offset, size);
    return v;
  }
  static Value FromObject(Kind kind, std::shared_ptr<internal::Object> obj) {
    Value v(kind);
    v.obj_ = std::move(obj);
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  // bool, int and float: Python's numbers (bool is an int there).
  bool is_number() const {
    return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat;
  }
  bool is_integral() const { return kind_ == Kind::kBool || kind_ == Kind::kInt; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }

  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return i_; }  // bool or int
  double as_float() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(i_); }
  std::string_view str() const { return s_; }
  const ListObject& list() const;
  const DictObject& dict() const;
  NamespaceObject& ns() const;
  template <typename T>
  T& object() const {
    return static_cast<T&>(*obj_);
  }
  const internal::Object* object_ptr() const { return obj_.get(); }
  uint32_t depth() const { return obj_ ? obj_->depth : 0; }
  ListFlavor flavor() const;

  UndefinedReason undefined_reason() const { return reason_; }

  // A string marked safe (markupsafe's Markup: what escape and safe
  // return). Only `+` and escape itself treat it differently.
  bool markup() const { return markup_; }
  static Value Markup(Value s) {
    s.markup_ = true;
    return s;
  }
  // The message jinja2's UndefinedError would carry for this value.
  std::string UndefinedMessage() const;

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::kUndefined;
  UndefinedReason reason_ = UndefinedReason::kPlain;  // kUndefined only
  bool markup_ = false;                               // kString only
  union {
    int64_t i_ = 0;  // bool (0/1), int; kUndefined kElement: the index
    double f_;
  };
  std::string_view s_;          // kString: the text; kUndefined: the name or message
  const char* type_ = nullptr;  // kUndefined: the owner's type name
  std::shared_ptr<internal::Object> obj_;
};

struct StringObject : Object {
  explicit StringObject(std::string s) : text(std::move(s)) {}
  std::string text;
};

struct ListObject : Object {
  std::vector<Value> items;
  ListFlavor flavor = ListFlavor::kList;
  int64_t range_start = 0, range_stop = 0, range_step = 1;  // kRange, for printing
  mutable size_t consumed = 0;                              // kIterator: items already taken
  // kIterator: what the generator raises after its items. jinja2's map,
  // select, unique, ... are generators that fail only when iterated that
  // far; folio computes the items at once and keeps the failure for then.
  std::optional<Status> error;
};

struct DictObject : Object {
  std::vector<std::pair<Value, Value>> items;  // in insertion order
  // The value under key (Python's dict lookup: 1, 1.0 and True are one
  // key), or nullptr.
  const Value* Find(const Value& key) const;
  const Value* FindString(std::string_view key) const;
};

struct NamespaceObject : Object {
  void AppendRepr(std::string& out, uint32_t level, size_t limit) const override;
  std::vector<std::pair<std::string, Value>> attrs;
  const Value* Find(std::string_view name) const;
  // false (and no change) if v would nest too deep.
  bool Set(std::string_view name, Value v);
};

// Something a template can call: a macro (interpreter.h), a method bound
// to its receiver, or a global function.
struct CallableObject : Object {
  enum class Type : uint8_t { kMacro, kMethod, kGlobal };
  explicit CallableObject(Type t) : type(t) {}
  Type type;
};

// A list (or other flavour) of items; nullopt if it would nest deeper
// than kMaxNesting.
std::optional<Value> MakeList(std::vector<Value> items, ListFlavor flavor = ListFlavor::kList);
std::optional<Value> MakeDict(std::vector<std::pair<Value, Value>> items);

// Python's type name: "str", "int", "list", "NoneType", "Undefined", ...
std::string_view TypeName(const Value& v);

// bool(v).
bool Truthy(const Value& v);
// str(v) / repr(v) appended to out. Appending stops early once out is
// longer than `limit` (the caller then reports the size); a namespace that
// holds itself prints "..." where Python prints {...}.
void AppendStr(std::string& out, const Value& v, size_t limit = SIZE_MAX);
void AppendRepr(std::string& out, const Value& v, size_t limit = SIZE_MAX);
void AppendReprLimited(std::string& out, const Value& v, uint32_t depth, size_t limit);
std::string ToStr(const Value& v);

// v == w.
bool Equals(const Value& a, const Value& b);
// Python's a < b as -1/0/1 ordering; nullopt when Python raises TypeError
// (different types, None, dicts). Not for undefined values.
std::optional<int> Compare(const Value& a, const Value& b);
// hash(v) would succeed: not a list, dict or a tuple holding one.
bool Hashable(const Value& v);

// iter(v)'s items: a list flavour's, a dict's keys, a string's characters;
// an undefined value iterates as empty. TypeError (kInvalidArgument) when v
// is not iterable, or a generator's deferred error. An iterator's items
// are marked consumed.
Result<std::vector<Value>> Iterate(const Value& v);
// len(v); nullopt where Python has no len().
std::optional<int64_t> Length(const Value& v);

}  // namespace folio::chat::internal

#endif  // FOLIO_CHAT_VALUE_H_
