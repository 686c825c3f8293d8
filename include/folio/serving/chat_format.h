// How a served model turns a conversation into prompt text: its own chat
// template (the Jinja source a model file ships), a template file given
// with --chat-template, or, only when the model ships none, ChatML (when
// its vocabulary has ChatML's markers). folio's byte-level built-in models
// get folio's documented plain format. A real model with neither (a base
// model's GGUF) has no chat format ("none"): it serves completions, and a
// conversation is refused naming --chat-template, rather than written in a
// format the model never saw (transformers refuses the same since 4.44).
// Templates render through folio::chat::Template, exactly as Hugging
// Face's apply_chat_template renders them with jinja2.
//
// The fallbacks, written as templates too:
//   chatml  <|im_start|>{role}\n{content}<|im_end|>\n per message, then
//           <|im_start|>assistant\n
//   plain   {role}: {content}\n per message, then assistant:
#ifndef FOLIO_SERVING_CHAT_FORMAT_H_
#define FOLIO_SERVING_CHAT_FORMAT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "folio/chat/template.h"
#include "folio/core/status.h"
#include "folio/serving/tool_calls.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::serving {

enum class ChatFormatSource { kModel, kFile, kChatML, kPlain, kNone };

// "model", "file", "chatml", "plain", "none".
std::string_view ChatFormatSourceName(ChatFormatSource source);

struct RenderedChat {
  std::string text;
  // Encode with the tokenizer's own special tokens (bos, eos): false for a
  // model's or a file's template, which writes them as text itself.
  bool add_special_tokens = false;
};

class ChatFormat {
 public:
  // model_source: the model file's template ("" when it has none);
  // file_source: --chat-template's text, which wins when given. tokenizer:
  // the model's (bos/eos texts, end-of-turn ids); nullptr for folio's
  // byte-level models, which get the plain format. A template that does
  // not parse is the parse error (line:column, the construct), prefixed
  // with where the template came from: templates are checked at load, not
  // at the first request.
  static Result<ChatFormat> Create(std::string_view model_source,
                                   const std::optional<std::string>& file_source,
                                   const tokenizer::Tokenizer* tokenizer);

  // messages: a JSON array of message objects ({"role", "content", ...},
  // content a string; other keys are passed on as given). extra: more
  // template variables (tools, documents, anything else), an object or
  // null. Errors: the template's own (raise_exception gives
  // kInvalidArgument "chat template raised: ..."), a render limit; source
  // "none": kInvalidArgument naming --chat-template.
  Result<RenderedChat> Render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                              const nlohmann::ordered_json& extra = nullptr) const;

  ChatFormatSource source() const { return source_; }
  // Ok, or for source "none" the InvalidArgument Render gives: for a front
  // end whose only job is chat to refuse at start.
  Status CanChat() const;
  // Token ids that end an assistant turn besides eos: the end-of-turn
  // markers (<|im_end|>, <|eot_id|>, <end_of_turn>, <|end|>, ...) that the
  // template writes and the vocabulary holds as one token. A harmony
  // template's are <|return|> and <|call|> (openai-harmony's
  // stop_tokens_for_assistant_actions), never <|end|>, which ends each of
  // a reply's messages.
  const std::vector<int32_t>& end_of_turn_ids() const { return end_of_turn_ids_; }
  // The call format the template's markers name (DetectToolCallFormat);
  // nullopt for a template that shows no tools in a known way.
  std::optional<ToolCallFormat> tool_call_format() const { return tool_call_format_; }
  // Whether the template writes reasoning blocks (it mentions </think>).
  bool writes_reasoning() const { return writes_reasoning_; }
  // Whether the template is harmony's (gpt-oss): it writes <|channel|>, so
  // replies are harmony messages (serving/harmony_output.h). The
  // vocabulary alone does not make a format harmony: without the template
  // the prompt is not harmony's.
  bool harmony() const { return tool_call_format_ == ToolCallFormat::kHarmony; }

 private:
  ChatFormat(chat::Template t, ChatFormatSource source)
      : template_(std::move(t)), source_(source) {}

  chat::Template template_;
  ChatFormatSource source_;
  std::string bos_token_, eos_token_;
  std::vector<int32_t> end_of_turn_ids_;
  std::optional<ToolCallFormat> tool_call_format_;
  bool writes_reasoning_ = false;
};

}  // namespace folio::serving

#endif  // FOLIO_SERVING_CHAT_FORMAT_H_
