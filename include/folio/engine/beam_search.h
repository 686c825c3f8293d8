// Beam search's bookkeeping, as Hugging Face transformers' `generate`
// defines it (num_beams, length_penalty, early_stopping; no sampling): which
// beams go on with which tokens each round, which hypotheses are finished,
// and when the search is done. It sees log-probabilities and token lists
// only; the engine (engine.h) runs the beams as forked sequences on shared
// pages.
//
// One round, for live beams b with cumulative log-probabilities s_b (one
// root beam with s = 0 in the first round):
//   - candidates are (b, t) with score s_b + log p_b(t), where log p is the
//     log-softmax of b's logits in double (sampling::LogNormalizer); the
//     best k = max(2, 1 + #eos) * num_beams of them are taken, highest
//     score first, ties by lower beam index, then lower token id;
//   - in that order, a candidate whose token is an end token becomes a
//     finished hypothesis if its rank is below num_beams (else it is
//     skipped); any other becomes a live beam of the next round, until
//     num_beams are live;
//   - a hypothesis' score is its summed log-probability divided by
//     length ** length_penalty, length counting its generated tokens with
//     its end token; the best num_beams hypotheses are kept;
//   - the search is done once num_beams hypotheses are kept and
//       early_stopping = true: always;
//       heuristic (HF's False): the worst kept score >= best candidate
//         score / (length + 1) ** length_penalty;
//       never: as heuristic, but dividing by max_tokens ** length_penalty
//         when length_penalty > 0 (the best score any beam could reach).
// When the beams reach max_tokens without being done, each live beam
// becomes a hypothesis (its length: max_tokens). The result is the best n
// hypotheses, highest score first (ties: the one kept later first, as
// HF's stable sort and pop from the end).
#ifndef FOLIO_ENGINE_BEAM_SEARCH_H_
#define FOLIO_ENGINE_BEAM_SEARCH_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "folio/core/status.h"

namespace folio::engine {

enum class EarlyStopping { kHeuristic, kTrue, kNever };
std::string_view EarlyStoppingName(EarlyStopping e);

struct BeamSearchParams {
  uint64_t num_beams = 0;  // 0: no beam search
  double length_penalty = 1.0;
  EarlyStopping early_stopping = EarlyStopping::kHeuristic;
};

class BeamSearch {
 public:
  // A live beam, as a round sees it.
  struct Beam {
    std::span<const int32_t> output;  // its generated tokens so far
    double score = 0.0;               // their summed log-probability
    // Its best candidates, (token, log-probability), best first, ties by
    // lower id: at least num_candidates() of them where the vocabulary
    // has as many (TopCandidates).
    std::vector<std::pair<int32_t, double>> top;
  };
  // A beam of the next round: beams[parent] followed by token.
  struct Next {
    size_t parent = 0;
    int32_t token = 0;
    double score = 0.0;
  };
  struct Hypothesis {
    std::vector<int32_t> output;
    double sum_logprob = 0.0;
    double score = 0.0;  // sum_logprob / length ** length_penalty
    bool ended = false;  // ends with an end token (else max_tokens cut it)
  };

  // params.num_beams >= 1, max_tokens >= 1 (checked).
  BeamSearch(const BeamSearchParams& params, uint64_t max_tokens, std::vector<int32_t> end_tokens);

  // Candidates a round takes, and so how many each beam must offer.
  uint64_t num_candidates() const;
  // A beam's best num_candidates() tokens from its logits row, with their
  // log-probabilities. Errors: LogNormalizer's (empty row, NaN).
  Result<std::vector<std::pair<int32_t, double>>> TopCandidates(
      std::span<const float> logits) const;

  // One round over the live beams (all with the same output length, below
  // max_tokens). Returns the next round's num_beams beams, or none when
  // the search is done. Afterwards, call Finish when done() or when the
  // returned beams reached max_tokens.
  std::vector<Next> Step(std::span<const Beam> beams);
  bool done() const { return done_; }
  // The best n hypotheses (n <= num_beams, checked), best first. `live`:
  // the beams of the last round, made hypotheses unless the search is done.
  std::vector<Hypothesis> Finish(std::span<const Beam> live, uint64_t n);

 private:
  void Add(std::vector<int32_t> output, double sum_logprob, bool ended);
  double Normalized(double sum_logprob, uint64_t length) const;
  bool IsEnd(int32_t token) const;

  BeamSearchParams params_;
  uint64_t max_tokens_;
  std::vector<int32_t> end_tokens_;
  std::vector<Hypothesis> kept_;  // in the order kept
  bool done_ = false;
};

}  // namespace folio::engine

#endif  // FOLIO_ENGINE_BEAM_SEARCH_H_
