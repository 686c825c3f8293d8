#include "cli/grammar_command.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/engine_flags.h"
#include "folio/grammar/grammar.h"
#include "folio/grammar/structured_output.h"

namespace folio::cli {
namespace {

constexpr std::string_view kCommand = "grammar";

}  // namespace

CLI::App* AddGrammarCommand(CLI::App& app, GrammarFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "grammar", "print the GBNF a structured-output constraint compiles to, or check texts");
  AddConstraintFlags(*cmd, f.constraint);
  cmd->add_option("--whitespace", f.whitespace,
                  "JSON whitespace: flexible (as the server: none, a space, or a newline and an "
                  "indent) or strict (none, except \", \" and \": \")")
      ->check(CLI::IsMember({"flexible", "strict"}));
  cmd->add_flag("--check", f.check,
                "read one JSON string per line from standard input; print true or false for each");
  return cmd;
}

int RunGrammar(const GrammarFlags& f) {
  Result<std::optional<Constraint>> c = ConstraintFromFlags(f.constraint);
  if (!c) return Fail(kCommand, c.error());
  if (!*c) {
    return Fail(kCommand, Status::InvalidArgument(
                              "give one of --json-schema, --regex, --choice or --grammar"));
  }
  grammar::JsonSchemaOptions json;
  json.whitespace_flexible = f.whitespace == "flexible";
  Result<std::string> gbnf = grammar::StructuredOutputToGbnf((*c)->output, json);
  if (!gbnf) return Fail(kCommand, gbnf.error().WithContext((*c)->flag));
  Result<std::shared_ptr<const grammar::Grammar>> g = grammar::Grammar::FromGbnf(*gbnf);
  if (!g) return Fail(kCommand, g.error().WithContext((*c)->flag));
  if (!f.check) {
    std::cout << *gbnf;
    if (!gbnf->empty() && gbnf->back() != '\n') std::cout << "\n";
    return 0;
  }
  std::string line;
  for (uint64_t n = 1; std::getline(std::cin, line); ++n) {
    const nlohmann::json text = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!text.is_string()) {
      return Fail(kCommand, Status::InvalidArgument("standard input line " + std::to_string(n) +
                                                    " is not a JSON string"));
    }
    std::cout << ((*g)->Matches(text.get<std::string>()) ? "true" : "false") << "\n";
  }
  return 0;
}

}  // namespace folio::cli
