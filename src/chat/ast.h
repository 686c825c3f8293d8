// The parsed template: statements and expressions, jinja2's node types
// folded into one struct each. A Program is immutable once parsed and
// shared by every copy of a Template; renders only read it.
#ifndef FOLIO_CHAT_AST_H_
#define FOLIO_CHAT_AST_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "chat/builtins.h"
#include "chat/value.h"

namespace folio::chat::internal {

enum class ExprKind : uint8_t {
  kLiteral,   // literal
  kName,      // symbol
  kList,      // children: items
  kTuple,     // children: items
  kDict,      // children: key, value, key, value, ...
  kGetAttr,   // children[0].name
  kGetItem,   // children[0][children[1]]
  kSlice,     // children: start, stop, step (each may be null); only under kGetItem
  kCall,      // children[0](children[1..], kwargs)
  kFilter,    // children[0] | name(children[1..], kwargs); children[0] null in a filter block
  kTest,      // children[0] is name(children[1..], kwargs)
  kNot,       // not children[0]
  kNeg,       // -children[0]
  kPos,       // +children[0]
  kAnd,       // children[0] and children[1]
  kOr,        // children[0] or children[1]
  kBinary,    // children[0] op children[1]
  kConcat,    // children joined with ~
  kCompare,   // children[0] compare_ops[0] children[1] compare_ops[1] children[2] ...
  kCondExpr,  // children[1] if children[0] else children[2] (null: undefined)
};

enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CompareOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  uint32_t pos = 0;       // byte offset in the source, for messages
  Value literal;          // kLiteral
  int symbol = -1;        // kName
  std::string_view name;  // kName, kGetAttr, kFilter, kTest
  BinaryOp op = BinaryOp::kAdd;
  int builtin = -1;            // kFilter: FilterId, kTest: TestId; -1 = unknown to folio
  bool known_to_jinja = true;  // kFilter, kTest with builtin -1: jinja2 has it
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string_view, ExprPtr>> kwargs;
  std::vector<CompareOp> compare_ops;
};

// An assignment target: a name, a tuple of targets, or namespace.attr.
struct Target {
  enum class Kind : uint8_t { kName, kTuple, kNamespaceAttr };
  Kind kind = Kind::kName;
  uint32_t pos = 0;
  int symbol = -1;            // kName, kNamespaceAttr (the namespace's name)
  std::string_view name;      // kName: the name; kNamespaceAttr: the attribute
  std::vector<Target> items;  // kTuple
};

enum class StmtKind : uint8_t {
  kText,   // text
  kPrint,  // {{ expr }}
  kIf,     // branches, else_body
  kFor,    // target in expr [if cond] body [else else_body]
  kBreak,
  kContinue,
  kSet,          // target = expr
  kSetBlock,     // {% set target [| filter] %}body{% endset %}; expr: the filter chain
  kMacro,        // name(params) body
  kCallBlock,    // {% call(params) expr %}body{% endcall %}
  kFilterBlock,  // {% filter expr %}body{% endfilter %}
  kWith,         // withs, body
  kScope,        // body in its own scope ({% generation %})
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Param {
  int symbol = -1;
  std::string_view name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  uint32_t pos = 0;
  std::string_view text;  // kText; kMacro: the name
  ExprPtr
      expr;  // kPrint, kSet, kFor (iterable), kSetBlock / kFilterBlock (filter), kCallBlock (call)
  ExprPtr cond;                                    // kFor's filter
  Target target;                                   // kFor, kSet, kSetBlock; kMacro: its name
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf
  Body body;
  Body else_body;                                                       // kIf, kFor
  std::vector<Param> params;                                            // kMacro, kCallBlock
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;  // kMacro, kCallBlock
  std::vector<std::pair<Target, ExprPtr>> withs;                        // kWith
};

struct Program {
  std::string source;               // normalized (lexer.h)
  std::deque<std::string> strings;  // decoded string literals
  Body body;
  std::deque<std::string> symbols;                       // symbol id -> name (stable addresses)
  std::unordered_map<std::string_view, int> symbol_ids;  // views into `symbols`' strings
  std::vector<GlobalId> symbol_globals;  // symbol id -> the global of that name, or kNone
};

}  // namespace folio::chat::internal

#endif  // FOLIO_CHAT_AST_H_
