#include "folio/serving/tool_calls.h"

#include <set>

#include "folio/core/json_reader.h"
#include "folio/core/str_cat.h"

namespace folio::serving {
namespace {

using json = nlohmann::ordered_json;

bool ValidFunctionName(std::string_view name) {
  if (name.empty() || name.size() > kMaxFunctionNameBytes) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::optional<FieldError> ParseTool(const json& tool, size_t i, std::set<std::string>& seen,
                                    FunctionTool& out) {
  const std::string at = StrCat("tools[", i, "]");
  if (!tool.is_object()) return FieldError::WrongType(at, "an object", tool);
  for (const auto& [key, value] : tool.items()) {
    if (key != "type" && key != "function") {
      return FieldError{at, StrCat("'", at, "' has no field ", Quote(key), " (type, function)")};
    }
  }
  auto type = tool.find("type");
  if (type == tool.end() || !type->is_string() || *type != "function") {
    return FieldError{StrCat(at, ".type"), StrCat("'", at, ".type' must be \"function\"")};
  }
  const std::string fat = at + ".function";
  auto fn = tool.find("function");
  if (fn == tool.end()) return FieldError{fat, StrCat("'", fat, "' is required")};
  if (!fn->is_object()) return FieldError::WrongType(fat, "an object", *fn);
  for (const auto& [key, value] : fn->items()) {
    if (key != "name" && key != "description" && key != "parameters" && key != "strict") {
      return FieldError{fat, StrCat("'", fat, "' has no field ", Quote(key),
                                    " (name, description, parameters, strict)")};
    }
  }
  auto name = fn->find("name");
  if (name == fn->end() || !name->is_string()) {
    return FieldError{fat + ".name", StrCat("'", fat, ".name' (a string) is required")};
  }
  out.name = name->get<std::string>();
  if (!ValidFunctionName(out.name)) {
    return FieldError{fat + ".name", StrCat("'", fat, ".name' ", Quote(out.name), " must be 1 to ",
                                            kMaxFunctionNameBytes, " of a-z, A-Z, 0-9, _ and -")};
  }
  if (!seen.insert(out.name).second) {
    return FieldError{fat + ".name", StrCat("two tools are named ", Quote(out.name))};
  }
  if (auto d = fn->find("description"); d != fn->end() && !d->is_null() && !d->is_string()) {
    return FieldError::WrongType(fat + ".description", "a string", *d);
  }
  auto params = fn->find("parameters");
  if (params == fn->end() || params->is_null()) {
    out.parameters =
        json{{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}};
  } else if (!params->is_object()) {
    return FieldError::WrongType(fat + ".parameters", "a JSON Schema object", *params);
  } else {
    out.parameters = *params;
  }
  if (auto s = fn->find("strict"); s != fn->end() && !s->is_null()) {
    if (!s->is_boolean()) return FieldError::WrongType(fat + ".strict", "a boolean", *s);
    out.strict = s->get<bool>();
  }
  return std::nullopt;
}

}  // namespace

FieldError FieldError::WrongType(std::string field, std::string_view expected, const json& got) {
  std::string message = WrongTypeMessage(field, expected, got);
  return FieldError{std::move(field), std::move(message)};
}

std::string_view ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3Json:
      return "llama3_json";
    case ToolCallFormat::kMistral:
      return "mistral";
    case ToolCallFormat::kGeneric:
      return "generic";
    case ToolCallFormat::kHarmony:
      return "harmony";
  }
  return "?";
}

std::optional<ToolCallFormat> ToolCallFormatFromName(std::string_view name) {
  for (ToolCallFormat f : kToolCallFormats) {
    if (ToolCallFormatName(f) == name) return f;
  }
  return std::nullopt;
}

std::optional<ToolCallFormat> DetectToolCallFormat(std::string_view source) {
  const auto has = [source](std::string_view marker) {
    return source.find(marker) != std::string_view::npos;
  };
  if (has("<|channel|>")) return ToolCallFormat::kHarmony;
  if (has("<tool_call>")) return ToolCallFormat::kHermes;
  if (has("[TOOL_CALLS]")) return ToolCallFormat::kMistral;
  if (has("<|python_tag|>") || (has("<|start_header_id|>") && has("ipython"))) {
    return ToolCallFormat::kLlama3Json;
  }
  if (!has("tools")) return ToolCallFormat::kGeneric;
  return std::nullopt;
}

json GenericToolMessages(const json& messages, const ChatTools& tools) {
  json described = json::array();
  for (size_t i = 0; i < tools.functions.size(); ++i) {
    const json& fn = tools.definitions[i]["function"];
    json d = json::object();
    d["name"] = fn["name"];
    if (auto it = fn.find("description"); it != fn.end() && !it->is_null()) {
      d["description"] = *it;
    }
    d["parameters"] = tools.functions[i].parameters;
    described.push_back(std::move(d));
  }
  const std::string instructions =
      StrCat("You can call these tools (each one's arguments are described by a JSON Schema):\n",
             described.dump(-1, ' ', false, json::error_handler_t::replace),
             "\n\nTo call tools, reply with only a JSON object: {\"tool_calls\": [{\"name\": "
             "\"<tool name>\", \"arguments\": {<the arguments>}}]}",
             tools.parallel ? " (one entry per call)" : " (one call)",
             ". To answer without a tool, reply with only {\"response\": \"<your answer>\"}. "
             "Tool results come back as {\"tool_responses\": [...]}.");
  json out = json::array();
  const bool has_system = !messages.empty() && messages[0].value("role", "") == "system" &&
                          messages[0].contains("content") && messages[0]["content"].is_string();
  if (!has_system) out.push_back({{"role", "system"}, {"content", instructions}});
  json responses = json::array();  // a run of tool messages
  const auto flush = [&] {
    if (responses.empty()) return;
    out.push_back({{"role", "user"},
                   {"content", json{{"tool_responses", std::move(responses)}}.dump(
                                   -1, ' ', false, json::error_handler_t::replace)}});
    responses = json::array();
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string role = m.value("role", "");
    if (role == "tool") {
      responses.push_back({{"tool_call_id", m.value("tool_call_id", "")},
                           {"content", m.contains("content") ? m["content"] : json("")}});
      continue;
    }
    flush();
    json copy = m;
    if (i == 0 && has_system) {
      copy["content"] = StrCat(m["content"].get<std::string>(), "\n\n", instructions);
    } else if (role == "assistant" && m.contains("tool_calls")) {
      json calls = json::array();
      for (const json& c : m["tool_calls"]) {
        const json& f = c.contains("function") ? c["function"] : c;
        calls.push_back({{"name", f.value("name", "")},
                         {"arguments", f.contains("arguments") ? f["arguments"] : json::object()}});
      }
      std::string text = json{{"tool_calls", std::move(calls)}}.dump(
          -1, ' ', false, json::error_handler_t::replace);
      if (copy.contains("content") && copy["content"].is_string() &&
          !copy["content"].get_ref<const std::string&>().empty()) {
        text = StrCat(copy["content"].get<std::string>(), "\n", text);
      }
      copy["content"] = std::move(text);
      copy.erase("tool_calls");
    }
    out.push_back(std::move(copy));
  }
  flush();
  return out;
}

std::variant<ChatTools, FieldError> ParseChatTools(const json* tools, const json* tool_choice,
                                                   const json* parallel_tool_calls) {
  ChatTools out;
  if (tools != nullptr && !tools->is_null()) {
    if (!tools->is_array()) return FieldError::WrongType("tools", "an array", *tools);
    if (tools->size() > kMaxTools) {
      return FieldError{"tools",
                        StrCat("'tools' has ", tools->size(), " tools; at most ", kMaxTools)};
    }
    std::set<std::string> seen;
    for (size_t i = 0; i < tools->size(); ++i) {
      FunctionTool f;
      if (std::optional<FieldError> e = ParseTool((*tools)[i], i, seen, f)) return std::move(*e);
      out.functions.push_back(std::move(f));
    }
    out.definitions = *tools;
  }
  if (parallel_tool_calls != nullptr && !parallel_tool_calls->is_null()) {
    if (!parallel_tool_calls->is_boolean()) {
      return FieldError::WrongType("parallel_tool_calls", "a boolean", *parallel_tool_calls);
    }
    out.parallel = parallel_tool_calls->get<bool>();
  }
  out.choice = out.functions.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (tool_choice != nullptr && !tool_choice->is_null()) {
    const json& c = *tool_choice;
    if (c.is_string()) {
      const std::string& s = c.get_ref<const std::string&>();
      if (s == "none") {
        out.choice = ToolChoice::kNone;
      } else if (s == "auto") {
        out.choice = out.functions.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
      } else if (s == "required") {
        out.choice = ToolChoice::kRequired;
      } else {
        return FieldError{"tool_choice",
                          StrCat("'tool_choice' ", Quote(s),
                                 " is not one of \"none\", \"auto\", \"required\" or "
                                 "{\"type\": \"function\", \"function\": {\"name\": ...}}")};
      }
    } else if (c.is_object()) {
      auto type = c.find("type");
      auto fn = c.find("function");
      const json* name = nullptr;
      if (fn != c.end() && fn->is_object()) {
        if (auto n = fn->find("name"); n != fn->end() && n->is_string()) name = &*n;
      }
      if (type == c.end() || *type != "function" || name == nullptr || c.size() != 2 ||
          fn->size() != 1) {
        return FieldError{"tool_choice",
                          "'tool_choice' as an object must be {\"type\": \"function\", "
                          "\"function\": {\"name\": ...}}"};
      }
      out.choice = ToolChoice::kNamed;
      out.named = name->get<std::string>();
    } else {
      return FieldError::WrongType("tool_choice", "a string or an object", c);
    }
  }
  if (out.forced() && out.functions.empty()) {
    return FieldError{"tool_choice", "'tool_choice' requires a call but 'tools' is empty"};
  }
  if (out.choice == ToolChoice::kNamed) {
    bool found = false;
    for (const FunctionTool& f : out.functions) found = found || f.name == out.named;
    if (!found) {
      return FieldError{"tool_choice", StrCat("'tool_choice' names the function ", Quote(out.named),
                                              ", which is not in 'tools'")};
    }
  }
  return out;
}

}  // namespace folio::serving
