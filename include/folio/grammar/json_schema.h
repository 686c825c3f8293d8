// JSON Schema as GBNF: the grammar of the JSON texts a schema accepts.
//
// Drafts 4 to 2020-12 as JSONSchemaBench's schemas use them. Enforced:
//   type (one or a list), enum, const, anyOf, oneOf (as anyOf when the
//   alternatives cannot both match, else refused), allOf (merged when the
//   parts combine simply, else refused), $ref to "#", "#/$defs/..",
//   "#/definitions/.." and other local JSON pointers (recursion allowed),
//   properties (in declared order), required, additionalProperties (false,
//   true or a schema), items / prefixItems (and draft 4's array form of
//   items with additionalItems), minItems, maxItems, minLength,
//   maxLength, pattern (regex.h), format (date-time, date, time, email,
//   uuid, uri, ipv4, ipv6, hostname), minimum, maximum, exclusiveMinimum,
//   exclusiveMaximum (draft 4's boolean form too) on integers and numbers
//   (as far as a grammar can: integer bounds exactly, number bounds on the
//   integer part), minProperties / maxProperties where properties are
//   known.
// Accepted and ignored because they do not constrain an instance: title,
// description, $schema, $id, id, $comment, examples, default, deprecated,
// readOnly, writeOnly, and any key starting with "x-". Every other keyword
// is refused with kUnimplemented naming it and where it sits (a JSON
// pointer), never ignored: a grammar that accepts more than the schema
// would be wrong silently.
//
// Property order: properties come in the order the schema declares them
// (required or not), then additional properties; that is why the schema
// is an ordered_json.
#ifndef FOLIO_GRAMMAR_JSON_SCHEMA_H_
#define FOLIO_GRAMMAR_JSON_SCHEMA_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "folio/core/status.h"

namespace folio::grammar {

struct JsonSchemaOptions {
  // Whitespace between JSON tokens. Flexible (the default): nothing, one
  // space, or a newline and at most max_indent spaces or tabs
  // (`( " " | "\n" [ \t]{0,max_indent} )?`), so pretty-printed output
  // works but a small model cannot loop on blank lines. Not flexible: no
  // whitespace, except exactly item_separator between items and members
  // and key_separator between a key and its value (llguidance's
  // whitespace_flexible = false).
  bool whitespace_flexible = true;
  uint64_t max_indent = 20;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  uint64_t max_output_bytes = uint64_t{1} << 22;  // the GBNF produced
  uint64_t max_depth = 128;                       // schema nesting
};

// The grammar (with a `root` rule) of the instances of `schema`.
// Errors: kInvalidArgument for a malformed schema (a keyword of the wrong
// type, a $ref that resolves nowhere), kUnimplemented for a keyword or
// value folio does not enforce, kResourceExhausted for a limit passed;
// each names the keyword and its JSON pointer.
Result<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema,
                                     const JsonSchemaOptions& options = {});

// The grammar of any JSON object (OpenAI's json_object response format),
// with the same whitespace rules.
std::string JsonObjectGbnf(const JsonSchemaOptions& options = {});

}  // namespace folio::grammar

#endif  // FOLIO_GRAMMAR_JSON_SCHEMA_H_
