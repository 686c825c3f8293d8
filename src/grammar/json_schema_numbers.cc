// Numeric ranges as GBNF: minimum / maximum / exclusiveMinimum /
// exclusiveMaximum on integers and numbers, enforced exactly.
//
// A number is split into its sign, its integer part I (canonical digits)
// and its fraction digits F. For a magnitude m = I.F between bounds A and
// B (decimals), I ranges over canonical integers digit by digit (as a
// hand-written range regex would), and only where I equals A's or B's
// integer part is F constrained, by a digit-by-digit comparison against
// the bound's fraction digits. Negative numbers are "-" and a magnitude
// between the negated bounds; "-0" (which is zero) is allowed exactly when
// zero is.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "grammar/json_schema_internal.h"

namespace folio::grammar::json_schema_internal {
namespace {

bool AllChar(std::string_view s, char c) {
  return std::all_of(s.begin(), s.end(), [c](char x) { return x == c; });
}

std::string DigitClass(char a, char b) {
  if (a == b) return Literal(std::string_view(&a, 1));
  std::string out = "[";
  out += a;
  out += '-';
  out += b;
  out += ']';
  return out;
}

std::string AnyDigits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return "[0-9]{" + std::to_string(n) + "}";
}

std::string Alternation(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) {
    out += i == 0 ? " " : " | ";
    out += alts[i];
  }
  out += " )";
  return out;
}

// Digit strings of x.size() digits from x to y (x <= y, same length,
// leading zeros allowed), as one expression ("" when both are empty).
std::string SameLength(std::string_view x, std::string_view y) {
  size_t common = 0;
  while (common < x.size() && x[common] == y[common]) ++common;
  std::string prefix = common > 0 ? Literal(x.substr(0, common)) : "";
  x.remove_prefix(common);
  y.remove_prefix(common);
  if (x.empty()) return prefix;
  const size_t n = x.size();
  const bool x_rest_zero = AllChar(x.substr(1), '0');
  const bool y_rest_nine = AllChar(y.substr(1), '9');
  std::vector<std::string> alts;
  if (!x_rest_zero) {
    alts.push_back(Seq({DigitClass(x[0], x[0]), SameLength(x.substr(1), std::string(n - 1, '9'))}));
  }
  const char lo_full = x_rest_zero ? x[0] : static_cast<char>(x[0] + 1);
  const char hi_full = y_rest_nine ? y[0] : static_cast<char>(y[0] - 1);
  if (lo_full <= hi_full) alts.push_back(Seq({DigitClass(lo_full, hi_full), AnyDigits(n - 1)}));
  if (!y_rest_nine) {
    alts.push_back(Seq({DigitClass(y[0], y[0]), SameLength(std::string(n - 1, '0'), y.substr(1))}));
  }
  return Seq({prefix, Alternation(alts)});
}

int CompareDigits(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

std::string Increment(std::string s) {
  size_t i = s.size();
  while (i > 0 && s[i - 1] == '9') s[--i] = '0';
  if (i == 0) return "1" + s;
  ++s[i - 1];
  return s;
}

// s > 0.
std::string Decrement(std::string s) {
  size_t i = s.size();
  while (s[i - 1] == '0') s[--i] = '9';
  --s[i - 1];
  if (s.size() > 1 && s[0] == '0') s.erase(0, 1);
  return s;
}

// Canonical non-negative integers from a to b (b absent: unbounded).
std::optional<std::string> IntegerMagnitudes(const std::string& a,
                                             const std::optional<std::string>& b) {
  if (b && CompareDigits(a, *b) > 0) return std::nullopt;
  if (a == "0" && !b) return "( \"0\" | [1-9] [0-9]* )";
  std::vector<std::string> alts;
  const size_t la = a.size();
  const size_t lb = b ? b->size() : la;
  // The lengths la (from a) and lb (to b); between them, every number of
  // the length.
  alts.push_back(SameLength(a, b && lb == la ? *b : std::string(la, '9')));
  if (b && lb > la + 1) {
    std::string middle = "[1-9] [0-9]{" + std::to_string(la);
    if (lb - 2 > la) {
      middle += ',';
      middle += std::to_string(lb - 2);
    }
    alts.push_back(middle + "}");
  }
  if (b && lb > la) {
    std::string smallest(lb, '0');  // 10...0, the smallest of lb digits
    smallest[0] = '1';
    alts.push_back(SameLength(smallest, *b));
  }
  if (!b) alts.push_back("[1-9] [0-9]{" + std::to_string(la) + ",}");
  return Alternation(alts);
}

// Fraction digit strings d (0.d compared with zero padding) with
// 0.d >= 0.l (> when l_excl) and, when h is given, 0.d <= 0.h (< when
// h_excl). l and h have no trailing zeros. allow_empty: whether d may be
// empty; the result is then "" when only the empty string qualifies.
std::optional<std::string> FractionDigits(std::string_view l, bool l_excl,
                                          std::optional<std::string_view> h, bool h_excl,
                                          bool allow_empty) {
  const bool lower_done = l.empty() && !l_excl;
  if (!h) {
    if (lower_done) return allow_empty ? "[0-9]*" : "[0-9]+";
    if (l.empty()) return "\"0\"* [1-9] [0-9]*";  // > 0
  }
  if (h && h->empty() && l.empty()) {  // exactly zero
    if (h_excl || l_excl) return std::nullopt;
    return allow_empty ? "\"0\"*" : "\"0\"+";
  }
  const bool empty_ok = lower_done && (!h || !h_excl || !h->empty());
  const char l0 = l.empty() ? '0' : l[0];
  const std::string_view l_rest = l.empty() ? l : l.substr(1);
  const char h0 = !h ? static_cast<char>('9' + 1) : (h->empty() ? '0' : (*h)[0]);
  const std::string_view h_rest = !h || h->empty() ? std::string_view() : h->substr(1);
  std::vector<std::string> alts;
  if (l0 + 1 <= h0 - 1) {
    alts.push_back(
        Seq({DigitClass(static_cast<char>(l0 + 1), static_cast<char>(h0 - 1)), "[0-9]*"}));
  }
  auto add = [&](char digit, std::optional<std::string> rest) {
    if (rest) alts.push_back(Seq({DigitClass(digit, digit), *rest}));
  };
  if (l0 == h0) {
    add(l0, FractionDigits(l_rest, l_excl, h_rest, h_excl, true));
  } else if (l0 < h0) {
    add(l0, FractionDigits(l_rest, l_excl, std::nullopt, false, true));
    if (h) add(h0, FractionDigits("", false, h_rest, h_excl, true));
  }
  if (alts.empty()) {
    if (allow_empty && empty_ok) return "";
    return std::nullopt;
  }
  std::string alt = Alternation(alts);
  if (allow_empty && empty_ok) {
    if (alts.size() == 1) alt = "( " + alt + " )";
    alt += "?";
  }
  return alt;
}

// The fraction part (absent, or "." and digits) of a number whose integer
// part equals the bounds' integer parts: "" when only an absent fraction
// works (a zero fraction is then written by FractionDigits as "0"+).
std::optional<std::string> FractionPart(std::string_view l, bool l_excl,
                                        std::optional<std::string_view> h, bool h_excl) {
  const bool zero_ok = l.empty() && !l_excl && (!h || !h_excl || !h->empty());
  std::optional<std::string> digits = FractionDigits(l, l_excl, h, h_excl, false);
  if (!digits) {
    if (!zero_ok) return std::nullopt;
    return "";
  }
  std::string frac = "\".\" " + *digits;
  return zero_ok ? "( " + frac + " )?" : frac;
}

struct MagnitudeBound {
  Decimal value;  // non-negative
  bool exclusive = false;
};

// Magnitudes (numbers without a sign) between lo and hi (hi absent:
// unbounded).
std::optional<std::string> Magnitudes(const MagnitudeBound& lo,
                                      const std::optional<MagnitudeBound>& hi, bool integer_only) {
  const std::string& ai = lo.value.int_digits;
  const std::string& af = lo.value.frac_digits;
  if (integer_only) {
    std::string a = (af.empty() && !lo.exclusive) ? ai : Increment(ai);
    std::optional<std::string> b;
    if (hi) {
      const std::string& bi = hi->value.int_digits;
      if (!hi->value.frac_digits.empty() || !hi->exclusive) {
        b = bi;
      } else {
        if (bi == "0") return std::nullopt;
        b = Decrement(bi);
      }
    }
    return IntegerMagnitudes(a, b);
  }
  const std::string exponent = "( [eE] [+\\-]? [0-9]+ )?";
  if (!hi && ai == "0" && af.empty()) {
    if (!lo.exclusive) return "( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? " + exponent;
    return "( [1-9] [0-9]* ( \".\" [0-9]+ )? | \"0\" \".\" \"0\"* [1-9] [0-9]* ) " + exponent;
  }
  std::vector<std::string> alts;
  auto add = [&](std::optional<std::string> int_part, std::optional<std::string> frac) {
    if (int_part && frac) alts.push_back(Seq({*int_part, *frac}));
  };
  if (hi && hi->value.int_digits == ai) {
    add(Literal(ai), FractionPart(af, lo.exclusive, hi->value.frac_digits, hi->exclusive));
  } else if (!hi || CompareDigits(ai, hi->value.int_digits) < 0) {
    add(Literal(ai), FractionPart(af, lo.exclusive, std::nullopt, false));
    // Here ai < hi's integer part, so that part is at least 1.
    std::optional<std::string> b;
    if (hi) b = Decrement(hi->value.int_digits);
    add(IntegerMagnitudes(Increment(ai), b), std::string("( \".\" [0-9]+ )?"));
    if (hi) {
      add(Literal(hi->value.int_digits),
          FractionPart("", false, hi->value.frac_digits, hi->exclusive));
    }
  }
  if (alts.empty()) return std::nullopt;
  return Alternation(alts);
}

Decimal Abs(Decimal d) {
  d.negative = false;
  return d;
}

bool IsZero(const Decimal& d) { return d.int_digits == "0" && d.frac_digits.empty(); }

}  // namespace

std::string Seq(std::initializer_list<std::string_view> pieces) {
  std::string out;
  for (std::string_view p : pieces) {
    if (p.empty()) continue;
    if (!out.empty()) out += ' ';
    out += p;
  }
  return out;
}

Result<Decimal> DecimalFromJson(const Json& number) {
  if (!number.is_number())
    return Status::InvalidArgument("expected a number, got " + number.dump());
  std::string text = number.dump();
  if (number.is_number_float() && !std::isfinite(number.get<double>())) {
    return Status::InvalidArgument("expected a finite number, got " + text);
  }
  Decimal d;
  size_t pos = 0;
  if (text[pos] == '-') {
    d.negative = true;
    ++pos;
  }
  std::string digits;
  int64_t point = -1;
  int64_t exponent = 0;
  for (; pos < text.size(); ++pos) {
    const char c = text[pos];
    if (c >= '0' && c <= '9') {
      digits += c;
    } else if (c == '.') {
      point = static_cast<int64_t>(digits.size());
    } else if (c == 'e' || c == 'E') {
      exponent = std::stoll(text.substr(pos + 1));
      break;
    }
  }
  if (point < 0) point = static_cast<int64_t>(digits.size());
  point += exponent;
  if (point < 0) {
    digits.insert(0, static_cast<size_t>(-point), '0');
    point = 0;
  }
  if (static_cast<size_t>(point) > digits.size())
    digits.append(static_cast<size_t>(point) - digits.size(), '0');
  d.int_digits = digits.substr(0, static_cast<size_t>(point));
  d.frac_digits = digits.substr(static_cast<size_t>(point));
  const size_t first = d.int_digits.find_first_not_of('0');
  d.int_digits = first == std::string::npos ? "0" : d.int_digits.substr(first);
  const size_t last = d.frac_digits.find_last_not_of('0');
  d.frac_digits = last == std::string::npos ? "" : d.frac_digits.substr(0, last + 1);
  if (IsZero(d)) d.negative = false;
  return d;
}

int CompareDecimals(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  int c = CompareDigits(a.int_digits, b.int_digits);
  if (c == 0) {
    const size_t n = std::max(a.frac_digits.size(), b.frac_digits.size());
    std::string fa = a.frac_digits;
    std::string fb = b.frac_digits;
    fa.resize(n, '0');
    fb.resize(n, '0');
    c = fa.compare(fb);
    c = c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  return a.negative ? -c : c;
}

std::optional<std::string> NumberRangeGbnf(const std::optional<Bound>& lo,
                                           const std::optional<Bound>& hi, bool integer_only) {
  std::vector<std::string> alts;
  // Non-negative numbers, written without a sign.
  if (!hi || !hi->value.negative) {
    MagnitudeBound mlo;
    if (lo && !lo->value.negative) mlo = {lo->value, lo->exclusive};
    std::optional<MagnitudeBound> mhi;
    if (hi) mhi = MagnitudeBound{hi->value, hi->exclusive};
    if (auto m = Magnitudes(mlo, mhi, integer_only)) alts.push_back(*m);
  }
  // Negative numbers (and "-0"): "-" and a magnitude between -hi and -lo.
  if (!lo || lo->value.negative || IsZero(lo->value)) {
    MagnitudeBound mlo;
    if (hi && (hi->value.negative || IsZero(hi->value))) mlo = {Abs(hi->value), hi->exclusive};
    std::optional<MagnitudeBound> mhi;
    if (lo) mhi = MagnitudeBound{Abs(lo->value), lo->exclusive};
    if (auto m = Magnitudes(mlo, mhi, integer_only)) alts.push_back(Seq({"\"-\"", *m}));
  }
  if (alts.empty()) return std::nullopt;
  return "( " + (alts.size() == 1 ? alts[0] : alts[0] + " | " + alts[1]) + " )";
}

}  // namespace folio::grammar::json_schema_internal
