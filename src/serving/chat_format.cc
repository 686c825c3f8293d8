#include "folio/serving/chat_format.h"

#include <algorithm>
#include <span>

#include "folio/core/str_cat.h"

namespace folio::serving {
namespace {

constexpr std::string_view kChatML =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
constexpr std::string_view kPlain =
    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}";

// Markers that end a turn in the common families' templates.
constexpr std::string_view kEndOfTurnMarkers[] = {
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<end_of_turn>",
    "<|end|>",
    "<|endoftext|>",
    "</s>",
    "<|END_OF_TURN_TOKEN|>",
    "<\xef\xbd\x9c"
    "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"};

// A harmony reply's ends: the final answer's and a tool call's (its
// messages end with <|end|>, which is no stop).
constexpr std::string_view kHarmonyStops[] = {"<|return|>", "<|call|>"};

}  // namespace

std::string_view ChatFormatSourceName(ChatFormatSource source) {
  switch (source) {
    case ChatFormatSource::kModel:
      return "model";
    case ChatFormatSource::kFile:
      return "file";
    case ChatFormatSource::kChatML:
      return "chatml";
    case ChatFormatSource::kPlain:
      return "plain";
    case ChatFormatSource::kNone:
      return "none";
  }
  return "unknown";
}

Result<ChatFormat> ChatFormat::Create(std::string_view model_source,
                                      const std::optional<std::string>& file_source,
                                      const tokenizer::Tokenizer* tokenizer) {
  ChatFormatSource source;
  std::string_view text;
  if (file_source) {
    source = ChatFormatSource::kFile;
    text = *file_source;
  } else if (!model_source.empty() && tokenizer != nullptr) {
    source = ChatFormatSource::kModel;
    text = model_source;
  } else if (tokenizer != nullptr && tokenizer->TokenId("<|im_start|>") &&
             tokenizer->TokenId("<|im_end|>")) {
    source = ChatFormatSource::kChatML;
    text = kChatML;
  } else if (tokenizer == nullptr) {
    source = ChatFormatSource::kPlain;
    text = kPlain;
  } else {
    source = ChatFormatSource::kNone;  // Render refuses; the empty template is never run
  }
  Result<chat::Template> t = chat::Template::Parse(text);
  if (!t) {
    return t.error().WithContext(source == ChatFormatSource::kFile ? "--chat-template"
                                                                   : "the model's chat template");
  }
  ChatFormat f(std::move(*t), source);
  f.tool_call_format_ = DetectToolCallFormat(text);
  f.writes_reasoning_ = text.find("</think>") != std::string_view::npos;
  if (tokenizer != nullptr) {
    if (tokenizer->bos_id()) f.bos_token_ = tokenizer->TokenText(*tokenizer->bos_id());
    if (tokenizer->eos_id()) f.eos_token_ = tokenizer->TokenText(*tokenizer->eos_id());
    const std::span<const std::string_view> markers =
        f.harmony() ? std::span<const std::string_view>(kHarmonyStops) : kEndOfTurnMarkers;
    for (std::string_view marker : markers) {
      if (!f.harmony() && text.find(marker) == std::string_view::npos) continue;
      const std::optional<int32_t> id = tokenizer->TokenId(marker);
      if (id && id != tokenizer->eos_id() &&
          std::find(f.end_of_turn_ids_.begin(), f.end_of_turn_ids_.end(), *id) ==
              f.end_of_turn_ids_.end()) {
        f.end_of_turn_ids_.push_back(*id);
      }
    }
  }
  return f;
}

Status ChatFormat::CanChat() const {
  if (source_ != ChatFormatSource::kNone) return Status::Ok();
  return Status::InvalidArgument(
      "the model ships no chat template and its vocabulary has no ChatML markers, so folio "
      "cannot know how it expects a conversation (a base model?); give a template "
      "(--chat-template FILE; Python: chat_template=...) or send a completion");
}

Result<RenderedChat> ChatFormat::Render(const nlohmann::ordered_json& messages,
                                        bool add_generation_prompt,
                                        const nlohmann::ordered_json& extra) const {
  FOLIO_RETURN_IF_ERROR(CanChat());
  // The variables apply_chat_template passes, in its order; extra keys
  // (tools, documents, ...) override.
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  vars["messages"] = messages;
  vars["tools"] = nullptr;
  vars["documents"] = nullptr;
  vars["add_generation_prompt"] = add_generation_prompt;
  vars["bos_token"] = bos_token_;
  vars["eos_token"] = eos_token_;
  if (extra.is_object()) {
    for (auto it = extra.begin(); it != extra.end(); ++it) vars[it.key()] = it.value();
  }
  FOLIO_ASSIGN_OR_RETURN(std::string text, template_.Render(vars));
  const bool own = source_ == ChatFormatSource::kModel || source_ == ChatFormatSource::kFile;
  return RenderedChat{std::move(text), /*add_special_tokens=*/!own};
}

}  // namespace folio::serving
