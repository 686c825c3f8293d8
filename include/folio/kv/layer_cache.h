// One layer's K and V arrays, addressed through a PageTableLayout.
//
// Storage per role: [num_pages, batch, num_kv_heads, page_size, head_dim] in
// the cache's KV dtype (f64, f32, bf16 or f16); compute code reads and
// writes float or double and the cache converts. Every slot starts as NaN
// (for float dtypes), so a kernel that reads a slot it should not turns the
// result into NaN instead of passing by luck.
//
// The live prefix is positions [0, length). A step writes its new rows in two
// phases: Stage puts them at [length, length + n) where attention can read
// them but they are not live, then Commit makes them live or Discard forgets
// them. A failed step therefore leaves length and every live row untouched.
// Reset empties the live prefix and keeps buffers, bytes and table; nothing
// stale becomes live again, because rows become live only through Commit.
#ifndef FOLIO_KV_LAYER_CACHE_H_
#define FOLIO_KV_LAYER_CACHE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "folio/core/aligned_buffer.h"
#include "folio/core/dtype.h"
#include "folio/core/status.h"
#include "folio/kv/page_table.h"

namespace folio::kv {

enum class KvRole : uint8_t { kKey = 0, kValue = 1 };

// A read-only view of one role's storage, for kernels: plain pointers and
// sizes, no ownership. Rows [0, visible_length) may be read.
struct KvArrayView {
  const std::byte* data;
  DType dtype;
  const uint64_t* table;  // [num_pages] logical -> physical
  uint64_t num_pages;
  uint64_t page_size;
  LaneShape shape;
  uint64_t visible_length;
};

// A logical gather of the live prefix, [batch, num_kv_heads, length, head_dim].
template <typename T>
struct KvSnapshot {
  uint64_t length = 0;
  std::vector<T> keys;
  std::vector<T> values;
};

class LayerCache {
 public:
  // Errors: zero dimension in `shape`, or total bytes overflowing.
  static Result<LayerCache> Create(PageTableLayout layout, LaneShape shape, DType dtype);

  LayerCache(LayerCache&&) noexcept = default;
  LayerCache& operator=(LayerCache&&) noexcept = default;

  const PageTableLayout& layout() const { return layout_; }
  const LaneShape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  uint64_t length() const { return length_; }
  uint64_t pending() const { return pending_; }

  // Appends n positions to the live prefix. keys and values are
  // [batch, num_kv_heads, n, head_dim]. Errors (and no change): wrong sizes,
  // length + n > capacity, a non-finite value, rows already staged.
  template <typename T>
  Status Append(std::span<const T> keys, std::span<const T> values, uint64_t n);

  // Writes n positions at [length, length + n) without making them live.
  // Same checks as Append. At most one staged batch at a time.
  template <typename T>
  Status Stage(std::span<const T> keys, std::span<const T> values, uint64_t n);
  void Commit();   // staged rows become live
  void Discard();  // staged rows are forgotten

  // Reads one row (head_dim values) of a live or staged position.
  template <typename T>
  void ReadRow(KvRole role, uint64_t b, uint64_t h, uint64_t pos, T* out) const;

  template <typename T>
  KvSnapshot<T> Snapshot() const;

  // Empties the live prefix (and any staged rows). Keeps buffers and table.
  void Reset();

  // Live plus staged rows are visible.
  KvArrayView View(KvRole role) const;
  std::span<const std::byte> Bytes(KvRole role) const {
    return role == KvRole::kKey ? keys_.bytes() : values_.bytes();
  }

 private:
  LayerCache(PageTableLayout layout, LaneShape shape, DType dtype);
  template <typename T>
  Status CheckRows(std::span<const T> keys, std::span<const T> values, uint64_t n) const;
  template <typename T>
  void WriteRows(std::span<const T> keys, std::span<const T> values, uint64_t n);

  PageTableLayout layout_;
  LaneShape shape_;
  DType dtype_;
  AlignedBuffer keys_;    // [num_pages, B, H_kv, P, d]
  AlignedBuffer values_;  // [num_pages, B, H_kv, P, d]
  uint64_t length_ = 0;
  uint64_t pending_ = 0;
};

}  // namespace folio::kv

#endif  // FOLIO_KV_LAYER_CACHE_H_
