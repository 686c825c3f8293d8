// Cached generation for one sequence: prefill the prompt, then select and
// feed one token at a time until the end token, the token limit or the
// cache's capacity.
//
// The token selected last is never fed back, so stopping at the limit after
// k tokens from an m-token prompt leaves the cache at m + k - 1 positions
// (m prefill inputs, k - 1 decode inputs).
#ifndef FOLIO_ENGINE_GENERATE_H_
#define FOLIO_ENGINE_GENERATE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "folio/core/splitmix64.h"
#include "folio/core/status.h"
#include "folio/model/decoder.h"
#include "folio/sampling/sampler.h"

namespace folio::engine {

struct GenerationParams {
  uint64_t max_new_tokens = 16;
  sampling::SamplingParams sampling;
  std::optional<int32_t> end_token = 1;  // stop when selected; nullopt = never
};

enum class StopReason { kEndToken, kMaxTokens, kCapacity };
std::string_view StopReasonName(StopReason r);  // "end_token", ...

// One selected token.
struct StepRecord {
  uint64_t step = 0;          // 0 = the token selected after prefill
  uint64_t num_inputs = 0;    // tokens fed in the forward pass before it
  uint64_t cache_length = 0;  // cache length after that pass
  int32_t token = 0;
  double logit = 0;  // the selected token's logit
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // selected tokens; an end token is not included
  std::vector<StepRecord> steps;
  StopReason stop_reason = StopReason::kMaxTokens;
  uint64_t prefill_tokens = 0;
  uint64_t decode_tokens = 0;
};

// Errors: an empty prompt or one beyond the cache's capacity, a non-empty
// cache, a cache with batch != 1, max_new_tokens == 0, invalid sampling
// params, and anything Prefill/Decode refuse.
// on_token, when given, sees every selected token as soon as it is known
// (an end token included), for streaming.
template <typename T>
Result<GenerationResult> Generate(const model::Decoder<T>& decoder, model::DecoderCache& cache,
                                  std::span<const int32_t> prompt, const GenerationParams& params,
                                  SplitMix64& rng,
                                  const std::function<void(int32_t)>& on_token = {});

}  // namespace folio::engine

#endif  // FOLIO_ENGINE_GENERATE_H_
