// TokenTrie and Matcher: the trie's preorder layout against its input
// vocabulary; FillMask against a brute-force reference (each token tried
// on a fresh copy of the state) along seeded random walks; the state
// left unchanged by a refused token; CanFinish and IsDone; tokens that end
// inside a multi-byte character; copies as values over a shared session;
// and the mask memo's statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "folio/core/printable.h"
#include "folio/grammar/grammar.h"
#include "grammar/test_grammars.h"

namespace folio::grammar {
namespace {

// Letters a-c, "é" and U+4E00..U+4E10 (e4 b8 80 .. e4 b8 90), then ".".
constexpr char kMultiByteGrammar[] = R"g(root ::= ([a-c] | "é" | [\u4e00-\u4e10])+ ".")g";

std::shared_ptr<const Grammar> Compile(std::string_view gbnf) {
  Result<std::shared_ptr<const Grammar>> g = Grammar::FromGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << gbnf << ": " << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

std::shared_ptr<const TokenTrie> Trie(const std::vector<std::string>& vocab) {
  return std::make_shared<const TokenTrie>(vocab);
}

size_t NumWords(size_t vocab_size) { return (vocab_size + 63) / 64; }

// The matcher's mask, written over words that start all ones so that a
// bit FillMask fails to clear shows up.
std::vector<uint64_t> Mask(const Matcher& m, size_t vocab_size) {
  std::vector<uint64_t> words(NumWords(vocab_size), ~uint64_t{0});
  m.FillMask(words);
  return words;
}

// The reference: token t is allowed iff it has bytes and a copy of the
// state accepts them.
std::vector<uint64_t> BruteForceMask(const Matcher& m, const std::vector<std::string>& vocab) {
  std::vector<uint64_t> words(NumWords(vocab.size()), 0);
  for (size_t t = 0; t < vocab.size(); ++t) {
    if (vocab[t].empty()) continue;
    Matcher copy = m;
    if (copy.AcceptBytes(vocab[t])) words[t / 64] |= uint64_t{1} << (t % 64);
  }
  return words;
}

bool Allowed(const std::vector<uint64_t>& mask, int32_t token) {
  const auto t = static_cast<size_t>(token);
  return ((mask[t / 64] >> (t % 64)) & 1) != 0;
}

std::vector<int32_t> AllowedTokens(const std::vector<uint64_t>& mask, size_t vocab_size) {
  std::vector<int32_t> out;
  for (size_t t = 0; t < vocab_size; ++t) {
    if (Allowed(mask, static_cast<int32_t>(t))) out.push_back(static_cast<int32_t>(t));
  }
  return out;
}

bool AllZero(const std::vector<uint64_t>& mask) {
  return std::all_of(mask.begin(), mask.end(), [](uint64_t w) { return w == 0; });
}

// The id of the first token with these bytes.
int32_t Id(const std::vector<std::string>& vocab, std::string_view bytes) {
  const auto it = std::find(vocab.begin(), vocab.end(), bytes);
  EXPECT_NE(it, vocab.end()) << Printable(bytes);
  return static_cast<int32_t>(it - vocab.begin());
}

// A vocabulary: every piece of `alphabet` alone, the `fixed` tokens, then
// `count` random concatenations of one to four pieces, padded so that its
// size is not a multiple of 64 (the mask has tail bits).
std::vector<std::string> RandomVocab(const std::vector<std::string>& alphabet,
                                     const std::vector<std::string>& fixed, int count,
                                     uint32_t seed) {
  std::vector<std::string> vocab = alphabet;
  vocab.insert(vocab.end(), fixed.begin(), fixed.end());
  std::mt19937 rng(seed);
  for (int i = 0; i < count; ++i) {
    const uint32_t len = 1 + rng() % 4;
    std::string token;
    for (uint32_t j = 0; j < len; ++j) token += alphabet[rng() % alphabet.size()];
    vocab.push_back(token);
  }
  if (vocab.size() % 64 == 0) vocab.push_back("~");
  return vocab;
}

std::vector<std::string> JsonVocab() {
  const std::vector<std::string> alphabet = {
      "{", "}",  "[", "]",    "\"",   ":",    ",",    " ",    "\n",   "\t",   "-", "+",   ".",
      "0", "1",  "5", "9",    "e",    "E",    "a",    "t",    "r",    "u",    "f", "l",   "s",
      "n", "\\", "b", "\xc3", "\xa9", "\xe4", "\xb8", "\xad", "\x01", "\x7f", "x", "\xff"};
  const std::vector<std::string> fixed = {
      "",  "true", "false",        "null", "\":",  "\": ", "{\"", "\\u00e9", "\xc3\xa9",
      "{", "",     "\xe4\xb8\xad", "}\n",  ", \"", "\"}",  "\\u", "12",      "0.5"};
  return RandomVocab(alphabet, fixed, 300, 7);
}

std::vector<std::string> MultiByteVocab() {
  const std::vector<std::string> alphabet = {"a",    "b",    "c",    "d",    ".",
                                             "\xc3", "\xa9", "\xa8", "\xe4", "\xb8",
                                             "\x80", "\x8f", "\x90", "\x91", "\xad"};
  const std::vector<std::string> fixed = {
      "",         "\xc3\xa9", "\xe4\xb8\x80", "\xe4\xb8\x90", "\xe4\xb8\x91",
      "\xe4\xb8", "ab.",      "\xc3\xa9"};
  return RandomVocab(alphabet, fixed, 250, 11);
}

// Walks the grammar from `start` (a matcher at the grammar's start) by
// seeded random allowed tokens, checking at each step that FillMask equals
// the brute-force mask of a matcher that replayed the text in a session of
// its own, and that CanFinish agrees with Grammar::Matches. Returns the
// number of tokens accepted.
int RandomWalk(const std::shared_ptr<const Grammar>& grammar,
               const std::shared_ptr<const TokenTrie>& trie, const std::vector<std::string>& vocab,
               const Matcher& start, uint32_t seed) {
  std::mt19937 rng(seed);
  Matcher m = start;
  std::string text;
  int steps = 0;
  for (; steps < 60; ++steps) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " step " + std::to_string(steps) + " text \"" +
                 Printable(text) + "\"");
    const std::vector<uint64_t> mask = Mask(m, vocab.size());
    Matcher replayed(grammar, trie);
    EXPECT_TRUE(replayed.AcceptBytes(text));
    const std::vector<uint64_t> expected = BruteForceMask(replayed, vocab);
    EXPECT_EQ(mask.size(), expected.size());
    for (size_t w = 0; w < std::min(mask.size(), expected.size()); ++w) {
      if (mask[w] == expected[w]) continue;
      for (size_t b = 0; b < 64; ++b) {
        const bool got = ((mask[w] >> b) & 1) != 0;
        const bool want = ((expected[w] >> b) & 1) != 0;
        const size_t t = w * 64 + b;
        ADD_FAILURE() << "word " << w << " bit " << b << ": token " << t << " \""
                      << (t < vocab.size() ? Printable(vocab[t]) : std::string("<past the vocab>"))
                      << "\" FillMask " << got << ", brute force " << want;
      }
    }
    if (::testing::Test::HasFailure()) return steps;
    EXPECT_EQ(m.CanFinish(), grammar->Matches(text));
    EXPECT_EQ(m.CanFinish(), replayed.CanFinish());
    EXPECT_EQ(m.IsDone(), replayed.IsDone());
    if (m.IsDone()) {
      EXPECT_TRUE(m.CanFinish());
      EXPECT_TRUE(AllZero(mask));
      break;
    }
    const std::vector<int32_t> allowed = AllowedTokens(mask, vocab.size());
    if (allowed.empty()) break;
    const int32_t token = allowed[rng() % allowed.size()];
    if (!m.AcceptToken(token)) {
      ADD_FAILURE() << "allowed token " << token << " \""
                    << Printable(vocab[static_cast<size_t>(token)]) << "\" refused";
      return steps;
    }
    text += vocab[static_cast<size_t>(token)];
  }
  return steps;
}

void RandomWalks(std::string_view gbnf, const std::vector<std::string>& vocab,
                 int min_total_steps) {
  std::shared_ptr<const Grammar> grammar = Compile(gbnf);
  ASSERT_NE(grammar, nullptr);
  std::shared_ptr<const TokenTrie> trie = Trie(vocab);
  // One session for every walk, so later walks reuse (and check) the memo
  // tables that earlier ones filled.
  const Matcher start(grammar, trie);
  int total_steps = 0;
  for (uint32_t seed : {1u, 2u, 3u, 42u, 1234u, 99991u}) {
    const int steps = RandomWalk(grammar, trie, vocab, start, seed);
    EXPECT_GT(steps, 0) << "seed " << seed << ": the walk never started";
    total_steps += steps;
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GE(total_steps, min_total_steps);
}

// ---------------------------------------------------------------------------
// TokenTrie.

// Checks the preorder layout of the trie of `vocab` against the vocabulary.
void ExpectTrieInvariants(const std::vector<std::string>& vocab) {
  const TokenTrie trie(vocab);
  EXPECT_EQ(trie.vocab_size(), vocab.size());
  const std::span<const TokenTrie::Node> nodes = trie.nodes();
  ASSERT_EQ(nodes.size(), trie.num_nodes());
  ASSERT_GE(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].depth, 0u);
  EXPECT_EQ(nodes[0].subtree_size, nodes.size());
  EXPECT_TRUE(trie.tokens(nodes[0]).empty());

  for (size_t i = 0; i < nodes.size(); ++i) {
    const size_t end = i + nodes[i].subtree_size;
    ASSERT_GE(nodes[i].subtree_size, 1u) << "node " << i;
    ASSERT_LE(end, nodes.size()) << "node " << i;
    for (size_t j = i + 1; j < end; ++j) {
      EXPECT_GT(nodes[j].depth, nodes[i].depth) << "node " << j << " in the subtree of " << i;
    }
    if (end < nodes.size()) {
      EXPECT_LE(nodes[end].depth, nodes[i].depth)
          << "node " << end << " after the subtree of " << i;
    }
  }

  // Each node's bytes from the root, and the tokens found on the way.
  std::vector<std::pair<int32_t, std::string>> found;
  std::set<std::string> node_paths;
  std::string path;
  for (size_t i = 1; i < nodes.size(); ++i) {
    ASSERT_GE(nodes[i].depth, 1u) << "node " << i;
    ASSERT_LE(nodes[i].depth, path.size() + 1) << "node " << i << " skips a level";
    path.resize(nodes[i].depth - 1);
    path.push_back(static_cast<char>(nodes[i].byte));
    EXPECT_TRUE(node_paths.insert(path).second) << "two nodes for \"" << Printable(path) << "\"";
    for (int32_t t : trie.tokens(nodes[i])) found.emplace_back(t, path);
  }

  std::vector<std::pair<int32_t, std::string>> expected;
  std::set<std::string> prefixes;
  for (size_t t = 0; t < vocab.size(); ++t) {
    if (vocab[t].empty()) continue;
    expected.emplace_back(static_cast<int32_t>(t), vocab[t]);
    for (size_t n = 1; n <= vocab[t].size(); ++n) prefixes.insert(vocab[t].substr(0, n));
  }
  std::sort(found.begin(), found.end());
  EXPECT_EQ(found, expected);  // empty tokens at no node, every other at its own
  EXPECT_EQ(node_paths, prefixes);
  EXPECT_EQ(nodes.size(), prefixes.size() + 1);

  for (size_t t = 0; t < vocab.size(); ++t) {
    EXPECT_EQ(trie.token_bytes(static_cast<int32_t>(t)), vocab[t]) << "token " << t;
  }
}

TEST(TokenTrie, PreorderLayoutOfSmallVocabulary) {
  ExpectTrieInvariants({"ab", "a", "abc", "", "b", "ab", "ba", "\xc3\xa9", "\xc3", "\xa9", "",
                        "abd", std::string(1, '\0'), "\xff\xff", "b"});
}

TEST(TokenTrie, PreorderLayoutOfRandomVocabulary) {
  ExpectTrieInvariants(JsonVocab());
  ExpectTrieInvariants(MultiByteVocab());
}

TEST(TokenTrie, EmptyVocabularyIsJustTheRoot) {
  const TokenTrie trie(std::vector<std::string>{});
  EXPECT_EQ(trie.vocab_size(), 0u);
  ASSERT_EQ(trie.num_nodes(), 1u);
  ExpectTrieInvariants({"", ""});
}

// ---------------------------------------------------------------------------
// FillMask against brute force.

TEST(Matcher, FillMaskEqualsBruteForceAlongRandomWalksOfJsonGrammar) {
  RandomWalks(kJsonGrammar, JsonVocab(), 100);
}

TEST(Matcher, FillMaskEqualsBruteForceAlongRandomWalksOfMultiByteGrammar) {
  RandomWalks(kMultiByteGrammar, MultiByteVocab(), 20);
}

TEST(Matcher, FillMaskEqualsBruteForceForBalancedParentheses) {
  std::vector<std::string> vocab = {"(", ")", "()", "((", "))", "(()", "())", "", ")(", "x"};
  RandomWalks(R"g(root ::= "(" root ")" | "")g", vocab, 6);
}

// ---------------------------------------------------------------------------
// Refused tokens.

TEST(Matcher, RefusedTokenLeavesTheStateUnchanged) {
  const std::vector<std::string> vocab = {"{", "]", "}", "\"a\"", ":", " 1", "x", "\"a\"x", "{\""};
  std::shared_ptr<const Grammar> g = Compile(kJsonGrammar);
  ASSERT_NE(g, nullptr);
  Matcher m(g, Trie(vocab));
  ASSERT_TRUE(m.AcceptToken(Id(vocab, "{")));
  const std::vector<uint64_t> before = Mask(m, vocab.size());
  const bool can_finish = m.CanFinish();
  const bool done = m.IsDone();
  EXPECT_FALSE(Allowed(before, Id(vocab, "]")));
  EXPECT_FALSE(Allowed(before, Id(vocab, "\"a\"x")));

  EXPECT_FALSE(m.AcceptToken(Id(vocab, "]")));
  EXPECT_EQ(Mask(m, vocab.size()), before);
  EXPECT_EQ(m.CanFinish(), can_finish);
  EXPECT_EQ(m.IsDone(), done);

  // A token whose bytes begin validly and then fail consumes nothing.
  EXPECT_FALSE(m.AcceptToken(Id(vocab, "\"a\"x")));
  EXPECT_FALSE(m.AcceptBytes("\"a\": 1]"));
  EXPECT_EQ(Mask(m, vocab.size()), before);
  EXPECT_EQ(m.CanFinish(), can_finish);
  EXPECT_EQ(m.IsDone(), done);

  // And the state goes on from where it was.
  EXPECT_TRUE(m.AcceptToken(Id(vocab, "\"a\"")));
  EXPECT_TRUE(m.AcceptToken(Id(vocab, ":")));
  EXPECT_TRUE(m.AcceptToken(Id(vocab, " 1")));
  EXPECT_FALSE(m.CanFinish());
  EXPECT_TRUE(m.AcceptToken(Id(vocab, "}")));
  EXPECT_TRUE(m.CanFinish());
}

TEST(Matcher, EmptyTokenIsNeverAllowed) {
  const std::vector<std::string> vocab = {"", "a", "b", "aa", ""};
  std::shared_ptr<const Grammar> g = Compile(R"g(root ::= "a"*)g");
  ASSERT_NE(g, nullptr);
  Matcher m(g, Trie(vocab));
  const std::vector<uint64_t> mask = Mask(m, vocab.size());
  EXPECT_EQ(AllowedTokens(mask, vocab.size()), (std::vector<int32_t>{1, 3}));
  EXPECT_FALSE(m.AcceptToken(0));
  EXPECT_FALSE(m.AcceptToken(4));
  EXPECT_EQ(Mask(m, vocab.size()), mask);
}

// ---------------------------------------------------------------------------
// CanFinish and IsDone.

TEST(Matcher, OptionalTailCanFinishBeforeItAndIsDoneAfterIt) {
  const std::vector<std::string> vocab = {"a", "b", "c", "ab", "abc", "x", "bc"};
  std::shared_ptr<const Grammar> g = Compile(R"g(root ::= "ab" "c"?)g");
  ASSERT_NE(g, nullptr);
  Matcher m(g, Trie(vocab));
  EXPECT_FALSE(m.CanFinish());
  EXPECT_FALSE(m.IsDone());
  EXPECT_EQ(AllowedTokens(Mask(m, vocab.size()), vocab.size()),
            (std::vector<int32_t>{Id(vocab, "a"), Id(vocab, "ab"), Id(vocab, "abc")}));

  ASSERT_TRUE(m.AcceptBytes("ab"));
  EXPECT_TRUE(m.CanFinish());
  EXPECT_FALSE(m.IsDone());
  EXPECT_EQ(AllowedTokens(Mask(m, vocab.size()), vocab.size()),
            (std::vector<int32_t>{Id(vocab, "c")}));

  ASSERT_TRUE(m.AcceptToken(Id(vocab, "c")));
  EXPECT_TRUE(m.CanFinish());
  EXPECT_TRUE(m.IsDone());
  EXPECT_TRUE(AllZero(Mask(m, vocab.size())));
  EXPECT_FALSE(m.AcceptToken(Id(vocab, "c")));
}

TEST(Matcher, WholeSentenceInOneTokenIsDone) {
  const std::vector<std::string> vocab = {"ab", "abc"};
  std::shared_ptr<const Grammar> g = Compile(R"g(root ::= "ab" "c"?)g");
  ASSERT_NE(g, nullptr);
  Matcher m(g, Trie(vocab));
  ASSERT_TRUE(m.AcceptToken(1));
  EXPECT_TRUE(m.IsDone());
}

TEST(Matcher, StarCanFinishAtOnceAndIsNeverDone) {
  const std::vector<std::string> vocab = {"a", "aa", "b", "aaa"};
  std::shared_ptr<const Grammar> g = Compile(R"g(root ::= "a"*)g");
  ASSERT_NE(g, nullptr);
  Matcher m(g, Trie(vocab));
  EXPECT_TRUE(m.CanFinish());
  EXPECT_FALSE(m.IsDone());
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(m.AcceptToken(i % 2 == 0 ? 0 : 3));
    EXPECT_TRUE(m.CanFinish());
    EXPECT_FALSE(m.IsDone());
    EXPECT_EQ(AllowedTokens(Mask(m, vocab.size()), vocab.size()), (std::vector<int32_t>{0, 1, 3}));
  }
}

TEST(Matcher, GrammarOfOnlyTheEmptyStringIsDoneAtOnce) {
  const std::vector<std::string> vocab = {"a", "b"};
  std::shared_ptr<const Grammar> g = Compile(R"g(root ::= "")g");
  ASSERT_NE(g, nullptr);
  Matcher m(g, Trie(vocab));
  EXPECT_TRUE(m.CanFinish());
  EXPECT_TRUE(m.IsDone());
  EXPECT_TRUE(AllZero(Mask(m, vocab.size())));
}

TEST(Matcher, VocabularyWithoutTheNeededTokenGivesAnEmptyMask) {
  const std::vector<std::string> vocab = {"a", "b", "y", "", "xx"};
  std::shared_ptr<const Grammar> g = Compile(R"g(root ::= "x")g");
  ASSERT_NE(g, nullptr);
  Matcher m(g, Trie(vocab));
  EXPECT_TRUE(AllZero(Mask(m, vocab.size())));
  EXPECT_FALSE(m.CanFinish());
  EXPECT_FALSE(m.IsDone());
  // The bytes themselves are still accepted.
  EXPECT_TRUE(m.AcceptBytes("x"));
  EXPECT_TRUE(m.IsDone());
}

// ---------------------------------------------------------------------------
// Multi-byte characters split across tokens.

TEST(Matcher, TokenMayEndInsideAMultiByteCharacter) {
  const std::vector<std::string> vocab = {"\xc3", "\xa9", "\xc3\xa9", "e", "\xc3\xa8"};
  std::shared_ptr<const Grammar> g = Compile("root ::= \"\xc3\xa9\"");
  ASSERT_NE(g, nullptr);
  Matcher m(g, Trie(vocab));
  EXPECT_EQ(AllowedTokens(Mask(m, vocab.size()), vocab.size()), (std::vector<int32_t>{0, 2}));
  ASSERT_TRUE(m.AcceptToken(0));
  EXPECT_FALSE(m.CanFinish());
  EXPECT_FALSE(m.IsDone());
  EXPECT_EQ(AllowedTokens(Mask(m, vocab.size()), vocab.size()), (std::vector<int32_t>{1}));
  ASSERT_TRUE(m.AcceptToken(1));
  EXPECT_TRUE(m.CanFinish());
  EXPECT_TRUE(m.IsDone());
}

TEST(Matcher, SplitCharacterOfNegatedClassAndDot) {
  const std::vector<std::string> vocab = {"\xc3", "\xa9", "\xed", "\xa0", "\x9f", "\xbf", "a"};
  for (const char* gbnf : {"root ::= [^a]", "root ::= ."}) {
    SCOPED_TRACE(gbnf);
    std::shared_ptr<const Grammar> g = Compile(gbnf);
    ASSERT_NE(g, nullptr);
    std::shared_ptr<const TokenTrie> trie = Trie(vocab);
    Matcher m(g, trie);
    ASSERT_TRUE(m.AcceptToken(0));
    EXPECT_TRUE(m.AcceptToken(1));
    EXPECT_TRUE(m.CanFinish());

    // "\xed" then "\xa0": the start of a surrogate, never a code point.
    Matcher s(g, trie);
    ASSERT_TRUE(s.AcceptToken(2));
    const std::vector<uint64_t> mask = Mask(s, vocab.size());
    EXPECT_FALSE(Allowed(mask, 3));
    EXPECT_TRUE(Allowed(mask, 4));   // ed 9f: U+D7C0..U+D7FF
    EXPECT_FALSE(Allowed(mask, 5));  // ed bf: a surrogate
    EXPECT_FALSE(Allowed(mask, 6));
    EXPECT_FALSE(s.AcceptToken(3));
    EXPECT_FALSE(s.CanFinish());
  }
}

// ---------------------------------------------------------------------------
// Copies.

TEST(Matcher, AdvancingACopyLeavesTheOriginalUnchanged) {
  const std::vector<std::string> vocab = JsonVocab();
  std::shared_ptr<const Grammar> g = Compile(kJsonGrammar);
  ASSERT_NE(g, nullptr);
  std::shared_ptr<const TokenTrie> trie = Trie(vocab);
  Matcher original(g, trie);
  ASSERT_TRUE(original.AcceptBytes("{"));
  const std::vector<uint64_t> before = Mask(original, vocab.size());
  EXPECT_TRUE(Allowed(before, Id(vocab, "}")));

  Matcher copy = original;
  ASSERT_TRUE(copy.AcceptBytes("\"a\": "));
  const std::vector<uint64_t> copy_mask = Mask(copy, vocab.size());
  EXPECT_FALSE(Allowed(copy_mask, Id(vocab, "}")));
  EXPECT_TRUE(Allowed(copy_mask, Id(vocab, "true")));
  EXPECT_EQ(Mask(original, vocab.size()), before);

  // Both go on, each along its own text.
  ASSERT_TRUE(original.AcceptBytes("}"));
  ASSERT_TRUE(copy.AcceptBytes("true}"));
  EXPECT_TRUE(original.CanFinish());
  EXPECT_TRUE(copy.CanFinish());
  Matcher fresh(g, trie);
  ASSERT_TRUE(fresh.AcceptBytes("{\"a\": true}"));
  EXPECT_EQ(Mask(copy, vocab.size()), Mask(fresh, vocab.size()));

  // Assignment replaces the state.
  Matcher third(g, trie);
  third = copy;
  EXPECT_TRUE(third.CanFinish());
  EXPECT_EQ(Mask(third, vocab.size()), Mask(fresh, vocab.size()));
}

TEST(Matcher, CopiesShareTheMaskMemo) {
  const std::vector<std::string> vocab = JsonVocab();
  std::shared_ptr<const Grammar> g = Compile(kJsonGrammar);
  ASSERT_NE(g, nullptr);
  Matcher m(g, Trie(vocab));
  ASSERT_TRUE(m.AcceptBytes("{\"k\": ["));
  const std::vector<uint64_t> first = Mask(m, vocab.size());
  const Matcher::Stats s1 = m.stats();
  EXPECT_GT(s1.frames, 0u);
  EXPECT_GE(s1.mask_misses, 1u);
  EXPECT_GE(s1.masks_cached, 1u);

  EXPECT_EQ(Mask(m, vocab.size()), first);
  const Matcher::Stats s2 = m.stats();
  EXPECT_GT(s2.mask_hits, s1.mask_hits);
  EXPECT_EQ(s2.mask_misses, s1.mask_misses);

  const Matcher copy = m;
  EXPECT_EQ(Mask(copy, vocab.size()), first);
  EXPECT_GT(m.stats().mask_hits, s2.mask_hits);  // the copy's lookup hit the shared memo
  EXPECT_EQ(copy.stats().mask_hits, m.stats().mask_hits);
}

}  // namespace
}  // namespace folio::grammar
