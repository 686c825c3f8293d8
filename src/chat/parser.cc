#include "chat/parser.h"

#include <algorithm>
#include <initializer_list>

#include "chat/lexer.h"
#include "chat/optimizer.h"
#include "folio/core/str_cat.h"

namespace folio::chat::internal {
namespace {

class Parser {
 public:
  Parser(Program& prog, std::vector<Token> tokens) : prog_(prog), toks_(std::move(tokens)) {}

  Status Run() {
    FOLIO_ASSIGN_OR_RETURN(prog_.body, Subparse({}));
    return Status::Ok();
  }

 private:
  // --- token stream -------------------------------------------------------

  const Token& cur() const { return toks_[i_]; }
  const Token& look() const { return toks_[std::min(i_ + 1, toks_.size() - 1)]; }
  void next() {
    if (i_ + 1 < toks_.size()) ++i_;
  }
  bool At(Tok t) const { return cur().type == t; }
  bool AtName(std::string_view name) const { return At(Tok::kName) && cur().text == name; }
  bool SkipIf(Tok t) {
    if (!At(t)) return false;
    next();
    return true;
  }
  bool SkipName(std::string_view name) {
    if (!AtName(name)) return false;
    next();
    return true;
  }

  std::string Where(uint32_t pos) const { return LineColumn(prog_.source, pos); }
  Status Fail(uint32_t pos, std::string_view message) const {
    return Status::InvalidArgument(StrCat(Where(pos), ": ", message));
  }
  Status Unsupported(uint32_t pos, std::string_view message) const {
    return Status::Unimplemented(StrCat(Where(pos), ": ", message));
  }
  // jinja2's describe_token: a name's text, else what the token is.
  static std::string Describe(const Token& t) {
    if (t.type == Tok::kName) return std::string(t.text);
    return std::string(TokName(t.type));
  }
  Status Expect(Tok t) {
    if (At(t)) {
      next();
      return Status::Ok();
    }
    if (At(Tok::kEof)) {
      return Fail(cur().pos, StrCat("unexpected end of template, expected '", TokName(t), "'"));
    }
    return Fail(cur().pos,
                StrCat("expected token '", TokName(t), "', got '", Describe(cur()), "'"));
  }
  Result<std::string_view> ExpectName() {
    if (!At(Tok::kName)) {
      return Fail(cur().pos, StrCat("expected token 'name', got '", Describe(cur()), "'"));
    }
    const std::string_view name = cur().text;
    next();
    return name;
  }

  // Depth of statements and expressions being parsed.
  class DepthGuard {
   public:
    explicit DepthGuard(Parser& p) : p_(p) { ++p_.depth_; }
    ~DepthGuard() { --p_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Parser& p_;
  };
  Status CheckDepth() const {
    if (depth_ > kMaxParseDepth) {
      return Status::ResourceExhausted(
          StrCat(Where(cur().pos), ": template nests deeper than ", kMaxParseDepth, " levels"));
    }
    return Status::Ok();
  }

  // Saves and sets the soft-frame and loop state for a nested body: jinja2
  // compiles macro, call and loop bodies in frames of their own.
  struct FrameState {
    bool soft;
    int loop_depth;
  };
  FrameState Enter(bool soft, bool function) {
    FrameState saved{soft_, loop_depth_};
    soft_ = soft;
    if (function) loop_depth_ = 0;
    return saved;
  }
  void Leave(FrameState s) {
    soft_ = s.soft;
    loop_depth_ = s.loop_depth;
  }

  int Intern(std::string_view name) {
    if (auto it = prog_.symbol_ids.find(name); it != prog_.symbol_ids.end()) return it->second;
    const int id = static_cast<int>(prog_.symbols.size());
    prog_.symbols.emplace_back(name);
    prog_.symbol_ids.emplace(prog_.symbols.back(), id);
    prog_.symbol_globals.push_back(LookupGlobal(name));
    return id;
  }

  ExprPtr NewExpr(ExprKind kind, uint32_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

  // --- statements -----------------------------------------------------------

  // Statements until a block tag named in `end` (left as the current
  // token) or the end of the template (an error if `end` is not empty).
  Result<Body> Subparse(std::initializer_list<std::string_view> end) {
    Body body;
    end_stack_.push_back(std::vector<std::string_view>(end));
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::kData) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->pos = t.pos;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Tok::kVariableBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kPrint;
        s->pos = cur().pos;
        FOLIO_ASSIGN_OR_RETURN(s->expr, ParseTuple(TupleMode{}));
        FOLIO_RETURN_IF_ERROR(Expect(Tok::kVariableEnd));
        body.push_back(std::move(s));
      } else if (t.type == Tok::kBlockBegin) {
        next();
        if (At(Tok::kName) && std::find(end.begin(), end.end(), cur().text) != end.end()) {
          end_stack_.pop_back();
          return body;
        }
        FOLIO_RETURN_IF_ERROR(ParseStatement(body));
        FOLIO_RETURN_IF_ERROR(Expect(Tok::kBlockEnd));
      } else if (t.type == Tok::kEof) {
        if (end.size() != 0) return FailEof(t.pos);
        end_stack_.pop_back();
        return body;
      } else {
        return Fail(t.pos, StrCat("unexpected '", Describe(t), "'"));
      }
    }
  }

  std::string LookingFor() const {
    std::string out;
    for (auto it = end_stack_.rbegin(); it != end_stack_.rend(); ++it) {
      if (it->empty()) continue;
      out = " Jinja was looking for the following tags: ";
      for (size_t k = 0; k < it->size(); ++k) {
        if (k) out += k + 1 == it->size() ? " or " : ", ";
        out += StrCat("'", (*it)[k], "'");
      }
      out += ".";
      break;
    }
    if (!tag_stack_.empty()) {
      out += StrCat(" The innermost block that needs to be closed is '", tag_stack_.back(), "'.");
    }
    return out;
  }
  Status FailEof(uint32_t pos) const {
    return Fail(pos, "Unexpected end of template." + LookingFor());
  }

  // The body of a block statement: an optional colon, the end of the tag,
  // statements up to one of `end`.
  Result<Body> ParseStatements(std::initializer_list<std::string_view> end, bool drop_needle) {
    SkipIf(Tok::kColon);
    FOLIO_RETURN_IF_ERROR(Expect(Tok::kBlockEnd));
    FOLIO_ASSIGN_OR_RETURN(Body body, Subparse(end));
    if (At(Tok::kEof)) return FailEof(cur().pos);
    if (drop_needle) next();
    return body;
  }

  Status ParseStatement(Body& out) {
    DepthGuard guard(*this);
    FOLIO_RETURN_IF_ERROR(CheckDepth());
    if (!At(Tok::kName)) return Fail(cur().pos, "tag name expected");
    const std::string_view tag = cur().text;
    const uint32_t pos = cur().pos;
    if (tag == "extends" || tag == "include" || tag == "import" || tag == "from" ||
        tag == "block" || tag == "autoescape") {
      return Unsupported(pos, StrCat("'{% ", tag, " %}' is not supported (chat templates are ",
                                     "one self-contained file)"));
    }
    static constexpr std::string_view kTags[] = {"for",   "if",       "set",       "macro",
                                                 "call",  "filter",   "with",      "print",
                                                 "break", "continue", "generation"};
    if (std::find(std::begin(kTags), std::end(kTags), tag) == std::end(kTags)) {
      return FailUnknownTag(pos, tag);
    }
    if (tag == "print") {
      // {% print a, b %}: each expression printed in turn.
      next();
      do {
        auto p = std::make_unique<Stmt>();
        p->kind = StmtKind::kPrint;
        p->pos = cur().pos;
        FOLIO_ASSIGN_OR_RETURN(p->expr, ParseExpression(true));
        out.push_back(std::move(p));
      } while (SkipIf(Tok::kComma));
      return Status::Ok();
    }
    tag_stack_.push_back(tag);
    Result<std::unique_ptr<Stmt>> s = ParseTag(tag, pos);
    tag_stack_.pop_back();
    if (!s) return s.error();
    if (*s) out.push_back(std::move(*s));
    return Status::Ok();
  }

  Status FailUnknownTag(uint32_t pos, std::string_view tag) const {
    for (const auto& ends : end_stack_) {
      if (std::find(ends.begin(), ends.end(), tag) != ends.end()) {
        return Fail(pos, StrCat("Encountered unknown tag '", tag, "'.", LookingFor()));
      }
    }
    static constexpr std::string_view kEnds[] = {"endfor",  "endif",     "endset",  "endmacro",
                                                 "endcall", "endfilter", "endwith", "endgeneration",
                                                 "endraw",  "else",      "elif"};
    if (std::find(std::begin(kEnds), std::end(kEnds), tag) != std::end(kEnds)) {
      return Fail(pos, StrCat("Encountered unknown tag '", tag, "'.", LookingFor()));
    }
    return Fail(pos, StrCat("Encountered unknown tag '", tag, "'."));
  }

  Result<std::unique_ptr<Stmt>> ParseTag(std::string_view tag, uint32_t pos) {
    next();  // the tag name
    auto s = std::make_unique<Stmt>();
    s->pos = pos;
    if (tag == "for") {
      s->kind = StmtKind::kFor;
      FOLIO_ASSIGN_OR_RETURN(s->target, ParseAssignTarget(/*with_tuple=*/true, false, "in"));
      if (!SkipName("in")) {
        return Fail(cur().pos, StrCat("expected token 'in', got '", Describe(cur()), "'"));
      }
      TupleMode iter_mode;
      iter_mode.with_condexpr = false;
      iter_mode.extra_end = "recursive";
      FOLIO_ASSIGN_OR_RETURN(s->expr, ParseTuple(iter_mode));
      if (SkipName("if")) {
        const FrameState saved = Enter(false, false);
        Result<ExprPtr> cond = ParseExpression(true);
        Leave(saved);
        if (!cond) return cond.error();
        s->cond = std::move(*cond);
      }
      if (AtName("recursive")) {
        return Unsupported(cur().pos, "recursive for loops are not supported");
      }
      const FrameState saved = Enter(false, false);
      ++loop_depth_;
      Result<Body> body = ParseStatements({"endfor", "else"}, false);
      Leave(saved);
      if (!body) return body.error();
      s->body = std::move(*body);
      const bool has_else = AtName("else");
      next();
      if (has_else) {
        FOLIO_ASSIGN_OR_RETURN(s->else_body, ParseStatements({"endfor"}, true));
      }
      return s;
    }
    if (tag == "if") {
      s->kind = StmtKind::kIf;
      const FrameState saved = Enter(true, false);
      Status st = ParseIfChain(*s);
      Leave(saved);
      FOLIO_RETURN_IF_ERROR(st);
      return s;
    }
    if (tag == "set") {
      FOLIO_ASSIGN_OR_RETURN(s->target, ParseAssignTarget(true, /*with_namespace=*/true, {}));
      if (SkipIf(Tok::kAssign)) {
        s->kind = StmtKind::kSet;
        FOLIO_ASSIGN_OR_RETURN(s->expr, ParseTuple(TupleMode{}));
        return s;
      }
      s->kind = StmtKind::kSetBlock;
      if (At(Tok::kPipe)) {
        FOLIO_ASSIGN_OR_RETURN(s->expr, ParseFilterChain(nullptr, false));
      }
      const FrameState saved = Enter(false, false);
      Result<Body> body = ParseStatements({"endset"}, true);
      Leave(saved);
      if (!body) return body.error();
      s->body = std::move(*body);
      return s;
    }
    if (tag == "macro") {
      s->kind = StmtKind::kMacro;
      FOLIO_ASSIGN_OR_RETURN(std::string_view name, ExpectName());
      s->text = name;
      s->target.kind = Target::Kind::kName;
      s->target.name = name;
      s->target.symbol = Intern(name);
      FOLIO_RETURN_IF_ERROR(ParseSignature(*s));
      FOLIO_RETURN_IF_ERROR(ParseFunctionBody(*s, "endmacro"));
      return s;
    }
    if (tag == "call") {
      s->kind = StmtKind::kCallBlock;
      if (At(Tok::kLParen)) FOLIO_RETURN_IF_ERROR(ParseSignature(*s));
      FOLIO_ASSIGN_OR_RETURN(s->expr, ParseExpression(true));
      if (s->expr->kind != ExprKind::kCall) return Fail(pos, "expected call");
      FOLIO_RETURN_IF_ERROR(ParseFunctionBody(*s, "endcall"));
      return s;
    }
    if (tag == "filter") {
      s->kind = StmtKind::kFilterBlock;
      FOLIO_ASSIGN_OR_RETURN(s->expr, ParseFilterChain(nullptr, true));
      const FrameState saved = Enter(false, false);
      Result<Body> body = ParseStatements({"endfilter"}, true);
      Leave(saved);
      if (!body) return body.error();
      s->body = std::move(*body);
      return s;
    }
    if (tag == "with") {
      s->kind = StmtKind::kWith;
      while (!At(Tok::kBlockEnd)) {
        if (!s->withs.empty()) FOLIO_RETURN_IF_ERROR(Expect(Tok::kComma));
        FOLIO_ASSIGN_OR_RETURN(Target t, ParseAssignTarget(true, false, {}));
        FOLIO_RETURN_IF_ERROR(Expect(Tok::kAssign));
        FOLIO_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        s->withs.emplace_back(std::move(t), std::move(value));
      }
      const FrameState saved = Enter(false, false);
      Result<Body> body = ParseStatements({"endwith"}, true);
      Leave(saved);
      if (!body) return body.error();
      s->body = std::move(*body);
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) return Fail(pos, StrCat("'", tag, "' outside loop"));
      s->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      return s;
    }
    // generation: Hugging Face's AssistantTracker renders the body as a
    // call block's caller, in a scope of its own.
    s->kind = StmtKind::kScope;
    const FrameState saved = Enter(false, true);
    Result<Body> body = ParseStatements({"endgeneration"}, true);
    Leave(saved);
    if (!body) return body.error();
    s->body = std::move(*body);
    return s;
  }

  Status ParseIfChain(Stmt& s) {
    while (true) {
      TupleMode mode;
      mode.with_condexpr = false;
      FOLIO_ASSIGN_OR_RETURN(ExprPtr test, ParseTuple(mode));
      FOLIO_ASSIGN_OR_RETURN(Body body, ParseStatements({"elif", "else", "endif"}, false));
      s.branches.emplace_back(std::move(test), std::move(body));
      const std::string_view which = cur().text;
      next();
      if (which == "elif") continue;
      if (which == "else") {
        FOLIO_ASSIGN_OR_RETURN(s.else_body, ParseStatements({"endif"}, true));
      }
      return Status::Ok();
    }
  }

  Status ParseSignature(Stmt& s) {
    FOLIO_RETURN_IF_ERROR(Expect(Tok::kLParen));
    while (!At(Tok::kRParen)) {
      if (!s.params.empty()) FOLIO_RETURN_IF_ERROR(Expect(Tok::kComma));
      Param p;
      FOLIO_ASSIGN_OR_RETURN(p.name, ExpectName());
      p.symbol = Intern(p.name);
      if (SkipIf(Tok::kAssign)) {
        FOLIO_ASSIGN_OR_RETURN(p.default_value, ParseExpression(true));
      } else if (!s.params.empty() && s.params.back().default_value) {
        return Fail(cur().pos, "non-default argument follows default argument");
      }
      s.params.push_back(std::move(p));
    }
    return Expect(Tok::kRParen);
  }

  // A macro's or call block's body: a function of its own in jinja2, whose
  // use of caller, varargs and kwargs decides what it accepts.
  Status ParseFunctionBody(Stmt& s, std::string_view end) {
    const FrameState saved = Enter(false, true);
    functions_.push_back(&s);
    Result<Body> body = end == "endmacro" ? ParseStatements({"endmacro"}, true)
                                          : ParseStatements({"endcall"}, true);
    functions_.pop_back();
    Leave(saved);
    if (!body) return body.error();
    s.body = std::move(*body);
    return Status::Ok();
  }

  // for/set/with targets: a name, namespace.attr (set), or a tuple of them.
  Result<Target> ParseAssignTarget(bool with_tuple, bool with_namespace,
                                   std::string_view extra_end) {
    Target t;
    t.pos = cur().pos;
    std::vector<Target> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) FOLIO_RETURN_IF_ERROR(Expect(Tok::kComma));
      if (At(Tok::kVariableEnd) || At(Tok::kBlockEnd) || At(Tok::kRParen) || At(Tok::kAssign) ||
          (!extra_end.empty() && AtName(extra_end))) {
        if (items.empty()) {
          return Fail(cur().pos, StrCat("expected an expression, got '", Describe(cur()), "'"));
        }
        break;
      }
      FOLIO_ASSIGN_OR_RETURN(Target item, ParsePrimaryTarget(with_namespace));
      items.push_back(std::move(item));
      if (with_tuple && At(Tok::kComma)) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) return std::move(items[0]);
    t.kind = Target::Kind::kTuple;
    t.items = std::move(items);
    return t;
  }

  Result<Target> ParsePrimaryTarget(bool with_namespace) {
    Target t;
    t.pos = cur().pos;
    if (At(Tok::kLParen)) {
      next();
      FOLIO_ASSIGN_OR_RETURN(Target inner, ParseAssignTarget(true, with_namespace, {}));
      FOLIO_RETURN_IF_ERROR(Expect(Tok::kRParen));
      return inner;
    }
    if (!At(Tok::kName)) {
      return Fail(cur().pos, StrCat("can't assign to '", Describe(cur()), "'"));
    }
    const std::string_view name = cur().text;
    if (name == "true" || name == "false" || name == "True" || name == "False" || name == "none" ||
        name == "None") {
      return Fail(cur().pos, "can't assign to 'const'");
    }
    next();
    t.symbol = Intern(name);
    t.name = name;
    if (with_namespace && At(Tok::kDot)) {
      next();
      t.kind = Target::Kind::kNamespaceAttr;
      FOLIO_ASSIGN_OR_RETURN(t.name, ExpectName());
    }
    return t;
  }

  // --- expressions ----------------------------------------------------------

  struct TupleMode {
    bool with_condexpr = true;
    bool explicit_parentheses = false;
    std::string_view extra_end;  // a name that ends the tuple ("in", "recursive")
  };

  bool IsTupleEnd(std::string_view extra_end) const {
    if (At(Tok::kVariableEnd) || At(Tok::kBlockEnd) || At(Tok::kRParen)) return true;
    return !extra_end.empty() && AtName(extra_end);
  }

  Result<ExprPtr> ParseTuple(const TupleMode& mode) {
    const uint32_t pos = cur().pos;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) FOLIO_RETURN_IF_ERROR(Expect(Tok::kComma));
      if (IsTupleEnd(mode.extra_end)) break;
      FOLIO_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(mode.with_condexpr));
      items.push_back(std::move(e));
      if (At(Tok::kComma)) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!mode.explicit_parentheses) {
        return Fail(cur().pos, StrCat("Expected an expression, got '", Describe(cur()), "'"));
      }
    }
    ExprPtr t = NewExpr(ExprKind::kTuple, pos);
    t->children = std::move(items);
    return t;
  }

  Result<ExprPtr> ParseExpression(bool with_condexpr) {
    return with_condexpr ? ParseCondExpr() : ParseOr();
  }

  Result<ExprPtr> ParseCondExpr() {
    FOLIO_ASSIGN_OR_RETURN(ExprPtr expr1, ParseOr());
    while (At(Tok::kName) && cur().text == "if") {
      const uint32_t pos = cur().pos;
      next();
      // Both branches are jinja2 soft frames: an unknown filter there is an
      // error only if it runs.
      const FrameState saved = Enter(true, false);
      Result<ExprPtr> expr2 = ParseOr();
      Result<ExprPtr> expr3 = ExprPtr();
      if (expr2 && SkipName("else")) expr3 = ParseCondExpr();
      Leave(saved);
      if (!expr2) return expr2.error();
      if (!expr3) return expr3.error();
      ExprPtr c = NewExpr(ExprKind::kCondExpr, pos);
      c->children.push_back(std::move(*expr2));
      c->children.push_back(std::move(expr1));
      c->children.push_back(std::move(*expr3));
      expr1 = std::move(c);
    }
    return expr1;
  }

  Result<ExprPtr> ParseOr() {
    FOLIO_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (AtName("or")) {
      const uint32_t pos = cur().pos;
      next();
      FOLIO_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      left = Binary(ExprKind::kOr, pos, std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParseAnd() {
    FOLIO_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    while (AtName("and")) {
      const uint32_t pos = cur().pos;
      next();
      FOLIO_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
      left = Binary(ExprKind::kAnd, pos, std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParseNot() {
    if (AtName("not")) {
      DepthGuard guard(*this);
      FOLIO_RETURN_IF_ERROR(CheckDepth());
      const uint32_t pos = cur().pos;
      next();
      FOLIO_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      ExprPtr n = NewExpr(ExprKind::kNot, pos);
      n->children.push_back(std::move(operand));
      return n;
    }
    return ParseCompare();
  }

  Result<ExprPtr> ParseCompare() {
    const uint32_t pos = cur().pos;
    FOLIO_ASSIGN_OR_RETURN(ExprPtr expr, ParseMath1());
    ExprPtr cmp;
    while (true) {
      CompareOp op;
      switch (cur().type) {
        case Tok::kEq:
          op = CompareOp::kEq;
          break;
        case Tok::kNe:
          op = CompareOp::kNe;
          break;
        case Tok::kLt:
          op = CompareOp::kLt;
          break;
        case Tok::kLe:
          op = CompareOp::kLe;
          break;
        case Tok::kGt:
          op = CompareOp::kGt;
          break;
        case Tok::kGe:
          op = CompareOp::kGe;
          break;
        default:
          if (AtName("in")) {
            op = CompareOp::kIn;
          } else if (AtName("not") && look().type == Tok::kName && look().text == "in") {
            op = CompareOp::kNotIn;
            next();
          } else {
            return cmp ? std::move(cmp) : std::move(expr);
          }
      }
      next();
      if (!cmp) {
        cmp = NewExpr(ExprKind::kCompare, pos);
        cmp->children.push_back(std::move(expr));
      }
      FOLIO_ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
      cmp->compare_ops.push_back(op);
      cmp->children.push_back(std::move(operand));
    }
  }

  ExprPtr Binary(ExprKind kind, uint32_t pos, ExprPtr a, ExprPtr b) {
    ExprPtr e = NewExpr(kind, pos);
    e->children.push_back(std::move(a));
    e->children.push_back(std::move(b));
    return e;
  }
  ExprPtr Arith(BinaryOp op, uint32_t pos, ExprPtr a, ExprPtr b) {
    ExprPtr e = Binary(ExprKind::kBinary, pos, std::move(a), std::move(b));
    e->op = op;
    return e;
  }

  Result<ExprPtr> ParseMath1() {
    FOLIO_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
    while (At(Tok::kAdd) || At(Tok::kSub)) {
      const BinaryOp op = At(Tok::kAdd) ? BinaryOp::kAdd : BinaryOp::kSub;
      const uint32_t pos = cur().pos;
      next();
      FOLIO_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
      left = Arith(op, pos, std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParseConcat() {
    const uint32_t pos = cur().pos;
    FOLIO_ASSIGN_OR_RETURN(ExprPtr first, ParseMath2());
    if (!At(Tok::kTilde)) return first;
    ExprPtr c = NewExpr(ExprKind::kConcat, pos);
    c->children.push_back(std::move(first));
    while (SkipIf(Tok::kTilde)) {
      FOLIO_ASSIGN_OR_RETURN(ExprPtr next_arg, ParseMath2());
      c->children.push_back(std::move(next_arg));
    }
    return c;
  }

  Result<ExprPtr> ParseMath2() {
    FOLIO_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
    while (true) {
      BinaryOp op;
      if (At(Tok::kMul)) {
        op = BinaryOp::kMul;
      } else if (At(Tok::kDiv)) {
        op = BinaryOp::kDiv;
      } else if (At(Tok::kFloorDiv)) {
        op = BinaryOp::kFloorDiv;
      } else if (At(Tok::kMod)) {
        op = BinaryOp::kMod;
      } else {
        return left;
      }
      const uint32_t pos = cur().pos;
      next();
      FOLIO_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
      left = Arith(op, pos, std::move(left), std::move(right));
    }
  }

  Result<ExprPtr> ParsePow() {
    FOLIO_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
    while (At(Tok::kPow)) {
      const uint32_t pos = cur().pos;
      next();
      FOLIO_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
      left = Arith(BinaryOp::kPow, pos, std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParseUnary(bool with_filter) {
    DepthGuard guard(*this);
    FOLIO_RETURN_IF_ERROR(CheckDepth());
    ExprPtr node;
    const uint32_t pos = cur().pos;
    if (At(Tok::kSub) || At(Tok::kAdd)) {
      const ExprKind kind = At(Tok::kSub) ? ExprKind::kNeg : ExprKind::kPos;
      next();
      FOLIO_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
      node = NewExpr(kind, pos);
      node->children.push_back(std::move(operand));
    } else {
      FOLIO_ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    FOLIO_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (with_filter) {
      FOLIO_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
    }
    return node;
  }

  Result<ExprPtr> ParsePrimary() {
    const Token& t = cur();
    switch (t.type) {
      case Tok::kName: {
        const std::string_view name = t.text;
        ExprPtr e = NewExpr(ExprKind::kLiteral, t.pos);
        next();
        if (name == "true" || name == "True") {
          e->literal = Value::Bool(true);
        } else if (name == "false" || name == "False") {
          e->literal = Value::Bool(false);
        } else if (name == "none" || name == "None") {
          e->literal = Value::None();
        } else {
          e->kind = ExprKind::kName;
          e->name = name;
          e->symbol = Intern(name);
          for (Stmt* f : functions_) {
            if (name == "caller") f->uses_caller = true;
            if (name == "varargs") f->uses_varargs = true;
            if (name == "kwargs") f->uses_kwargs = true;
          }
        }
        return e;
      }
      case Tok::kString: {
        ExprPtr e = NewExpr(ExprKind::kLiteral, t.pos);
        std::string_view text = t.text;
        next();
        if (At(Tok::kString)) {
          std::string joined(text);
          while (At(Tok::kString)) {
            joined += cur().text;
            next();
          }
          prog_.strings.push_back(std::move(joined));
          text = prog_.strings.back();
        }
        e->literal = Value::Borrowed(text);
        return e;
      }
      case Tok::kInteger:
      case Tok::kFloat: {
        ExprPtr e = NewExpr(ExprKind::kLiteral, t.pos);
        e->literal =
            t.type == Tok::kInteger ? Value::Int(t.int_value) : Value::Float(t.float_value);
        next();
        return e;
      }
      case Tok::kLParen: {
        next();
        TupleMode mode;
        mode.explicit_parentheses = true;
        FOLIO_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(mode));
        FOLIO_RETURN_IF_ERROR(Expect(Tok::kRParen));
        return e;
      }
      case Tok::kLBracket: {
        ExprPtr e = NewExpr(ExprKind::kList, t.pos);
        next();
        while (!At(Tok::kRBracket)) {
          if (!e->children.empty()) FOLIO_RETURN_IF_ERROR(Expect(Tok::kComma));
          if (At(Tok::kRBracket)) break;
          FOLIO_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
          e->children.push_back(std::move(item));
        }
        FOLIO_RETURN_IF_ERROR(Expect(Tok::kRBracket));
        return e;
      }
      case Tok::kLBrace: {
        ExprPtr e = NewExpr(ExprKind::kDict, t.pos);
        next();
        while (!At(Tok::kRBrace)) {
          if (!e->children.empty()) FOLIO_RETURN_IF_ERROR(Expect(Tok::kComma));
          if (At(Tok::kRBrace)) break;
          FOLIO_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
          FOLIO_RETURN_IF_ERROR(Expect(Tok::kColon));
          FOLIO_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
          e->children.push_back(std::move(key));
          e->children.push_back(std::move(value));
        }
        FOLIO_RETURN_IF_ERROR(Expect(Tok::kRBrace));
        return e;
      }
      default:
        if (t.type == Tok::kEof) return Fail(t.pos, "unexpected end of template");
        return Fail(t.pos, StrCat("unexpected '", Describe(t), "'"));
    }
  }

  Result<ExprPtr> ParsePostfix(ExprPtr node) {
    while (true) {
      if (At(Tok::kDot) || At(Tok::kLBracket)) {
        FOLIO_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
      } else if (At(Tok::kLParen)) {
        FOLIO_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (At(Tok::kPipe)) {
        FOLIO_ASSIGN_OR_RETURN(node, ParseFilterChain(std::move(node), false));
      } else if (AtName("is")) {
        FOLIO_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
      } else if (At(Tok::kLParen)) {
        FOLIO_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> ParseSubscript(ExprPtr node) {
    const Token t = cur();
    next();
    if (t.type == Tok::kDot) {
      const Token attr = cur();
      next();
      if (attr.type == Tok::kName) {
        ExprPtr e = NewExpr(ExprKind::kGetAttr, t.pos);
        e->name = attr.text;
        e->children.push_back(std::move(node));
        return e;
      }
      if (attr.type != Tok::kInteger) return Fail(attr.pos, "expected name or number");
      ExprPtr index = NewExpr(ExprKind::kLiteral, attr.pos);
      index->literal = Value::Int(attr.int_value);
      return Binary(ExprKind::kGetItem, t.pos, std::move(node), std::move(index));
    }
    // [ subscripts ]
    std::vector<ExprPtr> args;
    while (!At(Tok::kRBracket)) {
      if (!args.empty()) FOLIO_RETURN_IF_ERROR(Expect(Tok::kComma));
      FOLIO_ASSIGN_OR_RETURN(ExprPtr a, ParseSubscribed());
      args.push_back(std::move(a));
    }
    FOLIO_RETURN_IF_ERROR(Expect(Tok::kRBracket));
    if (args.empty()) return Fail(t.pos, "expected subscript expression");
    ExprPtr arg;
    if (args.size() == 1) {
      arg = std::move(args[0]);
    } else {
      arg = NewExpr(ExprKind::kTuple, t.pos);
      arg->children = std::move(args);
    }
    return Binary(ExprKind::kGetItem, t.pos, std::move(node), std::move(arg));
  }

  Result<ExprPtr> ParseSubscribed() {
    const uint32_t pos = cur().pos;
    ExprPtr slice = NewExpr(ExprKind::kSlice, pos);
    if (At(Tok::kColon)) {
      next();
      slice->children.push_back(nullptr);
    } else {
      FOLIO_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(true));
      if (!At(Tok::kColon)) return e;
      next();
      slice->children.push_back(std::move(e));
    }
    if (At(Tok::kColon)) {
      slice->children.push_back(nullptr);
    } else if (!At(Tok::kRBracket) && !At(Tok::kComma)) {
      FOLIO_ASSIGN_OR_RETURN(ExprPtr stop, ParseExpression(true));
      slice->children.push_back(std::move(stop));
    } else {
      slice->children.push_back(nullptr);
    }
    if (At(Tok::kColon)) {
      next();
      if (!At(Tok::kRBracket) && !At(Tok::kComma)) {
        FOLIO_ASSIGN_OR_RETURN(ExprPtr step, ParseExpression(true));
        slice->children.push_back(std::move(step));
      } else {
        slice->children.push_back(nullptr);
      }
    } else {
      slice->children.push_back(nullptr);
    }
    return slice;
  }

  // ( args, name=value, ... ) appended to e's children and kwargs.
  Status ParseCallArgs(Expr& e) {
    const uint32_t pos = cur().pos;
    FOLIO_RETURN_IF_ERROR(Expect(Tok::kLParen));
    bool require_comma = false;
    while (!At(Tok::kRParen)) {
      if (require_comma) {
        FOLIO_RETURN_IF_ERROR(Expect(Tok::kComma));
        if (At(Tok::kRParen)) break;
      }
      if (At(Tok::kMul) || At(Tok::kPow)) {
        return Unsupported(cur().pos, "*args and **kwargs in calls are not supported");
      }
      if (At(Tok::kName) && look().type == Tok::kAssign) {
        const std::string_view key = cur().text;
        next();
        next();
        FOLIO_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        e.kwargs.emplace_back(key, std::move(value));
      } else {
        if (!e.kwargs.empty()) return Fail(pos, "invalid syntax for function call expression");
        FOLIO_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        e.children.push_back(std::move(value));
      }
      require_comma = true;
    }
    return Expect(Tok::kRParen);
  }

  Result<ExprPtr> ParseCall(ExprPtr callee) {
    ExprPtr call = NewExpr(ExprKind::kCall, cur().pos);
    call->children.push_back(std::move(callee));
    FOLIO_RETURN_IF_ERROR(ParseCallArgs(*call));
    return call;
  }

  // Dotted names are allowed by jinja2's grammar (and then unknown).
  Result<std::string_view> ParseDottedName(uint32_t* pos) {
    *pos = cur().pos;
    FOLIO_ASSIGN_OR_RETURN(std::string_view name, ExpectName());
    if (!At(Tok::kDot)) return name;
    std::string dotted(name);
    while (SkipIf(Tok::kDot)) {
      FOLIO_ASSIGN_OR_RETURN(std::string_view part, ExpectName());
      dotted += ".";
      dotted += part;
    }
    prog_.strings.push_back(std::move(dotted));
    return std::string_view(prog_.strings.back());
  }

  // One or more "| name(args)" applied to node (null in a filter or set
  // block, whose body is the input). start_inline: the first has no pipe.
  Result<ExprPtr> ParseFilterChain(ExprPtr node, bool start_inline) {
    while (At(Tok::kPipe) || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      uint32_t pos = 0;
      FOLIO_ASSIGN_OR_RETURN(std::string_view name, ParseDottedName(&pos));
      ExprPtr f = NewExpr(ExprKind::kFilter, pos);
      f->name = name;
      f->children.push_back(std::move(node));
      if (At(Tok::kLParen)) FOLIO_RETURN_IF_ERROR(ParseCallArgs(*f));
      bool known = false;
      if (auto id = LookupFilter(name, &known)) {
        f->builtin = static_cast<int>(*id);
      } else {
        f->known_to_jinja = known;
        FOLIO_RETURN_IF_ERROR(CheckUnknown(pos, "filter", name, known));
      }
      node = std::move(f);
    }
    return node;
  }

  // An unknown filter or test fails the compile in jinja2 unless it sits in
  // an if statement or conditional expression; there it fails when run.
  Status CheckUnknown(uint32_t pos, std::string_view what, std::string_view name,
                      bool known_to_jinja) const {
    if (soft_) return Status::Ok();
    if (known_to_jinja) {
      return Unsupported(pos, StrCat("the jinja2 ", what, " '", name, "' is not supported"));
    }
    return Fail(pos, StrCat("No ", what, " named '", name, "'."));
  }

  Result<ExprPtr> ParseTest(ExprPtr node) {
    const uint32_t is_pos = cur().pos;
    next();  // is
    const bool negated = SkipName("not");
    uint32_t pos = 0;
    FOLIO_ASSIGN_OR_RETURN(std::string_view name, ParseDottedName(&pos));
    ExprPtr t = NewExpr(ExprKind::kTest, pos);
    t->name = name;
    t->children.push_back(std::move(node));
    if (At(Tok::kLParen)) {
      FOLIO_RETURN_IF_ERROR(ParseCallArgs(*t));
    } else if ((At(Tok::kName) || At(Tok::kString) || At(Tok::kInteger) || At(Tok::kFloat) ||
                At(Tok::kLParen) || At(Tok::kLBracket) || At(Tok::kLBrace)) &&
               !AtName("else") && !AtName("or") && !AtName("and")) {
      if (AtName("is")) return Fail(cur().pos, "You cannot chain multiple tests with is");
      FOLIO_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
      FOLIO_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
      t->children.push_back(std::move(arg));
    }
    bool known = false;
    if (auto id = LookupTest(name, &known)) {
      t->builtin = static_cast<int>(*id);
    } else {
      t->known_to_jinja = known;
      FOLIO_RETURN_IF_ERROR(CheckUnknown(pos, "test", name, known));
    }
    if (!negated) return t;
    ExprPtr n = NewExpr(ExprKind::kNot, is_pos);
    n->children.push_back(std::move(t));
    return n;
  }

  Program& prog_;
  std::vector<Token> toks_;
  size_t i_ = 0;
  int depth_ = 0;
  bool soft_ = false;
  int loop_depth_ = 0;
  std::vector<Stmt*> functions_;  // enclosing macro and call bodies
  std::vector<std::vector<std::string_view>> end_stack_;
  std::vector<std::string_view> tag_stack_;
};

}  // namespace

Result<std::unique_ptr<Program>> ParseProgram(std::string_view source,
                                              const TemplateLimits& limits) {
  auto prog = std::make_unique<Program>();
  prog->source = NormalizeSource(source);
  FOLIO_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(prog->source, prog->strings));
  Parser parser(*prog, std::move(tokens));
  FOLIO_RETURN_IF_ERROR(parser.Run());
  FoldConstants(*prog, limits);
  return prog;
}

}  // namespace folio::chat::internal
