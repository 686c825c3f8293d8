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

void PrefixCache::Use(EntryId id, Entry& e, uint64_t group, bool make_candidate) {
  Held& h = e.held[group];
  if (h.candidate) lru_.erase(KeyOf(e, id, group));
  h.last_used = clock_;
  h.candidate = h.candidate || make_candidate;
  if (h.candidate) lru_.emplace(KeyOf(e, id, group), std::pair{id, group});
}

PrefixCache::Match PrefixCache::Lookup(std::span<const int32_t> tokens, uint64_t max_pages,
                                       std::span<const uint64_t> windows) {
  ++clock_;
  ++stats_.lookups;
  const uint64_t pages = std::min<uint64_t>(tokens.size() / page_size_, max_pages);
  stats_.query_pages += pages;
  // The chain of entries that hold the tokens, whatever pages they keep.
  std::vector<EntryId> chain;
  std::vector<uint64_t> hashes;
  EntryId parent = kRoot;
  uint64_t hash = kRootHash;
  for (uint64_t i = 0; i < pages; ++i) {
    const auto page_tokens = tokens.subspan(i * page_size_, page_size_);
    hash = PageHash(hash, page_tokens);
    EntryId id = kRoot;
    if (Find(parent, hash, page_tokens, &id) == nullptr) break;
    FOLIO_CHECK(entries_.at(id).held.size() == windows.size(), "an entry of ",
                entries_.at(id).held.size(), " groups looked up with ", windows.size());
    chain.push_back(id);
    hashes.push_back(hash);
    parent = id;
  }
  // missing[g][i]: 1 + the last chain index <= i whose page of group g is
  // not cached (0: none is missing).
  const uint64_t groups = windows.size();
  std::vector<std::vector<uint64_t>> missing(groups, std::vector<uint64_t>(chain.size()));
  for (uint64_t g = 0; g < groups; ++g) {
    for (uint64_t i = 0; i < chain.size(); ++i) {
      const bool held = entries_.at(chain[i]).held[g].page != -1;
      missing[g][i] = held ? (i == 0 ? 0 : missing[g][i - 1]) : i + 1;
    }
  }
  // The longest prefix whose next query finds every page it sees.
  uint64_t n = chain.size();
  for (; n > 0; --n) {
    bool whole = true;
    for (uint64_t g = 0; g < groups && whole; ++g) {
      const uint64_t next = n * page_size_;
      const uint64_t first = windows[g] != 0 && next + 1 > windows[g] ? next + 1 - windows[g] : 0;
      whole = missing[g][n - 1] <= first / page_size_;
    }
    if (whole) break;
  }
  Match m;
  m.num_pages = n;
  m.tables.assign(groups, std::vector<PageId>(n, -1));
  for (uint64_t g = 0; g < groups; ++g) {
    const uint64_t next = n * page_size_;
    const uint64_t first = windows[g] != 0 && next + 1 > windows[g] ? next + 1 - windows[g] : 0;
    for (uint64_t i = first / page_size_; i < n; ++i) {
      Entry& e = entries_.at(chain[i]);
      m.tables[g][i] = e.held[g].page;
      Use(chain[i], e, g, /*make_candidate=*/false);
    }
  }
  if (n > 0) {
    m.last = chain[n - 1];
    m.last_hash = hashes[n - 1];
  }
  stats_.hit_pages += n;
  return m;
}

Result<PrefixCache::Inserted> PrefixCache::Insert(PagedKvCache& cache, EntryId parent,
                                                  uint64_t parent_hash,
                                                  std::span<const int32_t> tokens,
                                                  std::span<const PageId> pages) {
  if (tokens.size() != page_size_) {
    return Status::InvalidArgument("a cached page holds " + std::to_string(page_size_) +
                                   " tokens, got " + std::to_string(tokens.size()));
  }
  if (pages.size() != cache.num_groups()) {
    return Status::InvalidArgument(std::to_string(pages.size()) + " pages for " +
                                   std::to_string(cache.num_groups()) + " layer groups");
  }
  if (parent != kRoot && entries_.count(parent) == 0) {
    return Status::NotFound("parent entry " + std::to_string(parent) + " is not cached");
  }
  ++clock_;
  const uint64_t hash = PageHash(parent_hash, tokens);
  EntryId id = kRoot;
  const bool found = Find(parent, hash, tokens, &id) != nullptr;
  // The groups whose page this call adds: the entry has none, the caller
  // gives one.
  std::vector<uint64_t> adding;
  for (uint64_t g = 0; g < pages.size(); ++g) {
    if (pages[g] == -1 || (found && entries_.at(id).held[g].page != -1)) continue;
    if (by_page_.count(pages[g]) != 0) {
      return Status::FailedPrecondition("page " + std::to_string(pages[g]) +
                                        " is cached under another prefix");
    }
    adding.push_back(g);
  }
  for (size_t k = 0; k < adding.size(); ++k) {
    const Status held = cache.HoldPage(pages[adding[k]]);
    if (!held.ok()) {
      for (size_t j = 0; j < k; ++j) FOLIO_RETURN_IF_ERROR(cache.DropPage(pages[adding[j]]));
      return held;
    }
  }
  if (!found) {
    id = next_entry_++;
    Entry e{hash,
            parent,
            0,
            0,
            std::vector<Held>(pages.size()),
            std::vector<int32_t>(tokens.begin(), tokens.end())};
    if (parent != kRoot) {
      Entry& p = entries_.at(parent);
      e.depth = p.depth + 1;
      ++p.num_children;
    }
    entries_.emplace(id, std::move(e));
    by_hash_.emplace(hash, id);
    ++stats_.inserted;
  }
  Entry& e = entries_.at(id);
  for (uint64_t g = 0; g < pages.size(); ++g) {
    if (e.held[g].page != -1) Use(id, e, g, /*make_candidate=*/false);
  }
  // A candidate from the start: if the inserting sequence holds the page,
  // EvictOne drops it from the candidates once, and Touch brings it back.
  for (const uint64_t g : adding) {
    e.held[g].page = pages[g];
    by_page_.emplace(pages[g], std::pair{id, g});
    Use(id, e, g, /*make_candidate=*/true);
  }
  return Inserted{id, hash, !found};
}

void PrefixCache::Touch(std::span<const PageId> pages) {
  ++clock_;
  for (const PageId page : pages) {
    const auto it = by_page_.find(page);
    if (it == by_page_.end()) continue;
    const auto [id, group] = it->second;
    Use(id, entries_.at(id), group, /*make_candidate=*/true);
  }
}

uint64_t PrefixCache::NumEvictable(const PagedKvCache& cache) const {
  // The cache holds each of its pages once and is the pool's only holder,
  // so its evictable pages are exactly the pages held and nothing else.
  return cache.pages_held_only();
}

void PrefixCache::Forget(EntryId id, uint64_t group) {
  Entry* e = &entries_.at(id);
  Held& h = e->held[group];
  if (h.candidate) lru_.erase(KeyOf(*e, id, group));
  by_page_.erase(h.page);
  h = Held{};
  while (e->num_children == 0 &&
         std::all_of(e->held.begin(), e->held.end(), [](const Held& x) { return x.page == -1; })) {
    auto [lo, hi] = by_hash_.equal_range(e->hash);
    for (auto it = lo; it != hi; ++it) {
      if (it->second == id) {
        by_hash_.erase(it);
        break;
      }
    }
    const EntryId parent = e->parent;
    entries_.erase(id);
    if (parent == kRoot) return;
    id = parent;
    e = &entries_.at(id);
    --e->num_children;
  }
}

Result<bool> PrefixCache::EvictOne(PagedKvCache& cache) {
  while (!lru_.empty()) {
    const auto oldest = lru_.begin();
    const auto [id, group] = oldest->second;
    Held& h = entries_.at(id).held[group];
    if (cache.pool().refcount(h.page) != 1) {
      // A sequence reads it: no longer a candidate until Touch (its
      // release) makes it one again. Each page is skipped once per use,
      // so eviction stays amortised O(log n).
      lru_.erase(oldest);
      h.candidate = false;
      continue;
    }
    FOLIO_RETURN_IF_ERROR(cache.DropPage(h.page));
    Forget(id, group);
    ++stats_.evicted;
    return true;
  }
  return false;
}

Status PrefixCache::Clear(PagedKvCache& cache) {
  while (!by_page_.empty()) {
    const auto [page, where] = *by_page_.begin();
    FOLIO_RETURN_IF_ERROR(cache.DropPage(page));
    Forget(where.first, where.second);
    ++stats_.evicted;
  }
  return Status::Ok();
}

}  // namespace folio::kv
