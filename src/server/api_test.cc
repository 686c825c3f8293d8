#include "folio/server/api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "folio/tokenizer/byte_tokenizer.h"

namespace folio::server {
namespace {

using nlohmann::json;

TEST(FindRoute, MethodsAndPaths) {
  EXPECT_EQ(FindRoute("POST", "/v1/completions"), Route::kCompletions);
  EXPECT_EQ(FindRoute("POST", "/v1/chat/completions"), Route::kChat);
  EXPECT_EQ(FindRoute("GET", "/v1/completions"), Route::kMethodNotAllowed);
  EXPECT_EQ(FindRoute("GET", "/v1/models"), Route::kModels);
  EXPECT_EQ(FindRoute("GET", "/v1/models/builtin"), Route::kModel);
  EXPECT_EQ(FindRoute("GET", "/v1/models/"), Route::kNotFound);
  EXPECT_EQ(FindRoute("DELETE", "/health"), Route::kMethodNotAllowed);
  EXPECT_EQ(FindRoute("GET", "/v1/nothing"), Route::kNotFound);
  EXPECT_EQ(FindRoute("POST", "/v1/rerank"), Route::kRerank);
  EXPECT_EQ(FindRoute("POST", "/rerank"), Route::kRerank);
  EXPECT_EQ(FindRoute("POST", "/v1/score"), Route::kScore);
  EXPECT_EQ(FindRoute("POST", "/score"), Route::kScore);
  EXPECT_EQ(FindRoute("GET", "/v1/rerank"), Route::kMethodNotAllowed);
}

Generation Gen(bool stream, bool include_usage) {
  Generation g;
  g.channel = std::make_shared<Channel>();
  g.stream = stream;
  g.include_usage = include_usage;
  g.seed = 42;
  g.ctx.endpoint = Endpoint::kCompletions;
  g.ctx.id = "cmpl-1";
  g.ctx.model = "builtin";
  g.ctx.tokenizer = &tokenizer::ByteTokenizer::AsTokenizer();
  return g;
}

Event Accepted(uint64_t prompt_tokens) {
  Event e;
  e.kind = Event::Kind::kAccepted;
  e.prompt_tokens = prompt_tokens;
  return e;
}

Event Output(std::string text, engine::FinishReason finish = engine::FinishReason::kNone) {
  Event e;
  e.tokens = {static_cast<int32_t>(text[0]) + 2};
  e.text = std::move(text);
  e.finish = finish;
  return e;
}

std::string Header(const Reply& r, std::string_view name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "";
}

TEST(GenerationOutput, WholeReplyOnlyAtTheFinish) {
  Metrics metrics;
  GenerationOutput out(Gen(false, false), metrics);
  std::vector<Event> events = {Accepted(3), Output("h")};
  GenerationStep step = out.Feed(events);
  EXPECT_FALSE(step.reply || step.start_stream || step.done);
  EXPECT_TRUE(events.empty());
  events = {Output("i", engine::FinishReason::kLength)};
  step = out.Feed(events);
  ASSERT_TRUE(step.reply);
  EXPECT_TRUE(step.done);
  EXPECT_EQ(step.reply->status, 200);
  EXPECT_EQ(Header(*step.reply, "X-Folio-Seed"), "42");
  const json j = json::parse(step.reply->body);
  EXPECT_EQ(j["choices"][0]["text"], "hi");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
}

TEST(GenerationOutput, StreamHeaderThenChunksUsageAndDone) {
  Metrics metrics;
  GenerationOutput out(Gen(true, true), metrics);
  std::vector<Event> events = {Accepted(2), Output("a")};
  GenerationStep step = out.Feed(events);
  EXPECT_TRUE(step.start_stream);
  EXPECT_FALSE(step.reply || step.done);
  EXPECT_TRUE(step.stream_data.starts_with("data: {"));
  events = {Output("b", engine::FinishReason::kStop)};
  step = out.Feed(events);
  EXPECT_FALSE(step.start_stream);
  EXPECT_TRUE(step.done);
  EXPECT_TRUE(step.stream_data.ends_with("data: [DONE]\n\n"));
  EXPECT_NE(step.stream_data.find("\"usage\""), std::string::npos);
}

TEST(GenerationOutput, RefusalBeforeAcceptanceIsAWholeErrorEvenWhenStreaming) {
  Metrics metrics;
  GenerationOutput out(Gen(true, false), metrics);
  Event refused;
  refused.kind = Event::Kind::kError;
  refused.error = Status::ResourceExhausted("needs 99 pages");
  std::vector<Event> events = {refused};
  GenerationStep step = out.Feed(events);
  ASSERT_TRUE(step.reply);
  EXPECT_FALSE(step.start_stream);
  EXPECT_TRUE(step.done && out.done());
  EXPECT_EQ(step.reply->status, 400);
  EXPECT_EQ(json::parse(step.reply->body)["error"]["param"], "max_tokens");
}

TEST(GenerationOutput, FailureMidStreamEndsTheStream) {
  Metrics metrics;
  GenerationOutput out(Gen(true, false), metrics);
  Event failed;
  failed.kind = Event::Kind::kError;
  failed.error = Status::IoError("boom");
  std::vector<Event> events = {Accepted(1), Output("a"), failed, Output("never")};
  GenerationStep step = out.Feed(events);
  EXPECT_TRUE(step.done);
  EXPECT_NE(step.stream_data.find("boom"), std::string::npos);
  EXPECT_EQ(step.stream_data.find("never"), std::string::npos);
  EXPECT_TRUE(step.stream_data.ends_with("data: [DONE]\n\n"));
}

}  // namespace
}  // namespace folio::server

namespace folio::server {
namespace {

TEST(GenerationOutput, ParallelChoicesEndWhenEveryOneHasItsFinish) {
  Metrics metrics;
  Generation g = Gen(false, false);
  g.n = 2;
  g.samples = 2;
  GenerationOutput out(std::move(g), metrics);
  Event a = Output("a", engine::FinishReason::kLength);
  Event b = Output("b");
  b.index = 1;
  std::vector<Event> events = {Accepted(1), a, b};
  GenerationStep step = out.Feed(events);
  EXPECT_FALSE(step.done || step.reply);  // choice 1 still running
  Event c = Output("c", engine::FinishReason::kStop);
  c.index = 1;
  events = {c};
  step = out.Feed(events);
  ASSERT_TRUE(step.reply && step.done);
  const json j = json::parse(step.reply->body);
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["text"], "a");
  EXPECT_EQ(j["choices"][1]["text"], "bc");
  EXPECT_EQ(j["choices"][1]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
}

}  // namespace

TEST(ResponseBuilder, BestOfReturnsTheHighestCumulativeLogprobsBestFirst) {
  ResponseContext ctx = Gen(false, false).ctx;
  ResponseBuilder b(ctx, /*samples=*/3, /*returned=*/2);
  const auto event = [](uint64_t index, std::string text, std::vector<float> logprobs) {
    Event e = Output(std::move(text), engine::FinishReason::kLength);
    e.index = index;
    e.tokens.assign(logprobs.size(), 'x' + 2);
    for (float lp : logprobs) e.logprobs.push_back({'x' + 2, lp, {}});
    return e;
  };
  b.Add(event(0, "a", {-1.0f, -1.0f}));   // -2
  b.Add(event(1, "b", {-0.5f}));          // -0.5: best
  b.Add(event(2, "c", {-0.25f, -1.5f}));  // -1.75
  ASSERT_TRUE(b.done());
  const json j = json::parse(b.Body(4));
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["text"], "b");
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][1]["text"], "c");
  EXPECT_EQ(j["choices"][1]["logprobs"], nullptr);  // the client did not ask for them
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);    // every sample generated counts
}

}  // namespace folio::server
