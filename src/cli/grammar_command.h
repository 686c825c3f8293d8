// `folio grammar`: what a structured-output constraint compiles to, with no
// model. Prints the GBNF that a JSON Schema, regular expression or choice
// becomes (a GBNF file is checked and printed as given), or the refusal a
// server would answer with; --check reads texts from standard input, one
// JSON string per line, and prints for each whether the constraint accepts
// the whole text (true / false), so a schema can be tried against
// instances, and tests can hold the converter against a JSON Schema
// validator.
#ifndef FOLIO_CLI_GRAMMAR_COMMAND_H_
#define FOLIO_CLI_GRAMMAR_COMMAND_H_

#include <CLI/CLI.hpp>
#include <string>

#include "cli/constraint_flags.h"

namespace folio::cli {

struct GrammarFlags {
  ConstraintFlags constraint;
  std::string whitespace = "flexible";  // JSON: "flexible" (the server's) or "strict"
  bool check = false;
};

CLI::App* AddGrammarCommand(CLI::App& app, GrammarFlags& flags);
int RunGrammar(const GrammarFlags& flags);

}  // namespace folio::cli

#endif  // FOLIO_CLI_GRAMMAR_COMMAND_H_
