// Token selection from one row of logits.
//
// Greedy (temperature 0) takes the argmax, ties to the lowest id, and draws
// nothing from the random stream. Otherwise the candidates are the top_k
// highest logits (all when top_k is 0; ties ordered by lower id first),
// weighted by exp((logit - max) / temperature) in double precision, and one
// SplitMix64 unit draw picks the token by walking the cumulative weights in
// that order. Exactly one draw per sampled token, so a stream's state says
// how many tokens were sampled from it.
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

  // Errors: temperature negative or not finite.
  Status Validate() const;
  bool greedy() const { return temperature == 0.0; }
};

// Errors: empty logits, invalid params, a NaN logit.
template <typename T>
Result<int32_t> SelectToken(std::span<const T> logits,
                            const SamplingParams& params, SplitMix64& rng);

}  // namespace folio::sampling

#endif  // FOLIO_SAMPLING_SAMPLER_H_
