// Token selection from one row of logits.
//
// Greedy (temperature 0) takes the argmax, ties to the lowest id, and draws
// nothing from the random stream. Otherwise, in this order: candidates
// sorted by logit (ties: lower id first) and cut to the top_k (0 = all);
// weighted by exp((logit - max) / temperature) in double precision; cut to
// the shortest prefix whose weight reaches top_p of the total (1 = off);
// then every candidate below min_p times the top weight dropped (0 = off).
// One SplitMix64 unit draw picks the token by walking the cumulative
// weights in that order. Exactly one draw per sampled token, so a stream's
// state says how many tokens were sampled from it.
#ifndef FOLIO_SAMPLING_SAMPLER_H_
#define FOLIO_SAMPLING_SAMPLER_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "folio/core/splitmix64.h"
#include "folio/core/status.h"

namespace folio::sampling {

struct SamplingParams {
  double temperature = 0.0;  // 0 = greedy
  uint64_t top_k = 0;        // 0 = no limit
  double top_p = 1.0;        // in (0, 1]; 1 = no limit
  double min_p = 0.0;        // in [0, 1]; 0 = no limit

  // Errors: temperature negative or not finite; top_p outside (0, 1];
  // min_p outside [0, 1].
  Status Validate() const;
  bool greedy() const { return temperature == 0.0; }
};

// Errors: empty logits, invalid params, a NaN logit.
template <typename T>
Result<int32_t> SelectToken(std::span<const T> logits, const SamplingParams& params,
                            SplitMix64& rng);

// The candidates SelectToken draws from, in its order, with their
// (unnormalized) weights and their total: greedy, the argmax alone.
struct Candidates {
  std::vector<int32_t> ids;
  std::vector<double> weights;
  double total = 0;
};
template <typename T>
Result<Candidates> SamplingCandidates(std::span<const T> logits, const SamplingParams& params);

// Speculative sampling's acceptance rule (Leviathan et al., 2023) for a
// drafter that proposes `draft` with certainty: the draft stands with its
// probability p(draft) under SelectToken's distribution (one unit draw:
// kept iff u * total < its weight); otherwise the token is drawn from that
// distribution without the draft (a second draw, renormalized). So the
// token returned follows SelectToken's distribution exactly, whatever the
// draft, but not SelectToken's random stream. Greedy: the argmax, no draw.
// Errors: SelectToken's.
template <typename T>
Result<int32_t> AcceptOrResample(std::span<const T> logits, const SamplingParams& params,
                                 int32_t draft, SplitMix64& rng);

// Log-probabilities of the model's own distribution: log-softmax of the raw
// logits (temperature 1, before top-k / top-p / min-p), as OpenAI's
// `logprobs` reports them. Computed in double, summing in vocabulary order,
// then rounded to float, so they are a function of the logits alone.
struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0.0f;
  // The top_n most likely tokens, most likely first (ties: lower id first).
  std::vector<std::pair<int32_t, float>> top;
};

inline constexpr uint64_t kMaxTopLogprobs = 20;

// Errors: empty logits, a NaN logit, token outside the row, top_n >
// kMaxTopLogprobs.
Result<TokenLogprobs> ComputeLogprobs(std::span<const float> logits, int32_t token, uint64_t top_n);

// The log-softmax's normalizer of a row, log(sum exp(logit)), computed as
// ComputeLogprobs does: in double, max + log(sum exp(logit - max)), summing
// in vocabulary order. A token's log-probability is its logit minus this.
// Errors: empty logits, a NaN logit.
Result<double> LogNormalizer(std::span<const float> logits);
// The ids of the k largest logits (all of them if the row is shorter),
// largest first, ties by lower id first.
std::vector<int32_t> TopTokens(std::span<const float> logits, uint64_t k);

}  // namespace folio::sampling

#endif  // FOLIO_SAMPLING_SAMPLER_H_
