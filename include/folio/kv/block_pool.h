// BlockPool: who holds which K/V page. Refcounts and a free list, no data.
//
// A page is free (refcount 0, on the free list) or referenced (refcount >= 1,
// not on the free list). TryAllocate hands out a free page with refcount 1;
// Retain shares a referenced page (refcount + 1, e.g. a forked sequence or a
// cached prefix); Release drops one reference and returns the page to the
// free list when the last one goes. At every moment
//
//   num_free() + num_used() == num_pages()          (conservation)
//
// and a page is released exactly once per reference: releasing a free page
// is an error (kFailedPrecondition, naming the page), never silently ignored
// (docs/design.md, contract 5).
//
// Running out of pages is an answer, not an error: CanAllocate / TryAllocate
// return false / nullopt and the caller (the scheduler) decides whether to
// wait, preempt or reject.
//
// Allocation order is deterministic. The free list is a LIFO stack seeded so
// that a fresh pool hands out 0, 1, 2, ...; a released page is the next one
// handed out. The pool's whole state is therefore a function of the sequence
// of calls, and undoing calls in reverse order (release what was allocated,
// last first) restores the free list exactly.
#ifndef FOLIO_KV_BLOCK_POOL_H_
#define FOLIO_KV_BLOCK_POOL_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "folio/core/status.h"

namespace folio::kv {

// A physical page id, the same in every layer's K and V pools. int32 to match
// the block tables attention kernels read (kv::BatchMetadata).
using PageId = int32_t;

class BlockPool {
 public:
  // num_pages <= INT32_MAX (checked: callers validate user input first).
  explicit BlockPool(uint64_t num_pages);

  uint64_t num_pages() const { return refcounts_.size(); }
  uint64_t num_free() const { return free_.size(); }
  uint64_t num_used() const { return num_pages() - num_free(); }
  // The largest num_used() seen since construction.
  uint64_t peak_used() const { return peak_used_; }
  // Pages handed out by TryAllocate since construction (a history counter:
  // releasing a page does not decrease it).
  uint64_t total_allocations() const { return total_allocations_; }

  bool CanAllocate(uint64_t n) const { return n <= num_free(); }

  // One page with refcount 1, or nullopt when none is free.
  std::optional<PageId> TryAllocate();
  // n pages in allocation order, or nullopt (and nothing allocated) when
  // fewer than n are free. n = 0 yields an empty vector.
  std::optional<std::vector<PageId>> TryAllocate(uint64_t n);

  // refcount + 1. Errors: OutOfRange for an id outside [0, num_pages),
  // FailedPrecondition for a free page (sharing it would resurrect it),
  // ResourceExhausted if the count would overflow uint32.
  Status Retain(PageId page);
  // refcount - 1; at 0 the page goes back on the free list. Errors:
  // OutOfRange for an id outside [0, num_pages), FailedPrecondition for a
  // page that is already free (a double release), naming the page.
  Status Release(PageId page);

  // 0 for a free page. page must be in range (checked).
  uint32_t refcount(PageId page) const;

  // The free list as a stack: back() is the next page TryAllocate hands out.
  // Exposed so tests can show that an undo restored the pool exactly.
  std::span<const PageId> free_list() const { return free_; }

  // Ok, or a message naming the first broken invariant: refcounts cover
  // exactly num_pages pages; every free-list entry is in range, appears once
  // and has refcount 0; every page with refcount 0 is on the free list (so
  // free + referenced = total).
  Status CheckInvariants() const;

 private:
  Status CheckRange(PageId page, const char* op) const;

  std::vector<uint32_t> refcounts_;  // [num_pages]
  std::vector<PageId> free_;         // [num_free], stack; back() goes first
  uint64_t peak_used_ = 0;
  uint64_t total_allocations_ = 0;
};

}  // namespace folio::kv

#endif  // FOLIO_KV_BLOCK_POOL_H_
