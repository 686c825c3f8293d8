// A request's output constraint as front ends receive it (a JSON Schema,
// any JSON object, a regular expression, a choice among strings or a GBNF
// grammar), its grammar, and a thread-safe cache of compiled grammars
// keyed by the constraint, so a schema sent with every request compiles
// once.
#ifndef FOLIO_GRAMMAR_STRUCTURED_OUTPUT_H_
#define FOLIO_GRAMMAR_STRUCTURED_OUTPUT_H_

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "folio/core/status.h"
#include "folio/grammar/grammar.h"
#include "folio/grammar/json_schema.h"

namespace folio::grammar {

struct StructuredOutput {
  enum class Kind : uint8_t {
    kJsonSchema,  // schema: the output is a JSON instance of it
    kJsonObject,  // the output is any JSON object
    kRegex,       // text: the output matches the whole pattern (regex.h)
    kChoice,      // choices: the output is exactly one of them
    kGrammar,     // text: GBNF (grammar.h)
  };
  Kind kind = Kind::kJsonObject;
  nlohmann::ordered_json schema;
  std::string text;
  std::vector<std::string> choices;
};

// "json_schema", "json_object", "regex", "choice" or "grammar".
std::string_view KindName(StructuredOutput::Kind kind);

// Most strings in a choice.
inline constexpr uint64_t kMaxChoices = 10000;

// The GBNF of `output` (a GBNF source is returned as is). JSON uses
// `json`'s whitespace rules. Errors: the converters' (kInvalidArgument,
// kUnimplemented naming the keyword, kResourceExhausted); an empty choice
// list or more than kMaxChoices is kInvalidArgument.
Result<std::string> StructuredOutputToGbnf(const StructuredOutput& output,
                                           const JsonSchemaOptions& json = {});

// Compiled grammars by constraint, least recently used dropped first.
// Errors are not kept. Safe to call from several threads; two threads
// asking for one new constraint at once may both compile it. Token
// references in a GBNF constraint resolve against `vocabulary` (one
// model's: a cache serves one vocabulary).
class GrammarCache {
 public:
  explicit GrammarCache(uint64_t capacity = 128, GrammarLimits limits = {},
                        JsonSchemaOptions json = {}, TokenVocabulary vocabulary = {});

  Result<std::shared_ptr<const Grammar>> Get(const StructuredOutput& output);

  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t size = 0;
  };
  Stats stats() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const Grammar>>;
  const uint64_t capacity_;
  const GrammarLimits limits_;
  const JsonSchemaOptions json_;
  const TokenVocabulary vocabulary_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace folio::grammar

#endif  // FOLIO_GRAMMAR_STRUCTURED_OUTPUT_H_
