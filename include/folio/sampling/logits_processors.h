// Logits processors: what a request's parameters do to a row of logits
// before the sampler (sampling/sampler.h) selects from it, given the tokens
// the request holds so far. Each is a short scalar function of (row,
// parameters, history), so a row's result depends on nothing else: not on
// the batch, the step, drafts or an earlier call. That is what keeps them
// exact under speculative decoding (a draft position's history is the
// tokens before it), parallel samples (each its own history), preemption
// and KV snapshots (the history is the sequence's tokens, the parameters
// travel with the request).
//
// ApplyLogitsProcessors runs them in one fixed order (vLLM's: masks, then
// min_tokens and logit_bias, then the penalties; llama.cpp's DRY after
// them):
//   1. allowed_token_ids: every other token's logit becomes -inf;
//   2. bad words (token sequences, Hugging Face's NoBadWordsLogitsProcessor):
//      the last token of each sequence whose other tokens end the history
//      becomes -inf (a one-token sequence always);
//   3. min_tokens: while fewer than min_tokens tokens were generated, the
//      end ids (the request's stop and end-of-sequence ids) become -inf;
//   4. logit_bias: bias added to the token's logit, in float;
//   5. repetition_penalty (Hugging Face, vLLM, llama.cpp): every distinct
//      token of the window (below) has its logit divided by the penalty if
//      positive, multiplied by it otherwise, in float;
//   6. presence_penalty, frequency_penalty (OpenAI's formula): logit -
//      count * frequency_penalty - (count > 0) * presence_penalty, count the
//      token's occurrences among the generated tokens of the window, in
//      double rounded once to float;
//   7. DRY (llama.cpp's "don't repeat yourself"): see DryParams.
// The window is the last penalty_last_n tokens of the history (prompt then
// generated; -1: all of it, 0: none, so 5 and 6 do nothing). A -inf logit
// stays -inf through every step. Processors that are off leave the row
// untouched, bit for bit.
#ifndef FOLIO_SAMPLING_LOGITS_PROCESSORS_H_
#define FOLIO_SAMPLING_LOGITS_PROCESSORS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/status.h"

namespace folio::sampling {

// Most entries of a logit_bias (OpenAI's limit).
inline constexpr uint64_t kMaxLogitBias = 300;

// DRY, as llama.cpp defines it (off while multiplier is 0). Over the last
// penalty_last_n tokens of the history (-1: all; 0: off): for each earlier
// position j, m(j) is how many tokens ending at j equal the tokens ending
// the history, counting back no further than the most recent sequence
// breaker (a repeat never crosses one) and at most the window. A token that
// follows some j with m(j) >= allowed_length would extend a repeat of
// m(j) tokens; its logit loses multiplier * base^(m - allowed_length), m
// the longest such repeat, the exponent capped so the power stays finite
// in float. A token that is itself a whole breaker is never penalized.
struct DryParams {
  double multiplier = 0.0;     // >= 0; 0 = off
  double base = 1.75;          // >= 1
  int64_t allowed_length = 2;  // repeats up to this long are free
  int64_t penalty_last_n = -1;
};

// A sequence breaker in tokens: a head token and the tokens that must
// follow it (empty: the head alone is a breaker). Built from breaker
// strings by DryBreakersFromText, by whoever has the vocabulary.
struct DryBreaker {
  int32_t head = 0;
  std::vector<int32_t> tail;
};

// The processors' parameters, token level (front ends turn text, such as
// bad words and DRY's breaker strings, into tokens first).
struct ProcessorParams {
  double repetition_penalty = 1.0;                  // > 0; 1 = off
  double presence_penalty = 0.0;                    // 0 = off
  double frequency_penalty = 0.0;                   // 0 = off
  int64_t penalty_last_n = -1;                      // the penalties' window: -1 all, 0 none
  std::map<int32_t, double> logit_bias;             // token -> bias
  std::vector<int32_t> allowed_token_ids;           // empty = every token
  std::vector<std::vector<int32_t>> bad_words_ids;  // token sequences
  int64_t min_tokens = 0;                           // >= 0
  DryParams dry;
  std::vector<DryBreaker> dry_breakers;

  // Whether any processor can change a row.
  bool active() const;
};

// What the processors read of one request at one position.
struct TokenHistory {
  std::span<const int32_t> tokens;  // the prompt, then generated tokens before this position
  uint64_t num_prompt_tokens = 0;
  uint64_t num_generated() const { return tokens.size() - num_prompt_tokens; }
};

// Per-thread scratch the penalties count with, so a step allocates
// nothing: one counter per token, all zero between calls.
class ProcessorScratch {
 public:
  std::vector<uint32_t>& counts(size_t vocab_size);

 private:
  std::vector<uint32_t> counts_;
};

// Each processor alone (the steps above); rows are [vocab_size].
void ApplyAllowedTokens(std::span<const int32_t> allowed, std::span<float> logits);
void ApplyBadWords(std::span<const std::vector<int32_t>> bad_words, std::span<const int32_t> tokens,
                   std::span<float> logits);
void ApplyMinTokens(int64_t min_tokens, uint64_t num_generated, std::span<const int32_t> end_ids,
                    std::span<float> logits);
void ApplyLogitBias(const std::map<int32_t, double>& bias, std::span<float> logits);
// The last `window` tokens of history (all of them if fewer).
void ApplyRepetitionPenalty(double penalty, std::span<const int32_t> window,
                            std::span<float> logits, ProcessorScratch& scratch);
// `generated`: the generated tokens of the window.
void ApplyPresenceFrequency(double presence, double frequency, std::span<const int32_t> generated,
                            std::span<float> logits, ProcessorScratch& scratch);
void ApplyDry(const DryParams& dry, std::span<const DryBreaker> breakers,
              std::span<const int32_t> tokens, std::span<float> logits);

// Every processor, in order (nothing when !params.active()). end_ids: the ids min_tokens holds
// back. Token ids outside the row are ignored (front ends refuse them first:
// engine/request_params.h).
void ApplyLogitsProcessors(const ProcessorParams& params, const TokenHistory& history,
                           std::span<const int32_t> end_ids, std::span<float> logits,
                           ProcessorScratch& scratch);

// DRY's breaker strings in tokens, llama.cpp's way: for each breaker and
// each token (token_text: its bytes; empty for special tokens, which never
// count), a token whose text contains the breaker is a breaker alone; a
// token whose text ends with a proper prefix of the breaker (starting at
// any of its bytes) is a head whose tail is the rest of the breaker,
// tokenized (at most kMaxDryTailTokens tokens). Breakers are cut to
// kMaxDryBreakerBytes bytes; an empty one is an error naming it.
inline constexpr size_t kMaxDryBreakerBytes = 40;
inline constexpr size_t kMaxDryTailTokens = 20;
inline constexpr size_t kMaxDryBreakers = 32;
// token_bytes: [vocab_size] each token's text; tokenize: text to ids
// without special tokens.
Result<std::vector<DryBreaker>> DryBreakersFromText(
    std::span<const std::string> breakers, std::span<const std::string> token_bytes,
    const std::function<Result<std::vector<int32_t>>(std::string_view)>& tokenize);

}  // namespace folio::sampling

#endif  // FOLIO_SAMPLING_LOGITS_PROCESSORS_H_
