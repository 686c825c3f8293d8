// What a chat request asks of the chat template and of the reply's reading,
// checked once for every front end (the HTTP server and the Python
// package): its messages, tools, template arguments and reasoning switch
// (ParseChatRequest), then its prompt, the reply parser's options and the
// grammar of its tool calls (PrepareChat).
//
// The template sees what Hugging Face's apply_chat_template passes it
// (ChatFormat::Render): messages, tools (as sent; null when absent or
// tool_choice is "none"), documents null, add_generation_prompt, bos_token,
// eos_token, and then chat_template_kwargs' keys, which override the
// special tokens. Messages reach it as the client sent them, with two
// changes vLLM also makes: a content given as text parts is joined into one
// string, and a tool call's arguments given as JSON text (as the OpenAI
// API sends them) become the object they spell, which is what tool-use
// templates expect (Qwen2.5's writes `arguments | tojson`).
#ifndef FOLIO_SERVING_CHAT_REQUEST_H_
#define FOLIO_SERVING_CHAT_REQUEST_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "folio/serving/chat_format.h"
#include "folio/serving/chat_output.h"
#include "folio/serving/tool_calls.h"

namespace folio::serving {

// How replies are read, for a whole server (--tool-call-parser,
// --reasoning-parser) or a Python engine.
struct ChatParsers {
  // Tool calls: kAuto reads the format the template's markers name
  // (ChatFormat::tool_call_format), kFormat always `format`, kNone none (a
  // request that offers tools is refused).
  enum class Tools : uint8_t { kAuto, kFormat, kNone };
  Tools tools = Tools::kAuto;
  ToolCallFormat format = ToolCallFormat::kHermes;
  // Reasoning: kAuto splits <think>…</think> when the template mentions
  // </think>, kThink always, kNone never.
  enum class Reasoning : uint8_t { kAuto, kThink, kNone };
  Reasoning reasoning = Reasoning::kAuto;

  // The format calls are read in with this template (nullopt: none).
  std::optional<ToolCallFormat> ToolFormatFor(const ChatFormat& format) const;
  // Whether replies with this template are harmony messages (gpt-oss):
  // --tool-call-parser harmony, or auto / none with a template that is
  // harmony's (ChatFormat::harmony). Replies are read that way with or
  // without tools.
  bool HarmonyFor(const ChatFormat& format) const;
  // Whether replies with this template have their reasoning split (a
  // harmony reply's analysis channel: unless --reasoning-parser none).
  bool SplitsReasoningFor(const ChatFormat& format) const;
};

// --tool-call-parser: "auto", "none" or a format name (tool_calls.h);
// --reasoning-parser: "auto", "think" (alias "deepseek_r1", "qwen3") or
// "none". kInvalidArgument naming the flag's value otherwise.
Result<ChatParsers> MakeChatParsers(std::string_view tool_call_parser,
                                    std::string_view reasoning_parser);

struct ChatRequest {
  nlohmann::ordered_json messages;  // as the template sees them (above)
  ChatTools tools;
  // chat_template_kwargs, and reasoning_effort when given: more template
  // variables (an object).
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  bool split_reasoning = true;  // folio's split_reasoning (default true)
};

// Most messages in one request.
inline constexpr uint64_t kMaxChatMessages = 1024;

// The chat fields of a request body (an object); other fields are not
// looked at. Checked:
//   messages             a non-empty array (at most kMaxChatMessages) of
//                        objects: role one of system, user, assistant, tool,
//                        developer; content a string or an array of
//                        {"type": "text", "text"} parts, required except on
//                        an assistant message with tool_calls, where it may
//                        be null or absent. An assistant's tool_calls: an
//                        array of {"id"?, "type": "function", "function":
//                        {"name", "arguments": JSON text of an object, or
//                        an object}}; only assistant messages carry them. A
//                        tool message needs tool_call_id (a string).
//   tools, tool_choice, parallel_tool_calls   ParseChatTools
//   chat_template_kwargs an object; it may not set messages, tools,
//                        documents or add_generation_prompt (the request
//                        sets those)
//   reasoning_effort     "low", "medium" or "high": passed to the template
//                        (gpt-oss style templates read it)
//   split_reasoning      a boolean (folio's own): false keeps a <think>
//                        block in content as written
std::variant<ChatRequest, FieldError> ParseChatRequest(const nlohmann::ordered_json& body);

struct PreparedChat {
  RenderedChat prompt;
  // The reply parser's options; call_id_seed is left for the caller.
  ChatOutputOptions output;
  // GBNF of the tool calls when ChatTools::constrained() (a forced call, or
  // a strict tool under "auto"; ToolCallGbnf); nullopt otherwise.
  std::optional<std::string> tool_grammar;
};

// Renders the request's prompt (add_generation_prompt true) and settles
// how its reply is read. Errors name the field: "tools" when tools are
// offered but no call format applies (a template without a known format
// and --tool-call-parser auto, or none) or a forced call's grammar cannot
// be built; "messages" for what the template raises.
std::variant<PreparedChat, FieldError> PrepareChat(const ChatFormat& format,
                                                   const ChatRequest& request,
                                                   const ChatParsers& parsers);

}  // namespace folio::serving

#endif  // FOLIO_SERVING_CHAT_REQUEST_H_
