#include "folio/kv/prefix_cache.h"

#include <algorithm>
#include <string>

#include "folio/core/splitmix64.h"

namespace folio::kv {

uint64_t PrefixCache::PageHash(uint64_t parent_hash, std::span<const int32_t> tokens) {
  // Each step mixes the running state with one token through SplitMix64's
  // finaliser: every input bit reaches every output bit, and the length is
  // folded in so pages of different sizes never share a key.
  SplitMix64 mix(parent_hash ^ (tokens.size() * 0x9e3779b97f4a7c15ull));
  uint64_t h = mix.NextU64();
  for (const int32_t t : tokens) {
    SplitMix64 step(h ^ static_cast<uint32_t>(t));
    h = step.NextU64();
  }
  return h;
}

std::vector<uint64_t> PrefixCache::ChainHashes(std::span<const int32_t> tokens,
                                               uint64_t page_size) {
  std::vector<uint64_t> hashes;
  uint64_t h = kRootHash;
  for (size_t end = page_size; end <= tokens.size(); end += page_size) {
    h = PageHash(h, tokens.subspan(end - page_size, page_size));
    hashes.push_back(h);
  }
  return hashes;
}

const PrefixCache::Entry* PrefixCache::Find(EntryId parent, uint64_t hash,
                                            std::span<const int32_t> tokens, EntryId* id) const {
  auto [lo, hi] = by_hash_.equal_range(hash);
  for (auto it = lo; it != hi; ++it) {
    const Entry& e = entries_.at(it->second);
    if (e.parent == parent &&
        std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end())) {
      *id = it->second;
      return &e;
    }
  }
  return nullptr;
}

void PrefixCache::Use(EntryId id, Entry& e, bool make_candidate) {
  if (e.candidate) lru_.erase(KeyOf(e, id));
  e.last_used = clock_;
  e.candidate = e.candidate || make_candidate;
  if (e.candidate) lru_.emplace(KeyOf(e, id), id);
}

PrefixCache::Match PrefixCache::Lookup(std::span<const int32_t> tokens, uint64_t max_pages) {
  ++clock_;
  ++stats_.lookups;
  Match m;
  const uint64_t pages = std::min<uint64_t>(tokens.size() / page_size_, max_pages);
  stats_.query_pages += pages;
  for (uint64_t i = 0; i < pages; ++i) {
    const auto page_tokens = tokens.subspan(i * page_size_, page_size_);
    const uint64_t hash = PageHash(m.last_hash, page_tokens);
    EntryId id = kRoot;
    const Entry* e = Find(m.last, hash, page_tokens, &id);
    if (e == nullptr) break;
    Use(id, entries_.at(id), /*make_candidate=*/false);
    m.pages.push_back(e->page);
    m.last = id;
    m.last_hash = hash;
  }
  stats_.hit_pages += m.pages.size();
  return m;
}

Result<PrefixCache::Inserted> PrefixCache::Insert(PagedKvCache& cache, EntryId parent,
                                                  uint64_t parent_hash,
                                                  std::span<const int32_t> tokens, PageId page) {
  if (tokens.size() != page_size_) {
    return Status::InvalidArgument("a cached page holds " + std::to_string(page_size_) +
                                   " tokens, got " + std::to_string(tokens.size()));
  }
  if (parent != kRoot && entries_.count(parent) == 0) {
    return Status::NotFound("parent entry " + std::to_string(parent) + " is not cached");
  }
  ++clock_;
  const uint64_t hash = PageHash(parent_hash, tokens);
  EntryId id = kRoot;
  if (Find(parent, hash, tokens, &id) != nullptr) {
    Use(id, entries_.at(id), /*make_candidate=*/false);
    return Inserted{id, hash, false};
  }
  if (by_page_.count(page) != 0) {
    return Status::FailedPrecondition("page " + std::to_string(page) +
                                      " is cached under another prefix");
  }
  FOLIO_RETURN_IF_ERROR(cache.HoldPage(page));
  id = next_entry_++;
  const uint64_t depth = parent == kRoot ? 0 : entries_.at(parent).depth + 1;
  // A candidate from the start: if the inserting sequence holds the page,
  // EvictOne drops it from the candidates once, and Touch brings it back.
  Entry e{
      hash, parent, page, depth, clock_, true, std::vector<int32_t>(tokens.begin(), tokens.end())};
  lru_.emplace(KeyOf(e, id), id);
  entries_.emplace(id, std::move(e));
  by_hash_.emplace(hash, id);
  by_page_.emplace(page, id);
  ++stats_.inserted;
  return Inserted{id, hash, true};
}

void PrefixCache::Touch(std::span<const PageId> pages) {
  ++clock_;
  for (const PageId page : pages) {
    const auto it = by_page_.find(page);
    if (it != by_page_.end()) Use(it->second, entries_.at(it->second), /*make_candidate=*/true);
  }
}

uint64_t PrefixCache::NumEvictable(const PagedKvCache& cache) const {
  // The cache holds each of its pages once and is the pool's only holder,
  // so its evictable pages are exactly the pages held and nothing else.
  return cache.pages_held_only();
}

void PrefixCache::Erase(EntryId id) {
  const Entry& e = entries_.at(id);
  if (e.candidate) lru_.erase(KeyOf(e, id));
  by_page_.erase(e.page);
  auto [lo, hi] = by_hash_.equal_range(e.hash);
  for (auto it = lo; it != hi; ++it) {
    if (it->second == id) {
      by_hash_.erase(it);
      break;
    }
  }
  entries_.erase(id);
}

Result<bool> PrefixCache::EvictOne(PagedKvCache& cache) {
  while (!lru_.empty()) {
    const auto oldest = lru_.begin();
    const EntryId id = oldest->second;
    Entry& e = entries_.at(id);
    if (cache.pool().refcount(e.page) != 1) {
      // A sequence reads it: no longer a candidate until Touch (its
      // release) makes it one again. Each entry is skipped once per use,
      // so eviction stays amortised O(log n).
      lru_.erase(oldest);
      e.candidate = false;
      continue;
    }
    FOLIO_RETURN_IF_ERROR(cache.DropPage(e.page));
    Erase(id);
    ++stats_.evicted;
    return true;
  }
  return false;
}

Status PrefixCache::Clear(PagedKvCache& cache) {
  while (!entries_.empty()) {
    const EntryId id = entries_.begin()->first;
    FOLIO_RETURN_IF_ERROR(cache.DropPage(entries_.at(id).page));
    Erase(id);
    ++stats_.evicted;
  }
  return Status::Ok();
}

}  // namespace folio::kv
