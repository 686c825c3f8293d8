// Validation, work planning and threading for paged attention; the SIMD
// chunk kernel is in paged_attention_kernel.cc.
#include "folio/attention/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attention/paged_attention_internal.h"
#include "folio/core/checked_math.h"

namespace folio::attention {
namespace {

using internal::ChunkTask;
using internal::RowsOf;
using internal::SeqRows;

// Query positions per work item; with a GQA group of G heads an item holds
// up to kRowBlock * G rows that share every K/V load.
constexpr uint64_t kRowBlock = 16;

std::string Seq(uint64_t s) { return "sequence " + std::to_string(s) + ": "; }

// The query rows of every work item of a call, item after item: four
// arrays for the whole call rather than four per item, which would be
// allocated for every K/V head of every sequence of every layer and step.
struct Rows {
  std::vector<const float*> queries;
  std::vector<float*> outs;
  std::vector<uint64_t> lo, hi;  // visible keys
};

// One (sequence, K/V head, block of query positions): rows
// [row_begin, row_begin + num_rows) of the call's Rows.
struct Item {
  uint64_t seq = 0;
  uint64_t kv_head = 0;
  uint64_t first_chunk = 0;
  uint64_t num_chunks = 0;
  size_t row_begin = 0;
  size_t num_rows = 0;
};

// `next_chunk_follows`: this thread runs the item's next chunk right after,
// so the walk may prefetch into it.
ChunkTask TaskFor(const Item& item, const Rows& rows, const kv::PagedKvView& kv,
                  const kv::PagedBatchView& batch, float scale, uint64_t chunk,
                  bool next_chunk_follows, SoftmaxState* states, float* acc) {
  const uint64_t begin = chunk * kChunkKeys;
  const auto context = static_cast<uint64_t>(batch.context_lens[item.seq]);
  const uint64_t end = std::min(begin + kChunkKeys, context);
  const bool follows = next_chunk_follows && chunk + 1 < item.first_chunk + item.num_chunks;
  return ChunkTask{kv,
                   batch.block_table.data() + item.seq * batch.max_pages,
                   item.kv_head,
                   begin,
                   end,
                   follows ? std::min(end + kTileKeys, context) : end,
                   item.num_rows,
                   rows.queries.data() + item.row_begin,
                   rows.lo.data() + item.row_begin,
                   rows.hi.data() + item.row_begin,
                   scale,
                   states,
                   acc};
}

// Folds an item's chunk states left to right and writes its outputs.
void FoldAndFinalize(const Item& item, float* const* outs, uint64_t head_dim,
                     const SoftmaxState* states, const float* acc,
                     std::vector<SoftmaxState>& total, std::vector<float>& total_acc) {
  const size_t rows = item.num_rows;
  total.assign(rows, SoftmaxState{});
  total_acc.assign(rows * head_dim, 0.0f);
  for (uint64_t c = 0; c < item.num_chunks; ++c) {
    for (size_t r = 0; r < rows; ++r) {
      const size_t at = c * rows + r;
      MergeInto(total[r], total_acc.data() + r * head_dim, states[at],
                          acc + at * head_dim, head_dim);
    }
  }
  for (size_t r = 0; r < rows; ++r) {
    Finalize(total[r], total_acc.data() + r * head_dim, outs[r], head_dim);
  }
}

}  // namespace

Status ValidatePagedAttention(const PagedAttentionParams& p, size_t query_size,
                              size_t out_size, const kv::PagedKvView& kv,
                              const kv::PagedBatchView& b) {
  if (kv.num_kv_heads == 0 || kv.head_dim == 0 || kv.page_size == 0) {
    return Status::InvalidArgument("num_kv_heads, head_dim and page_size must be > 0");
  }
  if (p.num_q_heads == 0 || p.num_q_heads % kv.num_kv_heads != 0) {
    return Status::InvalidArgument("num_q_heads " + std::to_string(p.num_q_heads) +
                                   " is not a positive multiple of num_kv_heads " +
                                   std::to_string(kv.num_kv_heads));
  }
  if (!std::isfinite(p.scale) || p.scale < 0) {
    return Status::InvalidArgument("scale must be finite and >= 0 (got " +
                                   std::to_string(p.scale) + ")");
  }
  if (!p.causal && p.window != 0) {
    return Status::InvalidArgument("a window needs the causal mask");
  }
  if (kv.num_pages > INT32_MAX) return Status::InvalidArgument("num_pages exceeds int32 page ids");
  const uint64_t batch = b.context_lens.size();
  if (b.query_indptr.size() != batch + 1) {
    return Status::InvalidArgument("query_indptr has " + std::to_string(b.query_indptr.size()) +
                                   " entries; batch " + std::to_string(batch) + " needs " +
                                   std::to_string(batch + 1));
  }
  const auto table_size = CheckedMul(batch, b.max_pages);
  if (!table_size || b.block_table.size() != *table_size) {
    return Status::InvalidArgument("block_table has " + std::to_string(b.block_table.size()) +
                                   " entries; expected batch * max_pages = " +
                                   std::to_string(batch) + " * " + std::to_string(b.max_pages));
  }
  if (b.query_indptr[0] != 0) return Status::InvalidArgument("query_indptr[0] must be 0");
  // One row's live pages, sorted to find a repeat. Sized by the rows, not
  // the pool: this runs for every layer of every step.
  std::vector<int32_t> live;
  uint64_t uniform_rows = 0;
  for (uint64_t s = 0; s < batch; ++s) {
    if (b.query_indptr[s + 1] < b.query_indptr[s]) {
      return Status::InvalidArgument("query_indptr decreases at " + std::to_string(s + 1));
    }
    const int32_t context = b.context_lens[s];
    const auto rows = static_cast<uint64_t>(b.query_indptr[s + 1] - b.query_indptr[s]);
    if (context < 0) {
      return Status::InvalidArgument(Seq(s) + "context length " + std::to_string(context) +
                                     " is negative");
    }
    if (p.layout == QueryLayout::kHeadMajor) {
      if (s == 0) uniform_rows = rows;
      if (rows != uniform_rows) {
        return Status::InvalidArgument(Seq(s) + "head-major queries need one query length (" +
                                       std::to_string(rows) + " vs " +
                                       std::to_string(uniform_rows) + ")");
      }
    }
    const auto n = static_cast<uint64_t>(context);
    if (n > 0 && n < rows) {
      return Status::InvalidArgument(Seq(s) + "context " + std::to_string(n) +
                                     " is shorter than its " + std::to_string(rows) +
                                     " query rows");
    }
    const uint64_t live_pages = CeilDiv(n, kv.page_size);
    if (live_pages > b.max_pages) {
      return Status::InvalidArgument(Seq(s) + "context " + std::to_string(n) + " needs " +
                                     std::to_string(live_pages) + " pages; the table row has " +
                                     std::to_string(b.max_pages));
    }
    const int32_t* row = b.block_table.data() + s * b.max_pages;
    for (uint64_t i = 0; i < b.max_pages; ++i) {
      const int32_t page = row[i];
      if (i >= live_pages) {
        if (page != -1) {
          return Status::InvalidArgument(Seq(s) + "block_table entry " + std::to_string(i) +
                                         " past the live pages must be -1 (got " +
                                         std::to_string(page) + ")");
        }
        continue;
      }
      if (page < 0 || static_cast<uint64_t>(page) >= kv.num_pages) {
        return Status::InvalidArgument(Seq(s) + "block_table entry " + std::to_string(i) +
                                       " is page " + std::to_string(page) + ", outside [0, " +
                                       std::to_string(kv.num_pages) + ")");
      }
    }
    live.assign(row, row + live_pages);
    std::sort(live.begin(), live.end());
    const auto repeat = std::adjacent_find(live.begin(), live.end());
    if (repeat != live.end()) {
      return Status::InvalidArgument(Seq(s) + "page " + std::to_string(*repeat) +
                                     " appears twice in one block-table row");
    }
  }
  const auto rows = static_cast<uint64_t>(b.query_indptr[batch]);
  const auto expected = CheckedProduct({rows, p.num_q_heads, kv.head_dim});
  if (!expected || query_size != *expected || out_size != *expected) {
    return Status::InvalidArgument("query and out must hold rows * num_q_heads * head_dim = " +
                                   std::to_string(rows) + " * " + std::to_string(p.num_q_heads) +
                                   " * " + std::to_string(kv.head_dim) + " floats (got " +
                                   std::to_string(query_size) + " and " +
                                   std::to_string(out_size) + ")");
  }
  return Status::Ok();
}

Status PagedAttention(const PagedAttentionParams& params, std::span<const float> query,
                      const kv::PagedKvView& kv, const kv::PagedBatchView& batch,
                      std::span<float> out, ThreadPool* pool) {
  FOLIO_RETURN_IF_ERROR(ValidatePagedAttention(params, query.size(), out.size(), kv, batch));
  if (kv.dtype != DType::kF32 && kv.dtype != DType::kBF16 && kv.dtype != DType::kF16) {
    return Status::Unimplemented("paged attention kernel reads f32, bf16 or f16 K/V (got " +
                                 std::string(DTypeName(kv.dtype)) + ")");
  }
  const uint64_t head_dim = kv.head_dim;
  const uint64_t group = params.num_q_heads / kv.num_kv_heads;
  const auto scale = static_cast<float>(params.scale);

  std::vector<Item> items;
  Rows rows;
  const auto total_rows = static_cast<size_t>(batch.query_indptr.back()) * params.num_q_heads;
  rows.queries.reserve(total_rows);
  rows.outs.reserve(total_rows);
  rows.lo.reserve(total_rows);
  rows.hi.reserve(total_rows);
  for (uint64_t s = 0; s < batch.context_lens.size(); ++s) {
    const SeqRows seq = RowsOf(batch, s);
    for (uint64_t i0 = 0; i0 < seq.num_rows; i0 += kRowBlock) {
      const uint64_t i1 = std::min(i0 + kRowBlock, seq.num_rows);
      for (uint64_t g = 0; g < kv.num_kv_heads; ++g) {
        Item item;
        item.seq = s;
        item.kv_head = g;
        item.row_begin = rows.queries.size();
        uint64_t lo = UINT64_MAX, hi = 0;
        for (uint64_t i = i0; i < i1; ++i) {
          const auto [row_lo, row_hi] = internal::VisibleKeys(params, seq, i);
          for (uint64_t k = 0; k < group; ++k) {
            const uint64_t at = internal::RowOffset(params, head_dim, s, seq, i, g * group + k);
            rows.queries.push_back(query.data() + at);
            rows.outs.push_back(out.data() + at);
            rows.lo.push_back(row_lo);
            rows.hi.push_back(row_hi);
          }
          lo = std::min(lo, row_lo);
          hi = std::max(hi, row_hi);
        }
        item.num_rows = rows.queries.size() - item.row_begin;
        if (lo < hi) {
          item.first_chunk = lo / kChunkKeys;
          item.num_chunks = CeilDiv(hi, kChunkKeys) - item.first_chunk;
        }
        items.push_back(item);
      }
    }
  }

  const size_t threads = pool ? pool->num_threads() : 1;
  uint64_t total_chunks = 0;
  for (const Item& item : items) total_chunks += item.num_chunks;
  const bool split = params.split_k == SplitK::kAlways ||
                     (params.split_k == SplitK::kAuto && threads > 1 &&
                      items.size() < 2 * threads && total_chunks > items.size());
  auto parallel_for = [&](size_t n, const std::function<void(size_t)>& fn) {
    if (pool) {
      pool->ParallelFor(n, fn);
    } else {
      for (size_t i = 0; i < n; ++i) fn(i);
    }
  };

  if (!split) {
    // One task per item; its chunks run in order on one thread.
    parallel_for(items.size(), [&](size_t idx) {
      const Item& item = items[idx];
      const size_t n = item.num_rows;
      thread_local std::vector<SoftmaxState> states;
      thread_local std::vector<float> acc;
      states.resize(n * item.num_chunks);
      acc.resize(n * item.num_chunks * head_dim);
      for (uint64_t c = 0; c < item.num_chunks; ++c) {
        internal::RunChunk(TaskFor(item, rows, kv, batch, scale, item.first_chunk + c,
                                   /*next_chunk_follows=*/true, states.data() + c * n,
                                   acc.data() + c * n * head_dim));
      }
      thread_local std::vector<SoftmaxState> total;
      thread_local std::vector<float> total_acc;
      FoldAndFinalize(item, rows.outs.data() + item.row_begin, head_dim, states.data(),
                      acc.data(), total, total_acc);
    });
    return Status::Ok();
  }

  // Split-K: every (item, chunk) is a task writing its own state slot; the
  // fold afterwards is the same left-to-right fold as above.
  std::vector<uint64_t> first_slot(items.size() + 1, 0);  // in states
  std::vector<std::pair<size_t, uint64_t>> tasks;           // (item, chunk index)
  for (size_t i = 0; i < items.size(); ++i) {
    first_slot[i + 1] = first_slot[i] + items[i].num_chunks * items[i].num_rows;
    for (uint64_t c = 0; c < items[i].num_chunks; ++c) tasks.emplace_back(i, c);
  }
  std::vector<SoftmaxState> states(first_slot.back());
  std::vector<float> acc(first_slot.back() * head_dim);
  parallel_for(tasks.size(), [&](size_t t) {
    const auto [i, c] = tasks[t];
    const Item& item = items[i];
    const uint64_t slot = first_slot[i] + c * item.num_rows;
    internal::RunChunk(TaskFor(item, rows, kv, batch, scale, item.first_chunk + c,
                               /*next_chunk_follows=*/false, states.data() + slot,
                               acc.data() + slot * head_dim));
  });
  parallel_for(items.size(), [&](size_t i) {
    thread_local std::vector<SoftmaxState> total;
    thread_local std::vector<float> total_acc;
    FoldAndFinalize(items[i], rows.outs.data() + items[i].row_begin, head_dim,
                    states.data() + first_slot[i], acc.data() + first_slot[i] * head_dim, total,
                    total_acc);
  });
  return Status::Ok();
}

}  // namespace folio::attention
