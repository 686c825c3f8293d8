#include "cli/template_command.h"

#include <gtest/gtest.h>

namespace folio::cli {
namespace {

using Json = nlohmann::ordered_json;

TEST(TemplateVariables, AnArrayIsTheMessages) {
  TemplateFlags f;
  Result<Json> v = TemplateVariables(R"([{"role": "user", "content": "hi"}])", f, "<s>", "</s>");
  ASSERT_TRUE(v.ok()) << v.error().ToString();
  EXPECT_EQ((*v)["messages"][0]["content"], "hi");
  EXPECT_EQ((*v)["add_generation_prompt"], true);
  EXPECT_EQ((*v)["bos_token"], "<s>");
  EXPECT_EQ((*v)["eos_token"], "</s>");
  EXPECT_TRUE((*v)["tools"].is_null());
  EXPECT_TRUE((*v)["documents"].is_null());
}

TEST(TemplateVariables, FlagsOverrideTheModelsTokens) {
  TemplateFlags f;
  f.bos_token = "B";
  f.no_generation_prompt = true;
  Result<Json> v = TemplateVariables("[]", f, "<s>", "</s>");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v)["bos_token"], "B");
  EXPECT_EQ((*v)["eos_token"], "</s>");
  EXPECT_EQ((*v)["add_generation_prompt"], false);
}

TEST(TemplateVariables, TheFilesKeysOverrideEverything) {
  TemplateFlags f;
  f.bos_token = "B";
  Result<Json> v = TemplateVariables(
      R"({"messages": [], "bos_token": "file", "tools": [{"z": 1, "a": 2}], "extra": 3})", f, "",
      "");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v)["bos_token"], "file");
  EXPECT_EQ((*v)["extra"], 3);
  // Key order is kept, as Python's json.loads keeps it.
  EXPECT_EQ((*v)["tools"].dump(), R"([{"z":1,"a":2}])");
}

TEST(TemplateVariables, RefusesWhatIsNotAConversation) {
  TemplateFlags f;
  f.messages = "m.json";
  for (const char* text : {"not json", "3", R"("text")", R"({"tools": []})"}) {
    Result<Json> v = TemplateVariables(text, f, "", "");
    ASSERT_FALSE(v.ok()) << text;
    EXPECT_EQ(v.error().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(v.error().message().find("m.json"), std::string::npos) << v.error().message();
  }
}

}  // namespace
}  // namespace folio::cli
