#include "chat/lexer.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "chat/text.h"
#include "folio/core/str_cat.h"

namespace folio::chat::internal {

std::string_view TokName(Tok t) {
  switch (t) {
    case Tok::kData:
      return "template data";
    case Tok::kVariableBegin:
      return "begin of print statement";
    case Tok::kVariableEnd:
      return "end of print statement";
    case Tok::kBlockBegin:
      return "begin of statement block";
    case Tok::kBlockEnd:
      return "end of statement block";
    case Tok::kName:
      return "name";
    case Tok::kString:
      return "string";
    case Tok::kInteger:
      return "integer";
    case Tok::kFloat:
      return "float";
    case Tok::kAdd:
      return "+";
    case Tok::kSub:
      return "-";
    case Tok::kDiv:
      return "/";
    case Tok::kFloorDiv:
      return "//";
    case Tok::kMul:
      return "*";
    case Tok::kMod:
      return "%";
    case Tok::kPow:
      return "**";
    case Tok::kTilde:
      return "~";
    case Tok::kLBracket:
      return "[";
    case Tok::kRBracket:
      return "]";
    case Tok::kLParen:
      return "(";
    case Tok::kRParen:
      return ")";
    case Tok::kLBrace:
      return "{";
    case Tok::kRBrace:
      return "}";
    case Tok::kEq:
      return "==";
    case Tok::kNe:
      return "!=";
    case Tok::kGt:
      return ">";
    case Tok::kGe:
      return ">=";
    case Tok::kLt:
      return "<";
    case Tok::kLe:
      return "<=";
    case Tok::kAssign:
      return "=";
    case Tok::kDot:
      return ".";
    case Tok::kColon:
      return ":";
    case Tok::kPipe:
      return "|";
    case Tok::kComma:
      return ",";
    case Tok::kSemicolon:
      return ";";
    case Tok::kEof:
      return "end of template";
  }
  return "token";
}

std::string NormalizeSource(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string LineColumn(std::string_view source, uint32_t pos) {
  size_t line = 1, line_start = 0;
  const size_t end = std::min<size_t>(pos, source.size());
  for (size_t i = 0; i < end; ++i) {
    if (source[i] == '\n') ++line, line_start = i + 1;
  }
  const size_t column = CountCodePoints(source.substr(line_start, end - line_start)) + 1;
  return StrCat(line, ":", column);
}

namespace {

Token MakeToken(Tok type, size_t pos, std::string_view text = {}) {
  Token t;
  t.type = type;
  t.pos = static_cast<uint32_t>(pos);
  t.text = text;
  return t;
}

bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  Lexer(std::string_view src, std::deque<std::string>& strings) : src_(src), strings_(strings) {}

  Result<std::vector<Token>> Run() {
    while (pos_ < src_.size()) FOLIO_RETURN_IF_ERROR(LexRoot());
    tokens_.push_back(MakeToken(Tok::kEof, src_.size()));
    return std::move(tokens_);
  }

 private:
  Status Error(size_t at, std::string_view message) const {
    return Status::InvalidArgument(
        StrCat(LineColumn(src_, static_cast<uint32_t>(at)), ": ", message));
  }

  // Python whitespace (\s) at src_[at]; its length in bytes or 0.
  size_t SpaceAt(size_t at) const {
    if (at >= src_.size()) return 0;
    size_t next = at;
    return IsPySpace(DecodeUtf8(src_, &next)) ? next - at : 0;
  }
  size_t SkipSpaces(size_t at) const {
    while (size_t n = SpaceAt(at)) at += n;
    return at;
  }
  bool StartsWith(size_t at, std::string_view s) const { return src_.substr(at, s.size()) == s; }

  // The data before a tag, cut as jinja2's OptionalLStrip does. `sign` is
  // the tag's '-', '+' or 0; lstrip applies to block and comment tags.
  void EmitData(size_t start, size_t end, char sign, bool lstrip_applies) {
    std::string_view text = src_.substr(start, end - start);
    if (sign == '-') {
      text = StripSpace(text, false, true);
    } else if (sign != '+' && lstrip_applies) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting_) {
        std::string_view tail = text.substr(l_pos);
        if (!tail.empty() && LeadingSpaceBytes(tail) == tail.size()) text = text.substr(0, l_pos);
      }
    }
    if (!text.empty()) tokens_.push_back(MakeToken(Tok::kData, start, text));
  }

  // After a block or comment end: '+' keeps what follows, '-' eats all
  // whitespace, otherwise one newline goes (trim_blocks).
  size_t AfterTagEnd(size_t at, char sign) {
    if (sign == '-') {
      const size_t end = SkipSpaces(at);
      line_starting_ = end > at && src_[end - 1] == '\n';
      return end;
    }
    if (sign != '+' && at < src_.size() && src_[at] == '\n') {
      line_starting_ = true;
      return at + 1;
    }
    line_starting_ = false;
    return at;
  }

  Status LexRoot() {
    // The next tag start: {{, {% or {#.
    size_t tag = pos_;
    while (true) {
      tag = src_.find('{', tag);
      if (tag == std::string_view::npos || tag + 1 >= src_.size()) {
        tag = std::string_view::npos;
        break;
      }
      const char c = src_[tag + 1];
      if (c == '{' || c == '%' || c == '#') break;
      ++tag;
    }
    if (tag == std::string_view::npos) {
      tokens_.push_back(MakeToken(Tok::kData, pos_, src_.substr(pos_, src_.size() - pos_)));
      pos_ = src_.size();
      return Status::Ok();
    }
    const char kind = src_[tag + 1];
    char sign = 0;
    if (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')) {
      sign = src_[tag + 2];
    }
    if (kind == '%') {
      size_t raw_end = 0;
      if (MatchRawBegin(tag, &raw_end)) {
        EmitData(pos_, tag, sign, true);
        line_starting_ = raw_end > 0 && src_[raw_end - 1] == '\n';
        pos_ = raw_end;
        return LexRaw();
      }
    }
    EmitData(pos_, tag, sign, kind != '{');
    line_starting_ = false;
    pos_ = tag + 2 + (sign ? 1 : 0);
    if (kind == '#') return LexComment(tag);
    tokens_.push_back(MakeToken(kind == '{' ? Tok::kVariableBegin : Tok::kBlockBegin, tag));
    return LexTag(kind == '{');
  }

  // {%(-|+|)\s*raw\s*(-%}\s*|%}) at `at`; *end is just past it.
  bool MatchRawBegin(size_t at, size_t* end) const {
    size_t p = at + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = SkipSpaces(p);
    if (!StartsWith(p, "raw")) return false;
    p = SkipSpaces(p + 3);
    if (StartsWith(p, "-%}")) {
      *end = SkipSpaces(p + 3);
      return true;
    }
    if (StartsWith(p, "%}")) {
      *end = p + 2;
      return true;
    }
    return false;
  }

  Status LexRaw() {
    const size_t start = pos_;
    if (start == src_.size()) return Status::Ok();  // as an unclosed comment at the end
    for (size_t p = src_.find("{%", pos_); p != std::string_view::npos;
         p = src_.find("{%", p + 1)) {
      size_t q = p + 2;
      char sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      q = SkipSpaces(q);
      if (!StartsWith(q, "endraw")) continue;
      q = SkipSpaces(q + 6);
      char end_sign = 0;
      if (StartsWith(q, "+%}") || StartsWith(q, "-%}")) {
        end_sign = src_[q];
        q += 3;
      } else if (StartsWith(q, "%}")) {
        q += 2;
      } else {
        continue;
      }
      EmitData(start, p, sign, true);
      pos_ = AfterTagEnd(q, end_sign);
      return Status::Ok();
    }
    return Error(start, "missing end of raw directive");
  }

  Status LexComment(size_t begin) {
    // jinja2 reports a missing end only when a character follows the
    // opening tag: "{#" at the very end is an empty comment.
    if (pos_ == src_.size()) return Status::Ok();
    for (size_t p = pos_; p < src_.size(); ++p) {
      if (StartsWith(p, "+#}") || StartsWith(p, "-#}")) {
        pos_ = AfterTagEnd(p + 3, src_[p]);
        return Status::Ok();
      }
      if (StartsWith(p, "#}")) {
        pos_ = AfterTagEnd(p + 2, 0);
        return Status::Ok();
      }
    }
    return Error(begin, "missing end of comment tag");
  }

  // Tokens of a {{ }} or {% %} tag up to and including its end.
  Status LexTag(bool variable) {
    std::vector<char> balance;  // closing brackets expected
    while (pos_ < src_.size()) {
      if (balance.empty()) {
        if (variable) {
          if (StartsWith(pos_, "-}}")) {
            tokens_.push_back(MakeToken(Tok::kVariableEnd, pos_));
            const size_t end = SkipSpaces(pos_ + 3);
            line_starting_ = end > pos_ + 3 && src_[end - 1] == '\n';
            pos_ = end;
            return Status::Ok();
          }
          if (StartsWith(pos_, "}}")) {
            tokens_.push_back(MakeToken(Tok::kVariableEnd, pos_));
            pos_ += 2;
            line_starting_ = false;
            return Status::Ok();
          }
        } else {
          if (StartsWith(pos_, "+%}") || StartsWith(pos_, "-%}")) {
            tokens_.push_back(MakeToken(Tok::kBlockEnd, pos_));
            const char sign = src_[pos_];
            pos_ = AfterTagEnd(pos_ + 3, sign);
            return Status::Ok();
          }
          if (StartsWith(pos_, "%}")) {
            tokens_.push_back(MakeToken(Tok::kBlockEnd, pos_));
            pos_ = AfterTagEnd(pos_ + 2, 0);
            return Status::Ok();
          }
        }
      }
      if (const size_t n = SpaceAt(pos_)) {
        pos_ = SkipSpaces(pos_ + n);
        continue;
      }
      const char c = src_[pos_];
      if (IsDigit(c)) {
        FOLIO_RETURN_IF_ERROR(LexNumber());
        continue;
      }
      if (IsNameStart(c)) {
        size_t end = pos_ + 1;
        while (end < src_.size() && IsNameChar(src_[end])) ++end;
        tokens_.push_back(MakeToken(Tok::kName, pos_, src_.substr(pos_, end - pos_)));
        pos_ = end;
        continue;
      }
      if (c == '\'' || c == '"') {
        FOLIO_RETURN_IF_ERROR(LexString());
        continue;
      }
      FOLIO_RETURN_IF_ERROR(LexOperator(balance));
    }
    return Status::Ok();  // the parser reports the missing end
  }

  Status LexOperator(std::vector<char>& balance) {
    struct Op {
      std::string_view text;
      Tok tok;
    };
    static constexpr Op kOps[] = {
        {"//", Tok::kFloorDiv}, {"**", Tok::kPow},     {"==", Tok::kEq},    {"!=", Tok::kNe},
        {">=", Tok::kGe},       {"<=", Tok::kLe},      {"+", Tok::kAdd},    {"-", Tok::kSub},
        {"/", Tok::kDiv},       {"*", Tok::kMul},      {"%", Tok::kMod},    {"~", Tok::kTilde},
        {"[", Tok::kLBracket},  {"]", Tok::kRBracket}, {"(", Tok::kLParen}, {")", Tok::kRParen},
        {"{", Tok::kLBrace},    {"}", Tok::kRBrace},   {">", Tok::kGt},     {"<", Tok::kLt},
        {"=", Tok::kAssign},    {".", Tok::kDot},      {":", Tok::kColon},  {"|", Tok::kPipe},
        {",", Tok::kComma},     {";", Tok::kSemicolon}};
    for (const Op& op : kOps) {
      if (!StartsWith(pos_, op.text)) continue;
      const char c = op.text[0];
      if (op.text.size() == 1 && (c == '(' || c == '[' || c == '{')) {
        balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      } else if (op.text.size() == 1 && (c == ')' || c == ']' || c == '}')) {
        if (balance.empty()) return Error(pos_, StrCat("unexpected '", c, "'"));
        if (balance.back() != c) {
          return Error(pos_, StrCat("unexpected '", c, "', expected '", balance.back(), "'"));
        }
        balance.pop_back();
      }
      tokens_.push_back(MakeToken(op.tok, pos_, op.text));
      pos_ += op.text.size();
      return Status::Ok();
    }
    size_t next = pos_;
    const char32_t cp = DecodeUtf8(src_, &next);
    std::string ch;
    AppendUtf8(ch, cp);
    std::string quoted;
    AppendPyRepr(quoted, ch);
    return Error(pos_, StrCat("unexpected char ", quoted));
  }

  // (\d+_)*\d+ at p; the end, or p if none.
  size_t Digits(size_t p) const {
    size_t q = p;
    while (q < src_.size() && IsDigit(src_[q])) {
      ++q;
      if (q + 1 < src_.size() && src_[q] == '_' && IsDigit(src_[q + 1])) ++q;
    }
    return q;
  }

  Status LexNumber() {
    const size_t start = pos_;
    // Floats first, as jinja2 tries them first (and never right after a '.').
    if (start == 0 || src_[start - 1] != '.') {
      const size_t int_end = Digits(start);
      size_t end = 0;
      if (int_end < src_.size() && src_[int_end] == '.' && int_end + 1 < src_.size() &&
          IsDigit(src_[int_end + 1])) {
        end = Digits(int_end + 1);
      }
      const size_t mantissa_end = end ? end : int_end;
      if (mantissa_end < src_.size() && (src_[mantissa_end] == 'e' || src_[mantissa_end] == 'E')) {
        size_t e = mantissa_end + 1;
        if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
        if (e < src_.size() && IsDigit(src_[e])) end = Digits(e);
      }
      if (end) {
        std::string text;
        for (size_t i = start; i < end; ++i) {
          if (src_[i] != '_') text += src_[i];
        }
        Token t{Tok::kFloat, static_cast<uint32_t>(start), src_.substr(start, end - start)};
        t.float_value = std::strtod(text.c_str(), nullptr);
        tokens_.push_back(t);
        pos_ = end;
        return Status::Ok();
      }
    }
    // Integers: 0b, 0o, 0x prefixes, decimal, or zeros.
    int base = 10;
    size_t p = start;
    auto lower = [](char c) { return static_cast<char>(c | 0x20); };
    auto is_base_digit = [&](char c) {
      if (base == 2) return c == '0' || c == '1';
      if (base == 8) return c >= '0' && c <= '7';
      if (base == 16) return IsDigit(c) || (lower(c) >= 'a' && lower(c) <= 'f');
      return IsDigit(c);
    };
    if (src_[p] == '0' && p + 1 < src_.size() &&
        (lower(src_[p + 1]) == 'b' || lower(src_[p + 1]) == 'o' || lower(src_[p + 1]) == 'x')) {
      const char b = lower(src_[p + 1]);
      base = b == 'b' ? 2 : b == 'o' ? 8 : 16;
      size_t q = p + 2;
      std::string digits;
      while (q < src_.size()) {
        if (src_[q] == '_' && q + 1 < src_.size() && is_base_digit(src_[q + 1])) ++q;
        if (q >= src_.size() || !is_base_digit(src_[q])) break;
        digits += src_[q++];
      }
      if (!digits.empty()) return PushInteger(start, q, digits, base);
      base = 10;  // "0" then a name such as "x"
    }
    std::string digits;
    size_t q = p;
    if (src_[p] == '0') {
      // 0(_?0)*
      digits = "0";
      ++q;
      while (q < src_.size()) {
        if (src_[q] == '_' && q + 1 < src_.size() && src_[q + 1] == '0') ++q;
        if (q >= src_.size() || src_[q] != '0') break;
        ++q;
      }
    } else {
      while (q < src_.size()) {
        if (src_[q] == '_' && q + 1 < src_.size() && IsDigit(src_[q + 1])) ++q;
        if (q >= src_.size() || !IsDigit(src_[q])) break;
        digits += src_[q++];
      }
    }
    return PushInteger(start, q, digits, 10);
  }

  Status PushInteger(size_t start, size_t end, const std::string& digits, int base) {
    int64_t value = 0;
    const auto res = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
    if (res.ec != std::errc()) {
      return Status::Unimplemented(
          StrCat(LineColumn(src_, static_cast<uint32_t>(start)), ": integer literal ",
                 Quote(src_.substr(start, end - start)), " does not fit in 64 bits"));
    }
    Token t{Tok::kInteger, static_cast<uint32_t>(start), src_.substr(start, end - start)};
    t.int_value = value;
    tokens_.push_back(t);
    pos_ = end;
    return Status::Ok();
  }

  // A quoted string: Python's unicode-escape decoding of what is between
  // the quotes (unknown escapes stay as written).
  Status LexString() {
    const size_t start = pos_;
    const char quote = src_[start];
    size_t p = start + 1;
    while (p < src_.size() && src_[p] != quote) p += src_[p] == '\\' ? 2u : 1u;
    if (p >= src_.size()) return Error(start, "unexpected char " + std::string(1, quote));
    const std::string_view body = src_.substr(start + 1, p - start - 1);
    std::string out;
    out.reserve(body.size());
    for (size_t i = 0; i < body.size();) {
      if (body[i] != '\\') {
        const size_t from = i;
        while (i < body.size() && body[i] != '\\') ++i;
        out.append(body.substr(from, i - from));
        continue;
      }
      const size_t esc = start + 1 + i;
      if (i + 1 >= body.size()) return Error(esc, "\\ at end of string");
      const char c = body[i + 1];
      i += 2;
      auto hex = [&](size_t n, std::string_view what) -> Result<char32_t> {
        if (i + n > body.size()) return Error(esc, StrCat("truncated ", what, " escape"));
        uint32_t v = 0;
        const auto r = std::from_chars(body.data() + i, body.data() + i + n, v, 16);
        if (r.ec != std::errc() || r.ptr != body.data() + i + n) {
          return Error(esc, StrCat("truncated ", what, " escape"));
        }
        i += n;
        return static_cast<char32_t>(v);
      };
      switch (c) {
        case '\n':
          break;
        case '\\':
        case '\'':
        case '"':
          out += c;
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'v':
          out += '\v';
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
          const std::string_view what = c == 'x' ? "\\xXX" : c == 'u' ? "\\uXXXX" : "\\UXXXXXXXX";
          FOLIO_ASSIGN_OR_RETURN(char32_t cp, hex(digits, what));
          if (cp > 0x10FFFF) return Error(esc, "illegal Unicode character");
          // A lone surrogate cannot be UTF-8; U+FFFD stands in for it.
          AppendUtf8(out, cp >= 0xD800 && cp <= 0xDFFF ? 0xFFFD : cp);
          break;
        }
        case 'N':
          return Status::Unimplemented(StrCat(LineColumn(src_, static_cast<uint32_t>(esc)),
                                              ": \\N{...} escapes are not supported"));
        default:
          if (c >= '0' && c <= '7') {
            char32_t v = static_cast<char32_t>(c - '0');
            for (int k = 0; k < 2 && i < body.size() && body[i] >= '0' && body[i] <= '7'; ++k) {
              v = v * 8 + static_cast<char32_t>(body[i++] - '0');
            }
            AppendUtf8(out, v);
          } else if (static_cast<unsigned char>(c) >= 0x80) {
            // Python escaped the character before decoding: "\" + "xe9".
            size_t cp_pos = i - 1;
            const char32_t cp = DecodeUtf8(body, &cp_pos);
            i = cp_pos;
            char buf[16];
            std::snprintf(buf, sizeof buf,
                          cp < 0x100     ? "\\x%02x"
                          : cp < 0x10000 ? "\\u%04x"
                                         : "\\U%08x",
                          static_cast<unsigned>(cp));
            out += buf;
          } else {
            out += '\\';
            out += c;
          }
      }
    }
    strings_.push_back(std::move(out));
    tokens_.push_back(MakeToken(Tok::kString, start, strings_.back()));
    pos_ = p + 1;
    return Status::Ok();
  }

  std::string_view src_;
  std::deque<std::string>& strings_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
};

}  // namespace

Result<std::vector<Token>> Tokenize(std::string_view source, std::deque<std::string>& strings) {
  return Lexer(source, strings).Run();
}

}  // namespace folio::chat::internal
