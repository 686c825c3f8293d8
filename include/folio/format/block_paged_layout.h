// The block-paged layout (Hurray layout tag 0x0A): how a paged KV cache
// travels between engine processes.
//
// A block-paged tensor has logical shape [total_tokens, num_heads, head_dim]
// and three buffers:
//   0 page_pool    // [num_pages, page_size, num_heads, head_dim], page p
//                  // contiguous (token-major inside a page)
//   1 block_table  // [sum of pages over sequences] physical page ids, the
//                  // logical pages of every sequence concatenated
//   2 seq_ptr      // [num_seqs + 1] CSR offsets into block_table
// plus, when quantized per channel or per block, 3 scales and (asymmetric)
// 4 zero points. block_table and seq_ptr hold u32 or u64 (index_type).
//
// Token t of sequence s, head h, feature d lives at element
//   phys = block_table[seq_ptr[s] + t / page_size]
//   flat = ((phys * page_size + t % page_size) * num_heads + h) * head_dim + d
// of the pool (ElementOffset). Two sequences may name the same physical page
// (a shared prefix); that is valid.
//
// The layout object holds the 32 wire bytes' worth of fields and is valid by
// construction. Everything that needs more (the shape, the index buffers, a
// quantization scheme) is a Validate* method that returns a Status naming
// the offending field, index and value.
#ifndef FOLIO_FORMAT_BLOCK_PAGED_LAYOUT_H_
#define FOLIO_FORMAT_BLOCK_PAGED_LAYOUT_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "folio/core/status.h"
#include "folio/format/quantization.h"

namespace folio::format {

// What the pool holds: keys, values, or both fused in one tensor.
enum class KvRole : uint8_t { kKey = 0, kValue = 1, kFused = 2 };
// "key", "value", "fused".
std::string_view KvRoleName(KvRole role);
// The names above; InvalidArgument naming the string otherwise.
Result<KvRole> ParseKvRole(std::string_view name);

// Element type of block_table and seq_ptr.
enum class IndexType : uint8_t { kU32 = 0, kU64 = 1 };
// "uint32", "uint64".
std::string_view IndexTypeName(IndexType type);
// The names above; InvalidArgument naming the string otherwise.
Result<IndexType> ParseIndexType(std::string_view name);
constexpr uint64_t IndexTypeBytes(IndexType type) { return type == IndexType::kU32 ? 4 : 8; }

// One element of a block-paged tensor: sequence, token position within the
// sequence (logical), head, feature.
struct PagedElement {
  uint64_t seq = 0;
  uint64_t token = 0;
  uint64_t head = 0;
  uint64_t dim = 0;
};

class BlockPagedLayout {
 public:
  // Errors (InvalidArgument): page_size == 0, paged_axis != 0, layer_index
  // 0xFFFFFFFF (the wire's "none"; pass nullopt). num_pages and num_seqs
  // may be 0. Mirrors Python's BlockPagedLayout(page_size, num_pages,
  // paged_axis, num_seqs, kv_role, layer_index, block_table_index_type).
  static Result<BlockPagedLayout> Create(uint32_t page_size, uint64_t num_pages,
                                         uint32_t paged_axis, uint32_t num_seqs,
                                         KvRole kv_role = KvRole::kKey,
                                         std::optional<uint32_t> layer_index = std::nullopt,
                                         IndexType block_table_index_type = IndexType::kU32);

  static constexpr uint8_t tag() { return 0x0A; }
  static constexpr std::string_view name() { return "block_paged"; }
  // Buffers of the layout itself: page_pool, block_table, seq_ptr.
  static constexpr uint32_t buffer_count() { return 3; }
  // With a scheme: 3 for per-tensor (scale inline), 4 for a symmetric
  // per-channel or per-block scheme (+ scales), 5 for an asymmetric one
  // (+ zero points).
  static uint32_t BufferCountWith(const QuantizationScheme& scheme);

  uint32_t page_size() const { return page_size_; }
  uint64_t num_pages() const { return num_pages_; }
  uint32_t paged_axis() const { return 0; }
  uint32_t num_seqs() const { return num_seqs_; }
  KvRole kv_role() const { return kv_role_; }
  std::optional<uint32_t> layer_index() const { return layer_index_; }
  IndexType block_table_index_type() const { return index_type_; }

  // The shape must be [total_tokens, num_heads, head_dim]: rank 3, with
  // num_heads and head_dim static (not UINT64_MAX) and the pool's element
  // count num_pages * page_size * num_heads * head_dim representable in
  // u64. total_tokens may be dynamic. InvalidArgument naming the dimension.
  Status ValidateAgainstShape(std::span<const uint64_t> shape) const;

  // The pool's element count for a shape that passed ValidateAgainstShape.
  Result<uint64_t> PoolElements(std::span<const uint64_t> shape) const;

  // Checks every invariant of the index buffers, naming index and value:
  // seq_ptr has num_seqs + 1 entries, seq_ptr[0] == 0, seq_ptr is
  // non-decreasing, seq_ptr[num_seqs] == block_table.size(), every
  // block_table entry < num_pages (OutOfRange). The empty batch
  // (num_seqs 0, seq_ptr {0}, empty block_table) and pages shared between
  // sequences are valid. The element width must match
  // block_table_index_type (InvalidArgument otherwise).
  Status ValidateIndexBuffers(std::span<const uint32_t> seq_ptr,
                              std::span<const uint32_t> block_table) const;
  Status ValidateIndexBuffers(std::span<const uint64_t> seq_ptr,
                              std::span<const uint64_t> block_table) const;

  // The block-paged rules for quantization: per-tensor always; per-channel
  // only on axis 1 or 2 (axis 0 is the paged axis); per-block only on axis
  // 0 with block_size == page_size. InvalidArgument naming the rule.
  Status ValidateQuantizationCompatibility(const QuantizationScheme& scheme) const;

  // The pool element index of `e`, checking everything it reads: the shape
  // (as ValidateAgainstShape), seq_ptr's length, e.seq < num_seqs, the
  // sequence's two seq_ptr entries (ordered, inside block_table), the page
  // id read (< num_pages), e.token < the sequence's pages * page_size,
  // e.head < num_heads, e.dim < head_dim. OutOfRange for a position beyond
  // its bound, InvalidArgument for malformed index buffers. It reads O(1)
  // entries; ValidateIndexBuffers checks the whole tables once.
  Result<uint64_t> ElementOffset(std::span<const uint64_t> shape, std::span<const uint32_t> seq_ptr,
                                 std::span<const uint32_t> block_table,
                                 const PagedElement& e) const;
  Result<uint64_t> ElementOffset(std::span<const uint64_t> shape, std::span<const uint64_t> seq_ptr,
                                 std::span<const uint64_t> block_table,
                                 const PagedElement& e) const;

  friend bool operator==(const BlockPagedLayout&, const BlockPagedLayout&) = default;

 private:
  BlockPagedLayout(uint32_t page_size, uint64_t num_pages, uint32_t num_seqs, KvRole kv_role,
                   std::optional<uint32_t> layer_index, IndexType index_type)
      : page_size_(page_size),
        num_pages_(num_pages),
        num_seqs_(num_seqs),
        kv_role_(kv_role),
        layer_index_(layer_index),
        index_type_(index_type) {}

  uint32_t page_size_;
  uint64_t num_pages_;
  uint32_t num_seqs_;
  KvRole kv_role_;
  std::optional<uint32_t> layer_index_;
  IndexType index_type_;
};

}  // namespace folio::format

#endif  // FOLIO_FORMAT_BLOCK_PAGED_LAYOUT_H_
