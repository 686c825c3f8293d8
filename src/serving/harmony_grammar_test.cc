// ToolCallGbnf for harmony (harmony_grammar.cc), token by token over a
// small vocabulary that has gpt-oss's special tokens (no bytes: only a
// token reference allows them) beside every single byte and a few longer
// pieces: the call openai-harmony renders and the other header orders are
// accepted whole, after optional analysis; wrong names, arguments outside
// the schema, a missing <|call|> and markers spelled as text are refused;
// under "auto" any run of messages is free until a header says
// "to=functions.", and from there the call is held. What the grammar
// accepts, the reply parser (harmony_output.h) reads as the same call.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/printable.h"
#include "folio/grammar/grammar.h"
#include "folio/serving/chat_output.h"
#include "folio/serving/harmony_output.h"
#include "folio/serving/tool_calls.h"

namespace folio::serving {
namespace {

using json = nlohmann::ordered_json;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "strict": true, "parameters": {
     "type": "object", "properties": {
       "city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["c", "f"]}},
     "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get", "parameters": {
     "type": "object", "properties": {"n": {"type": "integer", "minimum": 0}},
     "required": ["n"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "ping"}}
])");

constexpr std::string_view kSpecials[] = {kHarmonyStart,   kHarmonyChannel, kHarmonyConstrain,
                                          kHarmonyMessage, kHarmonyEnd,     kHarmonyReturn,
                                          kHarmonyCall};

// Ids 0..255: the bytes; then longer pieces; then the special tokens (no
// bytes).
class Vocab {
 public:
  Vocab() {
    for (int b = 0; b < 256; ++b) bytes_.emplace_back(1, static_cast<char>(b));
    for (const char* piece : {"commentary", " to", "=functions", ".get", "_weather", "json", "{\"",
                              "city", "\":\"", "\"}", "analysis", "assistant", "Paris", " json",
                              "<|", "call|>", "{\"city\":\"Paris\"}", " to=functions."}) {
      bytes_.emplace_back(piece);
    }
    for (std::string_view s : kSpecials) {
      special_[std::string(s)] = static_cast<int32_t>(bytes_.size());
      bytes_.emplace_back();
    }
    trie_ = std::make_shared<const grammar::TokenTrie>(bytes_);
  }

  grammar::TokenVocabulary Vocabulary() const {
    grammar::TokenVocabulary v;
    v.size = bytes_.size();
    v.find = [this](std::string_view text) -> std::optional<int32_t> {
      const auto it = special_.find(std::string(text));
      if (it == special_.end()) return std::nullopt;
      return it->second;
    };
    return v;
  }

  int32_t Special(std::string_view s) const { return special_.at(std::string(s)); }

  // Special markers as their tokens, other text greedily as the longest
  // pieces (so tokens cross the grammar's literal boundaries).
  std::vector<int32_t> Tokens(std::string_view text) const {
    std::vector<int32_t> out;
    size_t i = 0;
    while (i < text.size()) {
      bool special = false;
      for (std::string_view s : kSpecials) {
        if (text.substr(i).starts_with(s)) {
          out.push_back(Special(s));
          i += s.size();
          special = true;
          break;
        }
      }
      if (special) continue;
      size_t best = 1;
      int32_t id = static_cast<unsigned char>(text[i]);
      for (size_t t = 256; t < bytes_.size(); ++t) {
        const std::string& p = bytes_[t];
        if (p.size() > best && text.substr(i).starts_with(p) &&
            !SpansSpecial(text.substr(i, p.size()))) {
          best = p.size();
          id = static_cast<int32_t>(t);
        }
      }
      out.push_back(id);
      i += best;
    }
    return out;
  }

  // Text spelled byte by byte, markers included (never the special tokens).
  std::vector<int32_t> Spelled(std::string_view text) const {
    std::vector<int32_t> out;
    for (const char c : text) out.push_back(static_cast<unsigned char>(c));
    return out;
  }

  const std::string& Bytes(int32_t t) const { return bytes_[static_cast<size_t>(t)]; }
  const std::shared_ptr<const grammar::TokenTrie>& trie() const { return trie_; }
  size_t size() const { return bytes_.size(); }

 private:
  static bool SpansSpecial(std::string_view piece) {
    for (std::string_view s : kSpecials) {
      if (piece.find(s) != std::string_view::npos) return true;
    }
    return false;
  }

  std::vector<std::string> bytes_;
  std::map<std::string, int32_t> special_;
  std::shared_ptr<const grammar::TokenTrie> trie_;
};

const Vocab& TheVocab() {
  static const Vocab* v = new Vocab();
  return *v;
}

ChatTools Tools(const json& choice, const json& tools = kTools) {
  const json parallel = nullptr;
  std::variant<ChatTools, FieldError> r = ParseChatTools(&tools, &choice, &parallel);
  if (const FieldError* e = std::get_if<FieldError>(&r)) {
    ADD_FAILURE() << e->field << ": " << e->message;
    return {};
  }
  return std::get<ChatTools>(r);
}

std::shared_ptr<const grammar::Grammar> Compile(const ChatTools& tools) {
  Result<std::string> gbnf = ToolCallGbnf(tools, ToolCallFormat::kHarmony);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status().ToString();
  if (!gbnf.ok()) return nullptr;
  auto g = grammar::Grammar::FromGbnf(*gbnf, {}, TheVocab().Vocabulary());
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << *gbnf;
  return g.ok() ? *g : nullptr;
}

// Whether the grammar takes every token and then is done (a reply that
// ends on a stop token) or, with `complete` false, takes every token.
bool Accepts(const std::shared_ptr<const grammar::Grammar>& g, const std::vector<int32_t>& tokens,
             bool complete = true) {
  grammar::Matcher m(g, TheVocab().trie());
  for (const int32_t t : tokens) {
    if (!m.AcceptToken(t)) return false;
  }
  return !complete || m.IsDone();
}

bool Accepts(const std::shared_ptr<const grammar::Grammar>& g, std::string_view text,
             bool complete = true) {
  return Accepts(g, TheVocab().Tokens(text), complete);
}

ChatDelta Parse(std::string_view text) {
  ChatOutputOptions o;
  o.harmony = true;
  o.reasoning = true;
  o.tool_format = ToolCallFormat::kHarmony;
  o.tool_names = {"get_weather", "get", "ping"};
  ChatOutputParser p(o);
  ChatDelta d = p.Feed(text);
  d.Append(p.Finish());
  return d;
}

// What openai-harmony 0.0.8 renders for Message.from_role_and_content(
// ASSISTANT, args).with_channel("commentary").with_recipient(
// "functions.get_weather").with_content_type("<|constrain|>json"), after
// the prompt's <|start|>assistant.
constexpr std::string_view kRendered =
    " to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>"
    "{\"city\":\"Paris\"}<|call|>";
// The order gpt-oss writes (the harmony guide's), and the one its Hugging
// Face template renders for an earlier call.
constexpr std::string_view kChannelFirst =
    "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    "{\"city\": \"Paris\", \"unit\": \"c\"}<|call|>";
constexpr std::string_view kTemplateOrder =
    " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\":\"Paris\"}<|call|>";
constexpr std::string_view kAnalysis =
    "<|channel|>analysis<|message|>The user wants the weather: 2 < 3, {ok}.<|end|>"
    "<|start|>assistant";

TEST(HarmonyToolGrammar, RequiredTakesTheRenderedCallTokenByToken) {
  auto g = Compile(Tools("required"));
  ASSERT_NE(g, nullptr);
  for (std::string_view call : {kRendered, kChannelFirst, kTemplateOrder}) {
    EXPECT_TRUE(Accepts(g, call)) << call;
    EXPECT_TRUE(Accepts(g, std::string(kAnalysis) + std::string(call))) << call;
    EXPECT_TRUE(Accepts(g, std::string(kAnalysis) + std::string(kAnalysis) + std::string(call)));
  }
  EXPECT_TRUE(Accepts(g, "<|channel|>commentary to=functions.get<|message|>{\"n\": 3}<|call|>"));
  EXPECT_TRUE(Accepts(g, " to=functions.ping<|channel|>commentary json<|message|>{}<|call|>"));
  // The text before the call is whole tokens of any split: byte by byte.
  grammar::Matcher m(g, TheVocab().trie());
  for (const int32_t t : TheVocab().Tokens(kAnalysis)) ASSERT_TRUE(m.AcceptToken(t));
  for (const char c : std::string_view(" to=functions.get_weather")) {
    ASSERT_TRUE(m.AcceptToken(static_cast<unsigned char>(c))) << c;
  }
}

TEST(HarmonyToolGrammar, RequiredRefusesWhatIsNotACallOfATool) {
  auto g = Compile(Tools("required"));
  ASSERT_NE(g, nullptr);
  const std::string head = "<|channel|>commentary to=functions.";
  for (const std::string& text : std::vector<std::string>{
           // Names: unknown, a prefix of a tool's, a tool's with more after it.
           head + "nope<|message|>{}<|call|>",
           head + "get_w<|message|>{}<|call|>",
           head + "get_weatherX<|message|>{\"city\":\"a\"}<|call|>",
           // Arguments outside the schema.
           head + "get_weather<|message|>{}<|call|>",
           head + "get_weather<|message|>{\"city\":\"a\",\"x\":1}<|call|>",
           head + "get_weather<|message|>{\"city\":\"a\",\"unit\":\"k\"}<|call|>",
           head + "get<|message|>{\"n\":-1}<|call|>",
           head + "get<|message|>[1]<|call|>",
           // The wrong end, the wrong channel, an answer instead of a call.
           head + "ping<|message|>{}<|end|>",
           head + "ping<|message|>{}<|return|>",
           "<|channel|>analysis to=functions.ping<|message|>{}<|call|>",
           "<|channel|>final<|message|>Hi.<|return|>",
           "<|channel|>analysis<|message|>Thinking.<|return|>",
       }) {
    EXPECT_FALSE(Accepts(g, text)) << text;
  }
  // A call must end with <|call|>: after the arguments nothing else may
  // come, and the grammar is not complete without it.
  grammar::Matcher m(g, TheVocab().trie());
  for (const int32_t t : TheVocab().Tokens(head + "ping<|message|>{}"))
    ASSERT_TRUE(m.AcceptToken(t));
  EXPECT_FALSE(m.CanFinish());
  std::vector<uint64_t> mask((TheVocab().size() + 63) / 64);
  m.FillMask(mask);
  const int32_t call = TheVocab().Special(kHarmonyCall);
  for (size_t t = 0; t < TheVocab().size(); ++t) {
    EXPECT_EQ((mask[t / 64] >> (t % 64)) & 1, t == static_cast<size_t>(call) ? 1u : 0u) << t;
  }
  EXPECT_TRUE(m.NamesNext(call));
  // Markers spelled out of ordinary tokens are not the markers: not in the
  // header, not as the end, not in the analysis text.
  EXPECT_FALSE(Accepts(g, TheVocab().Spelled(kRendered), /*complete=*/false));
  std::vector<int32_t> spelled_end = TheVocab().Tokens(head + "ping<|message|>{}");
  for (const int32_t t : TheVocab().Spelled("<|call|>")) spelled_end.push_back(t);
  EXPECT_FALSE(Accepts(g, spelled_end, /*complete=*/false));
  std::vector<int32_t> spelled_in_text = TheVocab().Tokens("<|channel|>analysis<|message|>a ");
  for (const int32_t t : TheVocab().Spelled("<|end|>")) spelled_in_text.push_back(t);
  EXPECT_FALSE(Accepts(g, spelled_in_text, /*complete=*/false));
}

TEST(HarmonyToolGrammar, NamedTakesOnlyThatFunction) {
  auto g = Compile(Tools(json::parse(R"({"type": "function", "function": {"name": "get"}})")));
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Accepts(g,
                      " to=functions.get<|channel|>commentary <|constrain|>json<|message|>"
                      "{\"n\":0}<|call|>"));
  EXPECT_FALSE(Accepts(g, kRendered));
  EXPECT_FALSE(Accepts(g, " to=functions.ping<|channel|>commentary<|message|>{}<|call|>"));
}

// One call: <|call|> ends the turn (a stop token), whatever
// parallel_tool_calls says.
TEST(HarmonyToolGrammar, OneCallPerReply) {
  auto g = Compile(Tools("required"));
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE(Accepts(g, std::string(kRendered) + "<|start|>assistant" + std::string(kRendered),
                       /*complete=*/false));
}

TEST(HarmonyToolGrammar, WhatTheGrammarTakesParsesAsTheCall) {
  auto g = Compile(Tools("required"));
  ASSERT_NE(g, nullptr);
  for (std::string_view call : {kRendered, kChannelFirst, kTemplateOrder}) {
    const std::string text = std::string(kAnalysis) + std::string(call);
    ASSERT_TRUE(Accepts(g, text)) << text;
    const ChatDelta d = Parse(text);
    ASSERT_EQ(d.calls.size(), 1u) << text;
    EXPECT_EQ(d.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(d.calls[0].arguments)["city"], "Paris");
    EXPECT_EQ(d.reasoning, "The user wants the weather: 2 < 3, {ok}.");
    EXPECT_EQ(d.content, "");
  }
}

// Under "auto" with a strict tool: messages are free (answers, preambles,
// built-in tools) until a header says "to=functions.", and from there the
// call is held: a tool's name, then a strict tool's schema (another
// tool's arguments are any object), then <|call|>.
TEST(HarmonyToolGrammar, StrictUnderAutoHoldsACallFromItsRecipientOn) {
  auto g = Compile(Tools("auto"));
  ASSERT_NE(g, nullptr);
  for (const std::string& text : std::vector<std::string>{
           std::string(kAnalysis) + "<|channel|>final<|message|>It is sunny.<|return|>",
           std::string("<|channel|>final<|message|>to=functions is a word here.<|return|>"),
           std::string(kAnalysis) + "<|channel|>commentary<|message|>Checking.<|end|>" +
               "<|start|>assistant" + std::string(kRendered),
           std::string(kAnalysis) + std::string(kChannelFirst),
           std::string(kTemplateOrder),
           // Not strict: any object.
           std::string("<|channel|>commentary to=functions.get <|constrain|>json<|message|>") +
               "{\"anything\": [1, 2]}<|call|>",
           // A built-in tool's call is free.
           std::string("<|channel|>analysis to=browser.search code<|message|>") +
               "{\"query\": \"x\"}<|call|>",
       }) {
    EXPECT_TRUE(Accepts(g, text)) << text;
  }
  for (const std::string& text : std::vector<std::string>{
           std::string("<|channel|>commentary to=functions.nope<|message|>{}<|call|>"),
           std::string("<|channel|>commentary to=functions.get_weatherX<|message|>{}<|call|>"),
           std::string("<|channel|>commentary to=functions.get_weather<|message|>{}<|call|>"),
           std::string("<|channel|>commentary to=functions.get<|message|>[]<|call|>"),
           std::string("<|channel|>commentary to=functions.get<|message|>{}<|return|>"),
           // A second recipient after the call's.
           std::string("<|channel|>commentary to=functions.get to=functions.ping<|message|>") +
               "{}<|call|>",
       }) {
    EXPECT_FALSE(Accepts(g, text)) << text;
  }
  // Markers spelled as text, in a header or a message.
  EXPECT_FALSE(Accepts(g, TheVocab().Spelled(kRendered), /*complete=*/false));
  std::vector<int32_t> spelled_in_text = TheVocab().Tokens("<|channel|>final<|message|>a ");
  for (const int32_t t : TheVocab().Spelled("<|end|>")) spelled_in_text.push_back(t);
  EXPECT_FALSE(Accepts(g, spelled_in_text, /*complete=*/false));
  // A call the parser reads out of such a reply names a tool, with its
  // arguments as the grammar held them.
  const std::string reply = std::string(kAnalysis) + std::string(kRendered);
  ASSERT_TRUE(Accepts(g, reply));
  const ChatDelta d = Parse(reply);
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].arguments, R"({"city":"Paris"})");
}

// Headers under "auto" are bounded so that the parser reads each as one
// (kMaxHarmonyHeaderBytes): a word of 25 characters, or a seventh item, is
// refused; a call's header is one of the canonical forms.
TEST(HarmonyToolGrammar, StrictUnderAutoHeadersStayWithinTheParsersBound) {
  auto g = Compile(Tools("auto"));
  ASSERT_NE(g, nullptr);
  const std::string word24(24, 'w');
  EXPECT_TRUE(Accepts(g, "<|channel|>" + word24 + "<|message|>x<|return|>"));
  EXPECT_FALSE(Accepts(g, "<|channel|>" + word24 + "w<|message|>x<|return|>"));
  std::string items;
  for (int i = 0; i < 6; ++i) items += "a ";
  EXPECT_TRUE(Accepts(g, items + "<|message|>x<|return|>"));
  EXPECT_FALSE(Accepts(g, items + "a <|message|>x<|return|>"));
  // A call's header is a canonical one: not after other words, not with
  // more words after its content type, not with a second channel.
  EXPECT_FALSE(Accepts(g, "a to=functions.ping<|message|>{}<|call|>"));
  EXPECT_FALSE(Accepts(g, "<|channel|>commentary to=functions.ping json x<|message|>{}<|call|>"));
  EXPECT_FALSE(Accepts(
      g, "<|channel|>commentary to=functions.ping<|channel|>analysis<|message|>{}<|call|>"));
  // After <|start|>, the role is a word of its own.
  EXPECT_TRUE(Accepts(g,
                      "<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions."
                      "ping<|channel|>commentary json<|message|>{}<|call|>"));
  EXPECT_FALSE(Accepts(g,
                       "<|channel|>analysis<|message|>x<|end|><|start|>assistantto=functions."
                       "ping<|channel|>commentary json<|message|>{}<|call|>"));
}

// Random replies the "auto" grammar allows (tokens drawn among the allowed
// ones, leaning to the recipient so that calls happen), read by the reply
// parser: never plain content with markers in it (every header the grammar
// allows is one to the parser, every call it allows one the parser reads),
// and every call names a tool, its arguments of the schema's shape. Every
// tool is strict here: a loose tool's "any object" may hold a number such
// as 1e400, valid JSON that the parser's JSON reader refuses (the call is
// then content, in every format).
TEST(HarmonyToolGrammar, StrictUnderAutoRepliesReadAsHarmonyAlongRandomWalks) {
  json strict = kTools;
  for (json& t : strict) t["function"]["strict"] = true;
  auto g = Compile(Tools("auto", strict));
  ASSERT_NE(g, nullptr);
  const Vocab& v = TheVocab();
  // Preferred tokens, the recipient's several times over (a weighted
  // draw), so that calls start often.
  std::vector<int32_t> likely;
  for (std::string_view s : kSpecials) likely.push_back(v.Special(s));
  for (const char* piece : {" to=functions.", " to=functions.", " to=functions.", "get", "_weather",
                            "ping", "commentary", "{\"city\":\"Paris\"}", "json"}) {
    const std::vector<int32_t> ids = v.Tokens(piece);
    likely.insert(likely.end(), ids.begin(), ids.end());
  }
  std::mt19937 rng(20261207);
  int calls = 0, replies = 0;
  for (int walk = 0; walk < 200; ++walk) {
    grammar::Matcher m(g, v.trie());
    std::vector<int32_t> tokens;
    std::vector<uint64_t> mask((v.size() + 63) / 64);
    while (!m.IsDone() && tokens.size() < 3000) {
      m.FillMask(mask);
      std::vector<int32_t> allowed, preferred;
      for (size_t t = 0; t < v.size(); ++t) {
        if (((mask[t / 64] >> (t % 64)) & 1) == 0) continue;
        allowed.push_back(static_cast<int32_t>(t));
        for (const int32_t l : likely) {
          if (l == static_cast<int32_t>(t)) preferred.push_back(l);
        }
      }
      ASSERT_FALSE(allowed.empty()) << "walk " << walk << " stuck";
      const std::vector<int32_t>& from = !preferred.empty() && rng() % 4 != 0 ? preferred : allowed;
      const int32_t t = from[rng() % from.size()];
      ASSERT_TRUE(m.AcceptToken(t));
      tokens.push_back(t);
    }
    if (!m.IsDone()) continue;
    ++replies;
    std::string text;
    for (const int32_t t : tokens) {
      bool special = false;
      for (std::string_view s : kSpecials) {
        if (t == v.Special(s)) {
          text += s;
          special = true;
        }
      }
      if (!special) text += v.Bytes(t);
    }
    SCOPED_TRACE(Printable(text));
    const ChatDelta d = Parse(text);
    EXPECT_EQ(d.content.find("<|"), std::string::npos);
    EXPECT_EQ(d.reasoning.find("<|"), std::string::npos);
    for (const ToolCall& c : d.calls) {
      ++calls;
      EXPECT_TRUE(c.name == "get_weather" || c.name == "get" || c.name == "ping") << c.name;
      const json args = json::parse(c.arguments);
      ASSERT_TRUE(args.is_object());
      if (c.name == "get_weather") {
        EXPECT_TRUE(args["city"].is_string()) << c.arguments;
      } else if (c.name == "get") {
        // An integer past 64 bits comes back as a float (nlohmann's).
        EXPECT_TRUE(args["n"].is_number() && args["n"] >= 0) << c.arguments;
      } else {
        EXPECT_EQ(args, json::object());
      }
    }
    EXPECT_LE(d.calls.size(), 1u);  // a call ends the reply
  }
  EXPECT_GE(replies, 150);
  EXPECT_GE(calls, 5);
}

TEST(HarmonyToolGrammar, AnUnsupportedSchemaNamesItsTool) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "f"}},
      {"type": "function", "function": {"name": "g", "parameters":
        {"type": "object", "properties": {"x": {"not": {"type": "string"}}}}}}])");
  Result<std::string> gbnf = ToolCallGbnf(Tools("required", tools), ToolCallFormat::kHarmony);
  ASSERT_FALSE(gbnf.ok());
  EXPECT_NE(gbnf.error().message().find("tools[1].function.parameters"), std::string::npos)
      << gbnf.error().message();
}

// The grammar names gpt-oss's special tokens by their text: a vocabulary
// without them cannot compile it, and says which one is missing.
TEST(HarmonyToolGrammar, AVocabularyWithoutTheSpecialTokensIsRefusedByName) {
  Result<std::string> gbnf = ToolCallGbnf(Tools("required"), ToolCallFormat::kHarmony);
  ASSERT_TRUE(gbnf.ok());
  grammar::TokenVocabulary none;
  none.size = 256;
  none.find = [](std::string_view) { return std::optional<int32_t>(); };
  auto g = grammar::Grammar::FromGbnf(*gbnf, {}, none);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message().find("<|"), std::string::npos) << g.error().message();
}

}  // namespace
}  // namespace folio::serving
