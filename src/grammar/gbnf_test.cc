// Grammar::FromGbnf and Grammar::Matches: the GBNF dialect of llama.cpp
// (literals and their escapes, classes and their complements, `.`,
// grouping, alternation, repetition, comments, rules across lines,
// recursion), the llama.cpp JSON grammar on valid and invalid documents,
// refusals (one test per kind of bad input, each naming where or what),
// the GrammarLimits, and the size accessors.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/printable.h"
#include "folio/grammar/grammar.h"
#include "grammar/compiled.h"
#include "grammar/test_grammars.h"

namespace folio::grammar {
namespace {

// The compiled grammar; null (with a test failure) if it is refused.
std::shared_ptr<const Grammar> Compile(std::string_view gbnf, const GrammarLimits& limits = {}) {
  Result<std::shared_ptr<const Grammar>> g = Grammar::FromGbnf(gbnf, limits);
  EXPECT_TRUE(g.ok()) << Printable(gbnf) << ": " << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

// Expects every text in `yes` to match and every text in `no` not to.
void ExpectMatches(std::string_view gbnf, const std::vector<std::string>& yes,
                   const std::vector<std::string>& no) {
  std::shared_ptr<const Grammar> g = Compile(gbnf);
  ASSERT_NE(g, nullptr);
  for (const std::string& t : yes) {
    EXPECT_TRUE(g->Matches(t)) << Printable(gbnf) << "\nshould accept \"" << Printable(t) << "\"";
  }
  for (const std::string& t : no) {
    EXPECT_FALSE(g->Matches(t)) << Printable(gbnf) << "\nshould reject \"" << Printable(t) << "\"";
  }
}

// The error of a grammar expected to be refused (ok, with a test failure,
// if it compiles).
Status Refusal(std::string_view gbnf, const GrammarLimits& limits = {}) {
  Result<std::shared_ptr<const Grammar>> g = Grammar::FromGbnf(gbnf, limits);
  EXPECT_FALSE(g.ok()) << "compiled, but should be refused:\n" << Printable(gbnf);
  return g.status();
}

// Whether `message` names line `line`, as "<line>:<col>" or "line <line>".
bool NamesLine(const std::string& message, int line) {
  const std::string n = std::to_string(line);
  for (size_t at = message.find(n); at != std::string::npos; at = message.find(n, at + 1)) {
    const bool digit_before = at > 0 && message[at - 1] >= '0' && message[at - 1] <= '9';
    const size_t after = at + n.size();
    if (digit_before) continue;
    if (after < message.size() && message[after] == ':') return true;
    if (at >= 5 && message.compare(at - 5, 5, "line ") == 0 &&
        (after == message.size() || message[after] < '0' || message[after] > '9')) {
      return true;
    }
  }
  return false;
}

void ExpectInvalidAt(std::string_view gbnf, int line) {
  const Status s = Refusal(gbnf);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << Printable(gbnf) << ": " << s.ToString();
  EXPECT_TRUE(NamesLine(s.message(), line))
      << "line " << line << " not named in: " << s.message() << "\n"
      << Printable(gbnf);
}

void ExpectInvalidNaming(std::string_view gbnf, std::string_view name) {
  const Status s = Refusal(gbnf);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << Printable(gbnf) << ": " << s.ToString();
  EXPECT_NE(s.message().find(name), std::string::npos)
      << "'" << name << "' not in: " << s.message() << "\n"
      << Printable(gbnf);
}

void ExpectCode(std::string_view gbnf, StatusCode code, const GrammarLimits& limits = {}) {
  const Status s = Refusal(gbnf, limits);
  EXPECT_EQ(s.code(), code) << Printable(gbnf) << ": " << s.ToString();
}

// ---------------------------------------------------------------------------
// Literals.

TEST(Gbnf, LiteralMatchesExactlyItsText) {
  ExpectMatches(R"g(root ::= "hello")g", {"hello"}, {"", "hell", "hello!", "Hello", "hhello"});
}

TEST(Gbnf, LiteralSingleCharacterEscapes) {
  ExpectMatches(R"g(root ::= "\n\r\t\\\"\'\[\]\-\/")g", {"\n\r\t\\\"'[]-/"},
                {"", "\\n\\r\\t\\\\\\\"\\'\\[\\]\\-\\/", "nrt\\\"'[]-/", "\n\r\t\\\"'[]-"});
}

TEST(Gbnf, LiteralHexAndUnicodeEscapesAreCodePointsInUtf8) {
  // \xHH, \uHHHH and \UHHHHHHHH name code points; the text holds their UTF-8.
  ExpectMatches(R"g(root ::= "\x41\u00e9\U0001F600\u4E2D")g",
                {"A\xc3\xa9\xf0\x9f\x98\x80\xe4\xb8\xad"},
                {"A\xe9\xf0\x9f\x98\x80\xe4\xb8\xad", "\\x41\\u00e9\\U0001F600\\u4E2D", "A"});
  ExpectMatches(R"g(root ::= "\xe9")g", {"\xc3\xa9"}, {"\xe9", "e", ""});
}

TEST(Gbnf, LiteralHoldsRawUtf8) {
  ExpectMatches("root ::= \"caf\xc3\xa9 \xe4\xb8\xad\"", {"caf\xc3\xa9 \xe4\xb8\xad"},
                {"cafe \xe4\xb8\xad", "caf\xc3\xa9 ", "caf\xc3 \xe4\xb8\xad"});
}

TEST(Gbnf, EmptyLiteralMatchesNothing) {
  ExpectMatches(R"g(root ::= "a" "" "b")g", {"ab"}, {"a", "b", "a b", ""});
}

// ---------------------------------------------------------------------------
// Classes, complements and `.`.

TEST(Gbnf, ClassWithRanges) {
  ExpectMatches(R"g(root ::= [a-cx0-9_])g", {"a", "b", "c", "x", "0", "5", "9", "_"},
                {"", "d", "w", "y", "A", "-", "ab", "00"});
}

TEST(Gbnf, ClassWithEscapes) {
  ExpectMatches(R"g(root ::= [\]\[\-\\\n\t\x41\u00e9\/\"])g",
                {"]", "[", "-", "\\", "\n", "\t", "A", "\xc3\xa9", "/", "\""},
                {"a", "n", "t", "x", "u", "\xe9", "\xc3", "\r", "B"});
}

TEST(Gbnf, ClassOfRawMultiByteCharactersIsOfCodePoints) {
  // A class holds code points, not bytes: "é" is one member, never "\xc3".
  ExpectMatches("root ::= [\xc3\xa9\xe4\xb8\xad]", {"\xc3\xa9", "\xe4\xb8\xad"},
                {"\xc3", "\xa9", "\xe4\xb8", "\xc3\xa9\xc3\xa9", "\xc3\xad", "\xe4\xb8\xa9", "e"});
}

TEST(Gbnf, ClassRangeOverNonAsciiCodePoints) {
  // U+00E0..U+00FF: c3 a0 .. c3 bf.
  ExpectMatches(R"g(root ::= [\u00e0-\u00ff])g", {"\xc3\xa0", "\xc3\xa9", "\xc3\xbf"},
                {"\xc3\x9f", "\xc4\x80", "\xe9", "\xc3", "a"});
}

TEST(Gbnf, ClassRangeAcrossEncodingLengths) {
  // U+0070..U+0800 spans one-, two- and three-byte encodings.
  ExpectMatches(R"g(root ::= [\x70-\u0800])g",
                {"p", "z", "\x7f", "\xc2\x80", "\xc3\xa9", "\xdf\xbf", "\xe0\xa0\x80"},
                {"o", "\xe0\xa0\x81", "\xc2", "\xe0\xa0", "\xc0\xb0"});
}

TEST(Gbnf, NegatedClassIsComplementOverScalarValues) {
  ExpectMatches(
      R"g(root ::= [^a-c])g",
      {"d", std::string(1, '\0'), "\x7f", "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80",
       "\xed\x9f\xbf" /* U+D7FF */, "\xee\x80\x80" /* U+E000 */, "\xf4\x8f\xbf\xbf" /* U+10FFFF */},
      {"a", "b", "c", "", "dd", "\xc3\xa9\xc3\xa9", "\xed\xa0\x80" /* U+D800, a surrogate */,
       "\xed\xbf\xbf" /* U+DFFF */, "\xff", "\xc3" /* truncated */, "\xa9" /* lone continuation */,
       "\xf4\x90\x80\x80" /* past U+10FFFF */, "\xc0\x80" /* overlong */,
       "\xe0\x80\x80" /* overlong */});
}

TEST(Gbnf, NegatedClassOfMultiByteCharacter) {
  ExpectMatches(R"g(root ::= [^\u00e9])g", {"e", "\xc3\xa8", "\xc3\xaa", "\xc4\xa9"},
                {"\xc3\xa9", "\xc3", ""});
}

TEST(Gbnf, DotIsAnyOneCodePoint) {
  ExpectMatches(
      R"g(root ::= .)g",
      {"a", "\n", std::string(1, '\0'), "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80",
       "\xf4\x8f\xbf\xbf"},
      {"", "ab", std::string("\xc3\xa9") + "a", "\xff", "\xfe", "\xc3", "\x80", "\xed\xa0\x80",
       "\xc0\x80", "\xe0\x80\x80", "\xf0\x80\x80\x80", "\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80"});
}

TEST(Gbnf, TwoDotsAreTwoCodePointsNotTwoBytes) {
  ExpectMatches(R"g(root ::= ..)g",
                {"ab", std::string("\xc3\xa9") + "a", "\xe4\xb8\xad\xc3\xa9", "\xc3\xa9\xc3\xa9"},
                {"\xc3\xa9", "a", "abc", "\xe4\xb8\xad", "\xff\xff"});
}

// ---------------------------------------------------------------------------
// Grouping, alternation, repetition.

TEST(Gbnf, GroupingAndAlternation) {
  ExpectMatches(R"g(root ::= "a" ("b" | "cd") "e" | "f")g", {"abe", "acde", "f"},
                {"ae", "abcde", "fe", "", "abe f", "acd"});
}

TEST(Gbnf, EmptyAlternatives) {
  ExpectMatches(R"g(root ::= "a" | )g", {"a", ""}, {"aa", "b"});
  ExpectMatches(R"g(root ::= | "a")g", {"a", ""}, {"aa", "b"});
  ExpectMatches(R"g(root ::= ( | "x") "y")g", {"y", "xy"}, {"x", "", "xxy"});
}

TEST(Gbnf, StarPlusQuestion) {
  ExpectMatches(R"g(root ::= "a"* "b"+ "c"?)g", {"b", "aab", "abbbc", "bc", "aaaabbbb"},
                {"", "a", "ac", "abcc", "ba", "c"});
}

TEST(Gbnf, BoundedRepetition) {
  ExpectMatches(R"g(root ::= "a"{3})g", {"aaa"}, {"", "aa", "aaaa"});
  ExpectMatches(R"g(root ::= "a"{2,})g", {"aa", "aaa", "aaaaaaaaaa"}, {"", "a"});
  ExpectMatches(R"g(root ::= "a"{1,3})g", {"a", "aa", "aaa"}, {"", "aaaa"});
  ExpectMatches(R"g(root ::= "a"{0,2} "b")g", {"b", "ab", "aab"}, {"aaab", "a"});
}

TEST(Gbnf, ZeroRepetitionMatchesOnlyTheEmptyString) {
  ExpectMatches(R"g(root ::= "b" "a"{0})g", {"b"}, {"ba", "", "a"});
  ExpectMatches(R"g(root ::= "b" "a"{0,0})g", {"b"}, {"ba", "", "a"});
  ExpectMatches(R"g(root ::= "a"{0})g", {""}, {"a"});
}

TEST(Gbnf, QuantifiersApplyToGroupsClassesRulesAndDot) {
  ExpectMatches(R"g(root ::= ("ab" | "c"){2} digit{2,3} .{1}
digit ::= [0-9])g",
                {"abab12z", "cab123\xc3\xa9", "cc12\xc3\xa9", "abc999."},
                {"ab12z", "abab1z", "abab12", "abab12345z", "ababab12z", "cc12\xc3"});
}

TEST(Gbnf, NestedGroups) {
  ExpectMatches(R"g(root ::= ("a" ("b" | "c")+ ("d" ("e")?)*)+)g",
                {"ab", "acbd", "abdede", "abcdeacd", "acccdddd"},
                {"", "a", "ad", "abee", "bd", "abdee"});
}

TEST(Gbnf, RuleReferencedBeforeItsDefinition) {
  ExpectMatches(R"g(root ::= greeting " " name
name ::= "world" | "folio"
greeting ::= "hello" | "hi")g",
                {"hello world", "hi folio"}, {"hello", "world hello", "hi  folio"});
}

TEST(Gbnf, RuleNamesWithDigitsDashesAndUnderscores) {
  ExpectMatches(R"g(root ::= my-rule_2 Rule3
my-rule_2 ::= "x"
Rule3 ::= "y")g",
                {"xy"}, {"x", "y", "yx"});
}

TEST(Gbnf, CommentsRunToTheEndOfTheLine) {
  ExpectMatches(R"g(# a leading comment
root ::= "a" rest  # a trailing comment with "quotes", | and ::=
# between rules
rest ::= "#" | "b"   # "#" inside a literal is text
# a last comment without a line break)g",
                {"a#", "ab"}, {"a", "a#b", "a# a trailing comment"});
}

TEST(Gbnf, RuleSpansLinesInsideParenthesesAndAfterBar) {
  ExpectMatches(R"g(
root ::= (
    "a"
    "b"
  ) |
  "c"

other ::= "d"
)g",
                {"ab", "c"}, {"abc", "d", "a", "", "a\nb"});
}

TEST(Gbnf, RuleEndsAtLineBreakOutsideParentheses) {
  ExpectMatches("root ::= \"a\"\nb ::= \"c\"", {"a"}, {"ac", "c"});
}

TEST(Gbnf, MultipleRulesShareDefinitions) {
  ExpectMatches(R"g(root ::= pair ("," pair)*
pair ::= key "=" val
key ::= [a-z]+
val ::= [0-9]+ | key)g",
                {"a=1", "ab=12,c=d", "x=y,y=z,z=0"}, {"", "a=", "=1", "a=1,", "A=1", "a=1;b=2"});
}

TEST(Gbnf, BalancedParenthesesByRecursion) {
  ExpectMatches(R"g(root ::= "(" root ")" | "")g", {"", "()", "(())", "((()))", "(((((())))))"},
                {"(", ")", ")(", "(()", "())", "()()", "(()())"});
}

TEST(Gbnf, RightAndNestedRecursion) {
  ExpectMatches(R"g(root ::= "a" root | "a")g", {"a", "aaaaa"}, {"", "b", "aab"});
  ExpectMatches(R"g(root ::= expr
expr ::= term ("+" term)*
term ::= [0-9] | "(" expr ")")g",
                {"1", "1+2", "1+(2+3)", "((1))", "(1+(2+(3)))+4"},
                {"", "(1", "1+", "+1", "()", "1++2", "(1))"});
  ExpectMatches(R"g(root ::= pair*
pair ::= "(" inner ")"
inner ::= pair*)g",
                {"", "()", "()()", "(()())", "((())())"}, {"(", "())", ")("});
}

// ---------------------------------------------------------------------------
// The llama.cpp JSON grammar.

TEST(Gbnf, JsonGrammarAcceptsJsonDocuments) {
  ExpectMatches(kJsonGrammar,
                {
                    "{}", "{} ", "{ }", R"({"a": 1})", R"({"a":1})", R"({"a": 1, "b": "two"})",
                    R"({"a": [1, 2.5, -3e5, 0, -0, 1.25E+1, 7e-1, true, false, null]})",
                    R"({"nested": {"deeper": {"list": [[], [{}], [[1]]]}}})",
                    R"({"esc": "q\"b\\sn\n\r\t\b\f\u00e9\u4E2D"})",
                    "{\"utf8\": \"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80\"}",
                    "{\n  \"a\": 1,\n  \"b\": [\n    true\n  ]\n}", "{\n\t\"tab\": null\n}\n",
                    R"({"big": 1234567890123456, "neg": -12.5})", R"({"": ""})",
                    R"({"a": "\/"})",  // JSON's optional escape of /
                },
                {
                    "",
                    "[]",  // the root is an object
                    "1",
                    R"("a")",
                    "{",
                    "}",
                    R"({"a" 1})",
                    R"({"a": 1,})",
                    R"({"a": 01})",
                    R"({"a": 1.})",
                    R"({"a": .5})",
                    R"({"a": +1})",
                    R"({"a": 1e})",
                    R"({"a": tru})",
                    R"({"a": True})",
                    R"({"a": 1}})",
                    R"({a: 1})",
                    R"({'a': 1})",
                    R"({"a":  1})",  // ws is at most one space
                    R"({"a": [1 2]})",
                    R"({"a": [1,]})",
                    R"({"a": "\q"})",
                    R"({"a": "\u12"})",
                    R"({"a": "\u12G4"})",
                    "{\"a\": \"raw\ncontrol\"}",
                    "{\"a\": \"\x01\"}",
                    "{\"a\": \"\x7f\"}",
                    "{\"a\": \"\xff\"}",
                    "{\"a\": \"unterminated}",
                    R"({"a": 12345678901234567})",  // at most 16 digits
                });
}

// ---------------------------------------------------------------------------
// Refusals: one test per kind.

TEST(GbnfRefusal, UnterminatedLiteralNamesTheLine) {
  ExpectInvalidAt("root ::= a\na ::= \"abc", 2);
}

TEST(GbnfRefusal, MissingDefinitionOperatorNamesTheLine) {
  ExpectInvalidAt("root ::= a\na \"x\"", 2);
  ExpectInvalidAt("root ::= a\n\na := \"x\"", 3);
}

TEST(GbnfRefusal, UnclosedParenthesisIsInvalidArgument) {
  ExpectCode("root ::= (\"a\" \"b\"", StatusCode::kInvalidArgument);
  ExpectCode("root ::= ((\"a\") \"b\"\n", StatusCode::kInvalidArgument);
}

TEST(GbnfRefusal, UnopenedParenthesisNamesTheLine) {
  ExpectInvalidAt("root ::= a\na ::= \"x\")", 2);
}

TEST(GbnfRefusal, UnknownEscapeNamesTheLine) {
  ExpectInvalidAt("root ::= a\na ::= \"\\q\"", 2);
  ExpectInvalidAt("root ::= a\na ::= [\\q]", 2);
}

TEST(GbnfRefusal, ShortOrNonHexEscapeNamesTheLine) {
  ExpectInvalidAt("root ::= a\na ::= \"\\x4\"", 2);
  ExpectInvalidAt("root ::= a\na ::= \"\\xZZ\"", 2);
  ExpectInvalidAt("root ::= a\na ::= \"\\u12\"", 2);
  ExpectInvalidAt("root ::= a\na ::= \"\\U0001F6\"", 2);
}

TEST(GbnfRefusal, EscapeBeyondUnicodeIsInvalidArgument) {
  ExpectCode(R"g(root ::= "\U00110000")g", StatusCode::kInvalidArgument);
}

TEST(GbnfRefusal, ReversedClassRangeNamesTheLine) {
  ExpectInvalidAt("root ::= a\na ::= [z-a]", 2);
  ExpectInvalidAt("root ::= a\na ::= [\\u0100-\\x41]", 2);
}

TEST(GbnfRefusal, UnterminatedClassIsInvalidArgument) {
  ExpectCode("root ::= [abc", StatusCode::kInvalidArgument);
  ExpectCode("root ::= [", StatusCode::kInvalidArgument);
  ExpectCode("root ::= [^", StatusCode::kInvalidArgument);
}

TEST(GbnfRefusal, QuantifierWithNothingToRepeatIsInvalidArgument) {
  ExpectCode(R"g(root ::= *"a")g", StatusCode::kInvalidArgument);
  ExpectCode(R"g(root ::= "a" | +)g", StatusCode::kInvalidArgument);
  ExpectCode(R"g(root ::= ({2} "a"))g", StatusCode::kInvalidArgument);
}

TEST(GbnfRefusal, RepetitionWithMaxBelowMinIsInvalidArgument) {
  ExpectCode(R"g(root ::= "a"{3,2})g", StatusCode::kInvalidArgument);
}

TEST(GbnfRefusal, MalformedBracesAreInvalidArgument) {
  ExpectCode(R"g(root ::= "a"{)g", StatusCode::kInvalidArgument);
  ExpectCode(R"g(root ::= "a"{x})g", StatusCode::kInvalidArgument);
  ExpectCode(R"g(root ::= "a"{1,2)g", StatusCode::kInvalidArgument);
}

TEST(GbnfRefusal, UnexpectedCharacterNamesTheLine) {
  ExpectInvalidAt("root ::= a\na ::= \"x\" @", 2);
}

TEST(GbnfRefusal, UndefinedRuleIsNamed) {
  ExpectInvalidNaming("root ::= \"a\" undefined-thing", "undefined-thing");
  ExpectInvalidNaming("root ::= item\nitem ::= (\"x\" missing_rule2)*", "missing_rule2");
}

TEST(GbnfRefusal, MissingRootIsRefused) {
  ExpectInvalidNaming("start ::= \"a\"", "root");
  ExpectInvalidNaming("", "root");
  ExpectInvalidNaming("# only a comment\n", "root");
}

TEST(GbnfRefusal, DuplicateRuleDefinitionIsRefused) {
  const Status s = Refusal("root ::= item\nitem ::= \"a\"\nitem ::= \"b\"");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_TRUE(s.message().find("item") != std::string::npos || NamesLine(s.message(), 3))
      << s.message();
  ExpectCode("root ::= \"a\"\nroot ::= \"b\"", StatusCode::kInvalidArgument);
}

// Token references (token_reference_test.cc has the rest): by text only
// with a vocabulary; never negated.
TEST(GbnfRefusal, TokenNamedByTextWithoutAVocabularyAndNegatedTokensAreRefused) {
  ExpectCode(R"g(root ::= <think> "a")g", StatusCode::kInvalidArgument);
  ExpectCode(R"g(root ::= !<[1234]>)g", StatusCode::kInvalidArgument);
  EXPECT_NE(Compile(R"g(root ::= <[1234]> "a")g"), nullptr);
}

TEST(GbnfRefusal, DirectLeftRecursionIsRefusedNamingTheRule) {
  ExpectInvalidNaming("root ::= list\nlist ::= list \"a\" | \"b\"", "list");
  ExpectCode(R"g(root ::= root "a" | "b")g", StatusCode::kInvalidArgument);
  ExpectCode(R"g(root ::= "b" | (root "a"))g", StatusCode::kInvalidArgument);
}

TEST(GbnfRefusal, IndirectLeftRecursionIsRefusedNamingARule) {
  const Status s = Refusal("root ::= alpha\nalpha ::= beta \"x\"\nbeta ::= alpha | \"y\"");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_TRUE(s.message().find("alpha") != std::string::npos ||
              s.message().find("beta") != std::string::npos)
      << s.message();
}

TEST(GbnfRefusal, LeftRecursionThroughNullablePrefixIsRefused) {
  ExpectInvalidNaming("root ::= expr\nexpr ::= opt expr \"a\" | \"b\"\nopt ::= \"\" | \"c\"",
                      "expr");
  for (const char* g : {
           R"g(root ::= "x"? root "a" | "b")g",
           R"g(root ::= "x"* root "a" | "b")g",
           R"g(root ::= "x"{0,3} root "a" | "b")g",
           R"g(root ::= ("" | "c") root "a" | "b")g",
           "root ::= e f root | \"b\"\ne ::= \"x\"?\nf ::= | \"y\"",
       }) {
    ExpectCode(g, StatusCode::kInvalidArgument);
  }
}

TEST(GbnfRefusal, UnboundedRepetitionOfAnEmptyMatchIsRefused) {
  for (const char* g : {
           R"g(root ::= ("a"?)*)g",
           R"g(root ::= ("a"?)+)g",
           R"g(root ::= ("a"*)*)g",
           R"g(root ::= ("a"?){2,})g",
           R"g(root ::= ("")*)g",
           R"g(root ::= "b" (| "a")+)g",
           "root ::= e*\ne ::= \"a\" | \"\"",
       }) {
    ExpectCode(g, StatusCode::kInvalidArgument);
  }
}

TEST(GbnfRefusal, InvalidUtf8InTheSourceIsRefused) {
  for (const char* g : {
           "root ::= \"\xff\"",
           "root ::= \"\xc3\"",                // truncated
           "root ::= [\xc3]",                  // truncated, in a class
           "root ::= \"\xed\xa0\x80\"",        // an encoded surrogate
           "root ::= \"\xc0\xaf\"",            // overlong
           "root ::= \"a\" # comment \xfe\n",  // anywhere in the source
       }) {
    ExpectCode(g, StatusCode::kInvalidArgument);
  }
}

// ---------------------------------------------------------------------------
// Limits.

TEST(GbnfLimits, SourceOverMaxSourceBytesIsResourceExhausted) {
  const std::string gbnf = R"g(root ::= "abcdefghijklmnop")g";
  GrammarLimits limits;
  limits.max_source_bytes = 16;
  ExpectCode(gbnf, StatusCode::kResourceExhausted, limits);
  limits.max_source_bytes = gbnf.size();
  EXPECT_NE(Compile(gbnf, limits), nullptr);
}

TEST(GbnfLimits, MoreRulesThanMaxRulesIsResourceExhausted) {
  std::string gbnf = "root ::= r0";
  for (int i = 0; i < 20; ++i) {
    gbnf += "\nr" + std::to_string(i) + " ::= \"x\" r" + std::to_string(i + 1);
  }
  gbnf += "\nr20 ::= \"y\"";
  GrammarLimits limits;
  limits.max_rules = 8;
  ExpectCode(gbnf, StatusCode::kResourceExhausted, limits);
  std::shared_ptr<const Grammar> g = Compile(gbnf);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->Matches(std::string(20, 'x') + "y"));
}

TEST(GbnfLimits, MoreElementsThanMaxElementsIsResourceExhausted) {
  const std::string gbnf = R"g(root ::= "abcdefghijklmnopqrstuvwxyz" [0-9]{10})g";
  GrammarLimits limits;
  limits.max_elements = 16;
  ExpectCode(gbnf, StatusCode::kResourceExhausted, limits);
  EXPECT_NE(Compile(gbnf), nullptr);
}

TEST(GbnfLimits, RepeatCountOverMaxRepeatIsResourceExhausted) {
  ExpectCode(R"g(root ::= "a"{20000})g", StatusCode::kResourceExhausted);
  ExpectCode(R"g(root ::= "a"{1,20000})g", StatusCode::kResourceExhausted);
  ExpectCode(R"g(root ::= "a"{20000,})g", StatusCode::kResourceExhausted);
  GrammarLimits limits;
  limits.max_repeat = 4;
  ExpectCode(R"g(root ::= "a"{5})g", StatusCode::kResourceExhausted, limits);
  ExpectCode(R"g(root ::= "a"{0,5})g", StatusCode::kResourceExhausted, limits);
  std::shared_ptr<const Grammar> g = Compile(R"g(root ::= "a"{4})g", limits);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->Matches("aaaa"));
  EXPECT_NE(Compile(R"g(root ::= "a"{0,4})g", limits), nullptr);
}

TEST(GbnfLimits, HugeRepeatCountIsRefused) {
  const Status s = Refusal(R"g(root ::= "a"{99999999999999999999999})g");
  EXPECT_TRUE(s.code() == StatusCode::kResourceExhausted ||
              s.code() == StatusCode::kInvalidArgument)
      << s.ToString();
}

TEST(GbnfLimits, NestedRepetitionStaysWithinMaxElements) {
  // Expanded naively this is 10^12 elements; either it is shared enough to
  // fit the limit or it is refused as too large, never built.
  const std::string gbnf = R"g(root ::= (("a"{10000}){10000}){10000})g";
  Result<std::shared_ptr<const Grammar>> g = Grammar::FromGbnf(gbnf);
  if (g.ok()) {
    EXPECT_LE((*g)->num_elements(), GrammarLimits{}.max_elements);
  } else {
    EXPECT_EQ(g.status().code(), StatusCode::kResourceExhausted) << g.status().ToString();
  }
}

TEST(GbnfLimits, DeepParenthesesAreRefusedWithoutOverflowingTheStack) {
  constexpr int kDepth = 100000;
  const std::string gbnf =
      "root ::= " + std::string(kDepth, '(') + "\"a\"" + std::string(kDepth, ')');
  const Status s = Refusal(gbnf);
  EXPECT_TRUE(s.code() == StatusCode::kResourceExhausted ||
              s.code() == StatusCode::kInvalidArgument)
      << s.ToString();
}

TEST(GbnfLimits, ModeratelyNestedParenthesesCompile) {
  constexpr int kDepth = 50;
  const std::string gbnf =
      "root ::= " + std::string(kDepth, '(') + "\"a\"" + std::string(kDepth, ')') + "+";
  std::shared_ptr<const Grammar> g = Compile(gbnf);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->Matches("aaa"));
  EXPECT_FALSE(g->Matches(""));
}

TEST(GbnfLimits, LongRuleChainCompilesAndMatches) {
  constexpr int kRules = 5000;
  std::string gbnf = "root ::= r0";
  for (int i = 0; i < kRules; ++i) {
    gbnf += "\nr" + std::to_string(i) + " ::= r" + std::to_string(i + 1);
  }
  gbnf += "\nr" + std::to_string(kRules) + " ::= \"x\"";
  std::shared_ptr<const Grammar> g = Compile(gbnf);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->Matches("x"));
  EXPECT_FALSE(g->Matches("xx"));
  EXPECT_FALSE(g->Matches(""));
}

// ---------------------------------------------------------------------------
// Sizes.

TEST(Gbnf, RuleAndElementCountsGrowWithTheGrammar) {
  std::shared_ptr<const Grammar> small = Compile(R"g(root ::= "a")g");
  std::shared_ptr<const Grammar> larger = Compile(R"g(root ::= "a" b c
b ::= "c" | "d"
c ::= "efgh" b)g");
  std::shared_ptr<const Grammar> json = Compile(kJsonGrammar);
  ASSERT_NE(small, nullptr);
  ASSERT_NE(larger, nullptr);
  ASSERT_NE(json, nullptr);
  EXPECT_GT(small->num_rules(), 0u);
  EXPECT_GT(small->num_elements(), 0u);
  EXPECT_GT(larger->num_rules(), small->num_rules());
  EXPECT_GT(larger->num_elements(), small->num_elements());
  EXPECT_GT(json->num_rules(), larger->num_rules());
  EXPECT_GT(json->num_elements(), larger->num_elements());
  // The accessors describe the compiled form.
  EXPECT_EQ(json->num_rules(), json->compiled().rule_alternatives.size());
  EXPECT_EQ(json->num_elements(), json->compiled().elements.size());
}

}  // namespace
}  // namespace folio::grammar
