#include "folio/serving/tool_calls.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "folio/grammar/grammar.h"
#include "folio/serving/chat_output.h"
#include "testing/case_names.h"

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
  // gpt-oss's: harmony, with or without tools.
  EXPECT_EQ(DetectToolCallFormat("<|start|>assistant<|channel|>final<|message|>"),
            ToolCallFormat::kHarmony);
  EXPECT_EQ(DetectToolCallFormat("{% if tools %}<|channel|>commentary{% endif %}"),
            ToolCallFormat::kHarmony);
  // A template that never mentions tools cannot show them: folio does.
  EXPECT_EQ(DetectToolCallFormat("<|im_start|>{{ m.content }}<|im_end|>"),
            ToolCallFormat::kGeneric);
  // One that shows tools in a way folio does not know is not guessed at.
  EXPECT_FALSE(DetectToolCallFormat("{% for t in tools %}<tool>{{ t | tojson }}{% endfor %}"));
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
        BadTools{kOne, R"("sometimes")", "tool_choice"}, BadTools{kOne, "3", "tool_choice"},
        BadTools{kOne, R"({"type": "function", "function": {"name": "g"}})", "tool_choice"},
        BadTools{kOne, R"({"type": "function"})", "tool_choice"},
        BadTools{kOne, R"({"type": "function", "function": {"name": "f"}, "x": 1})", "tool_choice"},
        BadTools{"[]", R"("required")", "tool_choice"},
        BadTools{"null", R"({"type": "function", "function": {"name": "f"}})", "tool_choice"}),
    [](const testing::TestParamInfo<BadTools>& c) {
      return test_support::CaseName(c.index, c.param.field);
    });

TEST(ParseChatTools, ParallelToolCallsMustBeABoolean) {
  EXPECT_EQ(Err(kTools, nullptr, "yes").field, "parallel_tool_calls");
  // strict is fine where a grammar forces the call.
  const json strict = json::parse(R"([{"type": "function", "function":
      {"name": "f", "strict": true, "parameters": {"type": "object"}}}])");
  EXPECT_TRUE(Ok(strict, "required").functions[0].strict);
  // Under auto too, where a grammar holds a started call to the schema.
  EXPECT_TRUE(Ok(strict).constrained());
  EXPECT_TRUE(Ok(strict, "required").constrained());
  EXPECT_FALSE(Ok(kTools).constrained());
  EXPECT_FALSE(Ok(strict, "none").constrained());
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

// kTools with get_weather strict: a strict tool under tool_choice "auto".
ChatTools StrictAuto(const json& parallel = nullptr) {
  json tools = kTools;
  tools[0]["function"]["strict"] = true;
  return Ok(tools, "auto", parallel);
}

// The reply as the output parser reads it.
ChatDelta Parse(ToolCallFormat format, const std::string& text) {
  ChatOutputOptions o;
  o.tool_format = format;
  o.tool_names = {"get_weather", "add", "ping"};
  ChatOutputParser p(o);
  ChatDelta d = p.Feed(text);
  d.Append(p.Finish());
  return d;
}

TEST(ToolCallGbnf, StrictUnderAutoHoldsHermesCallsFromTheMarkerOn) {
  auto g = Compile(StrictAuto(), ToolCallFormat::kHermes);
  ASSERT_TRUE(g);
  const std::string weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>";
  const std::string loose_add =  // add is not strict: any object
      "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": \"x\"}}\n</tool_call>";
  // Text alone, however close to the marker it comes.
  for (const char* text :
       {"", "Sure!", "a < b, <tool, <tool_cal>, <<tool_call, </tool_call>", "<tool_call",
        "h\xc3\xa9llo \xe2\x86\x92 <tool_\xe2\x86\x92", "<<<<tool_calll>"}) {
    EXPECT_TRUE(g->Matches(text)) << text;
  }
  // Calls anywhere in the text, parallel ones too.
  EXPECT_TRUE(g->Matches(weather));
  EXPECT_TRUE(g->Matches("Let me check.\n" + weather + "\nand " + loose_add + " done"));
  EXPECT_TRUE(g->Matches("<" + weather));  // a "<" before the marker is text
  // From the marker on, the grammar holds: the strict tool's schema, a known
  // name, a JSON object, the block's markup.
  for (const std::string& text :
       {std::string("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"),
        std::string("<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"),
        std::string("<tool_call>\n{\"name\": \"add\", \"arguments\": 3}\n</tool_call>"),
        std::string("<tool_call>hello"), std::string("ok <tool_call> and text"),
        weather.substr(0, weather.size() - 1)}) {
    EXPECT_FALSE(g->Matches(text)) << text;
  }
  // Without parallel calls, one block at most.
  auto one = Compile(StrictAuto(false), ToolCallFormat::kHermes);
  ASSERT_TRUE(one);
  EXPECT_TRUE(one->Matches("text " + weather + " text"));
  EXPECT_FALSE(one->Matches(weather + "\n" + weather));
  // What the grammar lets through, the parser reads: the calls as calls,
  // everything else as content.
  const ChatDelta d =
      Parse(ToolCallFormat::kHermes, "Let me check.\n" + weather + "\n" + loose_add);
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(d.calls[1].arguments, R"({"a":"x"})");
  EXPECT_EQ(d.content, "Let me check.");
}

// Random text over the marker's own characters: the grammar accepts it
// exactly when the marker does not occur in it (the free text's automaton
// checked against std::string::find), and matching stays linear (20,000
// characters).
TEST(ToolCallGbnf, StrictUnderAutoFreeTextIsTextWithoutTheMarker) {
  auto g = Compile(StrictAuto(), ToolCallFormat::kHermes);
  ASSERT_TRUE(g);
  std::mt19937_64 rng(20261205);
  const std::string alphabet = "<tool_call>x\xc3\xa9";
  for (int trial = 0; trial < 400; ++trial) {
    std::string text;
    const size_t n = 1 + rng() % 40;
    for (size_t i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    // A lone half of "é" is not UTF-8 text; keep the pairs whole.
    std::string utf8;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\xc3' || text[i] == '\xa9') {
        utf8 += "\xc3\xa9";
      } else {
        utf8 += text[i];
      }
    }
    EXPECT_EQ(g->Matches(utf8), utf8.find("<tool_call>") == std::string::npos) << utf8;
  }
  std::string long_text;
  while (long_text.size() < 20000) long_text += "<tool_cal <<tool_ca x<to ";
  EXPECT_TRUE(g->Matches(long_text));
}

// The token mask: a token that would complete the marker is allowed only
// when its bytes go on as a valid call; before the marker nothing is
// masked.
TEST(ToolCallGbnf, StrictUnderAutoMaskAllowsTextAndOnlyValidCallStarts) {
  auto g = Compile(StrictAuto(), ToolCallFormat::kHermes);
  ASSERT_TRUE(g);
  const std::vector<std::string> vocab = {
      "Hello", " <",           "<",     "tool_call>", "<tool_call>", "<tool_call>\n{", "\n",
      "x",     "<tool_call>x", "call>", "{\"",        "<tool_"};
  auto trie = std::make_shared<const grammar::TokenTrie>(vocab);
  grammar::Matcher m(g, trie);
  const auto allowed = [&](const grammar::Matcher& at) {
    std::vector<uint64_t> mask(1);
    at.FillMask(mask);
    std::vector<std::string> out;
    for (size_t t = 0; t < vocab.size(); ++t) {
      if ((mask[0] >> t) & 1) out.push_back(vocab[t]);
    }
    return out;
  };
  const std::vector<std::string> all_but_bad = {
      "Hello", " <", "<",     "tool_call>", "<tool_call>", "<tool_call>\n{",
      "\n",    "x",  "call>", "{\"",        "<tool_"};
  EXPECT_EQ(allowed(m), all_but_bad);
  EXPECT_TRUE(m.CanFinish());
  ASSERT_TRUE(m.AcceptBytes("Hello <tool_"));
  // "call>" completes the marker (a valid start); "<tool_call>x" still
  // cannot come, after which only "\n" may come.
  EXPECT_EQ(allowed(m), all_but_bad);
  ASSERT_TRUE(m.AcceptToken(9));  // "call>"
  EXPECT_FALSE(m.CanFinish());
  EXPECT_EQ(allowed(m), (std::vector<std::string>{"\n"}));
}

TEST(ToolCallGbnf, StrictUnderAutoBareFormsAreCallsOrText) {
  auto llama = Compile(StrictAuto(), ToolCallFormat::kLlama3Json);
  ASSERT_TRUE(llama);
  const std::string call = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";
  for (const std::string& text :
       {std::string(""), std::string("It is sunny."), std::string("Use {braces} freely"),
        std::string(" \n") + call, call + "; {\"name\": \"ping\", \"parameters\": {}}"}) {
    EXPECT_TRUE(llama->Matches(text)) << text;
  }
  for (const std::string& text :
       {std::string("{\"name\": \"get_weather\", \"parameters\": {}}"), std::string("{oops"),
        std::string("  {\"name\": \"nope\", \"parameters\": {}}")}) {
    EXPECT_FALSE(llama->Matches(text)) << text;
  }
  EXPECT_EQ(Parse(ToolCallFormat::kLlama3Json, " \n" + call).calls.size(), 1u);
  auto mistral = Compile(StrictAuto(false), ToolCallFormat::kMistral);
  ASSERT_TRUE(mistral);
  const std::string calls = "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]";
  EXPECT_TRUE(mistral->Matches(calls));
  EXPECT_TRUE(mistral->Matches("No call [here]."));
  EXPECT_FALSE(mistral->Matches("[{\"name\": \"get_weather\", \"arguments\": {}}]"));
  EXPECT_FALSE(mistral->Matches(
      "[{\"name\": \"ping\", \"arguments\": {}}, {\"name\": \"ping\", \"arguments\": {}}]"));
  EXPECT_EQ(Parse(ToolCallFormat::kMistral, calls).calls.size(), 1u);
}

TEST(ToolCallGbnf, GenericForcedAndStrictUnderAuto) {
  const std::string call =
      "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Oslo\"}}]}";
  auto forced = Compile(Ok(kTools, "required", false), ToolCallFormat::kGeneric);
  ASSERT_TRUE(forced);
  EXPECT_TRUE(forced->Matches(call));
  EXPECT_FALSE(forced->Matches("{\"response\": \"hi\"}"));
  EXPECT_FALSE(forced->Matches("{\"tool_calls\": []}"));
  EXPECT_FALSE(forced->Matches(
      "{\"tool_calls\": [{\"name\": \"ping\", \"arguments\": {}}, {\"name\": \"ping\", "
      "\"arguments\": {}}]}"));
  auto lazy = Compile(StrictAuto(), ToolCallFormat::kGeneric);
  ASSERT_TRUE(lazy);
  for (const std::string& text : {call, std::string("{\"response\": \"It is cold.\"}"),
                                  std::string("Plain text {ok}"), std::string(""), " \n" + call}) {
    EXPECT_TRUE(lazy->Matches(text)) << text;
  }
  for (const std::string& text :
       {std::string("{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {}}]}"),
        std::string("{\"answer\": 1}"), std::string("{\"response\": 3}")}) {
    EXPECT_FALSE(lazy->Matches(text)) << text;
  }
  // What the grammar lets through reads as calls.
  const ChatDelta d = Parse(ToolCallFormat::kGeneric, call);
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, R"({"city":"Oslo"})");
}

TEST(GenericToolMessages, ToolsInTheSystemMessageCallsAndResultsAsText) {
  const json messages = json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
      {"id": "c2", "type": "function", "function": {"name": "ping", "arguments": {}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "3 degrees"},
    {"role": "tool", "tool_call_id": "c2", "content": "pong"},
    {"role": "assistant", "content": "Cold."}])");
  const json out = GenericToolMessages(messages, Ok(kTools));
  ASSERT_EQ(out.size(), 5u);
  const std::string system = out[0]["content"];
  EXPECT_TRUE(system.starts_with("Be brief.\n\nYou can call these tools"));
  EXPECT_NE(system.find(R"("name":"get_weather","description":"Weather.","parameters":)"),
            std::string::npos)
      << system;
  EXPECT_NE(system.find(R"({"tool_calls": [{"name": "<tool name>")"), std::string::npos);
  EXPECT_EQ(out[2]["role"], "assistant");
  EXPECT_FALSE(out[2].contains("tool_calls"));
  EXPECT_EQ(out[2]["content"],
            R"({"tool_calls":[{"name":"get_weather","arguments":{"city":"Oslo"}},)"
            R"({"name":"ping","arguments":{}}]})");
  // The two results, one user message.
  EXPECT_EQ(out[3]["role"], "user");
  EXPECT_EQ(out[3]["content"], R"({"tool_responses":[{"tool_call_id":"c1","content":"3 degrees"},)"
                               R"({"tool_call_id":"c2","content":"pong"}]})");
  EXPECT_EQ(out[4], messages[5]);
  // Without a system message, one comes first.
  const json bare = GenericToolMessages(json::array({messages[1]}), Ok(kTools));
  ASSERT_EQ(bare.size(), 2u);
  EXPECT_EQ(bare[0]["role"], "system");
  EXPECT_EQ(bare[1], messages[1]);
}

}  // namespace
}  // namespace folio::serving
