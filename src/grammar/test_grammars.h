// Grammars the grammar module's tests share.
#ifndef FOLIO_GRAMMAR_TEST_GRAMMARS_H_
#define FOLIO_GRAMMAR_TEST_GRAMMARS_H_

namespace folio::grammar {

// JSON (RFC 8259) in GBNF, written in the style of llama.cpp's example
// grammars (rules spanning lines inside parentheses, an empty alternative,
// comments, bounded repeats): objects, arrays, strings with every escape,
// numbers with up to 16 integer digits, and whitespace of at most one
// newline and 20 spaces or tabs after each token.
inline constexpr char kJsonGrammar[] = R"g(
root    ::= object
value   ::= object | array | string | number | literal
literal ::= ("true" | "false" | "null") ws

object  ::= "{" ws (
              member
              ("," ws member)*
            )? "}" ws
member  ::= string ":" ws value

array   ::= "[" ws (
              value
              ("," ws value)*
            )? "]" ws

# any character but a quote, a backslash or a control character; or an escape
string  ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" escape )* "\"" ws
escape  ::= ["\\/bfnrt] | "u" [0-9a-fA-F]{4}

number  ::= "-"? ([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]+)? ([eE] [-+]? [0-9] [0-9]{0,15})? ws

ws      ::= | " " | "\n" [ \t]{0,20}
)g";

}  // namespace folio::grammar

#endif  // FOLIO_GRAMMAR_TEST_GRAMMARS_H_
