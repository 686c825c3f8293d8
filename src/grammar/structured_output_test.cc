// StructuredOutputToGbnf and GrammarCache: each kind compiles to a grammar
// that accepts what it should, choices are exact, errors pass through, and
// the cache returns one grammar per constraint and drops the oldest.
#include "folio/grammar/structured_output.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace folio::grammar {
namespace {

using Kind = StructuredOutput::Kind;

std::shared_ptr<const Grammar> Compile(const StructuredOutput& o) {
  Result<std::string> gbnf = StructuredOutputToGbnf(o);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status().ToString();
  if (!gbnf.ok()) return nullptr;
  Result<std::shared_ptr<const Grammar>> g = Grammar::FromGbnf(*gbnf);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

TEST(StructuredOutput, ChoiceMatchesExactlyOneOfTheStrings) {
  StructuredOutput o;
  o.kind = Kind::kChoice;
  o.choices = {"yes", "no", "a \"quoted\"\n\\ line", "é"};
  auto g = Compile(o);
  ASSERT_NE(g, nullptr);
  for (const std::string& c : o.choices) EXPECT_TRUE(g->Matches(c)) << c;
  for (const char* t : {"", "ye", "yesno", "no ", "a \"quoted\"", "e"}) {
    EXPECT_FALSE(g->Matches(t)) << t;
  }
}

TEST(StructuredOutput, EmptyChoiceListIsRefused) {
  StructuredOutput o;
  o.kind = Kind::kChoice;
  EXPECT_EQ(StructuredOutputToGbnf(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(StructuredOutput, RegexMatchesTheWholeText) {
  StructuredOutput o;
  o.kind = Kind::kRegex;
  o.text = "[0-9]{3}-[a-z]+";
  auto g = Compile(o);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->Matches("123-abc"));
  EXPECT_FALSE(g->Matches("x123-abc"));
  EXPECT_FALSE(g->Matches("123-"));
}

TEST(StructuredOutput, JsonSchemaAndJsonObject) {
  StructuredOutput schema;
  schema.kind = Kind::kJsonSchema;
  schema.schema = nlohmann::ordered_json::parse(
      R"({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
          "additionalProperties": false})");
  auto g = Compile(schema);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->Matches(R"({"n": 3})"));
  EXPECT_FALSE(g->Matches(R"({"n": "3"})"));
  EXPECT_FALSE(g->Matches(R"({})"));

  StructuredOutput object;
  auto any = Compile(object);
  ASSERT_NE(any, nullptr);
  EXPECT_TRUE(any->Matches(R"({"a": [1, {"b": null}]})"));
  EXPECT_FALSE(any->Matches("[1]"));
}

TEST(StructuredOutput, UnsupportedKeywordIsRefusedByName) {
  StructuredOutput o;
  o.kind = Kind::kJsonSchema;
  o.schema = nlohmann::ordered_json::parse(R"({"type": "object", "propertyNames": {}})");
  const Status s = StructuredOutputToGbnf(o).status();
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("propertyNames"), std::string::npos) << s.ToString();
}

TEST(GrammarCache, SameConstraintIsCompiledOnce) {
  GrammarCache cache(4);
  StructuredOutput o;
  o.kind = Kind::kGrammar;
  o.text = "root ::= \"a\"+";
  auto a = cache.Get(o);
  auto b = cache.Get(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 1u);
}

TEST(GrammarCache, KindsWithTheSameTextAreDifferentEntries) {
  GrammarCache cache(4);
  StructuredOutput regex;
  regex.kind = Kind::kRegex;
  regex.text = "a";
  StructuredOutput choice;
  choice.kind = Kind::kChoice;
  choice.choices = {"a"};
  auto a = cache.Get(regex);
  auto b = cache.Get(choice);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->get(), b->get());
  // Choices {"ab"} and {"a", "b"} must not collide either.
  StructuredOutput ab = choice, a_b = choice;
  ab.choices = {"ab"};
  a_b.choices = {"a", "b"};
  auto c = cache.Get(ab);
  auto d = cache.Get(a_b);
  ASSERT_TRUE(c.ok() && d.ok());
  EXPECT_TRUE((*c)->Matches("ab"));
  EXPECT_FALSE((*d)->Matches("ab"));
}

TEST(GrammarCache, OldestEntryIsDroppedAtCapacity) {
  GrammarCache cache(2);
  auto grammar = [](std::string lit) {
    StructuredOutput o;
    o.kind = Kind::kChoice;
    o.choices = {std::move(lit)};
    return o;
  };
  ASSERT_TRUE(cache.Get(grammar("a")).ok());
  ASSERT_TRUE(cache.Get(grammar("b")).ok());
  ASSERT_TRUE(cache.Get(grammar("a")).ok());  // a is now the most recent
  ASSERT_TRUE(cache.Get(grammar("c")).ok());  // drops b
  EXPECT_EQ(cache.stats().size, 2u);
  const uint64_t misses = cache.stats().misses;
  ASSERT_TRUE(cache.Get(grammar("a")).ok());
  EXPECT_EQ(cache.stats().misses, misses);
  ASSERT_TRUE(cache.Get(grammar("b")).ok());
  EXPECT_EQ(cache.stats().misses, misses + 1);
}

TEST(GrammarCache, ErrorsAreReturnedAndNotKept) {
  GrammarCache cache(4);
  StructuredOutput o;
  o.kind = Kind::kGrammar;
  o.text = "root ::= undefined";
  EXPECT_EQ(cache.Get(o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.stats().size, 0u);
}

TEST(GrammarCache, ConcurrentGetsAgree) {
  GrammarCache cache(8);
  StructuredOutput o;
  o.kind = Kind::kRegex;
  o.text = "[a-z]{1,8}@[a-z]{1,8}\\.com";
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        auto g = cache.Get(o);
        ok[t] += g.ok() && (*g)->Matches("ab@cd.com") && !(*g)->Matches("ab@cd.org");
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const int n : ok) EXPECT_EQ(n, 20);
  EXPECT_EQ(cache.stats().size, 1u);
}

}  // namespace
}  // namespace folio::grammar
