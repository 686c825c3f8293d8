#include "folio/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
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
Result<Candidates> SamplingCandidates(std::span<const T> logits, const SamplingParams& params) {
  FOLIO_RETURN_IF_ERROR(params.Validate());
  if (logits.empty()) return Status::InvalidArgument("logits row is empty");
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) {
      return Status::InvalidArgument("logit " + std::to_string(i) + " is NaN");
    }
  }
  Candidates c;
  if (params.greedy()) {
    // max_element returns the first maximum: ties go to the lowest id.
    c.ids = {static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin())};
    c.weights = {1.0};
    c.total = 1.0;
    return c;
  }
  std::vector<int32_t>& ids = c.ids;
  ids.resize(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const size_t k = params.top_k == 0 ? ids.size() : std::min<size_t>(params.top_k, ids.size());
  const auto by_logit = [&](int32_t a, int32_t b) {
    const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
    return logits[ua] > logits[ub] || (logits[ua] == logits[ub] && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<ptrdiff_t>(k), ids.end(), by_logit);
  const double max_logit = static_cast<double>(logits[static_cast<size_t>(ids[0])]);
  std::vector<double>& weights = c.weights;
  weights.resize(k);
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
  ids.resize(keep);
  weights.resize(keep);
  c.total = 0;
  for (size_t i = 0; i < keep; ++i) c.total += weights[i];
  return c;
}

namespace {

// One unit draw picks a candidate by walking the cumulative weights in
// order, skipping `excluded` (whose weight the caller took off the total).
int32_t Draw(const Candidates& c, double total, SplitMix64& rng, int32_t excluded = -1) {
  const double target = rng.NextUnit() * total;
  double cumulative = 0;
  size_t last = 0;
  for (size_t i = 0; i < c.ids.size(); ++i) {
    if (c.ids[i] == excluded) continue;
    cumulative += c.weights[i];
    last = i;
    if (target < cumulative) return c.ids[i];
  }
  return c.ids[last];  // target == total after rounding
}

}  // namespace

template <typename T>
Result<int32_t> SelectToken(std::span<const T> logits, const SamplingParams& params,
                            SplitMix64& rng) {
  FOLIO_ASSIGN_OR_RETURN(const Candidates c, SamplingCandidates(logits, params));
  if (params.greedy()) return c.ids[0];  // no draw
  return Draw(c, c.total, rng);
}

template <typename T>
Result<int32_t> AcceptOrResample(std::span<const T> logits, const SamplingParams& params,
                                 int32_t draft, SplitMix64& rng) {
  FOLIO_ASSIGN_OR_RETURN(const Candidates c, SamplingCandidates(logits, params));
  if (params.greedy()) return c.ids[0];  // the draft stands iff it is the argmax
  double w = 0;
  for (size_t i = 0; i < c.ids.size(); ++i) {
    if (c.ids[i] == draft) w = c.weights[i];
  }
  if (rng.NextUnit() * c.total < w) return draft;
  return Draw(c, c.total - w, rng, draft);
}

template Result<int32_t> SelectToken<float>(std::span<const float>, const SamplingParams&,
                                            SplitMix64&);
template Result<int32_t> SelectToken<double>(std::span<const double>, const SamplingParams&,
                                             SplitMix64&);
template Result<Candidates> SamplingCandidates<float>(std::span<const float>,
                                                      const SamplingParams&);
template Result<int32_t> AcceptOrResample<float>(std::span<const float>, const SamplingParams&,
                                                 int32_t, SplitMix64&);

Result<double> LogNormalizer(std::span<const float> logits) {
  if (logits.empty()) return Status::InvalidArgument("logits are empty");
  double max = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) {
      return Status::InvalidArgument("logit " + std::to_string(i) + " is NaN");
    }
    max = std::max(max, static_cast<double>(logits[i]));
  }
  double sum = 0.0;
  for (const float x : logits) sum += std::exp(static_cast<double>(x) - max);
  return max + std::log(sum);
}

std::vector<int32_t> TopTokens(std::span<const float> logits, uint64_t k) {
  // Kept sorted in one pass over the row: no vocabulary-sized buffer.
  auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la != lb ? la > lb : a < b;
  };
  std::vector<int32_t> best;
  best.reserve(std::min<uint64_t>(k, logits.size()));
  for (size_t i = 0; i < logits.size() && k > 0; ++i) {
    const auto id = static_cast<int32_t>(i);
    if (best.size() == k && !better(id, best.back())) continue;
    if (best.size() == k) best.pop_back();
    best.insert(std::upper_bound(best.begin(), best.end(), id, better), id);
  }
  return best;
}

Result<TokenLogprobs> ComputeLogprobs(std::span<const float> logits, int32_t token,
                                      uint64_t top_n) {
  if (logits.empty()) return Status::InvalidArgument("logits are empty");
  if (token < 0 || static_cast<size_t>(token) >= logits.size()) {
    return Status::OutOfRange("token " + std::to_string(token) + " outside a row of " +
                              std::to_string(logits.size()) + " logits");
  }
  if (top_n > kMaxTopLogprobs) {
    return Status::InvalidArgument("top_logprobs " + std::to_string(top_n) + " exceeds " +
                                   std::to_string(kMaxTopLogprobs));
  }
  FOLIO_ASSIGN_OR_RETURN(const double log_z, LogNormalizer(logits));
  auto logprob = [&](size_t i) {
    return static_cast<float>(static_cast<double>(logits[i]) - log_z);
  };
  TokenLogprobs out;
  out.token = token;
  out.logprob = logprob(static_cast<size_t>(token));
  for (const int32_t id : TopTokens(logits, top_n)) {
    out.top.emplace_back(id, logprob(static_cast<size_t>(id)));
  }
  return out;
}

}  // namespace folio::sampling
