// The data one attention-benchmark configuration runs on: the same K/V
// held twice, once in a paged pool with shuffled pages and once densely (one
// page of `context` slots per sequence), plus the block tables and queries
// of one decode step (one query row per sequence).
#ifndef FOLIO_BENCH_ATTENTION_FIXTURE_H_
#define FOLIO_BENCH_ATTENTION_FIXTURE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "folio/attention/paged_attention.h"
#include "folio/core/aligned_buffer.h"
#include "folio/core/dtype.h"
#include "folio/core/status.h"
#include "folio/core/thread_pool.h"
#include "folio/kv/paged_view.h"

namespace folio::bench {

// Where the paged pool puts each (sequence, logical page).
enum class PageOrder {
  kShuffled,  // a random permutation of the pool: the worst case
  kPool,      // pool order, sequence 0's pages first: no scatter at all
  kEngine,    // the tables kv::PagedKvCache's allocator hands out while the
              // batch is served like an engine serves it (EngineTables)
};
// "shuffled", "pool", "engine"; nullopt for anything else.
std::optional<PageOrder> ParsePageOrder(const std::string& name);
const char* PageOrderName(PageOrder order);

struct AttentionShape {
  uint64_t num_q_heads = 32;
  uint64_t num_kv_heads = 8;
  uint64_t head_dim = 128;
  uint64_t page_size = 16;
  uint64_t context = 1024;  // keys per sequence
  uint64_t batch = 1;       // sequences, one query row each
  DType kv_dtype = DType::kBF16;

  uint64_t pages_per_seq() const { return (context + page_size - 1) / page_size; }
  // Bytes of K plus V one decode step reads: batch * context * H_kv * d * 2
  // elements, plus a quantized pool's scales (one f32 per row).
  uint64_t kv_bytes() const {
    const uint64_t scales = IsQuantized(kv_dtype) ? batch * context * num_kv_heads * 4 : 0;
    return (batch * context * num_kv_heads * head_dim * DTypeSize(kv_dtype) + scales) * 2;
  }
};

class AttentionFixture {
 public:
  // Fills the paged pool with seeded random K/V in [-1, 1) (SplitMix64 +
  // StoreElement; quantized dtypes store codes), places each (sequence,
  // logical page) by `order`, gathers once into the dense buffers and draws
  // the f32 queries. Checks the shape fits int32 page ids and the kernel's
  // dtypes.
  static Result<AttentionFixture> Create(const AttentionShape& shape, uint64_t seed,
                                         PageOrder order, ThreadPool& pool);

  const AttentionShape& shape() const { return shape_; }

  // The shuffled paged pool read through its block table.
  kv::PagedKvView paged_kv() const;
  kv::PagedBatchView paged_batch() const;
  // The dense layout: page b is sequence b's whole context.
  kv::PagedKvView dense_kv() const;
  kv::PagedBatchView dense_batch() const;

  // Copies every sequence's pages, in logical order, from the paged pool
  // into the dense buffers, split over the pool's threads. Returns the
  // bytes copied (K and V).
  uint64_t Gather(ThreadPool& pool);

  // True when some sequence's next logical page is not the physically next
  // page (so the paged mode really reads pages out of order).
  bool shuffled() const;
  // Of the pairs of consecutive logical pages, the fraction whose second
  // page is physically next (1 for a batch of one-page sequences).
  double adjacent_page_fraction() const;

  // Decode-step parameters: scale 1 / sqrt(head_dim), causal, token-major
  // queries (with one row per sequence every key is visible).
  attention::PagedAttentionParams params() const;
  const std::vector<float>& query() const { return query_; }

 private:
  AttentionFixture() = default;

  AttentionShape shape_;
  uint64_t num_pages_ = 0;
  AlignedBuffer paged_k_,
      paged_v_;                      // [num_pages, num_kv_heads, page_size, head_dim]
  AlignedBuffer dense_k_, dense_v_;  // [batch, num_kv_heads, context, head_dim]
  // CSR batches. Paged: sequence b's pages_per_seq pages, placed by
  // PageOrder; dense: page b, the sequence's whole context.
  std::vector<int32_t> paged_indptr_;         // [batch + 1] = b * pages_per_seq
  std::vector<int32_t> paged_indices_;        // [batch * pages_per_seq]
  std::vector<int32_t> paged_last_page_len_;  // [batch]
  std::vector<int32_t> dense_indptr_;         // [batch + 1] = b
  std::vector<int32_t> dense_indices_;        // [batch] = b
  std::vector<int32_t> dense_last_page_len_;  // [batch] = context
  // Quantized dtypes: every page's (and dense sequence's) scales, all
  // 1 / the dtype's largest code; empty otherwise.
  std::vector<float> scales_;
  std::vector<int32_t> query_indptr_;  // [batch + 1] = 0, 1, ..., batch
  std::vector<float> query_;           // [batch, num_q_heads, head_dim]
};

}  // namespace folio::bench

#endif  // FOLIO_BENCH_ATTENTION_FIXTURE_H_
