#include "folio/engine/generate.h"

#include <string>

namespace folio::engine {

std::string_view StopReasonName(StopReason r) {
  switch (r) {
    case StopReason::kEndToken:
      return "end_token";
    case StopReason::kMaxTokens:
      return "max_tokens";
    case StopReason::kCapacity:
      return "capacity";
  }
  return "unknown";
}

template <typename T>
Result<GenerationResult> Generate(const model::Decoder<T>& decoder, model::DecoderCache& cache,
                                  std::span<const int32_t> prompt, const GenerationParams& params,
                                  SplitMix64& rng, const std::function<void(int32_t)>& on_token) {
  FOLIO_RETURN_IF_ERROR(params.sampling.Validate());
  if (params.max_new_tokens == 0) return Status::InvalidArgument("max_new_tokens must be >= 1");
  if (cache.batch() != 1) {
    return Status::InvalidArgument("generation takes a batch-1 cache (got batch " +
                                   std::to_string(cache.batch()) + ")");
  }
  if (cache.length() != 0) {
    return Status::FailedPrecondition("generation needs an empty cache (length " +
                                      std::to_string(cache.length()) + ")");
  }
  if (prompt.empty()) return Status::InvalidArgument("prompt is empty");

  GenerationResult result;
  const uint64_t vocab = decoder.config().vocab_size;
  FOLIO_ASSIGN_OR_RETURN(std::vector<T> logits,
                         decoder.Prefill(cache, prompt, model::LogitRows::kLast));
  result.prefill_tokens = prompt.size();
  uint64_t inputs = prompt.size();
  std::span<const T> last = logits;
  FOLIO_CHECK(last.size() == vocab);
  while (true) {
    FOLIO_ASSIGN_OR_RETURN(int32_t token, sampling::SelectToken<T>(last, params.sampling, rng));
    result.steps.push_back({result.steps.size(), inputs, cache.length(), token,
                            static_cast<double>(last[static_cast<size_t>(token)])});
    if (on_token) on_token(token);
    if (params.end_token && token == *params.end_token) {
      result.stop_reason = StopReason::kEndToken;
      break;
    }
    result.tokens.push_back(token);
    if (result.tokens.size() == params.max_new_tokens) {
      result.stop_reason = StopReason::kMaxTokens;
      break;
    }
    if (cache.length() == cache.capacity()) {
      result.stop_reason = StopReason::kCapacity;
      break;
    }
    FOLIO_ASSIGN_OR_RETURN(logits, decoder.Decode(cache, std::span<const int32_t>(&token, 1)));
    ++result.decode_tokens;
    inputs = 1;
    last = logits;
  }
  return result;
}

template Result<GenerationResult> Generate<float>(const model::Decoder<float>&,
                                                  model::DecoderCache&, std::span<const int32_t>,
                                                  const GenerationParams&, SplitMix64&,
                                                  const std::function<void(int32_t)>&);
template Result<GenerationResult> Generate<double>(const model::Decoder<double>&,
                                                   model::DecoderCache&, std::span<const int32_t>,
                                                   const GenerationParams&, SplitMix64&,
                                                   const std::function<void(int32_t)>&);

}  // namespace folio::engine
