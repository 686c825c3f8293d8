// OutputProcessor: from a sequence's logits row to what the caller sees.
//
// A sequence's State (kept in the engine's request record) holds the
// sampling parameters, the request's own random stream (SplitMix64 seeded
// with RequestParams::seed, so a request's tokens depend on its seed and
// its logits alone, never on the batch), and, with a tokenizer, the
// streaming detokenizer and the text sent so far. Process
// selects the next token, computes its log-probs when asked, turns it into
// text, holds back text that might start a stop string, and decides
// whether the request finished (a stop string, a stop token, or
// max_tokens).
//
// Logits processors (RequestParams::processors; sampling/
// logits_processors.h): before selecting, Process copies the row and
// applies them over the sequence's tokens so far (the `tokens` argument:
// the prompt then the tokens generated before this one), with the
// request's stop and end ids (StopTokenIds) as min_tokens' end ids. The
// state holds the processors in tokens: bad_words and DRY's sequence
// breakers are tokenized by the tokenizer when the state is made. When the
// processors (with a grammar's mask) leave no token, the request finishes
// with kAbort and no token, as a grammar that cannot go on does. Before
// min_tokens tokens, stop strings do not end the text either (vLLM's rule).
//
// Log-probs are the model's own, before the processors ("raw", vLLM's
// default logprobs_mode): a penalty or bias changes what is selected, not
// the log-probability reported for it.
//
// Structured output (RequestParams::grammar): the state also holds a
// grammar::Matcher over the vocabulary's token trie (built from the
// tokenizer on the first constrained request, then shared). Each Process
// first fills the request's allowed-token mask: the tokens whose bytes the
// grammar allows next or that it names next (a token reference), plus the
// request's stop and end-of-sequence ids (StopTokenIds) exactly when the
// text so far is a complete sentence (Matcher::CanFinish); a stop id is
// refused before that even if its bytes would fit, unless the grammar names
// it next (Matcher::NamesNext: a harmony call ends with <|call|>, a stop
// id, before its grammar is complete). The sampler selects among the
// allowed tokens only (sampling/sampler.h: the candidates are filtered, the
// logits are not touched), then the matcher accepts the token. The request
// finishes with kStop when a stop id is selected or when the grammar is
// done (nothing may follow), and with kAbort, producing no token, when
// nothing at all is allowed (no token of the vocabulary continues the
// grammar and it cannot end here). Log-probs are those of the masked
// distribution (as vLLM reports them): the log-softmax over the allowed
// tokens of the raw logits (no temperature, top-k or top-p, as for
// unconstrained requests), and alternatives among the allowed tokens only.
#ifndef FOLIO_ENGINE_OUTPUT_PROCESSOR_H_
#define FOLIO_ENGINE_OUTPUT_PROCESSOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "folio/core/splitmix64.h"
#include "folio/core/status.h"
#include "folio/engine/request.h"
#include "folio/grammar/grammar.h"
#include "folio/sampling/logits_processors.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::engine {

// What a grammar sees of each token of a vocabulary of vocab_size ids (the
// model's, which may be larger or smaller than the tokenizer's): the bytes
// the tokenizer decodes it to (a byte-fallback token such as <0x41> is its
// one byte), and nothing for a special or control token, an id the
// tokenizer does not have, or a hole, so a grammar allows those only by a
// token reference.
std::vector<std::string> GrammarTokenBytes(const tokenizer::Tokenizer& tokenizer,
                                           uint64_t vocab_size);

class OutputProcessor {
 public:
  // tokenizer may be null (no text, no stop strings, no grammars); it must
  // outlive this. vocab_size: the logits rows' length (0: the tokenizer's
  // vocabulary size), which constrained requests' masks cover.
  explicit OutputProcessor(const tokenizer::Tokenizer* tokenizer, uint64_t vocab_size = 0)
      : tokenizer_(tokenizer),
        vocab_size_(vocab_size != 0 || tokenizer == nullptr ? vocab_size
                                                            : tokenizer->vocab_size()) {}
  const tokenizer::Tokenizer* tokenizer() const { return tokenizer_; }
  // The token trie constrained requests match against, built from
  // GrammarTokenBytes on the first call and shared from then on. Needs a
  // tokenizer (checked). Not thread-safe: the engine's thread calls it.
  std::shared_ptr<const grammar::TokenTrie> token_trie() const;
  // With a tokenizer, the text of `tokens` as Process streams it for a
  // request with that skip_special_tokens (empty without one).
  std::string Text(std::span<const int32_t> tokens, bool skip_special_tokens = true) const;

  // One request's output state.
  struct State {
    RequestParams params;
    SplitMix64 rng{0};
    // With a tokenizer: all text decoded so far, and how much of it was sent.
    std::optional<tokenizer::StreamingDecoder> detok;
    std::string text;
    size_t text_sent = 0;
    uint64_t prompt_logit_rows_sent = 0;  // RequestParams::prompt_logits
    // RequestParams::grammar: where the output stands in it, and the
    // next token's allowed set ([TokenMaskWords(vocab)], refilled every
    // step; kept to spare the allocation).
    std::optional<grammar::Matcher> matcher;
    std::vector<uint64_t> allowed;
    // The ids that end the request (StopTokenIds), which min_tokens holds
    // back.
    std::vector<int32_t> end_ids;
    // RequestParams::pooling: mean: the next position to take and the sum
    // of those taken; last, CLS: the prompt's length once its row is kept.
    uint64_t pooled_rows = 0;
    std::vector<double> pooled;
    // Prompt tokens found in the prefix cache at the first admission
    // (StepOutput::cached_prompt_tokens); unset until admitted.
    std::optional<uint64_t> cached_prompt_tokens;
  };
  // A fresh request's state: params.processors completed with bad_words
  // and DRY's breakers in tokens. A grammar needs a tokenizer (checked:
  // the engine refuses such a request first), and so do bad_words and DRY.
  // Errors: bad_words or dry_sequence_breakers that do not tokenize (or an
  // empty breaker), or that need a tokenizer there is not (naming them).
  Result<State> NewState(const RequestParams& params) const;
  // Parallel sample `index` of a request (RequestParams::n), forked from
  // its state `parent` before it selected any token: the parent's state
  // with n = 1 and the stream SampleSeed(seed, index). Its matcher is a
  // copy of the parent's, sharing its memo tables; each sample advances its
  // own.
  static State ForkState(const State& parent, uint64_t index);
  // The state of a request that already generated `output` (an import):
  // its random stream continues from rng_state and text_sent bytes of its
  // text were returned; a grammar's matcher is advanced over the output.
  // Errors: text_sent beyond the output's text; an output token the
  // grammar does not allow where it stands, or a grammar already done
  // (InvalidArgument naming the token).
  Result<State> RestoredState(const RequestParams& params, uint64_t rng_state,
                              std::span<const int32_t> output, uint64_t text_sent) const;
  // The request was admitted with `cached` prompt tokens from the prefix
  // cache; kept from its first admission only.
  static void NoteAdmission(State& s, uint64_t cached) {
    if (!s.cached_prompt_tokens) s.cached_prompt_tokens = cached;
  }

  // Samples the next token of the request whose state is s from its logits
  // row ([vocab]) and returns the step's output for it (its id and index
  // left for the caller to set); finish is set when it is its last.
  // tokens: the sequence before this token (prompt, then generated), which
  // the logits processors read; it may be empty only for a request
  // without processors.
  // A constrained request that can go no further finishes with kAbort and
  // no token (new_tokens empty). Errors: the sampler's (a NaN in the row,
  // a row whose length is not the vocabulary's for a constrained request).
  // num_output_tokens counts the request's generated tokens with this one
  // (the scheduler's sequence holds them; max_tokens is checked against it).
  // resample_draft (speculative decoding's rejection sampling): the token
  // comes from sampling::AcceptOrResample with that draft token, which
  // keeps the distribution but not the random stream of SelectToken.
  Result<StepOutput> Process(State& s, std::span<const float> logits, uint64_t num_output_tokens,
                             std::span<const int32_t> tokens = {},
                             std::optional<int32_t> resample_draft = std::nullopt);
  // RequestParams::prompt_logits: appends to out.prompt_logits the rows of
  // `logits` ([rows, vocab], positions first_position, ...) that are prompt
  // positions not returned before (a recomputed prompt returns nothing
  // twice).
  static void AddPromptLogits(State& s, uint64_t first_position, uint64_t num_prompt_tokens,
                              std::span<const float> logits, uint64_t vocab, StepOutput& out);
  // RequestParams::pooling (`pooling`: the request's, or for kClassify the
  // position the model's head reads, kCls or kLast): takes the final hidden states `hidden` ([rows,
  // hidden_size], positions first_position, ...) that are prompt positions
  // not taken before (a recomputed prompt is taken once), in order.
  static void AddPooledRows(State& s, uint64_t first_position, uint64_t num_prompt_tokens,
                            std::span<const float> hidden, uint64_t hidden_size, Pooling pooling);
  // The embedding once every prompt position was taken (checked):
  // RequestParams::pooling's vector, cut and normalized as it says.
  static std::vector<float> Pooled(const State& s, uint64_t num_prompt_tokens);

 private:
  // Appends one token's text to out; true when a stop string completed
  // (looked for only when may_stop).
  static bool EmitText(State& s, int32_t token, bool may_stop, StepOutput& out);
  static void FlushText(State& s, StepOutput& out);

  // Fills s.allowed for the next token of a constrained request; false
  // when it allows nothing.
  bool FillAllowed(State& s) const;
  // RequestParams::bad_words in tokens (vLLM's rule); errors name the word.
  Result<std::vector<std::vector<int32_t>>> BadWordsIds(std::span<const std::string> words) const;
  // DRY's sequence breakers in tokens (cached for the last strings).
  Result<std::vector<sampling::DryBreaker>> DryBreakers(
      const std::vector<std::string>& strings) const;

  const tokenizer::Tokenizer* tokenizer_;
  uint64_t vocab_size_;
  mutable std::shared_ptr<const grammar::TokenTrie> trie_;  // token_trie(), lazily
  // DRY's breakers in tokens for the last breaker strings asked for, and
  // the vocabulary's texts they are found in (both built lazily).
  mutable std::vector<std::string> token_bytes_;
  mutable std::vector<std::string> breaker_strings_;
  mutable std::vector<sampling::DryBreaker> breakers_;
  // Processors: the row they edit and the penalties' counters (reused).
  std::vector<float> processed_;
  sampling::ProcessorScratch scratch_;
};

}  // namespace folio::engine

#endif  // FOLIO_ENGINE_OUTPUT_PROCESSOR_H_
