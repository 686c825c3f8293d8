// Token references (<[id]>, <text>): how GBNF names them and what it
// refuses, and how the matcher takes them beside bytes: a referenced
// token is allowed only where the grammar names it, as one token and never
// as its text; a token both named and spelled steps both ways at once;
// FillMask equals a brute-force mask (every token tried on a copy of a
// replayed matcher) along random walks of a grammar that mixes special
// tokens and text, as a harmony tool call does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/printable.h"
#include "folio/grammar/grammar.h"

namespace folio::grammar {
namespace {

// A vocabulary whose special tokens have no bytes: ids 0..4 are the bytes
// "a", "b", "ab", "<", "|"; 5..7 are <|start|>, <|end|> and <|call|>.
const std::vector<std::string> kVocab = {"a", "b", "ab", "<", "|", "", "", ""};
constexpr int32_t kStart = 5;
constexpr int32_t kEnd = 6;
constexpr int32_t kCall = 7;

TokenVocabulary Vocabulary() {
  TokenVocabulary v;
  v.size = kVocab.size();
  v.find = [](std::string_view text) -> std::optional<int32_t> {
    static const std::map<std::string, int32_t, std::less<>> kNames = {
        {"<|start|>", kStart}, {"<|end|>", kEnd}, {"<|call|>", kCall}, {"ab", 2}};
    const auto it = kNames.find(text);
    if (it == kNames.end()) return std::nullopt;
    return it->second;
  };
  return v;
}

std::shared_ptr<const Grammar> Compile(std::string_view gbnf,
                                       const TokenVocabulary& vocabulary = Vocabulary()) {
  Result<std::shared_ptr<const Grammar>> g = Grammar::FromGbnf(gbnf, {}, vocabulary);
  EXPECT_TRUE(g.ok()) << Printable(gbnf) << ": " << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

Status Refusal(std::string_view gbnf, const TokenVocabulary& vocabulary = Vocabulary()) {
  Result<std::shared_ptr<const Grammar>> g = Grammar::FromGbnf(gbnf, {}, vocabulary);
  EXPECT_FALSE(g.ok()) << "compiled, but should be refused:\n" << Printable(gbnf);
  return g.status();
}

void ExpectRefusedNaming(std::string_view gbnf, std::string_view named,
                         const TokenVocabulary& vocabulary = Vocabulary()) {
  const Status s = Refusal(gbnf, vocabulary);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << Printable(gbnf) << ": " << s.ToString();
  EXPECT_NE(s.message().find(named), std::string::npos)
      << "'" << named << "' not in: " << s.message();
}

std::vector<int32_t> Allowed(const Matcher& m, size_t vocab_size = kVocab.size()) {
  std::vector<uint64_t> words((vocab_size + 63) / 64, ~uint64_t{0});
  m.FillMask(words);
  std::vector<int32_t> out;
  for (size_t t = 0; t < vocab_size; ++t) {
    if (((words[t / 64] >> (t % 64)) & 1) != 0) out.push_back(static_cast<int32_t>(t));
  }
  return out;
}

std::shared_ptr<const TokenTrie> Trie(const std::vector<std::string>& vocab = kVocab) {
  return std::make_shared<const TokenTrie>(vocab);
}

// ---------------------------------------------------------------------------
// GBNF.

TEST(TokenReference, IdsAndNamesCompileBesideText) {
  EXPECT_NE(Compile(R"g(root ::= <[5]> "a" <|end|> | "b"+ <[7]>)g"), nullptr);
  // Inside groups and repetitions, and without any vocabulary by id.
  EXPECT_NE(Compile(R"g(root ::= ( <[1]> "x" )* <[2]>?)g", TokenVocabulary{}), nullptr);
}

// A token is no byte: Matches (bytes only) never takes it, and it is not
// nullable, so repeating it or recursing after it is fine.
TEST(TokenReference, ATokenIsNotText) {
  std::shared_ptr<const Grammar> g = Compile(R"g(root ::= <|end|> | "x")g");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->Matches("x"));
  EXPECT_FALSE(g->Matches("<|end|>"));
  EXPECT_FALSE(g->Matches(""));
  EXPECT_NE(Compile(R"g(root ::= <|end|>*)g"), nullptr);
  EXPECT_NE(Compile(R"g(root ::= <[1]> root | "a")g"), nullptr);
}

TEST(TokenReference, ANameOutsideTheVocabularyIsRefusedByName) {
  ExpectRefusedNaming("root ::= \"a\" |\n  <|nope|>", "<|nope|>");
  const Status s = Refusal("root ::= \"a\" |\n  <|nope|>");
  EXPECT_NE(s.message().find("grammar:2:"), std::string::npos) << s.message();
}

TEST(TokenReference, ANameNeedsAVocabulary) {
  ExpectRefusedNaming(R"g(root ::= <|end|>)g", "vocabulary", TokenVocabulary{});
}

TEST(TokenReference, AnIdOutsideTheVocabularyIsRefused) {
  ExpectRefusedNaming(R"g(root ::= <[8]>)g", "outside the vocabulary");
  ExpectRefusedNaming(R"g(root ::= <[2147483648]>)g", "2^31", TokenVocabulary{});
}

TEST(TokenReference, MalformedReferencesAreRefused) {
  for (const char* gbnf : {"root ::= <[]>", "root ::= <[12>", "root ::= <[1a]>", "root ::= <|end",
                           "root ::= < end>", "root ::= <>", "root ::= <"}) {
    const Status s = Refusal(gbnf);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << gbnf << ": " << s.ToString();
  }
}

TEST(TokenReference, NegationIsRefusedByName) {
  ExpectRefusedNaming(R"g(root ::= !<[1]>)g", "negated");
  ExpectRefusedNaming(R"g(root ::= "a" !<|end|>)g", "negated");
}

// ---------------------------------------------------------------------------
// The matcher.

// A special token (no bytes) is allowed exactly where the grammar names
// it, and then nothing else is.
TEST(TokenReference, ASpecialTokenIsAllowedOnlyWhereNamed) {
  Matcher m(Compile(R"g(root ::= "a" <|end|> "b" <|call|>)g"), Trie());
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{0}));
  EXPECT_FALSE(m.NamesNext(kEnd));
  EXPECT_FALSE(m.AcceptToken(kEnd));
  ASSERT_TRUE(m.AcceptToken(0));
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{kEnd}));
  EXPECT_TRUE(m.NamesNext(kEnd));
  EXPECT_FALSE(m.NamesNext(kCall));
  EXPECT_FALSE(m.AcceptToken(kCall));  // refused: the state is unchanged
  EXPECT_FALSE(m.AcceptToken(1));
  ASSERT_TRUE(m.AcceptToken(kEnd));
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{1}));
  ASSERT_TRUE(m.AcceptToken(1));
  EXPECT_FALSE(m.CanFinish());
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{kCall}));
  ASSERT_TRUE(m.AcceptToken(kCall));
  EXPECT_TRUE(m.IsDone());
  EXPECT_TRUE(Allowed(m).empty());
}

// A reference takes that one token: the same text in other tokens is not
// it, and AcceptBytes never takes a reference.
TEST(TokenReference, AReferenceIsNeverSpelledByOtherTokens) {
  Matcher m(Compile(R"g(root ::= <[2]> "!")g"), Trie({"a", "b", "ab", "!"}));
  EXPECT_EQ(Allowed(m, 4), (std::vector<int32_t>{2}));
  Matcher spelled = m;
  EXPECT_FALSE(spelled.AcceptToken(0));
  EXPECT_FALSE(spelled.AcceptBytes("ab"));
  ASSERT_TRUE(m.AcceptToken(2));
  EXPECT_EQ(Allowed(m, 4), (std::vector<int32_t>{3}));
}

// A token the grammar both names and spells goes on both ways: "ab" as
// the token may be followed by what either path allows.
TEST(TokenReference, ATokenNamedAndSpelledStepsBothWays) {
  const std::vector<std::string> vocab = {"a", "b", "ab", "!", "?"};
  std::shared_ptr<const Grammar> g = Compile(R"g(root ::= <[2]> "!" | "ab" "?")g");
  Matcher whole(g, Trie(vocab));
  ASSERT_TRUE(whole.AcceptToken(2));
  EXPECT_EQ(Allowed(whole, vocab.size()), (std::vector<int32_t>{3, 4}));
  Matcher split(g, Trie(vocab));
  ASSERT_TRUE(split.AcceptToken(0));
  ASSERT_TRUE(split.AcceptToken(1));
  EXPECT_EQ(Allowed(split, vocab.size()), (std::vector<int32_t>{4}));
}

// A reference comes only where the bytes before it end a token: the token
// "ab" never stands for "a" then <|end|>.
TEST(TokenReference, AReferenceFollowsWholeTokens) {
  Matcher m(Compile(R"g(root ::= "a" <|end|> | "ab")g"), Trie());
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{0, 2}));
  Matcher after_ab = m;
  ASSERT_TRUE(after_ab.AcceptToken(2));
  EXPECT_TRUE(after_ab.IsDone());
  ASSERT_TRUE(m.AcceptToken(0));
  EXPECT_EQ(Allowed(m), (std::vector<int32_t>{1, kEnd}));
}

// The reference mask: token t is allowed iff a copy of the state accepts
// it (its bytes or its reference).
std::vector<int32_t> BruteForce(const Matcher& m, size_t vocab_size) {
  std::vector<int32_t> out;
  for (size_t t = 0; t < vocab_size; ++t) {
    Matcher copy = m;
    if (copy.AcceptToken(static_cast<int32_t>(t))) out.push_back(static_cast<int32_t>(t));
  }
  return out;
}

// A harmony-like grammar (messages of text between special tokens, a
// call's text held to a shape, the end named): along seeded random walks,
// each step's mask equals the brute-force mask of a matcher that replayed
// the tokens in a session of its own, and NamesNext says which special
// tokens the mask holds.
TEST(TokenReference, FillMaskEqualsBruteForceAlongRandomWalks) {
  // Every printable ASCII character alone (so no walk is stuck for want of
  // a token), pieces of the grammar's words, and six special tokens.
  std::vector<std::string> vocab = {"", "", "", "", "", ""};
  const int32_t start = 0, channel = 1, message = 2, end = 3, call = 4, constrain = 5;
  for (char c = ' '; c <= '~'; ++c) vocab.emplace_back(1, c);
  for (const char* piece : {"ab", "to=", "f.", "get", "get_x", "\"k\":", "12", "analysis", "ana",
                            "lysis", "commentary", "json", "assistant", "{\"k\":1}"}) {
    vocab.emplace_back(piece);
  }
  TokenVocabulary v;
  v.size = vocab.size();
  v.find = [&](std::string_view text) -> std::optional<int32_t> {
    const std::map<std::string, int32_t, std::less<>> names = {
        {"<|start|>", start}, {"<|channel|>", channel}, {"<|message|>", message},
        {"<|end|>", end},     {"<|call|>", call},       {"<|constrain|>", constrain}};
    const auto it = names.find(text);
    return it == names.end() ? std::nullopt : std::optional<int32_t>(it->second);
  };
  std::shared_ptr<const Grammar> g = Compile(R"g(
root     ::= analysis* call
analysis ::= <|channel|> "analysis" <|message|> text <|end|> <|start|> "assistant"
text     ::= [^<]*
call     ::= ( <|channel|> "commentary to=f." name | " to=f." name <|channel|> "commentary" ) (
               " " <|constrain|> "json" )? <|message|> "{\"k\":" [0-9]+ "}" <|call|>
name     ::= "get" | "get_x"
)g",
                                             v);
  ASSERT_NE(g, nullptr);
  const std::shared_ptr<const TokenTrie> trie = Trie(vocab);
  const Matcher first(g, trie);
  int total = 0;
  bool reached_the_end = false;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    Matcher m = first;
    std::vector<int32_t> tokens;
    for (int step = 0; step < 80; ++step) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " step " + std::to_string(step));
      Matcher replayed(g, trie);
      for (const int32_t t : tokens) ASSERT_TRUE(replayed.AcceptToken(t));
      const std::vector<int32_t> allowed = Allowed(m, vocab.size());
      ASSERT_EQ(allowed, BruteForce(replayed, vocab.size()));
      for (const int32_t special : {start, channel, message, end, call, constrain}) {
        EXPECT_EQ(m.NamesNext(special),
                  std::find(allowed.begin(), allowed.end(), special) != allowed.end());
      }
      EXPECT_EQ(m.CanFinish(), replayed.CanFinish());
      if (allowed.empty()) {
        EXPECT_TRUE(m.IsDone());
        EXPECT_EQ(tokens.back(), call);
        reached_the_end = true;
        break;
      }
      const int32_t t = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.AcceptToken(t));
      tokens.push_back(t);
      ++total;
    }
  }
  EXPECT_TRUE(reached_the_end);
  EXPECT_GT(total, 200);
}

}  // namespace
}  // namespace folio::grammar
