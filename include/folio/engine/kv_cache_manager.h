// KvCacheManager: the engine's one façade over its paged K/V storage
// (kv::PagedKvCache) and its prefix cache (kv::PrefixCache).
//
// The scheduler asks it questions in pages (how many are available, how
// many would this sequence take) and gives it orders in sequences (start
// one on its longest cached prefix, allocate this step's slots, free one).
// The prefix cache's protocol lives here and nowhere else:
//
// - a sequence starts on the longest cached run of whole pages of its
//   tokens, never all of them (its last token is always computed, for its
//   logits);
// - after each committed step, the sequence's newly completed full pages
//   are cached, following the chain of hashes from its first page (the
//   chain's state is kept here, per sequence);
// - whenever a sequence lets go of its pages, the cached ones among them
//   become eviction candidates again (PrefixCache::Touch);
// - pages only the prefix cache holds count as available: Allocate evicts
//   them, least recently used first, when the free list runs short.
//
// Atomicity (docs/design.md, atomic steps): Allocate either returns a plan
// that reserves the whole step or nullopt having changed nothing but the
// evictions it made (cached pages nothing referenced: no result changes).
// Commit and Abort end the plan exactly as PagedKvCache's do.
#ifndef FOLIO_ENGINE_KV_CACHE_MANAGER_H_
#define FOLIO_ENGINE_KV_CACHE_MANAGER_H_

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "folio/backend/backend.h"
#include "folio/core/status.h"
#include "folio/kv/paged_kv_cache.h"
#include "folio/kv/prefix_cache.h"
#include "folio/model/config.h"

namespace folio::engine {

// The pool a model's layers need: its layer count, K/V heads and head size,
// in pages of page_size tokens, and each layer's sliding window (which
// sets the cache's layer groups).
inline kv::PagedKvCacheConfig KvCacheConfigFor(const model::ModelConfig& model, uint64_t page_size,
                                               uint64_t num_pages, DType dtype) {
  kv::PagedKvCacheConfig kc;
  kc.num_layers = model.num_layers;
  kc.num_kv_heads = model.num_kv_heads;
  kc.head_dim = model.head_dim();
  kc.page_size = page_size;
  kc.num_pages = num_pages;
  kc.dtype = dtype;
  for (uint64_t l = 0; l < model.num_layers; ++l) kc.layer_windows.push_back(model.Layer(l).window);
  return kc;
}

// The most pages one sequence of `length` tokens holds at once when fed at
// most max_step_tokens a step: every layer group's, a windowed group's only
// its window's (kv::PagedKvCache::MaxPagesHeld). What a pool must hold for
// it to run alone.
inline uint64_t MaxPagesHeld(const model::ModelConfig& model, uint64_t page_size, uint64_t length,
                             uint64_t max_step_tokens) {
  return kv::PagedKvCache::MaxPagesHeld(KvCacheConfigFor(model, page_size, 1, DType::kF32), length,
                                        max_step_tokens);
}

class KvCacheManager {
 public:
  // The pool is the backend's (host memory when backend is null). Errors:
  // PagedKvCache::Create's.
  static Result<KvCacheManager> Create(const kv::PagedKvCacheConfig& config, bool prefix_caching,
                                       backend::Backend* backend = nullptr);

  const kv::PagedKvCacheConfig& config() const { return cache_.config(); }
  uint64_t page_size() const { return cache_.config().page_size; }
  uint64_t num_pages() const { return cache_.config().num_pages; }
  bool prefix_caching() const { return prefix_caching_; }

  // Pages a step could take now: free ones and cached ones no sequence
  // reads. O(1).
  uint64_t NumAvailablePages() const;
  // Pages `seq` (with num_computed tokens cached) must add to hold n more,
  // in every layer group.
  uint64_t NumNewPages(kv::SeqId seq, uint64_t num_computed, uint64_t n) const;

  struct Started {
    kv::SeqId seq;
    uint64_t num_cached_tokens;  // tokens whose K/V came from the prefix cache
  };
  // Starts a sequence for `tokens` (non-empty) on the longest cached prefix
  // of whole pages before its last token (none when !reuse_prefix: every
  // row is computed). Errors: AddSequence's (a plan pending).
  Result<Started> StartSequence(std::span<const int32_t> tokens, bool reuse_prefix = true);
  // Starts a sequence over pages the caller holds (an import): tables[g]
  // group g's pages in logical order holding num_tokens committed tokens.
  // Errors: AddSequence's.
  Result<kv::SeqId> AdoptSequence(std::span<const std::vector<kv::PageId>> tables,
                                  uint64_t num_tokens);
  // Lets go of a sequence's pages; its cached pages stay cached. The
  // sequence must exist (checked); no plan may be pending (checked).
  void Free(kv::SeqId seq);
  // A new sequence sharing every page of seq (a parallel sample after the
  // shared prefill); the partial tail page is copied when one of them
  // first writes to it. Its prefix-cache chain continues from seq's.
  // Errors: PagedKvCache::Fork's.
  Result<kv::SeqId> Fork(kv::SeqId seq);
  // Drops the committed tokens of seq past `length` (a rejected draft's):
  // PagedKvCache::Truncate. The prefix cache is untouched: it never holds a
  // page with tokens the engine has not confirmed. Errors: Truncate's.
  Status Truncate(kv::SeqId seq, uint64_t length) { return cache_.Truncate(seq, length); }

  // Plans one step: requests are (sequence, new tokens), num_new_pages the
  // pages they need in all. Evicts cached pages as the free list needs,
  // then reserves the step. nullopt when nothing more can be evicted and
  // the step still does not fit. Errors: PrepareAppend's (nothing changed).
  Result<std::optional<kv::AppendPlan>> Allocate(
      std::span<const std::pair<kv::SeqId, uint64_t>> requests, uint64_t num_new_pages);
  // The step's metadata of every layer group, [num_groups].
  Result<std::vector<kv::BatchMetadata>> BuildBatchMetadata(std::span<const kv::SeqId> seqs,
                                                            const kv::AppendPlan& plan) const;
  // Commits the plan (num_revocable as PagedKvCache::Commit takes it); the
  // pages a window released become eviction candidates when the prefix
  // cache holds them.
  void Commit(const kv::AppendPlan& plan, std::span<const uint64_t> num_revocable = {});
  void Abort(kv::AppendPlan&& plan) { cache_.Abort(std::move(plan)); }

  // Caches the full pages among seq's first num_computed tokens (`tokens`
  // holds at least those) that are not cached yet. Call after Commit.
  Status CacheFullPages(kv::SeqId seq, std::span<const int32_t> tokens, uint64_t num_computed);

  // n fresh pages, each held once, for an import to fill; cached pages are
  // evicted to make room. ResourceExhausted (nothing changed) when free and
  // evictable pages together are fewer than n.
  Result<std::vector<kv::PageId>> HoldNewPages(uint64_t n);
  // Gives back a hold taken by HoldNewPages.
  void DropPage(kv::PageId page);

  // Gives every cached page back to the pool (sequences keep theirs).
  Status ClearPrefixCache();
  // Pages only the prefix cache holds (reusable, evictable).
  uint64_t num_cached_pages() const { return cache_.pages_held_only(); }
  uint64_t num_evictions() const { return prefix_.stats().evicted; }

  const kv::PagedKvCache& cache() const { return cache_; }
  // For the model runner (K/V rows through the slot mapping) and imports.
  kv::PagedKvCache& mutable_cache() { return cache_; }

 private:
  // The prefix-cache chain of a sequence's full pages: how many are cached
  // (or were found cached), and the last one's entry and hash.
  struct Chain {
    uint64_t num_pages = 0;
    kv::PrefixCache::EntryId entry = kv::PrefixCache::kRoot;
    uint64_t hash = kv::PrefixCache::kRootHash;
  };
  KvCacheManager(kv::PagedKvCache cache, bool prefix_caching)
      : cache_(std::move(cache)),
        prefix_(cache_.config().page_size),
        prefix_caching_(prefix_caching) {
    for (const kv::LayerGroup& g : cache_.groups()) windows_.push_back(g.window);
  }
  // Evicts one cached page; false when none is evictable.
  Result<bool> EvictOne();

  kv::PagedKvCache cache_;
  kv::PrefixCache prefix_;
  bool prefix_caching_;
  std::vector<uint64_t> windows_;  // [num_groups] each group's window
  std::unordered_map<kv::SeqId, Chain> chains_;
};

}  // namespace folio::engine

#endif  // FOLIO_ENGINE_KV_CACHE_MANAGER_H_
