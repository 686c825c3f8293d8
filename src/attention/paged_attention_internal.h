// Internal pieces shared by the paged-attention kernel, its planner and the
// scalar reference: row geometry and the unit of SIMD work.
#ifndef FOLIO_ATTENTION_PAGED_ATTENTION_INTERNAL_H_
#define FOLIO_ATTENTION_PAGED_ATTENTION_INTERNAL_H_

#include <cstdint>
#include <utility>

#include "folio/attention/online_softmax.h"
#include "folio/attention/paged_attention.h"

namespace folio::attention::internal {

struct SeqRows {
  uint64_t context;    // n
  uint64_t row_begin;  // first query row (token-major numbering)
  uint64_t num_rows;   // L
};

// Sequence s of a validated batch over pages of page_size slots.
inline SeqRows RowsOf(const kv::PagedBatchView& b, uint64_t page_size, uint64_t s) {
  const auto begin = static_cast<uint64_t>(b.query_indptr[s]);
  return {b.context_len(s, page_size), begin, static_cast<uint64_t>(b.query_indptr[s + 1]) - begin};
}

// Keys [lo, hi) that query row i of a sequence with context n and L rows
// may see; none when n = 0 (validation guarantees n >= L otherwise).
inline std::pair<uint64_t, uint64_t> VisibleKeys(const PagedAttentionParams& p, const SeqRows& seq,
                                                 uint64_t i) {
  if (seq.context == 0) return {0, 0};
  if (!p.causal) return {0, seq.context};
  const uint64_t hi = seq.context - seq.num_rows + i + 1;
  const uint64_t lo = p.window > 0 && hi > p.window ? hi - p.window : 0;
  return {lo, hi};
}

// Offset of (sequence s, row i, query head h) in query/out.
inline uint64_t RowOffset(const PagedAttentionParams& p, uint64_t head_dim, uint64_t s,
                          const SeqRows& seq, uint64_t i, uint64_t h) {
  if (p.layout == QueryLayout::kTokenMajor) {
    return ((seq.row_begin + i) * p.num_q_heads + h) * head_dim;
  }
  return ((s * p.num_q_heads + h) * seq.num_rows + i) * head_dim;
}

// One chunk of keys [key_begin, key_end) of one sequence against query rows
// of K/V heads [kv_head_begin, kv_head_begin + num_kv_heads): rows
// [h * rows_per_head, (h + 1) * rows_per_head) read K/V head
// kv_head_begin + h. Each row r sees keys [lo[r], hi[r]) and gets a fresh
// state (states[r], acc[r * head_dim ...]) over the keys of the chunk it
// sees.
struct ChunkTask {
  kv::PagedKvView kv;
  const int32_t* table;  // the sequence's pages (PagedBatchView::pages)
  uint64_t key_begin;    // a multiple of kChunkKeys
  uint64_t key_end;
  // The walk may prefetch keys up to here (>= key_end): the next chunk's
  // first tile when the same thread runs that chunk next.
  uint64_t prefetch_end;
  uint64_t kv_head_begin;
  uint64_t num_kv_heads;
  uint64_t rows_per_head;
  const float* const* queries;  // [num_rows()] -> head_dim floats
  const uint64_t* lo;
  const uint64_t* hi;
  float scale;
  float softcap;         // 0 = none (PagedAttentionParams::softcap)
  SoftmaxState* states;  // [num_rows()]
  float* acc;            // [num_rows(), head_dim]

  uint64_t num_rows() const { return rows_per_head * num_kv_heads; }
};

// The SIMD kernel for the CPU's best target (paged_attention_kernel.cc).
void RunChunk(const ChunkTask& task);

// The Highway target RunChunk dispatches to now ("AVX3", "AVX2", ...).
const char* KernelTargetName();

}  // namespace folio::attention::internal

#endif  // FOLIO_ATTENTION_PAGED_ATTENTION_INTERNAL_H_
