// libFuzzer target for the JSON Schema and regular-expression converters
// (folio/grammar/json_schema.h, regex.h): the input's first byte picks the
// source (even: a JSON Schema, odd: a regex, in search / JSON-string mode
// by its bits), the rest is its text. Never a crash, a hang, unbounded
// memory or a sanitizer report; errors come back with the documented
// codes; and what a converter returns is GBNF that compiles (or passes a
// limit, by name).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "folio/core/check.h"
#include "folio/grammar/grammar.h"
#include "folio/grammar/json_schema.h"
#include "folio/grammar/regex.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using folio::StatusCode;
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  folio::Result<std::string> gbnf = [&]() -> folio::Result<std::string> {
    if ((mode & 1) == 0) {
      const nlohmann::ordered_json schema =
          nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (schema.is_discarded()) return folio::Status::InvalidArgument("not JSON");
      folio::grammar::JsonSchemaOptions o;
      o.whitespace_flexible = (mode & 2) != 0;
      o.max_output_bytes = 1 << 16;
      o.max_depth = 32;
      return folio::grammar::JsonSchemaToGbnf(schema, o);
    }
    folio::grammar::RegexOptions o;
    o.search = (mode & 2) != 0;
    o.json_string = (mode & 4) != 0;
    o.max_repeat = 64;
    FOLIO_ASSIGN_OR_RETURN(std::string re, folio::grammar::RegexToGbnf(text, o));
    return "root ::= ( " + re + " )\n";
  }();
  if (!gbnf) {
    const StatusCode c = gbnf.error().code();
    FOLIO_CHECK(c == StatusCode::kInvalidArgument || c == StatusCode::kUnimplemented ||
                    c == StatusCode::kResourceExhausted || c == StatusCode::kOutOfRange,
                gbnf.error().ToString());
    return 0;
  }
  folio::grammar::GrammarLimits limits;
  limits.max_elements = 1 << 16;
  folio::Result<std::shared_ptr<const folio::grammar::Grammar>> g =
      folio::grammar::Grammar::FromGbnf(*gbnf, limits);
  FOLIO_CHECK(g || g.error().code() == StatusCode::kResourceExhausted,
              "converter output does not compile: ", g.error().ToString(), "\n", *gbnf);
  if (g) (void)(*g)->Matches(text);
  return 0;
}
