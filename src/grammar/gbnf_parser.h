// GBNF text to the compiled form (compiled.h): parsing, lowering of
// literals, classes, groups and repetition to flat rule alternatives, and
// the checks that keep matching finite (defined rules, a root, no left
// recursion, no unbounded repetition of an empty match); token references
// resolved against the vocabulary.
#ifndef FOLIO_GRAMMAR_GBNF_PARSER_H_
#define FOLIO_GRAMMAR_GBNF_PARSER_H_

#include <memory>
#include <string_view>

#include "folio/core/status.h"
#include "folio/grammar/grammar.h"
#include "grammar/compiled.h"

namespace folio::grammar {

// Errors as Grammar::FromGbnf documents them.
Result<std::unique_ptr<CompiledGrammar>> CompileGbnf(std::string_view gbnf,
                                                     const GrammarLimits& limits,
                                                     const TokenVocabulary& vocabulary);

}  // namespace folio::grammar

#endif  // FOLIO_GRAMMAR_GBNF_PARSER_H_
