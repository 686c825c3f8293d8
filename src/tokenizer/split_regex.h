// The pre-tokenizer's split patterns: Oniguruma syntax in, PCRE2 out.
//
// `tokenizers` compiles Split patterns with Oniguruma (Ruby syntax, Unicode
// 16.0 tables). folio translates a pattern to PCRE2 syntax, writing each
// Unicode class out as explicit code point ranges from unicode_tables.cc,
// so matching does not depend on the Unicode version of the PCRE2 build:
//   \s \S      White_Space and its complement (Oniguruma's meaning; PCRE2's
//              own \s also takes U+180E)
//   \p{X} \P{X} \p{^X}  X a general category (L, Lu, N, Nd, P, ...)
//   \d \D      \p{Nd}
//   \v         U+000B (in PCRE2 \v is a class)
//   $          the end of a line, as in Ruby: (?=\n|\z)
//   \r \n \t \f \a \e \xHH \x{H..} \uHHHH and escaped punctuation as is
//   groups (?: (?i: (?-i: (?i) (?-i) (?= (?! (?<= (?<! (?> and plain ( ),
//   classes without nesting or && intersection, quantifiers, alternation.
// Everything else (\w \b \h \R \X \K back-references, the ^ anchor, named
// groups, script properties, POSIX brackets) is refused as kUnimplemented
// rather than risk a silently different split.
#ifndef FOLIO_TOKENIZER_SPLIT_REGEX_H_
#define FOLIO_TOKENIZER_SPLIT_REGEX_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "folio/core/status.h"

namespace folio::tokenizer {

// Oniguruma pattern -> PCRE2 pattern. Errors: kUnimplemented (a construct
// listed above as refused, named), kInvalidArgument (not UTF-8, a bad
// escape, an unterminated class).
Result<std::string> TranslateSplitPattern(std::string_view pattern);

// Longest accepted pattern, before translation.
inline constexpr size_t kMaxSplitPatternBytes = 64 * 1024;

class SplitRegex {
 public:
  // Translates and compiles. Errors as TranslateSplitPattern, plus
  // kInvalidArgument with PCRE2's message for a pattern it rejects.
  static Result<SplitRegex> Compile(std::string_view pattern);
  // A literal (Split's "String" pattern).
  static SplitRegex Literal(std::string literal);

  // Appends the [begin, end) byte ranges of the matches in `text` (valid
  // UTF-8), scanning as Rust's onig::FindMatches does: left to right, an
  // empty match right after the previous match is skipped.
  // Errors: kResourceExhausted when PCRE2's backtracking limit is hit.
  Status FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>* matches) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;  // null for a literal
  std::string literal_;
};

}  // namespace folio::tokenizer

#endif  // FOLIO_TOKENIZER_SPLIT_REGEX_H_
