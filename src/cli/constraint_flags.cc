#include "cli/constraint_flags.h"

#include <nlohmann/json.hpp>

#include "cli/engine_flags.h"
#include "folio/core/str_cat.h"

namespace folio::cli {

void AddConstraintFlags(CLI::App& cmd, ConstraintFlags& f) {
  CLI::Option* schema = cmd.add_option("--json-schema", f.json_schema_file,
                                       "constrain the output to instances of this JSON Schema "
                                       "(a file)");
  CLI::Option* regex =
      cmd.add_option("--regex", f.regex, "constrain the output to match this regular expression");
  CLI::Option* choice = cmd.add_option("--choice", f.choices,
                                       "constrain the output to one of these strings "
                                       "(repeat the flag)");
  CLI::Option* grammar = cmd.add_option("--grammar", f.grammar_file,
                                        "constrain the output to this GBNF grammar (a file)");
  const std::vector<CLI::Option*> constraints = {schema, regex, choice, grammar};
  for (CLI::Option* a : constraints) {
    for (CLI::Option* b : constraints) {
      if (a != b) a->excludes(b);
    }
  }
}

Result<std::optional<Constraint>> ConstraintFromFlags(const ConstraintFlags& f) {
  Constraint c;
  grammar::StructuredOutput& o = c.output;
  if (!f.json_schema_file.empty()) {
    c.flag = "--json-schema";
    FOLIO_ASSIGN_OR_RETURN(const std::string text, ReadFlagFile(f.json_schema_file, c.flag));
    o.kind = grammar::StructuredOutput::Kind::kJsonSchema;
    o.schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (o.schema.is_discarded()) {
      return Status::InvalidArgument(StrCat(c.flag, ": ", f.json_schema_file, " is not JSON"));
    }
  } else if (!f.regex.empty()) {
    c.flag = "--regex";
    o.kind = grammar::StructuredOutput::Kind::kRegex;
    o.text = f.regex;
  } else if (!f.choices.empty()) {
    c.flag = "--choice";
    o.kind = grammar::StructuredOutput::Kind::kChoice;
    o.choices = f.choices;
  } else if (!f.grammar_file.empty()) {
    c.flag = "--grammar";
    FOLIO_ASSIGN_OR_RETURN(o.text, ReadFlagFile(f.grammar_file, c.flag));
    o.kind = grammar::StructuredOutput::Kind::kGrammar;
  } else {
    return std::optional<Constraint>();
  }
  return std::optional<Constraint>(std::move(c));
}

}  // namespace folio::cli
