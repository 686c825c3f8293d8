#include "folio/core/json_reader.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace folio {
namespace {

using nlohmann::json;

// Every kind of value, parsed (so non-negative integers are unsigned).
const json kObject = json::parse(R"({
  "n": 5, "neg": -1, "big": 18446744073709551615, "x": 1.5, "b": true, "s": "hi",
  "t": [1, 2], "bad_t": [1, -2], "ss": ["a", "b"], "bad_ss": ["a", 3], "nil": null,
  "long": "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
})");

const nlohmann::ordered_json kOrdered = nlohmann::ordered_json::parse(kObject.dump());

std::string Message(const Status& s) { return s.message(); }

TEST(JsonReader, ReadsEachType) {
  const JsonReader r(kObject, JsonErrorStyle::kFile, "manifest");
  EXPECT_EQ(*r.U64("n"), 5u);
  EXPECT_EQ(*r.U64("big"), UINT64_MAX);
  EXPECT_EQ(*r.I64("neg"), -1);
  EXPECT_EQ(*r.F64("x"), 1.5);
  EXPECT_EQ(*r.F64("n"), 5.0);  // an integer is a number
  EXPECT_TRUE(*r.Bool("b"));
  EXPECT_EQ(*r.String("s"), "hi");
  EXPECT_EQ(*r.TokenIds("t"), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(*r.Strings("ss"), (std::vector<std::string>{"a", "b"}));
}

TEST(JsonReader, SignedNonNegativeIntegersAreUnsigned) {
  const json built = {{"n", 5}};  // stored signed, as JSON built in code is
  EXPECT_EQ(*JsonReader(built, JsonErrorStyle::kConfig).U64("n"), 5u);
}

TEST(JsonReader, FindTreatsNullAsAbsent) {
  const JsonReader r(kObject, JsonErrorStyle::kRequest);
  EXPECT_NE(r.Find("n"), nullptr);
  EXPECT_EQ(r.Find("nil"), nullptr);
  EXPECT_EQ(r.Find("absent"), nullptr);
  EXPECT_TRUE(r.Has("s"));
  EXPECT_FALSE(r.Has("nil"));
}

TEST(JsonReader, OptionalLeavesTheDefaultWhenAbsentOrNull) {
  const JsonReader r(kObject, JsonErrorStyle::kConfig);
  uint64_t n = 7;
  EXPECT_TRUE(r.Optional("absent", n).ok());
  EXPECT_TRUE(r.Optional("nil", n).ok());
  EXPECT_EQ(n, 7u);
  EXPECT_TRUE(r.Optional("n", n).ok());
  EXPECT_EQ(n, 5u);
  std::optional<std::string> s;
  EXPECT_TRUE(r.Optional("absent", s).ok());
  EXPECT_FALSE(s.has_value());
  EXPECT_TRUE(r.Optional("s", s).ok());
  EXPECT_EQ(s, "hi");
}

TEST(JsonReader, OptionalReadsWithTheBoundsGiven) {
  const JsonReader r(kObject, JsonErrorStyle::kRequest);
  std::optional<int64_t> n;
  EXPECT_EQ(Message(r.Optional("n", n, int64_t{1}, int64_t{4})), "'n' must be in [1, 4]");
  EXPECT_FALSE(n.has_value());
  std::optional<double> x;
  EXPECT_EQ(Message(r.Optional("x", x, 0.0, 1.0, true)), "'x' must be in (0, 1], got 1.5");
  std::optional<std::vector<int32_t>> t;
  EXPECT_TRUE(r.Optional("t", t, uint64_t{3}).ok());
  EXPECT_EQ(*t, (std::vector<int32_t>{1, 2}));
  bool b = false;
  EXPECT_EQ(Message(r.Optional("s", b)), "'s' must be a boolean, got string");
}

// kFile: where the object sits, the field and what it should have been;
// missing and mistyped read the same.
TEST(JsonReader, FileStyleNamesWhereTheFieldAndWhatItShouldBe) {
  const JsonReader r(kObject, JsonErrorStyle::kFile, "sequence 2");
  EXPECT_EQ(Message(r.U64("neg").status()),
            "sequence 2: neg is missing or not an unsigned integer");
  EXPECT_EQ(Message(r.U64("n", 4).status()), "sequence 2: n = 5 exceeds 4");
  EXPECT_EQ(Message(r.I64("big").status()),
            "sequence 2: big = 18446744073709551615 exceeds the int64 range");
  EXPECT_EQ(Message(r.Bool("missing").status()), "sequence 2: missing is missing or not a boolean");
  EXPECT_EQ(Message(r.F64("nil").status()), "sequence 2: nil is missing or not a number");
  EXPECT_EQ(Message(r.String("n").status()), "sequence 2: n is missing or not a string");
  EXPECT_EQ(Message(r.TokenIds("s").status()), "sequence 2: s is missing or not an array");
  EXPECT_EQ(Message(r.TokenIds("bad_t").status()), "sequence 2: bad_t holds -2, not a token id");
  EXPECT_EQ(Message(r.Strings("bad_ss").status()), "sequence 2: bad_ss holds 3, not a string");
  EXPECT_EQ(r.String("n").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.U64("missing").status().code(), StatusCode::kInvalidArgument);
}

// kConfig: a missing key is NotFound; a mistyped one names the key in
// double quotes, with the value when a number was expected.
TEST(JsonReader, ConfigStyleSaysMissingKeyOrWhatTheKeyMustBe) {
  const JsonReader r(kObject, JsonErrorStyle::kConfig);
  EXPECT_EQ(r.U64("missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Message(r.U64("missing").status()), "missing key \"missing\"");
  EXPECT_EQ(r.U64("neg").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(r.U64("neg").status()), "\"neg\" must be a non-negative integer (got -1)");
  EXPECT_EQ(Message(r.U64("nil").status()), "\"nil\" must be a non-negative integer (got null)");
  EXPECT_EQ(Message(r.F64("s").status()), "\"s\" must be a number (got \"hi\")");
  EXPECT_EQ(Message(r.Bool("n").status()), "\"n\" must be true or false");
  EXPECT_EQ(Message(r.String("b").status()), "\"b\" must be a string");
}

// kRequest: OpenAI's wording, the field in single quotes and the JSON type
// it had.
TEST(JsonReader, RequestStyleNamesTheFieldAndTheTypeItHad) {
  const OrderedJsonReader r(kOrdered, JsonErrorStyle::kRequest);
  EXPECT_EQ(Message(r.I64("x").status()), "'x' must be an integer, got number");
  EXPECT_EQ(Message(r.I64("s").status()), "'s' must be an integer, got string");
  EXPECT_EQ(Message(r.F64("b").status()), "'b' must be a number, got boolean");
  EXPECT_EQ(Message(r.String("t").status()), "'t' must be a string, got array");
  EXPECT_EQ(Message(r.TokenIds("n").status()), "'n' must be an array of token ids, got integer");
  EXPECT_EQ(Message(r.String("missing").status()), "'missing' is required");
}

TEST(JsonReader, RequestStyleRangesAndTokenIds) {
  const OrderedJsonReader r(kOrdered, JsonErrorStyle::kRequest);
  EXPECT_EQ(Message(r.I64("big", 0, 10).status()), "'big' must be in [0, 10]");
  EXPECT_EQ(Message(r.I64("neg", 0, 10).status()), "'neg' must be in [0, 10]");
  EXPECT_EQ(*r.I64("n", 0, 10), 5);
  EXPECT_EQ(Message(r.F64("x", -2, 1).status()), "'x' must be in [-2, 1], got 1.5");
  EXPECT_EQ(Message(r.F64("x", 0.25, 1.25).status()), "'x' must be in [0.25, 1.25], got 1.5");
  EXPECT_EQ(*r.F64("x", 1.5, 2.0), 1.5);
  EXPECT_FALSE(r.F64("x", 1.5, 2.0, /*lo_open=*/true).ok());
  EXPECT_EQ(Message(r.TokenIds("t", 2).status()),
            "'t' holds 2, not a token id below the vocabulary size 2");
  EXPECT_EQ(Message(r.TokenIds("t", 100, 1).status()), "'t' has 2 ids; at most 1");
  EXPECT_EQ(*r.TokenIds("t", 3, 2), (std::vector<int32_t>{1, 2}));
}

TEST(JsonReader, TokenIdsFitInt32) {
  const json j = {{"t", {uint64_t{1} << 31}}, {"ok", {(uint64_t{1} << 31) - 1}}};
  const JsonReader r(j, JsonErrorStyle::kFile, "state");
  EXPECT_EQ(Message(r.TokenIds("t").status()), "state: t holds 2147483648, not a token id");
  EXPECT_EQ(Message(r.TokenIds("t", uint64_t{1} << 40).status()),
            "state: t holds 2147483648, not a token id");
  EXPECT_EQ(*r.TokenIds("ok"), (std::vector<int32_t>{INT32_MAX}));
}

TEST(JsonReader, LongValuesAreClippedInMessages) {
  const JsonReader r(kObject, JsonErrorStyle::kConfig);
  const std::string m = Message(r.U64("long").status());
  EXPECT_NE(m.find("...)"), std::string::npos) << m;
  EXPECT_LT(m.size(), 140u) << m;
}

TEST(JsonReader, WrongTypeMessageNamesTheJsonType) {
  EXPECT_EQ(WrongTypeMessage("tools[0]", "an object", json::array()),
            "'tools[0]' must be an object, got array");
  EXPECT_EQ(JsonTypeName(json(3)), "integer");
  EXPECT_EQ(JsonTypeName(json(3u)), "integer");
  EXPECT_EQ(JsonTypeName(json(3.5)), "number");
  EXPECT_EQ(JsonTypeName(json(nullptr)), "null");
  EXPECT_EQ(JsonTypeName(nlohmann::ordered_json::object()), "object");
}

}  // namespace
}  // namespace folio
