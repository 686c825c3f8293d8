// OutputProcessor: from a sequence's logits row to what the caller sees.
//
// Per request it keeps the sampling parameters, the request's own random
// stream (SplitMix64 seeded with RequestParams::seed, so a request's tokens
// depend on its seed and its logits alone, never on the batch), and, with a
// tokenizer, the streaming detokenizer and the text sent so far. Process
// selects the next token, computes its log-probs when asked, turns it into
// text, holds back text that might start a stop string, and decides
// whether the request finished (a stop string, a stop token, or
// max_tokens).
#ifndef FOLIO_ENGINE_OUTPUT_PROCESSOR_H_
#define FOLIO_ENGINE_OUTPUT_PROCESSOR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "folio/core/splitmix64.h"
#include "folio/core/status.h"
#include "folio/engine/request.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::engine {

class OutputProcessor {
 public:
  // tokenizer may be null (no text, no stop strings); it must outlive this.
  explicit OutputProcessor(const tokenizer::Tokenizer* tokenizer) : tokenizer_(tokenizer) {}
  const tokenizer::Tokenizer* tokenizer() const { return tokenizer_; }
  // With a tokenizer, the text of `tokens` as Process streams it (empty
  // without one).
  std::string Text(std::span<const int32_t> tokens) const;

  // One request's output state.
  struct State {
    RequestParams params;
    SplitMix64 rng{0};
    // With a tokenizer: all text decoded so far, and how much of it was sent.
    std::optional<tokenizer::StreamingDecoder> detok;
    std::string text;
    size_t text_sent = 0;
    uint64_t prompt_logit_rows_sent = 0;  // RequestParams::prompt_logits
  };
  // A fresh request's state.
  State NewState(const RequestParams& params) const;
  // The state of a request that already generated `output` (an import):
  // its random stream continues from rng_state and text_sent bytes of its
  // text were returned. Errors: text_sent beyond the output's text.
  Result<State> RestoredState(const RequestParams& params, uint64_t rng_state,
                              std::span<const int32_t> output, uint64_t text_sent) const;
  // Tracks a request (its id must be new; checked).
  void Add(RequestId id, State state);
  void Remove(RequestId id) { states_.erase(id); }
  // id must be tracked (checked).
  const State& state(RequestId id) const;

  // Samples request id's next token from its logits row ([vocab]) and
  // returns the step's output for it; finish is set when it is its last.
  // Errors: the sampler's (a non-finite row).
  // num_output_tokens counts the request's generated tokens with this one
  // (the scheduler's sequence holds them; max_tokens is checked against it).
  // resample_draft (speculative decoding's rejection sampling): the token
  // comes from sampling::AcceptOrResample with that draft token, which
  // keeps the distribution but not the random stream of SelectToken.
  Result<StepOutput> Process(RequestId id, std::span<const float> logits,
                             uint64_t num_output_tokens,
                             std::optional<int32_t> resample_draft = std::nullopt);
  // RequestParams::prompt_logits: appends to out.prompt_logits the rows of
  // `logits` ([rows, vocab], positions first_position, ...) that are prompt
  // positions not returned before (a recomputed prompt returns nothing
  // twice).
  void AddPromptLogits(RequestId id, uint64_t first_position, uint64_t num_prompt_tokens,
                       std::span<const float> logits, uint64_t vocab, StepOutput& out);

 private:
  // Appends one token's text to out; true when a stop string completed.
  static bool EmitText(State& s, int32_t token, StepOutput& out);
  static void FlushText(State& s, StepOutput& out);

  const tokenizer::Tokenizer* tokenizer_;
  std::map<RequestId, State> states_;
};

}  // namespace folio::engine

#endif  // FOLIO_ENGINE_OUTPUT_PROCESSOR_H_
