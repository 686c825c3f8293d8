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
// and a message whose header names a function is held to a call: a tool's
// name, the tool's arguments (any JSON object for a tool that is not
// strict) and <|call|>. A call's header is a canonical one, as gpt-oss
// writes them and openai-harmony reads them: after the role (a message
// after <|start|>), a channel then " to=functions.NAME", or the recipient
// then an optional channel, and an optional content type; any channel and
// content type word. Any other header is the parser's words: separators
// (blanks, <|channel|>, <|constrain|>) and words of printable ASCII but
// "<", none starting "to=functions.", with bounded counts and lengths so
// that a header always fits the parser's kMaxHarmonyHeaderBytes (a longer
// one would make the rest of the reply plain content):
//
//   head   ::= <|channel|> plain chan | " "? "to=functions." called | free
//   role   ::= <|channel|> plain chan | " to=functions." called | word_end
//   chan   ::= " to=functions." calledC | word_end
//   word_end ::= sep free | <|message|> body      (no word runs into the last)
//   free   ::= ( sep | word sep ){0,6} word? <|message|> body
//   body   ::= text ( <|end|> <|start|> plain role | <|return|> | <|call|> )
//   called ::= "NAME" ( <|channel|> plain )? type? <|message|> argsI <|call|> | ...
//   calledC::= "NAME" type? <|message|> argsI <|call|> | ...    (channel given)
//   type   ::= " "? <|constrain|> plain | " " plain
//   word   ::= plain | "to=" (a word not starting with "functions.")
//   plain  ::= a word of 1 to 24 characters not starting with "to="
//
// Every call the reply parser can read out of such a reply (a header word
// "to=functions.NAME" that is not the role) went through `called`, so it
// names a tool and its arguments are the grammar's.
#include <algorithm>
#include <cstdint>
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

// Bounds on a header under "auto": words, blank runs, and separated items
// of a header that calls nothing. The longest header allowed, a call's or
// another's, fits the reply parser's bound, so the parser reads every
// header the grammar allows as one.
constexpr uint64_t kMaxWordBytes = 24;
constexpr uint64_t kMaxBlanks = 4;
constexpr uint64_t kMaxItems = 6;
constexpr uint64_t kMaxSepBytes = std::max<uint64_t>(kHarmonyConstrain.size(), kMaxBlanks);
constexpr uint64_t kChannelBytes = kHarmonyChannel.size() + kMaxWordBytes;
constexpr uint64_t kMaxFreeHeaderBytes = kMaxWordBytes + kChannelBytes + kMaxSepBytes +
                                         kMaxItems * (kMaxWordBytes + kMaxSepBytes) + kMaxWordBytes;
constexpr uint64_t kMaxCallHeaderBytes = kMaxWordBytes + 2 * kChannelBytes + 1 +
                                         kFunctionsMarker.size() + kMaxFunctionNameBytes + 1 +
                                         kHarmonyConstrain.size() + kMaxWordBytes;
static_assert(std::max(kMaxFreeHeaderBytes, kMaxCallHeaderBytes) <= kMaxHarmonyHeaderBytes,
              "a header the grammar allows must fit the parser's bound");

// One character of a header word: printable ASCII but "<" (a marker's
// start) and `except` (0: none), as a class of ranges.
std::string WordChar(char except) {
  std::string out = "[";
  int lo = -1;
  for (int c = 0x21; c <= 0x7F; ++c) {
    const bool in = c <= 0x7E && c != '<' && c != except;
    if (in && lo < 0) lo = c;
    if (!in && lo >= 0) {
      out += Escaped(static_cast<char>(lo));
      if (c - 1 > lo) out += StrCat("-", Escaped(static_cast<char>(c - 1)));
      lo = -1;
    }
  }
  return out + "]";
}

// A header word of 1 to `max` characters that does not start with
// `prefix` (ASCII, literal-safe): it shares the prefix's first k
// characters and then differs, or ends.
std::string WordNotStartingWith(std::string_view prefix, uint64_t max) {
  std::string out;
  for (size_t k = 0; k < prefix.size(); ++k) {
    const std::string shared = k == 0 ? "" : StrCat("\"", prefix.substr(0, k), "\" ");
    if (k > 0) out += StrCat(" | \"", prefix.substr(0, k), "\"");
    out += StrCat(k == 0 ? "" : " | ", shared, WordChar(prefix[k]));
    if (max > k + 1) out += StrCat(" ", WordChar(0), "{0,", max - k - 1, "}");
  }
  return out;
}

// Rule names: the converter's have no '_', and each tool's are prefixed
// "aI_" (PrefixRuleNames), so "harmony_" names never collide.
constexpr std::string_view kText = "harmony_text";  // harmony_text0, ...

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

  const std::string text = TextWithout("<|", kText);
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
  out += StrCat("root ::= harmony_head\n", "harmony_sep ::= ", kHarmonyChannel, " | ",
                kHarmonyConstrain, " | [ \\t\\r\\n]{1,", kMaxBlanks, "}\n",
                "harmony_plain ::= ", WordNotStartingWith("to=", kMaxWordBytes), "\n",
                "harmony_word ::= harmony_plain | \"to=\" ( ",
                WordNotStartingWith("functions.", kMaxWordBytes - 3), " )\n",
                "harmony_type ::= \" \"? ", kHarmonyConstrain,
                " harmony_plain | \" \" harmony_plain\n");
  // A header at a message's start; after a word (the role, or a channel's
  // name), where another word would run into it; free of recipients.
  out += StrCat("harmony_head ::= ", kHarmonyChannel,
                " harmony_plain harmony_after_channel | \" \"? \"", kFunctionsMarker,
                "\" harmony_called | harmony_free\n");
  out += StrCat("harmony_after_role ::= ", kHarmonyChannel,
                " harmony_plain harmony_after_channel | \" ", kFunctionsMarker,
                "\" harmony_called | harmony_after_word\n");
  out += StrCat("harmony_after_channel ::= \" ", kFunctionsMarker,
                "\" harmony_called_c | harmony_after_word\n");
  out += StrCat("harmony_after_word ::= harmony_sep harmony_free | ", kHarmonyMessage,
                " harmony_body\n");
  out += StrCat("harmony_free ::= ( harmony_sep | harmony_word harmony_sep ){0,", kMaxItems,
                "} harmony_word? ", kHarmonyMessage, " harmony_body\n");
  out +=
      StrCat("harmony_body ::= ", kText, "0 ( ", kHarmonyEnd, " ", kHarmonyStart,
             " harmony_plain harmony_after_role | ", kHarmonyReturn, " | ", kHarmonyCall, " )\n");
  for (const bool channel_given : {false, true}) {
    const std::string_view suffix = channel_given ? "_c" : "";
    out += StrCat("harmony_called", suffix, " ::= ");
    for (size_t k = 0; k < offered.size(); ++k) {
      const size_t i = offered[k];
      out += StrCat(k == 0 ? "" : " | ", "\"", tools.functions[i].name, "\" ",
                    channel_given ? "" : StrCat("( ", kHarmonyChannel, " harmony_plain )? "),
                    "harmony_type? ", kHarmonyMessage, " ", ArgsRule(i), " ", kHarmonyCall);
    }
    out += "\n";
  }
  return out + text + args;
}

}  // namespace folio::serving::tool_grammar
