// Helpers shared by the builtin filters, tests, globals and methods.
#ifndef FOLIO_CHAT_BUILTINS_INTERNAL_H_
#define FOLIO_CHAT_BUILTINS_INTERNAL_H_

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/builtins.h"
#include "chat/value.h"
#include "folio/core/status.h"

namespace folio::chat::internal {

// Python's binding of call arguments to `params` (positional first, then
// keywords): one slot per parameter, nullopt where none was given.
Result<std::vector<std::optional<Value>>> Bind(std::string_view function, CallArgs& args,
                                               std::initializer_list<std::string_view> params);

// A list value; kResourceExhausted when it would nest or grow too far.
Result<Value> ListResult(std::vector<Value> items, const BuiltinContext& ctx,
                         ListFlavor flavor = ListFlavor::kList);
Result<Value> StrResult(std::string s, const BuiltinContext& ctx);

// iter(v)'s items (value.h's Iterate).
Result<std::vector<Value>> Items(const Value& v);

// A generator's value: `items`, then `error` (if not ok) for whoever
// iterates past them.
Result<Value> Generator(std::vector<Value> items, const Status& error, const BuiltinContext& ctx);

// jinja2's make_attrgetter: "a.b.0" looked up part by part with getitem.
Result<Value> AttrPath(const Value& item, const Value& attribute);

// Python's `bool` argument conventions for the flags filters take.
bool FlagOf(const std::optional<Value>& v, bool fallback);

// json.dumps as HF's tojson calls it (json_dump.cc).
struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: one line
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
Result<std::string> JsonDumps(const Value& v, const JsonOptions& options, uint64_t max_bytes);

// markupsafe's escape: & < > ' " as HTML entities.
std::string Escape(std::string_view s);

// str.splitlines(keepends).
std::vector<std::string_view> SplitLines(std::string_view s, bool keepends);

// The tests a select/reject filter names at run time.
Result<bool> ApplyTestByName(std::string_view name, const Value& v, CallArgs& args,
                             const BuiltinContext& ctx);
Result<Value> ApplyFilterByName(std::string_view name, const Value& v, CallArgs& args,
                                const BuiltinContext& ctx);

}  // namespace folio::chat::internal

#endif  // FOLIO_CHAT_BUILTINS_INTERNAL_H_
