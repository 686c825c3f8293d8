#include "folio/grammar/json_schema.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "folio/grammar/grammar.h"

namespace folio::grammar {
namespace {

using Json = nlohmann::ordered_json;

Result<std::string> Convert(const std::string& schema, const JsonSchemaOptions& options = {}) {
  return JsonSchemaToGbnf(Json::parse(schema), options);
}

// The compiled grammar of a schema; null (with a test failure) if either
// step fails.
std::shared_ptr<const Grammar> Compile(const std::string& schema,
                                       const JsonSchemaOptions& options = {}) {
  Result<std::string> gbnf = Convert(schema, options);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status().ToString();
  if (!gbnf.ok()) return nullptr;
  Result<std::shared_ptr<const Grammar>> g = Grammar::FromGbnf(*gbnf);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << *gbnf;
  if (!g.ok()) return nullptr;
  return *g;
}

JsonSchemaOptions Strict() {
  JsonSchemaOptions o;
  o.whitespace_flexible = false;
  return o;
}

// Expects every text in `yes` to match and every text in `no` not to.
void ExpectMatches(const std::string& schema, const std::vector<std::string>& yes,
                   const std::vector<std::string>& no, const JsonSchemaOptions& options = {}) {
  std::shared_ptr<const Grammar> g = Compile(schema, options);
  ASSERT_NE(g, nullptr);
  for (const std::string& t : yes) EXPECT_TRUE(g->Matches(t)) << schema << " should accept " << t;
  for (const std::string& t : no) EXPECT_FALSE(g->Matches(t)) << schema << " should reject " << t;
}

void ExpectRefused(const std::string& schema, StatusCode code, const std::string& needle,
                   const JsonSchemaOptions& options = {}) {
  Result<std::string> r = Convert(schema, options);
  ASSERT_FALSE(r.ok()) << schema << " gave\n" << *r;
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos)
      << "'" << needle << "' not in: " << r.status().message();
}

// ---- Refusals ----

TEST(JsonSchemaToGbnf, UnenforcedKeywordIsRefusedWithItsPointer) {
  ExpectRefused(R"({"properties": {"a": {"type": "object", "propertyNames": {"maxLength": 3}}}})",
                StatusCode::kUnimplemented, "\"propertyNames\" at #/properties/a");
  for (const char* keyword : {"not", "if", "dependentRequired", "contains", "unevaluatedItems",
                              "$dynamicRef", "disallow"}) {
    ExpectRefused(std::string(R"({"type": "object", ")") + keyword + R"(": {}})",
                  StatusCode::kUnimplemented, std::string("\"") + keyword + "\" at #");
  }
}

// JSON Schema ignores keys that are no keyword of it (a generator's own
// "example", "_format", "javaType", "visible" ...), and the content
// keywords are annotations since 2019-09: each schema below is the same
// grammar as without them.
TEST(JsonSchemaToGbnf, KeysThatAreNoKeywordAreIgnored) {
  const std::string plain =
      *Convert(R"({"type": "object", "properties": {"a": {"type": "string"}}})");
  for (const char* extra :
       {R"("example": {"a": 1})", R"("_format": "date")", R"("javaType": "A")",
        R"("visible": false)", R"("contentMediaType": "text/html")", R"("$anchor": "x")"}) {
    const std::string schema = std::string(R"({"type": "object", "properties": {"a": {"type": )") +
                               R"("string", )" + extra + "}}, " + extra + "}";
    Result<std::string> g = Convert(schema);
    ASSERT_TRUE(g.ok()) << schema << ": " << g.status().ToString();
    EXPECT_EQ(*g, plain) << schema;
  }
}

// With additionalProperties false, the undeclared members are those whose
// key matches a pattern (searched, as `pattern` is), with its schema.
TEST(JsonSchemaToGbnf, PatternPropertiesWithAdditionalPropertiesFalse) {
  ExpectMatches(
      R"({"type": "object", "properties": {"id": {"type": "integer"}},
                    "patternProperties": {"^x_": {"type": "string"}, "[0-9]$": {"type": "string"}},
                    "additionalProperties": false})",
      {R"({"id":1})", R"({"id":1,"x_a":"s"})", R"({"x_b":"t","x_c":"u"})", "{}", R"({"v2":"s"})"},
      {R"({"id":1,"y":"s"})", R"({"x_a":1})", R"({"id":"1"})", R"({"_x":"s"})"});
}

TEST(JsonSchemaToGbnf, PatternPropertiesThatTakeAnyValueConstrainNothing) {
  EXPECT_EQ(*Convert(R"({"type": "object", "patternProperties": {"^a": {}, "b": true}})"),
            *Convert(R"({"type": "object"})"));
}

TEST(JsonSchemaToGbnf, PatternPropertiesOnlyWhereAGrammarHoldsThem) {
  // Other keys open: "a key that matches no pattern" is not written.
  ExpectRefused(R"({"type": "object", "patternProperties": {"^a": {"type": "string"}}})",
                StatusCode::kUnimplemented, "patternProperties at #");
  // A declared key a pattern also matches must meet both schemas.
  ExpectRefused(R"({"properties": {"ab": {}}, "patternProperties": {"^a": {"type": "string"}},
                    "additionalProperties": false})",
                StatusCode::kUnimplemented, "the declared key \"ab\" matches the pattern");
  ExpectRefused(R"({"patternProperties": {"^a": {"type": "string"}, "^b": {"type": "integer"}},
                    "additionalProperties": false})",
                StatusCode::kUnimplemented, "differing schemas");
  // The other side's members would meet the patterns.
  ExpectRefused(R"({"allOf": [{"patternProperties": {"^a": {}}, "additionalProperties": false},
                              {"properties": {"b": {}}}]})",
                StatusCode::kUnimplemented, "patternProperties");
}

TEST(JsonSchemaToGbnf, UnresolvedRefIsInvalidArgument) {
  ExpectRefused(R"({"$ref": "#/$defs/missing"})", StatusCode::kInvalidArgument, "resolves nowhere");
}

TEST(JsonSchemaToGbnf, RemoteRefIsUnimplemented) {
  ExpectRefused(R"({"$ref": "https://example.com/s.json"})", StatusCode::kUnimplemented,
                "remote $ref");
}

TEST(JsonSchemaToGbnf, UnenforcedStandardFormatIsRefusedByName) {
  for (const char* format : {"iri-reference", "duration", "json-pointer", "regex", "color"}) {
    ExpectRefused(std::string(R"({"type": "string", "format": ")") + format + R"("})",
                  StatusCode::kUnimplemented, std::string("\"") + format + "\"");
  }
}

// A format no draft defines is an annotation (JSON Schema ignores it): any
// string, and it implies no type for a schema without one.
TEST(JsonSchemaToGbnf, FormatNoDraftDefinesIsIgnored) {
  ExpectMatches(R"({"type": "string", "format": "semver", "maxLength": 3})",
                {R"("1.0")", R"("abc")"}, {R"("1.0.0")", "1"});
  ExpectMatches(R"({"format": "positiveInteger"})", {"1", R"("x")", "[]"}, {});
  ExpectMatches(R"({"type": "string", "format": "url", "pattern": "^a"})", {R"("ab")"},
                {R"("ba")"});
  // Beside enum, a merge or a $ref it constrains nothing either.
  ExpectMatches(R"({"enum": ["a", "b"], "format": "semver"})", {R"("a")", R"("b")"}, {R"("c")"});
  ExpectMatches(R"({"format": "url", "anyOf": [{"type": "string", "format": "uri"}]})",
                {R"("http://x.org/")"}, {R"("not a uri")", "1"});
  ExpectMatches(R"({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n", "format": "x"})",
                {"7"}, {R"("7")"});
}

TEST(JsonSchemaToGbnf, UniqueItemsTrueIsRefused) {
  ExpectRefused(R"({"type": "array", "uniqueItems": true})", StatusCode::kUnimplemented,
                "uniqueItems");
}

// Disjoint because a key one alternative requires is one the other forbids.
TEST(JsonSchemaToGbnf, OneOfWithARequiredKeyTheOtherForbids) {
  ExpectMatches(R"({"oneOf": [
      {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
      {"properties": {"b": {}}, "additionalProperties": false}]})",
                {R"({"a":1})", R"({"b":1})", "{}", R"({"a":1,"b":2})"},
                {R"({"c":1})", R"({"a":"x"})"});
}

// oneOf over `required` lists alone (the shape in the siblings), as
// function-calling schemas write "a circle or a rectangle": exactly one
// list may be complete.
TEST(JsonSchemaToGbnf, OneOfOfRequiredSetsIsExactlyOne) {
  const std::string props =
      R"("type": "object", "properties": {"r": {"type": "number"}, "l": {"type": "number"},
         "w": {"type": "number"}})";
  ExpectMatches("{" + props + R"(, "oneOf": [{"required": ["r"]}, {"required": ["l", "w"]}]})",
                {R"({"r":1})", R"({"l":1,"w":2})", R"({"r":1,"l":2})", R"({"r":1,"w":2})",
                 R"({"l":1,"w":2,"x":3})"},
                {R"({"r":1,"l":1,"w":2})", "{}", R"({"l":1})", R"({"r":1,"l":1,"w":2,"x":3})"});
  // A list inside another: the longer one can never be the only one.
  ExpectMatches("{" + props + R"(, "oneOf": [{"required": ["r"]}, {"required": ["r", "l"]}]})",
                {R"({"r":1})", R"({"r":1,"w":2})"}, {R"({"r":1,"l":2})", "{}"});
  ExpectRefused("{" + props + R"(, "oneOf": [{"required": ["r"]}, {"required": ["r"]}]})",
                StatusCode::kUnimplemented, "matches no instance");
}

TEST(JsonSchemaToGbnf, OverlappingOneOfIsRefused) {
  ExpectRefused(R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})",
                StatusCode::kUnimplemented, "oneOf at #");
}

TEST(JsonSchemaToGbnf, DepthLimitIsResourceExhausted) {
  JsonSchemaOptions o;
  o.max_depth = 3;
  ExpectRefused(R"({"items": {"items": {"items": {"items": {"type": "null"}}}}})",
                StatusCode::kResourceExhausted, "max_depth", o);
}

TEST(JsonSchemaToGbnf, ByteLimitIsResourceExhausted) {
  JsonSchemaOptions o;
  o.max_output_bytes = 200;
  ExpectRefused(R"({"enum": ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
                              "ccccccccccccccccccccccccccccccc", "dddddddddddddddddddddddddddddd",
                              "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "fffffffffffffffffffffffffffffff"]})",
                StatusCode::kResourceExhausted, "max_output_bytes", o);
}

TEST(JsonSchemaToGbnf, FalseRootSchemaIsRefused) {
  ExpectRefused("false", StatusCode::kUnimplemented, "matches no instance");
}

TEST(JsonSchemaToGbnf, NonTrivialMultipleOfIsRefused) {
  ExpectRefused(R"({"type": "integer", "multipleOf": 3})", StatusCode::kUnimplemented,
                "multipleOf");
}

TEST(JsonSchemaToGbnf, PatternWithLengthIsRefused) {
  ExpectRefused(R"({"type": "string", "pattern": "^a+$", "maxLength": 3})",
                StatusCode::kUnimplemented, "pattern together with minLength/maxLength");
}

TEST(JsonSchemaToGbnf, WrongKeywordTypeIsInvalidArgument) {
  ExpectRefused(R"({"type": "object", "required": "a"})", StatusCode::kInvalidArgument,
                "required must be an array");
}

TEST(JsonSchemaToGbnf, RefCycleWithoutProgressIsRefused) {
  ExpectRefused(R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                    "$ref": "#/$defs/a"})",
                StatusCode::kInvalidArgument, "cycle");
}

TEST(JsonSchemaToGbnf, AllOfWithConflictingPatternsIsRefused) {
  ExpectRefused(R"({"allOf": [{"type": "string", "pattern": "a"}, {"pattern": "b"}]})",
                StatusCode::kUnimplemented, "pattern");
}

// ---- Objects ----

TEST(JsonSchemaToGbnf, RequiredPropertyMustAppear) {
  ExpectMatches(R"({"type": "object", "properties": {"a": {"type": "integer"}},
                    "required": ["a"], "additionalProperties": false})",
                {R"({"a":1})", R"({ "a": 1 })"}, {"{}", R"({"b":1})"});
}

TEST(JsonSchemaToGbnf, OptionalPropertiesAnySubsetInOrder) {
  ExpectMatches(R"({"type": "object", "properties": {"a": {"type": "integer"},
                    "b": {"type": "integer"}, "c": {"type": "integer"}},
                    "additionalProperties": false})",
                {"{}", R"({"a":1})", R"({"b":2})", R"({"c":3})", R"({"a":1,"c":3})",
                 R"({"b":2,"c":3})", R"({"a":1,"b":2,"c":3})"},
                {R"({"b":2,"a":1})", R"({,"a":1})", R"({"a":1,})", R"({"a":1 "b":2})"});
}

TEST(JsonSchemaToGbnf, RequiredAfterOptionals) {
  ExpectMatches(R"({"type": "object", "properties": {"a": {"type": "null"},
                    "b": {"type": "null"}, "c": {"type": "null"}},
                    "required": ["c"], "additionalProperties": false})",
                {R"({"c":null})", R"({"a":null,"c":null})", R"({"a":null,"b":null,"c":null})"},
                {R"({"a":null})", R"({"a":null,"b":null})", "{}"});
}

TEST(JsonSchemaToGbnf, AdditionalPropertiesTrueAllowsOtherKeysAfterDeclared) {
  ExpectMatches(R"({"type": "object", "properties": {"a": {"type": "integer"}}})",
                {R"({"a":1,"x":[1,{"y":null}]})", R"({"x":"s"})", "{}", R"({"ab":1,"b":2})"},
                {R"({"a":"s"})", R"({"a":1,"a":"s"})"});
}

TEST(JsonSchemaToGbnf, AdditionalPropertiesSchemaTypesTheValues) {
  ExpectMatches(R"({"type": "object", "additionalProperties": {"type": "integer"}})",
                {"{}", R"({"x":1,"y":2})", R"({"a\"b":3})"}, {R"({"x":"1"})"});
}

TEST(JsonSchemaToGbnf, MaxPropertiesBoundsAdditionalOnlyObjects) {
  ExpectMatches(R"({"type": "object", "additionalProperties": {"type": "integer"},
                    "minProperties": 1, "maxProperties": 2})",
                {R"({"x":1})", R"({"x":1,"y":2})"}, {"{}", R"({"x":1,"y":2,"z":3})"});
}

TEST(JsonSchemaToGbnf, MinMaxPropertiesCountDeclaredAndAdditionalMembers) {
  ExpectMatches(R"({"type": "object", "properties": {"a": {"type": "integer"},
                    "b": {"type": "integer"}}, "minProperties": 1, "maxProperties": 2})",
                {R"({"a":1})", R"({"b":1})", R"({"a":1,"b":2})", R"({"x":1})", R"({"a":1,"x":1})"},
                {"{}", R"({"a":1,"b":2,"x":3})", R"({"x":1,"y":2,"z":3})"});
}

TEST(JsonSchemaToGbnf, RequiredKeyWithoutPropertiesIsAnAdditionalProperty) {
  ExpectMatches(R"({"type": "object", "required": ["id"]})", {R"({"id":1})", R"({"id":"x","z":2})"},
                {"{}", R"({"z":2})"});
}

TEST(JsonSchemaToGbnf, NestedObjects) {
  ExpectMatches(R"({"type": "object", "properties": {"p": {"type": "object",
                    "properties": {"q": {"type": "boolean"}}, "required": ["q"],
                    "additionalProperties": false}}, "required": ["p"],
                    "additionalProperties": false})",
                {R"({"p":{"q":true}})"}, {R"({"p":{}})", R"({"p":{"q":1}})"});
}

// ---- Arrays ----

TEST(JsonSchemaToGbnf, NestedArraysMinMaxItems) {
  ExpectMatches(R"({"type": "array", "items": {"type": "array", "items": {"type": "integer"},
                    "minItems": 1, "maxItems": 2}, "maxItems": 2})",
                {"[]", "[[1]]", "[[1,2],[3]]", "[ [ 1 , 2 ] ]"},
                {"[[]]", "[[1,2,3]]", "[[1],[2],[3]]", "[1]"});
}

TEST(JsonSchemaToGbnf, PrefixItemsThenRest) {
  ExpectMatches(R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
                    "items": {"type": "boolean"}, "minItems": 1})",
                {R"(["a"])", R"(["a",1])", R"(["a",1,true,false])"},
                {"[]", "[1]", R"(["a","b"])", R"(["a",1,2])"});
}

TEST(JsonSchemaToGbnf, Draft4ItemsArrayWithAdditionalItemsFalse) {
  ExpectMatches(R"({"type": "array", "items": [{"type": "integer"}, {"type": "null"}],
                    "additionalItems": false})",
                {"[]", "[1]", "[1,null]"}, {"[1,null,2]", "[null]"});
}

TEST(JsonSchemaToGbnf, ItemsFalseAllowsOnlyThePrefix) {
  ExpectMatches(R"({"prefixItems": [{"const": 1}], "items": false})", {"[]", "[1]"},
                {"[1,1]", "[2]"});
}

// ---- enum / const / anyOf / oneOf / allOf ----

TEST(JsonSchemaToGbnf, EnumOfMixedTypes) {
  ExpectMatches(R"({"enum": ["red", 1, null, true, [1, 2], {"k": "v"}]})",
                {R"("red")", "1", "null", "true", "[1,2]", "[ 1, 2 ]", R"({"k":"v"})"},
                {R"("blue")", "2", "false", "[2,1]", R"({"k":"w"})"});
}

TEST(JsonSchemaToGbnf, ConstString) {
  ExpectMatches(R"({"const": "a\"b"})", {R"("a\"b")"}, {R"("ab")", R"("a"b")"});
}

TEST(JsonSchemaToGbnf, EnumFilteredByType) {
  ExpectMatches(R"({"type": "string", "enum": ["a", 1]})", {R"("a")"}, {"1"});
}

TEST(JsonSchemaToGbnf, AnyOfIsAlternation) {
  ExpectMatches(R"({"anyOf": [{"type": "integer", "minimum": 10}, {"type": "string",
                    "maxLength": 1}]})",
                {"10", "999", R"("")", R"("x")"}, {"9", R"("xy")", "null"});
}

TEST(JsonSchemaToGbnf, AnyOfSiblingsApplyToEachAlternative) {
  ExpectMatches(R"({"type": "object", "properties": {"k": {"type": "integer"}},
                    "additionalProperties": false,
                    "anyOf": [{"required": ["k"]}, {"maxProperties": 0}]})",
                {R"({"k":1})", "{}"}, {R"({"k":"s"})"});
}

TEST(JsonSchemaToGbnf, OneOfWithDifferentTypes) {
  ExpectMatches(R"({"oneOf": [{"type": "string"}, {"type": "integer"}]})", {R"("a")", "1"},
                {"1.5", "null"});
}

TEST(JsonSchemaToGbnf, OneOfWithConstDiscriminator) {
  ExpectMatches(R"({"oneOf": [
      {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}},
       "required": ["kind", "x"], "additionalProperties": false},
      {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string"}},
       "required": ["kind", "y"], "additionalProperties": false}]})",
                {R"({"kind":"a","x":1})", R"({"kind":"b","y":"s"})"},
                {R"({"kind":"a","y":"s"})", R"({"kind":"c","x":1})"});
}

TEST(JsonSchemaToGbnf, AllOfMergesObjectParts) {
  ExpectMatches(R"({"allOf": [
      {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
      {"properties": {"b": {"type": "string"}}, "required": ["b"]}]})",
                {R"({"a":1,"b":"s"})", R"({"a":1,"b":"s","c":1})"},
                {R"({"a":1})", R"({"b":"s"})", R"({"a":"1","b":"s"})"});
}

TEST(JsonSchemaToGbnf, AllOfAdditionalPropertiesFalseRejectsTheOtherPartsProperties) {
  // Part one allows only "a"; "b" from part two can then never appear.
  ExpectMatches(R"({"allOf": [
      {"properties": {"a": {"type": "integer"}}, "additionalProperties": false},
      {"properties": {"b": {"type": "integer"}}}]})",
                {"{}", R"({"a":1})"}, {R"({"b":1})", R"({"a":1,"b":1})"});
}

TEST(JsonSchemaToGbnf, RefWithDescriptionIsJustTheRef) {
  ExpectMatches(R"({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n",
                    "description": "a number"})",
                {"5"}, {R"("5")"});
}

TEST(JsonSchemaToGbnf, RefWithSiblingsIsTheIntersection) {
  ExpectMatches(R"({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n", "minimum": 3})",
                {"3", "40"}, {"2", "-3"});
}

TEST(JsonSchemaToGbnf, RecursiveRefTree) {
  ExpectMatches(R"({"$defs": {"node": {"type": "object", "properties": {
      "v": {"type": "integer"},
      "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["v"], "additionalProperties": false}},
      "$ref": "#/$defs/node"})",
                {R"({"v":1})", R"({"v":1,"kids":[]})",
                 R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]},{"v":4}]})"},
                {R"({"v":1,"kids":[{}]})", R"({"kids":[]})"});
}

TEST(JsonSchemaToGbnf, RefToRootRecurses) {
  ExpectMatches(R"({"type": "array", "items": {"anyOf": [{"type": "integer"}, {"$ref": "#"}]}})",
                {"[]", "[1,[2,[3]],[]]"}, {"[[a]]", "1"});
}

TEST(JsonSchemaToGbnf, RefPointerWithEscapes) {
  ExpectMatches(R"({"definitions": {"a/b": {"type": "null"}, "c~d": {"type": "boolean"}},
                    "type": "array", "prefixItems": [{"$ref": "#/definitions/a~1b"},
                    {"$ref": "#/definitions/c~0d"}], "items": false, "minItems": 2})",
                {"[null,true]"}, {"[true,null]"});
}

// ---- Types ----

TEST(JsonSchemaToGbnf, TypeListIsAlternation) {
  ExpectMatches(R"({"type": ["string", "null"]})", {R"("x")", "null"}, {"1", "false"});
}

TEST(JsonSchemaToGbnf, MissingTypeInferredFromKeywords) {
  ExpectMatches(R"({"properties": {"a": {"type": "integer"}}, "required": ["a"]})", {R"({"a":1})"},
                {"1", R"("a")"});
}

TEST(JsonSchemaToGbnf, EmptySchemaIsAnyValue) {
  ExpectMatches("{}", {"1", "-2.5e3", "null", R"({"a":[true,"x"]})", R"("\u00e9\n")"},
                {"", "nul", "01", "{a:1}"});
}

// ---- Numbers ----

// Every integer near the bounds and a few far away: matches exactly those
// in [lo, hi].
TEST(JsonSchemaToGbnf, IntegerRangesAreExact) {
  const std::vector<int64_t> bounds = {0, 1, 9, 10, 99, 100, -1, -10, 12345, -12345, 7};
  for (int64_t lo : bounds) {
    for (int64_t hi : bounds) {
      if (lo > hi) continue;
      const std::string schema = R"({"type": "integer", "minimum": )" + std::to_string(lo) +
                                 R"(, "maximum": )" + std::to_string(hi) + "}";
      std::shared_ptr<const Grammar> g = Compile(schema);
      ASSERT_NE(g, nullptr);
      std::vector<int64_t> xs = {1000000, -1000000, 987654321, -987654321};
      for (int64_t x = lo - 30; x <= hi + 30; ++x) xs.push_back(x);
      for (int64_t x : xs) {
        EXPECT_EQ(g->Matches(std::to_string(x)), lo <= x && x <= hi) << schema << " x=" << x;
      }
    }
  }
}

TEST(JsonSchemaToGbnf, IntegerOnlyMinimum) {
  ExpectMatches(R"({"type": "integer", "minimum": -12})", {"-12", "-1", "0", "5", "123456789"},
                {"-13", "-100", "01", "1.5"});
}

TEST(JsonSchemaToGbnf, IntegerOnlyExclusiveMaximum) {
  ExpectMatches(R"({"type": "integer", "exclusiveMaximum": 100})", {"99", "0", "-5000"},
                {"100", "101", "1000"});
}

TEST(JsonSchemaToGbnf, Draft4BooleanExclusiveMinimum) {
  ExpectMatches(R"({"type": "integer", "minimum": 5, "exclusiveMinimum": true})", {"6", "50"},
                {"5", "4"});
}

TEST(JsonSchemaToGbnf, NonNegativeNumbersKeepExponents) {
  ExpectMatches(R"({"type": "number", "minimum": 0})", {"0", "0.5", "12", "1e5", "3.5E-2"},
                {"-1", "-0.5", "-1e5"});
}

TEST(JsonSchemaToGbnf, NumberFractionalBounds) {
  ExpectMatches(R"({"type": "number", "exclusiveMinimum": -2.25, "maximum": 1.05})",
                {"-2.2499", "-2", "0", "1", "1.05", "1.0500", "-0.5"},
                {"-2.25", "-2.2500", "-3", "1.0501", "1.06", "2"});
}

// ---- Strings ----

TEST(JsonSchemaToGbnf, StringLengthCountsEscapesAsOneCharacter) {
  ExpectMatches(R"({"type": "string", "minLength": 2, "maxLength": 3})",
                {R"("ab")", R"("abc")", R"("\n\"")", R"("a\u0041")"},
                {R"("a")", R"("abcd")", R"("\n")"});
}

TEST(JsonSchemaToGbnf, StringEscapes) {
  ExpectMatches(R"({"type": "string"})", {R"("a\"b\\c\/d\b\f\n\r\t\u00FFe")", R"("é")"},
                {R"("a"b")", R"("\x")", R"("\u12")", "\"a\nb\""});
}

TEST(JsonSchemaToGbnf, FormatDate) {
  ExpectMatches(R"({"type": "string", "format": "date"})",
                {R"("2024-02-29")", R"("2000-02-29")", R"("1999-12-31")", R"("2023-04-30")"},
                {R"("2023-02-29")", R"("1900-02-29")", R"("2023-04-31")", R"("2023-13-01")",
                 R"("2023-1-01")", R"("2023-00-10")"});
}

TEST(JsonSchemaToGbnf, FormatDateTime) {
  ExpectMatches(
      R"({"type": "string", "format": "date-time"})",
      {R"("2024-01-02T03:04:05Z")", R"("2024-01-02T23:59:59.123+05:30")"},
      {R"("2024-01-02 03:04:05Z")", R"("2024-01-02T24:00:00Z")", R"("2024-01-02T03:04:05")"});
}

TEST(JsonSchemaToGbnf, FormatUuid) {
  ExpectMatches(
      R"({"type": "string", "format": "uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"},
      {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400g")"});
}

TEST(JsonSchemaToGbnf, FormatEmail) {
  ExpectMatches(R"({"type": "string", "format": "email"})",
                {R"("joe.bloggs@example.com")", R"("a+b@x.io")"},
                {R"("joe")", R"("@example.com")", R"("a..b@example.com")", R"("a@-x.com")"});
}

TEST(JsonSchemaToGbnf, FormatIpv4AndIpv6) {
  ExpectMatches(R"({"type": "string", "format": "ipv4"})", {R"("192.168.0.1")", R"("0.0.0.0")"},
                {R"("256.1.1.1")", R"("01.1.1.1")", R"("1.1.1")"});
  ExpectMatches(R"({"type": "string", "format": "ipv6"})",
                {R"("::1")", R"("2001:db8::8a2e:370:7334")", R"("::ffff:192.0.2.1")"},
                {R"("1:2:3:4:5:6:7:8:9")", R"("12345::")", R"(":::")"});
}

TEST(JsonSchemaToGbnf, FormatHostnameAndUri) {
  ExpectMatches(R"({"type": "string", "format": "hostname"})",
                {R"("localhost")", R"("api.v1.example.com")", R"("a-b.c0")"},
                {R"("-a.com")", R"("a-.com")", R"("a..b")", R"("a_b.com")", R"("1.2.3.4")"});
  ExpectMatches(
      R"({"type": "string", "format": "uri"})",
      {R"("https://example.com/a/b?x=1#f")", R"("mailto:joe@example.com")",
       R"("urn:isbn:0451450523")", R"("http://[::1]:8080/")"},
      {R"("example.com/a")", R"("/a/b")", R"("http://exa mple.com")", R"("http://x/%zz")"});
}

TEST(JsonSchemaToGbnf, PatternIsSearchedInsideTheString) {
  ExpectMatches(R"({"type": "string", "pattern": "b+c"})", {R"("bc")", R"("abbbcd")"},
                {R"("ac")", R"("b")"});
  ExpectMatches(R"({"type": "string", "pattern": "^[a-z]{2}$"})", {R"("ab")"},
                {R"("abc")", R"("a1")", R"("")"});
}

TEST(JsonSchemaToGbnf, StrictModeEnumUsesTheSeparators) {
  ExpectMatches(R"({"enum": [[1, {"a": null}]]})", {R"([1, {"a": null}])"}, {R"([1,{"a":null}])"},
                Strict());
}

TEST(JsonSchemaToGbnf, StrictModeEmptyContainersHaveNoSpace) {
  ExpectMatches(R"({"type": "object", "properties": {"l": {"type": "array"}},
                    "additionalProperties": false})",
                {"{}", R"({"l": []})"}, {"{ }", R"({"l": [ ]})"}, Strict());
}

// ---- Whitespace ----

TEST(JsonSchemaToGbnf, StrictModeTakesJsonDumpsSeparators) {
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "array"},
                                  "b": {"const": {"x": [1, 2]}}}, "required": ["a", "b"]})";
  ExpectMatches(schema, {R"({"a": [1, 2], "b": {"x": [1, 2]}})"},
                {R"({"a":[1,2],"b":{"x":[1,2]}})", R"({ "a": [1, 2], "b": {"x": [1, 2]} })"},
                Strict());
}

TEST(JsonSchemaToGbnf, FlexibleModeBoundsIndentation) {
  JsonSchemaOptions o;
  o.max_indent = 2;
  ExpectMatches(R"({"type": "array", "items": {"type": "integer"}})",
                {"[1,2]", "[ 1 , 2 ]", "[\n  1,\n  2\n]"}, {"[\n   1]", "[  1]", " [1]", "[1] "},
                o);
}

TEST(JsonObjectGbnf, AcceptsAnyObjectOnly) {
  Result<std::shared_ptr<const Grammar>> g = Grammar::FromGbnf(JsonObjectGbnf());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE((*g)->Matches(R"({"a": [1, {"b": null}], "c": "d"})"));
  EXPECT_TRUE((*g)->Matches("{}"));
  EXPECT_FALSE((*g)->Matches("[]"));
  EXPECT_FALSE((*g)->Matches("1"));
}

}  // namespace
}  // namespace folio::grammar
