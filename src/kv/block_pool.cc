#include "folio/kv/block_pool.h"

#include <algorithm>
#include <limits>
#include <string>

namespace folio::kv {

BlockPool::BlockPool(uint64_t num_pages) {
  FOLIO_CHECK(num_pages <= static_cast<uint64_t>(std::numeric_limits<PageId>::max()),
              "num_pages=", num_pages);
  refcounts_.assign(num_pages, 0);
  next_.resize(num_pages);
  prev_.resize(num_pages);
  // 0, 1, 2, ...: a fresh pool hands pages out in order, which makes tests
  // and traces easy to read.
  for (uint64_t i = 0; i < num_pages; ++i) {
    const auto page = static_cast<PageId>(i);
    prev_[i] = i == 0 ? kNone : page - 1;
    next_[i] = i + 1 == num_pages ? kNone : page + 1;
  }
  if (num_pages > 0) {
    front_ = 0;
    back_ = static_cast<PageId>(num_pages - 1);
  }
  num_free_ = num_pages;
}

PageId BlockPool::Unlink(PageId page) {
  const auto i = static_cast<size_t>(page);
  const PageId next = next_[i], prev = prev_[i];
  (prev == kNone ? front_ : next_[static_cast<size_t>(prev)]) = next;
  (next == kNone ? back_ : prev_[static_cast<size_t>(next)]) = prev;
  next_[i] = prev_[i] = kNone;
  --num_free_;
  return next;
}

void BlockPool::LinkBefore(PageId page, PageId next) {
  const auto i = static_cast<size_t>(page);
  const PageId prev = next == kNone ? back_ : prev_[static_cast<size_t>(next)];
  next_[i] = next;
  prev_[i] = prev;
  (prev == kNone ? front_ : next_[static_cast<size_t>(prev)]) = page;
  (next == kNone ? back_ : prev_[static_cast<size_t>(next)]) = page;
  ++num_free_;
}

PageId BlockPool::Take(PageId page) {
  const PageId next = Unlink(page);
  if (journaling_) journal_.push_back({page, next, false});
  refcounts_[static_cast<size_t>(page)] = 1;
  ++total_allocations_;
  peak_used_ = std::max(peak_used_, num_used());
  return page;
}

std::optional<PageId> BlockPool::TryAllocate() {
  if (front_ == kNone) return std::nullopt;
  return Take(front_);
}

std::optional<PageId> BlockPool::TryAllocateAfter(PageId prev) {
  FOLIO_CHECK(prev < static_cast<PageId>(num_pages()), "prev=", prev, " num_pages=", num_pages());
  const PageId want = prev + 1;
  if (prev >= 0 && static_cast<uint64_t>(want) < num_pages() &&
      refcounts_[static_cast<size_t>(want)] == 0) {
    return Take(want);
  }
  return TryAllocate();
}

std::optional<PageId> BlockPool::TryClaim(PageId page) {
  FOLIO_CHECK(page >= 0 && static_cast<uint64_t>(page) < num_pages(), "page=", page,
              " num_pages=", num_pages());
  if (refcounts_[static_cast<size_t>(page)] != 0) return std::nullopt;
  return Take(page);
}

std::optional<std::vector<PageId>> BlockPool::TryAllocate(uint64_t n) {
  if (!CanAllocate(n)) return std::nullopt;
  std::vector<PageId> pages;
  pages.reserve(n);
  for (uint64_t i = 0; i < n; ++i) pages.push_back(*TryAllocate());
  return pages;
}

bool BlockPool::Deprioritize(PageId page) {
  if (page < 0 || static_cast<uint64_t>(page) >= num_pages() ||
      refcounts_[static_cast<size_t>(page)] != 0 || page == back_) {
    return false;
  }
  const PageId next = Unlink(page);
  LinkBefore(page, kNone);
  if (journaling_) journal_.push_back({page, next, true});
  return true;
}

void BlockPool::BeginJournal() {
  FOLIO_CHECK(!journaling_, "a journal is already open");
  journaling_ = true;
}

void BlockPool::EndJournal() {
  FOLIO_CHECK(journaling_, "no journal is open");
  journaling_ = false;
  journal_.clear();
}

void BlockPool::RollBack() {
  FOLIO_CHECK(journaling_, "no journal is open");
  for (auto it = journal_.rbegin(); it != journal_.rend(); ++it) {
    uint32_t& count = refcounts_[static_cast<size_t>(it->page)];
    if (it->moved) {
      Unlink(it->page);
    } else {
      FOLIO_CHECK(count == 1, "page ", it->page, " taken in the journal has refcount ", count);
      count = 0;
    }
    LinkBefore(it->page, it->next);
  }
  journaling_ = false;
  journal_.clear();
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
  if (--count == 0) {
    FOLIO_CHECK(!journaling_, "page ", page, " freed while a journal is open");
    LinkBefore(page, front_);
  }
  return Status::Ok();
}

uint32_t BlockPool::refcount(PageId page) const {
  FOLIO_CHECK(page >= 0 && static_cast<uint64_t>(page) < num_pages(), "page=", page,
              " num_pages=", num_pages());
  return refcounts_[static_cast<size_t>(page)];
}

std::vector<PageId> BlockPool::free_list() const {
  std::vector<PageId> out;
  out.reserve(num_free_);
  for (PageId p = front_; p != kNone && out.size() <= num_pages();
       p = next_[static_cast<size_t>(p)]) {
    out.push_back(p);
  }
  return out;
}

Status BlockPool::CheckInvariants() const {
  const uint64_t n = num_pages();
  if (next_.size() != n || prev_.size() != n || num_free_ > n) {
    return Status::FailedPrecondition("free list arrays or count (" + std::to_string(num_free_) +
                                      ") do not match " + std::to_string(n) + " pages");
  }
  std::vector<bool> on_free_list(n, false);
  uint64_t count = 0;
  PageId prev = kNone;
  for (PageId page = front_; page != kNone; page = next_[static_cast<size_t>(page)]) {
    FOLIO_RETURN_IF_ERROR(CheckRange(page, "free-list entry"));
    const auto idx = static_cast<size_t>(page);
    if (on_free_list[idx]) {
      return Status::FailedPrecondition("page " + std::to_string(page) +
                                        " is on the free list twice");
    }
    if (prev_[idx] != prev) {
      return Status::FailedPrecondition("page " + std::to_string(page) + "'s back link names " +
                                        std::to_string(prev_[idx]) + ", not " +
                                        std::to_string(prev));
    }
    on_free_list[idx] = true;
    ++count;
    prev = page;
  }
  if (prev != back_ || count != num_free_) {
    return Status::FailedPrecondition("the free list reaches " + std::to_string(count) +
                                      " pages ending at " + std::to_string(prev) +
                                      "; the pool counts " + std::to_string(num_free_) +
                                      " ending at " + std::to_string(back_));
  }
  for (size_t i = 0; i < n; ++i) {
    if ((refcounts_[i] == 0) != on_free_list[i]) {
      return Status::FailedPrecondition(
          "page " + std::to_string(i) + " has refcount " + std::to_string(refcounts_[i]) +
          (on_free_list[i] ? " but is on the free list" : " but is not on the free list"));
    }
  }
  return Status::Ok();
}

}  // namespace folio::kv
