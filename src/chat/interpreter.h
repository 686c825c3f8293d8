// Renders a parsed Program: walks its statements with jinja2's scoping
// (a for loop, macro call, with or set block opens a scope; if does not;
// namespace() objects carry values out of loops) and evaluates expressions
// with Python's semantics (value.h, operators.h, access.h, builtins.h).
#ifndef FOLIO_CHAT_INTERPRETER_H_
#define FOLIO_CHAT_INTERPRETER_H_

#include <string>
#include <vector>

#include "chat/ast.h"
#include "folio/chat/template.h"
#include "folio/core/status.h"

namespace folio::chat::internal {

// Renders `program` with `variables`, indexed by symbol id (an undefined
// Value where the caller passed nothing of that name). Errors as
// Template::Render documents.
Result<std::string> RenderProgram(const Program& program, const TemplateLimits& limits,
                                  const RenderOptions& options, std::vector<Value> variables);

// The value of e as jinja2's compiler computes it to fold constants
// (Expr.as_const): an error where e reads a variable, calls something,
// uses a filter that needs the render's context (map, select, ...), or is
// an inline if without else that takes no branch; a slice of something
// without slicing is undefined rather than an error.
Result<Value> FoldConstant(const Program& program, const TemplateLimits& limits, const Expr& e);

}  // namespace folio::chat::internal

#endif  // FOLIO_CHAT_INTERPRETER_H_
