// Pieces of the JSON Schema to GBNF conversion shared between its files:
// json_schema.cc (the walk), json_schema_numbers.cc (numeric ranges),
// json_schema_formats.cc (string formats), json_schema_merge.cc (allOf
// merging and oneOf disjointness).
#ifndef FOLIO_GRAMMAR_JSON_SCHEMA_INTERNAL_H_
#define FOLIO_GRAMMAR_JSON_SCHEMA_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/status.h"

namespace folio::grammar::json_schema_internal {

using Json = nlohmann::ordered_json;

// A GBNF literal ("...") matching exactly `bytes`.
std::string Literal(std::string_view bytes);

// Joins the non-empty pieces with spaces (a GBNF sequence).
std::string Seq(std::initializer_list<std::string_view> pieces);

// ---- Numbers (json_schema_numbers.cc) ----

// An exact decimal: sign, integer digits (no leading zeros; "0" for zero)
// and fraction digits (no trailing zeros). Zero is never negative.
struct Decimal {
  bool negative = false;
  std::string int_digits = "0";
  std::string frac_digits;
};

// The decimal a schema number stands for: an integer exactly, a float as
// the shortest text that reads back as the same double (what the schema's
// author wrote, for any reasonably written bound).
Result<Decimal> DecimalFromJson(const Json& number);
int CompareDecimals(const Decimal& a, const Decimal& b);

struct Bound {
  Decimal value;
  bool exclusive = false;
};

// A GBNF expression (atomic: safe to juxtapose) for the numbers between the
// bounds (either may be absent), written as `integer_only` ? canonical
// integers : numbers without an exponent (except where the bounds are only
// "> 0" or ">= 0", which an exponent cannot cross). nullopt: no number
// satisfies the bounds.
std::optional<std::string> NumberRangeGbnf(const std::optional<Bound>& lo,
                                           const std::optional<Bound>& hi, bool integer_only);

// ---- Library rules: primitives and formats (json_schema_formats.cc) ----

struct LibraryRule {
  std::string name;
  std::string body;
  std::vector<std::string> deps;  // other library rules the body names
};

// The rules behind the string formats; each format's top rule matches the
// text between the quotes.
const std::vector<LibraryRule>& FormatRules();
// The top rule for `format`, or kUnimplemented naming it.
Result<std::string> FormatRuleName(std::string_view format);
// Whether a draft from 3 to 2020-12 defines the format. Other names
// ("url", "byte", "semver", ...) are annotations: ignored, as JSON Schema
// says of formats it does not know.
bool IsStandardFormat(std::string_view format);
// The length of every text a format's rule matches, where it is fixed.
std::optional<uint64_t> FormatFixedLength(std::string_view format);

// ---- allOf merging and oneOf disjointness (json_schema_merge.cc) ----

// Resolves a local $ref (a "#..." JSON pointer) against the root document.
// kInvalidArgument when it resolves nowhere, kUnimplemented when remote.
// Returns the target and its canonical pointer ("#/a/b").
struct ResolvedRef {
  const Json* target = nullptr;
  std::string pointer;
};
Result<ResolvedRef> ResolveRef(const Json& root, const Json& ref, std::string_view at);

// Whether a key constrains nothing: an annotation (title, examples, ...),
// a $defs container, or a key that is no JSON Schema keyword at all (x-*,
// a generator's own keys), which JSON Schema says to ignore.
bool IsIgnoredKeyword(std::string_view key);
// Whether a member constrains nothing: an ignored keyword, or a "format"
// no draft defines (url, semver, ...), which is an annotation too. Every
// "does this schema constrain anything" question asks this.
bool IsAnnotation(std::string_view key, const Json& value);
// Whether folio enforces the keyword (json_schema.h). A keyword that is
// neither ignored nor enforced is refused by name.
bool IsEnforcedKeyword(std::string_view key);

// The intersection of two schemas as one schema, where it can be written
// without loss (see json_schema.h); kUnimplemented where it cannot.
// `root` resolves $refs met at the top of either side.
Result<Json> MergeSchemas(const Json& root, const Json& a, const Json& b, std::string_view at,
                          int depth = 0);

// Whether no instance can match both schemas (under folio's reading of a
// schema, where a type-less schema takes the types its keywords imply). false
// means "could not show it".
bool ProvablyDisjoint(const Json& root, const Json& a, const Json& b);

// The JSON types a schema's keywords imply (a type-less schema): bits of
// kTypeBits, 0 when none is implied.
enum TypeBit : uint32_t {
  kNull = 1,
  kBoolean = 2,
  kObject = 4,
  kArray = 8,
  kString = 16,
  kInteger = 32,
  kNonInteger = 64,  // a number with a fraction
};
constexpr uint32_t kAllTypes = 127;
uint32_t ImpliedTypes(const Json& schema);
// The bits for one "type" name; 0 for an unknown name.
uint32_t TypeBitsForName(std::string_view name);

}  // namespace folio::grammar::json_schema_internal

#endif  // FOLIO_GRAMMAR_JSON_SCHEMA_INTERNAL_H_
