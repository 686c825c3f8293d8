// Validation, work planning and threading for paged attention; the SIMD
// chunk kernel is in paged_attention_kernel.cc.
#include "folio/attention/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "attention/paged_attention_internal.h"
#include "folio/core/checked_math.h"

namespace folio::attention {
namespace {

using internal::ChunkTask;
using internal::RowsOf;
using internal::SeqRows;

// Query positions per work item. An item holds every query head's rows of
// up to kRowBlock positions: kRowBlock * G rows per K/V head (G = the GQA
// group) share every K/V load.
constexpr uint64_t kRowBlock = 16;

// With SplitK::kAuto, items' chunks are cut into ranges so that each thread
// gets about this many ranges to balance.
constexpr uint64_t kRangesPerThread = 4;

std::string Seq(uint64_t s) { return "sequence " + std::to_string(s) + ": "; }

// The query rows of every work item of a call, item after item: four
// arrays for the whole call rather than four per item, which would be
// allocated for every item of every layer and step.
struct Rows {
  std::vector<const float*> queries;
  std::vector<float*> outs;
  std::vector<uint32_t> heads;   // each row's query head (its sink)
  std::vector<uint64_t> lo, hi;  // visible keys
};

// One (sequence, block of query positions, range of K/V heads): rows
// [row_begin, row_begin + num_rows) of the call's Rows, head by head (the
// item's h-th K/V head reads its rows [h * rows_per_head, (h + 1) *
// rows_per_head)), over the chunks [first_chunk, first_chunk + num_chunks)
// some row sees.
struct Item {
  uint64_t seq = 0;
  uint64_t kv_head_begin = 0;
  uint64_t num_kv_heads = 0;
  uint64_t first_chunk = 0;
  uint64_t num_chunks = 0;
  size_t row_begin = 0;
  uint64_t rows_per_head = 0;
  size_t num_rows = 0;
};

// Chunks [begin, end) of an item, counted from its first, run in order on
// one thread: the unit of threading.
struct Range {
  size_t item = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// The work of one call. An item takes every K/V head of its block of
// positions, so the walk reads each page's heads in one run (the dense
// layout holds them contiguously), unless there are too few chunks to give every thread
// several ranges; then the heads are split too. Items' chunks are cut into
// ranges of consecutive chunks; an item's chunk states always fold left to
// right, so the bits depend on neither cut.
struct Plan {
  Rows rows;
  std::vector<Item> items;
  std::vector<Range> ranges;
  std::vector<size_t> first_range;  // per item
  size_t num_ranges(size_t item) const {
    return (item + 1 < items.size() ? first_range[item + 1] : ranges.size()) - first_range[item];
  }
};

Plan MakePlan(const PagedAttentionParams& params, std::span<const float> query,
              std::span<float> out, const kv::PagedKvView& kv, const kv::PagedBatchView& batch,
              size_t threads) {
  // Each (sequence, block of query positions) and the chunks its rows see.
  struct Block {
    uint64_t seq, i0, i1, first_chunk, num_chunks;
  };
  std::vector<Block> blocks;
  uint64_t block_chunks = 0;
  for (uint64_t s = 0; s < batch.batch(); ++s) {
    const SeqRows seq = RowsOf(batch, kv.page_size, s);
    for (uint64_t i0 = 0; i0 < seq.num_rows; i0 += kRowBlock) {
      const uint64_t i1 = std::min(i0 + kRowBlock, seq.num_rows);
      uint64_t lo = UINT64_MAX, hi = 0;
      for (uint64_t i = i0; i < i1; ++i) {
        const auto [row_lo, row_hi] = internal::VisibleKeys(params, seq, i);
        lo = std::min(lo, row_lo);
        hi = std::max(hi, row_hi);
      }
      Block block{s, i0, i1, 0, 0};
      if (lo < hi) {
        block.first_chunk = lo / kChunkKeys;
        block.num_chunks = CeilDiv(hi, kChunkKeys) - block.first_chunk;
      }
      blocks.push_back(block);
      block_chunks += block.num_chunks;
    }
  }
  const uint64_t wanted = kRangesPerThread * threads;
  const bool auto_split = params.split_k == SplitK::kAuto && threads > 1;
  uint64_t head_parts = 1;
  if (params.split_k == SplitK::kAlways) {
    head_parts = kv.num_kv_heads;
  } else if (auto_split && block_chunks < wanted) {
    head_parts = std::min(kv.num_kv_heads, CeilDiv(wanted, std::max<uint64_t>(1, block_chunks)));
  }

  Plan plan;
  Rows& rows = plan.rows;
  const uint64_t head_dim = kv.head_dim, group = params.num_q_heads / kv.num_kv_heads;
  const auto total_rows = static_cast<size_t>(batch.query_indptr.back()) * params.num_q_heads;
  rows.queries.reserve(total_rows);
  rows.outs.reserve(total_rows);
  rows.heads.reserve(total_rows);
  rows.lo.reserve(total_rows);
  rows.hi.reserve(total_rows);
  for (const Block& block : blocks) {
    const SeqRows seq = RowsOf(batch, kv.page_size, block.seq);
    for (uint64_t part = 0; part < head_parts; ++part) {
      Item item;
      item.seq = block.seq;
      item.kv_head_begin = kv.num_kv_heads * part / head_parts;
      item.num_kv_heads = kv.num_kv_heads * (part + 1) / head_parts - item.kv_head_begin;
      item.first_chunk = block.first_chunk;
      item.num_chunks = block.num_chunks;
      item.row_begin = rows.queries.size();
      item.rows_per_head = (block.i1 - block.i0) * group;
      for (uint64_t g = item.kv_head_begin; g < item.kv_head_begin + item.num_kv_heads; ++g) {
        for (uint64_t i = block.i0; i < block.i1; ++i) {
          const auto [row_lo, row_hi] = internal::VisibleKeys(params, seq, i);
          for (uint64_t k = 0; k < group; ++k) {
            const uint64_t at =
                internal::RowOffset(params, head_dim, block.seq, seq, i, g * group + k);
            rows.queries.push_back(query.data() + at);
            rows.outs.push_back(out.data() + at);
            rows.heads.push_back(static_cast<uint32_t>(g * group + k));
            rows.lo.push_back(row_lo);
            rows.hi.push_back(row_hi);
          }
        }
      }
      item.num_rows = rows.queries.size() - item.row_begin;
      plan.items.push_back(item);
    }
  }

  uint64_t per_range = UINT64_MAX;  // chunks
  if (params.split_k == SplitK::kAlways) {
    per_range = 1;
  } else if (auto_split) {
    per_range = std::max<uint64_t>(1, CeilDiv(block_chunks * head_parts, wanted));
  }
  for (size_t i = 0; i < plan.items.size(); ++i) {
    plan.first_range.push_back(plan.ranges.size());
    const uint64_t n = plan.items[i].num_chunks;
    const uint64_t parts = n <= per_range ? 1 : CeilDiv(n, per_range);
    for (uint64_t k = 0; k < parts; ++k) {
      plan.ranges.push_back({i, n * k / parts, n * (k + 1) / parts});
    }
  }
  return plan;
}

// Chunk `chunk` (counted from the item's first) of an item.
// `next_chunk_follows`: this thread runs the item's next chunk right after,
// so the walk may prefetch into it.
ChunkTask TaskFor(const Item& item, const Rows& rows, const kv::PagedKvView& kv,
                  const kv::PagedBatchView& batch, float scale, float softcap, uint64_t chunk,
                  bool next_chunk_follows, SoftmaxState* states, float* acc) {
  const uint64_t begin = (item.first_chunk + chunk) * kChunkKeys;
  const uint64_t context = batch.context_len(item.seq, kv.page_size);
  const uint64_t end = std::min(begin + kChunkKeys, context);
  return ChunkTask{kv,
                   batch.pages(item.seq).data(),
                   begin,
                   end,
                   next_chunk_follows ? std::min(end + kTileKeys, context) : end,
                   item.kv_head_begin,
                   item.num_kv_heads,
                   item.rows_per_head,
                   rows.queries.data() + item.row_begin,
                   rows.lo.data() + item.row_begin,
                   rows.hi.data() + item.row_begin,
                   scale,
                   softcap,
                   states,
                   acc};
}

// Chunk states of the items cut into several ranges, kept until every range
// has run: the first range's fold so far (prefix) and one state per later
// chunk (later), each [rows] states and [rows, head_dim] accumulators.
class HeldStates {
 public:
  HeldStates(const Plan& plan, uint64_t head_dim) : head_dim_(head_dim) {
    prefix_slot_.assign(plan.items.size(), 0);
    later_slot_.assign(plan.items.size(), 0);
    uint64_t prefix_rows = 0, later_rows = 0;
    for (size_t i = 0; i < plan.items.size(); ++i) {
      if (plan.num_ranges(i) == 1) continue;
      held_.push_back(i);
      prefix_slot_[i] = prefix_rows;
      later_slot_[i] = later_rows;
      const Item& item = plan.items[i];
      prefix_rows += item.num_rows;
      later_rows += (item.num_chunks - plan.ranges[plan.first_range[i]].end) * item.num_rows;
    }
    prefix_.resize(prefix_rows);
    prefix_acc_.resize(prefix_rows * head_dim);
    later_.resize(later_rows);
    later_acc_.resize(later_rows * head_dim);
  }
  const std::vector<size_t>& held_items() const { return held_; }
  SoftmaxState* prefix(size_t item) { return prefix_.data() + prefix_slot_[item]; }
  float* prefix_acc(size_t item) { return prefix_acc_.data() + prefix_slot_[item] * head_dim_; }
  // The k-th chunk after the item's first range.
  SoftmaxState* later(size_t item, uint64_t k, size_t rows) {
    return later_.data() + later_slot_[item] + k * rows;
  }
  float* later_acc(size_t item, uint64_t k, size_t rows) {
    return later_acc_.data() + (later_slot_[item] + k * rows) * head_dim_;
  }

 private:
  uint64_t head_dim_;
  std::vector<size_t> held_;
  std::vector<uint64_t> prefix_slot_, later_slot_;  // in rows
  std::vector<SoftmaxState> prefix_, later_;
  std::vector<float> prefix_acc_, later_acc_;
};

// total[k] += states[k] (MergeInto) for `rows` rows.
void MergeRows(SoftmaxState* total, float* total_acc, const SoftmaxState* states, const float* acc,
               size_t rows, uint64_t head_dim) {
  for (size_t k = 0; k < rows; ++k) {
    MergeInto(total[k], total_acc + k * head_dim, states[k], acc + k * head_dim, head_dim);
  }
}

// out = the folded states of `rows` rows, each with its head's sink first
// when there are sinks.
void FinalizeRows(SoftmaxState* total, float* total_acc, float* const* outs, const uint32_t* heads,
                  size_t rows, uint64_t head_dim, std::span<const float> sinks) {
  for (size_t k = 0; k < rows; ++k) {
    if (!sinks.empty()) AddSink(total[k], total_acc + k * head_dim, sinks[heads[k]], head_dim);
    Finalize(total[k], total_acc + k * head_dim, outs[k], head_dim);
  }
}

// Empty, or one finite logit per query head.
Status CheckSinks(std::span<const float> sinks, uint64_t num_q_heads) {
  if (!sinks.empty() && sinks.size() != num_q_heads) {
    return Status::InvalidArgument("sinks: " + std::to_string(sinks.size()) + " logits for " +
                                   std::to_string(num_q_heads) + " query heads");
  }
  for (size_t h = 0; h < sinks.size(); ++h) {
    if (!std::isfinite(sinks[h])) {
      return Status::InvalidArgument("sink of query head " + std::to_string(h) + " is not finite");
    }
  }
  return Status::Ok();
}

// The pool's shape, strides and scales. Accepted strides: every one > 0,
// and the axes nest without overlap -- taken from the smallest stride up
// (axes of extent 1 skipped), each stride is at least the extent of what
// lies inside it, starting from one row of head_dim elements. That admits
// the dense layout, any order of the three axes, and padding between
// pages, heads or slots; it refuses two rows sharing an element. The whole
// pool, (num_pages - 1) * stride_page + ... + head_dim elements, must be
// addressable. With scales (quantized dtypes) every stride is a multiple of
// head_dim, so a row's scale index RowIndex / head_dim is exact.
Status CheckPool(const kv::PagedKvView& kv) {
  if (kv.num_kv_heads == 0 || kv.head_dim == 0 || kv.page_size == 0) {
    return Status::InvalidArgument("num_kv_heads, head_dim and page_size must be > 0");
  }
  if (kv.num_pages > INT32_MAX) return Status::InvalidArgument("num_pages exceeds int32 page ids");
  const bool quantized = IsQuantized(kv.dtype);
  const bool both = kv.key_scales != nullptr && kv.value_scales != nullptr;
  const bool any = kv.key_scales != nullptr || kv.value_scales != nullptr;
  if (quantized ? !both : any) {
    return Status::InvalidArgument(
        std::string("K/V dtype ") + std::string(DTypeName(kv.dtype)) +
        (quantized ? " needs key and value scales" : " takes no scales"));
  }
  struct Axis {
    const char* name;
    uint64_t stride, extent;
  };
  Axis axes[] = {{"stride_page", kv.stride_page, kv.num_pages},
                 {"stride_h", kv.stride_h, kv.num_kv_heads},
                 {"stride_n", kv.stride_n, kv.page_size}};
  for (const Axis& a : axes) {
    if (a.stride == 0) return Status::InvalidArgument(std::string(a.name) + " must be > 0");
    if (quantized && a.stride % kv.head_dim != 0) {
      return Status::InvalidArgument(
          std::string(a.name) + " " + std::to_string(a.stride) + " is not a multiple of head_dim " +
          std::to_string(kv.head_dim) + " (scales are addressed by row index / head_dim)");
    }
  }
  std::sort(std::begin(axes), std::end(axes),
            [](const Axis& x, const Axis& y) { return x.stride < y.stride; });
  std::optional<uint64_t> inner = kv.head_dim;  // elements one row's inner axes span
  for (const Axis& a : axes) {
    if (a.extent <= 1) continue;
    if (a.stride < *inner) {
      return Status::InvalidArgument(std::string(a.name) + " " + std::to_string(a.stride) +
                                     " overlaps the " + std::to_string(*inner) +
                                     " elements of the axes inside it: rows would share memory");
    }
    const auto outer = CheckedMul(a.stride, a.extent - 1);
    inner = outer ? CheckedAdd(*outer, *inner) : std::nullopt;
    if (!inner) break;
  }
  if (!inner || !CheckedMul(*inner, DTypeSize(kv.dtype))) {
    return Status::InvalidArgument("the K/V pool's strides address more than 2^64 bytes");
  }
  return Status::Ok();
}

// The CSR batch metadata: indptr and last_page_len as kv::BatchContexts
// checks them, query_indptr from 0 and never decreasing, every page of a sequence in [0, num_pages)
// except pages wholly before its first row's window, which may be kReleasedPage, no page twice in
// one sequence, and a context that holds its query rows.
Status CheckBatch(const PagedAttentionParams& p, const kv::PagedKvView& kv,
                  const kv::PagedBatchView& b) {
  FOLIO_ASSIGN_OR_RETURN(const std::vector<uint64_t> contexts, kv::BatchContexts(b, kv.page_size));
  const uint64_t batch = b.batch();
  if (b.query_indptr.size() != batch + 1) {
    return Status::InvalidArgument("query_indptr has " + std::to_string(b.query_indptr.size()) +
                                   " entries; batch " + std::to_string(batch) +
                                   " (last_page_len's size) needs " + std::to_string(batch + 1));
  }
  if (b.query_indptr[0] != 0) {
    return Status::InvalidArgument("query_indptr[0] must be 0 (got " +
                                   std::to_string(b.query_indptr[0]) + ")");
  }
  for (uint64_t s = 0; s < batch; ++s) {
    if (b.query_indptr[s + 1] < b.query_indptr[s]) {
      return Status::InvalidArgument("query_indptr decreases at " + std::to_string(s + 1));
    }
  }
  // One sequence's pages, sorted to find a repeat. Sized by the sequence,
  // not the pool: this runs for every step (every plan).
  std::vector<int32_t> live;
  uint64_t uniform_rows = 0;
  for (uint64_t s = 0; s < batch; ++s) {
    const auto rows = static_cast<uint64_t>(b.query_indptr[s + 1] - b.query_indptr[s]);
    if (p.layout == QueryLayout::kHeadMajor) {
      if (s == 0) uniform_rows = rows;
      if (rows != uniform_rows) {
        return Status::InvalidArgument(Seq(s) + "head-major queries need one query length (" +
                                       std::to_string(rows) + " vs " +
                                       std::to_string(uniform_rows) + ")");
      }
    }
    const uint64_t n = contexts[s];
    if (n > 0 && n < rows) {
      return Status::InvalidArgument(Seq(s) + "context " + std::to_string(n) +
                                     " is shorter than its " + std::to_string(rows) +
                                     " query rows");
    }
    // A window's earliest key: pages wholly before it are never read, so
    // they may be kReleasedPage (a cache gives them back to its pool).
    const uint64_t first_seen =
        n == 0 ? 0 : internal::VisibleKeys(p, {n, 0, std::max<uint64_t>(rows, 1)}, 0).first;
    const std::span<const int32_t> row = b.pages(s);
    live.clear();
    for (uint64_t i = 0; i < row.size(); ++i) {
      const int32_t page = row[i];
      if (page == kv::kReleasedPage && (i + 1) * kv.page_size <= first_seen) continue;
      if (page < 0 || static_cast<uint64_t>(page) >= kv.num_pages) {
        return Status::InvalidArgument(Seq(s) + "indices entry " + std::to_string(i) +
                                       " of its pages is page " + std::to_string(page) +
                                       ", outside [0, " + std::to_string(kv.num_pages) + ")");
      }
      live.push_back(page);
    }
    std::sort(live.begin(), live.end());
    const auto repeat = std::adjacent_find(live.begin(), live.end());
    if (repeat != live.end()) {
      return Status::InvalidArgument(Seq(s) + "page " + std::to_string(*repeat) +
                                     " appears twice in its indices");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidatePagedAttention(const PagedAttentionParams& p, size_t query_size, size_t out_size,
                              const kv::PagedKvView& kv, const kv::PagedBatchView& b) {
  FOLIO_RETURN_IF_ERROR(CheckPool(kv));
  if (p.num_q_heads == 0 || p.num_q_heads % kv.num_kv_heads != 0) {
    return Status::InvalidArgument("num_q_heads " + std::to_string(p.num_q_heads) +
                                   " is not a positive multiple of num_kv_heads " +
                                   std::to_string(kv.num_kv_heads));
  }
  if (!std::isfinite(p.softcap) || p.softcap < 0) {
    return Status::InvalidArgument("softcap must be finite and >= 0 (got " +
                                   std::to_string(p.softcap) + ")");
  }
  FOLIO_RETURN_IF_ERROR(CheckSinks(p.sinks, p.num_q_heads));
  if (!std::isfinite(p.scale) || p.scale < 0) {
    return Status::InvalidArgument("scale must be finite and >= 0 (got " + std::to_string(p.scale) +
                                   ")");
  }
  if (!p.causal && p.window != 0) {
    return Status::InvalidArgument("a window needs the causal mask");
  }
  FOLIO_RETURN_IF_ERROR(CheckBatch(p, kv, b));
  const auto rows = static_cast<uint64_t>(b.query_indptr[b.batch()]);
  const auto expected = CheckedProduct({rows, p.num_q_heads, kv.head_dim});
  if (!expected || query_size != *expected || out_size != *expected) {
    return Status::InvalidArgument(
        "query and out must hold rows * num_q_heads * head_dim = " + std::to_string(rows) + " * " +
        std::to_string(p.num_q_heads) + " * " + std::to_string(kv.head_dim) + " floats (got " +
        std::to_string(query_size) + " and " + std::to_string(out_size) + ")");
  }
  return Status::Ok();
}

namespace {

// Runs a call's plan: every range on the pool, then the held folds.
void RunPlan(const Plan& plan, const PagedAttentionParams& params, const kv::PagedBatchView& batch,
             const kv::PagedKvView& kv, std::span<const float> sinks, ThreadPool* pool) {
  const uint64_t head_dim = kv.head_dim;
  const auto scale = static_cast<float>(params.scale);
  const auto softcap = static_cast<float>(params.softcap);
  HeldStates held(plan, head_dim);
  auto parallel_for = [&](size_t n, const std::function<void(size_t)>& fn) {
    if (pool) {
      pool->ParallelFor(n, fn);
    } else {
      for (size_t i = 0; i < n; ++i) fn(i);
    }
  };
  parallel_for(plan.ranges.size(), [&](size_t r) {
    const Range& range = plan.ranges[r];
    const Item& item = plan.items[range.item];
    const size_t n = item.num_rows;
    const auto task = [&](uint64_t c, SoftmaxState* states, float* acc) {
      return TaskFor(item, plan.rows, kv, batch, scale, softcap, c, c + 1 < range.end, states, acc);
    };
    if (range.begin > 0) {  // a later range: one held state per chunk
      const uint64_t first_later = plan.ranges[plan.first_range[range.item]].end;
      for (uint64_t c = range.begin; c < range.end; ++c) {
        internal::RunChunk(task(c, held.later(range.item, c - first_later, n),
                                held.later_acc(range.item, c - first_later, n)));
      }
      return;
    }
    // The first range folds its chunks as they come.
    thread_local std::vector<SoftmaxState> states, total;
    thread_local std::vector<float> acc, total_acc;
    states.resize(n);
    acc.resize(n * head_dim);
    total.assign(n, SoftmaxState{});
    total_acc.assign(n * head_dim, 0.0f);
    for (uint64_t c = 0; c < range.end; ++c) {
      internal::RunChunk(task(c, states.data(), acc.data()));
      MergeRows(total.data(), total_acc.data(), states.data(), acc.data(), n, head_dim);
    }
    if (range.end == item.num_chunks) {  // the item's only range
      FinalizeRows(total.data(), total_acc.data(), plan.rows.outs.data() + item.row_begin,
                   plan.rows.heads.data() + item.row_begin, n, head_dim, sinks);
    } else {
      std::copy(total.begin(), total.end(), held.prefix(range.item));
      std::copy(total_acc.begin(), total_acc.end(), held.prefix_acc(range.item));
    }
  });
  // The rest of the fold, left to right, for items cut into several ranges.
  parallel_for(held.held_items().size(), [&](size_t h) {
    const size_t i = held.held_items()[h];
    const Item& item = plan.items[i];
    const size_t n = item.num_rows;
    const uint64_t first_later = plan.ranges[plan.first_range[i]].end;
    for (uint64_t c = first_later; c < item.num_chunks; ++c) {
      MergeRows(held.prefix(i), held.prefix_acc(i), held.later(i, c - first_later, n),
                held.later_acc(i, c - first_later, n), n, head_dim);
    }
    FinalizeRows(held.prefix(i), held.prefix_acc(i), plan.rows.outs.data() + item.row_begin,
                 plan.rows.heads.data() + item.row_begin, n, head_dim, sinks);
  });
}

}  // namespace

struct PagedAttentionPlan::Impl {
  PagedAttentionParams params;
  kv::PagedKvView kv_shape;  // the planned pool shape (its pointers unused)
  kv::PagedBatchView batch;
  const float* query;
  float* out;
  size_t query_size, out_size;
  Plan plan;
};

PagedAttentionPlan::PagedAttentionPlan(std::unique_ptr<const Impl> impl) : impl_(std::move(impl)) {}
PagedAttentionPlan::PagedAttentionPlan(PagedAttentionPlan&&) noexcept = default;
PagedAttentionPlan& PagedAttentionPlan::operator=(PagedAttentionPlan&&) noexcept = default;
PagedAttentionPlan::~PagedAttentionPlan() = default;

namespace {

// A call's checks: the metadata, then the K/V dtypes the kernel reads.
Status CheckCall(const PagedAttentionParams& params, std::span<const float> query,
                 std::span<float> out, const kv::PagedKvView& kv, const kv::PagedBatchView& batch) {
  FOLIO_RETURN_IF_ERROR(ValidatePagedAttention(params, query.size(), out.size(), kv, batch));
  if (kv.dtype == DType::kF64) {
    return Status::Unimplemented(
        "paged attention kernel reads f32, bf16, f16, i8 or f8e4m3 K/V (got f64)");
  }
  return Status::Ok();
}

}  // namespace

Result<PagedAttentionPlan> PagedAttentionPlan::Create(
    const PagedAttentionParams& params, std::span<const float> query, std::span<float> out,
    const kv::PagedKvView& kv, const kv::PagedBatchView& batch, size_t num_threads) {
  FOLIO_RETURN_IF_ERROR(CheckCall(params, query, out, kv, batch));
  auto impl = std::make_unique<Impl>(
      Impl{params, kv, batch, query.data(), out.data(), query.size(), out.size(), Plan{}});
  impl->params.sinks = {};  // each Run brings its layer's
  impl->plan = MakePlan(params, query, out, kv, batch, std::max<size_t>(1, num_threads));
  return PagedAttentionPlan(std::move(impl));
}

Status PagedAttentionPlan::Run(std::span<const float> query, const kv::PagedKvView& kv,
                               std::span<float> out, ThreadPool* pool,
                               std::span<const float> sinks) const {
  const Impl& im = *impl_;
  FOLIO_RETURN_IF_ERROR(CheckSinks(sinks, im.params.num_q_heads));
  if (query.data() != im.query || query.size() != im.query_size || out.data() != im.out ||
      out.size() != im.out_size) {
    return Status::InvalidArgument(
        "paged attention plan run with other query or out buffers "
        "than it was planned for");
  }
  const kv::PagedKvView& p = im.kv_shape;
  if (kv.dtype != p.dtype || kv.num_pages != p.num_pages || kv.num_kv_heads != p.num_kv_heads ||
      kv.page_size != p.page_size || kv.head_dim != p.head_dim || kv.stride_page != p.stride_page ||
      kv.stride_h != p.stride_h || kv.stride_n != p.stride_n ||
      (kv.key_scales == nullptr) != (p.key_scales == nullptr) ||
      (kv.value_scales == nullptr) != (p.value_scales == nullptr)) {
    return Status::InvalidArgument(
        "paged attention plan run on a K/V pool of another shape, "
        "strides or dtype than it was planned for");
  }
  RunPlan(im.plan, im.params, im.batch, kv, sinks, pool);
  return Status::Ok();
}

Status PagedAttention(const PagedAttentionParams& params, std::span<const float> query,
                      const kv::PagedKvView& kv, const kv::PagedBatchView& batch,
                      std::span<float> out, ThreadPool* pool) {
  FOLIO_RETURN_IF_ERROR(CheckCall(params, query, out, kv, batch));
  const Plan plan = MakePlan(params, query, out, kv, batch, pool ? pool->num_threads() : 1);
  RunPlan(plan, params, batch, kv, params.sinks, pool);
  return Status::Ok();
}

}  // namespace folio::attention
