#include "folio/engine/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "folio/core/check.h"
#include "folio/sampling/sampler.h"

namespace folio::engine {

std::string_view EarlyStoppingName(EarlyStopping e) {
  switch (e) {
    case EarlyStopping::kHeuristic:
      return "heuristic";
    case EarlyStopping::kTrue:
      return "true";
    case EarlyStopping::kNever:
      return "never";
  }
  return "?";
}

BeamSearch::BeamSearch(const BeamSearchParams& params, uint64_t max_tokens,
                       std::vector<int32_t> end_tokens)
    : params_(params), max_tokens_(max_tokens), end_tokens_(std::move(end_tokens)) {
  FOLIO_CHECK(params_.num_beams >= 1 && max_tokens_ >= 1);
  std::sort(end_tokens_.begin(), end_tokens_.end());
  end_tokens_.erase(std::unique(end_tokens_.begin(), end_tokens_.end()), end_tokens_.end());
}

uint64_t BeamSearch::num_candidates() const {
  return std::max<uint64_t>(2, 1 + end_tokens_.size()) * params_.num_beams;
}

Result<std::vector<std::pair<int32_t, double>>> BeamSearch::TopCandidates(
    std::span<const float> logits) const {
  FOLIO_ASSIGN_OR_RETURN(const double log_z, sampling::LogNormalizer(logits));
  std::vector<std::pair<int32_t, double>> top;
  for (const int32_t t : sampling::TopTokens(logits, num_candidates())) {
    top.emplace_back(t, static_cast<double>(logits[static_cast<size_t>(t)]) - log_z);
  }
  return top;
}

bool BeamSearch::IsEnd(int32_t token) const {
  return std::binary_search(end_tokens_.begin(), end_tokens_.end(), token);
}

double BeamSearch::Normalized(double sum_logprob, uint64_t length) const {
  return sum_logprob / std::pow(static_cast<double>(length), params_.length_penalty);
}

void BeamSearch::Add(std::vector<int32_t> output, double sum_logprob, bool ended) {
  const double score = Normalized(sum_logprob, output.size());
  auto worst = [&] {
    return std::min_element(kept_.begin(), kept_.end(),
                            [](const Hypothesis& a, const Hypothesis& b) {
                              return a.score < b.score;  // the first of equals: the earliest kept
                            });
  };
  if (kept_.size() >= params_.num_beams && !(score > worst()->score)) return;
  kept_.push_back({std::move(output), sum_logprob, score, ended});
  if (kept_.size() > params_.num_beams) kept_.erase(worst());
}

std::vector<BeamSearch::Next> BeamSearch::Step(std::span<const Beam> beams) {
  FOLIO_CHECK(!done_ && !beams.empty() && beams.size() <= params_.num_beams);
  struct Candidate {
    size_t beam;
    int32_t token;
    double score;
  };
  std::vector<Candidate> all;
  for (size_t b = 0; b < beams.size(); ++b) {
    FOLIO_CHECK(beams[b].output.size() == beams[0].output.size() &&
                beams[b].output.size() < max_tokens_);
    for (const auto& [token, logprob] : beams[b].top) {
      all.push_back({b, token, beams[b].score + logprob});
    }
  }
  const size_t k = std::min<size_t>(num_candidates(), all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<ptrdiff_t>(k), all.end(),
                    [](const Candidate& a, const Candidate& b) {
                      if (a.score != b.score) return a.score > b.score;
                      return a.beam != b.beam ? a.beam < b.beam : a.token < b.token;
                    });
  all.resize(k);
  std::vector<Next> next;
  for (size_t rank = 0; rank < k && next.size() < params_.num_beams; ++rank) {
    const Candidate& c = all[rank];
    if (!IsEnd(c.token)) {
      next.push_back({c.beam, c.token, c.score});
      continue;
    }
    if (rank >= params_.num_beams) continue;
    std::vector<int32_t> output(beams[c.beam].output.begin(), beams[c.beam].output.end());
    output.push_back(c.token);
    Add(std::move(output), c.score, true);
  }
  const uint64_t length = beams[0].output.size() + 1;
  if (kept_.size() >= params_.num_beams && !all.empty()) {
    const double worst =
        std::min_element(kept_.begin(), kept_.end(), [](const Hypothesis& a, const Hypothesis& b) {
          return a.score < b.score;
        })->score;
    const double best = all.front().score;
    switch (params_.early_stopping) {
      case EarlyStopping::kTrue:
        done_ = true;
        break;
      case EarlyStopping::kHeuristic:
        done_ = worst >= Normalized(best, length);
        break;
      case EarlyStopping::kNever:
        done_ = worst >= Normalized(best, params_.length_penalty > 0.0 ? max_tokens_ : length);
        break;
    }
  }
  if (done_) next.clear();
  return next;
}

std::vector<BeamSearch::Hypothesis> BeamSearch::Finish(std::span<const Beam> live, uint64_t n) {
  FOLIO_CHECK(n <= params_.num_beams);
  if (!done_) {
    for (const Beam& b : live) {
      Add(std::vector<int32_t>(b.output.begin(), b.output.end()), b.score, false);
    }
  }
  done_ = true;
  // HF sorts by score (stable) and pops from the end: among equal scores
  // the one kept later comes first.
  std::vector<Hypothesis> sorted = kept_;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Hypothesis& a, const Hypothesis& b) { return a.score < b.score; });
  std::reverse(sorted.begin(), sorted.end());
  sorted.resize(std::min<size_t>(n, sorted.size()));
  return sorted;
}

}  // namespace folio::engine
