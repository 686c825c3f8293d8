#include "folio/serving/chat_output.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "folio/core/splitmix64.h"
#include "folio/serving/harmony_output.h"

namespace folio::serving {
namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kBlank = " \t\r\n";
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

// How a format marks its calls.
struct Markers {
  std::string_view open;   // the marker that starts a call region
  std::string_view close;  // ends a block (empty: the region runs to the end)
  char bare_start;         // a reply starting with this is a bare region ('\0': none)
};

Markers MarkersOf(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kHermes:
      return {"<tool_call>", "</tool_call>", '\0'};
    case ToolCallFormat::kLlama3Json:
      return {"<|python_tag|>", "", '{'};
    case ToolCallFormat::kMistral:
      return {"[TOOL_CALLS]", "", '['};
    case ToolCallFormat::kGeneric:
      return {"", "", '{'};  // no marker: only the bare reply
    case ToolCallFormat::kHarmony:
      break;  // HarmonyOutputParser reads it
  }
  return {"", "", '\0'};
}

// The length of the longest proper prefix of `marker` that `s` ends with:
// the text to hold back because the marker may be starting.
size_t PartialSuffix(std::string_view s, std::string_view marker) {
  for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k) {
    if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
  }
  return 0;
}

std::string_view Trim(std::string_view s) {
  const size_t a = s.find_first_not_of(kBlank);
  if (a == std::string_view::npos) return {};
  return s.substr(a, s.find_last_not_of(kBlank) - a + 1);
}

// The end (one past the closing bracket) of the JSON object or array that
// starts at s[begin], by bracket depth outside strings; npos when it does
// not close. Only the extent: nlohmann parses it.
size_t JsonValueEnd(std::string_view s, size_t begin) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::optional<json> ParseJson(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// One call object: {"name": string, "arguments" or "parameters": an object
// or its JSON text (absent: {})}. bare: the name must be one of names.
std::optional<ToolCall> CallFrom(const json& obj, bool bare,
                                 const std::vector<std::string>& names) {
  if (!obj.is_object()) return std::nullopt;
  auto name = obj.find("name");
  if (name == obj.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  ToolCall call;
  call.name = name->get<std::string>();
  if (bare && std::find(names.begin(), names.end(), call.name) == names.end()) return std::nullopt;
  auto args = obj.find("arguments");
  if (args == obj.end()) args = obj.find("parameters");
  json value = json::object();
  if (args != obj.end() && !args->is_null()) {
    if (args->is_string()) {
      std::optional<json> parsed = ParseJson(args->get_ref<const std::string&>());
      if (!parsed) return std::nullopt;
      value = std::move(*parsed);
    } else {
      value = *args;
    }
  }
  if (!value.is_object()) return std::nullopt;
  call.arguments = value.dump(-1, ' ', false, json::error_handler_t::replace);
  return call;
}

// The calls a region's text holds, or nullopt when it is not calls.
std::optional<std::vector<ToolCall>> ParseRegion(ToolCallFormat format, std::string_view body,
                                                 bool bare, const std::vector<std::string>& names) {
  std::vector<ToolCall> calls;
  switch (format) {
    case ToolCallFormat::kHermes: {
      std::optional<json> obj = ParseJson(Trim(body));
      if (!obj) return std::nullopt;
      std::optional<ToolCall> call = CallFrom(*obj, bare, names);
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
      break;
    }
    case ToolCallFormat::kLlama3Json: {
      // Objects joined by ";" (and blanks).
      size_t i = 0;
      for (;;) {
        i = body.find_first_not_of(kBlank, i);
        if (i == std::string_view::npos || body[i] != '{') return std::nullopt;
        const size_t end = JsonValueEnd(body, i);
        if (end == std::string_view::npos) return std::nullopt;
        std::optional<json> obj = ParseJson(body.substr(i, end - i));
        if (!obj) return std::nullopt;
        std::optional<ToolCall> call = CallFrom(*obj, bare, names);
        if (!call) return std::nullopt;
        calls.push_back(std::move(*call));
        i = body.find_first_not_of(kBlank, end);
        if (i == std::string_view::npos) break;
        if (body[i] != ';') return std::nullopt;
        ++i;
        if (body.find_first_not_of(kBlank, i) == std::string_view::npos) break;
      }
      break;
    }
    case ToolCallFormat::kMistral: {
      std::optional<json> array = ParseJson(Trim(body));
      if (!array || !array->is_array() || array->empty()) return std::nullopt;
      for (const json& obj : *array) {
        std::optional<ToolCall> call = CallFrom(obj, bare, names);
        if (!call) return std::nullopt;
        calls.push_back(std::move(*call));
      }
      break;
    }
    case ToolCallFormat::kGeneric: {
      // {"tool_calls": [call, ...]}, or {"tool_call": call}, nothing else.
      std::optional<json> obj = ParseJson(Trim(body));
      if (!obj || !obj->is_object() || obj->size() != 1) return std::nullopt;
      if (auto one = obj->find("tool_call"); one != obj->end()) {
        std::optional<ToolCall> call = CallFrom(*one, /*bare=*/true, names);
        if (!call) return std::nullopt;
        calls.push_back(std::move(*call));
        break;
      }
      auto array = obj->find("tool_calls");
      if (array == obj->end() || !array->is_array() || array->empty()) return std::nullopt;
      for (const json& c : *array) {
        std::optional<ToolCall> call = CallFrom(c, /*bare=*/true, names);
        if (!call) return std::nullopt;
        calls.push_back(std::move(*call));
      }
      break;
    }
    case ToolCallFormat::kHarmony:
      return std::nullopt;  // HarmonyOutputParser reads it
  }
  return calls;
}

}  // namespace

void ChatDelta::Append(ChatDelta other) {
  reasoning += other.reasoning;
  content += other.content;
  for (ToolCall& c : other.calls) calls.push_back(std::move(c));
}

bool PromptOpensReasoning(std::string_view prompt) {
  const size_t last = prompt.find_last_not_of(kBlank);
  return last != std::string_view::npos && prompt.substr(0, last + 1).ends_with(kThinkOpen);
}

std::string ToolCallId(uint64_t seed, uint64_t index) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  SplitMix64 rng(seed ^ SplitMix64(index).NextU64());
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng.NextU64() % kAlphabet.size()];
  return id;
}

ChatOutputParser::ChatOutputParser(ChatOutputOptions options)
    : o_(std::move(options)),
      phase_(!o_.reasoning            ? Phase::kBody
             : o_.starts_in_reasoning ? Phase::kReasoning
                                      : Phase::kReasoningStart) {
  if (o_.harmony) harmony_ = Harmony(o_);
}

ChatOutputParser::Harmony::Harmony() = default;
ChatOutputParser::Harmony::Harmony(const ChatOutputOptions& options)
    : parser_(std::make_unique<HarmonyOutputParser>(options)) {}
ChatOutputParser::Harmony::Harmony(const Harmony& other)
    : parser_(other.parser_ ? std::make_unique<HarmonyOutputParser>(*other.parser_) : nullptr) {}
ChatOutputParser::Harmony& ChatOutputParser::Harmony::operator=(const Harmony& other) {
  if (this != &other) *this = Harmony(other);
  return *this;
}
ChatOutputParser::Harmony::Harmony(Harmony&&) noexcept = default;
ChatOutputParser::Harmony& ChatOutputParser::Harmony::operator=(Harmony&&) noexcept = default;
ChatOutputParser::Harmony::~Harmony() = default;

uint64_t ChatOutputParser::num_calls() const {
  return harmony_.get() != nullptr ? harmony_.get()->num_calls() : num_calls_;
}

ChatDelta ChatOutputParser::Feed(std::string_view text) {
  if (HarmonyOutputParser* h = harmony_.get()) return h->Feed(text);
  ChatDelta out;
  held_ += text;
  Run(/*final=*/false, out);
  return out;
}

ChatDelta ChatOutputParser::Finish() {
  if (HarmonyOutputParser* h = harmony_.get()) return h->Finish();
  ChatDelta out;
  Run(/*final=*/true, out);
  const bool keep_blank = num_parsed_ == 0 && !(after_reasoning_ && !content_emitted_);
  if (keep_blank) out.content += pending_blank_;
  pending_blank_.clear();
  return out;
}

void ChatOutputParser::EmitContent(std::string_view text, ChatDelta& out) {
  if (after_reasoning_ && !content_emitted_) {
    // Blanks between </think> and the answer are not part of it.
    pending_blank_.clear();
    const size_t first = text.find_first_not_of(kBlank);
    text = first == std::string_view::npos ? std::string_view() : text.substr(first);
  }
  if (text.empty()) return;
  const size_t last = text.find_last_not_of(kBlank);
  if (last == std::string_view::npos) {
    pending_blank_ += text;
    return;
  }
  out.content += pending_blank_;
  out.content += text.substr(0, last + 1);
  pending_blank_ = std::string(text.substr(last + 1));
  content_emitted_ = true;
}

void ChatOutputParser::EndRegion(std::string_view body, std::string_view raw, bool bare,
                                 ChatDelta& out) {
  if (*o_.tool_format == ToolCallFormat::kGeneric) {
    // The answer without a tool: {"response": text}.
    std::optional<json> obj = ParseJson(Trim(body));
    if (obj && obj->is_object() && obj->size() == 1 && obj->contains("response") &&
        (*obj)["response"].is_string()) {
      pending_blank_.clear();  // the blanks before the JSON are not the answer's
      EmitContent((*obj)["response"].get_ref<const std::string&>(), out);
      return;
    }
  }
  std::optional<std::vector<ToolCall>> calls =
      ParseRegion(*o_.tool_format, body, bare, o_.tool_names);
  if (!calls) {
    EmitContent(raw, out);
    return;
  }
  pending_blank_.clear();  // blanks before a call are not content
  for (ToolCall& call : *calls) {
    ++num_parsed_;
    if (!o_.parallel_tool_calls && num_calls_ > 0) continue;
    call.id = ToolCallId(o_.call_id_seed, num_calls_++);
    out.calls.push_back(std::move(call));
  }
}

void ChatOutputParser::Run(bool final, ChatDelta& out) {
  for (;;) {
    switch (phase_) {
      case Phase::kReasoningStart: {
        const size_t k = held_.find_first_not_of(kBlank);
        if (k == std::string::npos) {
          if (!final) return;
          phase_ = Phase::kBody;
          break;
        }
        const std::string_view rest = std::string_view(held_).substr(k);
        if (rest.starts_with(kThinkOpen)) {
          held_.erase(0, k + kThinkOpen.size());
          phase_ = Phase::kReasoning;
          break;
        }
        if (!final && kThinkOpen.starts_with(rest)) return;
        phase_ = Phase::kBody;
        break;
      }
      case Phase::kReasoning: {
        const size_t p = held_.find(kThinkClose);
        if (p != std::string::npos) {
          out.reasoning.append(held_, 0, p);
          held_.erase(0, p + kThinkClose.size());
          after_reasoning_ = true;
          phase_ = Phase::kBody;
          break;
        }
        const size_t settled = held_.size() - (final ? 0 : PartialSuffix(held_, kThinkClose));
        out.reasoning.append(held_, 0, settled);
        held_.erase(0, settled);
        return;
      }
      case Phase::kBody: {
        if (!o_.tool_format) {
          EmitContent(held_, out);
          held_.clear();
          return;
        }
        const Markers m = MarkersOf(*o_.tool_format);
        if (!body_started_ && m.bare_start != '\0') {
          const size_t k = held_.find_first_not_of(kBlank);
          if (k == std::string::npos) {
            EmitContent(held_, out);
            held_.clear();
            return;
          }
          const std::string_view rest = std::string_view(held_).substr(k);
          // "[TOOL_CALLS]" starts with mistral's bare "[": wait until the
          // marker is told apart.
          if (!final && rest.size() < m.open.size() && m.open.starts_with(rest)) return;
          body_started_ = true;
          if (held_[k] == m.bare_start && (m.open.empty() || !rest.starts_with(m.open))) {
            EmitContent(std::string_view(held_).substr(0, k), out);
            held_.erase(0, k);
            region_raw_.clear();
            region_bare_ = true;
            phase_ = Phase::kToEnd;
            break;
          }
        }
        const size_t p = m.open.empty() ? std::string::npos : held_.find(m.open);
        if (p != std::string::npos) {
          EmitContent(std::string_view(held_).substr(0, p), out);
          held_.erase(0, p + m.open.size());
          region_raw_ = std::string(m.open);
          region_bare_ = false;
          phase_ = m.close.empty() ? Phase::kToEnd : Phase::kBlock;
          break;
        }
        const size_t settled =
            held_.size() - (final || m.open.empty() ? 0 : PartialSuffix(held_, m.open));
        EmitContent(std::string_view(held_).substr(0, settled), out);
        held_.erase(0, settled);
        return;
      }
      case Phase::kBlock: {
        const std::string_view close = MarkersOf(*o_.tool_format).close;
        const size_t p = held_.find(close);
        if (p == std::string::npos && !final) return;
        const std::string body = held_.substr(0, p);
        const std::string raw =
            region_raw_ +
            held_.substr(0, p == std::string::npos ? std::string::npos : p + close.size());
        held_.erase(0, p == std::string::npos ? std::string::npos : p + close.size());
        EndRegion(body, raw, /*bare=*/false, out);
        phase_ = Phase::kBody;
        break;
      }
      case Phase::kToEnd: {
        if (!final) return;
        const std::string body = std::move(held_);
        held_.clear();
        EndRegion(body, region_raw_ + body, region_bare_, out);
        phase_ = Phase::kBody;
        break;
      }
    }
  }
}

}  // namespace folio::serving
