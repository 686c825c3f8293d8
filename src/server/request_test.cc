#include "folio/server/request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "folio/core/str_cat.h"
#include "folio/engine/request_params.h"
#include "folio/tokenizer/byte_tokenizer.h"
#include "testing/case_names.h"

namespace folio::server {
namespace {

ModelInfo Model() {
  ModelInfo m;
  m.name = "builtin";
  m.vocab_size = 258;
  m.max_positions = 64;
  m.pool_positions = 128;
  m.tokenizer = &tokenizer::ByteTokenizer::AsTokenizer();
  m.add_special_tokens = false;
  m.prepend_id = 0;
  static const serving::ChatFormat plain = *serving::ChatFormat::Create("", std::nullopt, nullptr);
  m.chat_format = &plain;
  return m;
}

ParsedRequest Ok(Endpoint ep, const std::string& body, const ModelInfo& m = Model()) {
  ParseResult r = ParseRequest(ep, body, m);
  if (const ApiError* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << body << " -> " << e->Body();
    return {};
  }
  return std::get<ParsedRequest>(r);
}

ApiError Err(Endpoint ep, const std::string& body, const ModelInfo& m = Model()) {
  ParseResult r = ParseRequest(ep, body, m);
  if (std::holds_alternative<ParsedRequest>(r)) {
    ADD_FAILURE() << body << " was accepted";
    return {};
  }
  return std::get<ApiError>(r);
}

// A field folio would not act on is refused by name; fields of the other
// endpoint are unknown here too. The documented ignored fields pass (their
// type checked) and change nothing.
TEST(ParseRequest, UnknownFieldsAreRefusedByNameExceptTheIgnoredOnes) {
  for (const char* field : {"repetition_penaltyy", "top_logprobs", "add_generation_prompt"}) {
    const ApiError e =
        Err(Endpoint::kCompletions, StrCat(R"({"prompt": "ab", ")", field, R"(": 2})"));
    EXPECT_EQ(e.param, field);
    EXPECT_NE(e.message.find(StrCat("unknown field '", field, "'")), std::string::npos)
        << e.message;
  }
  EXPECT_EQ(Err(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "x"}],
      "best_of": 2})")
                .param,
            "best_of");
  ParsedRequest r = Ok(Endpoint::kCompletions, R"({"prompt": "ab", "store": false,
      "metadata": {"a": 1}, "service_tier": "auto", "user": "me"})");
  EXPECT_EQ(r.prompt, Ok(Endpoint::kCompletions, R"({"prompt": "ab"})").prompt);
  EXPECT_EQ(Err(Endpoint::kCompletions, R"({"prompt": "ab", "store": 1})").param, "store");
  EXPECT_EQ(Err(Endpoint::kCompletions, R"({"prompt": "ab", "metadata": 1})").param, "metadata");
  // The neutral values of fields folio cannot honour pass.
  Ok(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "x"}], "tools": [],
      "tool_choice": "none", "response_format": {"type": "text"}, "functions": null})");
}

TEST(ParseRequest, UsageSeedAliasesAndDefaultMaxTokens) {
  EXPECT_FALSE(Ok(Endpoint::kCompletions, R"({"prompt": "a", "stream": true})").include_usage);
  EXPECT_TRUE(Ok(Endpoint::kCompletions,
                 R"({"prompt": "a", "stream_options": {"include_usage": true, "x": 1}})")
                  .include_usage);
  EXPECT_FALSE(Ok(Endpoint::kCompletions, R"({"prompt": "a"})").seed_given);
  EXPECT_TRUE(Ok(Endpoint::kCompletions, R"({"prompt": "a", "seed": 0})").seed_given);
  ModelInfo m = Model();
  m.aliases = {"other", "third"};
  Ok(Endpoint::kCompletions, R"({"prompt": "a", "model": "third"})", m);
  EXPECT_EQ(Err(Endpoint::kCompletions, R"({"prompt": "a", "model": "fourth"})", m).http_status,
            404);
  const std::string chat = R"({"messages": [{"role": "user", "content": "x"}]})";
  const uint64_t uncapped = Ok(Endpoint::kChat, chat, m).params.max_tokens;
  m.default_max_tokens = 5;
  EXPECT_EQ(Ok(Endpoint::kChat, chat, m).params.max_tokens, 5u);
  m.default_max_tokens = uncapped + 100;
  EXPECT_EQ(Ok(Endpoint::kChat, chat, m).params.max_tokens, uncapped);
}

TEST(ParseTokenize, PromptMessagesAndDetokenize) {
  const ModelInfo m = Model();
  auto ids = ParseTokenize(R"({"prompt": "ab"})", m);
  ASSERT_TRUE(std::holds_alternative<std::vector<int32_t>>(ids));
  EXPECT_EQ(std::get<std::vector<int32_t>>(ids),
            Ok(Endpoint::kCompletions, R"({"prompt": "ab"})").prompt);
  auto chat = ParseTokenize(R"({"messages": [{"role": "user", "content": "x"}]})", m);
  ASSERT_TRUE(std::holds_alternative<std::vector<int32_t>>(chat));
  EXPECT_EQ(std::get<std::vector<int32_t>>(chat),
            Ok(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "x"}]})").prompt);
  auto bad = ParseTokenize(R"({"prompt": 3})", m);
  ASSERT_TRUE(std::holds_alternative<ApiError>(bad));
  EXPECT_EQ(std::get<ApiError>(bad).param, "prompt");

  auto text = ParseDetokenize(R"({"tokens": [99, 100]})", m);
  ASSERT_TRUE(std::holds_alternative<std::string>(text));
  EXPECT_EQ(std::get<std::string>(text), "ab");  // byte tokens are byte + 2
  for (const char* body : {R"({"tokens": [-1]})", R"({"tokens": [1e9]})", R"({})"}) {
    auto e = ParseDetokenize(body, m);
    ASSERT_TRUE(std::holds_alternative<ApiError>(e)) << body;
    EXPECT_EQ(std::get<ApiError>(e).param, "tokens");
  }
}

TEST(ParseRequest, CompletionDefaults) {
  ParsedRequest r = Ok(Endpoint::kCompletions, R"({"model": "builtin", "prompt": "ab"})");
  EXPECT_EQ(r.prompt, (std::vector<int32_t>{0, 'a' + 2, 'b' + 2}));
  EXPECT_EQ(r.params.max_tokens, 16u);
  EXPECT_EQ(r.params.sampling.temperature, 1.0);
  EXPECT_EQ(r.params.sampling.top_p, 1.0);
  EXPECT_EQ(r.params.sampling.top_k, 0u);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.logprobs);
  EXPECT_TRUE(r.params.stop_strings.empty());
}

TEST(ParseRequest, BeamSearchExtension) {
  ParsedRequest r = Ok(Endpoint::kCompletions, R"({"prompt": "ab", "n": 2,
      "beam_search": {"num_beams": 3, "length_penalty": 0.5, "early_stopping": "never"}})");
  EXPECT_EQ(r.params.beam.num_beams, 3u);
  EXPECT_EQ(r.params.beam.length_penalty, 0.5);
  EXPECT_EQ(r.params.beam.early_stopping, engine::EarlyStopping::kNever);
  EXPECT_EQ(r.params.n, 2u);
  EXPECT_EQ(r.params.sampling.temperature, 0.0);  // beams score the model's own log-probs
  r = Ok(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "x"}],
      "beam_search": {"num_beams": 2, "early_stopping": true}})");
  EXPECT_EQ(r.params.beam.length_penalty, 1.0);
  EXPECT_EQ(r.params.beam.early_stopping, engine::EarlyStopping::kTrue);
  EXPECT_EQ(Ok(Endpoint::kCompletions, R"({"prompt": "ab"})").params.beam.num_beams, 0u);
}

TEST(ParseRequest, CompletionEveryField) {
  ParsedRequest r = Ok(Endpoint::kCompletions, R"({"model": "builtin", "prompt": [0, 5, 257],
      "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
      "seed": 42, "stop": ["x", "yz"], "n": 1, "logprobs": 3, "stream": true, "user": "u",
      "presence_penalty": 0, "frequency_penalty": 0.0, "logit_bias": {}, "echo": false,
      "best_of": 1, "suffix": null, "stream_options": {"include_usage": true}})");
  EXPECT_EQ(r.prompt, (std::vector<int32_t>{0, 5, 257}));
  EXPECT_EQ(r.params.max_tokens, 7u);
  EXPECT_EQ(r.params.sampling.temperature, 0.5);
  EXPECT_EQ(r.params.sampling.top_p, 0.9);
  EXPECT_EQ(r.params.sampling.top_k, 40u);
  EXPECT_EQ(r.params.sampling.min_p, 0.05);
  EXPECT_EQ(r.params.seed, 42u);
  EXPECT_EQ(r.params.stop_strings, (std::vector<std::string>{"x", "yz"}));
  EXPECT_TRUE(r.logprobs);
  EXPECT_TRUE(r.params.logprobs);
  EXPECT_EQ(r.params.top_logprobs, 3u);
  EXPECT_TRUE(r.stream);
}

// Every sampling parameter of issue 42 reaches RequestParams, on both
// endpoints, under OpenAI's, vLLM's and llama.cpp's names.
TEST(ParseRequest, SamplingParametersReachTheRequest) {
  for (const auto& [endpoint, start] :
       {std::pair{Endpoint::kCompletions, std::string(R"({"prompt": "x", )")},
        std::pair{Endpoint::kChat,
                  std::string(R"({"messages": [{"role": "user", "content": "x"}], )")}}) {
    const ParsedRequest r = Ok(endpoint, start + R"("presence_penalty": 0.5,
        "frequency_penalty": -0.25, "repetition_penalty": 1.3, "penalty_last_n": 64,
        "logit_bias": {"5": -100, "7": 2.5}, "allowed_token_ids": [5, 7, 9],
        "bad_words": ["ab", "c d"], "min_tokens": 3, "typical_p": 0.9, "top_n_sigma": 1.5,
        "dry_multiplier": 0.8, "dry_base": 1.75, "dry_allowed_length": 3,
        "dry_penalty_last_n": -1, "dry_sequence_breakers": ["\n", "##"],
        "xtc_probability": 0.5, "xtc_threshold": 0.2, "include_stop_str_in_output": true})");
    const engine::RequestParams& p = r.params;
    EXPECT_EQ(p.processors.presence_penalty, 0.5);
    EXPECT_EQ(p.processors.frequency_penalty, -0.25);
    EXPECT_EQ(p.processors.repetition_penalty, 1.3);
    EXPECT_EQ(p.processors.penalty_last_n, 64);
    EXPECT_EQ(p.processors.logit_bias, (engine::LogitBias{{5, -100.0}, {7, 2.5}}));
    EXPECT_EQ(p.processors.allowed_token_ids, (std::vector<int32_t>{5, 7, 9}));
    EXPECT_EQ(p.bad_words, (std::vector<std::string>{"ab", "c d"}));
    EXPECT_EQ(p.processors.min_tokens, 3);
    EXPECT_EQ(p.sampling.typical_p, 0.9);
    EXPECT_EQ(p.sampling.top_n_sigma, 1.5);
    EXPECT_EQ(p.processors.dry.multiplier, 0.8);
    EXPECT_EQ(p.processors.dry.base, 1.75);
    EXPECT_EQ(p.processors.dry.allowed_length, 3);
    EXPECT_EQ(p.processors.dry.penalty_last_n, -1);
    EXPECT_EQ(p.dry_sequence_breakers, (std::vector<std::string>{"\n", "##"}));
    EXPECT_EQ(p.sampling.xtc_probability, 0.5);
    EXPECT_EQ(p.sampling.xtc_threshold, 0.2);
    EXPECT_TRUE(p.include_stop_str_in_output);
    // llama.cpp's names.
    const ParsedRequest l = Ok(endpoint, start + R"("repeat_penalty": 1.1, "repeat_last_n": 8})");
    EXPECT_EQ(l.params.processors.repetition_penalty, 1.1);
    EXPECT_EQ(l.params.processors.penalty_last_n, 8);
  }
}

// Out of range: a 400 naming the parameter and its range.
TEST(ParseRequest, OutOfRangeNamesTheRange) {
  constexpr Endpoint kC = Endpoint::kCompletions;
  EXPECT_NE(Err(kC, R"({"prompt": "a", "repetition_penalty": 0})").message.find("(0, 100]"),
            std::string::npos);
  EXPECT_NE(Err(kC, R"({"prompt": "a", "presence_penalty": 3})").message.find("[-2, 2]"),
            std::string::npos);
  EXPECT_NE(Err(kC, R"({"prompt": "a", "logit_bias": {"5": -101}})").message.find("[-100, 100]"),
            std::string::npos);
  std::string many = R"({"prompt": "a", "logit_bias": {)";
  for (int i = 0; i < 301; ++i) many += StrCat(i == 0 ? "" : ", ", "\"", i, "\": 1");
  const ApiError e = Err(kC, many + "}}");
  EXPECT_EQ(e.param, "logit_bias");
  EXPECT_NE(e.message.find("at most 300"), std::string::npos) << e.message;
}

TEST(ParseRequest, NullMeansAbsent) {
  ParsedRequest r = Ok(Endpoint::kCompletions,
                       R"({"prompt": "a", "temperature": null, "stop": null, "logprobs": null})");
  EXPECT_EQ(r.params.sampling.temperature, 1.0);
  EXPECT_FALSE(r.logprobs);
}

TEST(ParseRequest, NegativeSeedWrapsAndTopKMinusOneIsOff) {
  ParsedRequest r = Ok(Endpoint::kCompletions, R"({"prompt": "a", "seed": -1, "top_k": -1})");
  EXPECT_EQ(r.params.seed, UINT64_MAX);
  EXPECT_EQ(r.params.sampling.top_k, 0u);
  r = Ok(Endpoint::kCompletions, R"({"prompt": "a", "seed": 18446744073709551615})");
  EXPECT_EQ(r.params.seed, UINT64_MAX);
}

TEST(ParseRequest, OneStringArrayPromptIsAString) {
  EXPECT_EQ(Ok(Endpoint::kCompletions, R"({"prompt": ["ab"]})").prompt,
            Ok(Endpoint::kCompletions, R"({"prompt": "ab"})").prompt);
}

TEST(ParseRequest, ChatUsesThePlainTemplate) {
  ParsedRequest r = Ok(Endpoint::kChat, R"({"messages": [{"role": "system", "content": "s"},
      {"role": "user", "content": [{"type": "text", "text": "h"}, {"type": "text", "text": "i"}]}],
      "logprobs": true, "top_logprobs": 2})");
  const std::string text = "system: s\nuser: hi\nassistant:";
  std::vector<int32_t> want = {0};
  for (char c : text) want.push_back(static_cast<unsigned char>(c) + 2);
  EXPECT_EQ(r.prompt, want);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.params.top_logprobs, 2u);
  // No max_tokens: the rest of the context (prompt + max_tokens - 1 = 64).
  EXPECT_EQ(r.params.max_tokens, 64 - want.size() + 1);
}

// A text longer in bytes than the context's tokens can stand for
// (Tokenizer::max_bytes_per_token) is refused before it is tokenized,
// naming its field; one that might fit is tokenized and counted exactly.
TEST(ParseRequest, TextTooLongForTheContextIsRefusedBeforeTokenizing) {
  const ModelInfo m = Model();
  const std::optional<uint64_t> per_token = m.tokenizer->max_bytes_per_token();
  ASSERT_TRUE(per_token.has_value());
  const std::string huge((m.max_positions + 1) * *per_token, 'a');
  ApiError e = Err(Endpoint::kCompletions, StrCat(R"({"prompt": ")", huge, R"("})"));
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(e.message.find(StrCat(huge.size(), " bytes")), std::string::npos) << e.message;
  e = Err(Endpoint::kCompletions, StrCat(R"({"prompt": [")", huge, R"("]})"));
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(e.message.find(" bytes"), std::string::npos) << e.message;
  e = Err(Endpoint::kChat,
          StrCat(R"({"messages": [{"role": "user", "content": ")", huge, R"("}]})"));
  EXPECT_EQ(e.param, "messages");
  EXPECT_NE(e.message.find(" bytes"), std::string::npos) << e.message;
  // Within the byte bound, the tokens are counted.
  const std::string long_one(m.max_positions + 1, 'a');
  e = Err(Endpoint::kCompletions, StrCat(R"({"prompt": ")", long_one, R"("})"));
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(e.message.find("tokens; the limit is 64"), std::string::npos) << e.message;
  // Embeddings: refused alike, unless the input is to be truncated.
  auto embed = ParseEmbeddings(StrCat(R"({"input": ")", huge, R"("})"), m);
  ASSERT_TRUE(std::holds_alternative<ApiError>(embed));
  EXPECT_EQ(std::get<ApiError>(embed).param, "input");
  EXPECT_NE(std::get<ApiError>(embed).message.find(" bytes"), std::string::npos);
  embed = ParseEmbeddings(StrCat(R"({"input": ")", huge, R"(", "truncate_prompt_tokens": 8})"), m);
  ASSERT_TRUE(std::holds_alternative<ParsedEmbeddings>(embed)) << std::get<ApiError>(embed).Body();
  EXPECT_EQ(std::get<ParsedEmbeddings>(embed).inputs.at(0).size(), 8u);
}

TEST(ParseRequest, ChatStopTokensOnlyForChat) {
  ModelInfo m = Model();
  m.eos_token_ids = {1};
  EXPECT_EQ(Ok(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "x"}]})", m)
                .params.eos_token_ids,
            (std::vector<int32_t>{1}));  // the plain format has no end-of-turn token
  EXPECT_EQ(Ok(Endpoint::kCompletions, R"({"prompt": "x"})", m).params.eos_token_ids,
            (std::vector<int32_t>{1}));
}

// The declared parameters (engine/request_params.h), on both endpoints.
TEST(ParseRequest, StopTokenIdsAndIgnoreEosReachTheEngine) {
  ModelInfo m = Model();
  m.eos_token_ids = {1};
  for (const auto& [endpoint, start] :
       {std::pair{Endpoint::kCompletions, std::string(R"({"prompt": "x", )")},
        std::pair{Endpoint::kChat,
                  std::string(R"({"messages": [{"role": "user", "content": "x"}], )")}}) {
    const ParsedRequest r =
        Ok(endpoint, start + R"("stop_token_ids": [5, 7], "ignore_eos": true, "min_p": 0.5})", m);
    EXPECT_EQ(r.params.stop_token_ids, (std::vector<int32_t>{5, 7}));
    EXPECT_TRUE(r.params.ignore_eos);
    EXPECT_EQ(r.params.sampling.min_p, 0.5);
    EXPECT_EQ(r.params.eos_token_ids, (std::vector<int32_t>{1}));
    EXPECT_EQ(Err(endpoint, start + R"("stop_token_ids": [5, 100000]})", m).param,
              "stop_token_ids");
    EXPECT_EQ(Err(endpoint, start + R"("stop_token_ids": 5})", m).param, "stop_token_ids");
    EXPECT_EQ(Err(endpoint, start + R"("stop_token_ids": [-1]})", m).param, "stop_token_ids");
    EXPECT_EQ(Err(endpoint, start + R"("ignore_eos": 1})", m).param, "ignore_eos");
    EXPECT_EQ(Err(endpoint, start + R"("min_p": 2})", m).param, "min_p");
  }
}

// A chat template renders the messages as the client sent them (other keys
// included); what it raises is a 400 naming messages, quoting it.
TEST(ParseRequest, ChatRendersThroughTheTemplateAndReportsItsErrors) {
  ModelInfo m = Model();
  const serving::ChatFormat f = *serving::ChatFormat::Create(
      "",
      std::string("{% for m in messages %}{% if m.role == 'assistant' and m.name is defined %}"
                  "{{ raise_exception('no names: ' ~ m.name) }}{% endif %}"
                  "[{{ m.role }}|{{ m.content }}]{% endfor %}"),
      nullptr);
  m.chat_format = &f;
  ParsedRequest r = Ok(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "hi"}]})", m);
  std::vector<int32_t> want = {0};
  for (char c : std::string("[user|hi]")) want.push_back(static_cast<unsigned char>(c) + 2);
  EXPECT_EQ(r.prompt, want);
  ApiError e = Err(Endpoint::kChat,
                   R"({"messages": [{"role": "assistant", "content": "a", "name": "bob"}]})", m);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "messages");
  EXPECT_EQ(e.message, "chat template raised: no names: bob");

  // The messages reach the template with their keys in the client's order.
  const serving::ChatFormat json_format =
      *serving::ChatFormat::Create("", std::string("{{ messages[0] | tojson }}"), nullptr);
  m.chat_format = &json_format;
  ParsedRequest keys =
      Ok(Endpoint::kChat, R"({"messages": [{"role": "user", "name": "z", "content": "x"}]})", m);
  std::vector<int32_t> want_keys = {0};
  for (char c : std::string(R"({"role": "user", "name": "z", "content": "x"})")) {
    want_keys.push_back(static_cast<unsigned char>(c) + 2);
  }
  EXPECT_EQ(keys.prompt, want_keys);
}

ModelInfo HermesModel() {
  ModelInfo m = Model();
  static const serving::ChatFormat hermes = *serving::ChatFormat::Create(
      "",
      std::string("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
                  "{% if tools %}<tool_call>{% endif %}"),
      nullptr);
  static grammar::GrammarCache grammars;
  m.chat_format = &hermes;
  m.grammars = &grammars;
  m.max_positions = 4096;
  m.pool_positions = 4096;
  return m;
}

const char* const kToolList = R"("tools": [{"type": "function", "function": {"name": "f",
    "parameters": {"type": "object", "properties": {"x": {"type": "integer"}},
    "required": ["x"]}}}])";

TEST(ParseRequest, ToolsAreReadByTheTemplatesFormat) {
  const ModelInfo m = HermesModel();
  const std::string msgs = R"({"messages": [{"role": "user", "content": "x"}], )";
  ParsedRequest r = Ok(Endpoint::kChat, msgs + kToolList + "}", m);
  EXPECT_EQ(r.chat_output.tool_format, serving::ToolCallFormat::kHermes);
  EXPECT_EQ(r.chat_output.tool_names, std::vector<std::string>{"f"});
  EXPECT_FALSE(r.params.grammar);  // auto: no constraint
  // A named function forces the call with a grammar.
  r = Ok(Endpoint::kChat,
         msgs + kToolList + R"(, "tool_choice": {"type": "function", "function": {"name": "f"}}})",
         m);
  EXPECT_TRUE(r.params.grammar);
  EXPECT_EQ(r.grammar_field, "tool_choice");
  // ... which no other output constraint may join.
  EXPECT_EQ(Err(Endpoint::kChat,
                msgs + kToolList +
                    R"(, "tool_choice": "required", "response_format": {"type": "json_object"}})",
                m)
                .param,
            "response_format");
  // tool_choice none: nothing read.
  EXPECT_FALSE(Ok(Endpoint::kChat, msgs + kToolList + R"(, "tool_choice": "none"})", m)
                   .chat_output.active());
  // The whole tool loop as the openai SDK sends it back.
  Ok(Endpoint::kChat,
     R"({"messages": [{"role": "user", "content": "x"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
       "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "2"}], )" +
         std::string(kToolList) + "}",
     m);
}

TEST(ParseRequest, MaxCompletionTokensForChat) {
  EXPECT_EQ(Ok(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "x"}],
                  "max_completion_tokens": 3})")
                .params.max_tokens,
            3u);
}

TEST(ParseRequest, PromptFillsTheContextExactly) {
  // 1 + 40 prompt tokens + 24 max_tokens - 1 = 64 positions: allowed.
  const std::string prompt(40, 'a');
  EXPECT_EQ(Ok(Endpoint::kCompletions, R"({"prompt": ")" + prompt + R"(", "max_tokens": 24})")
                .params.max_tokens,
            24u);
  ApiError e = Err(Endpoint::kCompletions, R"({"prompt": ")" + prompt + R"(", "max_tokens": 25})");
  EXPECT_EQ(e.param, "max_tokens");
}

TEST(ParseRequest, DefaultMaxTokensShrinksToTheContext) {
  const std::string prompt(60, 'a');  // 61 tokens: room for 4
  EXPECT_EQ(Ok(Endpoint::kCompletions, R"({"prompt": ")" + prompt + R"("})").params.max_tokens, 4u);
}

TEST(ParseRequest, PoolSmallerThanContextIsTheLimit) {
  ModelInfo m = Model();
  m.pool_positions = 8;
  ApiError e = Err(Endpoint::kCompletions, R"({"prompt": "abc", "max_tokens": 6})", m);
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_NE(e.message.find("KV pool 8"), std::string::npos) << e.message;
}

// The bad-input matrix: one failure per row, each naming its field.
struct BadCase {
  Endpoint endpoint;
  std::string body;
  std::string param;
  int status = 400;
};

class BadRequest : public testing::TestWithParam<BadCase> {};

TEST_P(BadRequest, IsRefusedNamingTheField) {
  const BadCase& c = GetParam();
  ApiError e = Err(c.endpoint, c.body);
  EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
  EXPECT_EQ(e.http_status, c.status) << c.body;
  EXPECT_FALSE(e.message.empty());
  const nlohmann::json j = nlohmann::json::parse(e.Body());
  EXPECT_EQ(j["error"]["type"], e.type);
  EXPECT_TRUE(j["error"]["code"].is_null() || c.status == 404);
  if (c.param.empty()) {
    EXPECT_TRUE(j["error"]["param"].is_null());
  } else {
    EXPECT_EQ(j["error"]["param"], c.param);
  }
}

constexpr Endpoint kC = Endpoint::kCompletions;
constexpr Endpoint kChat = Endpoint::kChat;
const char* const kMsgs = R"("messages": [{"role": "user", "content": "x"}])";

INSTANTIATE_TEST_SUITE_P(
    Matrix, BadRequest,
    testing::Values(
        BadCase{kC, "{", ""}, BadCase{kC, "", ""}, BadCase{kC, "[1]", ""},
        BadCase{kC, "\"prompt\"", ""}, BadCase{kC, R"({"prompt": "a"} x)", ""},
        BadCase{kC, R"({})", "prompt"}, BadCase{kC, R"({"prompt": 5})", "prompt"},
        BadCase{kC, R"({"prompt": ["a", "b"]})", "prompt"},
        BadCase{kC, R"({"prompt": [[1, 2]]})", "prompt"},
        BadCase{kC, R"({"prompt": [1, 258]})", "prompt"},
        BadCase{kC, R"({"prompt": [1, -1]})", "prompt"},
        BadCase{kC, R"({"prompt": [1, 2.5]})", "prompt"},
        BadCase{kC, R"({"prompt": [1, 99999999999999999999]})", "prompt"},
        BadCase{kC, R"({"prompt": []})", "prompt"},
        BadCase{kC, R"({"prompt": ")" + std::string(70, 'a') + R"("})", "prompt"},
        BadCase{kC, R"({"prompt": "a", "model": 3})", "model"},
        BadCase{kC, R"({"prompt": "a", "model": "gpt-4"})", "model", 404},
        BadCase{kC, R"({"prompt": "a", "max_tokens": 0})", "max_tokens"},
        BadCase{kC, R"({"prompt": "a", "max_tokens": -3})", "max_tokens"},
        BadCase{kC, R"({"prompt": "a", "max_tokens": "5"})", "max_tokens"},
        BadCase{kC, R"({"prompt": "a", "max_tokens": 2.0})", "max_tokens"},
        BadCase{kC, R"({"prompt": "a", "max_tokens": 100})", "max_tokens"},
        BadCase{kC, R"({"prompt": "a", "max_tokens": 18446744073709551615})", "max_tokens"},
        BadCase{kC, R"({"prompt": "a", "temperature": -0.1})", "temperature"},
        BadCase{kC, R"({"prompt": "a", "temperature": 2.5})", "temperature"},
        BadCase{kC, R"({"prompt": "a", "temperature": "hot"})", "temperature"},
        BadCase{kC, R"({"prompt": "a", "temperature": true})", "temperature"},
        BadCase{kC, R"({"prompt": "a", "top_p": 0})", "top_p"},
        BadCase{kC, R"({"prompt": "a", "top_p": 1.01})", "top_p"},
        BadCase{kC, R"({"prompt": "a", "top_k": -2})", "top_k"},
        BadCase{kC, R"({"prompt": "a", "top_k": 1.5})", "top_k"},
        BadCase{kC, R"({"prompt": "a", "min_p": 1.5})", "min_p"},
        BadCase{kC, R"({"prompt": "a", "min_p": -0.5})", "min_p"},
        BadCase{kC, R"({"prompt": "a", "seed": "1"})", "seed"},
        BadCase{kC, R"({"prompt": "a", "stop": ""})", "stop"},
        BadCase{kC, R"({"prompt": "a", "stop": ["x", ""]})", "stop"},
        BadCase{kC, R"({"prompt": "a", "stop": [1]})", "stop"},
        BadCase{kC, R"({"prompt": "a", "stop": 7})", "stop"},
        BadCase{
            kC,
            R"({"prompt": "a", "stop": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})",
            "stop"},
        BadCase{kC, R"({"prompt": "a", "n": 65})", "n"},
        BadCase{kC, R"({"prompt": "a", "n": 2, "best_of": 1})", "best_of"},
        BadCase{kC, R"({"prompt": "a", "best_of": 2, "stream": true})", "best_of"},
        BadCase{kC, R"({"prompt": "a", "n": 0})", "n"},
        BadCase{kC, R"({"prompt": "a", "logprobs": 21})", "logprobs"},
        BadCase{kC, R"({"prompt": "a", "logprobs": true})", "logprobs"},
        BadCase{kC, R"({"prompt": "a", "stream": "yes"})", "stream"},
        BadCase{kC, R"({"prompt": "a", "stream_options": []})", "stream_options"},
        BadCase{kC, R"({"prompt": "a", "stream_options": {"include_usage": 1}})", "include_usage"},
        BadCase{kC, R"({"prompt": "a", "response_format": {"type": "json_object"}})",
                "response_format"},
        BadCase{kChat, R"({"messages": [{"role": "user", "content": "x"}], "tools": [{}]})",
                "tools[0].type"},
        BadCase{kC, R"({"prompt": "a", "tools": [{"type": "function", "function":
                       {"name": "f"}}]})",
                "tools"},
        BadCase{kC, R"({"prompt": "a", "tool_choice": "required"})", "tool_choice"},
        BadCase{kChat, R"({"messages": [{"role": "user", "content": "x"}],
                           "tools": [{"type": "function", "function": {"name": "f"}}],
                           "tool_choice": {"type": "function", "function": {"name": "g"}}})",
                "tool_choice"},
        BadCase{kChat, R"({"messages": [{"role": "user", "content": "x"},
                           {"role": "tool", "content": "4"}]})",
                "messages[1].tool_call_id"},
        BadCase{kChat, R"({"messages": [{"role": "user", "content": "x"}],
                           "chat_template_kwargs": []})",
                "chat_template_kwargs"},
        BadCase{kChat, R"({"messages": [{"role": "user", "content": "x"}], "functions": {}})",
                "functions"},
        BadCase{kChat, R"({"messages": [{"role": "user", "content": "x"}],
                           "tool_choice": "required"})",
                "tool_choice"},
        BadCase{kC, R"({"prompt": "a", "user": 5})", "user"},
        BadCase{kC, R"({"prompt": "a", "presence_penalty": 2.5})", "presence_penalty"},
        BadCase{kC, R"({"prompt": "a", "frequency_penalty": -3})", "frequency_penalty"},
        BadCase{kC, R"({"prompt": "a", "repetition_penalty": 0})", "repetition_penalty"},
        BadCase{kC, R"({"prompt": "a", "repeat_penalty": -1})", "repeat_penalty"},
        BadCase{kC, R"({"prompt": "a", "repeat_penalty": 1.1, "repetition_penalty": 1.2})",
                "repeat_penalty"},
        BadCase{kC, R"({"prompt": "a", "penalty_last_n": -2})", "penalty_last_n"},
        BadCase{kC, R"({"prompt": "a", "penalty_last_n": 1.5})", "penalty_last_n"},
        BadCase{kC, R"({"prompt": "a", "logit_bias": {"5": 101}})", "logit_bias"},
        BadCase{kC, R"({"prompt": "a", "logit_bias": {"999999": 1}})", "logit_bias"},
        BadCase{kC, R"({"prompt": "a", "logit_bias": {"x": 1}})", "logit_bias"},
        BadCase{kC, R"({"prompt": "a", "logit_bias": {"-1": 1}})", "logit_bias"},
        BadCase{kC, R"({"prompt": "a", "logit_bias": [5]})", "logit_bias"},
        BadCase{kC, R"({"prompt": "a", "allowed_token_ids": [999999]})", "allowed_token_ids"},
        BadCase{kC, R"({"prompt": "a", "bad_words": [""]})", "bad_words"},
        BadCase{kC, R"({"prompt": "a", "bad_words": "x"})", "bad_words"},
        BadCase{kC, R"({"prompt": "a", "min_tokens": -1})", "min_tokens"},
        BadCase{kC, R"({"prompt": "a", "typical_p": 1.5})", "typical_p"},
        BadCase{kC, R"({"prompt": "a", "top_n_sigma": -1})", "top_n_sigma"},
        BadCase{kC, R"({"prompt": "a", "min_p": 1.5})", "min_p"},
        BadCase{kC, R"({"prompt": "a", "dry_base": 0.5})", "dry_base"},
        BadCase{kC, R"({"prompt": "a", "dry_sequence_breakers": [1]})", "dry_sequence_breakers"},
        BadCase{kC, R"({"prompt": "a", "xtc_probability": 2})", "xtc_probability"},
        BadCase{kC, R"({"prompt": "a", "include_stop_str_in_output": 1})",
                "include_stop_str_in_output"},
        BadCase{kC, R"({"prompt": "a", "echo": true})", "echo"},
        BadCase{kC, R"({"prompt": "a", "best_of": 65})", "best_of"},
        BadCase{kC, R"({"prompt": "a", "suffix": "z"})", "suffix"},
        BadCase{kC, R"({"prompt": "a", "beam_search": 3})", "beam_search"},
        BadCase{kC, R"({"prompt": "a", "beam_search": {}})", "beam_search"},
        BadCase{kC, R"({"prompt": "a", "beam_search": {"num_beams": 2, "width": 2}})",
                "beam_search"},
        BadCase{kC, R"({"prompt": "a", "beam_search": {"num_beams": 0}})", "num_beams"},
        BadCase{kC, R"({"prompt": "a", "beam_search": {"num_beams": 2, "early_stopping": 1}})",
                "early_stopping"},
        BadCase{kC, R"({"prompt": "a", "beam_search": {"num_beams": 2}, "best_of": 2})", "best_of"},
        BadCase{kC, R"({"prompt": "a", "beam_search": {"num_beams": 2}, "stream": true})",
                "beam_search"},
        BadCase{kChat, R"({})", "messages"}, BadCase{kChat, R"({"messages": {}})", "messages"},
        BadCase{kChat, R"({"messages": []})", "messages"},
        BadCase{kChat, R"({"messages": [1]})", "messages[0]"},
        BadCase{kChat, R"({"messages": [{"content": "x"}]})", "messages[0].role"},
        BadCase{kChat, R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role"},
        BadCase{kChat, R"({"messages": [{"role": "user"}]})", "messages[0].content"},
        BadCase{kChat, R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
        BadCase{kChat, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                "messages[0].content"},
        BadCase{kChat, std::string("{") + kMsgs + R"(, "logprobs": 2})", "logprobs"},
        BadCase{kChat, std::string("{") + kMsgs + R"(, "top_logprobs": 2})", "top_logprobs"},
        BadCase{kChat, std::string("{") + kMsgs + R"(, "logprobs": true, "top_logprobs": 30})",
                "top_logprobs"},
        BadCase{kChat, std::string("{") + kMsgs + R"(, "max_completion_tokens": 0})",
                "max_completion_tokens"},
        BadCase{kChat, std::string("{") + kMsgs + R"(, "max_tokens": 1000})", "max_tokens"}),
    // Case i, refused naming field f, is i_f (i_body when no field is
    // named).
    [](const testing::TestParamInfo<BadCase>& c) {
      return test_support::CaseName(c.index, c.param.param.empty() ? "body" : c.param.param);
    });

TEST(ParseRequest, InvalidUtf8StringsAreRefusedNotCrashed) {
  ApiError e = Err(kC, std::string("{\"prompt\": \"\xff\xfe\"}"));
  EXPECT_TRUE(e.param.empty());  // the JSON parser refuses invalid UTF-8
  // The error body is still valid JSON.
  EXPECT_FALSE(nlohmann::json::parse(e.Body(), nullptr, false).is_discarded());
}

TEST(ParseRequest, DeepNestingIsRefusedNotCrashed) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  ApiError e = Err(kC, R"({"prompt": )" + deep + "}");
  // Refused while parsing (server/json_body.h bounds the depth), before any
  // field is read.
  EXPECT_EQ(e.param, "");
  EXPECT_NE(e.message.find("nests deeper than"), std::string::npos) << e.message;
}

TEST(ParseRequest, ADuplicateKeyIsRefusedByName) {
  ApiError e = Err(kC, R"({"prompt": "a", "max_tokens": 2, "prompt": "b"})");
  EXPECT_NE(e.message.find("\"prompt\" twice"), std::string::npos) << e.message;
}

}  // namespace
}  // namespace folio::server

namespace folio::server {
namespace {

// Structured output: every field clients use for it, one constraint per
// request, and refusals that name the field.
ModelInfo ModelWithGrammars() {
  static grammar::GrammarCache cache(16);
  ModelInfo m = Model();
  m.grammars = &cache;
  return m;
}

struct ConstraintCase {
  std::string fields;  // JSON members added to a completion request
  std::string field;   // the field reported
  std::string yes, no;
};

TEST(ParseRequest, EveryStructuredOutputFieldCompilesItsConstraint) {
  const std::string schema =
      R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})";
  const std::vector<ConstraintCase> cases = {
      {R"("response_format": {"type": "json_object"})", "response_format", R"({"x": [1]})", "[1]"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "n", "strict": true,
          "schema": )" +
           schema + "}}",
       "response_format", R"({"a": 1})", R"({"a": "1"})"},
      {R"("structured_outputs": {"json": )" + schema + "}", "structured_outputs.json",
       R"({"a": 1})", R"({})"},
      {R"("structured_outputs": {"regex": "[0-9]+x"})", "structured_outputs.regex", "12x", "x"},
      {R"("structured_outputs": {"choice": ["red", "blue"]})", "structured_outputs.choice", "blue",
       "green"},
      {R"("structured_outputs": {"grammar": "root ::= \"a\"+"})", "structured_outputs.grammar",
       "aaa", "b"},
      {R"("structured_outputs": {"json_object": true})", "structured_outputs.json_object", "{}",
       "1"},
      {R"("guided_json": )" + schema, "guided_json", R"({"a": 2})", R"({"b": 2})"},
      {R"("guided_json": ")" + nlohmann::json(schema).dump().substr(1), "guided_json",
       R"({"a": 2})", R"({"b": 2})"},
      {R"("guided_regex": "a|b")", "guided_regex", "b", "ab"},
      {R"("guided_choice": ["x", "y"])", "guided_choice", "y", "xy"},
      {R"("guided_grammar": "root ::= [a-c]{2}")", "guided_grammar", "ac", "abc"},
      {R"("grammar": "root ::= \"yes\" | \"no\"")", "grammar", "no", "maybe"},
      {R"("json_schema": )" + schema, "json_schema", R"({"a": 3})", R"({"a": 3.5})"},
  };
  for (const ConstraintCase& c : cases) {
    const std::string body = R"({"prompt": "a", )" + c.fields + "}";
    ParsedRequest r = Ok(Endpoint::kCompletions, body, ModelWithGrammars());
    ASSERT_NE(r.params.grammar, nullptr) << body;
    EXPECT_EQ(r.grammar_field, c.field) << body;
    EXPECT_TRUE(r.params.grammar->Matches(c.yes)) << body << " should accept " << c.yes;
    EXPECT_FALSE(r.params.grammar->Matches(c.no)) << body << " should reject " << c.no;
  }
}

TEST(ParseRequest, TextResponseFormatAndNoConstraintLeaveOutputFree) {
  EXPECT_EQ(Ok(Endpoint::kCompletions, R"({"prompt": "a", "response_format": {"type": "text"}})",
               ModelWithGrammars())
                .params.grammar,
            nullptr);
  EXPECT_EQ(Ok(Endpoint::kCompletions, R"({"prompt": "a"})", ModelWithGrammars()).params.grammar,
            nullptr);
}

TEST(ParseRequest, OneSchemaSentTwiceIsCompiledOnce) {
  const std::string body = R"({"prompt": "a", "guided_choice": ["only", "once"]})";
  ParsedRequest a = Ok(Endpoint::kCompletions, body, ModelWithGrammars());
  ParsedRequest b = Ok(Endpoint::kCompletions, body, ModelWithGrammars());
  ASSERT_NE(a.params.grammar, nullptr);
  EXPECT_EQ(a.params.grammar.get(), b.params.grammar.get());
}

TEST(ParseRequest, StructuredOutputRefusalsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // Two constraints: the second is named.
      {R"("guided_regex": "a", "grammar": "root ::= \"a\"")", "grammar"},
      {R"("response_format": {"type": "json_object"}, "guided_json": {})", "guided_json"},
      {R"("structured_outputs": {"regex": "a", "choice": ["a"]})", "structured_outputs.choice"},
      // Malformed or unsupported.
      {R"("response_format": {"type": "xml"})", "response_format"},
      {R"("response_format": {"type": "json_object", "schema": {}})", "response_format"},
      {R"("response_format": {"type": "json_schema"})", "response_format"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "x"}})",
       "response_format"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"schema": {}, "x": 1}})",
       "response_format"},
      {R"("response_format": {"type": "json_schema", "json_schema":
          {"schema": {"type": "object", "propertyNames": {}}}})",
       "response_format"},
      {R"("response_format": "json")", "response_format"},
      {R"("structured_outputs": {"whitespace_pattern": " "})",
       "structured_outputs.whitespace_pattern"},
      {R"("structured_outputs": {})", "structured_outputs"},
      {R"("structured_outputs": {"choice": []})", "structured_outputs.choice"},
      {R"("guided_json": "{not json")", "guided_json"},
      {R"("guided_json": 5)", "guided_json"},
      {R"("guided_choice": ["a", 1])", "guided_choice"},
      {R"("guided_regex": "(a")", "guided_regex"},
      {R"x("guided_regex": "a(?=b)")x", "guided_regex"},
      {R"("guided_grammar": "root ::= undefined-rule")", "guided_grammar"},
      {R"("grammar": "root ::= root \"a\" | \"b\"")", "grammar"},
      {R"("guided_decoding_backend": "xgrammar", "guided_regex": "a")", "guided_decoding_backend"},
      {R"("guided_whitespace_pattern": " ")", "guided_whitespace_pattern"},
      {R"("guided_regex": "a", "beam_search": {"num_beams": 2})", "guided_regex"},
  };
  for (const auto& [fields, field] : cases) {
    const std::string body = R"({"prompt": "a", )" + fields + "}";
    const ApiError e = Err(Endpoint::kCompletions, body, ModelWithGrammars());
    EXPECT_EQ(e.http_status, 400) << body;
    EXPECT_EQ(e.param, field) << body << " -> " << e.Body();
  }
  // The refused keyword is named in the message.
  const ApiError e = Err(Endpoint::kCompletions, R"({"prompt": "a", "guided_json":
      {"type": "object", "propertyNames": {"maxLength": 3}}})",
                         ModelWithGrammars());
  EXPECT_NE(e.message.find("propertyNames"), std::string::npos) << e.Body();
}

TEST(ParseRequest, StructuredOutputWithoutAGrammarCacheIsRefused) {
  const ApiError e = Err(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "x"}],
          "response_format": {"type": "json_object"}})");
  EXPECT_EQ(e.param, "response_format");
}

}  // namespace
}  // namespace folio::server
