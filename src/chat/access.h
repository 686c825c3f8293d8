// x.name, x[key] and x[a:b:c] as jinja2's sandbox resolves them: an
// attribute falls back to an item and an item to an attribute; what is
// missing is undefined (not an error) unless x itself is undefined; methods
// that would change a list or dict are refused when called.
#ifndef FOLIO_CHAT_ACCESS_H_
#define FOLIO_CHAT_ACCESS_H_

#include <string>
#include <string_view>

#include "chat/builtins.h"
#include "chat/value.h"
#include "folio/core/status.h"

namespace folio::chat::internal {

// A str, dict or list method bound to its receiver (x.strip, d.items).
struct MethodObject : CallableObject {
  MethodObject() : CallableObject(Type::kMethod) {}
  void AppendRepr(std::string& out, uint32_t level, size_t limit) const override;
  Value receiver;
  std::string name;
};

// range, namespace, dict, raise_exception, strftime_now as values.
struct GlobalObject : CallableObject {
  GlobalObject() : CallableObject(Type::kGlobal) {}
  void AppendRepr(std::string& out, uint32_t level, size_t limit) const override;
  GlobalId id = GlobalId::kNone;
};

Value GlobalValue(GlobalId id);

// jinja2's UndefinedError for using v (an undefined value) as a value.
Status UndefinedError(const Value& v);

// Loops are resolved by the interpreter (their attributes may need to look
// ahead); here a loop has no attributes.
Result<Value> GetAttr(const Value& obj, std::string_view name);
Result<Value> GetItem(const Value& obj, const Value& key);
// obj[start:stop:step]; each bound is None when absent.
Result<Value> GetSlice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// Python's slice index arithmetic (PySlice_AdjustIndices): the indexes of
// a slice of a sequence of `length` items.
struct SliceIndexes {
  int64_t start = 0, stop = 0, step = 1, count = 0;
};
SliceIndexes AdjustSlice(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                         int64_t step);

}  // namespace folio::chat::internal

#endif  // FOLIO_CHAT_ACCESS_H_
