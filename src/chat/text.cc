#include "chat/text.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace folio::chat::internal {

char32_t DecodeUtf8(std::string_view s, size_t* pos) {
  const size_t i = *pos;
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    *pos = i + 1;
    return b0;
  }
  size_t len = 0;
  char32_t cp = 0;
  char32_t min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  }
  if (len == 0 || i + len > s.size()) {
    *pos = i + 1;
    return b0;
  }
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      *pos = i + 1;
      return b0;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    *pos = i + 1;
    return b0;
  }
  *pos = i + len;
  return cp;
}

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool IsAscii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

size_t CountCodePoints(std::string_view s) {
  if (IsAscii(s)) return s.size();
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); ++n) DecodeUtf8(s, &pos);
  return n;
}

size_t CodePointOffset(std::string_view s, size_t index) {
  size_t pos = 0;
  for (size_t n = 0; n < index && pos < s.size(); ++n) DecodeUtf8(s, &pos);
  return pos;
}

bool IsPySpace(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

size_t LeadingSpaceBytes(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t next = pos;
    if (!IsPySpace(DecodeUtf8(s, &next))) break;
    pos = next;
  }
  return pos;
}

size_t TrailingSpaceBytes(std::string_view s) {
  // ASCII from the back; a non-ASCII byte there needs a scan from the front
  // to find where its code point starts.
  size_t end = s.size();
  while (end > 0) {
    const auto b = static_cast<unsigned char>(s[end - 1]);
    if (b >= 0x80) break;
    if (!IsPySpace(b)) return s.size() - end;
    --end;
  }
  if (end == 0) return s.size();
  size_t content_end = 0;  // just past the last code point that is not a space
  for (size_t pos = 0; pos < end;) {
    if (!IsPySpace(DecodeUtf8(s, &pos))) content_end = pos;
  }
  return s.size() - content_end;
}

std::string_view StripSpace(std::string_view s, bool left, bool right) {
  if (left) s.remove_prefix(LeadingSpaceBytes(s));
  if (right) s.remove_suffix(TrailingSpaceBytes(s));
  return s;
}

namespace {

// Lower-case partner of an upper-case letter, or 0.
char32_t LowerOf(char32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp < 0xC0) return 0;
  if ((cp >= 0xC0 && cp <= 0xDE && cp != 0xD7)) return cp + 32;
  if (cp >= 0x100 && cp <= 0x137 && cp % 2 == 0) return cp + 1;
  if (cp >= 0x139 && cp <= 0x148 && cp % 2 == 1) return cp + 1;
  if (cp >= 0x14A && cp <= 0x177 && cp % 2 == 0) return cp + 1;
  if (cp == 0x178) return 0xFF;
  if (cp == 0x179 || cp == 0x17B || cp == 0x17D) return cp + 1;
  if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 32;
  if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
  return 0;
}

// Upper-case partner of a lower-case letter, or 0 (U+00DF is handled by
// AppendCase).
char32_t UpperOf(char32_t cp) {
  if (cp >= 'a' && cp <= 'z') return cp - 32;
  if (cp < 0xB5) return 0;
  if (cp == 0xB5) return 0x39C;
  if (cp >= 0xE0 && cp <= 0xFE && cp != 0xF7) return cp - 32;
  if (cp == 0xFF) return 0x178;
  if (cp >= 0x101 && cp <= 0x137 && cp % 2 == 1) return cp - 1;
  if (cp >= 0x13A && cp <= 0x148 && cp % 2 == 0) return cp - 1;
  if (cp >= 0x14B && cp <= 0x177 && cp % 2 == 1) return cp - 1;
  if (cp == 0x17A || cp == 0x17C || cp == 0x17E) return cp - 1;
  if (cp == 0x3C2) return 0x3A3;
  if (cp >= 0x3B1 && cp <= 0x3C9) return cp - 32;
  if (cp >= 0x430 && cp <= 0x44F) return cp - 32;
  if (cp >= 0x450 && cp <= 0x45F) return cp - 80;
  return 0;
}

}  // namespace

bool IsUpperCp(char32_t cp) { return LowerOf(cp) != 0; }
bool IsLowerCp(char32_t cp) { return cp == 0xDF || UpperOf(cp) != 0; }
bool IsCasedCp(char32_t cp) { return IsUpperCp(cp) || IsLowerCp(cp); }
bool IsAlphaCp(char32_t cp) {
  return IsCasedCp(cp) || (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3040 && cp <= 0x30FF) ||
         (cp >= 0xAC00 && cp <= 0xD7A3);
}
bool IsDigitCp(char32_t cp) { return cp >= '0' && cp <= '9'; }

void AppendCase(std::string& out, char32_t cp, CaseMap map) {
  if (map == CaseMap::kUpper) {
    if (cp == 0xDF) {
      out += "SS";
      return;
    }
    const char32_t u = UpperOf(cp);
    AppendUtf8(out, u ? u : cp);
  } else {
    const char32_t l = LowerOf(cp);
    AppendUtf8(out, l ? l : cp);
  }
}

std::string ToCase(std::string_view s, CaseMap map) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const char32_t cp = DecodeUtf8(s, &pos);
    if (pos - start == 1 && cp >= 0x80) {
      out += s[start];  // an ill-formed byte stays as it was
    } else {
      AppendCase(out, cp, map);
    }
  }
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool previous_cased = false;
  for (size_t pos = 0; pos < s.size();) {
    const char32_t cp = DecodeUtf8(s, &pos);
    const bool cased = IsCasedCp(cp);
    AppendCase(out, cp, previous_cased ? CaseMap::kLower : CaseMap::kUpper);
    previous_cased = cased;
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const bool first = pos == 0;
    AppendCase(out, DecodeUtf8(s, &pos), first ? CaseMap::kUpper : CaseMap::kLower);
  }
  return out;
}

namespace {

// str.isprintable() is false for Unicode's Other and Separator categories
// (the ASCII space excepted). Without the Unicode tables this covers the
// controls, the spaces and format characters text actually carries, private
// use and non-characters; unassigned code points are taken as printable.
bool IsPrintableCp(char32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if (cp < 0x370) return true;
  if ((cp >= 0x600 && cp <= 0x605) || cp == 0x61C || cp == 0x6DD || cp == 0x70F || cp == 0x8E2 ||
      cp == 0x1680 || cp == 0x180E) {
    return false;
  }
  if ((cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
      (cp >= 0x205F && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x206F) || cp == 0x3000) {
    return false;
  }
  if ((cp >= 0xD800 && cp <= 0xF8FF) || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB) ||
      cp == 0xFFFE || cp == 0xFFFF) {
    return false;
  }
  if (cp == 0x110BD || (cp >= 0x1BCA0 && cp <= 0x1BCA3) || (cp >= 0x1D173 && cp <= 0x1D17A) ||
      cp == 0xE0001 || (cp >= 0xE0020 && cp <= 0xE007F) || cp >= 0xF0000) {
    return false;
  }
  return true;
}

}  // namespace

void AppendPyRepr(std::string& out, std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out += quote;
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const char32_t cp = DecodeUtf8(s, &pos);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (IsPrintableCp(cp) && !(pos - start == 1 && cp >= 0x80)) {
      out.append(s.substr(start, pos - start));
    } else {
      char buf[12];
      if (cp < 0x100) {
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
      } else if (cp < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      } else {
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(cp));
      }
      out += buf;
    }
  }
  out += quote;
}

void AppendPyFloat(std::string& out, double d) {
  if (std::isnan(d)) {
    out += "nan";
    return;
  }
  if (std::isinf(d)) {
    out += d < 0 ? "-inf" : "inf";
    return;
  }
  // The shortest round-trip digits, then Python's layout (float_repr_style
  // 'short'): positional when -4 < exponent10 < 16, else d.ddde+XX.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  std::string digits;
  size_t i = 0;
  bool negative = false;
  if (sci[0] == '-') negative = true, i = 1;
  for (; i < sci.size() && sci[i] != 'e'; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  const int exp10 = std::atoi(std::string(sci.substr(i + 1)).c_str());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (negative) out += '-';
  const int decpt = exp10 + 1;  // digits[0] sits at 10^(decpt-1)
  if (decpt > -4 && decpt <= 16) {
    const int n = static_cast<int>(digits.size());
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (decpt >= n) {
      out += digits;
      out.append(static_cast<size_t>(decpt - n), '0');
      out += ".0";
    } else {
      out.append(digits, 0, static_cast<size_t>(decpt));
      out += '.';
      out.append(digits, static_cast<size_t>(decpt));
    }
    return;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1);
  }
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
  out += ebuf;
}

void AppendInt(std::string& out, int64_t i) {
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof buf, i);
  out.append(buf, res.ptr);
}

}  // namespace folio::chat::internal
