// Chat messages -> one prompt string.
//
// folio has no Jinja engine. It recognises one template family by its
// markers and falls back to a documented plain format for everything else:
//
//   kChatML (a model's chat_template that contains "<|im_start|>", as
//   Qwen2/Qwen3 and many fine-tunes ship):
//       <|im_start|>{role}\n{content}<|im_end|>\n   per message, then
//       <|im_start|>assistant\n
//   kPlain (no template, or one folio does not recognise):
//       {role}: {content}\n                          per message, then
//       assistant:
//
// The markers are written as text; the tokenizer matches them as its
// special tokens. Nothing else of a Jinja template (system-prompt defaults,
// tool calls, generation prompts of other shapes) is interpreted.
#ifndef FOLIO_SERVER_CHAT_TEMPLATE_H_
#define FOLIO_SERVER_CHAT_TEMPLATE_H_

#include <span>
#include <string>
#include <string_view>

namespace folio::server {

struct ChatMessage {
  std::string role;  // system, user, assistant, tool
  std::string content;
};

enum class ChatTemplate { kPlain, kChatML };

std::string_view ChatTemplateName(ChatTemplate t);

// The template a model's Jinja source (tokenizer_config.json's
// chat_template, GGUF's tokenizer.chat_template) maps to; kPlain for an
// empty or unrecognised one.
ChatTemplate DetectChatTemplate(std::string_view jinja_source);

// The prompt for messages, ending where the assistant's reply begins.
std::string RenderChat(ChatTemplate t, std::span<const ChatMessage> messages);

// The text that ends an assistant turn in t ("<|im_end|>" for ChatML), to
// be mapped to a stop token id; empty when the template has none.
std::string_view ChatEndOfTurn(ChatTemplate t);

}  // namespace folio::server

#endif  // FOLIO_SERVER_CHAT_TEMPLATE_H_
