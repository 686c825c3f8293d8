#include "folio/serving/harmony_output.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace folio::serving {
namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kBlank = " \t\r\n";
constexpr std::string_view kFunctions = "functions.";
constexpr std::string_view kEnds[] = {kHarmonyEnd, kHarmonyReturn, kHarmonyCall};

// The length of the longest proper prefix of `marker` that `s` ends with.
size_t PartialSuffix(std::string_view s, std::string_view marker) {
  for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k) {
    if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
  }
  return 0;
}

// The first end marker in s: its position and length (npos when none).
std::pair<size_t, size_t> FindEnd(std::string_view s) {
  std::pair<size_t, size_t> best{std::string_view::npos, 0};
  for (std::string_view end : kEnds) {
    const size_t p = s.find(end);
    if (p < best.first) best = {p, end.size()};
  }
  return best;
}

// A call's arguments as compact JSON, or nullopt when the text is not a
// JSON object (blank text is {}).
std::optional<std::string> CallArguments(std::string_view text) {
  if (text.find_first_not_of(kBlank) == std::string_view::npos) return "{}";
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

HarmonyHeader ParseHarmonyHeader(std::string_view text, bool has_role) {
  // Words are split at blanks and at the markers; a marker names what the
  // word after it is.
  HarmonyHeader h;
  std::string* next = nullptr;  // the field the next word fills
  bool first = true;
  size_t i = 0;
  while (i < text.size()) {
    if (kBlank.find(text[i]) != std::string_view::npos) {
      ++i;
      continue;
    }
    if (text.substr(i).starts_with(kHarmonyChannel)) {
      next = &h.channel;
      i += kHarmonyChannel.size();
      first = false;
      continue;
    }
    if (text.substr(i).starts_with(kHarmonyConstrain)) {
      next = &h.content_type;
      i += kHarmonyConstrain.size();
      first = false;
      continue;
    }
    size_t end = i;
    while (end < text.size() && kBlank.find(text[end]) == std::string_view::npos &&
           !text.substr(end).starts_with(kHarmonyChannel) &&
           !text.substr(end).starts_with(kHarmonyConstrain)) {
      ++end;
    }
    const std::string_view word = text.substr(i, end - i);
    i = end;
    if (next != nullptr) {
      *next = std::string(word);
      next = nullptr;
    } else if (first && has_role) {
      h.role = std::string(word);
    } else if (word.starts_with("to=")) {
      h.recipient = std::string(word.substr(3));
    } else if (h.content_type.empty()) {
      h.content_type = std::string(word);
    }
    first = false;
  }
  return h;
}

HarmonyOutputParser::HarmonyOutputParser(const ChatOutputOptions& options) : o_(options) {}

ChatDelta HarmonyOutputParser::Feed(std::string_view text) {
  ChatDelta out;
  held_ += text;
  Run(/*final=*/false, out);
  return out;
}

ChatDelta HarmonyOutputParser::Finish() {
  ChatDelta out;
  Run(/*final=*/true, out);
  return out;
}

void HarmonyOutputParser::Emit(Field field, std::string_view text, ChatDelta& out) {
  if (text.empty()) return;
  if (field == Field::kReasoning && !o_.reasoning) field = Field::kContent;
  bool& written = field == Field::kReasoning ? reasoning_written_ : content_written_;
  std::string& to = field == Field::kReasoning ? out.reasoning : out.content;
  if (written && !message_wrote_) to += '\n';
  to += text;
  written = true;
  message_wrote_ = true;
}

void HarmonyOutputParser::StartMessage(const HarmonyHeader& h) {
  message_wrote_ = false;
  call_text_.clear();
  call_name_.clear();
  if (!h.recipient.empty()) {
    if (o_.tool_format == ToolCallFormat::kHarmony && h.recipient.starts_with(kFunctions)) {
      field_ = Field::kCall;
      call_name_ = h.recipient.substr(kFunctions.size());
    } else {
      field_ = Field::kReasoning;
    }
  } else if (h.channel == "analysis") {
    field_ = Field::kReasoning;
  } else {
    field_ = Field::kContent;
  }
}

void HarmonyOutputParser::Text(std::string_view text, ChatDelta& out) {
  if (field_ == Field::kCall) {
    call_text_ += text;
  } else {
    Emit(field_, text, out);
  }
}

void HarmonyOutputParser::EndMessage(ChatDelta& out) {
  if (field_ != Field::kCall) return;
  std::optional<std::string> arguments = CallArguments(call_text_);
  if (call_name_.empty() || !arguments) {
    Emit(Field::kContent, call_text_, out);
    return;
  }
  if (!o_.parallel_tool_calls && num_calls_ > 0) return;
  ToolCall call;
  call.id = ToolCallId(o_.call_id_seed, num_calls_++);
  call.name = std::move(call_name_);
  call.arguments = std::move(*arguments);
  out.calls.push_back(std::move(call));
}

void HarmonyOutputParser::Run(bool final, ChatDelta& out) {
  for (;;) {
    switch (phase_) {
      case Phase::kHeader: {
        const size_t p = held_.find(kHarmonyMessage);
        if (p != std::string::npos && p <= kMaxHarmonyHeaderBytes) {
          StartMessage(ParseHarmonyHeader(std::string_view(held_).substr(0, p), has_role_));
          held_.erase(0, p + kHarmonyMessage.size());
          phase_ = Phase::kBody;
          break;
        }
        const bool too_long = p != std::string::npos ||
                              held_.size() >= kMaxHarmonyHeaderBytes + kHarmonyMessage.size();
        if (!too_long && !final) return;
        if (!too_long && (has_role_ || held_.find(kHarmonyChannel) != std::string::npos ||
                          held_.find(kHarmonyConstrain) != std::string::npos)) {
          // A header the end of the reply cut off (max_tokens): no text.
          held_.clear();
          return;
        }
        // Not a header: the rest of the reply is content as written.
        if (has_role_) held_.insert(0, kHarmonyStart);
        message_wrote_ = true;  // as written: no "\n" before it
        phase_ = Phase::kRaw;
        break;
      }
      case Phase::kBody: {
        const auto [p, n] = FindEnd(held_);
        if (p != std::string::npos) {
          Text(std::string_view(held_).substr(0, p), out);
          held_.erase(0, p + n);
          EndMessage(out);
          phase_ = Phase::kBetween;
          break;
        }
        size_t keep = 0;
        if (!final) {
          for (std::string_view end : kEnds) keep = std::max(keep, PartialSuffix(held_, end));
        }
        Text(std::string_view(held_).substr(0, held_.size() - keep), out);
        held_.erase(0, held_.size() - keep);
        if (!final) return;
        EndMessage(out);
        phase_ = Phase::kBetween;
        return;
      }
      case Phase::kBetween: {
        if (held_.starts_with(kHarmonyStart)) {
          held_.erase(0, kHarmonyStart.size());
          has_role_ = true;
          phase_ = Phase::kHeader;
          break;
        }
        if (held_.empty() || (!final && kHarmonyStart.starts_with(held_))) return;
        message_wrote_ = true;
        phase_ = Phase::kRaw;
        break;
      }
      case Phase::kRaw: {
        Emit(Field::kContent, held_, out);
        held_.clear();
        return;
      }
    }
  }
}

}  // namespace folio::serving
