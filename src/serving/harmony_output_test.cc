#include "folio/serving/harmony_output.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "folio/serving/chat_output.h"
#include "serving/chat_output_testing.h"

// Examples of harmony replies (the prompt ended with <|start|>assistant),
// written as gpt-oss writes them (openai-harmony's docs); the texts that
// openai-harmony itself renders are checked in
// tests/python/test_harmony_output.py.
namespace folio::serving {
namespace {

ChatOutputOptions Harmony(bool tools = true) {
  ChatOutputOptions o;
  o.harmony = true;
  o.reasoning = true;
  if (tools) o.tool_format = ToolCallFormat::kHarmony;
  o.tool_names = {"get_weather", "search"};
  o.call_id_seed = 7;
  return o;
}

using chat_output_testing::ExpectSame;
using chat_output_testing::ExpectSplitIndependent;
using chat_output_testing::Parse;

constexpr std::string_view kReasoningThenFinal =
    "<|channel|>analysis<|message|>User asks 2+2. Easy.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>";

TEST(HarmonyOutput, AnalysisIsReasoningFinalIsContent) {
  const ChatDelta d = Parse(Harmony(), kReasoningThenFinal);
  EXPECT_EQ(d.reasoning, "User asks 2+2. Easy.");
  EXPECT_EQ(d.content, "2 + 2 = 4.");
  EXPECT_TRUE(d.calls.empty());
}

TEST(HarmonyOutput, ReasoningStreamsBeforeTheMessageEnds) {
  ChatOutputParser p(Harmony());
  EXPECT_EQ(p.Feed("<|channel|>analysis<|mess").reasoning, "");
  EXPECT_EQ(p.Feed("age|>Think").reasoning, "Think");
  // "<|e" may start <|end|>: held back until told apart.
  const ChatDelta d = p.Feed("ing <|e");
  EXPECT_EQ(d.reasoning, "ing ");
  EXPECT_EQ(p.Feed("x").reasoning, "<|ex");
}

constexpr std::string_view kPreambleThenCall =
    "<|channel|>analysis<|message|>Need weather.<|end|>"
    "<|start|>assistant<|channel|>commentary<|message|>Checking the weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    "<|message|>{\"city\": \"Paris\"}<|call|>";

TEST(HarmonyOutput, PreambleIsContentAndCallIsACall) {
  const ChatDelta d = Parse(Harmony(), kPreambleThenCall);
  EXPECT_EQ(d.reasoning, "Need weather.");
  EXPECT_EQ(d.content, "Checking the weather.");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].arguments, "{\"city\":\"Paris\"}");
  EXPECT_EQ(d.calls[0].id, ToolCallId(7, 0));
}

TEST(HarmonyOutput, RecipientInTheHeaderBeforeTheChannel) {
  const ChatDelta d = Parse(
      Harmony(), " to=functions.search<|channel|>commentary json<|message|>{\"q\":\"x\"}<|call|>");
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "search");
  EXPECT_EQ(d.calls[0].arguments, "{\"q\":\"x\"}");
}

constexpr std::string_view kTwoCalls =
    "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":"
    "\"Paris\"}<|call|><|start|>assistant<|channel|>commentary to=functions.search "
    "<|constrain|>json<|message|>{}<|call|>";

TEST(HarmonyOutput, SeveralCallsInOrder) {
  const ChatDelta d = Parse(Harmony(), kTwoCalls);
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[1].name, "search");
  EXPECT_EQ(d.calls[1].arguments, "{}");
  EXPECT_NE(d.calls[0].id, d.calls[1].id);
}

TEST(HarmonyOutput, WithoutParallelCallsOnlyTheFirstIsKept) {
  ChatOutputOptions o = Harmony();
  o.parallel_tool_calls = false;
  const ChatDelta d = Parse(o, kTwoCalls);
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
}

TEST(HarmonyOutput, ACallIsEmittedWhenItsMessageEnds) {
  ChatOutputParser p(Harmony());
  EXPECT_TRUE(p.Feed("<|channel|>commentary to=functions.search<|message|>{\"q\":").empty());
  EXPECT_TRUE(p.Feed("1}<|ca").empty());
  const ChatDelta d = p.Feed("ll|>");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, "{\"q\":1}");
  EXPECT_EQ(p.num_calls(), 1u);
}

TEST(HarmonyOutput, ACallCutOffIsReadAtTheEnd) {
  const ChatDelta d =
      Parse(Harmony(), "<|channel|>commentary to=functions.search<|message|>{\"q\": \"a\"}");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, "{\"q\":\"a\"}");
}

TEST(HarmonyOutput, ArgumentsThatAreNotAnObjectAreContent) {
  for (std::string_view args : {"{\"q\": ", "[1, 2]", "not json"}) {
    const std::string text =
        "<|channel|>commentary to=functions.search<|message|>" + std::string(args) + "<|call|>";
    const ChatDelta d = Parse(Harmony(), text);
    EXPECT_TRUE(d.calls.empty()) << args;
    EXPECT_EQ(d.content, args);
  }
}

TEST(HarmonyOutput, AnEmptyFunctionNameIsContent) {
  const ChatDelta d = Parse(Harmony(), "<|channel|>commentary to=functions.<|message|>{}<|call|>");
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, "{}");
}

TEST(HarmonyOutput, AFunctionMessageWithoutToolsIsReasoning) {
  const ChatDelta d = Parse(Harmony(/*tools=*/false), kTwoCalls);
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.reasoning, "{\"city\":\"Paris\"}\n{}");
  EXPECT_EQ(d.content, "");
}

TEST(HarmonyOutput, BuiltInToolMessagesAreReasoning) {
  const ChatDelta d =
      Parse(Harmony(),
            "<|channel|>analysis to=browser.search code<|message|>{\"query\":\"folio\"}<|call|>");
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.reasoning, "{\"query\":\"folio\"}");
}

TEST(HarmonyOutput, AFinalAnswerCutOffIsContent) {
  const ChatDelta d = Parse(Harmony(),
                            "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>"
                            "final<|message|>The answ");
  EXPECT_EQ(d.reasoning, "hm");
  EXPECT_EQ(d.content, "The answ");
}

TEST(HarmonyOutput, AHeaderCutOffAddsNothing) {
  for (std::string_view text : {"<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|chan",
                                "<|channel|>analysis<|message|>hm<|end|><|start|>"}) {
    const ChatDelta d = Parse(Harmony(), text);
    EXPECT_EQ(d.reasoning, "hm") << text;
    EXPECT_EQ(d.content, "") << text;
  }
  EXPECT_TRUE(Parse(Harmony(), "<|channel|>fin").empty());
  EXPECT_TRUE(Parse(Harmony(), " to=functions.search <|constrain|>js").empty());
}

TEST(HarmonyOutput, MessagesToOneFieldAreJoinedByANewline) {
  const ChatDelta d = Parse(Harmony(),
                            "<|channel|>analysis<|message|>one<|end|>"
                            "<|start|>assistant<|channel|>analysis<|message|><|end|>"
                            "<|start|>assistant<|channel|>analysis<|message|>two<|end|>"
                            "<|start|>assistant<|channel|>commentary<|message|>a<|end|>"
                            "<|start|>assistant<|channel|>final<|message|>b<|return|>");
  EXPECT_EQ(d.reasoning, "one\ntwo");
  EXPECT_EQ(d.content, "a\nb");
}

TEST(HarmonyOutput, AnUnknownChannelIsContent) {
  const ChatDelta d = Parse(Harmony(), "<|channel|>bogus<|message|>hi<|end|>");
  EXPECT_EQ(d.content, "hi");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(Parse(Harmony(), "<|message|>no channel<|end|>").content, "no channel");
}

TEST(HarmonyOutput, WithoutReasoningAnalysisIsContent) {
  ChatOutputOptions o = Harmony();
  o.reasoning = false;
  const ChatDelta d = Parse(o, kReasoningThenFinal);
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "User asks 2+2. Easy.\n2 + 2 = 4.");
}

TEST(HarmonyOutput, TextThatIsNotHarmonyIsContentAsWritten) {
  EXPECT_EQ(Parse(Harmony(), "Just an answer.").content, "Just an answer.");
  EXPECT_EQ(Parse(Harmony(), "a <|> b <|end|>").content, "a <|> b <|end|>");
  // After a message, text that does not open one with <|start|>.
  const ChatDelta d = Parse(Harmony(), "<|channel|>final<|message|>a<|end|>b<|end|>c");
  EXPECT_EQ(d.content, "ab<|end|>c");
  // A header with no <|message|> within kMaxHarmonyHeaderBytes.
  const std::string long_text =
      "<|channel|>final " + std::string(kMaxHarmonyHeaderBytes, 'x') + "<|message|>y<|end|>";
  EXPECT_EQ(Parse(Harmony(), long_text).content, long_text);
  ChatOutputParser p(Harmony());
  EXPECT_EQ(p.Feed(std::string(kMaxHarmonyHeaderBytes + kHarmonyMessage.size(), 'z')).content,
            std::string(kMaxHarmonyHeaderBytes + kHarmonyMessage.size(), 'z'));
}

TEST(HarmonyOutput, MarkersInsideAMessageAreItsText) {
  const ChatDelta d = Parse(Harmony(), "<|channel|>final<|message|>a<|channel|>b<|start|>c<|end|>");
  EXPECT_EQ(d.content, "a<|channel|>b<|start|>c");
}

TEST(HarmonyOutput, StreamedDeltasAddUpToTheWholeReply) {
  const std::string long_header = "<|channel|>final<|message|>a<|end|><|start|>" +
                                  std::string(kMaxHarmonyHeaderBytes, 'h') + "<|message|>b<|end|>";
  for (std::string_view text :
       {kReasoningThenFinal, kPreambleThenCall, kTwoCalls,
        std::string_view("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>"
                         "final<|message|>The answ"),
        std::string_view("<|channel|>final<|message|>a<|end|>b<|end|>c<|ret"),
        std::string_view(" to=functions.search<|channel|>commentary json<|message|>{\"q\": 1}"),
        std::string_view("Plain text <|end|> and <|start|>"), std::string_view(long_header)}) {
    for (bool tools : {true, false}) {
      SCOPED_TRACE(std::string(text.substr(0, 60)));
      ExpectSplitIndependent(Harmony(tools), text, /*three_pieces=*/true);
    }
  }
}

// Random replies from harmony's pieces (markers, halves of markers, header
// words, JSON, text): whatever the pieces, the reading does not depend on
// the cuts, and every call's arguments are a JSON object's text.
TEST(HarmonyOutput, RandomRepliesReadTheSameInAnyPieces) {
  const std::vector<std::string> pieces = {
      "<|start|>",   "assistant",     "<|channel|>", "analysis", "final",      "commentary",
      "<|message|>", "<|end|>",       "<|return|>",  "<|call|>", " to=",       "functions.search",
      "browser.x",   "<|constrain|>", "json",        " ",        "{\"q\": 1}", "{",
      "}",           "text",          "\n",          "<|",       "|>",         "\xc3\xa9"};
  std::mt19937 rng(20260812);
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    const size_t n = rng() % 24;
    for (size_t i = 0; i < n; ++i) text += pieces[rng() % pieces.size()];
    for (bool tools : {true, false}) {
      const ChatOutputOptions o = Harmony(tools);
      const ChatDelta whole = Parse(o, text);
      for (const ToolCall& c : whole.calls) {
        EXPECT_TRUE(nlohmann::json::parse(c.arguments, nullptr, false).is_object()) << c.arguments;
      }
      std::vector<size_t> bytes;
      for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
      ExpectSame(whole, Parse(o, text, bytes), "byte at a time: " + text);
      std::vector<size_t> cuts;
      for (size_t i = 1; i < text.size(); ++i) {
        if (rng() % 3 == 0) cuts.push_back(i);
      }
      ExpectSame(whole, Parse(o, text, cuts), "random cuts: " + text);
    }
    if (::testing::Test::HasFailure()) return;
  }
}

// A copy (a response builder is copied whole) carries the reading so far
// and goes on alone.
TEST(HarmonyOutput, ACopyGoesOnFromWhereTheOriginalWas) {
  const std::string text(kPreambleThenCall);
  const size_t half = text.size() / 2;
  ChatOutputParser original(Harmony());
  ChatDelta first = original.Feed(text.substr(0, half));
  ChatOutputParser copy = original;
  ChatDelta a = first, b = first;
  a.Append(original.Feed(text.substr(half)));
  a.Append(original.Finish());
  b.Append(copy.Feed(text.substr(half)));
  b.Append(copy.Finish());
  ExpectSame(a, Parse(Harmony(), text), "original");
  ExpectSame(b, Parse(Harmony(), text), "copy");
  EXPECT_EQ(copy.num_calls(), 1u);
}

TEST(HarmonyHeader, ReadsEachWord) {
  HarmonyHeader h = ParseHarmonyHeader(
      "assistant<|channel|>commentary to=functions.get_weather <|constrain|>json", true);
  EXPECT_EQ(h.role, "assistant");
  EXPECT_EQ(h.channel, "commentary");
  EXPECT_EQ(h.recipient, "functions.get_weather");
  EXPECT_EQ(h.content_type, "json");
  h = ParseHarmonyHeader("assistant to=functions.x<|channel|>commentary json", true);
  EXPECT_EQ(h.role, "assistant");
  EXPECT_EQ(h.channel, "commentary");
  EXPECT_EQ(h.recipient, "functions.x");
  EXPECT_EQ(h.content_type, "json");
  h = ParseHarmonyHeader("<|channel|>analysis", false);
  EXPECT_EQ(h.role, "");
  EXPECT_EQ(h.channel, "analysis");
  EXPECT_EQ(h.recipient, "");
  h = ParseHarmonyHeader("", true);
  EXPECT_EQ(h.role, "");
  EXPECT_EQ(h.channel, "");
}

}  // namespace
}  // namespace folio::serving
