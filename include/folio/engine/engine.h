// A continuous-batching engine over one model and one paged KV pool.
//
// Every step: running sequences decode first (one token each), then waiting
// or partially prefilled requests get prompt chunks, first come first
// served, under a token budget (max_num_batched_tokens) and a cap on
// running sequences (max_num_seqs). Pages come from one PagedKvCache.
//
// Admission: a waiting request first reuses the longest prefix of its
// tokens that the prefix cache holds in full pages (kv/prefix_cache.h; never
// all of them: its last token is always computed, for its logits), then is
// admitted only if the pool can hold its pending prefill on top of what
// the step's running sequences need, plus a watermark of free pages kept for
// their growth (waived when nothing runs, so no request starves). Pages only
// the prefix cache holds count as free: they are evicted, least recently
// used first, when the pool runs short. When a running sequence still needs
// a page and none is free, the most recently admitted sequence is preempted
// (its pages released, its tokens recomputed later, mostly from the prefix
// cache). Preempted requests go back to the front of the queue.
//
// "Can hold" means the request's whole pending prefill (its prompt, plus
// what it generated before a preemption), not only the next chunk: a
// request admitted on its first chunk alone would be preempted as soon as
// the others grow, and recomputed, again and again.
//
// Determinism (../../../shared/ARCHITECTURE.md, contract 3): all of a
// step's sequences go through one Decoder<float>::Step, whose results for a
// sequence depend only on its own tokens, and each request samples from its
// own SplitMix64 stream. So a request's tokens and log-probs are the same
// alone or batched, in any arrival order, with any chunk or page size,
// prefix-cache state, preemption history or thread count.
#ifndef FOLIO_ENGINE_ENGINE_H_
#define FOLIO_ENGINE_ENGINE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/checked_math.h"
#include "folio/core/splitmix64.h"
#include "folio/core/status.h"
#include "folio/format/kv_snapshot.h"
#include "folio/kv/paged_kv_cache.h"
#include "folio/kv/prefix_cache.h"
#include "folio/model/decoder.h"
#include "folio/model/tokenizer.h"
#include "folio/sampling/sampler.h"

namespace folio::engine {

struct EngineConfig {
  uint64_t page_size = 16;
  uint64_t num_pages = 256;
  DType kv_dtype = DType::kF32;
  uint64_t max_num_batched_tokens = 256;  // tokens per step, all sequences
  uint64_t max_num_seqs = 8;              // running sequences
  bool prefix_caching = true;
  // Free pages kept back at admission for running sequences to grow into,
  // as a fraction of the pool (vLLM's default is 1%).
  double watermark = 0.01;
  // How attention reads K/V: kDirect is the engine; kGather is the dense
  // baseline `folio bench serve` measures against.
  model::KvAccess kv_access = model::KvAccess::kDirect;
  // Admit a request only when the pool can hold its whole maximum length
  // (prompt + max_tokens), as engines that keep each sequence's K/V in one
  // contiguous reservation must. Pages are still filled on demand, but the
  // reservations never exceed the pool, so nothing is ever preempted. The
  // baseline `folio bench serve` compares paging's admission against.
  bool reserve_max_length = false;
};

struct RequestParams {
  sampling::SamplingParams sampling;
  uint64_t max_tokens = 16;
  uint64_t seed = 0;                   // the request's own SplitMix64 stream
  std::vector<int32_t> stop_token_ids;  // finish when one is selected (kept)
  // Finish when the output text contains one (needs the engine's
  // tokenizer). The text returned stops before it; the tokens include the
  // one that completed it.
  std::vector<std::string> stop_strings;
  bool logprobs = false;      // return each token's log-probability
  uint64_t top_logprobs = 0;  // and this many alternatives (<= 20)
};

enum class FinishReason { kNone, kStop, kLength, kAbort };
std::string_view FinishReasonName(FinishReason r);

using RequestId = uint64_t;

// What one step produced for one request.
struct StepOutput {
  RequestId id;
  std::vector<int32_t> new_tokens;
  // With a tokenizer: the text these tokens add. Text that might be the
  // start of a stop string is held back until it is known not to be.
  std::string text;
  std::vector<sampling::TokenLogprobs> logprobs;  // per new token, if asked
  FinishReason finish = FinishReason::kNone;
};

struct EngineStats {
  uint64_t steps = 0;
  uint64_t preemptions = 0;
  uint64_t prompt_tokens_computed = 0;  // recomputation after preemption included
  uint64_t decode_tokens = 0;
  // Prefix cache, counted at each admission: tokens that could have been
  // reused (whole pages before the last token) and those that were.
  uint64_t prefix_query_tokens = 0;
  uint64_t prefix_hit_tokens = 0;
  uint64_t prefix_evictions = 0;  // cached pages given back to the pool
  uint64_t kv_copy_bytes = 0;     // K/V gathered (KvAccess::kGather only)
  uint64_t peak_running = 0;      // most sequences in one step
  // reserve_max_length: the most pages reserved at once.
  uint64_t peak_reserved_pages = 0;
  double prefix_hit_rate() const {
    return prefix_query_tokens == 0 ? 0.0
                                    : static_cast<double>(prefix_hit_tokens) /
                                          static_cast<double>(prefix_query_tokens);
  }
};

class Engine {
 public:
  // tokenizer (optional; it must outlive the engine) turns output into text
  // and enables stop strings. Errors: a pool that does not match the model,
  // bad limits.
  static Result<Engine> Create(const model::Model& model, EngineConfig config,
                               ThreadPool* pool = nullptr,
                               const model::Tokenizer* tokenizer = nullptr);

  // Errors: an empty prompt, token ids outside the vocabulary, invalid
  // sampling params, max_tokens 0, a request that could never fit the pool
  // or the model's positions, stop strings that are empty or given without
  // a tokenizer, top_logprobs > 20.
  Result<RequestId> AddRequest(std::vector<int32_t> prompt, RequestParams params);
  // Finishes a request at once and frees its pages. NotFound if unknown or
  // already finished.
  Status Abort(RequestId id);
  // Runs one step. Returns the requests that produced tokens or finished.
  Result<std::vector<StepOutput>> Step();
  bool HasUnfinished() const { return !waiting_.empty() || !running_.empty(); }
  uint64_t num_running() const { return running_.size(); }
  uint64_t num_waiting() const { return waiting_.size(); }

  // Prefill here, decode there (format/kv_snapshot.h). ExportSnapshot
  // copies the listed requests' pages (each shared page once), block
  // tables, tokens, sampling parameters and random-stream state; the
  // requests must be running (hold pages) and are left as they are.
  // Errors: NotFound (unknown or finished id), FailedPrecondition (a
  // request still waiting, without pages), InvalidArgument (an id listed
  // twice).
  Result<format::KvSnapshot> ExportSnapshot(std::span<const RequestId> ids) const;
  // Continues a snapshot's requests here, as running requests with new
  // ids (returned in snapshot order). Everything is checked before the
  // pool changes: the model id, KV dtype, page size and K/V shape must
  // match (InvalidArgument naming the mismatch), every request must pass
  // AddRequest's checks and be consistent with its pages; the pool must
  // have the snapshot's pages free (after evicting cached pages;
  // ResourceExhausted otherwise). On any error nothing changed. Decoding
  // then continues bit-identically to an engine that never exported.
  Result<std::vector<RequestId>> ImportSnapshot(const format::KvSnapshot& snapshot);

  // Runs every prompt to completion; tokens per prompt, in order.
  Result<std::vector<std::vector<int32_t>>> Generate(
      const std::vector<std::vector<int32_t>>& prompts, const RequestParams& params);

  const kv::PagedKvCache& cache() const { return cache_; }
  // reserve_max_length: pages reserved by the running requests now.
  uint64_t reserved_pages() const { return reserved_pages_; }
  // Pages only the prefix cache holds (reusable, evictable).
  uint64_t cached_pages() const { return cache_.pages_held_only(); }
  // Gives every cached page back to the pool (nothing running needs them).
  Status ClearPrefixCache();
  const EngineStats& stats() const { return stats_; }

 private:
  struct Request {
    RequestId id = 0;
    std::vector<int32_t> prompt;
    RequestParams params;
    SplitMix64 rng{0};
    std::vector<int32_t> output;
    std::optional<kv::SeqId> seq;  // while it holds pages
    uint64_t computed = 0;         // tokens whose K/V are in the cache
    uint64_t admitted_at = 0;      // admission order, for preemption
    // The prefix-cache chain of the sequence's full pages: how many are
    // cached (or were found cached), and the last one's entry and hash.
    uint64_t pages_cached = 0;
    kv::PrefixCache::EntryId chain = kv::PrefixCache::kRoot;
    uint64_t chain_hash = kv::PrefixCache::kRootHash;
    // Text (with a tokenizer): all decoded so far, and how much of it has
    // been returned.
    std::optional<model::StreamingDecoder> detok;
    std::string text;
    size_t text_sent = 0;
  };
  Engine(model::Decoder<float> decoder, kv::PagedKvCache cache, EngineConfig config,
         const model::Tokenizer* tokenizer)
      : decoder_(std::move(decoder)),
        cache_(std::move(cache)),
        config_(config),
        tokenizer_(tokenizer),
        prefix_(config.page_size) {}

  // Pages a request's maximum length takes (reserve_max_length).
  uint64_t Reservation(const Request& r) const {
    return CeilDiv(r.prompt.size() + r.params.max_tokens - 1, config_.page_size);
  }
  static int32_t TokenAt(const Request& r, uint64_t i) {
    return i < r.prompt.size() ? r.prompt[i] : r.output[i - r.prompt.size()];
  }

  // Tokens the request still has to feed: its prompt and generated tokens
  // beyond what is cached.
  static uint64_t Pending(const Request& r) {
    return r.prompt.size() + r.output.size() - r.computed;
  }
  // The checks AddRequest makes on a request's prompt and parameters.
  Status ValidateRequest(const std::vector<int32_t>& prompt, const RequestParams& params) const;
  // Gives a request's sequence back (its full pages stay cached).
  void ReleaseSequence(Request& r);
  void Preempt(Request& r);
  void Finish(Request& r, FinishReason why, std::vector<StepOutput>& out);
  // Starts r's sequence on the longest cached prefix of its tokens.
  Status Admit(Request& r);
  // Caches r's newly completed full pages.
  Status CachePages(Request& r);
  // Appends one token's text to out; true when a stop string completed.
  bool EmitText(Request& r, int32_t token, StepOutput& out);
  void FlushText(Request& r, StepOutput& out);

  model::Decoder<float> decoder_;
  kv::PagedKvCache cache_;
  EngineConfig config_;
  const model::Tokenizer* tokenizer_;
  kv::PrefixCache prefix_;
  model::GatherState gather_;  // KvAccess::kGather only
  std::map<RequestId, Request> requests_;
  std::deque<RequestId> waiting_;  // FCFS; preempted requests go to the front
  std::vector<RequestId> running_;  // admission order
  RequestId next_id_ = 0;
  uint64_t admissions_ = 0;
  uint64_t reserved_pages_ = 0;  // reserve_max_length: sum over running
  EngineStats stats_;
};

}  // namespace folio::engine

#endif  // FOLIO_ENGINE_ENGINE_H_
