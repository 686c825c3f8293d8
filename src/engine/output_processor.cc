#include "folio/engine/output_processor.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "folio/core/check.h"

namespace folio::engine {

std::string_view PoolingName(Pooling p) {
  switch (p) {
    case Pooling::kNone:
      return "none";
    case Pooling::kLast:
      return "last";
    case Pooling::kMean:
      return "mean";
    case Pooling::kCls:
      return "cls";
    case Pooling::kClassify:
      return "classify";
  }
  return "unknown";
}

std::optional<Pooling> PoolingFromName(std::string_view name) {
  for (Pooling p :
       {Pooling::kNone, Pooling::kLast, Pooling::kMean, Pooling::kCls, Pooling::kClassify}) {
    if (PoolingName(p) == name) return p;
  }
  return std::nullopt;
}

std::string_view FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
  }
  return "unknown";
}

uint64_t SampleSeed(uint64_t seed, uint64_t index) {
  if (index == 0) return seed;
  SplitMix64 mix(seed ^ (index * 0xD1B54A32D192ED03ULL));
  return mix.NextU64();
}

std::vector<std::string> GrammarTokenBytes(const tokenizer::Tokenizer& tokenizer,
                                           uint64_t vocab_size) {
  std::vector<std::string> bytes(vocab_size);
  const uint64_t known = std::min(vocab_size, tokenizer.vocab_size());
  for (uint64_t t = 0; t < known; ++t) {
    const auto id = static_cast<int32_t>(t);
    if (!tokenizer.IsSpecial(id)) bytes[t] = tokenizer.TokenBytes(id);
  }
  return bytes;
}

std::shared_ptr<const grammar::TokenTrie> OutputProcessor::token_trie() const {
  FOLIO_CHECK(tokenizer_ != nullptr, "a grammar needs the engine's tokenizer");
  if (!trie_) {
    trie_ = std::make_shared<const grammar::TokenTrie>(GrammarTokenBytes(*tokenizer_, vocab_size_));
  }
  return trie_;
}

Result<std::vector<std::vector<int32_t>>> OutputProcessor::BadWordsIds(
    std::span<const std::string> words) const {
  std::vector<std::vector<int32_t>> out;
  if (words.empty()) return out;
  if (tokenizer_ == nullptr) {
    return Status::InvalidArgument("bad_words need an engine with a tokenizer");
  }
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string_view word = words[i];
    const size_t first = word.find_first_not_of(' ');
    if (first == std::string_view::npos) {
      return Status::InvalidArgument("bad_words[" + std::to_string(i) + "] is only spaces");
    }
    // vLLM's rule: the word (leading spaces stripped) alone, and after one
    // space when that gives a different first token and as many tokens (a
    // word in the middle of text, where the space joins its first token).
    std::vector<int32_t> alone;
    for (const bool space : {false, true}) {
      Result<std::vector<int32_t>> ids =
          tokenizer_->Encode(std::string(space ? " " : "") + std::string(word.substr(first)),
                             /*add_special_tokens=*/false, /*allow_special=*/false);
      if (!ids.ok()) return ids.error().WithContext("bad_words[" + std::to_string(i) + "]");
      if (!space) {
        alone = *ids;
        out.push_back(std::move(*ids));
      } else if (!ids->empty() && !alone.empty() && (*ids)[0] != alone[0] &&
                 ids->size() == alone.size()) {
        out.push_back(std::move(*ids));
      }
    }
  }
  return out;
}

Result<std::vector<sampling::DryBreaker>> OutputProcessor::DryBreakers(
    const std::vector<std::string>& strings) const {
  if (tokenizer_ == nullptr) {
    return Status::InvalidArgument(
        "DRY (dry_multiplier > 0) needs an engine with a tokenizer: its sequence breakers are "
        "text");
  }
  if (token_bytes_.empty()) token_bytes_ = GrammarTokenBytes(*tokenizer_, vocab_size_);
  if (breakers_.empty() || strings != breaker_strings_) {
    FOLIO_ASSIGN_OR_RETURN(
        breakers_,
        sampling::DryBreakersFromText(
            strings, token_bytes_, [this](std::string_view text) -> Result<std::vector<int32_t>> {
              return tokenizer_->Encode(text, /*add_special_tokens=*/false,
                                        /*allow_special=*/false);
            }));
    breaker_strings_ = strings;
  }
  return breakers_;
}

Result<OutputProcessor::State> OutputProcessor::NewState(const RequestParams& params) const {
  State s;
  s.params = params;
  s.rng = SplitMix64(params.seed);
  if (tokenizer_ != nullptr) s.detok.emplace(*tokenizer_, params.skip_special_tokens);
  if (params.grammar) {
    s.matcher.emplace(params.grammar, token_trie());
    s.allowed.resize(sampling::TokenMaskWords(vocab_size_));
  }
  sampling::ProcessorParams& p = s.params.processors;
  FOLIO_ASSIGN_OR_RETURN(p.bad_words_ids, BadWordsIds(params.bad_words));
  p.dry_breakers.clear();
  if (p.dry.multiplier != 0.0) {
    FOLIO_ASSIGN_OR_RETURN(p.dry_breakers, DryBreakers(params.dry_sequence_breakers));
  }
  s.end_ids = StopTokenIds(params);
  return s;
}

OutputProcessor::State OutputProcessor::ForkState(const State& parent, uint64_t index) {
  FOLIO_CHECK(parent.text.empty() && parent.text_sent == 0,
              "a request forks after it produced text");
  State s = parent;
  s.params.seed = SampleSeed(s.params.seed, index);
  s.params.n = 1;
  s.rng = SplitMix64(s.params.seed);
  return s;
}

Result<OutputProcessor::State> OutputProcessor::RestoredState(const RequestParams& params,
                                                              uint64_t rng_state,
                                                              std::span<const int32_t> output,
                                                              uint64_t text_sent) const {
  FOLIO_ASSIGN_OR_RETURN(State s, NewState(params));
  s.rng = SplitMix64(rng_state);
  if (s.detok) {
    for (const int32_t t : output) s.text += s.detok->Push(t);
  }
  if (s.matcher) {
    // A stop id ends the request instead of reaching the matcher, so an
    // output that goes on is a prefix of a sentence, made of tokens the
    // matcher took (by their bytes or a token reference).
    const grammar::TokenTrie& trie = *token_trie();
    for (size_t i = 0; i < output.size(); ++i) {
      const int32_t t = output[i];
      if (t < 0 || static_cast<uint64_t>(t) >= trie.vocab_size() || IsStopToken(params, t) ||
          s.matcher->IsDone() || !s.matcher->AcceptToken(t)) {
        return Status::InvalidArgument("output token " + std::to_string(i) + " (id " +
                                       std::to_string(t) +
                                       ") does not continue the request's grammar");
      }
    }
  }
  if (text_sent > s.text.size()) {
    return Status::InvalidArgument("text_sent " + std::to_string(text_sent) + " exceeds the " +
                                   std::to_string(s.text.size()) + " bytes of its text");
  }
  s.text_sent = text_sent;
  return s;
}

std::string OutputProcessor::Text(std::span<const int32_t> tokens, bool skip_special_tokens) const {
  if (tokenizer_ == nullptr) return {};
  tokenizer::StreamingDecoder detok(*tokenizer_, skip_special_tokens);
  std::string text;
  for (const int32_t t : tokens) text += detok.Push(t);
  return text + detok.Flush();
}

Result<StepOutput> OutputProcessor::Process(State& s, std::span<const float> logits,
                                            uint64_t num_output_tokens,
                                            std::span<const int32_t> tokens,
                                            std::optional<int32_t> resample_draft) {
  StepOutput o;
  sampling::TokenMask allowed;  // empty: every token
  if (s.matcher) {
    if (!FillAllowed(s)) {
      // Nothing may follow and the grammar cannot end here (or it can,
      // but the request has no end-of-sequence id to say so).
      FlushText(s, o);
      o.finish = s.matcher->CanFinish() ? FinishReason::kStop : FinishReason::kAbort;
      return o;
    }
    allowed = s.allowed;
  }
  std::span<const float> row = logits;
  if (s.params.processors.active()) {
    FOLIO_CHECK(tokens.size() + 1 >= num_output_tokens, "a history of ", tokens.size(),
                " tokens for output token ", num_output_tokens);
    processed_.assign(logits.begin(), logits.end());
    const sampling::TokenHistory history{tokens, tokens.size() + 1 - num_output_tokens};
    sampling::ApplyLogitsProcessors(s.params.processors, history, s.end_ids, processed_, scratch_);
    row = processed_;
    if (!sampling::HasCandidate(row, allowed)) {
      // The processors (with a grammar's mask) ban every token.
      FlushText(s, o);
      o.finish = FinishReason::kAbort;
      return o;
    }
  }
  FOLIO_ASSIGN_OR_RETURN(
      int32_t token, resample_draft
                         ? sampling::AcceptOrResample<float>(row, s.params.sampling,
                                                             *resample_draft, s.rng, allowed)
                         : sampling::SelectToken<float>(row, s.params.sampling, s.rng, allowed));
  const bool stop_token = IsStopToken(s.params, token);
  if (s.matcher && !stop_token) {
    // The mask allowed the token (its bytes or a reference), so the
    // matcher takes it.
    FOLIO_CHECK(s.matcher->AcceptToken(token), "token ", token,
                " was allowed by the grammar's mask but refused by its matcher");
  }
  o.new_tokens = {token};
  if (s.params.logprobs) {
    FOLIO_ASSIGN_OR_RETURN(
        sampling::TokenLogprobs lp,
        sampling::ComputeLogprobs(logits, token, s.params.top_logprobs, allowed));
    o.logprobs.push_back(std::move(lp));
  }
  const bool may_stop = s.params.processors.min_tokens <= 0 ||
                        num_output_tokens >= static_cast<uint64_t>(s.params.processors.min_tokens);
  if (EmitText(s, token, may_stop, o)) {
    o.finish = FinishReason::kStop;
  } else if (stop_token || (s.matcher && s.matcher->IsDone())) {
    FlushText(s, o);
    o.finish = FinishReason::kStop;
  } else if (num_output_tokens == s.params.max_tokens) {
    FlushText(s, o);
    o.finish = FinishReason::kLength;
  }
  return o;
}

void OutputProcessor::AddPromptLogits(State& s, uint64_t first_position, uint64_t num_prompt_tokens,
                                      std::span<const float> logits, uint64_t vocab,
                                      StepOutput& out) {
  const uint64_t rows = logits.size() / vocab;
  for (uint64_t r = 0; r < rows; ++r) {
    const uint64_t pos = first_position + r;
    if (pos != s.prompt_logit_rows_sent || pos >= num_prompt_tokens) continue;
    const std::span<const float> row = logits.subspan(r * vocab, vocab);
    out.prompt_logits.insert(out.prompt_logits.end(), row.begin(), row.end());
    ++s.prompt_logit_rows_sent;
  }
}

bool OutputProcessor::FillAllowed(State& s) const {
  s.matcher->FillMask(s.allowed);
  // End-of-sequence and stop ids: exactly when the text is complete, or
  // where the grammar names the token (harmony's <|call|> ends a call and
  // is a stop id). The lists as they stand (StopTokenIds' union, without
  // building it every token: setting or clearing a bit twice is harmless).
  const bool can_finish = s.matcher->CanFinish();
  const auto mark = [&](const std::vector<int32_t>& ids) {
    for (const int32_t t : ids) {
      const auto u = static_cast<uint64_t>(t);
      if (t < 0 || u >= vocab_size_) continue;  // not a token of the row: never selected
      const uint64_t bit = uint64_t{1} << (u % 64);
      if (can_finish || s.matcher->NamesNext(t)) {
        s.allowed[u / 64] |= bit;
      } else {
        s.allowed[u / 64] &= ~bit;
      }
    }
  };
  mark(s.params.stop_token_ids);
  if (!s.params.ignore_eos) mark(s.params.eos_token_ids);
  return std::any_of(s.allowed.begin(), s.allowed.end(), [](uint64_t w) { return w != 0; });
}

bool OutputProcessor::EmitText(State& s, int32_t token, bool may_stop, StepOutput& out) {
  if (!s.detok) return false;
  s.text += s.detok->Push(token);
  // A stop string cannot start before text_sent: whatever might have
  // started one was held back.
  size_t stop = std::string::npos;
  size_t stop_size = 0;
  for (const std::string& stop_string : s.params.stop_strings) {
    if (!may_stop) break;
    const size_t at = s.text.find(stop_string, s.text_sent);
    if (at < stop) {
      stop = at;
      stop_size = stop_string.size();
    }
  }
  if (stop != std::string::npos) {
    s.text.resize(stop + (s.params.include_stop_str_in_output ? stop_size : 0));
    stop = s.text.size();
    out.text += s.text.substr(s.text_sent);
    s.text_sent = stop;
    return true;
  }
  // Hold back the longest tail that is the start of some stop string.
  const std::string_view unsent = std::string_view(s.text).substr(s.text_sent);
  size_t hold = 0;
  for (const std::string& stop_string : s.params.stop_strings) {
    for (size_t len = std::min(stop_string.size() - 1, unsent.size()); len > hold; --len) {
      if (unsent.substr(unsent.size() - len) == std::string_view(stop_string).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  out.text += unsent.substr(0, unsent.size() - hold);
  s.text_sent = s.text.size() - hold;
  return false;
}

void OutputProcessor::FlushText(State& s, StepOutput& out) {
  if (!s.detok) return;
  s.text += s.detok->Flush();
  out.text += s.text.substr(s.text_sent);
  s.text_sent = s.text.size();
}

}  // namespace folio::engine

namespace folio::engine {

void OutputProcessor::AddPooledRows(State& s, uint64_t first_position, uint64_t num_prompt_tokens,
                                    std::span<const float> hidden, uint64_t hidden_size,
                                    Pooling pooling) {
  FOLIO_CHECK(pooling != Pooling::kNone && pooling != Pooling::kClassify &&
              hidden.size() % hidden_size == 0);
  if (s.pooled.empty()) s.pooled.assign(hidden_size, 0.0);
  const uint64_t rows = hidden.size() / hidden_size;
  for (uint64_t r = 0; r < rows; ++r) {
    const uint64_t position = first_position + r;
    const std::span<const float> row = hidden.subspan(r * hidden_size, hidden_size);
    const auto add = [&] {
      for (uint64_t j = 0; j < hidden_size; ++j) s.pooled[j] += static_cast<double>(row[j]);
    };
    if (pooling == Pooling::kMean) {
      // Every position once, in order (pooled_rows: the next one).
      if (position != s.pooled_rows || position >= num_prompt_tokens) continue;  // taken before
      add();
      ++s.pooled_rows;
    } else if (s.pooled_rows < num_prompt_tokens &&
               position == (pooling == Pooling::kLast ? num_prompt_tokens - 1 : 0)) {
      // One row (the positions before the last may come from cached pages).
      add();
      s.pooled_rows = num_prompt_tokens;
    }
  }
}

std::vector<float> OutputProcessor::Pooled(const State& s, uint64_t num_prompt_tokens) {
  FOLIO_CHECK(s.pooled_rows == num_prompt_tokens && !s.pooled.empty());
  std::vector<double> v = s.pooled;
  if (s.params.pooling == Pooling::kMean) {
    for (double& x : v) x /= static_cast<double>(num_prompt_tokens);
  }
  if (s.params.dimensions != 0) v.resize(s.params.dimensions);
  if (s.params.normalize) {
    double squares = 0;
    for (const double x : v) squares += x * x;
    // sentence-transformers' Normalize (torch's F.normalize): x / max(|x|, 1e-12).
    const double norm = std::max(std::sqrt(squares), 1e-12);
    for (double& x : v) x /= norm;
  }
  return std::vector<float>(v.begin(), v.end());
}

}  // namespace folio::engine
