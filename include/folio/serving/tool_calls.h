// Function tools in a chat request: the call formats model families write,
// which one a chat template uses, a request's tools and tool_choice
// checked, and the grammar that makes a model call a tool (tool_choice
// "required" or a named function) or holds its calls to the tools' schemas
// (a strict tool under "auto").
//
// Formats (vLLM's --tool-call-parser names):
//   hermes       <tool_call>{"name": N, "arguments": {...}}</tool_call>, one
//                block per call (Hermes 2/3, Qwen2.5, Qwen3, QwQ)
//   llama3_json  {"name": N, "parameters": {...}}, optionally after
//                <|python_tag|>; several calls joined by ";" (Llama
//                3.1-3.3)
//   mistral      [TOOL_CALLS][{"name": N, "arguments": {...}}, ...]
//                (Mistral 7B v0.3, Nemo, Small; the marker is a control
//                token that decoding drops, so a bare array is read too)
//   generic      for a template that shows no tools (SmolLM2's, ChatML,
//                folio's plain format): folio tells the model about the
//                tools in a system message (GenericToolMessages) and reads
//                a reply that is one JSON object, {"tool_calls": [{"name":
//                N, "arguments": {...}}, ...]} or {"response": "text"} (the
//                shape llama.cpp's generic format asks for)
//   harmony      gpt-oss's harmony messages: <|channel|>commentary
//                to=functions.N <|constrain|>json<|message|>{...}<|call|>;
//                choosing it reads the whole reply as harmony messages
//                (channels to reasoning and content, serving/harmony_output.h)
#ifndef FOLIO_SERVING_TOOL_CALLS_H_
#define FOLIO_SERVING_TOOL_CALLS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "folio/core/status.h"

namespace folio::serving {

enum class ToolCallFormat : uint8_t { kHermes, kLlama3Json, kMistral, kGeneric, kHarmony };

inline constexpr ToolCallFormat kToolCallFormats[] = {
    ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json, ToolCallFormat::kMistral,
    ToolCallFormat::kGeneric, ToolCallFormat::kHarmony};

// "hermes", "llama3_json", "mistral", "generic", "harmony".
std::string_view ToolCallFormatName(ToolCallFormat format);
// The format of a name above; nullopt for any other.
std::optional<ToolCallFormat> ToolCallFormatFromName(std::string_view name);

// The format a chat template writes calls in, from its markers: "<|channel|>"
// is harmony (gpt-oss's template; with or without tools), "<tool_call>"
// hermes, "[TOOL_CALLS]" mistral, "<|python_tag|>" or an "ipython" header
// llama3_json (checked in that order); generic when the template never
// mentions `tools` (it cannot show them, so folio does); nullopt when it
// mentions tools but has none of the markers (a format folio does not know).
std::optional<ToolCallFormat> DetectToolCallFormat(std::string_view template_source);

// A bad request field: which one (a JSON path such as
// "tools[1].function.parameters") and why.
struct FieldError {
  std::string field;
  std::string message;

  // A value of the wrong type, in the request wording of
  // core/json_reader.h: "'tools[0]' must be an object, got array".
  static FieldError WrongType(std::string field, std::string_view expected,
                              const nlohmann::ordered_json& got);
};

enum class ToolChoice : uint8_t {
  kNone,      // no tools shown to the model, no calls parsed
  kAuto,      // tools shown; calls parsed when the model writes one
  kRequired,  // at least one call, forced by a grammar
  kNamed,     // exactly one call of ChatTools::named, forced by a grammar
};

struct FunctionTool {
  std::string name;
  // A JSON Schema object; when the tool gave none, {"type": "object",
  // "properties": {}, "additionalProperties": false}: OpenAI reads an
  // absent parameters as an empty parameter list.
  nlohmann::ordered_json parameters;
  bool strict = false;
};

// A request's tools, checked.
struct ChatTools {
  // The tools array as the client sent it (null when absent).
  nlohmann::ordered_json definitions;
  std::vector<FunctionTool> functions;
  ToolChoice choice = ToolChoice::kNone;
  std::string named;     // kNamed: the function's name
  bool parallel = true;  // parallel_tool_calls

  // Tools are shown to the model and its calls parsed.
  bool active() const { return choice != ToolChoice::kNone && !functions.empty(); }
  // The chat template's `tools`: the array as sent (an empty one too, as
  // apply_chat_template passes it), but null under tool_choice "none".
  nlohmann::ordered_json TemplateTools() const {
    return functions.empty() || active() ? definitions : nlohmann::ordered_json(nullptr);
  }
  // A grammar forces a call.
  bool forced() const { return choice == ToolChoice::kRequired || choice == ToolChoice::kNamed; }
  // A grammar shapes the reply: a forced call, or a strict tool under
  // "auto" (ToolCallGbnf).
  bool constrained() const {
    if (forced()) return true;
    if (choice != ToolChoice::kAuto) return false;
    for (const FunctionTool& f : functions) {
      if (f.strict) return true;
    }
    return false;
  }
};

// The generic format's conversation (messages as ParseChatRequest left
// them): the tools and the reply shape described in a system message (the
// first message's text when it is a system message with text content, a
// new first message otherwise), an assistant's tool_calls written into its
// content as {"tool_calls": [...]}, and each run of tool messages turned
// into one user message {"tool_responses": [{"tool_call_id", "content"}]}
// (templates that know no tool role, or require user and assistant to
// alternate, render it).
nlohmann::ordered_json GenericToolMessages(const nlohmann::ordered_json& messages,
                                           const ChatTools& tools);

// Most tools in one request, and the longest function name (OpenAI's).
inline constexpr uint64_t kMaxTools = 128;
inline constexpr uint64_t kMaxFunctionNameBytes = 64;

// OpenAI's fields, each null when absent:
//   tools                an array of {"type": "function", "function":
//                        {"name", "description"?, "parameters"?, "strict"?}};
//                        name [a-zA-Z0-9_-]{1,64}, unique; parameters a JSON
//                        Schema object (not checked further here); strict a
//                        boolean. No other keys.
//   tool_choice          "none", "auto", "required" or {"type": "function",
//                        "function": {"name": N}} naming one of the tools;
//                        default "auto" with tools, "none" without.
//                        "required" and a named function need tools.
//   parallel_tool_calls  a boolean (default true); false: at most one call.
// strict: true is always honoured (ToolCallGbnf): a strict tool's
// arguments always validate against its parameters.
std::variant<ChatTools, FieldError> ParseChatTools(
    const nlohmann::ordered_json* tools, const nlohmann::ordered_json* tool_choice,
    const nlohmann::ordered_json* parallel_tool_calls);

// The GBNF of what the model may write when ChatTools::constrained(), in
// `format`:
//   "required"   one call of any tool, or with parallel_tool_calls several;
//   named        one call of that function;
//   "auto"       (a strict tool) any reply, but a call once started is
//                held to the grammar: hermes <tool_call> blocks anywhere in
//                free text that never holds the marker outside a block (at
//                most one block without parallel_tool_calls); llama3_json
//                and mistral, whose calls are bare, either blanks and calls
//                or text that does not start with "{" / "[" (as the parser
//                reads them). As llama.cpp's lazy grammars, the call's
//                grammar applies from the marker on; the free text is
//                limited only in never writing a marker that a valid call
//                does not follow.
// harmony (gpt-oss): its messages, with the special tokens as token
// references (grammar.h), so the GBNF compiles only against a vocabulary
// that has them (o200k_harmony): forced, optional analysis messages then
// one call, `<|channel|>commentary to=functions.N` or ` to=functions.N
// <|channel|>commentary` (openai-harmony's order), an optional
// `<|constrain|>json` or `json`, `<|message|>`, the arguments and
// `<|call|>`; under "auto", any run of messages, a call held from the
// header's "to=functions." on (harmony_grammar.cc). One call either way:
// <|call|> is a stop token and ends the reply.
// Each call names one of the tools; its arguments are an instance of the
// tool's parameters (grammar/json_schema.h), except that under "auto" a
// tool that is not strict takes any JSON object. Marker tokens that
// decoding drops (<|python_tag|>, [TOOL_CALLS]) are left out: the grammar
// matches the text, and the output parser reads the bare forms. Errors:
// kUnimplemented / kInvalidArgument / kResourceExhausted from the schema
// converter, the message naming the tool (tools[i].function.parameters).
Result<std::string> ToolCallGbnf(const ChatTools& tools, ToolCallFormat format);

}  // namespace folio::serving

#endif  // FOLIO_SERVING_TOOL_CALLS_H_
