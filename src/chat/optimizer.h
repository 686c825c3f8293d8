// jinja2's compile-time constant folding (jinja2/optimizer.py and
// Expr.as_const), which is not only faster but visible: jinja2 folds
// through its getitem, so a slice of something without slicing inside a
// constant expression is undefined where at run time it is an error.
#ifndef FOLIO_CHAT_OPTIMIZER_H_
#define FOLIO_CHAT_OPTIMIZER_H_

#include "chat/ast.h"
#include "folio/chat/template.h"

namespace folio::chat::internal {

// Finds constant expressions and replaces each largest one
// that evaluates, to a value jinja2 would write back as a literal, by that
// literal; a {{ }} whose whole expression folds becomes text.
void FoldConstants(Program& program, const TemplateLimits& limits);

}  // namespace folio::chat::internal

#endif  // FOLIO_CHAT_OPTIMIZER_H_
