#include "chat_prompt.h"

#include <nlohmann/json.hpp>
#include <variant>

#include "folio/serving/chat_request.h"

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

Result<ChatRequestPrompt> PrepareChatRequest(const serving::ServedModel& model,
                                             const serving::ChatFormat* model_format,
                                             std::string_view body_json,
                                             const std::optional<std::string>& template_text) {
  const auto body = nlohmann::ordered_json::parse(body_json, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return Status::InvalidArgument("a chat request must be a JSON object");
  }
  std::optional<serving::ChatFormat> custom;
  if (template_text) {
    Result<serving::ChatFormat> f = serving::ChatFormat::Create(
        model.chat_template, template_text, model.byte_level() ? nullptr : &*model.file_tokenizer);
    if (!f) return f.error();
    custom.emplace(std::move(*f));
  }
  FOLIO_CHECK(custom || model_format != nullptr, "no chat format to render with");
  const serving::ChatFormat& format = custom ? *custom : *model_format;
  std::variant<serving::ChatRequest, serving::FieldError> request = serving::ParseChatRequest(body);
  if (const auto* e = std::get_if<serving::FieldError>(&request)) {
    return Status::InvalidArgument(e->field + ": " + e->message);
  }
  std::variant<serving::PreparedChat, serving::FieldError> prepared =
      serving::PrepareChat(format, std::get<serving::ChatRequest>(request), serving::ChatParsers{});
  if (const auto* e = std::get_if<serving::FieldError>(&prepared)) {
    return Status::InvalidArgument(e->field + ": " + e->message);
  }
  serving::PreparedChat& p = std::get<serving::PreparedChat>(prepared);
  return ChatRequestPrompt{
      ChatPrompt{std::move(p.prompt.text), p.prompt.add_special_tokens, format.end_of_turn_ids()},
      std::move(p.output), std::move(p.tool_grammar)};
}

ChatOutputReader::Message ChatOutputReader::Read(std::string_view text,
                                                 uint64_t call_id_seed) const {
  serving::ChatOutputOptions options = options_;
  options.call_id_seed = call_id_seed;
  serving::ChatOutputParser parser(std::move(options));
  serving::ChatDelta all = parser.Feed(text);
  all.Append(parser.Finish());
  Message m;
  m.content = std::move(all.content);
  if (options_.reasoning) m.reasoning = std::move(all.reasoning);
  m.calls = std::move(all.calls);
  return m;
}

}  // namespace folio::python
