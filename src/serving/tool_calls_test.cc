#include "folio/serving/tool_calls.h"

#include <gtest/gtest.h>

#include <string>

#include "folio/grammar/grammar.h"
#include "folio/serving/chat_output.h"

namespace folio::serving {
namespace {

using json = nlohmann::ordered_json;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather.",
   "parameters": {"type": "object", "properties": {
     "city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"],
     "additionalProperties": false}}},
  {"type": "function", "function": {"name": "add", "parameters": {
     "type": "object", "properties": {"a": {"type": "integer"}, "b": {"$ref": "#/$defs/n"}},
     "required": ["a", "b"], "additionalProperties": false,
     "$defs": {"n": {"type": "integer", "minimum": 0}}}}},
  {"type": "function", "function": {"name": "ping"}}
])");

ChatTools Ok(const json& tools, const json& choice = nullptr, const json& parallel = nullptr) {
  std::variant<ChatTools, FieldError> r = ParseChatTools(&tools, &choice, &parallel);
  if (const FieldError* e = std::get_if<FieldError>(&r)) {
    ADD_FAILURE() << e->field << ": " << e->message;
    return {};
  }
  return std::get<ChatTools>(r);
}

FieldError Err(const json& tools, const json& choice = nullptr, const json& parallel = nullptr) {
  std::variant<ChatTools, FieldError> r = ParseChatTools(&tools, &choice, &parallel);
  if (std::holds_alternative<ChatTools>(r)) {
    ADD_FAILURE() << tools.dump() << " / " << choice.dump() << " was accepted";
    return {};
  }
  return std::get<FieldError>(r);
}

TEST(ToolCallFormat, NamesRoundTripAndTemplatesAreRecognised) {
  for (ToolCallFormat f : kToolCallFormats) {
    EXPECT_EQ(ToolCallFormatFromName(ToolCallFormatName(f)), f);
  }
  EXPECT_FALSE(ToolCallFormatFromName("qwen"));
  EXPECT_EQ(DetectToolCallFormat("{{ '<tool_call>\\n' }}"), ToolCallFormat::kHermes);
  EXPECT_EQ(DetectToolCallFormat("[AVAILABLE_TOOLS] ... [TOOL_CALLS]"), ToolCallFormat::kMistral);
  EXPECT_EQ(DetectToolCallFormat("{{ '<|python_tag|>' }}"), ToolCallFormat::kLlama3Json);
  EXPECT_EQ(DetectToolCallFormat("<|start_header_id|>ipython<|end_header_id|>"),
            ToolCallFormat::kLlama3Json);
  EXPECT_FALSE(DetectToolCallFormat("<|im_start|>{{ m.content }}<|im_end|>"));
}

TEST(ParseChatTools, DefaultsAndChoices) {
  ChatTools t = Ok(kTools);
  EXPECT_EQ(t.choice, ToolChoice::kAuto);
  EXPECT_TRUE(t.active());
  EXPECT_TRUE(t.parallel);
  ASSERT_EQ(t.functions.size(), 3u);
  EXPECT_EQ(t.definitions, kTools);
  // A tool without parameters takes none.
  EXPECT_EQ(t.functions[2].parameters,
            json::parse(R"({"type": "object", "properties": {}, "additionalProperties": false})"));
  EXPECT_EQ(Ok(kTools, "none").choice, ToolChoice::kNone);
  EXPECT_FALSE(Ok(kTools, "none").active());
  EXPECT_EQ(Ok(kTools, "required", false).choice, ToolChoice::kRequired);
  EXPECT_FALSE(Ok(kTools, "required", false).parallel);
  t = Ok(kTools, json::parse(R"({"type": "function", "function": {"name": "add"}})"));
  EXPECT_EQ(t.choice, ToolChoice::kNamed);
  EXPECT_EQ(t.named, "add");
  EXPECT_EQ(Ok(json::array(), "auto").choice, ToolChoice::kNone);
  // What the template sees: the tools as sent, an empty list too, but none
  // under tool_choice "none".
  EXPECT_EQ(Ok(kTools).TemplateTools(), kTools);
  EXPECT_EQ(Ok(json::array()).TemplateTools(), json::array());
  EXPECT_TRUE(Ok(kTools, "none").TemplateTools().is_null());
  EXPECT_TRUE(Ok(nullptr).TemplateTools().is_null());
  EXPECT_EQ(Ok(nullptr, "none").choice, ToolChoice::kNone);
}

struct BadTools {
  std::string tools;
  std::string choice;
  std::string field;
};

class ParseChatToolsBad : public testing::TestWithParam<BadTools> {};

TEST_P(ParseChatToolsBad, NamesTheField) {
  const BadTools& c = GetParam();
  const FieldError e = Err(json::parse(c.tools), json::parse(c.choice));
  EXPECT_EQ(e.field, c.field) << e.message;
  EXPECT_FALSE(e.message.empty());
}

const char* const kOne = R"([{"type": "function", "function": {"name": "f"}}])";

INSTANTIATE_TEST_SUITE_P(
    Matrix, ParseChatToolsBad,
    testing::Values(
        BadTools{"{}", "null", "tools"}, BadTools{"[1]", "null", "tools[0]"},
        BadTools{"[{}]", "null", "tools[0].type"},
        BadTools{R"([{"type": "retrieval", "function": {"name": "f"}}])", "null", "tools[0].type"},
        BadTools{R"([{"type": "function"}])", "null", "tools[0].function"},
        BadTools{R"([{"type": "function", "function": []}])", "null", "tools[0].function"},
        BadTools{R"([{"type": "function", "function": {"name": "f"}, "x": 1}])", "null",
                 "tools[0]"},
        BadTools{R"([{"type": "function", "function": {}}])", "null", "tools[0].function.name"},
        BadTools{R"([{"type": "function", "function": {"name": "a b"}}])", "null",
                 "tools[0].function.name"},
        BadTools{R"([{"type": "function", "function": {"name": ""}}])", "null",
                 "tools[0].function.name"},
        BadTools{
            R"([{"type": "function", "function": {"name": ")" + std::string(65, 'x') + R"("}}])",
            "null", "tools[0].function.name"},
        BadTools{R"([{"type": "function", "function": {"name": "f"}},
                     {"type": "function", "function": {"name": "f"}}])",
                 "null", "tools[1].function.name"},
        BadTools{R"([{"type": "function", "function": {"name": "f", "description": 3}}])", "null",
                 "tools[0].function.description"},
        BadTools{R"([{"type": "function", "function": {"name": "f", "parameters": "{}"}}])", "null",
                 "tools[0].function.parameters"},
        BadTools{R"([{"type": "function", "function": {"name": "f", "strict": "yes"}}])", "null",
                 "tools[0].function.strict"},
        BadTools{R"([{"type": "function", "function": {"name": "f", "other": 1}}])", "null",
                 "tools[0].function"},
        // strict cannot be enforced under auto.
        BadTools{R"([{"type": "function", "function": {"name": "f", "strict": true}}])", "null",
                 "tools[0].function.strict"},
        BadTools{kOne, R"("sometimes")", "tool_choice"}, BadTools{kOne, "3", "tool_choice"},
        BadTools{kOne, R"({"type": "function", "function": {"name": "g"}})", "tool_choice"},
        BadTools{kOne, R"({"type": "function"})", "tool_choice"},
        BadTools{kOne, R"({"type": "function", "function": {"name": "f"}, "x": 1})", "tool_choice"},
        BadTools{"[]", R"("required")", "tool_choice"},
        BadTools{"null", R"({"type": "function", "function": {"name": "f"}})", "tool_choice"}));

TEST(ParseChatTools, ParallelToolCallsMustBeABoolean) {
  EXPECT_EQ(Err(kTools, nullptr, "yes").field, "parallel_tool_calls");
  // strict is fine where a grammar forces the call.
  const json strict = json::parse(R"([{"type": "function", "function":
      {"name": "f", "strict": true, "parameters": {"type": "object"}}}])");
  EXPECT_TRUE(Ok(strict, "required").functions[0].strict);
}

std::shared_ptr<const grammar::Grammar> Compile(const ChatTools& t, ToolCallFormat f) {
  Result<std::string> gbnf = ToolCallGbnf(t, f);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status().ToString();
  if (!gbnf.ok()) return nullptr;
  Result<std::shared_ptr<const grammar::Grammar>> g = grammar::Grammar::FromGbnf(*gbnf);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << *gbnf;
  return g.ok() ? *g : nullptr;
}

TEST(ToolCallGbnf, HermesRequiredAcceptsValidCallsOnly) {
  const ChatTools t = Ok(kTools, "required");
  auto g = Compile(t, ToolCallFormat::kHermes);
  ASSERT_TRUE(g);
  const std::string weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>";
  const std::string add =
      "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": -3, \"b\": 4}}\n</tool_call>";
  const std::string ping = "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>";
  EXPECT_TRUE(g->Matches(weather));
  EXPECT_TRUE(g->Matches(add));
  EXPECT_TRUE(g->Matches(ping));
  EXPECT_TRUE(g->Matches(weather + "\n" + add));  // parallel calls
  EXPECT_FALSE(g->Matches(""));
  EXPECT_FALSE(g->Matches("Sure!"));
  // The arguments follow the schema: $ref resolved where the tool put it.
  EXPECT_FALSE(g->Matches(
      "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": -4}}\n</tool_call>"));
  EXPECT_FALSE(g->Matches(
      "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": \"1\", \"b\": 4}}\n</tool_call>"));
  EXPECT_FALSE(
      g->Matches("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(g->Matches(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a\", \"x\": 1}}\n"
      "</tool_call>"));
  EXPECT_FALSE(g->Matches("<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"));
  // Without parallel calls: one.
  auto one = Compile(Ok(kTools, "required", false), ToolCallFormat::kHermes);
  ASSERT_TRUE(one);
  EXPECT_TRUE(one->Matches(weather));
  EXPECT_FALSE(one->Matches(weather + "\n" + add));
}

TEST(ToolCallGbnf, NamedAllowsOnlyThatFunction) {
  const ChatTools t =
      Ok(kTools, json::parse(R"({"type": "function", "function": {"name": "get_weather"}})"));
  auto g = Compile(t, ToolCallFormat::kHermes);
  ASSERT_TRUE(g);
  const std::string weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": "
      "\"c\"}}\n</tool_call>";
  EXPECT_TRUE(g->Matches(weather));
  EXPECT_FALSE(g->Matches(weather + "\n" + weather));
  EXPECT_FALSE(g->Matches("<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>"));
}

TEST(ToolCallGbnf, Llama3AndMistralWriteTheBareForms) {
  auto llama = Compile(Ok(kTools, "required"), ToolCallFormat::kLlama3Json);
  ASSERT_TRUE(llama);
  const std::string call = "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}";
  EXPECT_TRUE(llama->Matches(call));
  EXPECT_TRUE(llama->Matches(call + "; " + call));
  EXPECT_FALSE(llama->Matches("{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}"));
  auto mistral = Compile(Ok(kTools, "required"), ToolCallFormat::kMistral);
  ASSERT_TRUE(mistral);
  EXPECT_TRUE(mistral->Matches("[{\"name\": \"ping\", \"arguments\": {}}]"));
  EXPECT_TRUE(mistral->Matches(
      "[{\"name\": \"ping\", \"arguments\": {}}, {\"name\": \"ping\", \"arguments\": {}}]"));
  EXPECT_FALSE(mistral->Matches("[]"));
  auto single = Compile(Ok(kTools, "required", false), ToolCallFormat::kMistral);
  ASSERT_TRUE(single);
  EXPECT_FALSE(single->Matches(
      "[{\"name\": \"ping\", \"arguments\": {}}, {\"name\": \"ping\", \"arguments\": {}}]"));
}

// What the grammar lets a model write, the output parser reads as calls.
TEST(ToolCallGbnf, ForcedTextParsesAsCalls) {
  struct Case {
    ToolCallFormat format;
    std::string text;
  };
  for (const Case& c :
       {Case{ToolCallFormat::kHermes,
             "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>"},
        Case{ToolCallFormat::kLlama3Json,
             "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}; {\"name\": \"ping\", "
             "\"parameters\": {}}"},
        Case{ToolCallFormat::kMistral,
             "[{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]"}}) {
    auto g = Compile(Ok(kTools, "required"), c.format);
    ASSERT_TRUE(g);
    ASSERT_TRUE(g->Matches(c.text)) << c.text;
    ChatOutputOptions o;
    o.tool_format = c.format;
    o.tool_names = {"get_weather", "add", "ping"};
    ChatOutputParser p(o);
    ChatDelta d = p.Feed(c.text);
    d.Append(p.Finish());
    ASSERT_FALSE(d.calls.empty()) << c.text;
    EXPECT_EQ(d.calls[0].name, "add");
    EXPECT_EQ(d.calls[0].arguments, R"({"a":1,"b":2})");
    EXPECT_EQ(d.content, "");
  }
}

TEST(ToolCallGbnf, AnUnsupportedSchemaNamesItsTool) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "f"}},
      {"type": "function", "function": {"name": "g", "parameters":
        {"type": "object", "properties": {"x": {"not": {"type": "string"}}}}}}])");
  Result<std::string> gbnf = ToolCallGbnf(Ok(tools, "required"), ToolCallFormat::kHermes);
  ASSERT_FALSE(gbnf.ok());
  EXPECT_NE(gbnf.error().message().find("tools[1].function.parameters"), std::string::npos)
      << gbnf.error().message();
  // A named choice compiles only the named tool's schema.
  EXPECT_TRUE(
      ToolCallGbnf(Ok(tools, json::parse(R"({"type": "function", "function": {"name": "f"}})")),
                   ToolCallFormat::kHermes)
          .ok());
}

}  // namespace
}  // namespace folio::serving
