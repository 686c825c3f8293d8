// How a request's rows become its outputs: the engine's decoding
// strategies, behind one interface.
//
// Step asks each scheduled sequence's request which rows it wants from the
// model (Rows), hands it those rows once the step ran (OnRows), and, once
// every row is in, gives each request that ran a last word (AfterStep: a
// beam search's round). A strategy works on the engine's parts directly
// (it is a nested class of Engine): the scheduler's sequences, the output
// processor, the request table.
//
//   SampleDecoding   one sequence sampled token by token, its speculative
//                    drafts verified; n > 1 samples fork from it once the
//                    prompt is in, each then sampled on its own
//   BeamDecoding     beam search: the beams offer candidates, a round
//                    forks, finishes and extends them
//   PoolingDecoding  a pooled embedding: the prompt's hidden states, summed
//
// Lifetime: a strategy may finish sequences (Engine::FinishMember) but
// never erases its request; Step erases requests left without sequences
// after every strategy had its word.
#ifndef FOLIO_ENGINE_DECODING_H_
#define FOLIO_ENGINE_DECODING_H_

#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "folio/core/status.h"
#include "folio/engine/beam_search.h"
#include "folio/engine/engine.h"

namespace folio::engine {

class Engine::Decoding {
 public:
  virtual ~Decoding() = default;
  // What the model returns for sequence p.id's tokens this step (planned,
  // not yet run).
  virtual model::LogitRows Rows(const Engine& e, const Member& m,
                                const ScheduledSequence& p) const = 0;
  // Sequence p.id of `request` ran its part of the step: `rows` are its
  // logits ([1 or p.num_tokens, vocab], as `kind` says) or its final hidden
  // states (kHidden: [p.num_tokens, hidden]). Appends what the request
  // produced to out.
  virtual Status OnRows(Engine& e, RequestId request, const ScheduledSequence& p,
                        model::LogitRows kind, std::span<const float> rows,
                        std::vector<StepOutput>& out) = 0;
  // After every row of the step, once per request that had rows in it.
  virtual Status AfterStep(Engine& /*e*/, RequestId /*request*/, std::vector<StepOutput>& /*out*/) {
    return Status::Ok();
  }
  // Whether its sequences take speculative drafts.
  virtual bool drafts() const { return false; }
};

class Engine::SampleDecoding final : public Engine::Decoding {
 public:
  model::LogitRows Rows(const Engine& e, const Member& m,
                        const ScheduledSequence& p) const override;
  Status OnRows(Engine& e, RequestId request, const ScheduledSequence& p, model::LogitRows kind,
                std::span<const float> rows, std::vector<StepOutput>& out) override;
  bool drafts() const override { return true; }

 private:
  // The prompt is in: forks the request into its n samples (scheduler and
  // output states), then each draws its first token from the same logits.
  static Status ForkAndSample(Engine& e, RequestId request, std::span<const float> logits,
                              std::vector<StepOutput>& out);
  // Samples a verified draft's rows position by position as plain decoding
  // would, keeps the draft tokens that match, and appends the token after
  // them. logits: one row per fed token.
  static Result<StepOutput> VerifyDraft(Engine& e, Member& m, std::span<const float> logits);
};

class Engine::BeamDecoding final : public Engine::Decoding {
 public:
  // n: the hypotheses to return; skip_special_tokens: the request's
  // (RequestParams), for their text.
  BeamDecoding(BeamSearch search, uint64_t n, bool skip_special_tokens)
      : search_(std::move(search)), n_(n), skip_special_tokens_(skip_special_tokens) {}
  model::LogitRows Rows(const Engine& /*e*/, const Member& /*m*/,
                        const ScheduledSequence& /*p*/) const override {
    return model::LogitRows::kLast;
  }
  // Records a beam's candidates from its logits row.
  Status OnRows(Engine& e, RequestId request, const ScheduledSequence& p, model::LogitRows kind,
                std::span<const float> rows, std::vector<StepOutput>& out) override;
  // Once every live beam has offered, runs the round (forks, finishes and
  // extends the beams) and, when the search ends, appends the request's
  // hypotheses to `out`.
  Status AfterStep(Engine& e, RequestId request, std::vector<StepOutput>& out) override;

 private:
  // Ends the search: its best hypotheses into `out` (when not null), every
  // live beam finished.
  void End(Engine& e, RequestId request, std::span<const BeamSearch::Beam> live,
           std::vector<StepOutput>* out);

  BeamSearch search_;
  uint64_t n_;
  bool skip_special_tokens_;
  // The live beams' summed log-probabilities, in the order of the
  // request's members (beam order).
  std::vector<double> scores_ = {0.0};
  // This round's candidates, by sequence, from the beams that ran.
  std::map<RequestId, std::vector<std::pair<int32_t, double>>> offered_;
};

class Engine::PoolingDecoding final : public Engine::Decoding {
 public:
  model::LogitRows Rows(const Engine& /*e*/, const Member& /*m*/,
                        const ScheduledSequence& /*p*/) const override {
    return model::LogitRows::kHidden;
  }
  // Takes the prompt's hidden rows; after the last, the embedding.
  Status OnRows(Engine& e, RequestId request, const ScheduledSequence& p, model::LogitRows kind,
                std::span<const float> rows, std::vector<StepOutput>& out) override;
};

}  // namespace folio::engine

#endif  // FOLIO_ENGINE_DECODING_H_
