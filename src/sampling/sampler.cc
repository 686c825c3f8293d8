#include "folio/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace folio::sampling {

Status SamplingParams::Validate() const {
  if (!std::isfinite(temperature) || temperature < 0) {
    return Status::InvalidArgument("temperature must be finite and >= 0 (got " +
                                   std::to_string(temperature) + ")");
  }
  if (!(top_p > 0.0 && top_p <= 1.0)) {
    return Status::InvalidArgument("top_p must be in (0, 1] (got " + std::to_string(top_p) + ")");
  }
  if (!(min_p >= 0.0 && min_p <= 1.0)) {
    return Status::InvalidArgument("min_p must be in [0, 1] (got " + std::to_string(min_p) + ")");
  }
  return Status::Ok();
}

template <typename T>
Result<int32_t> SelectToken(std::span<const T> logits,
                            const SamplingParams& params, SplitMix64& rng) {
  FOLIO_RETURN_IF_ERROR(params.Validate());
  if (logits.empty()) return Status::InvalidArgument("logits row is empty");
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) {
      return Status::InvalidArgument("logit " + std::to_string(i) + " is NaN");
    }
  }
  if (params.greedy()) {
    // max_element returns the first maximum: ties go to the lowest id.
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) -
                                logits.begin());
  }
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const size_t k = params.top_k == 0 ? ids.size()
                                     : std::min<size_t>(params.top_k, ids.size());
  const auto by_logit = [&](int32_t a, int32_t b) {
    const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
    return logits[ua] > logits[ub] || (logits[ua] == logits[ub] && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<ptrdiff_t>(k), ids.end(),
                    by_logit);
  const double max_logit = static_cast<double>(logits[static_cast<size_t>(ids[0])]);
  std::vector<double> weights(k);
  double total = 0;
  for (size_t i = 0; i < k; ++i) {
    const double l = static_cast<double>(logits[static_cast<size_t>(ids[i])]);
    weights[i] = std::exp((l - max_logit) / params.temperature);
    total += weights[i];
  }
  // Nucleus: the shortest prefix reaching top_p of the mass (at least one).
  size_t keep = k;
  if (params.top_p < 1.0) {
    double prefix = 0;
    for (size_t i = 0; i < k; ++i) {
      prefix += weights[i];
      if (prefix >= params.top_p * total) {
        keep = i + 1;
        break;
      }
    }
  }
  // min_p: relative to the top candidate, whose weight is exp(0) = 1.
  while (keep > 1 && weights[keep - 1] < params.min_p) --keep;
  total = 0;
  for (size_t i = 0; i < keep; ++i) total += weights[i];
  const double target = rng.NextUnit() * total;
  double cumulative = 0;
  for (size_t i = 0; i < keep; ++i) {
    cumulative += weights[i];
    if (target < cumulative) return ids[i];
  }
  return ids[keep - 1];  // target == total after rounding
}

template Result<int32_t> SelectToken<float>(std::span<const float>,
                                            const SamplingParams&, SplitMix64&);
template Result<int32_t> SelectToken<double>(std::span<const double>,
                                             const SamplingParams&, SplitMix64&);

}  // namespace folio::sampling
