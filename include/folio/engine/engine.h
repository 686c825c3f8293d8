// A continuous-batching engine over one model and one paged KV pool.
//
// The engine is a short composition of four parts, each in its own file:
//
//   Scheduler        (scheduler.h)         waiting and running queues; a plan
//                                          per step: who runs, how many
//                                          tokens each, who is preempted
//   KvCacheManager   (kv_cache_manager.h)  the paged cache and the prefix
//                                          cache behind one façade
//   ModelRunner      (model_runner.h)      runs a plan's tokens on the model
//   OutputProcessor  (output_processor.h)  sampling, log-probs, text, stops
//
// Step() asks the scheduler for a plan, has the model runner execute it,
// then commits it (or abandons it on failure: nothing changed) and turns
// each finished row's logits into a token.
//
// Determinism (docs/design.md, determinism): all of a step's sequences go
// through one Decoder::Step, whose results for a sequence depend
// only on its own tokens, and each request samples from its own SplitMix64
// stream. So a request's tokens and log-probs are the same alone or
// batched, in any arrival order, with any chunk or page size, prefix-cache
// state, preemption history or thread count.
#ifndef FOLIO_ENGINE_ENGINE_H_
#define FOLIO_ENGINE_ENGINE_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "folio/core/status.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/beam_search.h"
#include "folio/engine/draft_model_drafter.h"
#include "folio/engine/drafter.h"
#include "folio/engine/kv_cache_manager.h"
#include "folio/engine/model_runner.h"
#include "folio/engine/output_processor.h"
#include "folio/engine/request.h"
#include "folio/engine/scheduler.h"
#include "folio/format/kv_snapshot.h"
#include "folio/model/decoder.h"
#include "folio/model/model.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::engine {

// Most draft tokens verified per step and request.
inline constexpr uint64_t kMaxDraftTokens = 16;

// Speculative decoding with prompt lookup (engine/drafter.h). Each step, a
// running request in its decode phase gets a draft from the n-gram drafter
// (n from ngram_max down to ngram_min), verified in the same step as its
// pending token. num_draft_tokens is the most a draft may have; the draft
// length starts at kFirstDraftLength, doubles after a draft accepted whole
// and falls back to one past the accepted tokens after one accepted in part
// (NextDraftLength). Back-off: after a draft with nothing accepted, a
// request's drafting pauses for 2^(misses-1) - 1 steps (at most 31), misses
// counting such drafts in a row; one accepted token resets it.
// How a draft token is accepted. kExact: only when plain decoding's own
// draw (same logits, same random stream) is that token, so the output is
// plain decoding's, token for token. kRejection: standard speculative
// sampling (sampling::AcceptOrResample): kept with its probability, else
// resampled without it; the output has plain decoding's distribution but
// not its stream, and accepts more drafts when sampling. Greedy requests
// get the same tokens either way.
enum class DraftAcceptance { kExact, kRejection };
// "exact" or "rejection"; InvalidArgument naming the others.
Result<DraftAcceptance> ParseDraftAcceptance(std::string_view name);

struct SpeculativeConfig {
  uint64_t num_draft_tokens = 0;  // the default per request; 0 = off
  uint64_t ngram_min = 2;
  uint64_t ngram_max = 4;
  // Drafts from this model instead of prompt lookup (engine/
  // draft_model_drafter.h): a smaller checkpoint with the target's
  // vocabulary, on a KV pool of its own (draft_num_pages pages of the
  // engine's page size and KV dtype; 0: as many as the target's). It must
  // outlive the engine.
  const model::Model* draft_model = nullptr;
  uint64_t draft_num_pages = 0;
  DraftAcceptance acceptance = DraftAcceptance::kExact;
};

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
  // What computes: the SIMD kernels (cpu) or their scalar references
  // (reference: slow, for checking; see backend/backend.h).
  backend::BackendKind backend = backend::BackendKind::kCpu;
  // How quantized weights multiply: 8-bit activations and integer dot
  // products (q8, the default: ggml's numerics, 2-3x faster matmuls), or
  // the exact mode, f32 activations times the dequantized weights (f32).
  // What q8 costs in accuracy is in docs/models.md. Float weights and the
  // quantized types without a packed kernel are unaffected.
  ops::MatMulActivations matmul_activations = ops::MatMulActivations::kQ8;
  SpeculativeConfig speculative{};
};

// Parts of the engine a benchmark may replace to measure folio against a
// baseline (bench/serve_bench.cc); null means folio's own.
struct EnginePolicies {
  // Admission (default: WatermarkAdmission with EngineConfig::watermark).
  std::shared_ptr<AdmissionPolicy> admission;
  // How attention reads K/V (default: straight through the block tables).
  std::shared_ptr<model::PagedAttentionPath> attention;
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
  uint64_t peak_running = 0;      // most sequences in one step
  // Speculative decoding: drafts verified (one per request and step with a
  // draft), their tokens, the tokens accepted; per draft position i, how
  // many drafts reached it and how many had it accepted.
  uint64_t draft_verifications = 0;
  uint64_t draft_tokens = 0;
  uint64_t draft_accepted_tokens = 0;
  std::array<uint64_t, kMaxDraftTokens> drafted_at{};
  std::array<uint64_t, kMaxDraftTokens> accepted_at{};
  double prefix_hit_rate() const {
    return prefix_query_tokens == 0
               ? 0.0
               : static_cast<double>(prefix_hit_tokens) / static_cast<double>(prefix_query_tokens);
  }
};

class Engine {
 public:
  // tokenizer (optional; it must outlive the engine) turns output into text
  // and enables stop strings. Errors: a pool that does not match the model,
  // bad limits.
  static Result<Engine> Create(const model::Model& model, EngineConfig config,
                               ThreadPool* pool = nullptr,
                               const tokenizer::Tokenizer* tokenizer = nullptr,
                               EnginePolicies policies = {});

  // Errors: an empty prompt, token ids outside the vocabulary, invalid
  // sampling params, max_tokens 0, a request that could never fit the pool
  // or the model's positions, stop strings that are empty or given without
  // a tokenizer, a grammar without a tokenizer or with beam search,
  // top_logprobs > 20.
  Result<RequestId> AddRequest(std::vector<int32_t> prompt, RequestParams params);
  // The checks AddRequest makes, without adding anything: a caller that
  // hands requests to the engine's own thread (the Python package) refuses
  // a bad one at once. Reads only what Create fixed (config, model shape,
  // tokenizer), so it may run on any thread while another steps.
  Status ValidateRequest(std::span<const int32_t> prompt, const RequestParams& params) const;
  // Finishes a request at once (every sample of it) and frees its pages.
  // NotFound if unknown or already finished.
  Status Abort(RequestId id);
  // Runs one step. Returns the requests that produced tokens or finished.
  // On an error nothing changed (admissions are undone, the step's pages
  // given back), except preemptions made while planning.
  Result<std::vector<StepOutput>> Step();
  bool HasUnfinished() const { return scheduler_.HasUnfinished(); }
  uint64_t num_running() const { return scheduler_.num_running(); }
  uint64_t num_waiting() const { return scheduler_.num_waiting(); }
  // Requests the engine keeps a record of: added (or imported) and not yet
  // finished or aborted, however many sequences each runs.
  uint64_t num_requests() const { return requests_.size(); }

  // Prefill here, decode there (format/kv_snapshot.h). ExportSnapshot
  // copies the listed requests' pages (each shared page once), block
  // tables, tokens, sampling parameters and random-stream state; the
  // requests must be running (hold pages) and are left as they are.
  // Errors: NotFound (unknown or finished id), FailedPrecondition (a
  // request still waiting, without pages, or one following a grammar,
  // which snapshots do not carry), InvalidArgument (an id listed twice).
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
  // Continues a request known only by its tokens, when the engine that ran
  // it is gone (a replica that died): it waits to be admitted like a new
  // request and recomputes the K/V of prompt and output in prefill chunks
  // (as a preempted request does), then samples on from its random stream
  // at rng_state (StepOutput::rng_state of its last output), with
  // text_sent bytes of its text already returned. Its later outputs are
  // bit-identical to those the first engine would have produced. A
  // grammar's matcher is replayed over the output. Errors: ImportSnapshot's
  // checks of a request; FailedPrecondition for n > 1 or a beam search
  // (their states are not one stream); InvalidArgument for an output the
  // grammar does not allow (naming the token).
  Result<RequestId> ResumeRequest(std::vector<int32_t> prompt, std::vector<int32_t> output,
                                  RequestParams params, uint64_t rng_state, uint64_t text_sent);

  // Runs every prompt to completion; tokens per prompt, in order. One
  // sample per prompt (params.n must be 1).
  Result<std::vector<std::vector<int32_t>>> Generate(
      const std::vector<std::vector<int32_t>>& prompts, const RequestParams& params);

  const kv::PagedKvCache& cache() const { return kv_->cache(); }
  const KvCacheManager& kv() const { return *kv_; }
  const Scheduler& scheduler() const { return scheduler_; }
  // Speculative decoding's drafter (NgramDrafter or DraftModelDrafter).
  const Drafter& drafter() const { return *drafter_; }
  // Pages only the prefix cache holds (reusable, evictable).
  uint64_t cached_pages() const { return kv_->num_cached_pages(); }
  // Gives every cached page back to the pool (nothing running needs them).
  Status ClearPrefixCache() { return kv_->ClearPrefixCache(); }
  EngineStats stats() const;

 private:
  Engine(std::unique_ptr<KvCacheManager> kv, const model::Model& model, EngineConfig config,
         std::shared_ptr<backend::Backend> backend, const tokenizer::Tokenizer* tokenizer,
         EnginePolicies policies, std::unique_ptr<Drafter> drafter);

  // ValidateRequest's checks of a beam search request.
  Status ValidateBeamSearch(const RequestParams& params) const;
  // ValidateRequest's checks of a pooled-embedding request.
  Status ValidatePooling(const RequestParams& params) const;

  // Speculative decoding's state of one sequence (NextDraftLength).
  struct DraftState {
    uint64_t length = kFirstDraftLength;  // the next draft's most tokens
    uint64_t misses = 0;                  // drafts in a row with nothing accepted
    uint64_t pause = 0;                   // steps left without drafting
  };
  // One of a request's sequences: the request's own (seq = the request's
  // id), a parallel sample forked from it, or a beam.
  struct Member {
    RequestId seq = 0;
    uint64_t index = 0;  // the parallel sample (StepOutput::index)
    // Sampling, text, grammar (output_processor.h); none for a beam, which
    // its request's search scores instead.
    std::optional<OutputProcessor::State> output;
    DraftState draft;
  };
  // How a request's rows become its outputs (src/engine/decoding.h):
  // sampling (one sequence, its drafts verified, or n samples forked after
  // the prompt), beam search, or a pooled embedding.
  class Decoding;
  class SampleDecoding;
  class BeamDecoding;
  class PoolingDecoding;
  // Everything the engine keeps of one request: its live sequences and how
  // it decodes. Their tokens and pages are the scheduler's (a forked
  // sequence's Sequence::group_id() is its request's id), and the drafter
  // keeps its own index of them; forgetting a request is one erase here
  // once the scheduler finished its sequences.
  struct Request {
    std::vector<Member> members;
    std::unique_ptr<Decoding> decoding;
    Request();
    Request(Request&&) noexcept;
    Request& operator=(Request&&) noexcept;
    ~Request();
    // seq must be a member (checked).
    Member& member(RequestId seq);
    const Member& member(RequestId seq) const;
  };
  // The request sequence `seq` belongs to, and its member record; both
  // must exist (checked).
  RequestId RequestOf(RequestId seq) const { return scheduler_.sequence(seq).group_id(); }
  Request& request(RequestId id);
  const Request& request(RequestId id) const;
  // Finishes one sequence of `request` in the scheduler and forgets it
  // (the request too, with its last sequence). The records must not be
  // used after: they may be gone.
  void FinishMember(RequestId request, RequestId seq);
  // Names the request and sample a member's output belongs to, and the
  // state its random stream is left in.
  static void Label(StepOutput& o, RequestId request, const Member& m);
  // A request's most draft tokens per step: its own num_draft_tokens, else
  // the engine's.
  uint64_t DraftLimit(const Member& m) const;
  // Speculative decoding: sets each decoding request's draft for the next
  // step (or clears it while its drafting pauses).
  void ProposeDrafts();
  // Adds a request that is one sequence and samples, with its state.
  void AddSampled(Sequence sequence, OutputProcessor::State output, bool running);
  // A request that already generated `output`, checked as ImportSnapshot
  // and ResumeRequest check one: AddRequest's checks, output ids in the
  // vocabulary and below max_tokens, one stream (n = 1, no beams), text_sent
  // within the output's text. Its sequence holds no pages yet.
  struct Continued {
    Sequence sequence;
    OutputProcessor::State output;
  };
  Result<Continued> CheckContinued(std::vector<int32_t> prompt, std::vector<int32_t> output,
                                   const RequestParams& params, uint64_t rng_state,
                                   uint64_t text_sent) const;
  // ExportSnapshot's checks of one request: unfinished, one stream (no
  // beams, n = 1), holding pages.
  Status CheckExportable(RequestId id) const;
  // One snapshot sequence read and checked as ImportSnapshot checks it
  // (errors prefixed with `where`); its sequence holds no pages yet.
  Result<Continued> StageSnapshotSequence(const format::SnapshotSequence& q,
                                          const std::string& where) const;

  EngineConfig config_;
  // On the heap, so the scheduler's pointer to it survives moving the engine.
  std::unique_ptr<KvCacheManager> kv_;
  Scheduler scheduler_;
  ModelRunner runner_;
  OutputProcessor outputs_;
  RequestId next_id_ = 0;
  uint64_t steps_ = 0;
  std::unique_ptr<Drafter> drafter_;
  std::map<RequestId, Request> requests_;  // unfinished requests, by the id AddRequest gave
  EngineStats draft_stats_;                // only the draft_* and *_at fields
};

}  // namespace folio::engine

#endif  // FOLIO_ENGINE_ENGINE_H_
