#include "folio/grammar/grammar.h"

#include <utility>

#include "grammar/compiled.h"
#include "grammar/gbnf_parser.h"
#include "grammar/matcher_session.h"

namespace folio::grammar {

Grammar::Grammar(std::unique_ptr<const CompiledGrammar> compiled)
    : compiled_(std::move(compiled)) {}

Result<std::shared_ptr<const Grammar>> Grammar::FromGbnf(std::string_view gbnf,
                                                         const GrammarLimits& limits,
                                                         const TokenVocabulary& vocabulary) {
  FOLIO_ASSIGN_OR_RETURN(std::unique_ptr<CompiledGrammar> compiled,
                         CompileGbnf(gbnf, limits, vocabulary));
  return std::shared_ptr<const Grammar>(new Grammar(std::move(compiled)));
}

bool Grammar::Matches(std::string_view text) const {
  MatcherSession session(*compiled_, nullptr, nullptr);
  const uint32_t end = session.StepBytes(session.Start(), text);
  return end != MatcherSession::kDead && session.Accepting(end);
}

uint64_t Grammar::num_rules() const { return compiled_->rule_names.size(); }
uint64_t Grammar::num_elements() const { return compiled_->elements.size(); }

}  // namespace folio::grammar
