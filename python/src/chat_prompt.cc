#include "chat_prompt.h"

#include <optional>

namespace folio::python {

ChatPrompt ChatPrompt::ForModel(const tokenizer::Tokenizer& tokenizer, bool byte_level,
                                std::string_view jinja_source) {
  ChatPrompt p;
  if (byte_level) return p;  // folio's byte models: plain, no end-of-turn token
  p.template_ = server::DetectChatTemplate(jinja_source);
  const std::string_view end = server::ChatEndOfTurn(p.template_);
  if (!end.empty()) {
    if (std::optional<int32_t> id = tokenizer.TokenId(end)) {
      p.stop_token_ids_.push_back(*id);
    } else {
      p.template_ = server::ChatTemplate::kPlain;  // its markers are not in the vocabulary
    }
  }
  return p;
}

std::string ChatPrompt::Render(std::span<const server::ChatMessage> messages) const {
  return server::RenderChat(template_, messages);
}

}  // namespace folio::python
