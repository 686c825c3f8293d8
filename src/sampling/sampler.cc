#include "folio/sampling/sampler.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
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
  const std::pair<const char*, double> unit[] = {{"min_p", min_p},
                                                 {"typical_p", typical_p},
                                                 {"xtc_probability", xtc_probability},
                                                 {"xtc_threshold", xtc_threshold}};
  for (const auto& [name, v] : unit) {
    if (!(v >= 0.0 && v <= 1.0)) {
      return Status::InvalidArgument(std::string(name) + " must be in [0, 1] (got " +
                                     std::to_string(v) + ")");
    }
  }
  if (!std::isfinite(top_n_sigma) || top_n_sigma < 0) {
    return Status::InvalidArgument("top_n_sigma must be finite and >= 0 (got " +
                                   std::to_string(top_n_sigma) + ")");
  }
  return Status::Ok();
}

namespace {

// A mask must cover the row exactly and allow some token of it.
Status CheckMask(size_t n, TokenMask allowed) {
  if (allowed.size() != TokenMaskWords(n)) {
    return Status::InvalidArgument("allowed-token mask has " + std::to_string(allowed.size()) +
                                   " words; a row of " + std::to_string(n) + " logits needs " +
                                   std::to_string(TokenMaskWords(n)));
  }
  // Bits past the row's end do not count.
  const uint64_t tail = n % 64 == 0 ? ~uint64_t{0} : (uint64_t{1} << (n % 64)) - 1;
  for (size_t w = 0; w < allowed.size(); ++w) {
    if ((allowed[w] & (w + 1 == allowed.size() ? tail : ~uint64_t{0})) != 0) return Status::Ok();
  }
  return Status::InvalidArgument("the allowed-token mask allows none of the row's " +
                                 std::to_string(n) + " tokens");
}

// The ids a mask allows, in increasing order (never empty: checked).
Result<std::vector<int32_t>> AllowedIds(size_t n, TokenMask allowed) {
  FOLIO_RETURN_IF_ERROR(CheckMask(n, allowed));
  std::vector<int32_t> ids;
  for (size_t w = 0; w < allowed.size(); ++w) {
    for (uint64_t bits = allowed[w]; bits != 0; bits &= bits - 1) {
      const size_t t = w * 64 + static_cast<size_t>(std::countr_zero(bits));
      if (t < n) ids.push_back(static_cast<int32_t>(t));
    }
  }
  return ids;
}

}  // namespace

template <typename T>
bool HasCandidate(std::span<const T> logits, TokenMask allowed) {
  for (size_t i = 0; i < logits.size(); ++i) {
    if (MaskAllows(allowed, i) && logits[i] != -std::numeric_limits<T>::infinity()) return true;
  }
  return false;
}

namespace {

// top_n_sigma on the candidates (in id order, none -inf): keeps those at or
// above max - n * sigma. Mean and variance in double, summed in id order.
template <typename T>
void KeepTopNSigma(std::span<const T> logits, double n, std::vector<int32_t>& ids) {
  double max = -std::numeric_limits<double>::infinity(), sum = 0;
  for (const int32_t id : ids) {
    const double l = static_cast<double>(logits[static_cast<size_t>(id)]);
    max = std::max(max, l);
    sum += l;
  }
  const double mean = sum / static_cast<double>(ids.size());
  double squares = 0;
  for (const int32_t id : ids) {
    const double d = static_cast<double>(logits[static_cast<size_t>(id)]) - mean;
    squares += d * d;
  }
  const double cut = max - n * std::sqrt(squares / static_cast<double>(ids.size()));
  std::erase_if(
      ids, [&](int32_t id) { return static_cast<double>(logits[static_cast<size_t>(id)]) < cut; });
}

// A float's bits as a key whose ascending order is the floats' descending
// order, with -0 and +0 one key (they compare equal).
uint32_t DescendingKey(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x == 0.0f ? 0.0f : x);
  const uint32_t ascending = (u & 0x80000000u) != 0 ? ~u : u | 0x80000000u;
  return ~ascending;
}

// Sorts `ids` (ascending, none NaN) by descending logit, equal logits by
// ascending id: the order ByLogit gives, found in linear time. A least-
// significant-digit radix sort of (key, id) pairs, 8 bits a pass, each
// pass stable, so ids stay ascending among equal keys; a pass whose digit
// is the same for every id is skipped.
void SortByLogitDescending(std::span<const float> logits, std::vector<int32_t>& ids) {
  const size_t n = ids.size();
  std::vector<uint64_t> items(n), scratch(n);
  std::array<std::array<uint32_t, 256>, 4> counts{};
  for (size_t i = 0; i < n; ++i) {
    const uint32_t key = DescendingKey(logits[static_cast<size_t>(ids[i])]);
    items[i] = uint64_t{key} << 32 | static_cast<uint32_t>(ids[i]);
    for (size_t d = 0; d < 4; ++d) ++counts[d][(key >> (8 * d)) & 0xff];
  }
  for (size_t d = 0; d < 4; ++d) {
    std::array<uint32_t, 256>& c = counts[d];
    if (*std::max_element(c.begin(), c.end()) == n) continue;  // one digit: order kept
    uint32_t start = 0;
    for (uint32_t& x : c) start += std::exchange(x, start);
    const unsigned shift = 32 + 8 * static_cast<unsigned>(d);
    for (const uint64_t item : items) scratch[c[(item >> shift) & 0xff]++] = item;
    items.swap(scratch);
  }
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(items[i] & 0xffffffffu);
}

// The first k ids (ascending on entry) in logit order, largest first and
// equal logits by ascending id. A full radix sort when many are kept (no
// top_k: every API request's default), a partial heap sort otherwise.
template <typename T>
void KeepTopByLogit(std::span<const T> logits, size_t k, std::vector<int32_t>& ids) {
  if constexpr (std::is_same_v<T, float>) {
    if (k > 256 && ids.size() > 1024) {
      SortByLogitDescending(logits, ids);
      return;
    }
  }
  const auto by_logit = [&](int32_t a, int32_t b) {
    const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
    return logits[ua] > logits[ub] || (logits[ua] == logits[ub] && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<ptrdiff_t>(k), ids.end(), by_logit);
}

// typical_p on candidates in logit order (step 6 of the header).
void KeepTypical(double mass, Candidates& c) {
  const size_t n = c.ids.size();
  std::vector<double> neg_log_p(n);
  double entropy = 0;
  for (size_t i = 0; i < n; ++i) {
    const double p = c.weights[i] / c.total;
    neg_log_p[i] = -std::log(p);
    if (p > 0) entropy += p * neg_log_p[i];
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  const auto score = [&](size_t i) { return std::abs(neg_log_p[i] - entropy); };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return score(a) < score(b) || (score(a) == score(b) && c.ids[a] < c.ids[b]);
  });
  // The first position whose cumulative mass reaches `mass` (the last one
  // if rounding keeps the sum below it).
  size_t last = n - 1;
  double cumulative = 0;
  for (size_t j = 0; j < n; ++j) {
    cumulative += c.weights[order[j]] / c.total;
    if (cumulative >= mass) {
      last = j;
      break;
    }
  }
  const double limit = score(order[last]);
  Candidates kept;
  for (size_t i = 0; i < n; ++i) {
    if (score(i) > limit) continue;
    kept.ids.push_back(c.ids[i]);
    kept.weights.push_back(c.weights[i]);
    kept.total += c.weights[i];
  }
  c = std::move(kept);
}

}  // namespace

template <typename T>
Result<Candidates> SamplingCandidates(std::span<const T> logits, const SamplingParams& params,
                                      TokenMask allowed) {
  FOLIO_RETURN_IF_ERROR(params.Validate());
  if (logits.empty()) return Status::InvalidArgument("logits row is empty");
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) {
      return Status::InvalidArgument("logit " + std::to_string(i) + " is NaN");
    }
  }
  Candidates c;
  std::vector<int32_t>& ids = c.ids;
  if (!allowed.empty()) {
    FOLIO_ASSIGN_OR_RETURN(ids, AllowedIds(logits.size(), allowed));
  } else {
    ids.resize(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
  }
  // A -inf logit (a processor's ban) is never a candidate. Raw logits hold
  // none, so without processors this changes nothing.
  std::erase_if(ids, [&](int32_t id) {
    return logits[static_cast<size_t>(id)] == -std::numeric_limits<T>::infinity();
  });
  if (ids.empty()) {
    return Status::FailedPrecondition(
        "no token can be selected: every allowed token's logit is -inf (banned)");
  }
  if (params.greedy()) {
    // The first maximum in id order: ties go to the lowest id.
    int32_t best = ids[0];
    for (const int32_t id : ids) {
      if (logits[static_cast<size_t>(id)] > logits[static_cast<size_t>(best)]) best = id;
    }
    c.ids = {best};
    c.weights = {1.0};
    c.total = 1.0;
    return c;
  }
  if (params.top_n_sigma > 0 && ids.size() > 1) KeepTopNSigma(logits, params.top_n_sigma, ids);
  const size_t k = params.top_k == 0 ? ids.size() : std::min<size_t>(params.top_k, ids.size());
  KeepTopByLogit(logits, k, ids);
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
  if (params.typical_p < 1.0 && keep > 1) KeepTypical(params.typical_p, c);
  return c;
}

void ApplyXtc(const SamplingParams& params, SplitMix64& rng, Candidates& c) {
  if (params.greedy() || !params.xtc() || c.ids.size() < 2) return;
  if (rng.NextUnit() > params.xtc_probability) return;
  // Candidates are in logit order, so the ones at or above the threshold
  // come first; all but the last of them go.
  size_t last_above = 0;
  for (size_t i = 0; i < c.ids.size(); ++i) {
    if (c.weights[i] / c.total < params.xtc_threshold) break;
    last_above = i;
  }
  if (last_above == 0) return;
  c.ids.erase(c.ids.begin(), c.ids.begin() + static_cast<ptrdiff_t>(last_above));
  c.weights.erase(c.weights.begin(), c.weights.begin() + static_cast<ptrdiff_t>(last_above));
  c.total = 0;
  for (const double w : c.weights) c.total += w;
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
                            SplitMix64& rng, TokenMask allowed) {
  FOLIO_ASSIGN_OR_RETURN(Candidates c, SamplingCandidates(logits, params, allowed));
  if (params.greedy()) return c.ids[0];  // no draw
  ApplyXtc(params, rng, c);
  return Draw(c, c.total, rng);
}

template <typename T>
Result<int32_t> AcceptOrResample(std::span<const T> logits, const SamplingParams& params,
                                 int32_t draft, SplitMix64& rng, TokenMask allowed) {
  FOLIO_ASSIGN_OR_RETURN(Candidates c, SamplingCandidates(logits, params, allowed));
  if (params.greedy()) return c.ids[0];  // the draft stands iff it is the argmax
  ApplyXtc(params, rng, c);
  // A draft outside the candidates (cut by top-k / top-p / min-p, or
  // forbidden by the mask) has weight 0: rejected, and Draw cannot return it.
  double w = 0;
  for (size_t i = 0; i < c.ids.size(); ++i) {
    if (c.ids[i] == draft) w = c.weights[i];
  }
  if (rng.NextUnit() * c.total < w) return draft;
  return Draw(c, c.total - w, rng, draft);
}

template Result<int32_t> SelectToken<float>(std::span<const float>, const SamplingParams&,
                                            SplitMix64&, TokenMask);
template Result<int32_t> SelectToken<double>(std::span<const double>, const SamplingParams&,
                                             SplitMix64&, TokenMask);
template Result<Candidates> SamplingCandidates<float>(std::span<const float>, const SamplingParams&,
                                                      TokenMask);
template Result<Candidates> SamplingCandidates<double>(std::span<const double>,
                                                       const SamplingParams&, TokenMask);
template bool HasCandidate<float>(std::span<const float>, TokenMask);
template bool HasCandidate<double>(std::span<const double>, TokenMask);
template Result<int32_t> AcceptOrResample<float>(std::span<const float>, const SamplingParams&,
                                                 int32_t, SplitMix64&, TokenMask);
template Result<int32_t> AcceptOrResample<double>(std::span<const double>, const SamplingParams&,
                                                  int32_t, SplitMix64&, TokenMask);

Result<double> LogNormalizer(std::span<const float> logits, TokenMask allowed) {
  if (logits.empty()) return Status::InvalidArgument("logits are empty");
  if (!allowed.empty()) FOLIO_RETURN_IF_ERROR(CheckMask(logits.size(), allowed));
  double max = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) {
      return Status::InvalidArgument("logit " + std::to_string(i) + " is NaN");
    }
    if (MaskAllows(allowed, i)) max = std::max(max, static_cast<double>(logits[i]));
  }
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (MaskAllows(allowed, i)) sum += std::exp(static_cast<double>(logits[i]) - max);
  }
  return max + std::log(sum);
}

std::vector<int32_t> TopTokens(std::span<const float> logits, uint64_t k, TokenMask allowed) {
  // Kept sorted in one pass over the row: no vocabulary-sized buffer.
  auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la != lb ? la > lb : a < b;
  };
  std::vector<int32_t> best;
  best.reserve(std::min<uint64_t>(k, logits.size()));
  for (size_t i = 0; i < logits.size() && k > 0; ++i) {
    if (!MaskAllows(allowed, i)) continue;
    const auto id = static_cast<int32_t>(i);
    if (best.size() == k && !better(id, best.back())) continue;
    if (best.size() == k) best.pop_back();
    best.insert(std::upper_bound(best.begin(), best.end(), id, better), id);
  }
  return best;
}

Result<TokenLogprobs> ComputeLogprobs(std::span<const float> logits, int32_t token, uint64_t top_n,
                                      TokenMask allowed) {
  if (logits.empty()) return Status::InvalidArgument("logits are empty");
  if (token < 0 || static_cast<size_t>(token) >= logits.size()) {
    return Status::OutOfRange("token " + std::to_string(token) + " outside a row of " +
                              std::to_string(logits.size()) + " logits");
  }
  if (top_n > kMaxTopLogprobs) {
    return Status::InvalidArgument("top_logprobs " + std::to_string(top_n) + " exceeds " +
                                   std::to_string(kMaxTopLogprobs));
  }
  FOLIO_ASSIGN_OR_RETURN(const double log_z, LogNormalizer(logits, allowed));
  if (!MaskAllows(allowed, static_cast<uint64_t>(token))) {
    return Status::InvalidArgument("token " + std::to_string(token) +
                                   " is not in the allowed-token mask");
  }
  auto logprob = [&](size_t i) {
    return static_cast<float>(static_cast<double>(logits[i]) - log_z);
  };
  TokenLogprobs out;
  out.token = token;
  out.logprob = logprob(static_cast<size_t>(token));
  for (const int32_t id : TopTokens(logits, top_n, allowed)) {
    out.top.emplace_back(id, logprob(static_cast<size_t>(id)));
  }
  return out;
}

}  // namespace folio::sampling
