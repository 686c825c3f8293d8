// The filters, tests, globals and methods a template can call, by name.
// Each is one row of a table (builtins.cc); the evaluator resolves names
// once, at Parse time where it can.
#ifndef FOLIO_CHAT_BUILTINS_H_
#define FOLIO_CHAT_BUILTINS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/value.h"
#include "folio/core/status.h"

namespace folio::chat::internal {

enum class FilterId : uint8_t {
  kAbs,
  kAttr,
  kBatch,
  kCapitalize,
  kCenter,
  kDefault,
  kDictsort,
  kEscape,
  kFirst,
  kFloat,
  kFormat,
  kIndent,
  kInt,
  kItems,
  kJoin,
  kLast,
  kLength,
  kList,
  kLower,
  kMap,
  kMax,
  kMin,
  kReject,
  kRejectattr,
  kReplace,
  kReverse,
  kRound,
  kSafe,
  kSelect,
  kSelectattr,
  kSlice,
  kSort,
  kString,
  kSum,
  kTitle,
  kTojson,
  kTrim,
  kUnique,
  kUpper,
  kWordcount,
};

enum class TestId : uint8_t {
  kBoolean,
  kCallable,
  kDefined,
  kDivisibleby,
  kEq,
  kEscaped,
  kEven,
  kFalse,
  kFilter,
  kFloat,
  kGe,
  kGt,
  kIn,
  kInteger,
  kIterable,
  kLe,
  kLower,
  kLt,
  kMapping,
  kNe,
  kNone,
  kNumber,
  kOdd,
  kSameas,
  kSequence,
  kString,
  kTest,
  kTrue,
  kUndefined,
  kUpper,
};

enum class GlobalId : uint8_t {
  kNone,  // not a global
  kRange,
  kNamespace,
  kDict,
  kRaiseException,
  kStrftimeNow,
  kCycler,  // jinja2's; not supported (called: kUnimplemented)
  kJoiner,
  kLipsum,
};

// A filter or test name: folio's id, or nullopt; *known_to_jinja says
// whether jinja2 (with HF's tojson) has one of that name.
std::optional<FilterId> LookupFilter(std::string_view name, bool* known_to_jinja);
std::optional<TestId> LookupTest(std::string_view name, bool* known_to_jinja);
GlobalId LookupGlobal(std::string_view name);
std::string_view GlobalName(GlobalId id);

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string_view, Value>> kwargs;
};

// What builtins need from the render they run in.
struct BuiltinContext {
  uint64_t max_bytes = 0;                    // the longest string, or list, a builtin may make
  std::optional<int64_t> now_epoch_seconds;  // strftime_now's clock (UTC); else local time
  // Namespaces made during the render; emptied at its end, which breaks any
  // reference cycle through them.
  std::vector<std::shared_ptr<NamespaceObject>>* namespaces = nullptr;
};

// Errors: kInvalidArgument with Python's message (TypeError, ValueError,
// jinja2's UndefinedError), without a position: the evaluator adds it.
// raise_exception's message starts with kRaisedPrefix and must reach the
// caller as it is.
inline constexpr std::string_view kRaisedPrefix = "chat template raised: ";
Result<Value> ApplyFilter(FilterId id, const Value& input, CallArgs& args,
                          const BuiltinContext& ctx);
Result<bool> ApplyTest(TestId id, const Value& v, CallArgs& args, const BuiltinContext& ctx);
Result<Value> CallGlobal(GlobalId id, CallArgs& args, const BuiltinContext& ctx);

// Attributes that are methods: x.name on a str, dict or list.
enum class MethodLookup : uint8_t {
  kNotFound,     // not an attribute: a dict falls back to its item
  kMethod,       // a method folio implements
  kUnsafe,       // a method that would change the object (the sandbox refuses it)
  kUnsupported,  // a Python method folio lacks
};
MethodLookup LookupMethod(const Value& receiver, std::string_view name);
Result<Value> CallMethod(const Value& receiver, std::string_view name, CallArgs& args,
                         const BuiltinContext& ctx);

// An error for a value of the wrong type, as Python words it.
Status TypeError(std::string message);

}  // namespace folio::chat::internal

#endif  // FOLIO_CHAT_BUILTINS_H_
