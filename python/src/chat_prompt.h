// Chat messages -> a prompt for the Python package's LLM.chat, in one
// place: when folio has a Jinja engine (src/chat), this file is what
// changes, and nothing above it.
//
// Today it is the server's choice (server/chat_template.h, as `folio serve`
// makes it in src/cli/serve_command.cc): a byte-level model renders the
// plain template and stops on nothing extra; a model whose Jinja source is
// recognised as ChatML renders ChatML and stops at the end-of-turn marker
// when its vocabulary has it (plain otherwise).
#ifndef FOLIO_PYTHON_CHAT_PROMPT_H_
#define FOLIO_PYTHON_CHAT_PROMPT_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "folio/server/chat_template.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::python {

class ChatPrompt {
 public:
  // jinja_source: the model file's chat template (may be empty).
  static ChatPrompt ForModel(const tokenizer::Tokenizer& tokenizer, bool byte_level,
                             std::string_view jinja_source);

  // The prompt text for messages, ending where the assistant's reply
  // begins.
  std::string Render(std::span<const server::ChatMessage> messages) const;
  // Token ids that end an assistant turn (added to a chat request's stops).
  const std::vector<int32_t>& stop_token_ids() const { return stop_token_ids_; }
  // "plain" or "chatml".
  std::string_view name() const { return server::ChatTemplateName(template_); }

 private:
  server::ChatTemplate template_ = server::ChatTemplate::kPlain;
  std::vector<int32_t> stop_token_ids_;
};

}  // namespace folio::python

#endif  // FOLIO_PYTHON_CHAT_PROMPT_H_
