// A continuous-batching engine over one model and one paged KV pool.
//
// Every step: running sequences decode first (one token each), then waiting
// or partially prefilled requests get prompt chunks, first come first
// served, under a token budget (max_num_batched_tokens) and a cap on
// running sequences (max_num_seqs). Pages come from one PagedKvCache; a
// request is admitted only when the pool can hold its next chunk; when a
// running sequence needs a page and none is free, the most recently admitted
// sequence is preempted (its pages released, its tokens recomputed later).
// All of a step's sequences go through one Decoder<float>::Step, whose
// results for a sequence do not depend on what else is in the batch, so a
// request's tokens are the same alone or batched, preempted or not.
//
// First increment of the engine issue: no prefix caching, no stop strings
// or log-probs yet (see the issue note).
#ifndef FOLIO_ENGINE_ENGINE_H_
#define FOLIO_ENGINE_ENGINE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "folio/core/splitmix64.h"
#include "folio/core/status.h"
#include "folio/kv/paged_kv_cache.h"
#include "folio/model/decoder.h"
#include "folio/sampling/sampler.h"

namespace folio::engine {

struct EngineConfig {
  uint64_t page_size = 16;
  uint64_t num_pages = 256;
  DType kv_dtype = DType::kF32;
  uint64_t max_num_batched_tokens = 256;  // tokens per step, all sequences
  uint64_t max_num_seqs = 8;              // running sequences
};

struct RequestParams {
  sampling::SamplingParams sampling;
  uint64_t max_tokens = 16;
  uint64_t seed = 0;                   // the request's own SplitMix64 stream
  std::vector<int32_t> stop_token_ids;  // finish when one is selected (kept)
};

enum class FinishReason { kNone, kStop, kLength, kAbort };
std::string_view FinishReasonName(FinishReason r);

using RequestId = uint64_t;

// What one step produced for one request.
struct StepOutput {
  RequestId id;
  std::vector<int32_t> new_tokens;
  FinishReason finish = FinishReason::kNone;
};

struct EngineStats {
  uint64_t steps = 0;
  uint64_t preemptions = 0;
  uint64_t prompt_tokens_computed = 0;  // recomputation after preemption included
  uint64_t decode_tokens = 0;
};

class Engine {
 public:
  // Errors: a pool that does not match the model, bad limits.
  static Result<Engine> Create(const model::Model& model, EngineConfig config,
                               ThreadPool* pool = nullptr);

  // Errors: an empty prompt, token ids outside the vocabulary, invalid
  // sampling params, max_tokens 0, a request that could never fit the pool
  // or the model's positions.
  Result<RequestId> AddRequest(std::vector<int32_t> prompt, RequestParams params);
  // Finishes a request at once and frees its pages. NotFound if unknown or
  // already finished.
  Status Abort(RequestId id);
  // Runs one step. Returns the requests that produced tokens or finished.
  Result<std::vector<StepOutput>> Step();
  bool HasUnfinished() const { return !waiting_.empty() || !running_.empty(); }

  // Runs every prompt to completion; tokens per prompt, in order.
  Result<std::vector<std::vector<int32_t>>> Generate(
      const std::vector<std::vector<int32_t>>& prompts, const RequestParams& params);

  const kv::PagedKvCache& cache() const { return cache_; }
  const EngineStats& stats() const { return stats_; }

 private:
  struct Request {
    RequestId id;
    std::vector<int32_t> prompt;
    RequestParams params;
    SplitMix64 rng{0};
    std::vector<int32_t> output;
    std::optional<kv::SeqId> seq;  // while it holds pages
    uint64_t computed = 0;         // tokens whose K/V are in the cache
    uint64_t admitted_at = 0;      // admission order, for preemption
  };
  Engine(model::Decoder<float> decoder, kv::PagedKvCache cache, EngineConfig config)
      : decoder_(std::move(decoder)), cache_(std::move(cache)), config_(config) {}

  // Tokens the request still has to feed: its prompt and generated tokens
  // beyond what is cached.
  static uint64_t Pending(const Request& r) {
    return r.prompt.size() + r.output.size() - r.computed;
  }
  void Preempt(Request& r);
  void Finish(Request& r, FinishReason why, std::vector<StepOutput>& out);

  model::Decoder<float> decoder_;
  kv::PagedKvCache cache_;
  EngineConfig config_;
  std::map<RequestId, Request> requests_;
  std::deque<RequestId> waiting_;  // FCFS; preempted requests go to the front
  std::vector<RequestId> running_;  // admission order
  RequestId next_id_ = 0;
  uint64_t admissions_ = 0;
  EngineStats stats_;
};

}  // namespace folio::engine

#endif  // FOLIO_ENGINE_ENGINE_H_
