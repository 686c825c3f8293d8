// Python's operators on template values: arithmetic, comparison, `in`,
// unary minus and plus, and str % args formatting.
#ifndef FOLIO_CHAT_OPERATORS_H_
#define FOLIO_CHAT_OPERATORS_H_

#include <cstdint>

#include "chat/ast.h"
#include "chat/value.h"
#include "folio/core/status.h"

namespace folio::chat::internal {

// a op b. Strings and lists made are at most max_bytes long
// (kResourceExhausted). Errors have no position (the evaluator adds it):
// kInvalidArgument for Python's TypeError / ZeroDivisionError / jinja2's
// UndefinedError, kUnimplemented for a result past 64-bit integers.
Result<Value> Arithmetic(BinaryOp op, const Value& a, const Value& b, uint64_t max_bytes);
// a op b for one link of a comparison chain.
Result<bool> CompareOperation(CompareOp op, const Value& a, const Value& b);
// -v (negate) or +v.
Result<Value> UnaryOperation(const Value& v, bool negate);
// item in container.
Result<bool> Contains(const Value& container, const Value& item);
// format % args (printf-style string formatting).
Result<Value> PercentFormat(std::string_view format, const Value& args, uint64_t max_bytes);

}  // namespace folio::chat::internal

#endif  // FOLIO_CHAT_OPERATORS_H_
