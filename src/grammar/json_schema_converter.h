// The JSON Schema walk's state, shared by json_schema.cc (the walk, refs,
// combinators, enums, output) and json_schema_types.cc (numbers, strings,
// objects, arrays).
#ifndef FOLIO_GRAMMAR_JSON_SCHEMA_CONVERTER_H_
#define FOLIO_GRAMMAR_JSON_SCHEMA_CONVERTER_H_

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "folio/grammar/json_schema.h"
#include "grammar/json_schema_internal.h"

namespace folio::grammar::json_schema_internal {

// A GBNF expression, atomic (a rule name or one literal) where the walk
// returns it; nullopt: the schema matches nothing (a false schema).
using Expr = std::optional<std::string>;

constexpr uint64_t kMaxRepeat = 10000;        // GrammarLimits::max_repeat
inline constexpr char kQuote[] = "\"\\\"\"";  // the GBNF literal for one '"'

// Clears a set for a scope and restores it after.
class ClearedScope {
 public:
  explicit ClearedScope(std::set<std::string>* set) : set_(set), saved_(std::move(*set)) {
    set_->clear();
  }
  ~ClearedScope() { *set_ = std::move(saved_); }
  ClearedScope(const ClearedScope&) = delete;
  ClearedScope& operator=(const ClearedScope&) = delete;

 private:
  std::set<std::string>* set_;
  std::set<std::string> saved_;
};

std::string JsonText(const Json& v);
std::string EscapeToken(std::string_view token);
// "#/properties/a/items" -> "a-items": a readable rule name.
std::string NameFromPointer(std::string_view ptr);
// A GBNF repetition suffix: * + ? {m} {m,} {m,n}.
std::string Repeat(uint64_t lo, std::optional<uint64_t> hi);
// `piece` repeated lo to hi times ("" when hi is 0).
std::string RepeatedGroup(const std::string& piece, uint64_t lo, std::optional<uint64_t> hi);
std::string Alternatives(const std::vector<std::string>& alts);

class Converter {
 public:
  Converter(const Json& root, const JsonSchemaOptions& options) : root_(root), options_(options) {
    for (const char* name : {"ws", "value", "object", "member", "array", "string", "char", "number",
                             "integer", "boolean", "null", "key-char"}) {
      reserved_.insert(name);
    }
    for (const LibraryRule& r : FormatRules()) reserved_.insert(r.name);
    reserved_.insert("root");
  }

  Result<std::string> Run();

  std::string ObjectOnly() { return Render(Use("object")); }

 private:
  // ---- Output ----

  std::string Ws() { return options_.whitespace_flexible ? Use("ws") : ""; }
  std::string Comma() {
    if (options_.whitespace_flexible) return Seq({Use("ws"), "\",\"", Use("ws")});
    return options_.item_separator.empty() ? "" : Literal(options_.item_separator);
  }
  std::string Colon() {
    if (options_.whitespace_flexible) return Seq({Use("ws"), "\":\"", Use("ws")});
    return options_.key_separator.empty() ? "" : Literal(options_.key_separator);
  }
  std::string Use(const std::string& library_rule) {
    used_.insert(library_rule);
    return library_rule;
  }

  // A name for a new rule from `hint`; an existing rule of the same name
  // and body is reused.
  std::string AddRule(const std::string& hint, const std::string& body);
  // The rule for the schema node at `ptr`: the name a $ref reserved for
  // it when there is one.
  std::string NodeRule(const std::string& ptr, const std::string& body);

  std::string Render(const std::string& root_body);

  std::map<std::string, LibraryRule> LibraryRules() const;

  // ---- The walk ----

  Status CheckKeywords(const Json& s, const std::string& ptr);

  // Whether `s` has a keyword that constrains, besides those in `except`.
  static bool HasConstraints(const Json& s, std::initializer_list<std::string_view> except) {
    for (const auto& [key, value] : s.items()) {
      if (IsAnnotation(key, value)) continue;
      if (std::find(except.begin(), except.end(), key) != except.end()) continue;
      return true;
    }
    return false;
  }

  static Json WithoutKey(const Json& s, const char* key) {
    Json out = s;
    out.erase(key);
    return out;
  }

  Result<Expr> Visit(const Json& s, const std::string& ptr, uint64_t depth);

  Result<Expr> VisitRef(const Json& ref, const std::string& ptr, uint64_t depth);

  Result<Expr> VisitAllOf(const Json& s, const std::string& ptr, uint64_t depth);

  Result<Expr> VisitAnyOf(const Json& s, const std::string& ptr, uint64_t depth);

  // The alternation of `alts` (anyOf, or a oneOf shown disjoint), each
  // visited at ptr/key/i.
  Result<Expr> VisitAlternatives(const std::vector<Json>& alts, const std::string& ptr,
                                 const char* key, uint64_t depth);

  // A oneOf whose alternatives only list `required` keys (the shapes live
  // in the siblings) as an anyOf of disjoint objects: alternative i with,
  // for every other j, one of j's keys that i does not require absent.
  // nullopt when the alternatives are not of that form or the expansion
  // passes kMaxOneOfVariants.
  Result<std::optional<std::vector<Json>>> OneOfOfRequiredSets(const Json& alts,
                                                               const Json& siblings,
                                                               const std::string& ptr);

  Result<uint32_t> Types(const Json& s, const std::string& ptr);

  // ---- enum / const ----

  // The text of a value in this whitespace mode, as GBNF pieces.
  void AppendValue(const Json& v, std::string* lit, std::vector<std::string>* pieces);

  std::string ValueExpr(const Json& v);

  static uint32_t ValueTypeBits(const Json& v);

  Result<Expr> VisitEnum(const Json& s, const std::string& ptr);

  Result<Expr> VisitTypes(const Json& s, const std::string& ptr, uint64_t depth);

  // A non-negative integer keyword (minLength, ...), absent: nullopt.
  static Result<std::optional<uint64_t>> Count(const Json& s, const char* key,
                                               const std::string& ptr);

  static Status CheckRepeat(std::optional<uint64_t> n, const char* what, const std::string& ptr) {
    if (n && *n > kMaxRepeat) {
      return Status::ResourceExhausted(std::string(what) + " " + std::to_string(*n) + " at " + ptr +
                                       " is above the grammar's repeat limit (" +
                                       std::to_string(kMaxRepeat) + ")");
    }
    return Status::Ok();
  }

  Result<Expr> VisitNumber(const Json& s, const std::string& ptr, bool integer_only);
  Result<Expr> VisitString(const Json& s, const std::string& ptr);
  Result<Expr> VisitObject(const Json& s, const std::string& ptr, uint64_t depth);
  Result<Expr> VisitArray(const Json& s, const std::string& ptr, uint64_t depth);
  Result<Expr> CountedMembers(const std::vector<std::string>& kvs, const std::vector<bool>& req,
                              const std::string& extra_kv, uint64_t lo, std::optional<uint64_t> hi,
                              const std::string& ptr);
  std::string AdditionalKey(const std::vector<std::string>& declared, const std::string& ptr);

  // patternProperties, where a grammar can hold it exactly: with
  // additionalProperties false, the undeclared members are those whose key
  // matches a pattern (all patterns sharing one schema), and no declared or
  // required key matches one; otherwise only patterns whose schema takes
  // any value (they constrain nothing). `key` is the GBNF of such a key,
  // `value` of its value; nullopt when no pattern constrains anything.
  struct PatternMembers {
    std::string key;
    Expr value;
  };
  Result<std::optional<PatternMembers>> VisitPatternProperties(
      const Json& s, const std::vector<std::string>& declared, bool closed, const std::string& ptr,
      uint64_t depth);

  const Json& root_;
  const JsonSchemaOptions& options_;
  std::vector<std::pair<std::string, std::string>> rules_;  // in creation order
  std::map<std::string, size_t> rule_index_;
  std::set<std::string> reserved_;                // library rule names and root
  std::set<std::string> used_;                    // library rules named
  std::map<std::string, std::string> ref_rules_;  // target pointer -> rule
  std::set<std::string> in_progress_;             // refs being visited
  std::set<std::string> unguarded_;               // refs reachable without consuming a token
  uint64_t bytes_ = 0;
  std::optional<std::string> root_body_;  // the root node's rule, named root
};

}  // namespace folio::grammar::json_schema_internal

#endif  // FOLIO_GRAMMAR_JSON_SCHEMA_CONVERTER_H_
