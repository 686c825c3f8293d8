// RegexToGbnf: refusals (one test per kind of bad input), the printed
// form where it is part of the contract, and acceptance through the GBNF
// compiler: fixed cases, json_string mode, and a randomized comparison
// with std::regex (ECMAScript) over a fixed list of patterns.
#include "folio/grammar/regex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/printable.h"
#include "folio/grammar/grammar.h"

namespace folio::grammar {
namespace {

RegexOptions Search() {
  RegexOptions o;
  o.search = true;
  return o;
}
RegexOptions Json(bool search = false) {
  RegexOptions o;
  o.json_string = true;
  o.search = search;
  return o;
}

Status Error(std::string_view pattern, const RegexOptions& options = {}) {
  return RegexToGbnf(pattern, options).status();
}

void ExpectError(std::string_view pattern, StatusCode code, const RegexOptions& options = {}) {
  const Status s = Error(pattern, options);
  EXPECT_EQ(s.code(), code) << "pattern " << pattern << ": " << s.ToString();
}

std::shared_ptr<const Grammar> Compile(std::string_view pattern, const RegexOptions& options) {
  Result<std::string> gbnf = RegexToGbnf(pattern, options);
  EXPECT_TRUE(gbnf.ok()) << pattern << ": " << gbnf.status().ToString();
  if (!gbnf.ok()) return nullptr;
  Result<std::shared_ptr<const Grammar>> grammar = Grammar::FromGbnf("root ::= " + *gbnf);
  EXPECT_TRUE(grammar.ok()) << pattern << " as " << *gbnf << ": " << grammar.status().ToString();
  return grammar.ok() ? *grammar : nullptr;
}

bool FullMatch(std::string_view pattern, std::string_view text, const RegexOptions& options = {}) {
  std::shared_ptr<const Grammar> g = Compile(pattern, options);
  return g != nullptr && g->Matches(text);
}

// The text as it appears between the quotes of a JSON string: the escapes
// JSON requires and no other, \u00XX in the case asked for.
std::string JsonEncode(std::string_view text, bool upper_hex) {
  std::string out;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          const char* digits = upper_hex ? "0123456789ABCDEF" : "0123456789abcdef";
          out += "\\u00";
          out += digits[c >> 4];
          out += digits[c & 0xF];
        } else {
          out += ch;
        }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Bad input: one test per kind.

TEST(RegexToGbnf, UnbalancedOpenParenIsInvalidArgumentNamingItsOffset) {
  const Status s = Error("x(ab");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("offset 1"), std::string::npos) << s.message();
  ExpectError("((a)", StatusCode::kInvalidArgument);
}

TEST(RegexToGbnf, UnbalancedCloseParenIsInvalidArgumentNamingItsOffset) {
  const Status s = Error("ab)");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("offset 2"), std::string::npos) << s.message();
  ExpectError("(a))", StatusCode::kInvalidArgument);
}

TEST(RegexToGbnf, ReversedClassRangeIsInvalidArgument) {
  ExpectError("[z-a]", StatusCode::kInvalidArgument);
  ExpectError("[\\u0100-\\x41]", StatusCode::kInvalidArgument);
}

TEST(RegexToGbnf, DanglingQuantifierIsInvalidArgument) {
  for (const char* p : {"*a", "+", "?", "a|*b", "(?:+a)", "a**", "a+*", "a{2}{3}", "{2}"}) {
    ExpectError(p, StatusCode::kInvalidArgument);
  }
}

TEST(RegexToGbnf, BraceThatBeginsNoQuantifierIsInvalidArgument) {
  for (const char* p : {"a{", "a{,3}", "{x}", "a{1,2", "a{b}"}) {
    ExpectError(p, StatusCode::kInvalidArgument);
  }
}

TEST(RegexToGbnf, BackreferenceIsUnimplemented) {
  for (const char* p : {"(a)\\1", "(a)\\9", "(?<x>a)\\k<x>", "(?P<x>a)(?P=x)", "[\\1]"}) {
    ExpectError(p, StatusCode::kUnimplemented);
  }
}

TEST(RegexToGbnf, LookaroundIsUnimplemented) {
  for (const char* p : {"(?=a)a", "(?!a)b", "(?<=a)b", "(?<!a)b"}) {
    ExpectError(p, StatusCode::kUnimplemented);
  }
}

TEST(RegexToGbnf, WordBoundaryIsUnimplemented) {
  ExpectError("\\bfoo", StatusCode::kUnimplemented);
  ExpectError("a\\Bb", StatusCode::kUnimplemented);
}

TEST(RegexToGbnf, InnerAnchorIsUnimplementedNamingItsOffset) {
  const Status s = Error("ab^c");
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("offset 2"), std::string::npos) << s.message();
  for (const char* p : {"a$b", "(^a)", "(a$)", "a(^b|c)", "a$*"}) {
    ExpectError(p, StatusCode::kUnimplemented);
  }
}

TEST(RegexToGbnf, RepeatBoundOverMaxRepeatIsOutOfRangeNamingTheBound) {
  const Status s = Error("a{1001}");
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("1001"), std::string::npos) << s.message();
  ExpectError("a{2,5000}", StatusCode::kOutOfRange);
  ExpectError("a{99999999999999999999999}", StatusCode::kOutOfRange);
  RegexOptions small;
  small.max_repeat = 10;
  ExpectError("a{11,}", StatusCode::kOutOfRange, small);
  EXPECT_TRUE(RegexToGbnf("a{10}", small).ok());
}

TEST(RegexToGbnf, QuantifierWithMinAboveMaxIsInvalidArgument) {
  ExpectError("a{3,2}", StatusCode::kInvalidArgument);
}

TEST(RegexToGbnf, UnterminatedClassIsInvalidArgument) {
  for (const char* p : {"[abc", "[a-", "[\\]", "[^", "["}) {
    ExpectError(p, StatusCode::kInvalidArgument);
  }
}

TEST(RegexToGbnf, MalformedEscapeIsInvalidArgument) {
  for (const char* p :
       {"\\u12", "\\x4", "\\xg0", "\\u{}", "\\u{110000}", "\\u{1234567}", "\\q", "a\\", "\\c1"}) {
    ExpectError(p, StatusCode::kInvalidArgument);
  }
}

TEST(RegexToGbnf, LoneSurrogateEscapeIsInvalidArgument) {
  ExpectError("\\uD800", StatusCode::kInvalidArgument);
  ExpectError("\\uDC00\\uD800", StatusCode::kInvalidArgument);
  ExpectError("\\u{DFFF}", StatusCode::kInvalidArgument);
}

TEST(RegexToGbnf, PatternThatIsNotUtf8IsInvalidArgument) {
  ExpectError("a\xff", StatusCode::kInvalidArgument);
  ExpectError("\xc3", StatusCode::kInvalidArgument);
}

TEST(RegexToGbnf, PossessiveQuantifierAndAtomicGroupAreUnimplemented) {
  for (const char* p : {"a*+", "a++", "a?+", "a{2}+", "(?>ab)"}) {
    ExpectError(p, StatusCode::kUnimplemented);
  }
}

TEST(RegexToGbnf, PropertyEscapesFlagsAndOtherExtensionsAreUnimplemented) {
  for (const char* p : {"\\p{L}", "\\P{Lu}", "(?i)a", "(?#x)a", "\\Aa", "a\\Z", "[[:alpha:]]"}) {
    ExpectError(p, StatusCode::kUnimplemented);
  }
}

TEST(RegexToGbnf, EmptyClassIsUnimplemented) {
  ExpectError("[]", StatusCode::kUnimplemented);
  ExpectError("a|[]b", StatusCode::kUnimplemented);
}

TEST(RegexToGbnf, BadGroupNameIsInvalidArgument) {
  ExpectError("(?<>a)", StatusCode::kInvalidArgument);
  ExpectError("(?<1a>a)", StatusCode::kInvalidArgument);
  ExpectError("(?<a", StatusCode::kInvalidArgument);
}

TEST(RegexToGbnf, DeepNestingIsResourceExhausted) {
  const std::string p = std::string(300, '(') + "a" + std::string(300, ')');
  ExpectError(p, StatusCode::kResourceExhausted);
  const std::string ok = std::string(100, '(') + "a" + std::string(100, ')');
  EXPECT_TRUE(RegexToGbnf(ok).ok());
}

TEST(RegexToGbnf, OutputOverMaxOutputBytesIsResourceExhausted) {
  RegexOptions o;
  o.max_output_bytes = 64;
  const Status s = Error(std::string(100, 'a'), o);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("max_output_bytes"), std::string::npos) << s.message();
  EXPECT_TRUE(RegexToGbnf(std::string(50, 'a'), o).ok());
}

TEST(RegexToGbnf, NestedBoundedRepeatIsRefusedQuicklyByItsExpansion) {
  const auto start = std::chrono::steady_clock::now();
  ExpectError("(a{1000}){1000}", StatusCode::kResourceExhausted);
  ExpectError("((a{1000}){1000}){1000}", StatusCode::kResourceExhausted);
  ExpectError("(((.{1000}){1000}){1000}){1000}", StatusCode::kResourceExhausted, Json());
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::seconds(1));
  EXPECT_TRUE(RegexToGbnf("(a{100}){100}").ok());
}

TEST(RegexToGbnf, LongNullableSequenceUnderStarIsBoundedByTheOutputLimit) {
  // (x?y?...)* needs every non-empty suffix written out: quadratic.
  std::string p = "(";
  for (int i = 0; i < 3000; ++i) p += "a?";
  p += ")*";
  const auto start = std::chrono::steady_clock::now();
  ExpectError(p, StatusCode::kResourceExhausted);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

// ---------------------------------------------------------------------------
// The printed form.

TEST(RegexToGbnf, OutputIsOneParenthesizedExpression) {
  for (const char* p : {"", "a", "a|b", "^a$", "(a|b)*c", "[^x]", "\\d{2,3}"}) {
    for (const RegexOptions& o : {RegexOptions{}, Search(), Json(), Json(true)}) {
      Result<std::string> g = RegexToGbnf(p, o);
      ASSERT_TRUE(g.ok()) << p << ": " << g.status().ToString();
      EXPECT_EQ(g->front(), '(') << *g;
      EXPECT_EQ(g->back(), ')') << *g;
      EXPECT_EQ(g->find("::="), std::string::npos) << *g;
    }
  }
}

TEST(RegexToGbnf, DotExcludesLineTerminators) {
  EXPECT_EQ(*RegexToGbnf("."), "([^\\n\\r\\u2028\\u2029])");
}

TEST(RegexToGbnf, LazyQuantifierPrintsLikeGreedy) {
  EXPECT_EQ(*RegexToGbnf("a*?b+?c??d{2,3}?(ef){2,}?"), *RegexToGbnf("a*b+c?d{2,3}(ef){2,}"));
}

TEST(RegexToGbnf, GroupKindsPrintLikePlainGroups) {
  EXPECT_EQ(*RegexToGbnf("(?:a|b)(?<n>c)+(?P<m>d)"), *RegexToGbnf("(a|b)(c)+(d)"));
}

TEST(RegexToGbnf, NonAsciiIsPrintedAsUnicodeEscapes) {
  EXPECT_EQ(*RegexToGbnf("\u00e9\\u{1F600}"), "(\"\\u00e9\\U0001f600\")");
}

TEST(RegexToGbnf, ClassMetacharactersAreEscapedInClasses) {
  EXPECT_EQ(*RegexToGbnf("[\\^\\]\\-\\[]"), "([\\-\\[\\]\\x5e])");
}

// ---------------------------------------------------------------------------
// Acceptance through the GBNF compiler.

TEST(RegexToGbnf, LiteralEscapesMatchTheirCharacters) {
  const char* p = "\\x41\\u00e9\\u{1F600}\\uD83D\\uDE00\\t\\n\\r\\f\\v\\0\\cJ\\/\\.\\\\";
  std::string text = "A\u00e9\U0001F600\U0001F600\t\n\r\f\v";
  text += '\0';
  text += "\n/.\\";
  EXPECT_TRUE(FullMatch(p, text));
}

TEST(RegexToGbnf, NonAsciiLiteralMatchesItsUtf8) {
  EXPECT_TRUE(FullMatch("caf\u00e9+", "caf\u00e9\u00e9"));
  EXPECT_FALSE(FullMatch("caf\u00e9+", "cafe"));
}

TEST(RegexToGbnf, ShorthandsCombineWithOtherClassMembers) {
  EXPECT_TRUE(FullMatch("[\\d_a-f]+", "09_af"));
  EXPECT_FALSE(FullMatch("[\\d_a-f]+", "g"));
}

TEST(RegexToGbnf, DashNextToShorthandInClassIsALiteralDash) {
  for (const char* text : {"a", "-", ".", "_"}) EXPECT_TRUE(FullMatch("[\\w-.]", text)) << text;
  EXPECT_TRUE(FullMatch("[%-\\d]", "-"));
  EXPECT_TRUE(FullMatch("[%-\\d]", "7"));
  EXPECT_FALSE(FullMatch("[%-\\d]", "&"));
}

TEST(RegexToGbnf, NegatedShorthandInsideClassIsItsComplement) {
  EXPECT_TRUE(FullMatch("[\\Dx]", "a"));
  EXPECT_TRUE(FullMatch("[\\D]", "\u00e9"));
  EXPECT_FALSE(FullMatch("[\\D]", "5"));
  EXPECT_FALSE(FullMatch("[^\\D]", "a"));
}

TEST(RegexToGbnf, WhiteSpaceShorthandIsEcmaScriptUnicodeWhiteSpace) {
  EXPECT_TRUE(FullMatch("\\s", "\u00a0"));
  EXPECT_TRUE(FullMatch("\\s", "\u3000"));
  EXPECT_TRUE(FullMatch("\\s", "\v"));
  EXPECT_FALSE(FullMatch("\\s", "\u200b"));
  EXPECT_TRUE(FullMatch("\\S", "\u200b"));
}

TEST(RegexToGbnf, DotMatchesAnyCharacterButALineTerminator) {
  EXPECT_TRUE(FullMatch(".", "\U0001F600"));
  EXPECT_FALSE(FullMatch(".", "\n"));
  EXPECT_FALSE(FullMatch(".", "\u2028"));
  EXPECT_TRUE(FullMatch("[^]", "\n"));
}

TEST(RegexToGbnf, RepeatOfWhatMatchesEmptyCompilesAndMatches) {
  EXPECT_TRUE(FullMatch("(a*)*", ""));
  EXPECT_TRUE(FullMatch("(a*)*", "aaa"));
  EXPECT_TRUE(FullMatch("(a|)+b", "aab"));
  EXPECT_TRUE(FullMatch("(a?b?)*c", "abbac"));
  EXPECT_TRUE(FullMatch("(a?){2,3}", "a"));
  EXPECT_FALSE(FullMatch("(a?){2,3}", "aaaa"));
  EXPECT_TRUE(FullMatch("(a{0}|b?)+", "bb"));
}

TEST(RegexToGbnf, EmptyPatternMatchesOnlyTheEmptyText) {
  EXPECT_TRUE(FullMatch("", ""));
  EXPECT_FALSE(FullMatch("", "a"));
  EXPECT_TRUE(FullMatch("^$", ""));
}

TEST(RegexToGbnf, FullMatchIgnoresAnchors) {
  EXPECT_TRUE(FullMatch("^ab$", "ab"));
  EXPECT_TRUE(FullMatch("^a|b$", "b"));
  EXPECT_FALSE(FullMatch("ab", "xab"));
}

TEST(RegexToGbnf, SearchLetsAnyTextSurroundAnUnanchoredPattern) {
  EXPECT_TRUE(FullMatch("b+", "a\nbbc", Search()));
  EXPECT_FALSE(FullMatch("b+", "ac", Search()));
  EXPECT_TRUE(FullMatch("^b", "bc", Search()));
  EXPECT_FALSE(FullMatch("^b", "ab", Search()));
  EXPECT_TRUE(FullMatch("b$", "ab", Search()));
  EXPECT_FALSE(FullMatch("b$", "bc", Search()));
  EXPECT_TRUE(FullMatch("", "anything", Search()));
}

TEST(RegexToGbnf, SearchAnchorsApplyPerTopLevelAlternative) {
  EXPECT_TRUE(FullMatch("^a|b$", "ax", Search()));
  EXPECT_TRUE(FullMatch("^a|b$", "xb", Search()));
  EXPECT_FALSE(FullMatch("^a|b$", "xa", Search()));
  EXPECT_FALSE(FullMatch("^a|b$", "bx", Search()));
}

TEST(RegexToGbnf, BoundedRepeatUpToMaxRepeatCompiles) {
  EXPECT_TRUE(FullMatch("[0-9]{1000}", std::string(1000, '7')));
  EXPECT_FALSE(FullMatch("[0-9]{1000}", std::string(999, '7')));
}

// ---------------------------------------------------------------------------
// json_string mode.

TEST(RegexToGbnf, JsonStringQuoteMatchesOnlyEscaped) {
  EXPECT_TRUE(FullMatch("^a\"b$", "a\\\"b", Json()));
  EXPECT_FALSE(FullMatch("^a\"b$", "a\"b", Json()));
  EXPECT_TRUE(FullMatch("\\\\", "\\\\", Json()));
  EXPECT_FALSE(FullMatch("\\\\", "\\", Json()));
}

TEST(RegexToGbnf, JsonStringDotDoesNotMatchAnEscapedNewline) {
  EXPECT_FALSE(FullMatch("^.$", "\\n", Json()));
  EXPECT_FALSE(FullMatch("^.$", "\\r", Json()));
  EXPECT_TRUE(FullMatch("^.$", "\\t", Json()));
  EXPECT_TRUE(FullMatch("^.$", "\\\"", Json()));
  EXPECT_TRUE(FullMatch("^.$", "\u00e9", Json()));
  EXPECT_FALSE(FullMatch("^.$", "\"", Json()));
  EXPECT_FALSE(FullMatch("^.$", "\t", Json()));
}

TEST(RegexToGbnf, JsonStringWhiteSpaceMatchesAnEscapedNewline) {
  EXPECT_TRUE(FullMatch("^[\\s]$", "\\n", Json()));
  EXPECT_FALSE(FullMatch("^[\\s]$", "\n", Json()));
  EXPECT_TRUE(FullMatch("^[\\s]$", "\\u000b", Json()));
  EXPECT_TRUE(FullMatch("^[\\s]$", " ", Json()));
}

TEST(RegexToGbnf, JsonStringOtherControlsUseUnicodeEscapesInEitherCase) {
  EXPECT_TRUE(FullMatch("\\x1a", "\\u001a", Json()));
  EXPECT_TRUE(FullMatch("\\x1a", "\\u001A", Json()));
  EXPECT_FALSE(FullMatch("\\x1a", "\x1a", Json()));
  EXPECT_TRUE(FullMatch("\\x01", "\\u0001", Json()));
  EXPECT_TRUE(FullMatch("\\x08", "\\b", Json()));
  EXPECT_FALSE(FullMatch("\\x08", "\\u0008", Json()));
}

TEST(RegexToGbnf, JsonStringDoesNotProduceOptionalEscapes) {
  EXPECT_TRUE(FullMatch("/A", "/A", Json()));
  EXPECT_FALSE(FullMatch("/A", "\\/A", Json()));
  EXPECT_FALSE(FullMatch("/A", "/\\u0041", Json()));
}

TEST(RegexToGbnf, JsonStringSearchAllowsAnyJsonStringTextAround) {
  EXPECT_TRUE(FullMatch("b", "a\\\"b\\u00e9\\/", Json(true)));
  EXPECT_FALSE(FullMatch("b", "a\"b", Json(true)));
  EXPECT_FALSE(FullMatch("b", "ab\\", Json(true)));
  // The escape \n is a newline, not an 'n'.
  EXPECT_FALSE(FullMatch("n", "\\n", Json(true)));
}

// ---------------------------------------------------------------------------
// Randomized comparison with std::regex (ECMAScript).

struct Differential {
  std::vector<const char*> patterns;
  std::string alphabet;
};

// Short random strings over `alphabet`, the same for every run.
std::vector<std::string> RandomTexts(const std::string& alphabet, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> length(0, 6);
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  std::vector<std::string> texts;
  for (int i = 0; i < 300; ++i) {
    std::string s;
    for (size_t n = length(rng); n > 0; --n) s += alphabet[pick(rng)];
    texts.push_back(s);
  }
  return texts;
}

const std::vector<const char*> kPatterns = {
    "",           "abc",      "a|b|c",      "a*",
    "a+b",        "(ab)*c",   "a?b?c?",     "(a|b)*abb",
    "[abc]+",     "[^ab]*",   "[a-c]{2,3}", "a{2}",
    "a{1,}b",     "(a*)*b",   "(a|b|)+c",   "(a?b?)*c",
    "(a?){2,3}b", "\\d+",     "\\w*\\s?",   "\\D\\W",
    "\\S+",       ".",        "a.c",        "(?:ab|a)(?:bc|c)",
    "x*y*x*",     "[\\d_a]+", "((a|b)c)+",  "a{0,2}b{1,2}",
    "[a-]+",      "\\.\\*",   "^ab|ba$",    "^(a|b)*$",
    "a*?b+?",     "[^\\s]+",  "c(a|bc)*",   "(a|0)1+",
};
const char kAlphabet[] = "abcxy01_ .*-\n\t";

TEST(RegexToGbnf, FullMatchAgreesWithStdRegexMatch) {
  const std::vector<std::string> texts = RandomTexts(kAlphabet, 20240601);
  for (const char* pattern : kPatterns) {
    const std::regex re(pattern, std::regex::ECMAScript);
    std::shared_ptr<const Grammar> g = Compile(pattern, {});
    ASSERT_NE(g, nullptr) << pattern;
    for (const std::string& text : texts) {
      ASSERT_EQ(g->Matches(text), std::regex_match(text, re))
          << "pattern " << pattern << " text '" << Printable(text) << "'";
    }
  }
}

TEST(RegexToGbnf, SearchAgreesWithStdRegexSearch) {
  const std::vector<std::string> texts = RandomTexts(kAlphabet, 7);
  for (const char* pattern : kPatterns) {
    const std::regex re(pattern, std::regex::ECMAScript);
    std::shared_ptr<const Grammar> g = Compile(pattern, Search());
    ASSERT_NE(g, nullptr) << pattern;
    for (const std::string& text : texts) {
      ASSERT_EQ(g->Matches(text), std::regex_search(text, re))
          << "pattern " << pattern << " text '" << Printable(text) << "'";
    }
  }
}

// In json_string mode the grammar sees the JSON-encoded text and must
// answer as std::regex does on the text itself.
TEST(RegexToGbnf, JsonStringAgreesWithStdRegexOnTheDecodedText) {
  const std::vector<const char*> patterns = {
      "[^a]*",    ".*",       "a\"?b", "[\\x00-\\x1f]+", "\\\\+",      "[^\"]*", "\\s*",
      "[\\s\\S]", "(a|\\n)+", "\\W+",  "\\x1a|\\x01",    "[\\b\\t/]+", "^a|\"$", "a.\\\\",
  };
  const std::string alphabet = std::string("ab\"\\\n\t\b /\x1a\x1f") + std::string(1, '\x01');
  const std::vector<std::string> texts = RandomTexts(alphabet, 99);
  for (const bool search : {false, true}) {
    for (const char* pattern : patterns) {
      const std::regex re(pattern, std::regex::ECMAScript);
      std::shared_ptr<const Grammar> g = Compile(pattern, Json(search));
      ASSERT_NE(g, nullptr) << pattern;
      for (size_t i = 0; i < texts.size(); ++i) {
        const std::string& text = texts[i];
        const bool expected = search ? std::regex_search(text, re) : std::regex_match(text, re);
        const std::string encoded = JsonEncode(text, /*upper_hex=*/i % 2 == 1);
        ASSERT_EQ(g->Matches(encoded), expected)
            << (search ? "search" : "full") << " pattern " << pattern << " text '"
            << Printable(text) << "' encoded '" << Printable(encoded) << "'";
      }
    }
  }
}

}  // namespace
}  // namespace folio::grammar
