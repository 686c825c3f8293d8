// PrefixCache: full K/V pages kept after their sequences finish, found again
// by the token ids they hold, so a new request whose prompt starts the same
// way reuses them (a refcount, no copy, no recompute).
//
// Keys. Page i of a token stream holds tokens [i * P, (i + 1) * P). Its key
// is the chained hash
//
//   hash_0 = PageHash(kRootHash, tokens of page 0)
//   hash_i = PageHash(hash_{i-1}, tokens of page i)
//
// so equal hashes mean "same tokens from position 0", which is what makes two
// pages' K/V equal (attention is causal). A hash alone is not trusted: each
// entry also stores its page's tokens and its parent entry, and a lookup
// matches only when both are equal, so a 64-bit collision can cost a cache
// miss but never wrong K/V. Entry ids count up and are never reused, so an
// entry whose parent was evicted can no longer be reached.
//
// Layer groups. A cache of several layer groups (PagedKvCache, "Layer
// groups") has a page per group for each logical page, and an entry holds
// one per group. Each is evicted on its own: a windowed group's early pages
// can go while the global group's stay. An entry lives while it holds a
// page or has children, so the chain that checks the tokens stays whole.
// A prefix of n pages is a hit when every group holds the pages its next
// query sees: all n in a global group, only those from position
// n * page_size + 1 - W on in a group of window W (the others come back as
// -1, and the sequence starts without them).
//
// References. The cache holds one reference to each cached page
// (PagedKvCache::HoldPage); sequences that reuse a page add theirs. A page
// whose only reference is the cache's is evictable: it stays cached until
// Evict gives it back, least recently used first. Deeper pages of a chain go
// before their parents when they were used at the same moment, so a prefix
// stays reachable as long as possible.
//
// Eviction order is kept for candidates only: an entry that EvictOne finds
// in use leaves the order, and Touch, which the owner calls for a
// sequence's pages when the sequence lets go of them, puts it back. So
// eviction never rescans pages that running sequences hold.
//
// Determinism: reuse changes no result bits, because a page's K/V rows are
// a function of the tokens up to it and never of how they were batched or
// chunked (docs/design.md, contract 3). Lookups, inserts
// and eviction order depend only on the sequence of calls.
#ifndef FOLIO_KV_PREFIX_CACHE_H_
#define FOLIO_KV_PREFIX_CACHE_H_

#include <cstdint>
#include <map>
#include <span>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "folio/core/status.h"
#include "folio/kv/paged_kv_cache.h"

namespace folio::kv {

class PrefixCache {
 public:
  // Identifies one cached page's position in a chain; kRoot is the empty
  // prefix (the parent of every first page).
  using EntryId = uint64_t;
  static constexpr EntryId kRoot = 0;
  static constexpr uint64_t kRootHash = 0x666f6c696f6b7673ull;  // "foliokvs"

  explicit PrefixCache(uint64_t page_size) : page_size_(page_size) {}

  uint64_t page_size() const { return page_size_; }

  // The chained key of one page: parent's hash and the page's tokens.
  static uint64_t PageHash(uint64_t parent_hash, std::span<const int32_t> tokens);
  // The chained keys of every whole page of `tokens` (hash i names pages
  // 0..i), as Lookup and Insert compute them: what a router outside the
  // engine compares (python/folio/cluster). page_size must be >= 1.
  static std::vector<uint64_t> ChainHashes(std::span<const int32_t> tokens, uint64_t page_size);

  struct Match {
    uint64_t num_pages = 0;  // the prefix's length in pages
    // [num_groups][num_pages] the cached pages of the prefix, in order; -1
    // before a group's window
    std::vector<std::vector<PageId>> tables;
    EntryId last = kRoot;  // the entry of the prefix's last page, kRoot if none
    uint64_t last_hash = kRootHash;
  };
  // The longest cached prefix of `tokens` in whole pages, at most max_pages
  // pages, for groups of the given windows (0 = global; one entry per
  // group, as PagedKvCache::groups()). Marks the pages it returns used now
  // (LRU). Does not take references: the caller shares the pages
  // (PagedKvCache::AddSequence) before anything can evict them.
  Match Lookup(std::span<const int32_t> tokens, uint64_t max_pages,
               std::span<const uint64_t> windows);
  // The same for one global group.
  Match Lookup(std::span<const int32_t> tokens, uint64_t max_pages) {
    const uint64_t global = 0;
    return Lookup(tokens, max_pages, std::span<const uint64_t>(&global, 1));
  }

  // Caches one full logical page of a sequence: `tokens` (page_size ids)
  // following the prefix that ends at entry `parent` (hash parent_hash),
  // and pages[g] its page in group g (-1: the sequence has none to give).
  // The cache holds (cache.HoldPage) each page whose group the key's entry
  // has none for yet. Returns the key's entry and hash, for the next page
  // of the chain. Errors: tokens not one page, no page per group, a page
  // already cached under another key, HoldPage's errors.
  struct Inserted {
    EntryId entry;
    uint64_t hash;
    bool added;  // false: the key was cached already
  };
  Result<Inserted> Insert(PagedKvCache& cache, EntryId parent, uint64_t parent_hash,
                          std::span<const int32_t> tokens, std::span<const PageId> pages);
  // The same for a cache of one group.
  Result<Inserted> Insert(PagedKvCache& cache, EntryId parent, uint64_t parent_hash,
                          std::span<const int32_t> tokens, PageId page) {
    return Insert(cache, parent, parent_hash, tokens, std::span<const PageId>(&page, 1));
  }

  // Marks the cached pages among `pages` used now and eviction candidates
  // again. Must be called with a sequence's pages whenever it lets go of
  // them (before or after PagedKvCache::Release); a page released without
  // it stays cached but is not evicted until Clear.
  void Touch(std::span<const PageId> pages);

  // Cached pages whose only reference is the cache's. O(1): it assumes the
  // prefix cache is `cache`'s only page holder (true in the engine; an
  // import's holds last only inside ImportSnapshot).
  uint64_t NumEvictable(const PagedKvCache& cache) const;
  // Gives back the least recently used evictable page (cache.DropPage);
  // false when none is evictable. Errors: DropPage's (a plan pending).
  Result<bool> EvictOne(PagedKvCache& cache);
  // Gives back every cached page (entries with sequences still on them
  // lose only the cache's reference).
  Status Clear(PagedKvCache& cache);

  // Cached pages (entries kept only for their children hold none).
  uint64_t size() const { return by_page_.size(); }
  bool Contains(PageId page) const { return by_page_.count(page) != 0; }
  // False once the entry is gone: a chain through it cannot grow.
  bool HasEntry(EntryId id) const { return id == kRoot || entries_.count(id) != 0; }

  // Counters since construction.
  struct Stats {
    uint64_t lookups = 0;
    uint64_t query_pages = 0;  // full pages asked for by Lookup
    uint64_t hit_pages = 0;    // of those, found cached
    uint64_t inserted = 0;
    uint64_t evicted = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  // One group's page of an entry.
  struct Held {
    PageId page = -1;  // -1: none cached
    uint64_t last_used = 0;
    bool candidate = false;  // in lru_: maybe evictable
  };
  struct Entry {
    uint64_t hash;
    EntryId parent;
    uint64_t depth;               // index of the page in its chain
    uint64_t num_children = 0;    // entries whose parent this is
    std::vector<Held> held;       // [num_groups]
    std::vector<int32_t> tokens;  // [page_size]
  };
  // Eviction order: oldest use first, then deepest first, then entry id and
  // group.
  using LruKey = std::tuple<uint64_t, int64_t, EntryId, uint64_t>;
  static LruKey KeyOf(const Entry& e, EntryId id, uint64_t group) {
    return {e.held[group].last_used, -static_cast<int64_t>(e.depth), id, group};
  }
  const Entry* Find(EntryId parent, uint64_t hash, std::span<const int32_t> tokens,
                    EntryId* id) const;
  // Stamps a group's page used now; make_candidate (re)enters it in the
  // eviction order.
  void Use(EntryId id, Entry& e, uint64_t group, bool make_candidate);
  // Forgets a group's page of an entry (the caller dropped the hold), and
  // the entry and its ancestors that are left with no page and no child.
  void Forget(EntryId id, uint64_t group);

  uint64_t page_size_;
  std::unordered_map<EntryId, Entry> entries_;
  std::unordered_multimap<uint64_t, EntryId> by_hash_;
  std::unordered_map<PageId, std::pair<EntryId, uint64_t>> by_page_;  // -> (entry, group)
  std::map<LruKey, std::pair<EntryId, uint64_t>> lru_;  // eviction candidates, oldest first
  EntryId next_entry_ = kRoot + 1;
  uint64_t clock_ = 0;
  Stats stats_;
};

}  // namespace folio::kv

#endif  // FOLIO_KV_PREFIX_CACHE_H_
