#include "folio/serving/chat_output.h"

#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "serving/chat_output_testing.h"

namespace folio::serving {
namespace {

using nlohmann::ordered_json;

ChatOutputOptions Tools(ToolCallFormat f) {
  ChatOutputOptions o;
  o.tool_format = f;
  o.tool_names = {"get_weather", "search", "no_args"};
  o.call_id_seed = 7;
  return o;
}

ChatOutputOptions Reasoning(bool starts_inside = false) {
  ChatOutputOptions o;
  o.reasoning = true;
  o.starts_in_reasoning = starts_inside;
  return o;
}

using chat_output_testing::ExpectSame;
using chat_output_testing::ExpectSplitIndependent;
using chat_output_testing::Parse;

ordered_json Args(const ToolCall& c) { return ordered_json::parse(c.arguments); }

TEST(ChatOutput, HermesCallAfterText) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>";
  const ChatDelta d = Parse(Tools(ToolCallFormat::kHermes), text);
  EXPECT_EQ(d.content, "Let me check.");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(d.calls[0].id, ToolCallId(7, 0));
  ExpectSplitIndependent(Tools(ToolCallFormat::kHermes), text);
}

TEST(ChatOutput, HermesParallelUnicodeNestedAndEmptyArguments) {
  const std::string text =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"東京 🙂\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"a\\\"b\", "
      "\"filter\": {\"tags\": [\"x\", {\"deep\": [1, 2.5, null, true]}]}}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"no_args\", \"arguments\": {}}</tool_call>\n";
  const ChatDelta d = Parse(Tools(ToolCallFormat::kHermes), text);
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.calls.size(), 3u);
  EXPECT_EQ(Args(d.calls[0])["city"], "東京 🙂");
  EXPECT_EQ(Args(d.calls[1])["filter"]["tags"][1]["deep"][1], 2.5);
  EXPECT_EQ(Args(d.calls[1])["query"], "a\"b");
  EXPECT_EQ(d.calls[2].arguments, "{}");
  EXPECT_NE(d.calls[0].id, d.calls[1].id);
  ExpectSplitIndependent(Tools(ToolCallFormat::kHermes), text);
}

TEST(ChatOutput, HermesArgumentsAsTextParametersKeyAndMissingArguments) {
  const ChatDelta d = Parse(Tools(ToolCallFormat::kHermes),
                            "<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"x\\\": 1}\"}"
                            "</tool_call><tool_call>{\"name\": \"b\", \"parameters\": {\"y\": 2}}"
                            "</tool_call><tool_call>{\"name\": \"c\"}</tool_call>");
  ASSERT_EQ(d.calls.size(), 3u);
  EXPECT_EQ(d.calls[0].arguments, R"({"x":1})");
  EXPECT_EQ(d.calls[1].arguments, R"({"y":2})");
  EXPECT_EQ(d.calls[2].arguments, "{}");
}

TEST(ChatOutput, AnUnclosedHermesBlockIsReadAtTheEnd) {
  const ChatDelta d = Parse(Tools(ToolCallFormat::kHermes),
                            "<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.content, "");
}

// A malformed call is content, exactly as the model wrote it.
TEST(ChatOutput, UnparsableCallsAreContent) {
  for (const std::string& text :
       {std::string("<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": }"
                    "</tool_call> after"),
        std::string("before <tool_call>{\"arguments\": {}}</tool_call>"),
        std::string("<tool_call>{\"name\": \"x\", \"arguments\": [1]}</tool_call>"),
        std::string("<tool_call>{\"name\": \"x\", \"arguments\": \"not json\"}</tool_call>"),
        std::string("<tool_call>{\"name\": \"x\"} trailing</tool_call>"),
        std::string("<tool_call>{\"name\": \"x\", \"arguments\": {"), std::string("<tool_call"),
        std::string("text <tool_")}) {
    const ChatDelta d = Parse(Tools(ToolCallFormat::kHermes), text);
    EXPECT_TRUE(d.calls.empty()) << text;
    EXPECT_EQ(d.content, text);
    ExpectSplitIndependent(Tools(ToolCallFormat::kHermes), text);
  }
}

TEST(ChatOutput, ABadCallBetweenGoodOnesStaysContentInPlace) {
  const std::string text =
      "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>oops</tool_call>\n"
      "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>";
  const ChatDelta d = Parse(Tools(ToolCallFormat::kHermes), text);
  ASSERT_EQ(d.calls.size(), 2u);
  // The blank before it too: it is content, as written.
  EXPECT_EQ(d.content, "\n<tool_call>oops</tool_call>");
  ExpectSplitIndependent(Tools(ToolCallFormat::kHermes), text);
}

TEST(ChatOutput, PlainTextIsUnchanged) {
  for (const std::string& text : {std::string("Hello!\n"), std::string("  padded  "),
                                  std::string("a < b and c <tool> d\n\n"), std::string("")}) {
    EXPECT_EQ(Parse(Tools(ToolCallFormat::kHermes), text).content, text);
    EXPECT_EQ(Parse(Tools(ToolCallFormat::kMistral), text).content, text);
    EXPECT_EQ(Parse(Reasoning(), text).content, text);
    ExpectSplitIndependent(Tools(ToolCallFormat::kHermes), text);
  }
}

TEST(ChatOutput, TextAfterACallIsContentWithoutTrailingBlanks) {
  const ChatDelta d =
      Parse(Tools(ToolCallFormat::kHermes),
            "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\nDone, see above.\n\n");
  EXPECT_EQ(d.content, "\nDone, see above.");
  ASSERT_EQ(d.calls.size(), 1u);
}

TEST(ChatOutput, WithoutParallelCallsOnlyTheFirstIsKept) {
  ChatOutputOptions o = Tools(ToolCallFormat::kHermes);
  o.parallel_tool_calls = false;
  const ChatDelta d = Parse(o,
                            "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n"
                            "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "a");
  EXPECT_EQ(d.content, "");
}

TEST(ChatOutput, Llama3JsonBareWithPythonTagAndSeveral) {
  const ChatOutputOptions o = Tools(ToolCallFormat::kLlama3Json);
  const std::string bare = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Zürich\"}}";
  ChatDelta d = Parse(o, bare);
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(Args(d.calls[0])["city"], "Zürich");
  EXPECT_EQ(d.content, "");
  ExpectSplitIndependent(o, bare);

  const std::string tagged =
      "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"query\": \"x\"}}; "
      "{\"name\": \"no_args\", \"arguments\": {}}";
  d = Parse(o, tagged);
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[1].name, "no_args");
  ExpectSplitIndependent(o, tagged);

  // A tag may follow text; a bare object must start the reply.
  d = Parse(o, "Calling it.<|python_tag|>{\"name\": \"x\", \"parameters\": {}}");
  EXPECT_EQ(d.content, "Calling it.");
  ASSERT_EQ(d.calls.size(), 1u);
  const std::string late = "Here: {\"name\": \"search\", \"parameters\": {}}";
  d = Parse(o, late);
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, late);
}

// Without a marker, JSON is a call only when it names one of the tools.
TEST(ChatOutput, BareFormsNeedAKnownName) {
  const std::string json_answer = "{\"name\": \"Ada\", \"parameters\": {\"age\": 36}}";
  ChatDelta d = Parse(Tools(ToolCallFormat::kLlama3Json), json_answer);
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, json_answer);
  const std::string array = "[{\"name\": \"Ada\", \"arguments\": {}}]";
  d = Parse(Tools(ToolCallFormat::kMistral), array);
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, array);
  // With the marker the name is not checked.
  d = Parse(Tools(ToolCallFormat::kMistral), "[TOOL_CALLS]" + array);
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "Ada");
}

TEST(ChatOutput, MistralArrayWithAndWithoutMarker) {
  const ChatOutputOptions o = Tools(ToolCallFormat::kMistral);
  const std::string text =
      "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
      "{\"name\": \"search\", \"arguments\": {\"query\": \"🙂\", \"n\": [1, {\"m\": {}}]}}]";
  ChatDelta d = Parse(o, text);
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(Args(d.calls[1])["query"], "🙂");
  EXPECT_EQ(d.content, "");
  ExpectSplitIndependent(o, text);
  d = Parse(o, "\n " + text.substr(std::string("[TOOL_CALLS]").size()));
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.content, "");
  d = Parse(o, "[TOOL_CALLS][]");
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, "[TOOL_CALLS][]");
}

TEST(ChatOutput, GenericReadsCallsAndTheJsonAnswer) {
  const ChatOutputOptions o = Tools(ToolCallFormat::kGeneric);
  const std::string calls =
      "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
      "{\"name\": \"no_args\", \"arguments\": {}}]}";
  ChatDelta d = Parse(o, " \n" + calls);
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(d.content, "");
  ExpectSplitIndependent(o, calls);
  d = Parse(o, R"({"tool_call": {"name": "search", "arguments": "{\"query\": \"x\"}"}})");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, R"({"query":"x"})");
  // The answer without a tool is its text; the reply's blanks and JSON go.
  const std::string answer = R"(  {"response": "It is \"sunny\" \u2600 today."})";
  d = Parse(o, answer);
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, "It is \"sunny\" \u2600 today.");
  ExpectSplitIndependent(o, answer);
  // Anything else is content as written: text, other JSON, unknown names,
  // more keys, an empty list.
  for (const std::string& text :
       {std::string("Plain words {\"response\": \"x\"}"), std::string("{\"answer\": 42}"),
        std::string("{\"tool_calls\": [{\"name\": \"nope\", \"arguments\": {}}]}"),
        std::string("{\"tool_calls\": [], \"response\": \"x\"}"),
        std::string("{\"tool_calls\": []}"), std::string("{\"response\": 3}"),
        std::string("{\"tool_calls\": [")}) {
    d = Parse(o, text);
    EXPECT_TRUE(d.calls.empty()) << text;
    EXPECT_EQ(d.content, text) << text;
  }
  // Text streams as it comes; a reply that opens with "{" waits for its end.
  ChatOutputParser p(o);
  EXPECT_EQ(p.Feed("Hello ").content, "Hello");
  ChatOutputParser q(o);
  EXPECT_EQ(q.Feed("{\"response\": \"Hi").content, "");
  EXPECT_EQ(q.Feed("\"}").content, "");
  EXPECT_EQ(q.Finish().content, "Hi");
}

TEST(ChatOutput, ReasoningThenAnswer) {
  const std::string text = "<think>\nThe user greets.\n</think>\n\nHello!";
  const ChatDelta d = Parse(Reasoning(), text);
  EXPECT_EQ(d.reasoning, "\nThe user greets.\n");
  EXPECT_EQ(d.content, "Hello!");
  ExpectSplitIndependent(Reasoning(), text);
}

TEST(ChatOutput, ReasoningOpenedByThePrompt) {
  const std::string text = "Thinking <b>hard</b>.</think>Answer";
  ChatDelta d = Parse(Reasoning(/*starts_inside=*/true), text);
  EXPECT_EQ(d.reasoning, "Thinking <b>hard</b>.");
  EXPECT_EQ(d.content, "Answer");
  ExpectSplitIndependent(Reasoning(true), text);
  // Not opened: the same text is all content.
  d = Parse(Reasoning(false), text);
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, text);
}

TEST(ChatOutput, UnclosedReasoningIsAllReasoning) {
  const ChatDelta d = Parse(Reasoning(), "<think>still going </thi");
  EXPECT_EQ(d.reasoning, "still going </thi");
  EXPECT_EQ(d.content, "");
  EXPECT_TRUE(PromptOpensReasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(PromptOpensReasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(PromptOpensReasoning(""));
}

TEST(ChatOutput, ReasoningThenToolCall) {
  ChatOutputOptions o = Tools(ToolCallFormat::kHermes);
  o.reasoning = true;
  const std::string text =
      "<think>I need the weather. <tool_call> is how.</think>\n\n<tool_call>\n{\"name\": "
      "\"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  const ChatDelta d = Parse(o, text);
  EXPECT_EQ(d.reasoning, "I need the weather. <tool_call> is how.");
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.calls.size(), 1u);
  ExpectSplitIndependent(o, text);
}

TEST(ChatOutput, MarkerPrefixesAreHeldBackUntilSettled) {
  ChatOutputParser p(Tools(ToolCallFormat::kHermes));
  EXPECT_EQ(p.Feed("Hi <tool").content, "Hi");
  EXPECT_EQ(p.Feed("s> ok").content, " <tools> ok");
  ChatOutputParser r(Reasoning());
  EXPECT_TRUE(r.Feed("<thi").empty());
  EXPECT_EQ(r.Feed("nk>abc</th").reasoning, "abc");
  EXPECT_EQ(r.Feed("ink>x").content, "x");
}

TEST(ChatOutput, CallIdsAreStableAndDistinct) {
  EXPECT_EQ(ToolCallId(1, 0), ToolCallId(1, 0));
  EXPECT_NE(ToolCallId(1, 0), ToolCallId(1, 1));
  EXPECT_NE(ToolCallId(1, 0), ToolCallId(2, 0));
  const std::string id = ToolCallId(99, 3);
  ASSERT_EQ(id.size(), 29u);
  EXPECT_EQ(id.substr(0, 5), "call_");
  for (char c : id.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << id;
}

}  // namespace
}  // namespace folio::serving
