#include "folio/format/block_paged_layout.h"

#include <type_traits>

#include "folio/core/checked_math.h"
#include "folio/format/hurray_format.h"
#include "wire.h"

namespace folio::format {
namespace {

using internal::Invalid;

template <typename... Args>
Status OutOfRange(const Args&... args) {
  return Status::OutOfRange(StrCat(args...));
}

template <typename T>
constexpr IndexType IndexTypeOf() {
  return std::is_same_v<T, uint32_t> ? IndexType::kU32 : IndexType::kU64;
}

template <typename T>
Status CheckIndexType(IndexType declared) {
  if (IndexTypeOf<T>() != declared) {
    return Invalid("index buffers are ", IndexTypeName(IndexTypeOf<T>()),
                   " but the layout's block_table_index_type is ", IndexTypeName(declared));
  }
  return Status::Ok();
}

template <typename T>
Status ValidateIndex(const BlockPagedLayout& layout, std::span<const T> seq_ptr,
                     std::span<const T> block_table) {
  FOLIO_RETURN_IF_ERROR(CheckIndexType<T>(layout.block_table_index_type()));
  const uint64_t num_seqs = layout.num_seqs();
  if (seq_ptr.size() != num_seqs + 1) {
    return Invalid("seq_ptr has ", seq_ptr.size(), " entries; num_seqs ", num_seqs, " needs ",
                   num_seqs + 1);
  }
  if (seq_ptr[0] != 0) {
    return Invalid("seq_ptr[0] is ", seq_ptr[0], "; it must be 0");
  }
  for (uint64_t s = 1; s <= num_seqs; ++s) {
    if (seq_ptr[s] < seq_ptr[s - 1]) {
      return Invalid("seq_ptr is not non-decreasing: seq_ptr[", s, "] = ", seq_ptr[s],
                     " < seq_ptr[", s - 1, "] = ", seq_ptr[s - 1]);
    }
  }
  if (seq_ptr[num_seqs] != block_table.size()) {
    return Invalid("seq_ptr[", num_seqs, "] is ", seq_ptr[num_seqs],
                   "; it must equal the block_table length ", block_table.size());
  }
  for (uint64_t i = 0; i < block_table.size(); ++i) {
    if (block_table[i] >= layout.num_pages()) {
      return OutOfRange("block_table[", i, "] is page ", block_table[i], "; num_pages is ",
                        layout.num_pages());
    }
  }
  return Status::Ok();
}

template <typename T>
Result<uint64_t> Offset(const BlockPagedLayout& layout, std::span<const uint64_t> shape,
                        std::span<const T> seq_ptr, std::span<const T> block_table,
                        const PagedElement& e) {
  FOLIO_RETURN_IF_ERROR(layout.ValidateAgainstShape(shape));
  FOLIO_RETURN_IF_ERROR(CheckIndexType<T>(layout.block_table_index_type()));
  const uint64_t num_seqs = layout.num_seqs();
  if (seq_ptr.size() != num_seqs + 1) {
    return Invalid("seq_ptr has ", seq_ptr.size(), " entries; num_seqs ", num_seqs, " needs ",
                   num_seqs + 1);
  }
  if (e.seq >= num_seqs) {
    return OutOfRange("sequence ", e.seq, " is out of range; num_seqs is ", num_seqs);
  }
  const uint64_t begin = seq_ptr[e.seq];
  const uint64_t end = seq_ptr[e.seq + 1];
  if (end < begin) {
    return Invalid("seq_ptr is not non-decreasing: seq_ptr[", e.seq + 1, "] = ", end, " < seq_ptr[",
                   e.seq, "] = ", begin);
  }
  if (end > block_table.size()) {
    return Invalid("seq_ptr[", e.seq + 1, "] = ", end, " is past the block_table length ",
                   block_table.size());
  }
  const uint64_t page_size = layout.page_size();
  // Compared in pages, not tokens: (end - begin) * page_size may overflow.
  const uint64_t page_in_seq = e.token / page_size;
  if (page_in_seq >= end - begin) {
    return OutOfRange("token ", e.token, " of sequence ", e.seq,
                      " is out of range; the sequence has ", end - begin, " pages of ", page_size,
                      " tokens");
  }
  const uint64_t num_heads = shape[1];
  const uint64_t head_dim = shape[2];
  if (e.head >= num_heads) {
    return OutOfRange("head ", e.head, " is out of range; num_heads is ", num_heads);
  }
  if (e.dim >= head_dim) {
    return OutOfRange("dim ", e.dim, " is out of range; head_dim is ", head_dim);
  }
  const uint64_t entry = begin + page_in_seq;
  const uint64_t phys = block_table[entry];
  if (phys >= layout.num_pages()) {
    return OutOfRange("block_table[", entry, "] is page ", phys, "; num_pages is ",
                      layout.num_pages());
  }
  // Every factor is below its bound and ValidateAgainstShape proved that
  // num_pages * page_size * num_heads * head_dim fits in u64, so the index,
  // which is below that product, cannot overflow.
  const uint64_t off = e.token % page_size;
  return ((phys * page_size + off) * num_heads + e.head) * head_dim + e.dim;
}

}  // namespace

std::string_view KvRoleName(KvRole role) {
  switch (role) {
    case KvRole::kKey:
      return "key";
    case KvRole::kValue:
      return "value";
    case KvRole::kFused:
      return "fused";
  }
  FOLIO_CHECK(false, "unknown KvRole ", static_cast<int>(role));
  return {};
}

Result<KvRole> ParseKvRole(std::string_view name) {
  for (KvRole r : {KvRole::kKey, KvRole::kValue, KvRole::kFused}) {
    if (KvRoleName(r) == name) return r;
  }
  return Invalid("kv_role must be 'key', 'value' or 'fused' (got ", Quote(name), ")");
}

std::string_view IndexTypeName(IndexType type) {
  return type == IndexType::kU32 ? "uint32" : "uint64";
}

Result<IndexType> ParseIndexType(std::string_view name) {
  if (name == "uint32") return IndexType::kU32;
  if (name == "uint64") return IndexType::kU64;
  return Invalid("block_table_index_type must be 'uint32' or 'uint64' (got ", Quote(name), ")");
}

Result<BlockPagedLayout> BlockPagedLayout::Create(uint32_t page_size, uint64_t num_pages,
                                                  uint32_t paged_axis, uint32_t num_seqs,
                                                  KvRole kv_role,
                                                  std::optional<uint32_t> layer_index,
                                                  IndexType block_table_index_type) {
  if (page_size == 0) return Invalid("block_paged page_size must be >= 1 (got 0)");
  if (paged_axis != 0) {
    return Invalid("block_paged paged_axis must be 0 (got ", paged_axis, ")");
  }
  if (layer_index == wire::kNoLayerIndex) {
    return Invalid(
        "block_paged layer_index 0xffffffff is reserved for "
        "'not layer-scoped'; pass no layer index instead");
  }
  if (static_cast<uint8_t>(kv_role) > 2) {
    return Invalid("block_paged kv_role ", static_cast<int>(kv_role),
                   " is not 0 (key), 1 (value) or 2 (fused)");
  }
  if (static_cast<uint8_t>(block_table_index_type) > 1) {
    return Invalid("block_paged block_table_index_type ", static_cast<int>(block_table_index_type),
                   " is not 0 (u32) or 1 (u64)");
  }
  return BlockPagedLayout(page_size, num_pages, num_seqs, kv_role, layer_index,
                          block_table_index_type);
}

uint32_t BlockPagedLayout::BufferCountWith(const QuantizationScheme& scheme) {
  return buffer_count() + static_cast<uint32_t>(ReferencedBuffers(scheme).size());
}

Status BlockPagedLayout::ValidateAgainstShape(std::span<const uint64_t> shape) const {
  if (shape.size() != wire::kBlockPagedRank) {
    return Invalid(
        "block_paged needs rank 3 [total_tokens, num_heads, "
        "head_dim] (got rank ",
        shape.size(), ")");
  }
  if (shape[1] == wire::kDynamicDim) {
    return Invalid(
        "block_paged num_heads (shape[1]) must be static, not "
        "dynamic");
  }
  if (shape[2] == wire::kDynamicDim) {
    return Invalid(
        "block_paged head_dim (shape[2]) must be static, not "
        "dynamic");
  }
  if (!CheckedProduct({num_pages_, page_size_, shape[1], shape[2]})) {
    return Status::OutOfRange(StrCat("block_paged page pool of num_pages ", num_pages_,
                                     " * page_size ", page_size_, " * num_heads ", shape[1],
                                     " * head_dim ", shape[2], " elements overflows u64"));
  }
  return Status::Ok();
}

Result<uint64_t> BlockPagedLayout::PoolElements(std::span<const uint64_t> shape) const {
  FOLIO_RETURN_IF_ERROR(ValidateAgainstShape(shape));
  return *CheckedProduct({num_pages_, page_size_, shape[1], shape[2]});
}

Status BlockPagedLayout::ValidateIndexBuffers(std::span<const uint32_t> seq_ptr,
                                              std::span<const uint32_t> block_table) const {
  return ValidateIndex(*this, seq_ptr, block_table);
}
Status BlockPagedLayout::ValidateIndexBuffers(std::span<const uint64_t> seq_ptr,
                                              std::span<const uint64_t> block_table) const {
  return ValidateIndex(*this, seq_ptr, block_table);
}

Status BlockPagedLayout::ValidateQuantizationCompatibility(const QuantizationScheme& scheme) const {
  if (const auto* c = std::get_if<PerChannelAffine>(&scheme)) {
    if (c->axis() == 0) {
      return Invalid(
          "per_channel_affine on axis 0 is refused with "
          "block_paged: axis 0 is the paged axis (use axis 1 or 2)");
    }
    if (c->axis() > 2) {
      return Invalid("per_channel_affine axis ", c->axis(),
                     " is out of range for block_paged rank 3 (use 1 or 2)");
    }
  } else if (const auto* b = std::get_if<PerBlockAffine>(&scheme)) {
    if (b->axis() != 0) {
      return Invalid(
          "per_block_affine with block_paged must be on axis 0 "
          "(got axis ",
          b->axis(), ")");
    }
    if (b->block_size() != page_size_) {
      return Invalid("per_block_affine block_size ", b->block_size(),
                     " must equal block_paged page_size ", page_size_);
    }
  }
  return Status::Ok();
}

Result<uint64_t> BlockPagedLayout::ElementOffset(std::span<const uint64_t> shape,
                                                 std::span<const uint32_t> seq_ptr,
                                                 std::span<const uint32_t> block_table,
                                                 const PagedElement& e) const {
  return Offset(*this, shape, seq_ptr, block_table, e);
}
Result<uint64_t> BlockPagedLayout::ElementOffset(std::span<const uint64_t> shape,
                                                 std::span<const uint64_t> seq_ptr,
                                                 std::span<const uint64_t> block_table,
                                                 const PagedElement& e) const {
  return Offset(*this, shape, seq_ptr, block_table, e);
}

}  // namespace folio::format
