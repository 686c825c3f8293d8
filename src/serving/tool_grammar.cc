// ToolCallGbnf (tool_calls.h): the grammar of a call, written as one JSON
// Schema for the call's JSON (the name a const, the arguments a $ref to the
// tool's parameters, moved under $defs) converted by the structured-output
// converter, with the family's markup around it; under tool_choice "auto",
// free text around it that switches to the call's grammar at the marker.
// Harmony's messages are harmony_grammar.cc's.
#include <algorithm>
#include <string>
#include <vector>

#include "folio/core/str_cat.h"
#include "folio/grammar/json_schema.h"
#include "folio/serving/tool_calls.h"
#include "serving/tool_grammar.h"

namespace folio::serving {
namespace tool_grammar {

std::string Escaped(char c) {
  constexpr std::string_view kHex = "0123456789ABCDEF";
  const auto b = static_cast<unsigned char>(c);
  return StrCat("\\x", kHex[b >> 4], kHex[b & 15]);
}

std::string TextWithout(std::string_view marker, std::string_view rule) {
  const size_t m = marker.size();
  std::vector<size_t> fail(m, 0);  // longest proper border of marker[0..s]
  for (size_t s = 1, k = 0; s < m; ++s) {
    while (k > 0 && marker[s] != marker[k]) k = fail[k - 1];
    if (marker[s] == marker[k]) ++k;
    fail[s] = k;
  }
  const auto next = [&](size_t s, char c) {
    while (s > 0 && marker[s] != c) s = fail[s - 1];
    return marker[s] == c ? s + 1 : 0;
  };
  std::string out;
  for (size_t s = 0; s < m; ++s) {
    std::string others = "[^";
    std::string alternatives;
    for (int c = 1; c < 128; ++c) {
      const size_t t = next(s, static_cast<char>(c));
      if (t == 0) continue;
      others += Escaped(static_cast<char>(c));
      if (t < m) alternatives += StrCat(" | \"", Escaped(static_cast<char>(c)), "\" ", rule, t);
    }
    out += StrCat(rule, s, " ::= ( ", others, "] ", rule, 0, alternatives, " )?\n");
  }
  return out;
}

std::string PrefixRuleNames(std::string_view gbnf, std::string_view prefix) {
  const auto is_name = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  };
  std::string out;
  size_t i = 0;
  while (i < gbnf.size()) {
    const char c = gbnf[i];
    if (c == '"' || c == '[' || c == '{' || c == '<' || c == '#') {
      // A literal, a class, a count or a token (escapes skipped), or a
      // comment: copied as is.
      const char close = c == '"' ? '"' : c == '[' ? ']' : c == '{' ? '}' : c == '<' ? '>' : '\n';
      size_t j = i + 1;
      while (j < gbnf.size() && gbnf[j] != close)
        j += (gbnf[j] == '\\' && close != '\n') ? size_t{2} : size_t{1};
      j = std::min(j + 1, gbnf.size());
      out.append(gbnf.substr(i, j - i));
      i = j;
    } else if (is_name(c)) {
      size_t j = i;
      while (j < gbnf.size() && is_name(gbnf[j])) ++j;
      out += prefix;
      out.append(gbnf.substr(i, j - i));
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

}  // namespace tool_grammar

namespace {

using json = nlohmann::ordered_json;

// Keys whose values are data, not schemas: a "$ref" string inside them is
// not a reference.
bool IsDataKeyword(std::string_view key) {
  return key == "enum" || key == "const" || key == "default" || key == "examples";
}

// The schema with every local reference ("#...") re-rooted at `base`, for a
// schema moved from the document root to `base`.
json Rebase(const json& schema, const std::string& base) {
  if (schema.is_array()) {
    json out = json::array();
    for (const json& item : schema) out.push_back(Rebase(item, base));
    return out;
  }
  if (!schema.is_object()) return schema;
  json out = json::object();
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    const json& v = it.value();
    if (it.key() == "$ref" && v.is_string() && v.get_ref<const std::string&>().starts_with("#")) {
      out[it.key()] = base + v.get<std::string>().substr(1);
    } else if (IsDataKeyword(it.key())) {
      out[it.key()] = v;
    } else {
      out[it.key()] = Rebase(v, base);
    }
  }
  return out;
}

// Names of the rules written here. The converter names its rules with
// letters, digits and '-' only, so a name with '_' never collides.
constexpr std::string_view kCallJsonRule = "tool_json";
constexpr std::string_view kBlockRule = "tool_block";
constexpr std::string_view kFreeRule = "tool_free";  // tool_free0, tool_free1, ...
constexpr std::string_view kTextRule = "tool_text";
constexpr std::string_view kCallsRule = "tool_calls";

// A JSON Schema any object satisfies: a call's arguments when its tool is
// not strict under tool_choice "auto".
nlohmann::ordered_json AnyObject() { return json{{"type", "object"}}; }

}  // namespace

Result<std::string> ToolCallGbnf(const ChatTools& tools, ToolCallFormat format) {
  if (format == ToolCallFormat::kHarmony) return tool_grammar::HarmonyToolCallGbnf(tools);
  const bool lazy = tools.choice == ToolChoice::kAuto;
  const bool several = (tools.choice == ToolChoice::kRequired || lazy) && tools.parallel;
  const std::string_view args_key =
      format == ToolCallFormat::kLlama3Json ? "parameters" : "arguments";
  json defs = json::object();
  json calls = json::array();
  for (size_t i = 0; i < tools.functions.size(); ++i) {
    const FunctionTool& f = tools.functions[i];
    if (tools.choice == ToolChoice::kNamed && f.name != tools.named) continue;
    const json parameters = lazy && !f.strict ? AnyObject() : f.parameters;
    // Each schema alone first, so an error names its tool.
    if (Result<std::string> alone = grammar::JsonSchemaToGbnf(parameters); !alone.ok()) {
      return alone.error().WithContext(StrCat("tools[", i, "].function.parameters"));
    }
    const std::string def = StrCat("tool", i);
    defs[def] = Rebase(parameters, "#/$defs/" + def);
    json properties = json::object();
    properties["name"] = json{{"const", f.name}};
    properties[std::string(args_key)] = json{{"$ref", "#/$defs/" + def}};
    calls.push_back(json{{"type", "object"},
                         {"properties", std::move(properties)},
                         {"required", json::array({"name", args_key})},
                         {"additionalProperties", false}});
  }
  if (calls.empty()) return Status::InvalidArgument("tool_choice: no tool to call");
  json call = calls.size() == 1 ? calls[0] : json{{"anyOf", calls}};
  json schema;
  if (format == ToolCallFormat::kMistral || format == ToolCallFormat::kGeneric) {
    schema = json{{"type", "array"}, {"items", std::move(call)}, {"minItems", 1}};
    if (!several) schema["maxItems"] = 1;
  } else {
    schema = std::move(call);
  }
  if (format == ToolCallFormat::kGeneric) {
    // {"tool_calls": [...]}; under "auto" also the answer {"response": text}.
    json calls_object = json{{"type", "object"},
                             {"properties", {{"tool_calls", std::move(schema)}}},
                             {"required", json::array({"tool_calls"})},
                             {"additionalProperties", false}};
    schema = calls_object;
    if (lazy) {
      json response = json{{"type", "object"},
                           {"properties", {{"response", {{"type", "string"}}}}},
                           {"required", json::array({"response"})},
                           {"additionalProperties", false}};
      schema = json{{"anyOf", json::array({std::move(calls_object), std::move(response)})}};
    }
  }
  schema["$defs"] = std::move(defs);
  FOLIO_ASSIGN_OR_RETURN(std::string gbnf, grammar::JsonSchemaToGbnf(schema));
  constexpr std::string_view kRoot = "root ::= ";
  if (!gbnf.starts_with(kRoot)) {
    return Status::FailedPrecondition("tool grammar: the schema converter wrote no root rule");
  }
  gbnf.replace(0, kRoot.size(), StrCat(kCallJsonRule, " ::= "));
  std::string head;
  if (lazy) {
    // Free text until the model starts a call; from the marker on, the call
    // is held to the grammar. Hermes blocks may stand anywhere in the text
    // (calls at most one without parallel_tool_calls); the bare forms of
    // llama3_json, mistral and generic are calls only as the whole reply,
    // so a reply is either blanks and calls (generic: or its JSON answer)
    // or text that does not start with their opening character (the
    // parser's rule, chat_output.h).
    switch (format) {
      case ToolCallFormat::kHermes:
        head =
            StrCat("root ::= ", kFreeRule, "0 ( ", kBlockRule, " ", kFreeRule, "0 )",
                   several ? "*" : "?", "\n", kBlockRule, " ::= \"<tool_call>\\n\" ", kCallJsonRule,
                   " \"\\n</tool_call>\"\n", tool_grammar::TextWithout("<tool_call>", kFreeRule));
        break;
      case ToolCallFormat::kLlama3Json:
      case ToolCallFormat::kMistral:
      case ToolCallFormat::kGeneric: {
        const bool llama = format == ToolCallFormat::kLlama3Json;
        head = StrCat("root ::= [ \\t\\n]* ( ", kCallsRule, " | ", kTextRule, " )?\n", kCallsRule,
                      " ::= ", kCallJsonRule,
                      llama && several ? StrCat(" ( \"; \" ", kCallJsonRule, " )*") : "", "\n",
                      kTextRule, " ::= [^", format == ToolCallFormat::kMistral ? "\\[" : "{",
                      " \\t\\n] .*\n");
        break;
      }
      case ToolCallFormat::kHarmony:
        break;  // HarmonyToolCallGbnf above
    }
    return head + gbnf;
  }
  switch (format) {
    case ToolCallFormat::kHermes:
      head =
          StrCat("root ::= ", kBlockRule,
                 several ? StrCat(" ( \"\\n\" ", kBlockRule, " )*") : std::string(), "\n",
                 kBlockRule, " ::= \"<tool_call>\\n\" ", kCallJsonRule, " \"\\n</tool_call>\"\n");
      break;
    case ToolCallFormat::kLlama3Json:
      head = StrCat("root ::= ", kCallJsonRule,
                    several ? StrCat(" ( \"; \" ", kCallJsonRule, " )*") : std::string(), "\n");
      break;
    case ToolCallFormat::kMistral:
    case ToolCallFormat::kGeneric:
      head = StrCat("root ::= ", kCallJsonRule, "\n");
      break;
    case ToolCallFormat::kHarmony:
      break;  // HarmonyToolCallGbnf above
  }
  return head + gbnf;
}

}  // namespace folio::serving
