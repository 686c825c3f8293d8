#include "folio/serving/chat_request.h"

#include "folio/core/json_reader.h"
#include "folio/core/str_cat.h"

namespace folio::serving {
namespace {

using json = nlohmann::ordered_json;

// A message's content as one string: a string, or text parts joined.
std::optional<FieldError> ContentText(const json& content, const std::string& at,
                                      std::string& out) {
  if (content.is_string()) {
    out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array())
    return FieldError::WrongType(at, "a string or an array of text parts", content);
  for (const json& part : content) {
    auto text = part.is_object() ? part.find("text") : part.end();
    auto type = part.is_object() ? part.find("type") : part.end();
    if (!part.is_object() || type == part.end() || *type != "text" || text == part.end() ||
        !text->is_string()) {
      return FieldError{at, "content parts must be {\"type\": \"text\", \"text\": string}"};
    }
    out += text->get<std::string>();
  }
  return std::nullopt;
}

// An assistant message's tool_calls, with JSON-text arguments parsed.
std::optional<FieldError> ToolCalls(const json& calls, const std::string& at, json& out) {
  if (!calls.is_array()) return FieldError::WrongType(at, "an array", calls);
  out = json::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    const std::string cat = StrCat(at, "[", j, "]");
    const json& call = calls[j];
    if (!call.is_object()) return FieldError::WrongType(cat, "an object", call);
    if (const json* id = FindField(call, "id"); id != nullptr && !id->is_string()) {
      return FieldError::WrongType(cat + ".id", "a string", *id);
    }
    auto type = call.find("type");
    if (type != call.end() && !type->is_null() && *type != "function") {
      return FieldError{cat + ".type", StrCat("'", cat, ".type' must be \"function\"")};
    }
    const json* fn = FindField(call, "function");
    if (fn == nullptr || !fn->is_object()) {
      return FieldError{cat + ".function",
                        StrCat("'", cat, ".function' must be {\"name\", \"arguments\"}")};
    }
    const json* name = FindField(*fn, "name");
    if (name == nullptr || !name->is_string()) {
      return FieldError{cat + ".function.name",
                        StrCat("'", cat, ".function.name' must be a string")};
    }
    json copy = call;
    const std::string aat = cat + ".function.arguments";
    const json* args = FindField(*fn, "arguments");
    if (args == nullptr) return FieldError{aat, StrCat("'", aat, "' is required")};
    if (args->is_string()) {
      json parsed =
          json::parse(args->get_ref<const std::string&>(), nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded() || !parsed.is_object()) {
        return FieldError{aat, StrCat("'", aat, "' must be the JSON text of an object, got ",
                                      Quote(args->get_ref<const std::string&>()))};
      }
      copy["function"]["arguments"] = std::move(parsed);
    } else if (!args->is_object()) {
      return FieldError::WrongType(aat, "the JSON text of an object", *args);
    }
    out.push_back(std::move(copy));
  }
  return std::nullopt;
}

std::optional<FieldError> Messages(const json& body, json& out) {
  const json* list = FindField(body, "messages");
  if (list == nullptr) return FieldError{"messages", "'messages' is required"};
  if (!list->is_array()) return FieldError::WrongType("messages", "an array", *list);
  if (list->empty()) return FieldError{"messages", "'messages' must not be empty"};
  if (list->size() > kMaxChatMessages) {
    return FieldError{"messages", StrCat("at most ", kMaxChatMessages, " messages")};
  }
  out = json::array();
  for (size_t i = 0; i < list->size(); ++i) {
    const json& msg = (*list)[i];
    const std::string at = StrCat("messages[", i, "]");
    if (!msg.is_object()) return FieldError::WrongType(at, "an object", msg);
    auto role = msg.find("role");
    if (role == msg.end() || !role->is_string()) {
      return FieldError{at + ".role", StrCat(at, ".role must be a string")};
    }
    const std::string& r = role->get_ref<const std::string&>();
    if (r != "system" && r != "user" && r != "assistant" && r != "tool" && r != "developer") {
      return FieldError{at + ".role", StrCat("unknown role ", Quote(r))};
    }
    // The message as the client sent it (its other keys reach the
    // template), content joined, call arguments as objects.
    json message = msg;
    const json* calls = FindField(msg, "tool_calls");
    if (calls != nullptr) {
      if (r != "assistant") {
        return FieldError{at + ".tool_calls",
                          StrCat(at, ".tool_calls: only assistant messages carry tool calls")};
      }
      if (std::optional<FieldError> e =
              ToolCalls(*calls, at + ".tool_calls", message["tool_calls"]))
        return e;
    }
    const json* content = FindField(msg, "content");
    if (content != nullptr) {
      std::string text;
      if (std::optional<FieldError> e = ContentText(*content, at + ".content", text)) return e;
      message["content"] = std::move(text);
    } else if (calls == nullptr || calls->empty()) {
      return FieldError{at + ".content", StrCat(at, ".content is required")};
    }
    if (r == "tool") {
      const json* id = FindField(msg, "tool_call_id");
      if (id == nullptr) {
        return FieldError{at + ".tool_call_id", StrCat(at, ".tool_call_id is required")};
      }
      if (!id->is_string()) return FieldError::WrongType(at + ".tool_call_id", "a string", *id);
    }
    out.push_back(std::move(message));
  }
  return std::nullopt;
}

}  // namespace

std::optional<ToolCallFormat> ChatParsers::ToolFormatFor(const ChatFormat& f) const {
  switch (tools) {
    case Tools::kAuto:
      return f.tool_call_format();
    case Tools::kFormat:
      return format;
    case Tools::kNone:
      return std::nullopt;
  }
  return std::nullopt;
}

bool ChatParsers::HarmonyFor(const ChatFormat& f) const {
  if (tools == Tools::kFormat) return format == ToolCallFormat::kHarmony;
  return f.harmony();
}

bool ChatParsers::SplitsReasoningFor(const ChatFormat& f) const {
  switch (reasoning) {
    case Reasoning::kAuto:
      return f.writes_reasoning() || HarmonyFor(f);
    case Reasoning::kThink:
      return true;
    case Reasoning::kNone:
      return false;
  }
  return false;
}

Result<ChatParsers> MakeChatParsers(std::string_view tool_call_parser,
                                    std::string_view reasoning_parser) {
  ChatParsers p;
  if (tool_call_parser == "auto") {
    p.tools = ChatParsers::Tools::kAuto;
  } else if (tool_call_parser == "none") {
    p.tools = ChatParsers::Tools::kNone;
  } else if (std::optional<ToolCallFormat> f = ToolCallFormatFromName(tool_call_parser)) {
    p.tools = ChatParsers::Tools::kFormat;
    p.format = *f;
  } else {
    return Status::InvalidArgument(
        StrCat("--tool-call-parser ", Quote(tool_call_parser),
               " is not auto, none, hermes, llama3_json, mistral, generic or harmony"));
  }
  if (reasoning_parser == "auto") {
    p.reasoning = ChatParsers::Reasoning::kAuto;
  } else if (reasoning_parser == "think" || reasoning_parser == "deepseek_r1" ||
             reasoning_parser == "qwen3") {
    p.reasoning = ChatParsers::Reasoning::kThink;
  } else if (reasoning_parser == "none") {
    p.reasoning = ChatParsers::Reasoning::kNone;
  } else {
    return Status::InvalidArgument(StrCat("--reasoning-parser ", Quote(reasoning_parser),
                                          " is not auto, think (deepseek_r1, qwen3) or none"));
  }
  return p;
}

std::variant<ChatRequest, FieldError> ParseChatRequest(const json& body) {
  ChatRequest r;
  if (std::optional<FieldError> e = Messages(body, r.messages)) return std::move(*e);
  std::variant<ChatTools, FieldError> tools =
      ParseChatTools(FindField(body, "tools"), FindField(body, "tool_choice"),
                     FindField(body, "parallel_tool_calls"));
  if (FieldError* e = std::get_if<FieldError>(&tools)) return std::move(*e);
  r.tools = std::move(std::get<ChatTools>(tools));
  if (const json* kwargs = FindField(body, "chat_template_kwargs"); kwargs != nullptr) {
    if (!kwargs->is_object())
      return FieldError::WrongType("chat_template_kwargs", "an object", *kwargs);
    for (const char* key : {"messages", "tools", "documents", "add_generation_prompt"}) {
      if (kwargs->contains(key)) {
        return FieldError{"chat_template_kwargs", StrCat("'chat_template_kwargs' may not set ",
                                                         Quote(key), " (the request sets it)")};
      }
    }
    r.template_kwargs = *kwargs;
  }
  if (const json* effort = FindField(body, "reasoning_effort"); effort != nullptr) {
    if (!effort->is_string() || (*effort != "low" && *effort != "medium" && *effort != "high")) {
      return FieldError{"reasoning_effort",
                        "'reasoning_effort' must be \"low\", \"medium\" or \"high\""};
    }
    r.template_kwargs["reasoning_effort"] = *effort;
  }
  if (const json* split = FindField(body, "split_reasoning"); split != nullptr) {
    if (!split->is_boolean()) return FieldError::WrongType("split_reasoning", "a boolean", *split);
    r.split_reasoning = split->get<bool>();
  }
  return r;
}

std::variant<PreparedChat, FieldError> PrepareChat(const ChatFormat& format,
                                                   const ChatRequest& request,
                                                   const ChatParsers& parsers) {
  PreparedChat out;
  const ChatTools& tools = request.tools;
  out.output.harmony = parsers.HarmonyFor(format);
  if (tools.active()) {
    out.output.tool_format = parsers.ToolFormatFor(format);
    if (!out.output.tool_format) {
      return FieldError{"tools",
                        parsers.tools == ChatParsers::Tools::kNone
                            ? "this server reads no tool calls (--tool-call-parser none); send no "
                              "tools, or tool_choice \"none\""
                            : "the chat template shows tools in no call format folio knows; serve "
                              "with --chat-template FILE (a tool-use template) or "
                              "--tool-call-parser hermes|llama3_json|mistral|generic|harmony"};
    }
    for (const FunctionTool& f : tools.functions) out.output.tool_names.push_back(f.name);
    out.output.parallel_tool_calls = tools.parallel;
    const bool bare = *out.output.tool_format != ToolCallFormat::kHermes &&
                      *out.output.tool_format != ToolCallFormat::kHarmony;
    if (!tools.forced() && tools.constrained() && bare && request.split_reasoning &&
        parsers.SplitsReasoningFor(format)) {
      // The bare forms are calls only as the whole reply; after a <think>
      // block the grammar could not tell a call from text.
      return FieldError{"tools", StrCat("a strict tool under tool_choice \"auto\" cannot be held "
                                        "to its schema after reasoning in the ",
                                        ToolCallFormatName(*out.output.tool_format),
                                        " format; send split_reasoning false, or a forced "
                                        "tool_choice")};
    }
    if (tools.constrained()) {
      Result<std::string> gbnf = ToolCallGbnf(tools, *out.output.tool_format);
      if (!gbnf.ok()) {
        return FieldError{"tools", StrCat("the grammar of the tool calls cannot be built: ",
                                          gbnf.error().message())};
      }
      out.tool_grammar = std::move(*gbnf);
    }
  }
  // The generic format: folio shows the tools itself (the template does not).
  const bool generic = out.output.tool_format == ToolCallFormat::kGeneric;
  json extra = json::object();
  extra["tools"] = generic ? json(nullptr) : tools.TemplateTools();
  for (auto it = request.template_kwargs.begin(); it != request.template_kwargs.end(); ++it) {
    extra[it.key()] = it.value();
  }
  Result<RenderedChat> rendered = format.Render(
      generic ? GenericToolMessages(request.messages, tools) : request.messages, true, extra);
  if (!rendered.ok()) return FieldError{"messages", rendered.error().message()};
  out.prompt = std::move(*rendered);
  out.output.reasoning = request.split_reasoning && parsers.SplitsReasoningFor(format);
  out.output.starts_in_reasoning =
      out.output.reasoning && !out.output.harmony && PromptOpensReasoning(out.prompt.text);
  return out;
}

}  // namespace folio::serving
