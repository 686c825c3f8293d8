// Split-pattern translation and the Unicode helpers beneath the tokenizers.
#include "tokenizer/split_regex.h"

#include <gtest/gtest.h>

#include "tokenizer/unicode.h"

namespace folio::tokenizer {
namespace {

using Spans = std::vector<std::pair<size_t, size_t>>;

std::vector<std::string> Split(const std::string& pattern, const std::string& text) {
  auto re = SplitRegex::Compile(pattern);
  EXPECT_TRUE(re.ok()) << re.error().ToString();
  Spans spans;
  EXPECT_TRUE(re->FindAll(text, &spans).ok());
  std::vector<std::string> out;
  for (auto [b, e] : spans) out.push_back(text.substr(b, e - b));
  return out;
}

void ExpectUnsupported(const std::string& pattern, const std::string& needle) {
  auto r = TranslateSplitPattern(pattern);
  ASSERT_FALSE(r.ok()) << pattern;
  EXPECT_EQ(r.error().code(), StatusCode::kUnimplemented) << r.error().ToString();
  EXPECT_NE(r.error().message().find(needle), std::string::npos) << r.error().message();
}

TEST(TokenizerSplitRegex, RefusesConstructsItCannotReproduce) {
  ExpectUnsupported("\\w+", "escape \\w");
  ExpectUnsupported("\\bword", "escape \\b");
  ExpectUnsupported("\\h", "escape \\h");  // hex digit in Oniguruma
  ExpectUnsupported("^a", "anchor ^");
  ExpectUnsupported("(?<name>a)", "group syntax");
  ExpectUnsupported("\\p{Han}", "property \\p{Han}");
  ExpectUnsupported("[[:alpha:]]", "nested class");
  ExpectUnsupported("[a-z&&[^aeiou]]", "intersection");
  ExpectUnsupported("(a)\\1", "escape \\1");
}

// Ruby's $ (DeepSeek-LLM's "\\s+$"): the end of any line, not only of the
// text, and never a match that would swallow the newline.
TEST(TokenizerSplitRegex, DollarIsTheEndOfALine) {
  EXPECT_EQ(Split("\\s+$", "a  \nb \t"), (std::vector<std::string>{"  ", " \t"}));
  EXPECT_EQ(Split("b$", "ab\nab"), (std::vector<std::string>{"b", "b"}));
  EXPECT_EQ(Split("[$]", "a$b"), (std::vector<std::string>{"$"}));
}

TEST(TokenizerSplitRegex, RejectsMalformedPatterns) {
  EXPECT_EQ(TranslateSplitPattern("[abc").error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TranslateSplitPattern("ab\\").error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TranslateSplitPattern("\\x{zz}").error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitRegex::Compile("(ab").error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TranslateSplitPattern(std::string(kMaxSplitPatternBytes + 1, 'a')).error().code(),
            StatusCode::kResourceExhausted);
}

TEST(TokenizerSplitRegex, WhitespaceIsOnigurumasNotPcres) {
  // U+180E is \s to PCRE2 but not White_Space; U+0085 and U+3000 are.
  EXPECT_EQ(Split("\\s+",
                  "a\xE1\xA0\x8E"
                  "b"),
            std::vector<std::string>{});
  EXPECT_EQ(Split("\\s+",
                  "a\xC2\x85\xE3\x80\x80"
                  "b"),
            (std::vector<std::string>{"\xC2\x85\xE3\x80\x80"}));
  EXPECT_EQ(Split("[^\\s]+",
                  "a\xE1\xA0\x8E"
                  "b c"),
            (std::vector<std::string>{"a\xE1\xA0\x8E"
                                      "b",
                                      "c"}));
  EXPECT_EQ(Split("\\S+", "x\ty"), (std::vector<std::string>{"x", "y"}));
}

TEST(TokenizerSplitRegex, VerticalTabIsOneCharacter) {
  EXPECT_EQ(Split("\\v", "a\v\nb"), (std::vector<std::string>{"\v"}));
}

TEST(TokenizerSplitRegex, LettersFollowUnicode16) {
  // U+1C89 CYRILLIC CAPITAL LETTER TJE and U+31350 (CJK extension H) are
  // letters since Unicode 16 / 15; PCRE2 10.42 alone would not know them.
  EXPECT_EQ(Split("\\p{L}+",
                  "1\xE1\xB2\x89\xF0\xB1\x8D\x90"
                  "2"),
            (std::vector<std::string>{"\xE1\xB2\x89\xF0\xB1\x8D\x90"}));
  EXPECT_EQ(Split("\\P{L}+", "ab12cd"), (std::vector<std::string>{"12"}));
  EXPECT_EQ(Split("\\p{^N}+", "ab12cd"), (std::vector<std::string>{"ab", "cd"}));
  EXPECT_EQ(Split("\\d+",
                  "a\xD9\xA3\xD9\xA4"
                  "5"),
            (std::vector<std::string>{"\xD9\xA3\xD9\xA4"
                                      "5"}));  // ٣٤5
}

TEST(TokenizerSplitRegex, CaseInsensitiveContractions) {
  EXPECT_EQ(Split("(?i:'s|'ll)", "it's IT'S he'LL x\xC5\xBF"),
            (std::vector<std::string>{"'s", "'S", "'LL"}));
  EXPECT_EQ(Split("(?i:'s)", "'\xC5\xBF"), (std::vector<std::string>{"'\xC5\xBF"}));  // 'ſ
}

TEST(TokenizerSplitRegex, EmptyMatchesFollowOnigFindIter) {
  // An empty match right after the previous match is skipped; others count.
  auto re = SplitRegex::Compile("a*");
  ASSERT_TRUE(re.ok());
  Spans spans;
  ASSERT_TRUE(re->FindAll("baa", &spans).ok());
  EXPECT_EQ(spans, (Spans{{0, 0}, {1, 3}}));
}

TEST(TokenizerSplitRegex, LiteralPattern) {
  auto re = SplitRegex::Literal("ab");
  Spans spans;
  ASSERT_TRUE(re.FindAll("abxabab", &spans).ok());
  EXPECT_EQ(spans, (Spans{{0, 2}, {3, 5}, {5, 7}}));
}

TEST(TokenizerSplitRegex, BacktrackingLimitIsAnError) {
  auto re = SplitRegex::Compile("(a+)+\\p{N}");
  ASSERT_TRUE(re.ok());
  Spans spans;
  Status s = re->FindAll(std::string(30, 'a'), &spans);
  // With JIT or without, catastrophic backtracking stops at the limit.
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
}

// --- Unicode ----------------------------------------------------------------

TEST(TokenizerUnicode, Categories) {
  using unicode::Category;
  EXPECT_EQ(unicode::CategoryOf('A'), Category::kLu);
  EXPECT_EQ(unicode::CategoryOf(0x10FFFF), Category::kCn);
  EXPECT_EQ(unicode::CategoryOf(0x4E00), Category::kLo);
  EXPECT_EQ(unicode::CategoryOf(0x0301), Category::kMn);
  EXPECT_EQ(unicode::CategoryOf(0x1C89), Category::kLu);  // Unicode 16
  EXPECT_EQ(unicode::MaskOfName("L") & unicode::MaskOf(Category::kLo),
            unicode::MaskOf(Category::kLo));
  EXPECT_EQ(unicode::MaskOfName("Han"), 0u);
  EXPECT_EQ(unicode::MaskOfName(""), 0u);
}

TEST(TokenizerUnicode, LossyDecodingReplacesMaximalSubparts) {
  struct Case {
    std::string in, out;
  };
  const std::string r = "\xEF\xBF\xBD";
  for (const Case& c : std::vector<Case>{
           {"\xF0\x9F\x98", r},
           {"\xE0\x80\x80", r + r + r},
           {"\xED\xA0\x80", r + r + r},
           {"\xF4\x90\x80\x80", r + r + r + r},
           {"\xC0\xAF", r + r},
           {"\xF0\x9F\x98"
            "a",
            r + "a"},
           {"ok\xE2\x96\x81", "ok\xE2\x96\x81"},
       }) {
    std::string out;
    EXPECT_EQ(unicode::AppendLossy(c.in, true, &out), c.in.size());
    EXPECT_EQ(out, c.out);
  }
  std::string out;
  EXPECT_EQ(unicode::AppendLossy("a\xF0\x9F", false, &out),
            1u);  // holds the partial
  EXPECT_EQ(out, "a");
}

TEST(TokenizerUnicode, Nfc) {
  EXPECT_EQ(unicode::Nfc("cafe\xCC\x81"), "caf\xC3\xA9");
  EXPECT_EQ(unicode::Nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"),
            "\xEA\xB0\x81");                            // 각
  EXPECT_EQ(unicode::Nfc("\xE2\x84\xAB"), "\xC3\x85");  // Angstrom sign -> Å
  EXPECT_EQ(unicode::Nfc("plain"), "plain");
}

TEST(TokenizerUnicode, ByteMapRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(unicode::CharToByte(unicode::ByteToChar()[static_cast<size_t>(b)]), b);
  }
  EXPECT_EQ(unicode::ByteToChar()[' '], 0x120u);  // Ġ
  EXPECT_EQ(unicode::ByteToChar()['a'], static_cast<char32_t>('a'));
  EXPECT_EQ(unicode::CharToByte(0x4E00), -1);
}

}  // namespace
}  // namespace folio::tokenizer
