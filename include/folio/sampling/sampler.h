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
Result<int32_t> SelectToken(std::span<const T> logits,
                            const SamplingParams& params, SplitMix64& rng);

}  // namespace folio::sampling

#endif  // FOLIO_SAMPLING_SAMPLER_H_
