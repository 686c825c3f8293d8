// folio._folio.apply_logits_processors and folio._folio.sampling_candidates:
// the sampling module's processors and candidate filters on one row, so
// tests can hold them against implementations folio did not write
// (transformers' logits processors, NumPy transcriptions of OpenAI's and
// llama.cpp's rules). Token level: bad words and DRY breakers come as ids.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "bindings.h"
#include "folio/core/splitmix64.h"
#include "folio/sampling/logits_processors.h"
#include "folio/sampling/sampler.h"

namespace nb = nanobind;

namespace folio::python {

void BindSampling(nb::module_& m) {
  m.def(
      "apply_logits_processors",
      [](std::vector<float> logits, const std::vector<int32_t>& tokens, uint64_t num_prompt_tokens,
         double repetition_penalty, double presence_penalty, double frequency_penalty,
         int64_t penalty_last_n, const std::map<int32_t, double>& logit_bias,
         const std::vector<int32_t>& allowed_token_ids,
         const std::vector<std::vector<int32_t>>& bad_words_ids, int64_t min_tokens,
         const std::vector<int32_t>& end_ids, double dry_multiplier, double dry_base,
         int64_t dry_allowed_length, int64_t dry_penalty_last_n,
         const std::vector<std::pair<int32_t, std::vector<int32_t>>>& dry_breakers) {
        if (num_prompt_tokens > tokens.size()) {
          throw nb::value_error("num_prompt_tokens exceeds the tokens given");
        }
        sampling::ProcessorParams p;
        p.repetition_penalty = repetition_penalty;
        p.presence_penalty = presence_penalty;
        p.frequency_penalty = frequency_penalty;
        p.penalty_last_n = penalty_last_n;
        p.logit_bias = logit_bias;
        p.allowed_token_ids = allowed_token_ids;
        p.bad_words_ids = bad_words_ids;
        p.min_tokens = min_tokens;
        p.dry = {dry_multiplier, dry_base, dry_allowed_length, dry_penalty_last_n};
        for (const auto& [head, tail] : dry_breakers) p.dry_breakers.push_back({head, tail});
        sampling::ProcessorScratch scratch;
        sampling::ApplyLogitsProcessors(p, {tokens, num_prompt_tokens}, end_ids, logits, scratch);
        return logits;
      },
      nb::arg("logits"), nb::arg("tokens"), nb::arg("num_prompt_tokens"), nb::kw_only(),
      nb::arg("repetition_penalty") = 1.0, nb::arg("presence_penalty") = 0.0,
      nb::arg("frequency_penalty") = 0.0, nb::arg("penalty_last_n") = -1,
      nb::arg("logit_bias") = std::map<int32_t, double>{},
      nb::arg("allowed_token_ids") = std::vector<int32_t>{},
      nb::arg("bad_words_ids") = std::vector<std::vector<int32_t>>{}, nb::arg("min_tokens") = 0,
      nb::arg("end_ids") = std::vector<int32_t>{}, nb::arg("dry_multiplier") = 0.0,
      nb::arg("dry_base") = 1.75, nb::arg("dry_allowed_length") = 2,
      nb::arg("dry_penalty_last_n") = -1,
      nb::arg("dry_breakers") = std::vector<std::pair<int32_t, std::vector<int32_t>>>{},
      "The logits processors (sampling/logits_processors.h) on one float32 row, in their "
      "order, over `tokens` (the prompt's num_prompt_tokens, then the generated ones); token "
      "level. Returns the processed row.");

  m.def(
      "sampling_candidates",
      [](const std::vector<float>& logits, double temperature, uint64_t top_k, double top_p,
         double min_p, double typical_p, double top_n_sigma, double xtc_probability,
         double xtc_threshold, uint64_t seed) {
        sampling::SamplingParams p;
        p.temperature = temperature;
        p.top_k = top_k;
        p.top_p = top_p;
        p.min_p = min_p;
        p.typical_p = typical_p;
        p.top_n_sigma = top_n_sigma;
        p.xtc_probability = xtc_probability;
        p.xtc_threshold = xtc_threshold;
        Result<sampling::Candidates> c = sampling::SamplingCandidates<float>(logits, p);
        if (!c.ok()) ThrowIfError(c.error());
        // XTC's draw, as SelectToken makes it: the first unit of the stream.
        SplitMix64 rng(seed);
        std::optional<double> draw;
        if (!p.greedy() && p.xtc() && c->ids.size() >= 2) draw = SplitMix64(seed).NextUnit();
        sampling::ApplyXtc(p, rng, *c);
        nb::dict out;
        out["ids"] = c->ids;
        out["weights"] = c->weights;
        out["xtc_draw"] = draw;
        return out;
      },
      nb::arg("logits"), nb::kw_only(), nb::arg("temperature") = 1.0, nb::arg("top_k") = 0,
      nb::arg("top_p") = 1.0, nb::arg("min_p") = 0.0, nb::arg("typical_p") = 1.0,
      nb::arg("top_n_sigma") = 0.0, nb::arg("xtc_probability") = 0.0,
      nb::arg("xtc_threshold") = 0.1, nb::arg("seed") = 0,
      "The candidates SelectToken draws from on one float32 row (sampling/sampler.h), in its "
      "order: {ids, weights (unnormalized), xtc_draw (the unit XTC drew, or None)}.");
}

}  // namespace folio::python
