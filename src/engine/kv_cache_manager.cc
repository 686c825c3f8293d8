#include "folio/engine/kv_cache_manager.h"

#include <string>

#include "folio/core/check.h"
#include "folio/core/checked_math.h"

namespace folio::engine {

Result<KvCacheManager> KvCacheManager::Create(const kv::PagedKvCacheConfig& config,
                                              bool prefix_caching, backend::Backend* backend) {
  FOLIO_ASSIGN_OR_RETURN(kv::PagedKvCache cache, backend != nullptr
                                                     ? backend->CreateKvPool(config)
                                                     : kv::PagedKvCache::Create(config));
  return KvCacheManager(std::move(cache), prefix_caching);
}

uint64_t KvCacheManager::NumAvailablePages() const {
  return cache_.pool().num_free() + (prefix_caching_ ? prefix_.NumEvictable(cache_) : 0);
}

uint64_t KvCacheManager::NumNewPages(kv::SeqId seq, uint64_t num_computed, uint64_t n) const {
  return (CeilDiv(num_computed + n, page_size()) - cache_.block_table(seq).size()) *
         cache_.num_groups();
}

Result<KvCacheManager::Started> KvCacheManager::StartSequence(std::span<const int32_t> tokens,
                                                              bool reuse_prefix) {
  FOLIO_CHECK(!tokens.empty());
  kv::PrefixCache::Match m;
  if (prefix_caching_ && reuse_prefix) {
    m = prefix_.Lookup(tokens, (tokens.size() - 1) / page_size(), windows_);
  } else {
    m.tables.resize(cache_.num_groups());
  }
  FOLIO_ASSIGN_OR_RETURN(kv::SeqId seq, cache_.AddSequence(m.tables, m.num_pages * page_size()));
  chains_[seq] = Chain{m.num_pages, m.last, m.last_hash};
  return Started{seq, m.num_pages * page_size()};
}

Result<kv::SeqId> KvCacheManager::AdoptSequence(std::span<const std::vector<kv::PageId>> tables,
                                                uint64_t num_tokens) {
  FOLIO_ASSIGN_OR_RETURN(kv::SeqId seq, cache_.AddSequence(tables, num_tokens));
  chains_[seq] = Chain{};
  return seq;
}

Result<std::vector<kv::BatchMetadata>> KvCacheManager::BuildBatchMetadata(
    std::span<const kv::SeqId> seqs, const kv::AppendPlan& plan) const {
  std::vector<kv::BatchMetadata> metas;
  for (uint64_t g = 0; g < cache_.num_groups(); ++g) {
    FOLIO_ASSIGN_OR_RETURN(kv::BatchMetadata m, cache_.BuildBatchMetadata(seqs, &plan, g));
    metas.push_back(std::move(m));
  }
  return metas;
}

void KvCacheManager::Commit(const kv::AppendPlan& plan, std::span<const uint64_t> num_revocable) {
  const std::vector<kv::PageId> released = cache_.Commit(plan, num_revocable);
  if (prefix_caching_) prefix_.Touch(released);
}

void KvCacheManager::Free(kv::SeqId seq) {
  if (prefix_caching_) {
    for (uint64_t g = 0; g < cache_.num_groups(); ++g) prefix_.Touch(cache_.block_table(seq, g));
  }
  const Status released = cache_.Release(seq);
  FOLIO_CHECK(released.ok(), released.ToString());
  chains_.erase(seq);
}

Result<kv::SeqId> KvCacheManager::Fork(kv::SeqId seq) {
  FOLIO_ASSIGN_OR_RETURN(kv::SeqId child, cache_.Fork(seq));
  chains_[child] = chains_.at(seq);
  return child;
}

Result<bool> KvCacheManager::EvictOne() {
  if (!prefix_caching_) return false;
  return prefix_.EvictOne(cache_);
}

Result<std::optional<kv::AppendPlan>> KvCacheManager::Allocate(
    std::span<const std::pair<kv::SeqId, uint64_t>> requests, uint64_t num_new_pages) {
  while (cache_.pool().num_free() < num_new_pages) {
    FOLIO_ASSIGN_OR_RETURN(bool evicted, EvictOne());
    if (!evicted) break;
  }
  while (true) {
    FOLIO_ASSIGN_OR_RETURN(std::optional<kv::AppendPlan> plan, cache_.PrepareAppend(requests));
    if (plan) return plan;
    // The count missed a copy-on-write of a shared tail: one more page.
    FOLIO_ASSIGN_OR_RETURN(bool evicted, EvictOne());
    if (!evicted) return std::optional<kv::AppendPlan>();
  }
}

Status KvCacheManager::CacheFullPages(kv::SeqId seq, std::span<const int32_t> tokens,
                                      uint64_t num_computed) {
  if (!prefix_caching_) return Status::Ok();
  Chain& c = chains_.at(seq);
  const uint64_t page = page_size();
  FOLIO_CHECK(tokens.size() >= num_computed);
  std::vector<kv::PageId> pages(cache_.num_groups());
  while ((c.num_pages + 1) * page <= num_computed && prefix_.HasEntry(c.entry)) {
    for (uint64_t g = 0; g < pages.size(); ++g) pages[g] = cache_.block_table(seq, g)[c.num_pages];
    FOLIO_ASSIGN_OR_RETURN(
        kv::PrefixCache::Inserted in,
        prefix_.Insert(cache_, c.entry, c.hash, tokens.subspan(c.num_pages * page, page), pages));
    c.entry = in.entry;
    c.hash = in.hash;
    ++c.num_pages;
  }
  return Status::Ok();
}

Result<std::vector<kv::PageId>> KvCacheManager::HoldNewPages(uint64_t n) {
  if (NumAvailablePages() < n) {
    const uint64_t free = cache_.pool().num_free();
    return Status::ResourceExhausted(
        "need " + std::to_string(n) + " pages; " + std::to_string(free) + " are free and " +
        std::to_string(NumAvailablePages() - free) + " cached pages could be evicted");
  }
  while (cache_.pool().num_free() < n) {
    Result<bool> evicted = EvictOne();
    FOLIO_CHECK(evicted.ok() && *evicted, "eviction failed");
  }
  FOLIO_ASSIGN_OR_RETURN(std::optional<std::vector<kv::PageId>> held, cache_.HoldNewPages(n));
  FOLIO_CHECK(held.has_value(), "allocation failed");
  return std::move(*held);
}

void KvCacheManager::DropPage(kv::PageId page) {
  const Status dropped = cache_.DropPage(page);
  FOLIO_CHECK(dropped.ok(), dropped.ToString());
}

Status KvCacheManager::ClearPrefixCache() { return prefix_.Clear(cache_); }

}  // namespace folio::engine
