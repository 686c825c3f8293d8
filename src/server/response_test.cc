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
  EXPECT_EQ(j["usage"],
            (json{{"prompt_tokens", 4}, {"completion_tokens", 2}, {"total_tokens", 6}}));
}

TEST(ResponseBuilder, ChatChunksStartWithTheRole) {
  ResponseBuilder b(Ctx(Endpoint::kChat));
  const json first = json::parse(b.Add(Output({'o' + 2}, "o")));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", "o"}}));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  // A token whose text is held back adds nothing visible.
  EXPECT_EQ(b.Add(Output({5}, "")), "");
  const json last = json::parse(b.Add(Output({'k' + 2}, "k", engine::FinishReason::kStop)));
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
  const json chunk = json::parse(chat.Add(e));
  const json item = chunk["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(item["token"], "a");
  EXPECT_EQ(item["logprob"], -0.5);
  EXPECT_EQ(item["bytes"], json::array({'a'}));
  EXPECT_EQ(item["top_logprobs"].size(), 2u);
}

}  // namespace
}  // namespace folio::server
