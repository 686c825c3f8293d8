// Attention that reads K/V straight from pages through a block table.
//
//   out = softmax(scale * Q K^T + mask) V   per (sequence, query head, row)
//
// Query rows come in one of two layouts:
//   kTokenMajor  query [num_rows, num_q_heads, head_dim], ragged: sequence b
//                owns rows [query_indptr[b], query_indptr[b + 1]);
//   kHeadMajor   query [batch, num_q_heads, L, head_dim] with one L for all
//                sequences (query_indptr must then be 0, L, 2L, ...).
// out has the query's shape and layout.
//
// Sequence b owns the pages indices[indptr[b] .. indptr[b + 1]) of the CSR
// batch (kv/paged_view.h) and has context n = (pages - 1) * page_size +
// last_page_len[b] keys (its new rows included; 0 without pages), read in
// increasing logical order: logical key j lives in page
// indices[indptr[b] + j / page_size], slot j % page_size, at the element
// the K/V view's strides give. With L query rows, row i sits at logical position
// n - L + i. Causal: it sees keys j <= its position; with window w > 0 also
// only position - j < w. Without the causal mask every row sees all n keys
// (and window must be 0). Query head h reads K/V head
// h / (num_q_heads / num_kv_heads). A sequence with n = 0 outputs zeros.
// With a window, the entries of pages wholly before the sequence's first
// row's window may be kv::kReleasedPage (no row sees them, so they are never
// read: a cache gives them back to its pool).
// Non-finite input follows IEEE arithmetic, as the float64 reference does:
// a row that sees a NaN or +inf score (a NaN query or key element, an
// infinite key) outputs NaN, a -inf score is a zero weight, and a NaN or
// infinite value row reaches the output through its weight. (One case
// differs: a row whose every visible score is -inf outputs zeros, where
// IEEE's 0 / 0 would be NaN.)
//
// Determinism (docs/design.md, contract 3): a row's keys are cut
// into chunks of kChunkKeys at fixed logical positions and each chunk into
// tiles of kTileKeys; a row only ever touches its own visible keys; chunk
// states fold left to right. So an output row's bits depend only on its own
// query, its sequence's K/V content and the CPU's SIMD target — never on
// page size or placement, the batch it is in, how many rows the call holds,
// or the thread count.
//
// Every argument is validated before any K/V byte is read; a bad one is an
// InvalidArgument naming the field, the sequence and the value.
#ifndef FOLIO_ATTENTION_PAGED_ATTENTION_H_
#define FOLIO_ATTENTION_PAGED_ATTENTION_H_

#include <cstdint>
#include <memory>
#include <span>

#include "folio/core/status.h"
#include "folio/core/thread_pool.h"
#include "folio/kv/paged_view.h"

namespace folio::attention {

inline constexpr uint64_t kTileKeys = 16;    // keys per softmax rescale
inline constexpr uint64_t kChunkKeys = 256;  // keys per split-K chunk

enum class QueryLayout : uint8_t { kTokenMajor, kHeadMajor };

// How the kernel spreads work over threads. Its unit is a range of
// consecutive key chunks of one (sequence, block of query rows, set of K/V
// heads). kAuto cuts so that every thread gets several ranges, splitting
// the K/V heads too when a call has few chunks; kAlways runs every chunk of
// every K/V head on its own; kNever keeps each (sequence, row block) whole.
// The result bits are the same for every choice.
enum class SplitK : uint8_t { kAuto, kAlways, kNever };

struct PagedAttentionParams {
  uint64_t num_q_heads = 1;
  double scale = 1.0;  // finite, >= 0; usually 1 / sqrt(head_dim)
  // Scores (after scale) become softcap * tanh(score / softcap), Gemma 2's
  // attention-logit soft-capping; 0 = none. Finite, >= 0.
  double softcap = 0.0;
  // Attention sinks (gpt-oss): one logit per query head that joins each
  // row's softmax denominator with a zero value; empty = none. Finite. A
  // plan does not keep them: PagedAttentionPlan::Run takes each layer's.
  std::span<const float> sinks;
  bool causal = true;
  uint64_t window = 0;  // 0 = unlimited
  QueryLayout layout = QueryLayout::kTokenMajor;
  SplitK split_k = SplitK::kAuto;
};

// Checks every shape, stride, index and length; no K/V memory is touched.
// The K/V view: num_kv_heads, page_size, head_dim > 0; scales exactly for
// the quantized dtypes; strides > 0 whose axes nest without two rows
// sharing an element (any axis order, padding allowed), multiples of
// head_dim when there are scales. The batch: indptr and query_indptr of
// batch + 1 = last_page_len.size() + 1 entries, from 0, never decreasing;
// indptr[batch] = indices.size(); last_page_len in [1, page_size] for a
// sequence with pages, 0 without; each page in [0, num_pages) or released
// as above, none twice within a sequence; a context of at least its query
// rows unless it is 0. Each error names the field.
Status ValidatePagedAttention(const PagedAttentionParams& params, size_t query_size,
                              size_t out_size, const kv::PagedKvView& kv,
                              const kv::PagedBatchView& batch);

// The optimised kernel: Highway SIMD (the best target this CPU has, chosen at
// run time), online softmax, GQA groups loaded once, split-K over the pool's
// threads. K/V dtype f32, bf16, f16, or i8 / f8e4m3 with per-row scales
// (paged_view.h), read in place; compute in f32. pool may be null
// (single-threaded).
Status PagedAttention(const PagedAttentionParams& params, std::span<const float> query,
                      const kv::PagedKvView& kv, const kv::PagedBatchView& batch,
                      std::span<float> out, ThreadPool* pool = nullptr);

// One call's validated metadata and work split, made once per step and run
// for every layer (FlashInfer's plan/run split): a step's layers share
// their block tables, context lengths and query rows, and the decoder
// reuses its query and output buffers, so one plan serves them all. The
// plan keeps pointers into `batch`'s arrays and into query and out: they
// must outlive it and stay where they are. Run checks that it gets the
// planned buffers and a K/V view of the planned shape (every layer's pool
// has the same), so a misuse is an error, never a wrong read. Results are
// PagedAttention's, bit for bit.
class PagedAttentionPlan {
 public:
  // Errors: ValidatePagedAttention's (which include scales present exactly
  // for the quantized dtypes); K/V dtype f64.
  static Result<PagedAttentionPlan> Create(const PagedAttentionParams& params,
                                           std::span<const float> query, std::span<float> out,
                                           const kv::PagedKvView& kv,
                                           const kv::PagedBatchView& batch, size_t num_threads);
  PagedAttentionPlan(PagedAttentionPlan&&) noexcept;
  PagedAttentionPlan& operator=(PagedAttentionPlan&&) noexcept;
  ~PagedAttentionPlan();

  // Errors (nothing read): other buffers than planned, a K/V view of
  // another shape or dtype, sinks neither empty nor one finite logit per
  // query head (the layer's; params.sinks is not used by a plan).
  Status Run(std::span<const float> query, const kv::PagedKvView& kv, std::span<float> out,
             ThreadPool* pool = nullptr, std::span<const float> sinks = {}) const;

 private:
  struct Impl;
  explicit PagedAttentionPlan(std::unique_ptr<const Impl> impl);
  std::unique_ptr<const Impl> impl_;
};

// The scalar reference: per row, a two-pass softmax over the visible keys
// in float64, read through the same addressing. K/V dtype f64, f32, bf16,
// f16, or i8 / f8e4m3 (code times its row's scale). For tests and for checking the kernel, not
// for speed.
Status PagedAttentionReference(const PagedAttentionParams& params, std::span<const float> query,
                               const kv::PagedKvView& kv, const kv::PagedBatchView& batch,
                               std::span<float> out);

}  // namespace folio::attention

#endif  // FOLIO_ATTENTION_PAGED_ATTENTION_H_
