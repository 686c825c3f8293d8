// Chat messages -> a prompt for the Python package's LLM.chat and
// Tokenizer.apply_chat_template, in one place.
//
// It renders exactly as `folio serve` does (serving/chat_format.h, through
// serving::ServedModel::MakeChatFormat): the model's own Jinja template, or a
// template the caller gives, or, for a model that ships none, ChatML (or
// a refusal, without ChatML's markers); byte-level models get folio's plain
// format.
#ifndef FOLIO_PYTHON_CHAT_PROMPT_H_
#define FOLIO_PYTHON_CHAT_PROMPT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/status.h"
#include "folio/serving/chat_format.h"
#include "folio/serving/chat_output.h"
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

// A chat request as LLM.chat makes one, read exactly as `folio serve`
// reads a chat body (serving/chat_request.h): body_json is a JSON object
// with messages and, when given, tools, tool_choice, parallel_tool_calls
// and chat_template_kwargs. The prompt is rendered with the generation
// prompt; output says how the reply is read (tool calls in the template's
// format, reasoning), tool_grammar holds the calls to the tools (a
// forced tool_choice, or a strict tool under "auto"). model_format: the
// model's (null when its template did not parse; template_text must be
// given then). Errors: InvalidArgument "field: why" for what the server
// answers with a 400.
struct ChatRequestPrompt {
  ChatPrompt prompt;
  serving::ChatOutputOptions output;
  std::optional<std::string> tool_grammar;
};
Result<ChatRequestPrompt> PrepareChatRequest(const serving::ServedModel& model,
                                             const serving::ChatFormat* model_format,
                                             std::string_view body_json,
                                             const std::optional<std::string>& template_text);

// Reads a finished chat reply's text as `folio serve` does
// (serving/chat_output.h): folio._folio.ChatOutputReader.
class ChatOutputReader {
 public:
  explicit ChatOutputReader(serving::ChatOutputOptions options) : options_(std::move(options)) {}
  // The reply's message: content, reasoning (nullopt when reasoning is
  // not split) and calls, ids drawn from call_id_seed.
  struct Message {
    std::string content;
    std::optional<std::string> reasoning;
    std::vector<serving::ToolCall> calls;
  };
  Message Read(std::string_view text, uint64_t call_id_seed) const;
  bool reads_tool_calls() const { return options_.tool_format.has_value(); }
  // The reply is harmony messages, read from its special tokens.
  bool harmony() const { return options_.harmony; }

 private:
  serving::ChatOutputOptions options_;
};

}  // namespace folio::python

#endif  // FOLIO_PYTHON_CHAT_PROMPT_H_
