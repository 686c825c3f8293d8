#include "folio/server/chat_template.h"

#include <gtest/gtest.h>

#include <vector>

namespace folio::server {
namespace {

const std::vector<ChatMessage> kMessages = {{"system", "Be brief."}, {"user", "Hi"}};

TEST(ChatTemplate, PlainIsRoleColonContent) {
  EXPECT_EQ(RenderChat(ChatTemplate::kPlain, kMessages), "system: Be brief.\nuser: Hi\nassistant:");
  EXPECT_EQ(ChatEndOfTurn(ChatTemplate::kPlain), "");
}

TEST(ChatTemplate, ChatMLWrapsEveryTurn) {
  EXPECT_EQ(RenderChat(ChatTemplate::kChatML, kMessages),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(ChatEndOfTurn(ChatTemplate::kChatML), "<|im_end|>");
}

TEST(ChatTemplate, DetectsChatMLByBothMarkers) {
  EXPECT_EQ(DetectChatTemplate("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content "
                               "}}<|im_end|>\n{% endfor %}"),
            ChatTemplate::kChatML);
  EXPECT_EQ(DetectChatTemplate("<|im_start|> only"), ChatTemplate::kPlain);
  EXPECT_EQ(DetectChatTemplate(""), ChatTemplate::kPlain);
  EXPECT_EQ(DetectChatTemplate("{{ bos_token }}[INST] {{ m.content }} [/INST]"),
            ChatTemplate::kPlain);
}

}  // namespace
}  // namespace folio::server
