// Chat messages -> a prompt for the Python package's LLM.chat and
// Tokenizer.apply_chat_template, in one place.
//
// It renders exactly as `folio serve` does (serving/chat_format.h, through
// serving::ServedModel::MakeChatFormat): the model's own Jinja template, or a
// template the caller gives, or, for a model that ships none, ChatML or
// folio's plain format; byte-level models get the plain format.
#ifndef FOLIO_PYTHON_CHAT_PROMPT_H_
#define FOLIO_PYTHON_CHAT_PROMPT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/status.h"
#include "folio/serving/chat_format.h"
#include "folio/serving/served_model.h"

namespace folio::python {

struct ChatPrompt {
  std::string text;
  // Encode with the tokenizer's special tokens (false when the template
  // writes them itself).
  bool add_special_tokens = true;
  // Token ids that end an assistant turn (added to a chat request's stops).
  std::vector<int32_t> stop_token_ids;
};

// messages_json: a JSON array of {"role", "content": string, ...} objects;
// extra_json: a JSON object of more template variables (or "null").
// template_text: a Jinja template replacing the model's (nullopt: the
// model's). Errors: malformed JSON, a template that does not parse, the
// template's own errors (raise_exception), a render limit.
Result<ChatPrompt> RenderChatPrompt(const serving::ServedModel& model,
                                    const serving::ChatFormat& model_format,
                                    std::string_view messages_json, bool add_generation_prompt,
                                    const std::optional<std::string>& template_text,
                                    std::string_view extra_json);

}  // namespace folio::python

#endif  // FOLIO_PYTHON_CHAT_PROMPT_H_
