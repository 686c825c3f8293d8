// ToolCallGbnf (tool_calls.h): the grammar of a forced call, written as one
// JSON Schema for the call's JSON (the name a const, the arguments a $ref
// to the tool's parameters, moved under $defs) converted by the structured-
// output converter, with the family's markup around it.
#include <string>

#include "folio/core/str_cat.h"
#include "folio/grammar/json_schema.h"
#include "folio/serving/tool_calls.h"

namespace folio::serving {
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

}  // namespace

Result<std::string> ToolCallGbnf(const ChatTools& tools, ToolCallFormat format) {
  const bool several = tools.choice == ToolChoice::kRequired && tools.parallel;
  const std::string_view args_key =
      format == ToolCallFormat::kLlama3Json ? "parameters" : "arguments";
  json defs = json::object();
  json calls = json::array();
  for (size_t i = 0; i < tools.functions.size(); ++i) {
    const FunctionTool& f = tools.functions[i];
    if (tools.choice == ToolChoice::kNamed && f.name != tools.named) continue;
    // Each schema alone first, so an error names its tool.
    if (Result<std::string> alone = grammar::JsonSchemaToGbnf(f.parameters); !alone.ok()) {
      return alone.error().WithContext(StrCat("tools[", i, "].function.parameters"));
    }
    const std::string def = StrCat("tool", i);
    defs[def] = Rebase(f.parameters, "#/$defs/" + def);
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
  if (format == ToolCallFormat::kMistral) {
    schema = json{{"type", "array"}, {"items", std::move(call)}, {"minItems", 1}};
    if (!several) schema["maxItems"] = 1;
  } else {
    schema = std::move(call);
  }
  schema["$defs"] = std::move(defs);
  FOLIO_ASSIGN_OR_RETURN(std::string gbnf, grammar::JsonSchemaToGbnf(schema));
  constexpr std::string_view kRoot = "root ::= ";
  if (!gbnf.starts_with(kRoot)) {
    return Status::FailedPrecondition("tool grammar: the schema converter wrote no root rule");
  }
  gbnf.replace(0, kRoot.size(), StrCat(kCallJsonRule, " ::= "));
  std::string head;
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
      head = StrCat("root ::= ", kCallJsonRule, "\n");
      break;
  }
  return head + gbnf;
}

}  // namespace folio::serving
