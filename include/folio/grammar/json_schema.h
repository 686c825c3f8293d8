// JSON Schema as GBNF: the grammar of the JSON texts a schema accepts.
//
// Drafts 4 to 2020-12 as JSONSchemaBench's schemas use them. The grammar
// accepts only instances the schema accepts, and every valid instance
// written in the forms listed under "Forms" below. Enforced:
//   type (one or a list; a schema without type takes the types its
//     keywords imply: properties / required / ... -> object, items /
//     minItems / ... -> array, minLength / pattern / format -> string,
//     minimum / ... -> number; none: any value. This is narrower than JSON
//     Schema, where such keywords do not constrain other types, and is
//     what llama.cpp and OpenAI do.)
//   enum, const (values of any type; filtered by type; other keywords
//     beside them are refused)
//   anyOf; oneOf only where its alternatives are provably disjoint:
//     different types, different enum/const values, objects with a
//     property both require whose enum/const values differ, or a key one
//     requires that the other forbids (false, or undeclared under
//     additionalProperties false) -- else refused; and oneOf whose
//     alternatives only list `required` keys, as an anyOf of alternative i
//     with, for each other j, one key of j's list that i does not require
//     absent (at most 64 such objects; a list that contains another's can
//     never be the only complete one). Keywords beside anyOf / oneOf apply to each alternative
//     (merged as for allOf).
//   allOf and $ref with sibling keywords (draft 2019+ semantics: both
//     apply): the parts are merged into one schema. type intersects;
//     properties union (a property on both sides merges its schemas; a
//     property on one side only also meets the other side's
//     additionalProperties, so allOf [{additionalProperties: false}, {b}]
//     forbids b, as JSON Schema says); required unions; additionalProperties
//     merge; minLength/minItems/minProperties take the larger,
//     maxLength/... the smaller; minimum/maximum/exclusive* the tighter
//     (not with draft 4's boolean exclusive forms); enum intersects;
//     items (schemas) merge; equal keywords stay; anything else that
//     differs (two patterns, two formats, two anyOfs, ...) is refused.
//   $ref to "#", "#/$defs/..", "#/definitions/.." and any other local JSON
//     pointer (~0 ~1 and %-escapes; a ref prefixed by the root's $id is
//     local); recursion allowed through a rule reference; a cycle of refs
//     that matches nothing before recursing is kInvalidArgument.
//   properties (in declared order), required (a required key that is not
//     declared takes additionalProperties' schema), additionalProperties
//     (false, true or a schema; true is the default), minProperties /
//     maxProperties (a bounded repetition of additional properties; with
//     declared properties, a rule per position and count, refused above
//     64 unless the declared properties already settle the count).
//   patternProperties (searched, as pattern is) with additionalProperties
//     false: the undeclared members are those whose key matches a pattern,
//     all patterns sharing one schema, and no declared or required key may
//     match one; with other keys open, only patterns whose schema takes any
//     value (they constrain nothing). Else refused, as is merging it
//     (allOf) with another side that declares members differently.
//   items / prefixItems (and draft 4's array form of items with
//     additionalItems), minItems, maxItems; uniqueItems false (true is
//     refused).
//   minLength, maxLength (characters; an escape is one), pattern
//     (regex.h; refused together with minLength/maxLength or format),
//     format: date, time, date-time (RFC 3339; T and Z upper case; no leap
//     second; year 0000 excluded), uuid, ipv4 (no leading zeros), ipv6
//     (RFC 4291 text forms, no zone), hostname (RFC 1123: up to 3 labels
//     of at most 63 characters or 4 to 8 of at most 30, so at most 253 in
//     all; the last label starts with a letter), email (a dot-atom local
//     part "@" a hostname: no quoted local parts or address literals), uri
//     (RFC 3986 absolute URIs without IPvFuture hosts). Other standard
//     formats are refused, formats no draft defines ignored (below);
//     format with minLength/maxLength only for the fixed-length formats
//     (date, uuid).
//   minimum, maximum, exclusiveMinimum, exclusiveMaximum (draft 4's boolean
//     form too) on integers and numbers, exactly (any decimal bound: a
//     digit-by-digit range over the integer part and, where it meets a
//     bound, over the fraction digits); multipleOf 1 only (an integer).
//   true (any value); false where it can be honoured: a property whose
//     schema is false cannot appear (an object that requires it matches
//     nothing), an item whose schema is false ends the array there. A
//     schema that matches nothing at the root or behind a $ref is refused
//     (GBNF has no empty language).
// Accepted and ignored because they do not constrain an instance:
// annotations (title, description, $schema, $id, id, $comment, examples,
// default, deprecated, readOnly, writeOnly, $anchor, and the content
// keywords contentEncoding / contentMediaType / contentSchema, annotations
// since 2019-09), $defs and definitions (they hold schemas for $refs), and
// every key that is no JSON Schema keyword at all (x-*, a generator's own
// "example", "_format", "javaType", ...), which JSON Schema says to ignore.
// A format no draft defines ("url", "byte", "semver", ...) is an
// annotation too: the string is any string, and it implies no type. Every
// keyword of drafts 3 to 2020-12 that asserts something folio does not
// enforce (not, if/then/else, propertyNames,
// dependentRequired, dependentSchemas, dependencies, contains,
// unevaluated*, $dynamicRef, $recursiveRef, draft 3's extends / disallow /
// divisibleBy) and every standard format not listed above (duration,
// iri, json-pointer, regex, ...) is refused with kUnimplemented naming it
// and where it sits (a JSON pointer), never ignored: a grammar that accepts
// more than the schema would be wrong silently.
//
// Forms. A valid instance may still be refused for how it is written:
// - Whitespace: as JsonSchemaOptions says.
// - Property order: properties come in the order the schema declares them
//   (required or not), then additional properties; that is why the schema
//   is an ordered_json. An additional property's key is any string but a
//   declared key; where keys are declared it is written without
//   backslash escapes (an escape could spell a declared key). Two
//   additional properties may share a key (JSON leaves duplicates to the
//   reader).
// - enum / const values and declared keys are written canonically: strings
//   with only the escapes JSON requires (\" \\ \b \f \n \r \t, else
//   \u00xx), numbers as nlohmann::json serializes them (1.0 stays 1.0),
//   containers with the whitespace of the mode.
// - Integers are written without fraction or exponent (1.0 is not taken
//   for an integer); "-0" is zero. Numbers with bounds are written without
//   an exponent, except under only ">= 0" or "> 0".
// Limits: max_depth (schema nesting) and max_output_bytes, and a count
// (maxLength, maxItems, ...) above 10000, the grammar's repeat limit, are
// kResourceExhausted.
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
