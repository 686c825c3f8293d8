// KvStorage: where a paged KV cache's K/V bytes live. PagedKvCache keeps
// the page tables (which page is free, shared, whose) on the host; the
// storage keeps the pages themselves, in whatever memory its backend
// computes in (host memory for the cpu and reference backends, device
// memory for a GPU backend), and is the only code that touches them.
//
// Layout. For every storage slot s < num_storage_slots and role (K, V) one
// pool
//
//   [num_pages, num_kv_heads, page_size, head_dim]   in the storage's dtype
//
// addressed by kv::ScalarIndex with one batch lane (paged_view.h). A cache
// puts layer layers[s] of each of its layer groups in storage slot s, at
// that group's pages. A page id names the same page in every slot and role.
//
// Poison. A new storage's rows read as NaN (float dtypes hold NaN elements,
// quantized ones zero codes under NaN scales), so a kernel that reads a
// token slot no row was written to produces NaN. Pages are not re-poisoned
// when they are reused: a reallocated page holds its previous owner's rows
// until they are overwritten, and kernels must bound reads by each
// sequence's context (they do).
//
// Quantized pages. With dtype i8 or f8e4m3 a page stores integers / FP8
// codes, and every row (storage slot, role, page, K/V head, token slot:
// head_dim elements) has its own f32 scale beside the pool. The scales of
// one slot and role are [num_pages, num_kv_heads, page_size] floats, the
// pool's order without its last axis, so the scale of the row at element e
// is at e / head_dim (PagedKvView's key_scales / value_scales); element x
// reads back as code(x) * scale. A row's scale is its largest magnitude
// over the dtype's largest code (127 for i8, symmetric; 448 for f8e4m3), so
// nothing saturates (a row whose largest magnitude is below 2^-100, zeros
// included, takes scale 1 and reads back as zeros), and the row's codes
// round to nearest even. Both are a function of the row alone: how a page's
// tokens were split into steps, which rows share its page, the page size
// and where it sits in the pool cannot move a bit, so the determinism
// contract holds for quantized caches unchanged. (A scale per page and
// head, fixed by its first row, was the first design: the first token's
// rows, the attention sink, are unlike the rest, and at 128-token contexts
// i8 lost 4.4% perplexity; docs/kv-cache.md.) Every storage, on every
// device, quantizes by these rules, so that a row reads back with the same
// bits wherever it was written.
//
// Who checks what. The storage knows nothing of sequences: whether a page
// may be written (neither free nor shared) is the tables' question,
// answered by PagedKvCache::CheckWritable before a write. The storage
// checks its own arguments (ids and sizes in range: programming errors,
// checked) and the data written (ValidateKvRows below: shapes and finite
// values; finite, positive scales), because only it sees the data in the
// memory it lives in.
#ifndef FOLIO_KV_KV_STORAGE_H_
#define FOLIO_KV_KV_STORAGE_H_

#include <cstdint>
#include <span>

#include "folio/core/dtype.h"
#include "folio/core/status.h"
#include "folio/kv/block_pool.h"  // PageId
#include "folio/kv/paged_view.h"

namespace folio::kv {

// A storage's dimensions. Every field is > 0 in a storage.
struct KvStorageShape {
  uint64_t num_storage_slots = 1;  // layers per layer group (PagedKvCache: S)
  uint64_t num_pages = 1;
  uint64_t num_kv_heads = 1;
  uint64_t page_size = 1;  // token slots per page
  uint64_t head_dim = 1;
  DType dtype = DType::kF32;  // f32, bf16, f16, i8, f8e4m3 (f64 for reference use)

  bool operator==(const KvStorageShape&) const = default;
  // One page of one storage slot and role:
  // num_kv_heads * page_size * head_dim elements of dtype.
  uint64_t page_bytes() const { return num_kv_heads * page_size * head_dim * DTypeSize(dtype); }
  // Row scales in one page of one slot and role: num_kv_heads * page_size
  // for a quantized dtype, 0 for a float one.
  uint64_t scales_per_page() const { return IsQuantized(dtype) ? num_kv_heads * page_size : 0; }
};

// The checks every KvStorage::WriteRows makes on its rows before it writes
// a byte, for a storage (or a backend writing past one) to call on rows in
// host memory: keys and values each [slot_mapping.size(), num_kv_heads,
// head_dim], every element finite; float64 rows only for a float dtype.
// Errors (InvalidArgument, prefixed "WriteRows: "): a size, a non-finite
// element (naming role and index), float64 rows for a quantized dtype.
Status ValidateKvRows(const KvStorageShape& shape, uint64_t num_tokens, std::span<const float> keys,
                      std::span<const float> values);
Status ValidateKvRows(const KvStorageShape& shape, uint64_t num_tokens,
                      std::span<const double> keys, std::span<const double> values);

class KvStorage {
 public:
  explicit KvStorage(const KvStorageShape& shape) : shape_(shape) {}
  virtual ~KvStorage() = default;
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;

  const KvStorageShape& shape() const { return shape_; }

  // The pools of one storage slot (< num_storage_slots, checked), for
  // kernels: pointers into the storage's memory (device pointers for a
  // device storage, which only that device's kernels may read). Valid for
  // the storage's lifetime.
  virtual PagedKvView View(uint64_t storage_slot) const = 0;

  // keys and values [num_tokens, num_kv_heads, head_dim] (num_tokens =
  // slot_mapping.size()) go to slot_mapping's token slots (page * page_size
  // + offset) of one storage slot, converted to the storage dtype (round to
  // nearest even; quantized: the rules at the top of this file). Rows are
  // validated (ValidateKvRows) before the first byte is written; errors
  // are its. storage_slot and every token slot must be in range (checked):
  // the caller checked them against its tables (PagedKvCache::CheckWritable).
  // float64 rows: the float64 reference decoder's; an f64 storage keeps
  // them exactly.
  virtual Status WriteRows(uint64_t storage_slot, std::span<const int64_t> slot_mapping,
                           std::span<const float> keys, std::span<const float> values) = 0;
  virtual Status WriteRows(uint64_t storage_slot, std::span<const int64_t> slot_mapping,
                           std::span<const double> keys, std::span<const double> values) = 0;

  // Copy-on-write: page `to` becomes a copy of page `from` in every storage
  // slot and role, row scales included. Both in range and distinct
  // (checked). Cannot fail: a cache calls it after planning a step, when
  // nothing may fail any more.
  virtual void CopyPage(PageId from, PageId to) = 0;

  // One page of one storage slot and role in the interchange's token-major
  // order, [page_size, num_kv_heads, head_dim] elements of the dtype (raw
  // bytes; shape().page_bytes() of them). Reading zeroes the token slots
  // from `live_slots` on, so what leaves the process holds no stale rows.
  // Arguments out of range are programming errors (checked).
  virtual void ReadPageTokenMajor(uint64_t storage_slot, KvRole role, PageId page,
                                  uint64_t live_slots, std::span<std::byte> out) const = 0;
  virtual void WritePageTokenMajor(uint64_t storage_slot, KvRole role, PageId page,
                                   std::span<const std::byte> in) = 0;
  // A quantized page's row scales of one storage slot and role, token-major
  // like the rows: [page_size, num_kv_heads] floats (shape().scales_per_page()).
  // The dtype must be quantized (checked). Reading gives the token slots
  // from `live_slots` on scale 1 (their codes read as zeros), so every
  // scale that leaves is finite and > 0. Writing refuses a scale that is
  // not finite and > 0 (InvalidArgument), writing nothing.
  virtual void ReadPageScales(uint64_t storage_slot, KvRole role, PageId page, uint64_t live_slots,
                              std::span<float> out) const = 0;
  virtual Status WritePageScales(uint64_t storage_slot, KvRole role, PageId page,
                                 std::span<const float> in) = 0;

  // head_dim values of one row (storage slot, role, page, token slot
  // `offset` in the page, K/V head) into out, dequantized. Every argument
  // in range (checked).
  virtual void ReadRow(uint64_t storage_slot, KvRole role, PageId page, uint64_t offset,
                       uint64_t head, float* out) const = 0;

 private:
  KvStorageShape shape_;
};

}  // namespace folio::kv

#endif  // FOLIO_KV_KV_STORAGE_H_
