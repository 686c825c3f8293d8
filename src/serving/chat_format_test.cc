#include "folio/serving/chat_format.h"

#include <gtest/gtest.h>

#include <string>

#include "folio/tokenizer/tokenizer.h"

namespace folio::serving {
namespace {

using nlohmann::ordered_json;

const ordered_json kMessages = ordered_json::parse(
    R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])");

tokenizer::Tokenizer Fixture(const std::string& name) {
  Result<tokenizer::Tokenizer> t = tokenizer::Tokenizer::FromTokenizerJson(
      std::string(FOLIO_SOURCE_DIR) + "/tests/data/tokenizer/" + name + ".tokenizer.json");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

// The fallbacks render exactly what folio's server sent before it had a
// Jinja engine, and encode with the tokenizer's own special tokens.
TEST(ChatFormat, PlainForAByteLevelModelAndChatMLWhenTheVocabularyHasIt) {
  Result<ChatFormat> plain = ChatFormat::Create("", std::nullopt, nullptr);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->source(), ChatFormatSource::kPlain);
  Result<RenderedChat> r = plain->Render(kMessages, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text, "system: Be brief.\nuser: Hi\nassistant:");
  EXPECT_TRUE(r->add_special_tokens);
  EXPECT_TRUE(plain->end_of_turn_ids().empty());

  const tokenizer::Tokenizer qwen = Fixture("qwen2");
  Result<ChatFormat> chatml = ChatFormat::Create("", std::nullopt, &qwen);
  ASSERT_TRUE(chatml.ok());
  EXPECT_EQ(chatml->source(), ChatFormatSource::kChatML);
  EXPECT_EQ(chatml->Render(kMessages, true)->text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(chatml->Render(kMessages, false)->text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(chatml->end_of_turn_ids(), std::vector<int32_t>{*qwen.TokenId("<|im_end|>")});

  // A real vocabulary without ChatML's markers and no template: no format;
  // a conversation is refused naming the flag that gives one.
  const tokenizer::Tokenizer llama = Fixture("llama3");
  Result<ChatFormat> none = ChatFormat::Create("", std::nullopt, &llama);
  ASSERT_TRUE(none.ok()) << none.error().ToString();
  EXPECT_EQ(none->source(), ChatFormatSource::kNone);
  Result<RenderedChat> refused = none->Render(kMessages, true);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.error().message().find("--chat-template"), std::string::npos);
  // A template file gives it one.
  EXPECT_EQ(ChatFormat::Create("", "{{ messages[0].content }}", &llama)->source(),
            ChatFormatSource::kFile);
}

// A model's own template: rendered by the Jinja engine with bos/eos from
// the vocabulary, special tokens written as text (so not added again), the
// markers it writes become end-of-turn stops; a file wins over it.
TEST(ChatFormat, TheModelsTemplateAndAFileThatOverridesIt) {
  const tokenizer::Tokenizer llama = Fixture("llama3");
  const std::string source =
      "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>"
      "\n\n{{ m.content | trim }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
      "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}";
  Result<ChatFormat> f = ChatFormat::Create(source, std::nullopt, &llama);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->source(), ChatFormatSource::kModel);
  Result<RenderedChat> r = f->Render(kMessages, true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->text, llama.TokenText(*llama.bos_id()) +
                         "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                         "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                         "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_FALSE(r->add_special_tokens);
  EXPECT_EQ(f->end_of_turn_ids(), std::vector<int32_t>{*llama.TokenId("<|eot_id|>")});

  Result<ChatFormat> file =
      ChatFormat::Create(source, std::string("{{ messages | length }}"), &llama);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->source(), ChatFormatSource::kFile);
  EXPECT_EQ(file->Render(kMessages, true)->text, "2");
  // Extra variables reach the template.
  Result<ChatFormat> extra = ChatFormat::Create("", std::string("{{ greeting }}"), nullptr);
  EXPECT_EQ(extra->Render(kMessages, true, ordered_json{{"greeting", "hello"}})->text, "hello");
}

// A vocabulary with harmony's special tokens (control tokens, as in
// o200k_harmony) and a few letters.
tokenizer::Tokenizer HarmonyVocabulary() {
  tokenizer::TokenizerSpec spec;
  spec.model = tokenizer::TokenizerSpec::Model::kSentencePiece;
  spec.tokens = {"<unk>",   "<|startoftext|>", "<|return|>", "<|start|>",     "<|channel|>",
                 "<|end|>", "<|message|>",     "<|call|>",   "<|constrain|>", "a"};
  spec.token_types = {2, 3, 3, 3, 3, 3, 3, 3, 3, 1};
  spec.scores.assign(spec.tokens.size(), 0.0f);
  spec.unk_id = 0;
  spec.bos_id = 1;
  Result<tokenizer::Tokenizer> t = tokenizer::Tokenizer::FromSpec(std::move(spec));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

// gpt-oss's template writes <|channel|>: its replies are harmony messages,
// which end each message with <|end|>, so the turn ends at <|return|> (the
// answer) or <|call|> (a call) instead, as openai-harmony's
// stop_tokens_for_assistant_actions; a template that only writes <|end|>
// ends its turns there.
TEST(ChatFormat, AHarmonyTemplateStopsAtReturnAndCallNotAtEnd) {
  const tokenizer::Tokenizer vocab = HarmonyVocabulary();
  const std::string harmony =
      "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
      "{% if add_generation_prompt %}<|start|>assistant{% endif %}"
      "{# assistant turns: <|channel|>final<|message|>...<|end|> #}";
  Result<ChatFormat> f = ChatFormat::Create(harmony, std::nullopt, &vocab);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(f->harmony());
  EXPECT_EQ(f->tool_call_format(), ToolCallFormat::kHarmony);
  EXPECT_EQ(f->end_of_turn_ids(),
            (std::vector<int32_t>{*vocab.TokenId("<|return|>"), *vocab.TokenId("<|call|>")}));

  const std::string plain =
      "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}";
  Result<ChatFormat> p = ChatFormat::Create(plain, std::nullopt, &vocab);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(p->harmony());
  EXPECT_EQ(p->end_of_turn_ids(), std::vector<int32_t>{*vocab.TokenId("<|end|>")});
}

TEST(ChatFormat, TemplateErrorsAtLoadAndRaisesAtRender) {
  Result<ChatFormat> bad = ChatFormat::Create("", std::string("{% for m in messages %}"), nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--chat-template"), std::string::npos)
      << bad.status().message();
  Result<ChatFormat> unsupported =
      ChatFormat::Create("", std::string("{% include 'other.jinja' %}"), nullptr);
  ASSERT_FALSE(unsupported.ok());
  EXPECT_EQ(unsupported.status().code(), StatusCode::kUnimplemented);

  Result<ChatFormat> strict = ChatFormat::Create(
      "",
      std::string("{% if messages[0].role != 'user' %}"
                  "{{ raise_exception('Conversations must start with a user turn') }}{% endif %}"),
      nullptr);
  ASSERT_TRUE(strict.ok());
  Result<RenderedChat> r = strict->Render(kMessages, true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "chat template raised: Conversations must start with a user turn");
}

}  // namespace
}  // namespace folio::serving
