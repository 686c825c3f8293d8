#include "server/json_body.h"

#include <gtest/gtest.h>

#include <string>

namespace folio::server {
namespace {

using json = nlohmann::ordered_json;

std::string ErrorOf(std::string_view body, const JsonBodyLimits& limits = {}) {
  Result<json> j = ParseJsonBody(body, limits);
  EXPECT_FALSE(j.ok()) << body.substr(0, 80);
  return j.ok() ? std::string() : j.error().message();
}

TEST(JsonBody, ParsesAsNlohmannDoesKeepingKeyOrder) {
  const std::string body =
      R"({"z": 1, "a": [true, null, -3, 18446744073709551615, 2.5, "s\u00e9"], )"
      R"("m": {"y": {}, "b": []}, "e": ""})";
  Result<json> j = ParseJsonBody(body);
  ASSERT_TRUE(j.ok()) << j.error().ToString();
  EXPECT_EQ(*j, json::parse(body));
  EXPECT_EQ(j->dump(), json::parse(body).dump());  // the same key order
  EXPECT_EQ(j->begin().key(), "z");
  for (const char* scalar : {"3", "\"x\"", "null", "[]", "{}"}) {
    EXPECT_EQ(*ParseJsonBody(scalar), json::parse(scalar)) << scalar;
  }
}

TEST(JsonBody, EachRefusalIsNamed) {
  EXPECT_NE(ErrorOf(R"({"a": 1, "b": 2, "a": 3})").find("\"a\" twice"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"a": 1,})").find("not valid JSON (at byte"), std::string::npos);
  EXPECT_NE(ErrorOf("").find("not valid JSON"), std::string::npos);
  EXPECT_NE(ErrorOf("{} x").find("not valid JSON"), std::string::npos);
  EXPECT_NE(ErrorOf(std::string(200, '[') + std::string(200, ']')).find("deeper than 128"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"a": {"b": {"c": 1}}})", {.max_depth = 2}).find("deeper than 2"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"a": 1, "b": {"c": 2}})", {.max_keys = 2}).find("more than 2"),
            std::string::npos);
  // The same key in two objects is no duplicate.
  EXPECT_TRUE(ParseJsonBody(R"([{"a": 1}, {"a": 2}])").ok());
}

TEST(JsonBody, ManyKeysInOneObjectParse) {
  std::string body = "{";
  for (int i = 0; i < 60000; ++i) {
    if (i != 0) body.push_back(',');
    body.append("\"k").append(std::to_string(i)).append("\":1");
  }
  body.push_back('}');
  Result<json> j = ParseJsonBody(body);
  ASSERT_TRUE(j.ok()) << j.error().ToString();
  EXPECT_EQ(j->size(), 60000u);
  EXPECT_EQ((*j)["k59999"], 1);
}

}  // namespace
}  // namespace folio::server
