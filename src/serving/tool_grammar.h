// What the tool-call grammars share (ToolCallGbnf in tool_calls.h):
// tool_grammar.cc writes the text formats' calls, harmony_grammar.cc
// gpt-oss's harmony messages.
#ifndef FOLIO_SERVING_TOOL_GRAMMAR_H_
#define FOLIO_SERVING_TOOL_GRAMMAR_H_

#include <string>
#include <string_view>

#include "folio/core/status.h"
#include "folio/serving/tool_calls.h"

namespace folio::serving::tool_grammar {

// A character of an ASCII marker as a GBNF escape (safe in a literal and in
// a class alike).
std::string Escaped(char c);

// Rules `rule`0..`rule`{m-1} for any text that does not contain `marker`
// (ASCII, m bytes), starting at `rule`0: the states of the marker's
// Knuth-Morris-Pratt automaton, state s being "the text ends with the
// marker's first s characters". A character that would complete the
// marker has no transition; any other code point that is not one of the
// marker's characters returns to state 0. Every state may end, and each
// continues in tail position, so matching stays flat however long the
// text.
std::string TextWithout(std::string_view marker, std::string_view rule);

// `gbnf` (the JSON Schema converter's output: rules, literals, classes,
// groups, repetition, comments) with `prefix` before every rule name, so
// that several converted schemas can live in one grammar.
std::string PrefixRuleNames(std::string_view gbnf, std::string_view prefix);

// ToolCallGbnf for ToolCallFormat::kHarmony (harmony_grammar.cc).
Result<std::string> HarmonyToolCallGbnf(const ChatTools& tools);

}  // namespace folio::serving::tool_grammar

#endif  // FOLIO_SERVING_TOOL_GRAMMAR_H_
