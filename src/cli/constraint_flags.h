// The structured-output flags of `folio generate` and `folio grammar`: at
// most one of --json-schema FILE, --regex RE, --choice S (repeated) and
// --grammar FILE.
#ifndef FOLIO_CLI_CONSTRAINT_FLAGS_H_
#define FOLIO_CLI_CONSTRAINT_FLAGS_H_

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "folio/core/status.h"
#include "folio/grammar/structured_output.h"

namespace folio::cli {

struct ConstraintFlags {
  // The output must be an instance of the JSON Schema in this file, match
  // this regular expression, be one of these strings, or be a sentence of
  // the GBNF grammar in this file.
  std::string json_schema_file;
  std::string regex;
  std::vector<std::string> choices;
  std::string grammar_file;
};

// Adds the four flags, each excluding the others.
void AddConstraintFlags(CLI::App& cmd, ConstraintFlags& flags);

struct Constraint {
  grammar::StructuredOutput output;
  std::string flag;  // the flag it came from, for error messages
};

// The constraint the flags give (files read), or nullopt when none is
// given. Errors: a file that cannot be read, a schema file that is not JSON.
Result<std::optional<Constraint>> ConstraintFromFlags(const ConstraintFlags& flags);

}  // namespace folio::cli

#endif  // FOLIO_CLI_CONSTRAINT_FLAGS_H_
