#include "chat/interpreter.h"

#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include "chat/access.h"
#include "chat/builtins.h"
#include "chat/lexer.h"
#include "chat/operators.h"
#include "chat/text.h"
#include "folio/core/str_cat.h"

namespace folio::chat::internal {
namespace {

// Statement and expression evaluation nest at most this deep (macro calls
// multiply the template's own nesting), which bounds the native stack.
constexpr int kMaxEvalDepth = 2000;

// A scope: the names a for loop, macro call, with or set block binds.
// A scope's values are dropped when it closes; the frame is reused unless
// a macro was defined in it or below it (the macro keeps a pointer to it
// and late-binds its names), in which case it lives until the render ends.
struct Frame {
  Frame* parent = nullptr;
  bool captured = false;
  std::vector<std::pair<int, Value>> vars;

  const Value* Find(int sym) const {
    for (const auto& [s, v] : vars) {
      if (s == sym) return &v;
    }
    return nullptr;
  }
  void Set(int sym, Value v) {
    for (auto& [s, old] : vars) {
      if (s == sym) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(sym, std::move(v));
  }
};

// A {% macro %}, or the caller() of a {% call %} block.
struct MacroObject : CallableObject {
  MacroObject() : CallableObject(Type::kMacro) {}
  void AppendRepr(std::string& out, uint32_t, size_t) const override {
    out += StrCat("<Macro '", name, "'>");
  }
  const Stmt* def = nullptr;  // kMacro or kCallBlock
  Frame* closure = nullptr;
  std::string_view name;
};

// A for loop's `loop`. Items are taken from `source` lazily, through the
// loop's `if` filter, as jinja2's LoopContext does: loop.last, nextitem and
// length look ahead, and the filter runs in the order jinja2 runs it.
struct LoopObject : Object {
  void AppendRepr(std::string& out, uint32_t, size_t) const override {
    // The length is known without running the loop's filter unless it has
    // one that has not run to the end yet.
    out += StrCat("<LoopContext ", index0 + 1);
    if (stmt->cond == nullptr || next_source == source.size()) {
      const size_t length =
          stmt->cond ? static_cast<size_t>(index0 + 1) + ahead.size() : source.size();
      out += StrCat("/", length);
    }
    out += ">";
  }
  std::vector<Value> source;
  size_t next_source = 0;
  std::deque<Value> ahead;  // items that passed the filter, not yet reached
  int64_t index0 = -1;
  Value current, previous;
  std::optional<Value> last_changed;
  const Stmt* stmt = nullptr;
  Frame* test_frame = nullptr;  // where the filter sees the loop target
};

enum class Flow { kNormal, kBreak, kContinue };

class Interpreter {
 public:
  Interpreter(const Program& program, const TemplateLimits& limits, const RenderOptions& options,
              std::vector<Value> variables)
      : prog_(program), limits_(limits), vars_(std::move(variables)) {
    ctx_.max_bytes = limits.max_output_bytes;
    ctx_.now_epoch_seconds = options.now_epoch_seconds;
    ctx_.namespaces = &namespaces_;
    globals_.resize(prog_.symbols.size());
    sym_loop_ = Symbol("loop");
    sym_caller_ = Symbol("caller");
    sym_varargs_ = Symbol("varargs");
    sym_kwargs_ = Symbol("kwargs");
  }

  // Evaluates a constant expression as jinja2's compiler does (as_const):
  // see FoldConstant.
  Result<Value> Fold(const Expr& e) {
    folding_ = true;
    Frame& root = NewFrame(nullptr);
    return Eval(e, root);
  }

  ~Interpreter() {
    // Namespaces can hold themselves; emptying them frees the cycles.
    for (const auto& ns : namespaces_) ns->attrs.clear();
  }

  Result<std::string> Run() {
    std::string out;
    out_ = &out;
    Frame& root = NewFrame(nullptr);
    FOLIO_ASSIGN_OR_RETURN(Flow flow, ExecBody(prog_.body, root));
    (void)flow;
    root.vars.clear();
    return out;
  }

 private:
  int Symbol(std::string_view name) const {
    auto it = prog_.symbol_ids.find(name);
    return it == prog_.symbol_ids.end() ? -1 : it->second;
  }

  Frame& NewFrame(Frame* parent) {
    Frame* f = nullptr;
    if (free_frames_.empty()) {
      f = &frames_.emplace_back();
    } else {
      f = free_frames_.back();
      free_frames_.pop_back();
      f->captured = false;
    }
    f->parent = parent;
    return *f;
  }

  // Closes a scope: its values go, and the frame is reused if no macro
  // holds it.
  void ReleaseFrame(Frame& f) {
    f.vars.clear();
    if (!f.captured) free_frames_.push_back(&f);
  }

  // --- errors -----------------------------------------------------------

  std::string Where(uint32_t pos) const { return LineColumn(prog_.source, pos); }
  // A builtin's error with the position of the expression that called it;
  // raise_exception's message passes through untouched.
  Status Located(uint32_t pos, const Status& s) const {
    if (s.ok() || s.message().starts_with(kRaisedPrefix)) return s;
    return Status(s.code(), StrCat(Where(pos), ": ", s.message()));
  }
  Status Exhausted(uint32_t pos, std::string_view what, uint64_t limit) const {
    return Status::ResourceExhausted(
        StrCat(Where(pos), ": the render exceeds ", what, " (", limit, ")"));
  }
  Status CountIteration(uint32_t pos) {
    if (++iterations_ > limits_.max_loop_iterations) {
      return Exhausted(pos, "max_loop_iterations", limits_.max_loop_iterations);
    }
    return Status::Ok();
  }

  class DepthGuard {
   public:
    explicit DepthGuard(Interpreter& in) : in_(in) { ++in_.depth_; }
    ~DepthGuard() { --in_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Interpreter& in_;
  };
  Status CheckDepth(uint32_t pos) const {
    if (depth_ > kMaxEvalDepth) {
      return Status::ResourceExhausted(
          StrCat(Where(pos), ": the render nests deeper than ", kMaxEvalDepth, " levels"));
    }
    return Status::Ok();
  }

  // --- output -------------------------------------------------------------

  Status Emit(std::string_view s, uint32_t pos) {
    if (out_->size() + s.size() > limits_.max_output_bytes) {
      return Exhausted(pos, "max_output_bytes", limits_.max_output_bytes);
    }
    out_->append(s);
    return Status::Ok();
  }
  Status EmitValue(const Value& v, uint32_t pos) {
    if (v.is_string()) return Emit(v.str(), pos);
    AppendStr(*out_, v, limits_.max_output_bytes);
    if (out_->size() > limits_.max_output_bytes) {
      return Exhausted(pos, "max_output_bytes", limits_.max_output_bytes);
    }
    return Status::Ok();
  }

  // Runs body into a buffer of its own; the text.
  Result<std::string> Capture(const Body& body, Frame& frame, Flow* flow) {
    std::string buffer;
    std::string* saved = out_;
    out_ = &buffer;
    Result<Flow> r = ExecBody(body, frame);
    out_ = saved;
    if (!r) return r.error();
    *flow = *r;
    return buffer;
  }

  // --- statements ---------------------------------------------------------

  Result<Flow> ExecBody(const Body& body, Frame& frame) {
    for (const auto& s : body) {
      FOLIO_ASSIGN_OR_RETURN(Flow flow, Exec(*s, frame));
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Result<Flow> Exec(const Stmt& s, Frame& frame) {
    DepthGuard guard(*this);
    FOLIO_RETURN_IF_ERROR(CheckDepth(s.pos));
    switch (s.kind) {
      case StmtKind::kText:
        FOLIO_RETURN_IF_ERROR(Emit(s.text, s.pos));
        return Flow::kNormal;
      case StmtKind::kPrint: {
        FOLIO_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, frame));
        FOLIO_RETURN_IF_ERROR(EmitValue(v, s.pos));
        return Flow::kNormal;
      }
      case StmtKind::kIf:
        for (const auto& [cond, body] : s.branches) {
          FOLIO_ASSIGN_OR_RETURN(Value c, Eval(*cond, frame));
          if (Truthy(c)) return ExecBody(body, frame);
        }
        return ExecBody(s.else_body, frame);
      case StmtKind::kFor:
        return ExecFor(s, frame);
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
      case StmtKind::kSet: {
        FOLIO_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, frame));
        FOLIO_RETURN_IF_ERROR(Assign(s.target, v, frame));
        return Flow::kNormal;
      }
      case StmtKind::kSetBlock: {
        Frame& inner = NewFrame(&frame);
        Flow flow = Flow::kNormal;
        Result<std::string> text = Capture(s.body, inner, &flow);
        ReleaseFrame(inner);
        if (!text) return text.error();
        if (flow != Flow::kNormal) return flow;
        Value v = Value::Str(std::move(*text));
        if (s.expr) {
          FOLIO_ASSIGN_OR_RETURN(v, EvalFilter(*s.expr, frame, &v));
        }
        FOLIO_RETURN_IF_ERROR(Assign(s.target, v, frame));
        return Flow::kNormal;
      }
      case StmtKind::kMacro:
        frame.Set(s.target.symbol, MakeMacro(s, frame, s.text));
        return Flow::kNormal;
      case StmtKind::kCallBlock: {
        const Value caller = MakeMacro(s, frame, "caller");
        FOLIO_ASSIGN_OR_RETURN(Value v, EvalCall(*s.expr, frame, &caller));
        FOLIO_RETURN_IF_ERROR(EmitValue(v, s.pos));
        return Flow::kNormal;
      }
      case StmtKind::kFilterBlock: {
        Frame& inner = NewFrame(&frame);
        Flow flow = Flow::kNormal;
        Result<std::string> text = Capture(s.body, inner, &flow);
        ReleaseFrame(inner);
        if (!text) return text.error();
        const Value input = Value::Str(std::move(*text));
        FOLIO_ASSIGN_OR_RETURN(Value v, EvalFilter(*s.expr, frame, &input));
        FOLIO_RETURN_IF_ERROR(EmitValue(v, s.pos));
        return flow;
      }
      case StmtKind::kWith: {
        Frame& inner = NewFrame(&frame);
        for (const auto& [target, expr] : s.withs) {
          FOLIO_ASSIGN_OR_RETURN(Value v, Eval(*expr, frame));
          FOLIO_RETURN_IF_ERROR(Assign(target, v, inner));
        }
        Result<Flow> flow = ExecBody(s.body, inner);
        ReleaseFrame(inner);
        return flow;
      }
      case StmtKind::kScope: {
        Frame& inner = NewFrame(&frame);
        Result<Flow> flow = ExecBody(s.body, inner);
        ReleaseFrame(inner);
        return flow;
      }
    }
    return Flow::kNormal;
  }

  Value MakeMacro(const Stmt& def, Frame& frame, std::string_view name) {
    for (Frame* f = &frame; f != nullptr && !f->captured; f = f->parent) f->captured = true;
    auto m = std::make_shared<MacroObject>();
    m->def = &def;
    m->closure = &frame;
    m->name = name;
    return Value::FromObject(Kind::kCallable, std::move(m));
  }

  Status Assign(const Target& t, const Value& v, Frame& frame) {
    switch (t.kind) {
      case Target::Kind::kName:
        frame.Set(t.symbol, v);
        return Status::Ok();
      case Target::Kind::kNamespaceAttr: {
        const Value ns = Lookup(t.symbol, frame);
        if (ns.kind() != Kind::kNamespace) {
          return Status::InvalidArgument(
              StrCat(Where(t.pos), ": cannot assign attribute on non-namespace object"));
        }
        if (!ns.ns().Set(t.name, v)) {
          return Status::ResourceExhausted(
              StrCat(Where(t.pos), ": a value nests deeper than ", kMaxNesting, " levels"));
        }
        return Status::Ok();
      }
      case Target::Kind::kTuple: {
        if (v.is_undefined()) return Located(t.pos, UndefinedError(v));
        Result<std::vector<Value>> items = Iterate(v);
        if (!items) {
          if (v.is_list()) return Located(t.pos, items.error());  // a generator's error
          return Located(t.pos,
                         TypeError(StrCat("cannot unpack non-iterable ", TypeName(v), " object")));
        }
        if (items->size() != t.items.size()) {
          const std::string message =
              items->size() > t.items.size()
                  ? StrCat("too many values to unpack (expected ", t.items.size(), ")")
                  : StrCat("not enough values to unpack (expected ", t.items.size(), ", got ",
                           items->size(), ")");
          return Located(t.pos, Status::InvalidArgument(message));
        }
        for (size_t i = 0; i < items->size(); ++i) {
          FOLIO_RETURN_IF_ERROR(Assign(t.items[i], (*items)[i], frame));
        }
        return Status::Ok();
      }
    }
    return Status::Ok();
  }

  Result<Flow> ExecFor(const Stmt& s, Frame& frame) {
    FOLIO_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr, frame));
    Result<std::vector<Value>> items = Iterate(iterable);
    if (!items) return Located(s.expr->pos, items.error());
    auto loop = std::make_shared<LoopObject>();
    loop->depth = iterable.depth() + 1;
    loop->source = std::move(*items);
    loop->stmt = &s;
    if (s.cond) loop->test_frame = &NewFrame(&frame);
    const Value loop_value = Value::FromObject(Kind::kLoop, loop);
    Frame& body_frame = NewFrame(&frame);
    Status status;
    while (true) {
      Value item;
      Result<bool> has = LoopNext(*loop, &item);
      if (!has) {
        status = has.error();
        break;
      }
      if (!*has) break;
      body_frame.vars.clear();
      status = Assign(s.target, item, body_frame);
      if (!status.ok()) break;
      if (sym_loop_ >= 0) body_frame.Set(sym_loop_, loop_value);
      Result<Flow> flow = ExecBody(s.body, body_frame);
      if (!flow) {
        status = flow.error();
        break;
      }
      if (*flow == Flow::kBreak) break;
    }
    ReleaseFrame(body_frame);
    // The test frame stays: the loop object may outlive the loop.
    if (loop->test_frame) loop->test_frame->vars.clear();
    FOLIO_RETURN_IF_ERROR(status);
    if (loop->index0 < 0) return ExecBody(s.else_body, frame);
    return Flow::kNormal;
  }

  // The next source item that passes the loop's filter.
  Result<bool> PullSource(LoopObject& loop, Value* item) {
    while (loop.next_source < loop.source.size()) {
      FOLIO_RETURN_IF_ERROR(CountIteration(loop.stmt->pos));
      const Value& v = loop.source[loop.next_source++];
      if (!loop.stmt->cond) {
        *item = v;
        return true;
      }
      Frame& tf = *loop.test_frame;
      tf.vars.clear();
      FOLIO_RETURN_IF_ERROR(Assign(loop.stmt->target, v, tf));
      FOLIO_ASSIGN_OR_RETURN(Value keep, Eval(*loop.stmt->cond, tf));
      if (Truthy(keep)) {
        *item = v;
        return true;
      }
    }
    return false;
  }

  Result<bool> LoopNext(LoopObject& loop, Value* item) {
    if (!loop.ahead.empty()) {
      *item = std::move(loop.ahead.front());
      loop.ahead.pop_front();
    } else {
      FOLIO_ASSIGN_OR_RETURN(bool got, PullSource(loop, item));
      if (!got) return false;
    }
    if (loop.index0 >= 0) loop.previous = loop.current;
    loop.current = *item;
    ++loop.index0;
    return true;
  }

  Result<bool> LoopPeek(LoopObject& loop) {
    if (!loop.ahead.empty()) return true;
    Value v;
    FOLIO_ASSIGN_OR_RETURN(bool got, PullSource(loop, &v));
    if (got) loop.ahead.push_back(std::move(v));
    return got;
  }

  Result<int64_t> LoopLength(LoopObject& loop) {
    while (true) {
      Value v;
      FOLIO_ASSIGN_OR_RETURN(bool got, PullSource(loop, &v));
      if (!got) break;
      loop.ahead.push_back(std::move(v));
    }
    return loop.index0 + 1 + static_cast<int64_t>(loop.ahead.size());
  }

  Result<Value> LoopAttr(const Value& loop_value, std::string_view name) {
    LoopObject& loop = loop_value.object<LoopObject>();
    if (name == "index") return Value::Int(loop.index0 + 1);
    if (name == "index0") return Value::Int(loop.index0);
    if (name == "first") return Value::Bool(loop.index0 == 0);
    if (name == "depth") return Value::Int(1);
    if (name == "depth0") return Value::Int(0);
    if (name == "previtem") {
      if (loop.index0 > 0) return loop.previous;
      return Value::Undefined(UndefinedReason::kMessage, "there is no previous item");
    }
    if (name == "last" || name == "nextitem") {
      FOLIO_ASSIGN_OR_RETURN(bool more, LoopPeek(loop));
      if (name == "last") return Value::Bool(!more);
      if (more) return loop.ahead.front();
      return Value::Undefined(UndefinedReason::kMessage, "there is no next item");
    }
    if (name == "length" || name == "revindex" || name == "revindex0") {
      FOLIO_ASSIGN_OR_RETURN(int64_t length, LoopLength(loop));
      if (name == "length") return Value::Int(length);
      return Value::Int(length - loop.index0 - (name == "revindex0" ? 1 : 0));
    }
    if (name == "cycle" || name == "changed") {
      auto m = std::make_shared<MethodObject>();
      m->depth = loop_value.depth() + 1;
      m->receiver = loop_value;
      m->name = std::string(name);
      return Value::FromObject(Kind::kCallable, std::move(m));
    }
    return Value::Undefined(UndefinedReason::kAttribute, name, "LoopContext");
  }

  Result<Value> LoopMethod(const Value& loop_value, std::string_view name, CallArgs& args) {
    LoopObject& loop = loop_value.object<LoopObject>();
    if (!args.kwargs.empty()) {
      return TypeError(StrCat("loop.", name, "() got an unexpected keyword argument"));
    }
    if (name == "cycle") {
      if (args.args.empty()) return TypeError("no items for cycling given");
      const auto n = static_cast<int64_t>(args.args.size());
      return args.args[static_cast<size_t>(((loop.index0 % n) + n) % n)];
    }
    // changed(*values): true when the values differ from the last call's.
    std::optional<Value> now = MakeList(std::move(args.args), ListFlavor::kTuple);
    if (!now) return Status::ResourceExhausted("a value nests too deep");
    if (loop.last_changed && Equals(*loop.last_changed, *now)) return Value::Bool(false);
    loop.last_changed = std::move(*now);
    return Value::Bool(true);
  }

  // --- expressions --------------------------------------------------------

  // A name: the innermost scope that binds it, then the render's variables,
  // then the globals.
  Value Lookup(int sym, const Frame& frame) {
    for (const Frame* f = &frame; f != nullptr; f = f->parent) {
      if (const Value* v = f->Find(sym)) return *v;
    }
    if (!vars_[static_cast<size_t>(sym)].is_undefined()) return vars_[static_cast<size_t>(sym)];
    const GlobalId g = prog_.symbol_globals[static_cast<size_t>(sym)];
    if (g != GlobalId::kNone) {
      Value& cached = globals_[static_cast<size_t>(sym)];
      if (cached.is_undefined()) cached = GlobalValue(g);
      return cached;
    }
    return Value::Undefined(UndefinedReason::kName, prog_.symbols[static_cast<size_t>(sym)]);
  }

  Result<Value> Eval(const Expr& e, Frame& frame) {
    DepthGuard guard(*this);
    FOLIO_RETURN_IF_ERROR(CheckDepth(e.pos));
    switch (e.kind) {
      case ExprKind::kLiteral:
        return e.literal;
      case ExprKind::kName:
        if (folding_) return NotConstant();
        return Lookup(e.symbol, frame);
      case ExprKind::kList:
      case ExprKind::kTuple: {
        std::vector<Value> items;
        items.reserve(e.children.size());
        for (const auto& c : e.children) {
          FOLIO_ASSIGN_OR_RETURN(Value v, Eval(*c, frame));
          items.push_back(std::move(v));
        }
        std::optional<Value> v = MakeList(
            std::move(items), e.kind == ExprKind::kTuple ? ListFlavor::kTuple : ListFlavor::kList);
        if (!v) return TooDeep(e.pos);
        return *v;
      }
      case ExprKind::kDict: {
        std::vector<std::pair<Value, Value>> items;
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          FOLIO_ASSIGN_OR_RETURN(Value k, Eval(*e.children[i], frame));
          FOLIO_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i + 1], frame));
          if (!Hashable(k)) {
            return Located(e.children[i]->pos,
                           TypeError(StrCat("unhashable type: '", TypeName(k), "'")));
          }
          bool replaced = false;
          for (auto& [old_k, old_v] : items) {
            if (Equals(old_k, k)) {
              old_v = std::move(v);
              replaced = true;
              break;
            }
          }
          if (!replaced) items.emplace_back(std::move(k), std::move(v));
        }
        std::optional<Value> v = MakeDict(std::move(items));
        if (!v) return TooDeep(e.pos);
        return *v;
      }
      case ExprKind::kGetAttr: {
        FOLIO_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], frame));
        return Attr(obj, e.name, e.pos);
      }
      case ExprKind::kGetItem: {
        FOLIO_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], frame));
        const Expr& index = *e.children[1];
        if (index.kind == ExprKind::kSlice) {
          Value bounds[3] = {Value::None(), Value::None(), Value::None()};
          for (size_t i = 0; i < 3; ++i) {
            if (index.children[i]) {
              FOLIO_ASSIGN_OR_RETURN(bounds[i], Eval(*index.children[i], frame));
            }
          }
          Result<Value> r = GetSlice(obj, bounds[0], bounds[1], bounds[2]);
          if (!r) {
            // Folding slices through jinja2's getitem, which turns a
            // TypeError into an undefined value.
            if (folding_ && !obj.is_undefined() && !r.error().message().starts_with("slice step")) {
              return Value::Undefined(UndefinedReason::kPlain);
            }
            return Located(e.pos, r.error());
          }
          return r;
        }
        FOLIO_ASSIGN_OR_RETURN(Value key, Eval(index, frame));
        if (obj.kind() == Kind::kLoop && key.is_string()) return Attr(obj, key.str(), e.pos);
        Result<Value> r = GetItem(obj, key);
        if (!r) return Located(e.pos, r.error());
        return r;
      }
      case ExprKind::kSlice:
        return Status::InvalidArgument(StrCat(Where(e.pos), ": a slice outside []"));
      case ExprKind::kCall:
        if (folding_) return NotConstant();
        return EvalCall(e, frame, nullptr);
      case ExprKind::kFilter:
        if (folding_ && NeedsContext(e)) return NotConstant();
        return EvalFilter(e, frame, nullptr);
      case ExprKind::kTest:
        return EvalTest(e, frame);
      case ExprKind::kNot: {
        FOLIO_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0], frame));
        return Value::Bool(!Truthy(v));
      }
      case ExprKind::kNeg:
      case ExprKind::kPos: {
        FOLIO_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0], frame));
        Result<Value> r = UnaryOperation(v, e.kind == ExprKind::kNeg);
        if (!r) return Located(e.pos, r.error());
        return r;
      }
      case ExprKind::kAnd:
      case ExprKind::kOr: {
        FOLIO_ASSIGN_OR_RETURN(Value left, Eval(*e.children[0], frame));
        if (Truthy(left) == (e.kind == ExprKind::kOr)) return left;
        return Eval(*e.children[1], frame);
      }
      case ExprKind::kBinary: {
        FOLIO_ASSIGN_OR_RETURN(Value a, Eval(*e.children[0], frame));
        FOLIO_ASSIGN_OR_RETURN(Value b, Eval(*e.children[1], frame));
        Result<Value> r = Arithmetic(e.op, a, b, limits_.max_output_bytes);
        if (!r) return Located(e.pos, r.error());
        return r;
      }
      case ExprKind::kConcat: {
        std::string out;
        for (const auto& c : e.children) {
          FOLIO_ASSIGN_OR_RETURN(Value v, Eval(*c, frame));
          AppendStr(out, v, limits_.max_output_bytes);
          if (out.size() > limits_.max_output_bytes) {
            return Exhausted(e.pos, "max_output_bytes", limits_.max_output_bytes);
          }
        }
        return Value::Str(std::move(out));
      }
      case ExprKind::kCompare: {
        FOLIO_ASSIGN_OR_RETURN(Value left, Eval(*e.children[0], frame));
        for (size_t i = 0; i < e.compare_ops.size(); ++i) {
          FOLIO_ASSIGN_OR_RETURN(Value right, Eval(*e.children[i + 1], frame));
          Result<bool> r = CompareOperation(e.compare_ops[i], left, right);
          if (!r) return Located(e.children[i + 1]->pos, r.error());
          if (!*r) return Value::Bool(false);
          left = std::move(right);
        }
        return Value::Bool(true);
      }
      case ExprKind::kCondExpr: {
        FOLIO_ASSIGN_OR_RETURN(Value c, Eval(*e.children[0], frame));
        if (Truthy(c)) return Eval(*e.children[1], frame);
        if (e.children[2]) return Eval(*e.children[2], frame);
        if (folding_) return NotConstant();
        return Value::Undefined(UndefinedReason::kMessage,
                                "the inline if-expression evaluated to false and no else "
                                "section was defined.");
      }
    }
    return Value();
  }

  // jinja2's Impossible: the expression cannot be folded.
  static Status NotConstant() { return Status::FailedPrecondition("not a constant"); }
  // Filters jinja2 passes its context, which it never folds.
  static bool NeedsContext(const Expr& e) {
    if (e.builtin < 0 || e.children[0] == nullptr) return true;
    switch (static_cast<FilterId>(e.builtin)) {
      case FilterId::kMap:
      case FilterId::kSelect:
      case FilterId::kReject:
      case FilterId::kSelectattr:
      case FilterId::kRejectattr:
        return true;
      default:
        return false;
    }
  }

  Status TooDeep(uint32_t pos) const {
    return Status::ResourceExhausted(
        StrCat(Where(pos), ": a value nests deeper than ", kMaxNesting, " levels"));
  }

  Result<Value> Attr(const Value& obj, std::string_view name, uint32_t pos) {
    if (obj.kind() == Kind::kLoop) return LoopAttr(obj, name);
    Result<Value> r = GetAttr(obj, name);
    if (!r) return Located(pos, r.error());
    return r;
  }

  Result<CallArgs> EvalArgs(const Expr& e, size_t first, Frame& frame) {
    CallArgs args;
    args.args.reserve(e.children.size() - first);
    for (size_t i = first; i < e.children.size(); ++i) {
      FOLIO_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i], frame));
      args.args.push_back(std::move(v));
    }
    for (const auto& [name, expr] : e.kwargs) {
      FOLIO_ASSIGN_OR_RETURN(Value v, Eval(*expr, frame));
      args.kwargs.emplace_back(name, std::move(v));
    }
    return args;
  }

  // A call; `caller` is the body of a {% call %} block, passed as the
  // keyword argument caller.
  Result<Value> EvalCall(const Expr& e, Frame& frame, const Value* caller) {
    const Expr& callee = *e.children[0];
    if (callee.kind == ExprKind::kGetAttr) {
      // x.method(...): no bound method object for str, dict and list.
      FOLIO_ASSIGN_OR_RETURN(Value receiver, Eval(*callee.children[0], frame));
      if (receiver.is_string() || receiver.is_dict() || receiver.is_list()) {
        const MethodLookup m = LookupMethod(receiver, callee.name);
        if (m == MethodLookup::kMethod || m == MethodLookup::kUnsupported) {
          FOLIO_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
          if (caller) args.kwargs.emplace_back("caller", *caller);
          Result<Value> r = CallMethod(receiver, callee.name, args, ctx_);
          if (!r) return Located(e.pos, r.error());
          return r;
        }
      }
      FOLIO_ASSIGN_OR_RETURN(Value fn, Attr(receiver, callee.name, callee.pos));
      FOLIO_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
      if (caller) args.kwargs.emplace_back("caller", *caller);
      return CallValue(fn, args, e.pos);
    }
    FOLIO_ASSIGN_OR_RETURN(Value fn, Eval(callee, frame));
    FOLIO_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
    if (caller) args.kwargs.emplace_back("caller", *caller);
    return CallValue(fn, args, e.pos);
  }

  Result<Value> CallValue(const Value& fn, CallArgs& args, uint32_t pos) {
    if (fn.is_undefined()) return Located(pos, UndefinedError(fn));
    if (fn.kind() != Kind::kCallable) {
      return Located(pos, TypeError(StrCat("'", TypeName(fn), "' object is not callable")));
    }
    const CallableObject& c = fn.object<CallableObject>();
    Result<Value> r = Value();
    switch (c.type) {
      case CallableObject::Type::kMacro:
        return CallMacro(fn.object<MacroObject>(), args, pos);
      case CallableObject::Type::kMethod: {
        const auto& m = fn.object<MethodObject>();
        r = m.receiver.kind() == Kind::kLoop ? LoopMethod(m.receiver, m.name, args)
                                             : CallMethod(m.receiver, m.name, args, ctx_);
        break;
      }
      case CallableObject::Type::kGlobal:
        r = CallGlobal(fn.object<GlobalObject>().id, args, ctx_);
        break;
    }
    if (!r) return Located(pos, r.error());
    return r;
  }

  Result<Value> CallMacro(const MacroObject& m, CallArgs& args, uint32_t pos) {
    const Stmt& def = *m.def;
    if (call_depth_ >= limits_.max_call_depth) {
      return Exhausted(pos, "max_call_depth", limits_.max_call_depth);
    }
    FOLIO_RETURN_IF_ERROR(CountIteration(pos));
    Frame& f = NewFrame(m.closure);
    std::vector<bool> bound(def.params.size(), false);
    for (size_t i = 0; i < args.args.size() && i < def.params.size(); ++i) {
      f.Set(def.params[i].symbol, args.args[i]);
      bound[i] = true;
    }
    std::vector<Value> extra;
    if (args.args.size() > def.params.size()) {
      if (!def.uses_varargs) {
        return Located(pos, TypeError(StrCat("macro '", m.name, "' takes not more than ",
                                             def.params.size(), " argument(s)")));
      }
      extra.assign(args.args.begin() + static_cast<ptrdiff_t>(def.params.size()), args.args.end());
    }
    std::vector<std::pair<Value, Value>> extra_kwargs;
    Value caller = Value::Undefined(UndefinedReason::kMessage, "No caller defined");
    for (auto& [name, v] : args.kwargs) {
      size_t i = 0;
      while (i < def.params.size() && def.params[i].name != name) ++i;
      if (i < def.params.size()) {
        if (bound[i]) {
          return Located(pos, TypeError(StrCat("macro '", m.name,
                                               "' got multiple values for argument '", name, "'")));
        }
        f.Set(def.params[i].symbol, v);
        bound[i] = true;
      } else if (name == "caller" && def.uses_caller) {
        caller = v;
      } else if (def.uses_kwargs) {
        extra_kwargs.emplace_back(Value::Borrowed(name), v);
      } else {
        return Located(
            pos, TypeError(StrCat("macro '", m.name, "' takes no keyword argument '", name, "'")));
      }
    }
    ++call_depth_;
    Result<std::string> text = [&]() -> Result<std::string> {
      for (size_t i = 0; i < def.params.size(); ++i) {
        if (bound[i]) continue;
        const Param& p = def.params[i];
        if (p.default_value) {
          FOLIO_ASSIGN_OR_RETURN(Value v, Eval(*p.default_value, f));
          f.Set(p.symbol, std::move(v));
        } else {
          f.Set(p.symbol, Value::Undefined(UndefinedReason::kParameter, p.name));
        }
      }
      if (def.uses_varargs && sym_varargs_ >= 0) {
        std::optional<Value> v = MakeList(std::move(extra), ListFlavor::kTuple);
        if (!v) return TooDeep(pos);
        f.Set(sym_varargs_, std::move(*v));
      }
      if (def.uses_kwargs && sym_kwargs_ >= 0) {
        std::optional<Value> v = MakeDict(std::move(extra_kwargs));
        if (!v) return TooDeep(pos);
        f.Set(sym_kwargs_, std::move(*v));
      }
      if (def.uses_caller && sym_caller_ >= 0) f.Set(sym_caller_, caller);
      Flow flow = Flow::kNormal;
      return Capture(def.body, f, &flow);
    }();
    --call_depth_;
    ReleaseFrame(f);
    if (!text) return text.error();
    return Value::Str(std::move(*text));
  }

  // A filter (or a chain of them); `block` is the text of a filter or set
  // block, the input where the chain has no expression of its own.
  Result<Value> EvalFilter(const Expr& e, Frame& frame, const Value* block) {
    Value input;
    if (e.children[0]) {
      FOLIO_ASSIGN_OR_RETURN(input, e.children[0]->kind == ExprKind::kFilter
                                        ? EvalFilter(*e.children[0], frame, block)
                                        : Eval(*e.children[0], frame));
    } else {
      input = *block;
    }
    if (e.builtin < 0) {
      return e.known_to_jinja ? Status::Unimplemented(StrCat(Where(e.pos), ": the jinja2 filter '",
                                                             e.name, "' is not supported"))
                              : Status::InvalidArgument(StrCat(Where(e.pos), ": No filter named '",
                                                               e.name, "' found."));
    }
    FOLIO_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
    Result<Value> r = ApplyFilter(static_cast<FilterId>(e.builtin), input, args, ctx_);
    if (!r) return Located(e.pos, r.error());
    return r;
  }

  Result<Value> EvalTest(const Expr& e, Frame& frame) {
    FOLIO_ASSIGN_OR_RETURN(Value input, Eval(*e.children[0], frame));
    if (e.builtin < 0) {
      return e.known_to_jinja ? Status::Unimplemented(StrCat(Where(e.pos), ": the jinja2 test '",
                                                             e.name, "' is not supported"))
                              : Status::InvalidArgument(
                                    StrCat(Where(e.pos), ": No test named '", e.name, "' found."));
    }
    FOLIO_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
    Result<bool> r = ApplyTest(static_cast<TestId>(e.builtin), input, args, ctx_);
    if (!r) return Located(e.pos, r.error());
    return Value::Bool(*r);
  }

  const Program& prog_;
  const TemplateLimits& limits_;
  std::vector<Value> vars_;     // by symbol
  std::vector<Value> globals_;  // by symbol, made on first use
  BuiltinContext ctx_;
  std::vector<std::shared_ptr<NamespaceObject>> namespaces_;
  std::deque<Frame> frames_;  // stable addresses
  std::vector<Frame*> free_frames_;
  std::string* out_ = nullptr;
  uint64_t iterations_ = 0;
  uint64_t call_depth_ = 0;
  int depth_ = 0;
  bool folding_ = false;  // evaluating a constant expression (Fold)
  int sym_loop_ = -1, sym_caller_ = -1, sym_varargs_ = -1, sym_kwargs_ = -1;
};

}  // namespace

Result<Value> FoldConstant(const Program& program, const TemplateLimits& limits, const Expr& e) {
  Interpreter interp(program, limits, RenderOptions{}, std::vector<Value>(program.symbols.size()));
  return interp.Fold(e);
}

Result<std::string> RenderProgram(const Program& program, const TemplateLimits& limits,
                                  const RenderOptions& options, std::vector<Value> variables) {
  Interpreter interp(program, limits, options, std::move(variables));
  return interp.Run();
}

}  // namespace folio::chat::internal
