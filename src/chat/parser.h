// Tokens -> Program, following jinja2's grammar (jinja2/parser.py) for the
// statements and expressions chat templates use.
#ifndef FOLIO_CHAT_PARSER_H_
#define FOLIO_CHAT_PARSER_H_

#include <memory>
#include <string_view>

#include "chat/ast.h"
#include "folio/chat/template.h"
#include "folio/core/status.h"

namespace folio::chat::internal {

// Nesting of statements and expressions the parser accepts; deeper input is
// kResourceExhausted (jinja2 itself stops at Python's recursion limit).
inline constexpr int kMaxParseDepth = 100;

// Errors: kInvalidArgument for what jinja2 would refuse to compile (a
// syntax error, an unknown tag, a filter or test jinja2 does not have
// outside an if), kUnimplemented for what jinja2 accepts but folio does
// not (include, extends, import, recursive loops, *args, a jinja2 filter
// folio lacks), kResourceExhausted for nesting past kMaxParseDepth. The
// message starts with line:column and names the construct.
// `limits` bound the work of folding constant expressions (optimizer.h).
Result<std::unique_ptr<Program>> ParseProgram(std::string_view source,
                                              const TemplateLimits& limits);

}  // namespace folio::chat::internal

#endif  // FOLIO_CHAT_PARSER_H_
