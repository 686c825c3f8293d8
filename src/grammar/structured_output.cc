#include "folio/grammar/structured_output.h"

#include "folio/grammar/regex.h"
#include "grammar/json_schema_internal.h"

namespace folio::grammar {

namespace {

// The cache key: the kind, then the constraint's content, each string
// length-prefixed so no two constraints share a key.
std::string Key(const StructuredOutput& o) {
  std::string key(KindName(o.kind));
  auto add = [&key](std::string_view s) {
    key += '\0';
    key += std::to_string(s.size());
    key += ':';
    key += s;
  };
  switch (o.kind) {
    case StructuredOutput::Kind::kJsonSchema:
      add(o.schema.dump());
      break;
    case StructuredOutput::Kind::kJsonObject:
      break;
    case StructuredOutput::Kind::kRegex:
    case StructuredOutput::Kind::kGrammar:
      add(o.text);
      break;
    case StructuredOutput::Kind::kChoice:
      for (const std::string& c : o.choices) add(c);
      break;
  }
  return key;
}

}  // namespace

std::string_view KindName(StructuredOutput::Kind kind) {
  switch (kind) {
    case StructuredOutput::Kind::kJsonSchema:
      return "json_schema";
    case StructuredOutput::Kind::kJsonObject:
      return "json_object";
    case StructuredOutput::Kind::kRegex:
      return "regex";
    case StructuredOutput::Kind::kChoice:
      return "choice";
    case StructuredOutput::Kind::kGrammar:
      return "grammar";
  }
  return "?";
}

Result<std::string> StructuredOutputToGbnf(const StructuredOutput& output,
                                           const JsonSchemaOptions& json) {
  switch (output.kind) {
    case StructuredOutput::Kind::kJsonSchema:
      return JsonSchemaToGbnf(output.schema, json);
    case StructuredOutput::Kind::kJsonObject:
      return JsonObjectGbnf(json);
    case StructuredOutput::Kind::kRegex: {
      FOLIO_ASSIGN_OR_RETURN(const std::string expr, RegexToGbnf(output.text));
      return "root ::= " + expr + "\n";
    }
    case StructuredOutput::Kind::kGrammar:
      return output.text;
    case StructuredOutput::Kind::kChoice: {
      if (output.choices.empty())
        return Status::InvalidArgument("choice: no strings to choose from");
      if (output.choices.size() > kMaxChoices) {
        return Status::InvalidArgument("choice: " + std::to_string(output.choices.size()) +
                                       " strings, more than " + std::to_string(kMaxChoices));
      }
      std::string gbnf = "root ::= ";
      for (size_t i = 0; i < output.choices.size(); ++i) {
        if (i > 0) gbnf += " | ";
        gbnf += json_schema_internal::Literal(output.choices[i]);
      }
      gbnf += '\n';
      return gbnf;
    }
  }
  return Status::InvalidArgument("unknown structured output kind");
}

GrammarCache::GrammarCache(uint64_t capacity, GrammarLimits limits, JsonSchemaOptions json,
                           TokenVocabulary vocabulary)
    : capacity_(capacity),
      limits_(limits),
      json_(std::move(json)),
      vocabulary_(std::move(vocabulary)) {}

Result<std::shared_ptr<const Grammar>> GrammarCache::Get(const StructuredOutput& output) {
  std::string key = Key(output);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->second;
    }
    ++misses_;
  }
  // Compile outside the lock: other requests' cache hits never wait for it.
  FOLIO_ASSIGN_OR_RETURN(const std::string gbnf, StructuredOutputToGbnf(output, json_));
  FOLIO_ASSIGN_OR_RETURN(std::shared_ptr<const Grammar> grammar,
                         Grammar::FromGbnf(gbnf, limits_, vocabulary_));
  if (capacity_ == 0) return grammar;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second->second;
  lru_.emplace_front(key, grammar);
  index_.emplace(std::move(key), lru_.begin());
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return grammar;
}

GrammarCache::Stats GrammarCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Stats{hits_, misses_, lru_.size()};
}

}  // namespace folio::grammar
