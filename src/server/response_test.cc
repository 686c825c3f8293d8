#include "folio/server/response.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "folio/tokenizer/byte_tokenizer.h"

namespace folio::server {
namespace {

using nlohmann::json;

ResponseContext Ctx(Endpoint ep, bool logprobs = false) {
  ResponseContext c;
  c.endpoint = ep;
  c.id = "x-1";
  c.created = 5;
  c.model = "builtin";
  c.logprobs = logprobs;
  c.tokenizer = &tokenizer::ByteTokenizer::AsTokenizer();
  return c;
}

Event Output(std::vector<int32_t> tokens, std::string text,
             engine::FinishReason finish = engine::FinishReason::kNone) {
  Event e;
  e.tokens = std::move(tokens);
  e.text = std::move(text);
  e.finish = finish;
  return e;
}

TEST(ResponseBuilder, CompletionBodyWithUsage) {
  ResponseBuilder b(Ctx(Endpoint::kCompletions));
  b.Add(Output({'h' + 2}, "h"));
  b.Add(Output({'i' + 2}, "i", engine::FinishReason::kLength));
  const json j = json::parse(b.Body(4));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "hi");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"], (json{{"prompt_tokens", 4},
                              {"completion_tokens", 2},
                              {"total_tokens", 6},
                              {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
  EXPECT_EQ(json::parse(b.Body(4, 3))["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
}

TEST(ResponseBuilder, ChatChunksStartWithTheRole) {
  ResponseBuilder b(Ctx(Endpoint::kChat));
  const json first = json::parse(b.Add(Output({'o' + 2}, "o")).at(0));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", "o"}}));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  // A token whose text is held back adds nothing visible.
  EXPECT_TRUE(b.Add(Output({5}, "")).empty());
  const json last = json::parse(b.Add(Output({'k' + 2}, "k", engine::FinishReason::kStop)).at(0));
  EXPECT_EQ(last["choices"][0]["delta"], (json{{"content", "k"}}));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  const json usage = json::parse(b.UsageChunk(2));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 3);
  EXPECT_EQ(json::parse(b.Body(2))["choices"][0]["message"]["content"], "ok");
}

TEST(ResponseBuilder, LogprobsInBothShapes) {
  Event e = Output({'a' + 2}, "a", engine::FinishReason::kLength);
  e.logprobs.push_back({'a' + 2, -0.5f, {{'a' + 2, -0.5f}, {'b' + 2, -1.5f}}});
  ResponseBuilder completion(Ctx(Endpoint::kCompletions, true));
  completion.Add(e);
  const json c = json::parse(completion.Body(1))["choices"][0]["logprobs"];
  EXPECT_EQ(c["tokens"], json::array({"a"}));
  EXPECT_EQ(c["token_logprobs"], json::array({-0.5}));
  EXPECT_EQ(c["top_logprobs"][0], (json{{"a", -0.5}, {"b", -1.5}}));
  EXPECT_EQ(c["text_offset"], json::array({0}));

  ResponseBuilder chat(Ctx(Endpoint::kChat, true));
  const json chunk = json::parse(chat.Add(e).at(0));
  const json item = chunk["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(item["token"], "a");
  EXPECT_EQ(item["logprob"], -0.5);
  EXPECT_EQ(item["bytes"], json::array({'a'}));
  EXPECT_EQ(item["top_logprobs"].size(), 2u);
}

ResponseContext ToolCtx(serving::ToolCallFormat f, bool reasoning = false) {
  ResponseContext c = Ctx(Endpoint::kChat);
  c.chat_output.tool_format = f;
  c.chat_output.tool_names = {"get_weather", "search"};
  c.chat_output.reasoning = reasoning;
  c.chat_output.call_id_seed = 11;
  return c;
}

// The events of a reply whose text arrives in pieces of `piece` bytes.
std::vector<Event> Pieces(std::string_view text, size_t piece, engine::FinishReason finish) {
  std::vector<Event> events;
  for (size_t at = 0; at < text.size(); at += piece) {
    events.push_back(Output({7}, std::string(text.substr(at, piece))));
  }
  if (events.empty()) events.push_back(Output({7}, ""));
  events.back().finish = finish;
  return events;
}

// What a client that adds up the stream's deltas (as the openai SDK does)
// ends with: {"message", "finish_reason"}, and every chunk seen.
struct Streamed {
  json message = json{{"role", nullptr}};
  json finish = nullptr;
  std::vector<json> chunks;
};

Streamed Accumulate(ResponseBuilder& b, const std::vector<Event>& events) {
  Streamed s;
  for (const Event& e : events) {
    for (const std::string& text : b.Add(e)) {
      const json chunk = json::parse(text);
      s.chunks.push_back(chunk);
      const json& choice = chunk["choices"][0];
      if (!choice["finish_reason"].is_null()) s.finish = choice["finish_reason"];
      const json& d = choice["delta"];
      if (d.contains("role")) s.message["role"] = d["role"];
      for (const char* key : {"content", "reasoning_content"}) {
        if (d.contains(key)) {
          s.message[key] = s.message.value(key, std::string()) + d[key].get<std::string>();
        }
      }
      if (d.contains("tool_calls")) {
        for (const json& t : d["tool_calls"]) {
          const size_t i = t["index"];
          json& calls = s.message["tool_calls"];
          if (calls.size() <= i) calls[i] = json{{"function", {{"arguments", ""}}}};
          if (t.contains("id")) calls[i]["id"] = t["id"];
          if (t.contains("type")) calls[i]["type"] = t["type"];
          if (t["function"].contains("name")) calls[i]["function"]["name"] = t["function"]["name"];
          calls[i]["function"]["arguments"] = calls[i]["function"]["arguments"].get<std::string>() +
                                              t["function"]["arguments"].get<std::string>();
        }
      }
    }
  }
  return s;
}

// Fixed replies of each family, streamed a byte, three bytes and seven
// bytes at a time: the deltas add up to the whole reply's message exactly,
// and no markup reaches content.
TEST(ResponseBuilder, StreamedToolCallsAddUpToTheWholeReply) {
  struct Case {
    serving::ToolCallFormat format;
    bool reasoning;
    std::string text;
    size_t num_calls;
    bool harmony = false;  // gpt-oss's: the text keeps its special tokens
  };
  const std::vector<Case> cases = {
      {serving::ToolCallFormat::kHermes, false,
       "I will look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Zürich 🙂\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", \"arguments\": "
       "{\"q\": {\"nested\": [1, {\"a\": null}]}}}\n</tool_call>",
       2},
      {serving::ToolCallFormat::kHermes, true,
       "<think>\nWeather needs a city.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
       "\"arguments\": {}}\n</tool_call>",
       1},
      {serving::ToolCallFormat::kHermes, false, "<tool_call>{\"name\": broken</tool_call>", 0},
      {serving::ToolCallFormat::kHermes, true, "<think>only thinking</think>", 0},
      {serving::ToolCallFormat::kLlama3Json, false,
       "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": \"東京\"}}", 1},
      {serving::ToolCallFormat::kMistral, false,
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, "
       "{\"name\": \"search\", \"arguments\": {}}]",
       2},
      {serving::ToolCallFormat::kMistral, false, "Plain answer.", 0},
      {serving::ToolCallFormat::kHarmony, true,
       "<|channel|>analysis<|message|>Needs a city.<|end|><|start|>assistant<|channel|>"
       "commentary<|message|>Checking.<|end|><|start|>assistant to=functions.get_weather"
       "<|channel|>commentary <|constrain|>json<|message|>{\"city\": \"Zürich 🙂\"}<|call|>",
       1, true},
      {serving::ToolCallFormat::kHarmony, true,
       "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final"
       "<|message|>4<|return|>",
       0, true},
  };
  const auto ctx = [](const Case& c) {
    ResponseContext r = ToolCtx(c.format, c.reasoning);
    r.chat_output.harmony = c.harmony;
    return r;
  };
  for (const Case& c : cases) {
    ResponseBuilder whole(ctx(c));
    for (const Event& e : Pieces(c.text, c.text.size(), engine::FinishReason::kStop)) whole.Add(e);
    const json body = json::parse(whole.Body(1))["choices"][0];
    EXPECT_EQ(body["finish_reason"], c.num_calls > 0 ? "tool_calls" : "stop") << c.text;
    EXPECT_EQ(body["message"].value("tool_calls", json::array()).size(), c.num_calls) << c.text;
    for (size_t piece : {1, 3, 7}) {
      ResponseBuilder streamed(ctx(c));
      const Streamed s = Accumulate(streamed, Pieces(c.text, piece, engine::FinishReason::kStop));
      json want = body["message"];
      // A whole reply says null where a stream sends nothing.
      for (auto it = want.begin(); it != want.end();) {
        it = it->is_null() ? want.erase(it) : std::next(it);
      }
      EXPECT_EQ(s.message, want) << c.text << " in pieces of " << piece;
      EXPECT_EQ(s.finish, body["finish_reason"]);
      for (const json& chunk : s.chunks) {
        const json& d = chunk["choices"][0]["delta"];
        if (c.num_calls > 0 && d.contains("content")) {
          const std::string content = d["content"];
          for (const char* marker : {"<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "\"name\""})
            EXPECT_EQ(content.find(marker), std::string::npos) << content;
        }
        for (const char* key : {"content", "reasoning_content"}) {
          if (c.harmony && d.contains(key)) {
            EXPECT_EQ(d[key].get<std::string>().find("<|"), std::string::npos) << d[key];
          }
        }
      }
    }
  }
}

TEST(ResponseBuilder, ToolCallDeltasComeAsOpenAISendsThem) {
  ResponseBuilder b(ToolCtx(serving::ToolCallFormat::kHermes));
  std::vector<std::string> chunks = b.Add(Output({7}, "<tool_call>{\"name\": \"search\", "));
  ASSERT_EQ(chunks.size(), 1u);  // the role; the call is held back
  EXPECT_EQ(json::parse(chunks[0])["choices"][0]["delta"], (json{{"role", "assistant"}}));
  chunks =
      b.Add(Output({7}, "\"arguments\": {\"q\": 1}}</tool_call>", engine::FinishReason::kStop));
  ASSERT_EQ(chunks.size(), 2u);
  const json head = json::parse(chunks[0])["choices"][0];
  EXPECT_EQ(head["delta"]["tool_calls"][0],
            (json{{"index", 0},
                  {"id", serving::ToolCallId(11, 0)},
                  {"type", "function"},
                  {"function", {{"name", "search"}, {"arguments", ""}}}}));
  EXPECT_TRUE(head["finish_reason"].is_null());
  const json args = json::parse(chunks[1])["choices"][0];
  EXPECT_EQ(args["delta"]["tool_calls"][0],
            (json{{"index", 0}, {"function", {{"arguments", "{\"q\":1}"}}}}));
  EXPECT_EQ(args["finish_reason"], "tool_calls");
  const json message = json::parse(b.Body(1))["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "search");
}

// A call cut off by max_tokens is not a call: its text is the content and
// the finish is "length".
TEST(ResponseBuilder, ACallCutOffIsContent) {
  ResponseBuilder b(ToolCtx(serving::ToolCallFormat::kHermes));
  b.Add(Output({7}, "<tool_call>{\"name\": \"search\", \"argu", engine::FinishReason::kLength));
  const json choice = json::parse(b.Body(1))["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(choice["message"]["content"], "<tool_call>{\"name\": \"search\", \"argu");
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
}

TEST(ResponseBuilder, ReasoningContentIsNullWithoutReasoning) {
  ResponseBuilder b(ToolCtx(serving::ToolCallFormat::kHermes, /*reasoning=*/true));
  b.Add(Output({7}, "Just an answer.", engine::FinishReason::kStop));
  const json message = json::parse(b.Body(1))["choices"][0]["message"];
  EXPECT_EQ(message["content"], "Just an answer.");
  EXPECT_TRUE(message.contains("reasoning_content"));
  EXPECT_TRUE(message["reasoning_content"].is_null());
}

}  // namespace
}  // namespace folio::server
