#include "chat/operators.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "chat/access.h"
#include "chat/builtins.h"
#include "chat/builtins_internal.h"
#include "chat/text.h"
#include "folio/core/str_cat.h"

namespace folio::chat::internal {
namespace {

std::string_view OpText(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kFloorDiv:
      return "//";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kPow:
      return "** or pow()";
  }
  return "?";
}

Status Unsupported(BinaryOp op, const Value& a, const Value& b) {
  return TypeError(StrCat("unsupported operand type(s) for ", OpText(op), ": '", TypeName(a),
                          "' and '", TypeName(b), "'"));
}

Status Overflow() {
  return Status::Unimplemented("integer overflow: folio's integers are 64-bit, Python's are not");
}

Status TooLong(uint64_t size, uint64_t max_bytes) {
  return Status::ResourceExhausted(
      StrCat("a value of ", size, " bytes or items exceeds max_output_bytes (", max_bytes, ")"));
}

// Python's float floor division and modulo (float_divmod).
void FloatDivmod(double vx, double wx, double* floordiv, double* mod_out) {
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0.0) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, wx);
  }
  double fd;
  if (div != 0.0) {
    fd = std::floor(div);
    if (div - fd > 0.5) fd += 1.0;
  } else {
    fd = std::copysign(0.0, vx / wx);
  }
  *floordiv = fd;
  *mod_out = mod;
}

Result<Value> IntPow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result)) return Overflow();
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return Overflow();
  }
  return Value::Int(result);
}

Result<Value> Numeric(BinaryOp op, const Value& a, const Value& b) {
  const bool ints = a.is_integral() && b.is_integral();
  if (ints) {
    const int64_t x = a.as_int(), y = b.as_int();
    int64_t r = 0;
    switch (op) {
      case BinaryOp::kAdd:
        if (__builtin_add_overflow(x, y, &r)) return Overflow();
        return Value::Int(r);
      case BinaryOp::kSub:
        if (__builtin_sub_overflow(x, y, &r)) return Overflow();
        return Value::Int(r);
      case BinaryOp::kMul:
        if (__builtin_mul_overflow(x, y, &r)) return Overflow();
        return Value::Int(r);
      case BinaryOp::kDiv:
        if (y == 0) return Status::InvalidArgument("division by zero");
        return Value::Float(static_cast<double>(x) / static_cast<double>(y));
      case BinaryOp::kFloorDiv:
      case BinaryOp::kMod: {
        if (y == 0) {
          return Status::InvalidArgument(op == BinaryOp::kMod ? "integer modulo by zero"
                                                              : "integer division by zero");
        }
        if (x == std::numeric_limits<int64_t>::min() && y == -1) return Overflow();
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          m += y;
          q -= 1;
        }
        return Value::Int(op == BinaryOp::kMod ? m : q);
      }
      case BinaryOp::kPow:
        if (y < 0) {
          if (x == 0) {
            return Status::InvalidArgument("0.0 cannot be raised to a negative power");
          }
          return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
        }
        return IntPow(x, y);
    }
  }
  const double x = a.as_float(), y = b.as_float();
  switch (op) {
    case BinaryOp::kAdd:
      return Value::Float(x + y);
    case BinaryOp::kSub:
      return Value::Float(x - y);
    case BinaryOp::kMul:
      return Value::Float(x * y);
    case BinaryOp::kDiv:
      if (y == 0.0) return Status::InvalidArgument("float division by zero");
      return Value::Float(x / y);
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod: {
      if (y == 0.0) {
        return Status::InvalidArgument(op == BinaryOp::kMod ? "float modulo"
                                                            : "float floor division by zero");
      }
      double fd = 0, mod = 0;
      FloatDivmod(x, y, &fd, &mod);
      return Value::Float(op == BinaryOp::kMod ? mod : fd);
    }
    case BinaryOp::kPow:
      if (x == 0.0 && y < 0) {
        return Status::InvalidArgument("0.0 cannot be raised to a negative power");
      }
      if (x < 0 && y != std::floor(y) && std::isfinite(y)) {
        return Status::Unimplemented("a negative number raised to a fractional power is complex");
      }
      if (const double r = std::pow(x, y); std::isinf(r) && std::isfinite(x) && std::isfinite(y)) {
        return Status::InvalidArgument("(34, 'Numerical result out of range')");  // OverflowError
      } else {
        return Value::Float(r);
      }
  }
  return Status::InvalidArgument("bad operator");
}

Result<Value> Repeat(const Value& seq, int64_t n, uint64_t max_bytes) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const uint64_t size = seq.str().size() * static_cast<uint64_t>(n);
    if (seq.str().size() != 0 &&
        (size > max_bytes || size / seq.str().size() != static_cast<uint64_t>(n))) {
      return TooLong(size, max_bytes);
    }
    std::string out;
    out.reserve(size);
    for (int64_t i = 0; i < n && !seq.str().empty(); ++i) out += seq.str();
    return Value::Str(std::move(out));
  }
  const auto& items = seq.list().items;
  const uint64_t count = items.size() * static_cast<uint64_t>(n);
  if (!items.empty() && (count > max_bytes || count / items.size() != static_cast<uint64_t>(n))) {
    return TooLong(count, max_bytes);
  }
  std::vector<Value> out;
  out.reserve(count);
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return *MakeList(std::move(out), seq.flavor());
}

bool IsRepeatable(const Value& v) {
  return v.is_string() ||
         (v.is_list() && (v.flavor() == ListFlavor::kList || v.flavor() == ListFlavor::kTuple));
}

}  // namespace

Result<Value> Arithmetic(BinaryOp op, const Value& a, const Value& b, uint64_t max_bytes) {
  // str % x is str's own: an undefined x formats as "".
  if (op == BinaryOp::kMod && a.is_string()) return PercentFormat(a.str(), b, max_bytes);
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (a.is_number() && b.is_number()) return Numeric(op, a, b);
  switch (op) {
    case BinaryOp::kAdd:
      if (a.is_string()) {
        if (a.markup()) {
          // Markup + x escapes x (unless it is Markup too); still Markup.
          if (!b.is_string()) {
            return TypeError(
                StrCat("unsupported operand type(s) for +: 'Markup' and '", TypeName(b), "'"));
          }
          std::string rhs = b.markup() ? std::string(b.str()) : Escape(b.str());
          const uint64_t size = a.str().size() + rhs.size();
          if (size > max_bytes) return TooLong(size, max_bytes);
          return Value::Markup(Value::Str(std::string(a.str()) + rhs));
        }
        if (!b.is_string()) {
          return TypeError(StrCat("can only concatenate str (not \"", TypeName(b), "\") to str"));
        }
        const uint64_t size = a.str().size() + b.str().size();
        if (size > max_bytes) return TooLong(size, max_bytes);
        std::string out;
        out.reserve(size);
        out += a.str();
        out += b.str();
        return Value::Str(std::move(out));
      }
      if (a.is_list() && (a.flavor() == ListFlavor::kList || a.flavor() == ListFlavor::kTuple)) {
        if (!b.is_list() || b.flavor() != a.flavor()) {
          return TypeError(StrCat("can only concatenate ", TypeName(a), " (not \"", TypeName(b),
                                  "\") to ", TypeName(a)));
        }
        const uint64_t count = a.list().items.size() + b.list().items.size();
        if (count > max_bytes) return TooLong(count, max_bytes);
        std::vector<Value> items = a.list().items;
        items.insert(items.end(), b.list().items.begin(), b.list().items.end());
        std::optional<Value> v = MakeList(std::move(items), a.flavor());
        if (!v) return Status::ResourceExhausted("list nests too deep");
        return *v;
      }
      break;
    case BinaryOp::kMul:
      if (IsRepeatable(a) && b.is_integral()) return Repeat(a, b.as_int(), max_bytes);
      if (a.is_integral() && IsRepeatable(b)) return Repeat(b, a.as_int(), max_bytes);
      if (IsRepeatable(a) || IsRepeatable(b)) {
        const Value& other = IsRepeatable(a) ? b : a;
        return TypeError(
            StrCat("can't multiply sequence by non-int of type '", TypeName(other), "'"));
      }
      break;
    case BinaryOp::kMod:
    case BinaryOp::kSub:
    case BinaryOp::kDiv:
    case BinaryOp::kFloorDiv:
    case BinaryOp::kPow:
      break;
  }
  return Unsupported(op, a, b);
}

Result<bool> CompareOperation(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::kEq:
      return Equals(a, b);
    case CompareOp::kNe:
      return !Equals(a, b);
    case CompareOp::kIn:
      return Contains(b, a);
    case CompareOp::kNotIn: {
      FOLIO_ASSIGN_OR_RETURN(bool in, Contains(b, a));
      return !in;
    }
    case CompareOp::kLt:
    case CompareOp::kLe:
    case CompareOp::kGt:
    case CompareOp::kGe:
      break;
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (a.is_number() && b.is_number() && (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat)) {
    const double x = a.as_float(), y = b.as_float();  // NaN: every comparison false
    switch (op) {
      case CompareOp::kLt:
        return x < y;
      case CompareOp::kLe:
        return x <= y;
      case CompareOp::kGt:
        return x > y;
      default:
        return x >= y;
    }
  }
  std::optional<int> c = Compare(a, b);
  if (!c) {
    const char* sym = op == CompareOp::kLt   ? "<"
                      : op == CompareOp::kLe ? "<="
                      : op == CompareOp::kGt ? ">"
                                             : ">=";
    return TypeError(StrCat("'", sym, "' not supported between instances of '", TypeName(a),
                            "' and '", TypeName(b), "'"));
  }
  switch (op) {
    case CompareOp::kLt:
      return *c < 0;
    case CompareOp::kLe:
      return *c <= 0;
    case CompareOp::kGt:
      return *c > 0;
    default:
      return *c >= 0;
  }
}

Result<Value> UnaryOperation(const Value& v, bool negate) {
  if (v.is_undefined()) return UndefinedError(v);
  if (v.kind() == Kind::kFloat) return Value::Float(negate ? -v.as_float() : v.as_float());
  if (v.is_integral()) {
    if (!negate) return Value::Int(v.as_int());
    if (v.as_int() == std::numeric_limits<int64_t>::min()) return Overflow();
    return Value::Int(-v.as_int());
  }
  return TypeError(
      StrCat("bad operand type for unary ", negate ? "-" : "+", ": '", TypeName(v), "'"));
}

Result<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kUndefined:
      return false;
    case Kind::kString:
      if (!item.is_string()) {
        return TypeError(
            StrCat("'in <string>' requires string as left operand, not ", TypeName(item)));
      }
      return container.str().find(item.str()) != std::string_view::npos;
    case Kind::kList: {
      const ListObject& l = container.list();
      const size_t from = l.flavor == ListFlavor::kIterator ? l.consumed : 0;
      for (size_t i = from; i < l.items.size(); ++i) {
        if (Equals(l.items[i], item)) {
          if (l.flavor == ListFlavor::kIterator) l.consumed = i + 1;
          return true;
        }
      }
      if (l.flavor == ListFlavor::kIterator) {
        l.consumed = l.items.size();
        if (l.error) return *l.error;
      }
      return false;
    }
    case Kind::kDict:
      if (!Hashable(item)) return TypeError(StrCat("unhashable type: '", TypeName(item), "'"));
      return container.dict().Find(item) != nullptr;
    case Kind::kNone:
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
    case Kind::kNamespace:
    case Kind::kCallable:
    case Kind::kLoop:
      break;
  }
  return TypeError(StrCat("argument of type '", TypeName(container), "' is not iterable"));
}

namespace {

// One conversion of printf-style formatting: %[(key)][flags][width][.prec]type.
struct Spec {
  std::string flags;
  int width = -1;
  int precision = -1;
  char type = 's';
};

std::string Pad(std::string body, const Spec& spec, bool numeric) {
  if (spec.width < 0 || static_cast<int>(CountCodePoints(body)) >= spec.width) return body;
  const size_t pad = static_cast<size_t>(spec.width) - CountCodePoints(body);
  if (spec.flags.find('-') != std::string::npos) return body + std::string(pad, ' ');
  if (numeric && spec.flags.find('0') != std::string::npos) {
    const size_t sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ');
    return body.substr(0, sign) + std::string(pad, '0') + body.substr(sign);
  }
  return std::string(pad, ' ') + body;
}

Result<std::string> FormatOne(const Spec& spec, const Value& v) {
  switch (spec.type) {
    case 's':
    case 'r':
    case 'a': {
      std::string s;
      if (spec.type == 's') {
        AppendStr(s, v);
      } else {
        AppendRepr(s, v);
      }
      if (spec.precision >= 0)
        s = s.substr(0, CodePointOffset(s, static_cast<size_t>(spec.precision)));
      return Pad(std::move(s), spec, false);
    }
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o':
    case 'c': {
      if (!v.is_number()) {
        if (v.is_undefined()) return UndefinedError(v);
        return TypeError(
            StrCat("%", spec.type, " format: a real number is required, not ", TypeName(v)));
      }
      if (spec.type == 'c') {
        std::string s;
        AppendUtf8(s, static_cast<char32_t>(v.as_int()));
        return Pad(std::move(s), spec, false);
      }
      double d = v.as_float();
      if (v.kind() == Kind::kFloat && (!std::isfinite(d) || std::fabs(d) >= 9.2e18)) {
        return Status::Unimplemented("%d of a float outside 64-bit integers");
      }
      const int64_t i = v.kind() == Kind::kFloat ? static_cast<int64_t>(d) : v.as_int();
      std::string fmt = "%";
      for (char f : spec.flags) {
        if (f == '+' || f == ' ' || f == '#') fmt += f;
      }
      if (spec.precision >= 0) fmt += StrCat(".", spec.precision);
      fmt += "ll";
      fmt += spec.type == 'i' || spec.type == 'u' ? 'd' : spec.type;
      char buf[96];
      std::snprintf(buf, sizeof buf, fmt.c_str(), static_cast<long long>(i));
      return Pad(buf, spec, true);
    }
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G': {
      if (!v.is_number()) {
        if (v.is_undefined()) return UndefinedError(v);
        return TypeError(StrCat("must be real number, not ", TypeName(v)));
      }
      std::string fmt = "%";
      for (char f : spec.flags) {
        if (f == '+' || f == ' ' || f == '#') fmt += f;
      }
      fmt += StrCat(".", spec.precision >= 0 ? std::min(spec.precision, 100) : 6);
      fmt += spec.type;
      char buf[512];
      std::snprintf(buf, sizeof buf, fmt.c_str(), v.as_float());
      return Pad(buf, spec, true);
    }
    default:
      return Status::InvalidArgument(
          StrCat("unsupported format character '", std::string(1, spec.type), "'"));
  }
}

}  // namespace

Result<Value> PercentFormat(std::string_view format, const Value& args, uint64_t max_bytes) {
  std::vector<Value> positional;
  const bool is_tuple = args.is_list() && args.flavor() == ListFlavor::kTuple;
  // Python takes any argument with __getitem__ (dict, list, range, an
  // undefined value) as a mapping, and then does not insist that every
  // argument is used.
  const bool mapping_like =
      !is_tuple && (args.is_dict() || args.is_undefined() ||
                    (args.is_list() &&
                     (args.flavor() == ListFlavor::kList || args.flavor() == ListFlavor::kRange)));
  if (is_tuple) {
    positional = args.list().items;
  } else {
    positional.push_back(args);
  }
  size_t next_arg = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) return Status::InvalidArgument("incomplete format");
    if (format[i] == '%') {
      out += '%';
      continue;
    }
    const Value* arg = nullptr;
    Value keyed;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string_view::npos) return Status::InvalidArgument("incomplete format key");
      if (args.is_undefined()) return UndefinedError(args);
      if (!args.is_dict()) return TypeError("format requires a mapping");
      const std::string_view key = format.substr(i + 1, close - i - 1);
      const Value* v = args.dict().FindString(key);
      if (v == nullptr) return Status::InvalidArgument(StrCat("KeyError: '", key, "'"));
      keyed = *v;
      arg = &keyed;
      used_mapping = true;
      i = close + 1;
    }
    Spec spec;
    while (i < format.size() && std::string_view("-+ #0").find(format[i]) != std::string::npos) {
      spec.flags += format[i++];
    }
    auto number = [&](int* dst) {
      if (i < format.size() && format[i] == '*') {
        return false;
      }
      int n = -1;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        n = (n < 0 ? 0 : n) * 10 + (format[i++] - '0');
        if (n > 100000) n = 100000;
      }
      *dst = n;
      return true;
    };
    if (!number(&spec.width)) return Status::Unimplemented("'*' widths in % formatting");
    if (i < format.size() && format[i] == '.') {
      ++i;
      if (!number(&spec.precision)) return Status::Unimplemented("'*' widths in % formatting");
      if (spec.precision < 0) spec.precision = 0;
    }
    while (i < format.size() && (format[i] == 'l' || format[i] == 'h' || format[i] == 'L')) ++i;
    if (i >= format.size()) return Status::InvalidArgument("incomplete format");
    spec.type = format[i];
    if (arg == nullptr) {
      if (next_arg >= positional.size()) {
        return TypeError("not enough arguments for format string");
      }
      arg = &positional[next_arg++];
    }
    FOLIO_ASSIGN_OR_RETURN(std::string piece, FormatOne(spec, *arg));
    out += piece;
    if (out.size() > max_bytes) return TooLong(out.size(), max_bytes);
  }
  if (!used_mapping && next_arg < positional.size() && !mapping_like) {
    return TypeError("not all arguments converted during string formatting");
  }
  return Value::Str(std::move(out));
}

}  // namespace folio::chat::internal
