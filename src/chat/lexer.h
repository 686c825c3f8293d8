// Template source -> tokens, as jinja2's lexer cuts them under Hugging
// Face's environment (trim_blocks=True, lstrip_blocks=True,
// keep_trailing_newline=False, default delimiters).
//
// Data between tags is one token, already trimmed: `{%-`, `{{-` and `{#-`
// strip all whitespace before the tag; `-%}`, `-}}` and `-#}` all
// whitespace after it; a block or comment tag alone on its line also takes
// the spaces before it (lstrip_blocks, unless written `{%+`) and the
// newline after it (trim_blocks, unless written `+%}`). `{% raw %}` text is
// data. Comments vanish.
#ifndef FOLIO_CHAT_LEXER_H_
#define FOLIO_CHAT_LEXER_H_

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/status.h"

namespace folio::chat::internal {

enum class Tok : uint8_t {
  kData,
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,
  kInteger,
  kFloat,
  kAdd,
  kSub,
  kDiv,
  kFloorDiv,
  kMul,
  kMod,
  kPow,
  kTilde,
  kLBracket,
  kRBracket,
  kLParen,
  kRParen,
  kLBrace,
  kRBrace,
  kEq,
  kNe,
  kGt,
  kGe,
  kLt,
  kLe,
  kAssign,
  kDot,
  kColon,
  kPipe,
  kComma,
  kSemicolon,
  kEof,
};

// How jinja2 names a token in messages: "end of print statement", "'+'".
std::string_view TokName(Tok t);

struct Token {
  Tok type = Tok::kEof;
  uint32_t pos = 0;       // byte offset in the normalized source
  std::string_view text;  // kData, kName: the text; kString: the decoded value
  int64_t int_value = 0;  // kInteger
  double float_value = 0;
};

// The source with jinja2's newline handling applied: \r\n and \r become \n
// and one trailing newline is dropped. Token positions index into this.
std::string NormalizeSource(std::string_view source);

// "3:14": 1-based line and column (in code points) of a byte offset.
std::string LineColumn(std::string_view source, uint32_t pos);

// Tokenizes `source` (already normalized). Decoded string literals are
// stored in `strings`, which the tokens' views point into. Errors:
// kInvalidArgument naming line:column (an unterminated comment or raw
// block, an unexpected character, an unbalanced bracket, a bad escape).
Result<std::vector<Token>> Tokenize(std::string_view source, std::deque<std::string>& strings);

}  // namespace folio::chat::internal

#endif  // FOLIO_CHAT_LEXER_H_
