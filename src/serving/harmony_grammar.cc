// ToolCallGbnf for harmony (tool_calls.h): gpt-oss's messages, whose
// headers are special tokens, written with GBNF token references
// (grammar.h) around each tool's arguments, converted from its parameters
// by the JSON Schema converter. The special tokens are named by their
// text, so the grammar compiles only against a vocabulary that has them
// (gpt-oss's o200k_harmony).
//
// A reply continues the prompt's `<|start|>assistant`. Forced
// (tool_choice "required" or a named function):
//
//   root       ::= analysis* call
//   analysis   ::= <|channel|> "analysis" <|message|> text <|end|> <|start|> "assistant"
//   call       ::= callI | ...                       (one per tool offered)
//   callI      ::= ( <|channel|> "commentary to=functions.NAME"
//                  | " to=functions.NAME" <|channel|> "commentary" )
//                  ( " " <|constrain|> "json" | " json" )? <|message|> argsI <|call|>
//
// text is any text without "<|" (the reply is read from its text, so a
// marker spelled out of ordinary tokens would end the message there).
// Both header orders are the ones gpt-oss writes and the reply parser reads
// (harmony_output.h); the second, with " <|constrain|>json", is exactly
// what openai-harmony renders. One call: <|call|> is a stop token (the
// turn ends there; the client runs the tool and the model calls again),
// so parallel_tool_calls has nothing more to allow.
//
// Under "auto" (a strict tool) the reply is any run of harmony messages,
// and a message whose header says "to=functions." is held to a call from
// there: the name one of the tools, a word boundary, the rest of the
// header without another "to=", then the tool's arguments (any JSON
// object for a tool that is not strict) and <|call|>:
//
//   root   ::= head                  header text without "<" or "to=functions."
//                                    (KMP states), <|channel|>, <|constrain|>;
//                                    then <|message|> body, or at the marker: called
//   body   ::= text ( <|end|> <|start|> head | <|return|> | <|call|> )
//   called ::= "NAME" after argsI <|call|> | ...
//   after  ::= <|message|> | ( [ \t\r\n] | <|channel|> | <|constrain|> ) rest
//   rest   ::= header text without "<" or "to=", <|channel|>, <|constrain|>, then <|message|>
//
// Every call the reply parser can read out of such a reply (a header word
// "to=functions.NAME" within a message) went through `called`, so it names
// a tool and its arguments are the grammar's.
#include <string>
#include <vector>

#include "folio/core/str_cat.h"
#include "folio/grammar/json_schema.h"
#include "folio/serving/harmony_output.h"
#include "serving/tool_grammar.h"

namespace folio::serving::tool_grammar {
namespace {

// The special tokens (kHarmonyChannel, ...) are written as they are: their
// text is a GBNF token reference to them.
constexpr std::string_view kFunctionsMarker = "to=functions.";

// Rule names: the converter's have no '_', and each tool's are prefixed
// "aI_" (PrefixRuleNames), so "harmony_" names never collide.
constexpr std::string_view kText = "harmony_text";  // harmony_text0, ...
constexpr std::string_view kHead = "harmony_head";  // harmony_head0, ...
constexpr std::string_view kRest = "harmony_rest";  // harmony_rest0, ...

// The arguments' rules of tool i, its root named ArgsRule(i).
std::string ArgsPrefix(size_t i) { return StrCat("a", i, "_"); }
std::string ArgsRule(size_t i) { return StrCat(ArgsPrefix(i), "root"); }

}  // namespace

Result<std::string> HarmonyToolCallGbnf(const ChatTools& tools) {
  const bool lazy = tools.choice == ToolChoice::kAuto;
  std::string args;  // every offered tool's arguments' rules
  std::vector<size_t> offered;
  for (size_t i = 0; i < tools.functions.size(); ++i) {
    const FunctionTool& f = tools.functions[i];
    if (tools.choice == ToolChoice::kNamed && f.name != tools.named) continue;
    const nlohmann::ordered_json parameters =
        lazy && !f.strict ? nlohmann::ordered_json{{"type", "object"}} : f.parameters;
    Result<std::string> gbnf = grammar::JsonSchemaToGbnf(parameters);
    if (!gbnf.ok()) return gbnf.error().WithContext(StrCat("tools[", i, "].function.parameters"));
    args += PrefixRuleNames(*gbnf, ArgsPrefix(i));
    offered.push_back(i);
  }
  if (offered.empty()) return Status::InvalidArgument("tool_choice: no tool to call");

  const std::string text = MarkerTextRules(
      {.marker = "<|", .rule = kText, .banned = "", .completed = "", .more = "", .may_end = true});
  const std::string call_end = StrCat(" ", kHarmonyCall, "\n");
  std::string out;
  if (!lazy) {
    const std::string content_type =
        StrCat("( \" \" ", kHarmonyConstrain, " \"json\" | \" json\" )?");
    out += StrCat("root ::= harmony_analysis* harmony_call\n",
                  "harmony_analysis ::= ", kHarmonyChannel, " \"analysis\" ", kHarmonyMessage, " ",
                  kText, "0 ", kHarmonyEnd, " ", kHarmonyStart, " \"assistant\"\n",
                  "harmony_call ::= ");
    for (size_t k = 0; k < offered.size(); ++k) {
      out += StrCat(k == 0 ? "" : " | ", "harmony_call", offered[k]);
    }
    out += "\n";
    for (const size_t i : offered) {
      const std::string& name = tools.functions[i].name;  // [a-zA-Z0-9_-]: literal-safe
      out += StrCat("harmony_call", i, " ::= ( ", kHarmonyChannel, " \"commentary ",
                    kFunctionsMarker, name, "\" | \" ", kFunctionsMarker, name, "\" ",
                    kHarmonyChannel, " \"commentary\" ) ", content_type, " ", kHarmonyMessage, " ",
                    ArgsRule(i), call_end);
    }
    return out + text + args;
  }
  // Header separators that restart the marker's automaton.
  const std::string specials =
      StrCat(" | ", kHarmonyChannel, " ", kHead, "0 | ", kHarmonyConstrain, " ", kHead, "0");
  out += StrCat("root ::= ", kHead, "0\n");
  out += MarkerTextRules({.marker = kFunctionsMarker,
                          .rule = kHead,
                          .banned = "<",
                          .completed = "harmony_called",
                          .more = StrCat(specials, " | ", kHarmonyMessage, " harmony_body"),
                          .may_end = false});
  out += StrCat("harmony_body ::= ", kText, "0 ( ", kHarmonyEnd, " ", kHarmonyStart, " ", kHead,
                "0 | ", kHarmonyReturn, " | ", kHarmonyCall, " )\n");
  out += "harmony_called ::= ";
  for (size_t k = 0; k < offered.size(); ++k) {
    out += StrCat(k == 0 ? "" : " | ", "harmony_fn", offered[k]);
  }
  out += "\n";
  for (const size_t i : offered) {
    out += StrCat("harmony_fn", i, " ::= \"", tools.functions[i].name, "\" harmony_after ",
                  ArgsRule(i), call_end);
  }
  out += StrCat("harmony_after ::= ", kHarmonyMessage, " | ( [ \\t\\r\\n] | ", kHarmonyChannel,
                " | ", kHarmonyConstrain, " ) ", kRest, "0\n");
  out += MarkerTextRules({.marker = "to=",
                          .rule = kRest,
                          .banned = "<",
                          .completed = "",
                          .more = StrCat(" | ", kHarmonyChannel, " ", kRest, "0 | ",
                                         kHarmonyConstrain, " ", kRest, "0 | ", kHarmonyMessage),
                          .may_end = false});
  return out + text + args;
}

}  // namespace folio::serving::tool_grammar
