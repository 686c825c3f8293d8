// Regular expressions as GBNF, for `pattern` in JSON Schema, vLLM's
// `regex` structured output and `folio generate --regex`.
//
// The accepted syntax is the ECMAScript / Python subset people write in
// schemas: literals and escapes (\n \r \t \f \v \0 \xHH \uHHHH \u{H..}
// \cX and escaped ASCII punctuation; \uHHHH\uHHHH as a surrogate pair is
// one code point), classes [...] and [^...] with ranges ([\b] is a
// backspace; "[^]" is any character; a '-' next to a class escape, as in
// [\w-.], is a member, as ECMAScript's Annex B reads it), the shorthands \d \D \w \W \s \S
// (ASCII meanings, as JSON Schema's regex dialect defines them, except
// \s, which is ECMAScript's Unicode white space), also inside classes,
// negated ones included ("." is any character but \n \r U+2028 U+2029),
// groups ( ), (?: ) and named groups (?<name> ) (?P<name> ) (captures
// are irrelevant to matching), alternation |, quantifiers * + ? {m}
// {m,} {m,n} and their lazy forms (laziness does not change which
// strings match), and the anchors ^ at the start and $ at the end of the
// pattern or of any top-level alternative ("^a|b$" is fine). Anything else
// (backreferences, lookaround, \b \B, inner anchors, possessive
// quantifiers, atomic groups, Unicode property escapes, inline flags,
// POSIX classes, the empty class "[]") is refused with kUnimplemented
// naming the construct and its offset in the pattern. A '{' that begins
// no quantifier, a lone surrogate escape and a pattern that is not UTF-8
// are kInvalidArgument.
#ifndef FOLIO_GRAMMAR_REGEX_H_
#define FOLIO_GRAMMAR_REGEX_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "folio/core/status.h"

namespace folio::grammar {

struct RegexOptions {
  // false: the pattern must match the whole text (as vLLM's `regex`
  // output and Python's re.fullmatch). true: JSON Schema's `pattern`,
  // which matches anywhere unless anchored; a missing ^ or $ lets any
  // text come before or after (in json_string mode, any JSON string
  // content, optional escapes such as \/ and \u0041 included).
  bool search = false;
  // true: the expression matches the text as it appears inside a JSON
  // string (between the quotes, which it does not include): characters
  // that JSON requires escaped (", \ and U+0000..U+001F) appear as their
  // escapes (\" \\ \b \f \n \r \t, else \u00XX, lower or upper hex), and
  // every other character as itself (a text written with an optional
  // escape such as \/ or \u0041 is not produced).
  bool json_string = false;
  // m and n in {m,n}; larger is kOutOfRange. Keep it within
  // GrammarLimits::max_repeat, or the GBNF will not compile.
  uint64_t max_repeat = 1000;
  // The GBNF produced, and also its size with every bounded repeat written
  // out (the grammar compiler expands x{m,n} into n copies of x), so that
  // nested repeats such as (a{1000}){1000} are refused here, quickly.
  // Groups nested deeper than 256 are refused too. kResourceExhausted.
  uint64_t max_output_bytes = uint64_t{1} << 20;
};

// One parenthesized GBNF expression with no rule references (grammar.h's
// notation, fit to stand anywhere a rule body or an item of one may, e.g.
// `root ::= <it>`), never repeating anything that matches the empty text,
// that matches exactly the texts the pattern matches, under `options`.
// Errors: kInvalidArgument for a malformed pattern (naming the offset),
// kUnimplemented as above, kOutOfRange / kResourceExhausted for a limit
// passed (naming it).
Result<std::string> RegexToGbnf(std::string_view pattern, const RegexOptions& options = {});

}  // namespace folio::grammar

#endif  // FOLIO_GRAMMAR_REGEX_H_
