#include "chat_prompt.h"

#include <nlohmann/json.hpp>

namespace folio::python {

Result<ChatPrompt> RenderChatPrompt(const serving::ServedModel& model,
                                    const serving::ChatFormat& model_format,
                                    std::string_view messages_json, bool add_generation_prompt,
                                    const std::optional<std::string>& template_text,
                                    std::string_view extra_json) {
  const auto messages = nlohmann::ordered_json::parse(messages_json, nullptr, false);
  const auto extra = nlohmann::ordered_json::parse(extra_json, nullptr, false);
  if (messages.is_discarded() || !messages.is_array()) {
    return Status::InvalidArgument("messages must be a JSON array of message objects");
  }
  if (extra.is_discarded() || !(extra.is_object() || extra.is_null())) {
    return Status::InvalidArgument("the template's extra variables must be a JSON object");
  }
  std::optional<serving::ChatFormat> custom;
  if (template_text) {
    Result<serving::ChatFormat> f = serving::ChatFormat::Create(
        model.chat_template, template_text, model.byte_level() ? nullptr : &*model.file_tokenizer);
    if (!f) return f.error();
    custom.emplace(std::move(*f));
  }
  const serving::ChatFormat& format = custom ? *custom : model_format;
  FOLIO_ASSIGN_OR_RETURN(serving::RenderedChat r,
                         format.Render(messages, add_generation_prompt, extra));
  return ChatPrompt{std::move(r.text), r.add_special_tokens, format.end_of_turn_ids()};
}

}  // namespace folio::python
