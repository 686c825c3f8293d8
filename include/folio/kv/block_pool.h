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
// Allocation order is deterministic: the pool's whole state is a function of
// the sequence of calls. The free pages form one list in hand-out order, a
// fresh pool's 0, 1, 2, ...; TryAllocate takes its front, a released page
// goes to the front (the next one handed out). Two more moves keep a growing
// sequence's pages physically adjacent, so attention reads it as one
// stream (docs/kv-cache.md, "Page order"): TryAllocateAfter(prev) takes page
// prev + 1 when it is free, wherever it sits in the list, and Deprioritize
// moves a free page to the back, where it is handed out only after every
// other free page. Every operation is O(1) (the list is doubly linked
// through two arrays indexed by page).
//
// TryClaim takes one named free page the same way.
//
// Undo. Between BeginJournal and EndJournal the pool records how each
// allocation and move changed the list; RollBack undoes them newest first,
// so the list and the refcounts return exactly to where BeginJournal found
// them (an aborted step leaves no trace; peak_used and total_allocations
// are history and keep counting). Only
// TryAllocate*, Deprioritize and Retain / Release of pages already in use
// may happen while a journal is open; releasing a page to the free list
// then is a programming error (checked).
#ifndef FOLIO_KV_BLOCK_POOL_H_
#define FOLIO_KV_BLOCK_POOL_H_

#include <cstdint>
#include <optional>
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
  uint64_t num_free() const { return num_free_; }
  uint64_t num_used() const { return num_pages() - num_free(); }
  // The largest num_used() seen since construction.
  uint64_t peak_used() const { return peak_used_; }
  // Pages handed out by TryAllocate since construction (a history counter:
  // releasing a page does not decrease it).
  uint64_t total_allocations() const { return total_allocations_; }

  bool CanAllocate(uint64_t n) const { return n <= num_free(); }

  // One page with refcount 1, or nullopt when none is free.
  std::optional<PageId> TryAllocate();
  // Page prev + 1 when prev >= 0 and that page exists and is free, else as
  // TryAllocate. prev must be < num_pages (checked).
  std::optional<PageId> TryAllocateAfter(PageId prev);
  // `page` itself with refcount 1 when it is free, wherever it sits in the
  // list; nullopt (nothing changed) when it is in use. For a caller that
  // decides placement itself (a fixed page table made literal). page must
  // be in range (checked).
  std::optional<PageId> TryClaim(PageId page);
  // n pages in allocation order, or nullopt (and nothing allocated) when
  // fewer than n are free. n = 0 yields an empty vector.
  std::optional<std::vector<PageId>> TryAllocate(uint64_t n);
  // A free page moves to the back of the list; a page in use (or out of
  // range) is left alone. Returns whether it moved.
  bool Deprioritize(PageId page);

  // refcount + 1. Errors: OutOfRange for an id outside [0, num_pages),
  // FailedPrecondition for a free page (sharing it would resurrect it),
  // ResourceExhausted if the count would overflow uint32.
  Status Retain(PageId page);
  // refcount - 1; at 0 the page goes to the front of the free list. Errors:
  // OutOfRange for an id outside [0, num_pages), FailedPrecondition for a
  // page that is already free (a double release), naming the page.
  Status Release(PageId page);

  // See "Undo" above. BeginJournal with a journal open, and EndJournal or
  // RollBack without one, are programming errors (checked).
  void BeginJournal();
  void EndJournal();
  void RollBack();

  // 0 for a free page. page must be in range (checked).
  uint32_t refcount(PageId page) const;

  // The free list in hand-out order: front() is the next page TryAllocate
  // hands out. O(num_free); for tests that show an undo restored the pool.
  std::vector<PageId> free_list() const;

  // Ok, or a message naming the first broken invariant: refcounts cover
  // exactly num_pages pages; the list's links agree both ways, reach
  // num_free pages, each once and each with refcount 0; every page with
  // refcount 0 is on the list (so free + referenced = total).
  Status CheckInvariants() const;

 private:
  static constexpr PageId kNone = -1;
  // One change to the list, enough to undo it: `page` was taken (or, for a
  // move, moved to the back) from just before `next` (kNone: it was last).
  struct Change {
    PageId page;
    PageId next;
    bool moved;
  };

  Status CheckRange(PageId page, const char* op) const;
  // List surgery; Unlink returns the page's successor.
  PageId Unlink(PageId page);
  void LinkBefore(PageId page, PageId next);  // next == kNone: at the back
  PageId Take(PageId page);                   // unlink, refcount 1, journal

  std::vector<uint32_t> refcounts_;  // [num_pages]
  std::vector<PageId> next_, prev_;  // [num_pages]; kNone off the list or at an end
  PageId front_ = kNone, back_ = kNone;
  uint64_t num_free_ = 0;
  uint64_t peak_used_ = 0;
  uint64_t total_allocations_ = 0;
  bool journaling_ = false;
  std::vector<Change> journal_;  // since BeginJournal, oldest first
};

}  // namespace folio::kv

#endif  // FOLIO_KV_BLOCK_POOL_H_
