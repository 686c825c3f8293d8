// PagedKvCache: the engine's paged K/V cache. A BlockPool that owns the
// pages, sequences that own block tables into them, and the KvStorage that
// holds the pages' rows.
//
// Layer groups. A model whose layers all see every earlier position (a
// global model) is one group: a page id names the same page in every
// layer, and a sequence has one block table. A layer with a sliding window
// W only ever reads the last W positions, so its pages before the window
// can go back to the pool, which a table shared with global layers could
// not do. Layers are therefore cut into groups of equal size S (as vLLM's
// hybrid KV cache manager does): the layers of one window (0 = global) in
// layer order, S at a time, S being the fewest layers any window has (a
// kind's last group may have fewer). Every group has its own block table
// per sequence, and all groups take their pages from the one BlockPool: a
// page holds one group's S layers. Gemma 3 (15 layers of window 512, 3
// global) is 6 groups of 3 layers, and a long sequence holds its whole
// length in one group and about W / page_size pages in each of the other
// five.
//
// Storage. The pages' rows live in a KvStorage (kv_storage.h: its layout,
// poison and quantization rules), which the cache owns but whose memory a
// backend chose: the host backends keep it in host memory
// (MakeHostKvStorage), a device backend in device memory. The cache keeps
// only tables, on the host: it answers whether a page may be written
// (CheckWritable) and then asks the storage to write. Layer l of group g
// (its slot s) keeps its rows in storage slot s at the pages of g's block
// tables. Rows (sizes, finite values) are checked by the storage
// (ValidateKvRows), since only it sees them where they live.
//
// Sequences. A sequence is a length and a block table per group: logical
// position p lives at slot p % page_size of page table[p / page_size].
// Outside a step, table.size() == ceil(length / page_size): a page is
// allocated only when a token does not fit in the tail page. In a group of
// window W, Commit releases the pages no later query can see. The next
// query sits at the new length, unless Truncate takes back some of the
// step's tokens (a speculative step's drafts): Commit is told how many it
// may take back (all of them unless told), and releases the pages wholly
// before position floor + 1 - W, floor being the new length less those
// (config.window_margin keeps more). Their table entries become -1, always a
// prefix of the table. Fork shares every page (refcount + 1); a shared page is
// never written: appending to a sequence whose partially filled tail is shared first copies that
// tail (copy-on-write). Release returns each page reference the sequence holds exactly once.
//
// Steps are atomic (docs/design.md, contract 4):
//
//   auto plan = cache.PrepareAppend({{a, 1}, {b, 7}});   // plan, reserve
//   if (!plan.ok())  -> bad request, nothing changed
//   if (!*plan)      -> pool too small for the whole step, nothing changed
//   meta = cache.BuildBatchMetadata(seqs, &**plan);      // once per step
//   for each layer: cache.WriteRows(layer, meta.slot_mapping, k, v); attend
//   cache.Commit(**plan)  or, on any failure, cache.Abort(std::move(**plan))
//
// At most one plan is pending at a time. While it is, Fork, Release and
// PrepareAppend fail with kFailedPrecondition; AddSequence, WriteRows, the
// readers and BuildBatchMetadata work. That rule is what makes Abort exact:
// nothing but the plan has touched the pool or a table since Prepare.
//
// Page order. A sequence's new page is the one physically after its
// previous page when that is free (BlockPool::TryAllocateAfter), else the
// free list's front; and after a step gives a sequence new pages, the free
// pages after its new tail move to the back of the free list, as many as
// the sequence holds (at least kMinPagesKeptAfterTail, at most
// kMaxPagesKeptAfterTail), so that other sequences take them last and this
// one finds them free when it grows. Decode steps that grow many sequences in turn
// thus still give each one runs of adjacent pages, which attention reads as
// one stream. Every step is O(pages it takes); nothing is searched.
//
// Abort's mechanism: the plan records, per request, the table size before
// Prepare and, if it copied the tail, the shared page it replaced; the pool
// journals its own changes from Prepare on (BlockPool, "Undo"). Abort walks
// the requests in reverse and restores each table (and the shared page's
// reference), then rolls the pool back, so tables, refcounts and the free
// list's order are restored exactly. The pool's history counters
// (peak_used, total_allocations) still record the aborted allocations. Rows
// already written to the plan's slots stay in the pages but are never live:
// only Commit advances lengths.
#ifndef FOLIO_KV_PAGED_KV_CACHE_H_
#define FOLIO_KV_PAGED_KV_CACHE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "folio/core/dtype.h"
#include "folio/core/status.h"
#include "folio/kv/block_pool.h"
#include "folio/kv/kv_storage.h"
#include "folio/kv/paged_view.h"

namespace folio::kv {

// How many free pages after a sequence's new tail page are kept for it
// (moved to the back of the free list; see "Page order" above): as many as
// it holds, the way a vector doubles its capacity, so a sequence that keeps
// growing breaks its run at most once per kMaxPagesKeptAfterTail pages
// (1024 tokens at pages of 16), and a short one keeps a few.
inline constexpr int64_t kMinPagesKeptAfterTail = 4;
inline constexpr int64_t kMaxPagesKeptAfterTail = 64;

struct PagedKvCacheConfig {
  uint64_t num_layers = 1;
  uint64_t num_kv_heads = 1;
  uint64_t head_dim = 1;
  uint64_t page_size = 16;    // token slots per page
  uint64_t num_pages = 1;     // pages in the pool, shared by all sequences and groups
  DType dtype = DType::kF32;  // f32, bf16, f16, i8, f8e4m3 (f64 for reference use)
  // [num_layers] each layer's sliding window (0 = global), which sets its
  // group (see "Layer groups"); empty: every layer global, one group.
  std::vector<uint64_t> layer_windows;
  // Positions a windowed group keeps before what the window needs, so that
  // Truncate may cut that many tokens below the last step's start (a
  // drafter's rejected drafts).
  uint64_t window_margin = 0;
};

// One group of layers: its window (0 = global) and its layers, ascending.
// Layer layers[s] keeps its rows in storage slot s.
struct LayerGroup {
  uint64_t window = 0;
  std::vector<uint64_t> layers;
};

// The groups of a config (see "Layer groups"): global layers first, then
// windows in increasing order. config.layer_windows must be empty or hold
// num_layers entries (checked).
std::vector<LayerGroup> GroupLayers(const PagedKvCacheConfig& config);

// Sequence ids count up from 0 and are never reused, so a stale id can only
// ever be "unknown", never someone else's sequence.
using SeqId = uint64_t;

// What one step appends, and how to undo it. Produced by PrepareAppend and
// consumed by exactly one Commit or Abort; callers only read it.
class AppendPlan {
 public:
  // Request order, as passed to PrepareAppend.
  std::span<const SeqId> seqs() const { return seqs_; }
  std::span<const uint64_t> num_new_tokens() const { return num_new_tokens_; }
  // [sum of num_new_tokens]: the physical slot (page * page_size + offset)
  // of every new token in `group`'s pages, request by request, in logical
  // order within each. group < the cache's num_groups() (checked).
  std::span<const int64_t> slot_mapping(uint64_t group = 0) const;

 private:
  friend class PagedKvCache;
  // How to undo one request in one group (Abort).
  struct Undo {
    uint64_t old_num_pages;  // table size before Prepare
    PageId cow_source;       // the shared tail it replaced, or -1
  };
  uint64_t id_ = 0;                                  // 0 is never a live plan
  std::vector<SeqId> seqs_;                          // [num_requests]
  std::vector<uint64_t> num_new_tokens_;             // [num_requests]
  std::vector<std::vector<int64_t>> slot_mappings_;  // [num_groups][sum of num_new_tokens]
  std::vector<std::vector<Undo>> undo_;              // [num_requests][num_groups]
};

// Pool-wide accounting. Byte counts cover every layer, K and V together.
struct PoolStats {
  uint64_t pages_total = 0;
  uint64_t pages_used = 0;
  uint64_t pages_free = 0;
  uint64_t peak_pages_used = 0;
  // Internal fragmentation: slots in used pages that hold no committed
  // token, pages_used * page_size - (distinct slots some sequence has
  // committed). Counted per physical page, so a tail shared by forks counts
  // its empty slots once, not once per sharer. Outside a step this is the
  // unwritten part of the tail pages; while a plan is pending, the pages it
  // reserved count as unwritten too (they are, until Commit). A page kept
  // only by HoldPage (a cached prefix page) is full.
  uint64_t tail_slots_unwritten = 0;
  // Pages referenced only by holds, no sequence: cached, reusable, and
  // evictable by their holder.
  uint64_t pages_held_only = 0;
  uint64_t kv_bytes_total = 0;  // the whole pool, scales included
  uint64_t kv_bytes_used = 0;   // pages_used pages, scales included
  // Page order: over every sequence's block table, pairs of consecutive
  // logical pages, and those whose second page is the physically next one
  // (page + 1): how much of the pool a sequence reads as one stream.
  uint64_t page_pairs = 0;
  uint64_t adjacent_page_pairs = 0;
};

class PagedKvCache {
 public:
  // A cache over `storage`, which must have StorageShape(config); null: a
  // host storage (MakeHostKvStorage). Errors: ValidateConfig's; a storage
  // of another shape (InvalidArgument, naming the field and both values).
  static Result<PagedKvCache> Create(PagedKvCacheConfig config,
                                     std::unique_ptr<KvStorage> storage = nullptr);
  // Errors: a zero dimension, page_size or num_pages; num_pages > INT32_MAX
  // (page ids are int32); page_size > INT32_MAX; num_pages * page_size >
  // INT64_MAX (slots are int64); layer_windows neither empty nor one per
  // layer; the total byte size overflowing.
  static Status ValidateConfig(const PagedKvCacheConfig& config);
  // The storage a cache of `config` needs: S storage slots (the layers of
  // the largest group) of the config's pages, heads, page size, head_dim
  // and dtype.
  static KvStorageShape StorageShape(const PagedKvCacheConfig& config);
  // What one page costs across a group's S storage slots, K and V, scales
  // included: the divisor of a KV byte budget. (config.num_pages is not
  // read.)
  static uint64_t BytesPerPage(const PagedKvCacheConfig& config);
  // The most pages one sequence of `length` tokens can hold at once, over
  // every group, when no step gives it more than max_step_tokens tokens: a
  // global group holds ceil(length / page_size); a group of window W at
  // most ceil((2 * max_step_tokens + W - 1) / page_size) + 2 (this step's
  // tokens, the last step's kept until this Commit, and the window).
  static uint64_t MaxPagesHeld(const PagedKvCacheConfig& config, uint64_t length,
                               uint64_t max_step_tokens);

  PagedKvCache(PagedKvCache&&) noexcept = default;
  PagedKvCache& operator=(PagedKvCache&&) noexcept = default;

  const PagedKvCacheConfig& config() const { return config_; }
  const BlockPool& pool() const { return pool_; }
  // The pools of one layer, for kernels: the storage's view of the layer's
  // storage slot (device pointers for a device storage). layer <
  // num_layers (checked).
  PagedKvView View(uint64_t layer) const;

  // The storage, for a backend that writes or reads it with its own
  // kernels. Write only what CheckWritable allowed: a write behind the
  // tables' back can give a shared or free page rows no one owns.
  const KvStorage& storage() const { return *storage_; }
  KvStorage& storage() { return *storage_; }
  // The storage slot that holds a layer's rows (layer < num_layers, checked).
  uint64_t storage_slot(uint64_t layer) const;

  std::span<const LayerGroup> groups() const { return groups_; }
  uint64_t num_groups() const { return groups_.size(); }
  // In a group of window W, the first position a sequence of `length`
  // committed tokens keeps: its next query sees positions from
  // length + 1 - W on, and window_margin more are kept. Pages wholly before
  // it are released (-1). 0 for a global group (window 0).
  uint64_t FirstKept(uint64_t window, uint64_t length) const;
  // The group of a layer (layer < num_layers, checked).
  uint64_t group_of(uint64_t layer) const;

  // A new, empty sequence (no pages yet).
  SeqId AddSequence();
  // A new sequence over existing pages: tables[g] the pages of group g in
  // logical order, each shared (refcount + 1), holding `length` committed
  // tokens, which must need exactly tables[g].size() pages. In a group of
  // window W the entries wholly before position length + 1 - W may be -1
  // (pages Commit would have released). With full pages this is how a
  // cached prompt prefix is reused without a copy; an imported snapshot's
  // pages come in this way too. Errors (nothing changed): not one table
  // per group, a length that does not fit the pages, a -1 the window does
  // not allow (InvalidArgument), a page id out of range (OutOfRange), a
  // free page or one listed twice (FailedPrecondition), a plan pending.
  Result<SeqId> AddSequence(std::span<const std::vector<PageId>> tables, uint64_t length);
  // The same for a cache of one group.
  Result<SeqId> AddSequence(std::span<const PageId> pages, uint64_t length);
  // AddSequence(prefix, prefix.size() * page_size): full pages only.
  Result<SeqId> AddSequence(std::span<const PageId> prefix) {
    return AddSequence(prefix, prefix.size() * config_.page_size);
  }

  // A new, empty sequence whose pages the caller chooses: the first time
  // it needs logical page lp, PrepareAppend claims page placement[lp] from
  // the pool (BlockPool::TryClaim) instead of taking the pool's next one.
  // A fixed page table runs on this cache this way (`folio layout` claims
  // the worked example's pages, table[lp] * batch + lane). PrepareAppend
  // answers nullopt when a page the step must claim is in use, and
  // OutOfRange when the sequence would outgrow its placement. A tail
  // copied on write, and a fork of the sequence, take pages as usual.
  // Errors (nothing changed): a page id out of range (OutOfRange), one
  // listed twice (InvalidArgument), a cache of more than one group or a
  // plan pending (FailedPrecondition).
  Result<SeqId> AddPlacedSequence(std::vector<PageId> placement);

  // n free pages, each held once (HoldPage), for an import to fill before
  // sequences take them over; nullopt (nothing changed) when fewer than n
  // are free. Errors: a plan pending.
  Result<std::optional<std::vector<PageId>>> HoldNewPages(uint64_t n);

  // One page of one layer and role in the interchange's token-major order,
  // [page_size, num_kv_heads, head_dim] elements of the cache's dtype (raw
  // bytes; page_bytes() of them). Reading zeroes the slots from
  // `live_slots` on, so what leaves the process holds no stale rows.
  // Writing needs a page with exactly one reference (its writer) and no
  // plan pending. Bad arguments are programming errors (checked), except
  // the page's state on writing (FailedPrecondition).
  uint64_t page_bytes() const { return storage_->shape().page_bytes(); }
  // A quantized page's scales for one layer and role: one float per row,
  // page_size * num_kv_heads, beside page_bytes(). 0 for float dtypes.
  uint64_t scale_bytes() const { return storage_->shape().scales_per_page() * sizeof(float); }
  void ReadPageTokenMajor(uint64_t layer, KvRole role, PageId page, uint64_t live_slots,
                          std::span<std::byte> out) const;
  Status WritePageTokenMajor(uint64_t layer, KvRole role, PageId page,
                             std::span<const std::byte> in);
  // A quantized page's row scales of one layer and role, token-major like
  // the rows: [page_size, num_kv_heads] floats. The cache must be quantized
  // (checked). Reading gives the slots from `live_slots` on scale 1 (their
  // codes read as zeros), so every scale that leaves is finite and > 0.
  // Writing has WritePageTokenMajor's rules and refuses a scale that is not
  // finite and > 0 (InvalidArgument).
  void ReadPageScales(uint64_t layer, KvRole role, PageId page, uint64_t live_slots,
                      std::span<float> out) const;
  Status WritePageScales(uint64_t layer, KvRole role, PageId page, std::span<const float> in);
  // A new sequence with seq's length and block table, sharing every page.
  // Errors: NotFound, or FailedPrecondition while a plan is pending.
  Result<SeqId> Fork(SeqId seq);
  // Forgets seq and releases each page reference it holds once (last page
  // first, so its first page is the next one handed out). Errors: NotFound,
  // or FailedPrecondition while a plan is pending.
  Status Release(SeqId seq);
  // Shortens seq to its first `length` committed tokens: the pages past the
  // ones those tokens fill are released (last first, so the free list hands
  // them out again in the order they were taken), and the slots after
  // `length` in its new tail page count as unwritten. Speculative decoding
  // drops a rejected draft's rows this way. Errors: NotFound; length
  // beyond the sequence's (OutOfRange); a plan pending, or a windowed
  // group's page the shorter sequence's next query would see already
  // released (FailedPrecondition). Nothing changes on error.
  Status Truncate(SeqId seq, uint64_t length);

  // References held outside any sequence, by the prefix cache. A holder
  // keeps only full pages (every slot written), so Stats counts a held page
  // as full. HoldPage shares a page some sequence or holder references;
  // DropPage gives back one hold, and the page returns to the free list when
  // nothing else references it. Errors: an id out of range (OutOfRange); a
  // free page, or DropPage of a page with no hold (FailedPrecondition); a
  // plan pending.
  Status HoldPage(PageId page);
  Status DropPage(PageId page);
  // Holds on page (0 for most pages). page must be in range (checked).
  uint32_t holds(PageId page) const;
  // Pages referenced by holds alone, no sequence (PoolStats::pages_held_only),
  // kept current on every reference change rather than counted, so the
  // scheduler can ask every step.
  uint64_t pages_held_only() const { return held_only_; }

  bool Contains(SeqId seq) const { return seqs_.count(seq) != 0; }
  uint64_t num_sequences() const { return seqs_.size(); }
  // Committed tokens. seq must exist (checked).
  uint64_t length(SeqId seq) const;
  // Logical page -> physical page of one group (-1: released, before the
  // group's window); includes a pending plan's new pages. seq must exist
  // and group < num_groups() (checked).
  std::span<const PageId> block_table(SeqId seq, uint64_t group = 0) const;

  // Plans one step: requests are (sequence, number of new tokens). For each
  // request with tokens, in order: if the tail page is partially filled and
  // shared (refcount > 1) it is copied to a fresh page in every layer and
  // role and the sequence's reference moves to the copy; then pages are
  // appended until the new tokens fit. Requests are decided in order, so
  // when two sequences of one step share a tail, the earlier ones copy and
  // the last remaining sharer writes in place.
  // Returns the plan (lengths not yet advanced; the plan is now pending), or
  // nullopt when the free pages cannot hold the whole step, in which case
  // nothing at all changed. Errors (nothing changed): a plan already
  // pending (FailedPrecondition), an unknown sequence (NotFound), a sequence
  // listed twice (InvalidArgument), a length beyond INT32_MAX (OutOfRange).
  Result<std::optional<AppendPlan>> PrepareAppend(
      std::span<const std::pair<SeqId, uint64_t>> requests);
  // Advances every planned sequence's length, then releases the windowed
  // groups' pages no later query can see (see "Sequences"); returns those
  // pages, for a holder to note that a sequence let go of them.
  // num_revocable[i] is how many of plan.seqs()[i]'s new tokens a later
  // Truncate may take back; empty means all of them (a step that is all
  // prompt passes zeros, so its window's pages go back one step sooner).
  // plan must be the pending one, num_revocable empty or one count per
  // sequence, each at most its new tokens (checked).
  std::vector<PageId> Commit(const AppendPlan& plan, std::span<const uint64_t> num_revocable = {});
  // Undoes the plan exactly (see the top of this file). plan must be the
  // pending one (checked).
  void Abort(AppendPlan&& plan);

  // Whether `layer`'s rows may be written to slot_mapping's slots, as the
  // tables see it: the table half of WriteRows' checks, for a backend that
  // then writes with its own kernel. Errors: layer out of range
  // (InvalidArgument); a slot outside the pool (OutOfRange); a slot in a
  // page that is free or shared, whose rows belong to no one or to someone
  // else (FailedPrecondition).
  Status CheckWritable(uint64_t layer, std::span<const int64_t> slot_mapping) const;
  // keys and values [num_tokens, num_kv_heads, head_dim] (num_tokens =
  // slot_mapping.size()) go to slot_mapping's slots of `layer`, converted to
  // the storage dtype (round to nearest even). Everything is validated
  // before the first byte is written: CheckWritable, then the storage's
  // KvStorage::WriteRows checks the rows. Errors: CheckWritable's; sizes,
  // a non-finite value (InvalidArgument, ValidateKvRows).
  Status WriteRows(uint64_t layer, std::span<const int64_t> slot_mapping,
                   std::span<const float> keys, std::span<const float> values);
  // The same from float64 rows, for the float64 reference decoder (the
  // worked example): an f64 cache keeps them exactly. Quantized dtypes take
  // float rows only (InvalidArgument).
  Status WriteRows(uint64_t layer, std::span<const int64_t> slot_mapping,
                   std::span<const double> keys, std::span<const double> values);

  // Reads head_dim values of (layer, role, head) at committed position pos
  // of seq into out. Every argument must be in range (checked).
  void ReadRow(uint64_t layer, KvRole role, SeqId seq, uint64_t pos, uint64_t head,
               float* out) const;

  // Metadata for one step of the listed sequences, in that order, for the
  // layers of one group. Contexts include the plan's new tokens;
  // CSR indptr / indices / last_page_len list every logical page (a
  // windowed group's released pages are kReleasedPage: the window never
  // reaches them); query_indptr counts each
  // sequence's new tokens (all zero without a plan) and slot_mapping lists
  // their slots in the same order. Errors: group out of range, an unknown
  // or repeated sequence; plan not the pending one; a planned sequence
  // missing from seqs (its rows would have no query row); counts beyond
  // int32.
  Result<BatchMetadata> BuildBatchMetadata(std::span<const SeqId> seqs, const AppendPlan* plan,
                                           uint64_t group = 0) const;

  PoolStats Stats() const;

 private:
  struct Sequence {
    uint64_t length = 0;  // committed tokens
    // [num_groups][num_pages] logical -> physical page, -1 for pages a
    // window released (a prefix of the table)
    std::vector<std::vector<PageId>> tables;
    // [num_groups] how many leading entries are -1
    std::vector<uint64_t> released;
    // AddPlacedSequence: [pages] the page each logical page must claim;
    // empty: the pool chooses.
    std::vector<PageId> placement;
  };
  // What Prepare decided for one request, before anything changes.
  struct Decision {
    Sequence* seq;
    std::vector<uint8_t> copy_tail;  // [num_groups]
    uint64_t new_pages;              // per group
  };

  PagedKvCache(PagedKvCacheConfig config, std::unique_ptr<KvStorage> storage);
  Sequence NewSequence() const;
  Result<std::vector<Decision>> Decide(std::span<const std::pair<SeqId, uint64_t>> requests);
  Status CheckNoPlan(const std::string& op) const;
  // Every reference change goes through Ref / Unref (or HoldPage /
  // DropPage), which keep held_only_ current.
  bool HeldOnly(PageId page) const;
  void CountHeldOnly(bool was, PageId page);
  void Ref(PageId page);
  void Unref(PageId page);
  void CheckPending(const AppendPlan& plan) const;
  const Sequence& Find(SeqId seq) const;
  // Programming errors in a page reader / writer's arguments (checked).
  void CheckPageArgs(uint64_t layer, PageId page) const;
  // FailedPrecondition unless page may be overwritten whole: no plan
  // pending, exactly one reference. `what` names the write.
  Status CheckPageWritable(PageId page, const std::string& what) const;

  PagedKvCacheConfig config_;
  std::unique_ptr<KvStorage> storage_;  // never null
  BlockPool pool_;
  std::vector<LayerGroup> groups_;
  std::vector<uint64_t> group_of_;  // [num_layers]
  std::vector<uint64_t> slot_of_;   // [num_layers] storage slot
  std::unordered_map<SeqId, Sequence> seqs_;
  std::vector<uint32_t> holds_;  // [num_pages], HoldPage references
  uint64_t held_only_ = 0;       // pages whose every reference is a hold
  SeqId next_seq_id_ = 0;
  uint64_t next_plan_id_ = 1;
  uint64_t pending_plan_ = 0;  // id of the pending plan, 0 if none
};

}  // namespace folio::kv

#endif  // FOLIO_KV_PAGED_KV_CACHE_H_
