#include "folio/server/chat_template.h"

namespace folio::server {

std::string_view ChatTemplateName(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::kPlain:
      return "plain";
    case ChatTemplate::kChatML:
      return "chatml";
  }
  return "unknown";
}

ChatTemplate DetectChatTemplate(std::string_view jinja_source) {
  // Both markers, so a template that merely mentions one is not misread.
  if (jinja_source.find("<|im_start|>") != std::string_view::npos &&
      jinja_source.find("<|im_end|>") != std::string_view::npos) {
    return ChatTemplate::kChatML;
  }
  return ChatTemplate::kPlain;
}

std::string RenderChat(ChatTemplate t, std::span<const ChatMessage> messages) {
  std::string out;
  for (const ChatMessage& m : messages) {
    if (t == ChatTemplate::kChatML) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else {
      out += m.role + ": " + m.content + "\n";
    }
  }
  out += t == ChatTemplate::kChatML ? "<|im_start|>assistant\n" : "assistant:";
  return out;
}

std::string_view ChatEndOfTurn(ChatTemplate t) {
  return t == ChatTemplate::kChatML ? "<|im_end|>" : "";
}

}  // namespace folio::server
