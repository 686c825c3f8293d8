// Token selection from one row of logits.
//
// A row's logits come here after the request's logits processors
// (sampling/logits_processors.h: penalties, bias, bans), which may have set
// some to -inf: a token whose logit is -inf is never a candidate.
//
// Greedy (temperature 0) takes the argmax, ties to the lowest id, and draws
// nothing from the random stream (top_n_sigma, top_k, top_p, min_p,
// typical_p and XTC do not apply: each keeps the argmax, or, for
// typical_p and XTC, would not be asked for with greedy decoding, as Hugging
// Face and vLLM ignore them there). Otherwise, in this order:
//   1. top_n_sigma (0 = off): candidates whose logit is below
//      max - top_n_sigma * sigma are dropped, sigma the population standard
//      deviation of the candidates' logits (llama.cpp's rule; temperature
//      scales max and sigma alike, so it does not matter where it stands);
//   2. candidates sorted by logit (ties: lower id first), cut to top_k (0 =
//      all);
//   3. weighted by exp((logit - max) / temperature) in double precision;
//   4. top_p: cut to the shortest prefix whose weight reaches top_p of the
//      total (1 = off);
//   5. min_p: every candidate below min_p times the top weight dropped (0 =
//      off);
//   6. typical_p (1 = off; Meister et al., Hugging Face's
//      TypicalLogitsWarper): with p the candidates' normalized weights and
//      H their entropy, the candidates sorted by |-log p - H| (ties: lower
//      id) are cut after the first whose cumulative p reaches typical_p, and
//      every candidate scoring no more than that one is kept; the kept ones
//      stay in logit order;
//   7. XTC (llama.cpp's "exclude top choices"; xtc_probability 0 = off, and
//      off when xtc_threshold > 0.5 or one candidate is left): one unit draw
//      u; if u <= xtc_probability, every candidate whose normalized weight
//      is >= xtc_threshold except the least likely of them is dropped.
// One SplitMix64 unit draw then picks the token by walking the cumulative
// weights in that order. Exactly one draw per sampled token (two with XTC
// on), so a stream's state says how many tokens were sampled from it.
// This is Hugging Face's warper order (temperature, top_k, top_p, min_p,
// typical_p) with llama.cpp's top_n_sigma first and XTC last.
//
// An allowed-token mask (structured output: grammar::Matcher::FillMask)
// restricts the candidates before anything else: the sampler behaves
// exactly as if the row held only the allowed tokens (in id order), so
// greedy takes the argmax among them, top_k / top_p / min_p cut among
// them, and a disallowed token is never returned, whatever its logit. The
// mask filters candidates rather than writing -inf into logits: a weight
// of zero could still be drawn by the walk's rounding fallback, and
// exp(-inf - -inf) is NaN. Without a mask (an empty span) nothing
// changes, bit for bit.
#ifndef FOLIO_SAMPLING_SAMPLER_H_
#define FOLIO_SAMPLING_SAMPLER_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "folio/core/splitmix64.h"
#include "folio/core/status.h"

namespace folio::sampling {

// Which tokens of a row of n logits may be selected: [TokenMaskWords(n)]
// words, token t allowed iff bit t % 64 of word t / 64 is set. An empty
// span allows every token.
using TokenMask = std::span<const uint64_t>;
inline constexpr uint64_t TokenMaskWords(uint64_t n) { return (n + 63) / 64; }
inline bool MaskAllows(TokenMask mask, uint64_t t) {
  return mask.empty() || ((mask[t / 64] >> (t % 64)) & 1) != 0;
}

struct SamplingParams {
  double temperature = 0.0;      // 0 = greedy
  uint64_t top_k = 0;            // 0 = no limit
  double top_p = 1.0;            // in (0, 1]; 1 = no limit
  double min_p = 0.0;            // in [0, 1]; 0 = no limit
  double typical_p = 1.0;        // in [0, 1]; 1 = off
  double top_n_sigma = 0.0;      // >= 0; 0 = off
  double xtc_probability = 0.0;  // in [0, 1]; 0 = off
  double xtc_threshold = 0.1;    // in [0, 1]; above 0.5 = off

  // Errors: temperature negative or not finite; top_p outside (0, 1];
  // min_p, typical_p, xtc_probability or xtc_threshold outside [0, 1];
  // top_n_sigma negative or not finite. Each names the parameter.
  Status Validate() const;
  bool greedy() const { return temperature == 0.0; }
  // Whether XTC can act (and so draws): probability > 0, threshold <= 0.5.
  bool xtc() const { return xtc_probability > 0.0 && xtc_threshold <= 0.5; }
};

// Errors: empty logits, invalid params, a NaN logit (allowed or not), a
// mask of the wrong size (InvalidArgument naming both sizes) or one that
// allows no token of the row, a row with no candidate (every allowed logit
// -inf: FailedPrecondition; HasCandidate says so beforehand).
template <typename T>
Result<int32_t> SelectToken(std::span<const T> logits, const SamplingParams& params,
                            SplitMix64& rng, TokenMask allowed = {});

// The candidates SelectToken draws from, in its order, with their
// (unnormalized) weights and their total: greedy, the argmax alone. XTC is
// not applied here (it needs a draw: ApplyXtc).
struct Candidates {
  std::vector<int32_t> ids;
  std::vector<double> weights;
  double total = 0;
};
template <typename T>
Result<Candidates> SamplingCandidates(std::span<const T> logits, const SamplingParams& params,
                                      TokenMask allowed = {});
// XTC (step 7 above) on candidates: draws one unit from rng when
// params.xtc() and there are at least two candidates, and drops the top
// choices when the draw says so.
void ApplyXtc(const SamplingParams& params, SplitMix64& rng, Candidates& c);

// Whether some token of the row can be selected: one the mask allows whose
// logit is not -inf (a NaN counts: the sampler refuses it by name).
template <typename T>
bool HasCandidate(std::span<const T> logits, TokenMask allowed = {});

// Speculative sampling's acceptance rule (Leviathan et al., 2023) for a
// drafter that proposes `draft` with certainty: the draft stands with its
// probability p(draft) under SelectToken's distribution (one unit draw:
// kept iff u * total < its weight); otherwise the token is drawn from that
// distribution without the draft (a second draw, renormalized). So the
// token returned follows SelectToken's distribution exactly, whatever the
// draft, but not SelectToken's random stream. Greedy: the argmax, no draw.
// With a mask the distribution is the masked one: a draft the mask forbids
// has probability 0, so it is always rejected (one draw spent) and the
// token is drawn from the allowed candidates. With XTC on, its draw comes
// first and the distribution is the one it leaves. Errors: SelectToken's.
template <typename T>
Result<int32_t> AcceptOrResample(std::span<const T> logits, const SamplingParams& params,
                                 int32_t draft, SplitMix64& rng, TokenMask allowed = {});

// Log-probabilities of the model's own distribution: log-softmax of the raw
// logits (temperature 1, before top-k / top-p / min-p), as OpenAI's
// `logprobs` reports them. Computed in double, summing in vocabulary order,
// then rounded to float, so they are a function of the logits alone.
// With an allowed-token mask (structured output) the distribution is the
// masked one, as vLLM reports it (its grammar bitmask is applied to the
// logits before log-probs are taken): the log-softmax over the allowed
// tokens only, and alternatives among them.
struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0.0f;
  // The top_n most likely tokens, most likely first (ties: lower id first).
  std::vector<std::pair<int32_t, float>> top;
};

inline constexpr uint64_t kMaxTopLogprobs = 20;

// Errors: empty logits, a NaN logit, token outside the row or outside the
// mask, top_n > kMaxTopLogprobs, a mask of the wrong size or allowing
// nothing.
Result<TokenLogprobs> ComputeLogprobs(std::span<const float> logits, int32_t token, uint64_t top_n,
                                      TokenMask allowed = {});

// The log-softmax's normalizer of a row, log(sum exp(logit)), computed as
// ComputeLogprobs does: in double, max + log(sum exp(logit - max)), summing
// in vocabulary order, over the allowed tokens only with a mask. A token's
// log-probability is its logit minus this. Errors: empty logits, a NaN
// logit, a mask of the wrong size or allowing nothing.
Result<double> LogNormalizer(std::span<const float> logits, TokenMask allowed = {});
// The ids of the k largest logits (all of them if the row is shorter),
// largest first, ties by lower id first; with a mask, among the allowed
// tokens only.
std::vector<int32_t> TopTokens(std::span<const float> logits, uint64_t k, TokenMask allowed = {});

}  // namespace folio::sampling

#endif  // FOLIO_SAMPLING_SAMPLER_H_
