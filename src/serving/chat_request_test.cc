#include "folio/serving/chat_request.h"

#include <gtest/gtest.h>

#include <string>

namespace folio::serving {
namespace {

using json = nlohmann::ordered_json;

ChatRequest Ok(const std::string& body) {
  std::variant<ChatRequest, FieldError> r = ParseChatRequest(json::parse(body));
  if (const FieldError* e = std::get_if<FieldError>(&r)) {
    ADD_FAILURE() << body << " -> " << e->field << ": " << e->message;
    return {};
  }
  return std::get<ChatRequest>(r);
}

// A template that shows everything it is given.
ChatFormat Echo(const std::string& extra = "") {
  Result<ChatFormat> f = ChatFormat::Create(
      "", "{{ messages | tojson }}|{{ tools | tojson }}|{{ flag | default('-') }}" + extra,
      nullptr);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return std::move(*f);
}

PreparedChat Prepare(const ChatFormat& f, const std::string& body, ChatParsers parsers = {}) {
  std::variant<PreparedChat, FieldError> r = PrepareChat(f, Ok(body), parsers);
  if (const FieldError* e = std::get_if<FieldError>(&r)) {
    ADD_FAILURE() << body << " -> " << e->field << ": " << e->message;
    return {};
  }
  return std::get<PreparedChat>(r);
}

const char* const kTool =
    R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])";

TEST(ParseChatRequest, ToolLoopMessagesAreAcceptedAndArgumentsBecomeObjects) {
  const ChatRequest r = Ok(R"({"messages": [
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "f", "arguments": "{\"x\": [1, \"é\"]}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "42"},
      {"role": "assistant", "tool_calls": [{"type": "function",
        "function": {"name": "f", "arguments": {"y": 2}}}]}]})");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0]["content"], "ab");
  EXPECT_TRUE(r.messages[1]["content"].is_null());
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"],
            json::parse(R"({"x": [1, "é"]})"));
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(r.messages[2]["tool_call_id"], "call_1");
  EXPECT_FALSE(r.messages[3].contains("content"));  // absent stays absent
  EXPECT_EQ(r.messages[3]["tool_calls"][0]["function"]["arguments"], json::parse(R"({"y": 2})"));
}

struct BadBody {
  std::string body;
  std::string field;
};

class ParseChatRequestBad : public testing::TestWithParam<BadBody> {};

TEST_P(ParseChatRequestBad, NamesTheField) {
  std::variant<ChatRequest, FieldError> r = ParseChatRequest(json::parse(GetParam().body));
  ASSERT_TRUE(std::holds_alternative<FieldError>(r)) << GetParam().body;
  EXPECT_EQ(std::get<FieldError>(r).field, GetParam().field) << std::get<FieldError>(r).message;
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, ParseChatRequestBad,
    testing::Values(
        BadBody{R"({})", "messages"}, BadBody{R"({"messages": []})", "messages"},
        BadBody{R"({"messages": [{"role": "user"}]})", "messages[0].content"},
        BadBody{R"({"messages": [{"role": "assistant", "content": null}]})", "messages[0].content"},
        BadBody{R"({"messages": [{"role": "assistant", "content": null, "tool_calls": []}]})",
                "messages[0].content"},
        BadBody{R"({"messages": [{"role": "tool", "content": "42"}]})", "messages[0].tool_call_id"},
        BadBody{R"({"messages": [{"role": "tool", "content": "42", "tool_call_id": 7}]})",
                "messages[0].tool_call_id"},
        BadBody{R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})",
                "messages[0].tool_calls"},
        BadBody{R"({"messages": [{"role": "assistant", "tool_calls": {}}]})",
                "messages[0].tool_calls"},
        BadBody{R"({"messages": [{"role": "assistant", "tool_calls": [3]}]})",
                "messages[0].tool_calls[0]"},
        BadBody{R"({"messages": [{"role": "assistant", "tool_calls": [{"type": "function"}]}]})",
                "messages[0].tool_calls[0].function"},
        BadBody{R"({"messages": [{"role": "assistant", "tool_calls": [{"type": "x",
                   "function": {"name": "f", "arguments": "{}"}}]}]})",
                "messages[0].tool_calls[0].type"},
        BadBody{R"({"messages": [{"role": "assistant", "tool_calls": [{"function":
                   {"arguments": "{}"}}]}]})",
                "messages[0].tool_calls[0].function.name"},
        BadBody{R"({"messages": [{"role": "assistant", "tool_calls": [{"function":
                   {"name": "f"}}]}]})",
                "messages[0].tool_calls[0].function.arguments"},
        BadBody{R"({"messages": [{"role": "assistant", "tool_calls": [{"function":
                   {"name": "f", "arguments": "{oops"}}]}]})",
                "messages[0].tool_calls[0].function.arguments"},
        BadBody{R"({"messages": [{"role": "assistant", "tool_calls": [{"function":
                   {"name": "f", "arguments": "[1]"}}]}]})",
                "messages[0].tool_calls[0].function.arguments"},
        BadBody{R"({"messages": [{"role": "assistant", "tool_calls": [{"id": 1, "function":
                   {"name": "f", "arguments": "{}"}}]}]})",
                "messages[0].tool_calls[0].id"},
        BadBody{R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": 1})",
                "chat_template_kwargs"},
        BadBody{R"({"messages": [{"role": "user", "content": "x"}],
                    "chat_template_kwargs": {"tools": []}})",
                "chat_template_kwargs"},
        BadBody{R"({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "max"})",
                "reasoning_effort"},
        BadBody{R"({"messages": [{"role": "user", "content": "x"}], "split_reasoning": 0})",
                "split_reasoning"},
        BadBody{R"({"messages": [{"role": "user", "content": "x"}], "tools": [{}]})",
                "tools[0].type"}));

TEST(PrepareChat, ToolsAndKwargsReachTheTemplate) {
  const ChatFormat f = Echo();
  const std::string tools = kTool;
  PreparedChat p = Prepare(f,
                           R"({"messages": [{"role": "user", "content": "x"}], "tools": )" + tools +
                               R"(, "chat_template_kwargs": {"flag": true}})",
                           *MakeChatParsers("hermes", "auto"));
  EXPECT_EQ(p.prompt.text,
            R"([{"role": "user", "content": "x"}]|)"
            R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])"
            R"(|True)");
  EXPECT_EQ(p.output.tool_format, ToolCallFormat::kHermes);
  EXPECT_EQ(p.output.tool_names, std::vector<std::string>{"f"});
  EXPECT_FALSE(p.tool_grammar);
  EXPECT_FALSE(p.output.reasoning);
  // tool_choice none: no tools shown, none parsed.
  p = Prepare(f, R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "none",
                     "tools": )" +
                     tools + "}");
  EXPECT_EQ(p.prompt.text, R"([{"role": "user", "content": "x"}]|null|-)");
  EXPECT_FALSE(p.output.tool_format);
}

TEST(PrepareChat, TheTemplateChoosesTheFormatUnlessAFlagDoes) {
  Result<ChatFormat> hermes =
      ChatFormat::Create("", std::string("{% if tools %}<tool_call>{% endif %}"), nullptr);
  ASSERT_TRUE(hermes.ok());
  const std::string body =
      R"({"messages": [{"role": "user", "content": "x"}], "tools": )" + std::string(kTool) + "}";
  EXPECT_EQ(Prepare(*hermes, body).output.tool_format, ToolCallFormat::kHermes);
  EXPECT_EQ(Prepare(*hermes, body, *MakeChatParsers("mistral", "auto")).output.tool_format,
            ToolCallFormat::kMistral);
  // A template without a known format, or tool parsing off: refused, naming tools.
  for (const ChatParsers& parsers :
       {*MakeChatParsers("auto", "auto"), *MakeChatParsers("none", "auto")}) {
    std::variant<PreparedChat, FieldError> r = PrepareChat(Echo(), Ok(body), parsers);
    ASSERT_TRUE(std::holds_alternative<FieldError>(r));
    EXPECT_EQ(std::get<FieldError>(r).field, "tools");
  }
  EXPECT_FALSE(MakeChatParsers("qwen", "auto").ok());
  EXPECT_FALSE(MakeChatParsers("auto", "yes").ok());
}

TEST(PrepareChat, ATemplateWithoutToolsGetsTheGenericFormat) {
  // Never mentions tools: folio shows them in a system message.
  Result<ChatFormat> f = ChatFormat::Create(
      "", std::string("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"),
      nullptr);
  ASSERT_TRUE(f.ok());
  const std::string body =
      R"({"messages": [{"role": "user", "content": "x"}], "tools": )" + std::string(kTool) + "}";
  PreparedChat p = Prepare(*f, body);
  EXPECT_EQ(p.output.tool_format, ToolCallFormat::kGeneric);
  EXPECT_TRUE(p.prompt.text.starts_with("[system] You can call these tools")) << p.prompt.text;
  EXPECT_TRUE(p.prompt.text.ends_with("\n[user] x\n")) << p.prompt.text;
  EXPECT_FALSE(p.tool_grammar);
  // Forced: the grammar is the JSON object's.
  p = Prepare(*f, R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required",
                     "tools": )" +
                      std::string(kTool) + "}");
  ASSERT_TRUE(p.tool_grammar);
  EXPECT_NE(p.tool_grammar->find("tool_calls"), std::string::npos);
  // tool_choice none: the template alone, as without tools.
  p = Prepare(*f, R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "none",
                     "tools": )" +
                      std::string(kTool) + "}");
  EXPECT_EQ(p.prompt.text, "[user] x\n");
}

TEST(PrepareChat, AForcedCallHasAGrammar) {
  const std::string body = R"({"messages": [{"role": "user", "content": "x"}], "tools": )" +
                           std::string(kTool) + R"(, "tool_choice": "required"})";
  PreparedChat p = Prepare(Echo(), body, *MakeChatParsers("hermes", "auto"));
  ASSERT_TRUE(p.tool_grammar);
  EXPECT_NE(p.tool_grammar->find("<tool_call>"), std::string::npos);
}

TEST(PrepareChat, ReasoningFollowsTheTemplateTheFlagAndTheRequest) {
  Result<ChatFormat> think = ChatFormat::Create(
      "", std::string("{% if opened %}<think>\n{% endif %}{# </think> #}"), nullptr);
  ASSERT_TRUE(think.ok());
  const std::string body = R"({"messages": [{"role": "user", "content": "x"}]})";
  PreparedChat p = Prepare(*think, body);
  EXPECT_TRUE(p.output.reasoning);
  EXPECT_FALSE(p.output.starts_in_reasoning);
  p = Prepare(*think, R"({"messages": [{"role": "user", "content": "x"}],
                          "chat_template_kwargs": {"opened": true}})");
  EXPECT_TRUE(p.output.starts_in_reasoning);
  EXPECT_FALSE(Prepare(*think, R"({"messages": [{"role": "user", "content": "x"}],
                                   "split_reasoning": false})")
                   .output.reasoning);
  EXPECT_FALSE(Prepare(*think, body, *MakeChatParsers("auto", "none")).output.reasoning);
  EXPECT_FALSE(Prepare(Echo(), body).output.reasoning);
  EXPECT_TRUE(Prepare(Echo(), body, *MakeChatParsers("auto", "qwen3")).output.reasoning);
}

// A harmony template (it writes <|channel|>) has its replies read as
// harmony messages with or without tools, and even when calls are not read;
// --tool-call-parser harmony makes any template's replies harmony, another
// parser none.
TEST(PrepareChat, AHarmonyTemplateReadsRepliesAsHarmony) {
  Result<ChatFormat> harmony = ChatFormat::Create(
      "",
      std::string("{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}"
                  "<|end|>{% endfor %}<|start|>assistant{# <|channel|>final #}"),
      nullptr);
  ASSERT_TRUE(harmony.ok());
  const std::string plain = R"({"messages": [{"role": "user", "content": "x"}]})";
  const std::string tools =
      R"({"messages": [{"role": "user", "content": "x"}], "tools": )" + std::string(kTool) + "}";
  PreparedChat p = Prepare(*harmony, plain);
  EXPECT_TRUE(p.output.harmony);
  EXPECT_TRUE(p.output.reasoning);
  EXPECT_FALSE(p.output.tool_format);
  EXPECT_TRUE(p.output.active());
  p = Prepare(*harmony, tools);
  EXPECT_TRUE(p.output.harmony);
  EXPECT_EQ(p.output.tool_format, ToolCallFormat::kHarmony);
  EXPECT_FALSE(p.tool_grammar);
  p = Prepare(*harmony, plain, *MakeChatParsers("none", "auto"));
  EXPECT_TRUE(p.output.harmony);
  EXPECT_FALSE(Prepare(*harmony, plain, *MakeChatParsers("auto", "none")).output.reasoning);
  EXPECT_FALSE(Prepare(*harmony, R"({"messages": [{"role": "user", "content": "x"}],
                                     "split_reasoning": false})")
                   .output.reasoning);
  EXPECT_FALSE(Prepare(*harmony, plain, *MakeChatParsers("hermes", "auto")).output.harmony);
  p = Prepare(Echo(), tools, *MakeChatParsers("harmony", "auto"));
  EXPECT_TRUE(p.output.harmony);
  EXPECT_EQ(p.output.tool_format, ToolCallFormat::kHarmony);
  EXPECT_FALSE(Prepare(Echo(), plain).output.harmony);
}

// A forced harmony call, or a strict tool under "auto", gets the harmony
// grammar (harmony_grammar_test.cc checks what it allows): its call ends
// with the <|call|> token, reasoning split or not.
TEST(PrepareChat, AForcedHarmonyCallGetsTheHarmonyGrammar) {
  for (const char* choice : {R"("required")", R"("auto")"}) {
    for (const char* split : {"true", "false"}) {
      std::string tools = kTool;
      if (std::string_view(choice) == R"("auto")") {
        tools.insert(tools.find(R"("name")"), R"("strict": true, )");
      }
      const std::string body = R"({"messages": [{"role": "user", "content": "x"}], "tools": )" +
                               tools + R"(, "tool_choice": )" + choice +
                               R"(, "split_reasoning": )" + split + "}";
      std::variant<PreparedChat, FieldError> r =
          PrepareChat(Echo(), Ok(body), *MakeChatParsers("harmony", "auto"));
      ASSERT_TRUE(std::holds_alternative<PreparedChat>(r))
          << body << ": " << std::get<FieldError>(r).message;
      const PreparedChat& p = std::get<PreparedChat>(r);
      ASSERT_TRUE(p.tool_grammar.has_value()) << body;
      EXPECT_NE(p.tool_grammar->find("<|call|>"), std::string::npos) << *p.tool_grammar;
      EXPECT_TRUE(p.output.harmony);
    }
  }
}

TEST(PrepareChat, ReasoningEffortIsATemplateVariable) {
  Result<ChatFormat> f =
      ChatFormat::Create("", std::string("{{ reasoning_effort | default('none') }}"), nullptr);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(Prepare(*f, R"({"messages": [{"role": "user", "content": "x"}],
                            "reasoning_effort": "low"})")
                .prompt.text,
            "low");
}

}  // namespace
}  // namespace folio::serving
