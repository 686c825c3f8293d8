#include "folio/kv/block_pool.h"

#include <algorithm>
#include <limits>
#include <string>

namespace folio::kv {

BlockPool::BlockPool(uint64_t num_pages) {
  FOLIO_CHECK(num_pages <= static_cast<uint64_t>(std::numeric_limits<PageId>::max()),
              "num_pages=", num_pages);
  refcounts_.assign(num_pages, 0);
  // Seeded in reverse so that back() is page 0: a fresh pool hands out
  // 0, 1, 2, ..., which makes tests and traces easy to read.
  free_.resize(num_pages);
  for (uint64_t i = 0; i < num_pages; ++i) {
    free_[i] = static_cast<PageId>(num_pages - 1 - i);
  }
}

std::optional<PageId> BlockPool::TryAllocate() {
  if (free_.empty()) return std::nullopt;
  const PageId page = free_.back();
  free_.pop_back();
  refcounts_[static_cast<size_t>(page)] = 1;
  ++total_allocations_;
  peak_used_ = std::max(peak_used_, num_used());
  return page;
}

std::optional<std::vector<PageId>> BlockPool::TryAllocate(uint64_t n) {
  if (!CanAllocate(n)) return std::nullopt;
  std::vector<PageId> pages;
  pages.reserve(n);
  for (uint64_t i = 0; i < n; ++i) pages.push_back(*TryAllocate());
  return pages;
}

Status BlockPool::CheckRange(PageId page, const char* op) const {
  if (page < 0 || static_cast<uint64_t>(page) >= num_pages()) {
    return Status::OutOfRange(std::string(op) + " of page " + std::to_string(page) +
                              ": the pool has pages [0, " + std::to_string(num_pages()) + ")");
  }
  return Status::Ok();
}

Status BlockPool::Retain(PageId page) {
  FOLIO_RETURN_IF_ERROR(CheckRange(page, "retain"));
  uint32_t& count = refcounts_[static_cast<size_t>(page)];
  if (count == 0) {
    return Status::FailedPrecondition("retain of page " + std::to_string(page) + ", which is free");
  }
  if (count == std::numeric_limits<uint32_t>::max()) {
    return Status::ResourceExhausted("refcount of page " + std::to_string(page) +
                                     " would overflow");
  }
  ++count;
  return Status::Ok();
}

Status BlockPool::Release(PageId page) {
  FOLIO_RETURN_IF_ERROR(CheckRange(page, "release"));
  uint32_t& count = refcounts_[static_cast<size_t>(page)];
  if (count == 0) {
    return Status::FailedPrecondition("release of page " + std::to_string(page) +
                                      ", which is already free (double release)");
  }
  if (--count == 0) free_.push_back(page);
  return Status::Ok();
}

uint32_t BlockPool::refcount(PageId page) const {
  FOLIO_CHECK(page >= 0 && static_cast<uint64_t>(page) < num_pages(), "page=", page,
              " num_pages=", num_pages());
  return refcounts_[static_cast<size_t>(page)];
}

Status BlockPool::CheckInvariants() const {
  if (free_.size() > refcounts_.size()) {
    return Status::FailedPrecondition("free list holds " + std::to_string(free_.size()) +
                                      " entries for " + std::to_string(refcounts_.size()) +
                                      " pages");
  }
  std::vector<bool> on_free_list(refcounts_.size(), false);
  for (const PageId page : free_) {
    FOLIO_RETURN_IF_ERROR(CheckRange(page, "free-list entry"));
    const auto idx = static_cast<size_t>(page);
    if (on_free_list[idx]) {
      return Status::FailedPrecondition("page " + std::to_string(page) +
                                        " is on the free list twice");
    }
    on_free_list[idx] = true;
  }
  for (size_t i = 0; i < refcounts_.size(); ++i) {
    if ((refcounts_[i] == 0) != on_free_list[i]) {
      return Status::FailedPrecondition(
          "page " + std::to_string(i) + " has refcount " + std::to_string(refcounts_[i]) +
          (on_free_list[i] ? " but is on the free list" : " but is not on the free list"));
    }
  }
  return Status::Ok();
}

}  // namespace folio::kv
