#include "chat/optimizer.h"

#include "chat/interpreter.h"

namespace folio::chat::internal {
namespace {

// jinja2's has_safe_repr: what its optimizer may write back as a literal.
bool HasSafeRepr(const Value& v) {
  switch (v.kind()) {
    case Kind::kNone:
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
    case Kind::kString:
      return true;
    case Kind::kList:
      switch (v.flavor()) {
        case ListFlavor::kRange:
          return true;
        case ListFlavor::kList:
        case ListFlavor::kTuple:
          for (const Value& item : v.list().items) {
            if (!HasSafeRepr(item)) return false;
          }
          return true;
        default:
          return false;
      }
    case Kind::kDict:
      for (const auto& [k, val] : v.dict().items) {
        if (!HasSafeRepr(k) || !HasSafeRepr(val)) return false;
      }
      return true;
    default:
      return false;
  }
}

class Folder {
 public:
  Folder(Program& p, const TemplateLimits& limits) : p_(p), limits_(limits) {}

  // Bottom-up, as jinja2's optimizer: an expression whose value can be
  // computed without the render's variables becomes that value when it is
  // a safe literal. Folding differs from evaluating only where a slice is
  // taken (jinja2 folds it through getitem), so only expressions holding
  // one are tried. Returns whether e still holds a slice.
  bool Fold(ExprPtr& e) {
    if (e == nullptr) return false;
    bool slice = e->kind == ExprKind::kSlice;
    for (auto& c : e->children) slice = Fold(c) || slice;
    for (auto& [name, v] : e->kwargs) slice = Fold(v) || slice;
    if (!slice || e->kind == ExprKind::kSlice) return slice;
    Result<Value> v = FoldConstant(p_, limits_, *e);
    if (!v || !HasSafeRepr(*v)) return true;
    e->kind = ExprKind::kLiteral;
    e->literal = std::move(*v);
    e->children.clear();
    e->kwargs.clear();
    return false;
  }

  void FoldBody(Body& body) {
    for (auto& s : body) {
      const bool slice = Fold(s->expr);
      if (s->kind == StmtKind::kPrint && slice) {
        // jinja2 renders a {{ }} it can compute while compiling, whatever
        // the value.
        if (Result<Value> v = FoldConstant(p_, limits_, *s->expr)) {
          p_.strings.push_back(ToStr(*v));
          s->kind = StmtKind::kText;
          s->text = p_.strings.back();
          s->expr.reset();
          continue;
        }
      }
      Fold(s->cond);
      for (auto& [cond, branch] : s->branches) {
        Fold(cond);
        FoldBody(branch);
      }
      for (auto& param : s->params) Fold(param.default_value);
      for (auto& [target, e] : s->withs) Fold(e);
      FoldBody(s->body);
      FoldBody(s->else_body);
    }
  }

 private:
  Program& p_;
  const TemplateLimits& limits_;
};

}  // namespace

void FoldConstants(Program& program, const TemplateLimits& limits) {
  Folder(program, limits).FoldBody(program.body);
}

}  // namespace folio::chat::internal
