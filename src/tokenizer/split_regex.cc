#include "tokenizer/split_regex.h"
#include "folio/core/utf8.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdio>
#include <optional>

#include "tokenizer/unicode.h"

namespace folio::tokenizer {
namespace {

using unicode::Ranges;

// Backtracking bounds for untrusted patterns: PCRE2's defaults, stated.
constexpr uint32_t kMatchLimit = 10'000'000;
constexpr uint32_t kHeapLimitKib = 64 * 1024;
constexpr size_t kJitStackMaxBytes = 1 << 20;

void AppendCodePoint(char32_t cp, std::string* out) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "\\x{%X}", static_cast<unsigned>(cp));
  out->append(buf);
}

// Ranges as class items ("\x{41}-\x{5A}..."), without the brackets.
// Surrogates cannot occur in valid UTF-8 and PCRE2 rejects them in a UTF
// pattern, so they are left out.
void AppendRanges(const Ranges& ranges, std::string* out) {
  for (auto [first, last] : ranges) {
    const std::pair<char32_t, char32_t> pieces[2] = {{first, std::min<char32_t>(last, 0xD7FF)},
                                                     {std::max<char32_t>(first, 0xE000), last}};
    for (auto [a, b] : pieces) {
      if (a > b) continue;
      AppendCodePoint(a, out);
      if (b != a) {
        out->push_back('-');
        AppendCodePoint(b, out);
      }
    }
  }
}

Status Unsupported(std::string_view what, size_t at) {
  return Status::Unimplemented("split regex: " + std::string(what) + " (at pattern byte " +
                               std::to_string(at) + ") is not supported");
}
Status Malformed(std::string_view what, size_t at) {
  return Status::InvalidArgument("split regex: " + std::string(what) + " at pattern byte " +
                                 std::to_string(at));
}

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Translates one escape starting at pattern[i] == '\\'. Sets *ranges (and
// *negated) for a class escape, else appends the PCRE2 spelling to *out.
// Returns the index after the escape.
Result<size_t> TranslateEscape(std::string_view p, size_t i, std::string* out,
                               std::optional<Ranges>* ranges, bool* negated) {
  const size_t at = i;
  if (i + 1 >= p.size()) return Malformed("trailing backslash", at);
  const char e = p[i + 1];
  i += 2;
  *negated = false;
  switch (e) {
    case 's':
    case 'S':
      *ranges = unicode::WhiteSpaceRanges();
      *negated = e == 'S';
      return i;
    case 'd':
    case 'D':
      *ranges = unicode::RangesOf(unicode::MaskOf(unicode::Category::kNd));
      *negated = e == 'D';
      return i;
    case 'p':
    case 'P': {
      if (i >= p.size() || p[i] != '{') {
        return Unsupported("\\p without braces", at);
      }
      const size_t close = p.find('}', i);
      if (close == std::string_view::npos) {
        return Malformed("unterminated \\p{", at);
      }
      std::string_view name = p.substr(i + 1, close - i - 1);
      *negated = e == 'P';
      if (!name.empty() && name[0] == '^') {
        *negated = !*negated;
        name.remove_prefix(1);
      }
      const unicode::CategoryMask mask = unicode::MaskOfName(name);
      if (mask == 0) {
        return Unsupported("property \\p{" + std::string(name) + "} (only general categories are)",
                           at);
      }
      *ranges = unicode::RangesOf(mask);
      return close + 1;
    }
    case 'r':
    case 'n':
    case 't':
    case 'f':
    case 'a':
    case 'e':
      out->push_back('\\');
      out->push_back(e);
      return i;
    case 'v':  // Oniguruma: the vertical tab; PCRE2: a class
      out->append("\\x{B}");
      return i;
    case 'x': {
      if (i < p.size() && p[i] == '{') {
        const size_t close = p.find('}', i);
        if (close == std::string_view::npos || close == i + 1 || close - i - 1 > 6) {
          return Malformed("bad \\x{...}", at);
        }
        for (size_t k = i + 1; k < close; ++k) {
          if (!IsHex(p[k])) return Malformed("bad \\x{...}", at);
        }
        out->append(p.substr(at, close + 1 - at));
        return close + 1;
      }
      if (i + 2 > p.size() || !IsHex(p[i]) || !IsHex(p[i + 1])) {
        return Malformed("bad \\xHH", at);
      }
      out->append(p.substr(at, 4));
      return i + 2;
    }
    case 'u': {
      if (i + 4 > p.size()) return Malformed("bad \\uHHHH", at);
      for (size_t k = i; k < i + 4; ++k) {
        if (!IsHex(p[k])) return Malformed("bad \\uHHHH", at);
      }
      out->append("\\x{");
      out->append(p.substr(i, 4));
      out->push_back('}');
      return i + 4;
    }
    default:
      break;
  }
  const auto u = static_cast<unsigned char>(e);
  const bool punct = u < 0x80 && !(e >= '0' && e <= '9') && !(e >= 'a' && e <= 'z') &&
                     !(e >= 'A' && e <= 'Z') && u > 0x20;
  if (!punct) return Unsupported(std::string("escape \\") + e, at);
  out->push_back('\\');
  out->push_back(e);
  return i;
}

}  // namespace

Result<std::string> TranslateSplitPattern(std::string_view p) {
  if (p.size() > kMaxSplitPatternBytes) {
    return Status::ResourceExhausted("split regex is " + std::to_string(p.size()) +
                                     " bytes, limit " + std::to_string(kMaxSplitPatternBytes));
  }
  if (const size_t bad = utf8::FirstInvalid(p); bad != std::string_view::npos) {
    return Malformed("invalid UTF-8", bad);
  }
  std::string out;
  bool in_class = false;
  size_t class_items = 0;  // items so far in the open class
  size_t i = 0;
  while (i < p.size()) {
    const char c = p[i];
    if (c == '\\') {
      std::optional<Ranges> ranges;
      bool negated = false;
      FOLIO_ASSIGN_OR_RETURN(const size_t next, TranslateEscape(p, i, &out, &ranges, &negated));
      if (ranges.has_value()) {
        if (in_class) {
          AppendRanges(negated ? unicode::Complement(*ranges) : *ranges, &out);
        } else {
          out.append(negated ? "[^" : "[");
          AppendRanges(*ranges, &out);
          out.push_back(']');
        }
      }
      ++class_items;
      i = next;
      continue;
    }
    if (in_class) {
      if (c == '[') return Unsupported("nested class or POSIX bracket", i);
      if (c == '&' && i + 1 < p.size() && p[i + 1] == '&') {
        return Unsupported("class intersection &&", i);
      }
      if (c == ']' && class_items == 0) {
        return Unsupported("']' first in a class", i);
      }
      if (c == ']') in_class = false;
      out.push_back(c);
      ++class_items;
      ++i;
      continue;
    }
    switch (c) {
      case '[':
        in_class = true;
        class_items = 0;
        out.push_back('[');
        ++i;
        if (i < p.size() && p[i] == '^') {
          out.push_back('^');
          ++i;
        }
        continue;
      case '$':  // Oniguruma (Ruby syntax): the end of a line, not only of the text
        out.append("(?=\\n|\\z)");
        ++i;
        continue;
      case '^':
        return Unsupported(std::string("anchor ") + c, i);
      case '(': {
        if (i + 1 < p.size() && p[i + 1] == '?') {
          static constexpr std::string_view kGroups[] = {"(?:", "(?=",  "(?!",   "(?<=", "(?<!",
                                                         "(?>", "(?i:", "(?-i:", "(?i)", "(?-i)"};
          bool known = false;
          for (std::string_view g : kGroups) {
            if (p.substr(i, g.size()) == g) {
              out.append(g);
              i += g.size();
              known = true;
              break;
            }
          }
          if (!known) return Unsupported("group syntax (?", i);
          continue;
        }
        out.push_back('(');
        ++i;
        continue;
      }
      default:
        out.push_back(c);
        ++i;
    }
  }
  if (in_class) return Malformed("unterminated character class", p.size());
  return out;
}

struct SplitRegex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {

// Per-thread match state: PCRE2 match data, context and JIT stack are not
// shareable between concurrent matches.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, kJitStackMaxBytes, nullptr);
  MatchScratch() {
    pcre2_set_match_limit(context, kMatchLimit);
    pcre2_set_heap_limit(context, kHeapLimitKib);
    if (jit_stack != nullptr) {
      pcre2_jit_stack_assign(context, nullptr, jit_stack);
    }
  }
  ~MatchScratch() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;
};

}  // namespace

Result<SplitRegex> SplitRegex::Compile(std::string_view pattern) {
  FOLIO_ASSIGN_OR_RETURN(const std::string translated, TranslateSplitPattern(pattern));
  pcre2_compile_context* ccontext = pcre2_compile_context_create(nullptr);
  // `.` excludes only \n, as in Oniguruma.
  pcre2_set_newline(ccontext, PCRE2_NEWLINE_LF);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C, &error, &offset, ccontext);
  pcre2_compile_context_free(ccontext);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return Status::InvalidArgument("split regex: PCRE2 rejects the translated pattern: " +
                                   std::string(reinterpret_cast<const char*>(message)));
  }
  // JIT is an optimisation; without it PCRE2 interprets the same pattern.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  SplitRegex re;
  auto owned = std::make_shared<Code>();
  owned->code = code;
  re.code_ = std::move(owned);
  return re;
}

SplitRegex SplitRegex::Literal(std::string literal) {
  SplitRegex re;
  re.literal_ = std::move(literal);
  return re;
}

Status SplitRegex::FindAll(std::string_view text,
                           std::vector<std::pair<size_t, size_t>>* matches) const {
  if (code_ == nullptr) {
    FOLIO_CHECK(!literal_.empty());
    for (size_t at = text.find(literal_); at != std::string_view::npos;
         at = text.find(literal_, at + literal_.size())) {
      matches->emplace_back(at, at + literal_.size());
    }
    return Status::Ok();
  }
  thread_local MatchScratch scratch;
  FOLIO_CHECK(scratch.data != nullptr && scratch.context != nullptr);
  size_t search_from = 0;
  std::optional<size_t> last_match_end;
  while (search_from <= text.size()) {
    const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                               search_from, PCRE2_NO_UTF_CHECK, scratch.data, scratch.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      return Status::ResourceExhausted(
          "split regex: matching stopped at byte " + std::to_string(search_from) + " of " +
          std::to_string(text.size()) + ": " + reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data);
    const size_t begin = ovector[0], end = ovector[1];
    if (begin == end && last_match_end == end) {
      // An empty match where the last one ended: step one character on.
      if (search_from >= text.size()) break;
      size_t len = 0;
      unicode::DecodeAt(text, search_from, &len);
      search_from += len;
      continue;
    }
    matches->emplace_back(begin, end);
    search_from = end;
    last_match_end = end;
  }
  return Status::Ok();
}

}  // namespace folio::tokenizer
