#include "bench/attention_fixture.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "bench/gather.h"
#include "folio/core/checked_math.h"
#include "folio/core/splitmix64.h"
#include "folio/kv/paged_kv_cache.h"

namespace folio::bench {
namespace {

// Uniform in [-1, 1).
double Symmetric(SplitMix64& rng) { return 2.0 * rng.NextUnit() - 1.0; }

// The largest code of a quantized dtype: a value in [-1, 1) is stored as
// value * CodeMax and every scale is 1 / CodeMax.
float CodeMax(DType d) { return d == DType::kI8 ? 127.0f : 448.0f; }

// Element i of a pool of dtype d holds x (quantized: x's code).
void StoreCode(DType d, std::byte* base, uint64_t i, double x) {
  if (d == DType::kI8) {
    base[i] = static_cast<std::byte>(
        static_cast<int8_t>(std::nearbyint(x * static_cast<double>(CodeMax(d)))));
  } else if (d == DType::kF8E4M3) {
    base[i] = static_cast<std::byte>(F32ToE4M3Bits(static_cast<float>(x) * CodeMax(d)));
  } else {
    StoreElement(d, base, i, x);
  }
}

// Splits [0, n) into about `parts` contiguous ranges and runs fn(begin, end)
// for each over the pool.
template <typename Fn>
void ParallelRanges(ThreadPool& pool, uint64_t n, uint64_t parts, const Fn& fn) {
  parts = std::max<uint64_t>(1, std::min(parts, n));
  const uint64_t step = (n + parts - 1) / parts;
  pool.ParallelFor((n + step - 1) / step, [&](size_t i) {
    const uint64_t begin = i * step;
    fn(begin, std::min(n, begin + step));
  });
}

// Pages the engine order's pool holds beyond the batch's own: room for
// `batch` churn requests of up to 767 tokens (EngineTables).
uint64_t EngineChurnPages(const AttentionShape& shape) {
  return shape.batch * (768 / shape.page_size + 2);
}

// The block tables kv::PagedKvCache, with `num_pages` pages, hands out when
// the batch is served as an engine serves it. The batch's
// sequences arrive together; each step has a budget of 512 tokens, which
// running sequences' decode tokens take first (one each) and waiting
// prompts fill in arrival order (chunked prefill); a sequence's prompt is
// half its context, and it decodes until it holds `context` keys. Between
// them short requests come and go (churn): each step, while fewer than
// `batch` are running, one arrives with probability 1/4, with a prompt of
// 64-511 tokens and 16-255 more to decode, and it leaves when done. Only
// the pages' ids matter, so the cache is one layer of one one-float head.
std::vector<int32_t> EngineTables(const AttentionShape& shape, uint64_t num_pages, uint64_t seed) {
  const uint64_t page = shape.page_size;
  kv::PagedKvCache cache =
      *kv::PagedKvCache::Create({1, 1, 1, page, num_pages, DType::kF32, {}, 0});
  struct Seq {
    kv::SeqId id;
    uint64_t prompt, total;  // tokens to prefill, tokens in the end
  };
  std::vector<Seq> targets, churn;
  for (uint64_t b = 0; b < shape.batch; ++b) {
    targets.push_back(
        {cache.AddSequence(), std::max<uint64_t>(1, shape.context / 2), shape.context});
  }
  SplitMix64 rng(seed ^ 0x636875726eull);
  constexpr uint64_t kStepTokens = 512;
  for (bool targets_done = false; !targets_done;) {
    if (churn.size() < shape.batch && rng.NextU64() % 4 == 0) {
      const uint64_t prompt = 64 + rng.NextU64() % 448;
      churn.push_back({cache.AddSequence(), prompt, prompt + 16 + rng.NextU64() % 240});
    }
    std::vector<std::pair<kv::SeqId, uint64_t>> step;
    uint64_t budget = kStepTokens;
    for (auto* list : {&targets, &churn}) {  // decode tokens first
      for (const Seq& s : *list) {
        const uint64_t len = cache.length(s.id);
        if (len >= s.prompt && len < s.total && budget > 0) {
          step.emplace_back(s.id, 1);
          --budget;
        }
      }
    }
    for (auto* list : {&targets, &churn}) {  // then prompt chunks
      for (const Seq& s : *list) {
        const uint64_t len = cache.length(s.id);
        if (len < s.prompt && budget > 0) {
          const uint64_t n = std::min(budget, s.prompt - len);
          step.emplace_back(s.id, n);
          budget -= n;
        }
      }
    }
    auto plan = cache.PrepareAppend(step);
    FOLIO_CHECK(plan.ok() && plan->has_value(), "the simulated pool ran out");
    cache.Commit(**plan);
    std::erase_if(churn, [&](const Seq& s) {
      if (cache.length(s.id) < s.total) return false;
      FOLIO_CHECK(cache.Release(s.id).ok(), "release");
      return true;
    });
    targets_done = std::all_of(targets.begin(), targets.end(),
                               [&](const Seq& s) { return cache.length(s.id) >= s.total; });
  }
  std::vector<int32_t> tables;
  for (const Seq& s : targets) {
    const std::span<const kv::PageId> t = cache.block_table(s.id);
    tables.insert(tables.end(), t.begin(), t.end());
  }
  return tables;
}

}  // namespace

std::optional<PageOrder> ParsePageOrder(const std::string& name) {
  for (PageOrder o : {PageOrder::kShuffled, PageOrder::kPool, PageOrder::kEngine}) {
    if (name == PageOrderName(o)) return o;
  }
  return std::nullopt;
}

const char* PageOrderName(PageOrder order) {
  switch (order) {
    case PageOrder::kShuffled:
      return "shuffled";
    case PageOrder::kPool:
      return "pool";
    case PageOrder::kEngine:
      return "engine";
  }
  return "?";
}

Result<AttentionFixture> AttentionFixture::Create(const AttentionShape& shape, uint64_t seed,
                                                  PageOrder order, ThreadPool& pool) {
  if (shape.kv_dtype == DType::kF64) {
    return Status::InvalidArgument("kv_dtype must be f32, bf16, f16, i8 or f8e4m3 (got f64)");
  }
  if (shape.context == 0 || shape.batch == 0 || shape.page_size == 0 || shape.head_dim == 0 ||
      shape.num_kv_heads == 0 || shape.num_q_heads % shape.num_kv_heads != 0) {
    return Status::InvalidArgument(
        "attention shape needs context, batch, page_size, head_dim "
        "> 0 and num_q_heads a multiple of num_kv_heads");
  }
  // The engine's order comes with a larger pool (room for the churn).
  const auto table_pages = CheckedMul(shape.batch, shape.pages_per_seq());
  const auto num_pages = order == PageOrder::kEngine && table_pages
                             ? CheckedAdd(*table_pages, EngineChurnPages(shape))
                             : table_pages;
  const auto pool_elems = CheckedProduct(
      {num_pages.value_or(UINT64_MAX), shape.num_kv_heads, shape.page_size, shape.head_dim});
  if (!num_pages || *num_pages > INT32_MAX || shape.context > INT32_MAX ||
      shape.batch > INT32_MAX || !pool_elems || *pool_elems > (1ull << 40)) {
    return Status::InvalidArgument("batch " + std::to_string(shape.batch) + " x context " +
                                   std::to_string(shape.context) + " is too large");
  }

  AttentionFixture f;
  f.shape_ = shape;
  f.num_pages_ = *num_pages;
  const size_t es = DTypeSize(shape.kv_dtype);
  const uint64_t page_elems = shape.num_kv_heads * shape.page_size * shape.head_dim;
  const uint64_t dense_elems = shape.batch * shape.num_kv_heads * shape.context * shape.head_dim;
  f.paged_k_ = AlignedBuffer(*pool_elems * es);
  f.paged_v_ = AlignedBuffer(*pool_elems * es);
  f.dense_k_ = AlignedBuffer(dense_elems * es);
  f.dense_v_ = AlignedBuffer(dense_elems * es);

  // Every physical page gets its own stream, so the fill can run in
  // parallel and still depend only on the seed.
  ParallelRanges(pool, f.num_pages_, 8 * pool.num_threads(), [&](uint64_t lo, uint64_t hi) {
    for (uint64_t page = lo; page < hi; ++page) {
      SplitMix64 rng(seed ^ (0x6b76ull << 48) ^ page);
      for (uint64_t i = page * page_elems; i < (page + 1) * page_elems; ++i) {
        StoreCode(shape.kv_dtype, f.paged_k_.data(), i, Symmetric(rng));
        StoreCode(shape.kv_dtype, f.paged_v_.data(), i, Symmetric(rng));
      }
    }
  });

  if (order == PageOrder::kEngine) {
    f.paged_indices_ = EngineTables(shape, f.num_pages_, seed);
  } else {
    // Pool order, or a random permutation of the pool's pages dealt to
    // (sequence, logical page) in order: physical order unrelated to
    // logical order, sequences interleaved across the pool.
    std::vector<int32_t> perm(f.num_pages_);
    std::iota(perm.begin(), perm.end(), 0);
    f.paged_indices_ = perm;
    SplitMix64 shuffle_rng(seed ^ 0x5348554646ull);
    while (order == PageOrder::kShuffled && shape.pages_per_seq() > 1 && !f.shuffled()) {
      for (uint64_t i = perm.size(); i > 1; --i) {
        std::swap(perm[i - 1], perm[shuffle_rng.NextU64() % i]);
      }
      f.paged_indices_ = perm;
    }
  }

  if (IsQuantized(shape.kv_dtype)) {
    // One scale per row in both layouts: the pool's pages and the dense
    // layout's one page per sequence.
    f.scales_.assign(
        std::max(f.num_pages_ * shape.page_size, shape.batch * shape.context) * shape.num_kv_heads,
        1.0f / CodeMax(shape.kv_dtype));
  }
  f.paged_indptr_.resize(shape.batch + 1);
  for (uint64_t b = 0; b <= shape.batch; ++b) {
    f.paged_indptr_[b] = static_cast<int32_t>(b * shape.pages_per_seq());
  }
  f.paged_last_page_len_.assign(shape.batch,
                                static_cast<int32_t>((shape.context - 1) % shape.page_size + 1));
  f.dense_indptr_.resize(shape.batch + 1);
  std::iota(f.dense_indptr_.begin(), f.dense_indptr_.end(), 0);
  f.dense_indices_.resize(shape.batch);
  std::iota(f.dense_indices_.begin(), f.dense_indices_.end(), 0);
  f.dense_last_page_len_.assign(shape.batch, static_cast<int32_t>(shape.context));
  f.query_indptr_.resize(shape.batch + 1);
  std::iota(f.query_indptr_.begin(), f.query_indptr_.end(), 0);

  SplitMix64 query_rng(seed ^ 0x5155455259ull);
  f.query_.resize(shape.batch * shape.num_q_heads * shape.head_dim);
  for (float& q : f.query_) q = static_cast<float>(Symmetric(query_rng));

  f.Gather(pool);
  return f;
}

double AttentionFixture::adjacent_page_fraction() const {
  const uint64_t per_seq = shape_.pages_per_seq();
  uint64_t pairs = 0, adjacent = 0;
  for (uint64_t i = 0; i < paged_indices_.size(); ++i) {
    if (i % per_seq == 0) continue;
    ++pairs;
    if (paged_indices_[i] == paged_indices_[i - 1] + 1) ++adjacent;
  }
  return pairs == 0 ? 1.0 : static_cast<double>(adjacent) / static_cast<double>(pairs);
}

bool AttentionFixture::shuffled() const { return adjacent_page_fraction() < 1.0; }

attention::PagedAttentionParams AttentionFixture::params() const {
  attention::PagedAttentionParams p;
  p.num_q_heads = shape_.num_q_heads;
  p.scale = 1.0 / std::sqrt(static_cast<double>(shape_.head_dim));
  p.causal = true;
  p.layout = attention::QueryLayout::kTokenMajor;
  return p;
}

kv::PagedKvView AttentionFixture::paged_kv() const {
  kv::PagedKvView v{paged_k_.data(),     paged_v_.data(),  shape_.kv_dtype, num_pages_,
                    shape_.num_kv_heads, shape_.page_size, shape_.head_dim};
  if (!scales_.empty()) v.key_scales = v.value_scales = scales_.data();
  return v;
}

kv::PagedBatchView AttentionFixture::paged_batch() const {
  return {paged_indptr_, paged_indices_, paged_last_page_len_, query_indptr_};
}

kv::PagedKvView AttentionFixture::dense_kv() const {
  kv::PagedKvView v{dense_k_.data(),     dense_v_.data(), shape_.kv_dtype, shape_.batch,
                    shape_.num_kv_heads, shape_.context,  shape_.head_dim};
  if (!scales_.empty()) v.key_scales = v.value_scales = scales_.data();
  return v;
}

kv::PagedBatchView AttentionFixture::dense_batch() const {
  return {dense_indptr_, dense_indices_, dense_last_page_len_, query_indptr_};
}

uint64_t AttentionFixture::Gather(ThreadPool& pool) {
  return bench::GatherToDense(paged_kv(), paged_batch(), shape_.context, dense_k_.data(),
                              dense_v_.data(), &pool);
}

}  // namespace folio::bench
