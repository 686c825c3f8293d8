#include "folio/format/descriptor.h"

#include <bit>
#include <cstring>
#include <limits>

#include "folio/core/checked_math.h"
#include "folio/format/hurray_format.h"
#include "wire.h"

namespace folio::format {
namespace {

using internal::Hex;
using internal::Invalid;
using internal::Unsupported;

template <typename... Args>
Status TooLarge(const Args&... args) {
  return Status::OutOfRange(StrCat(args...));
}

// Layout tags Hurray defines and folio does not implement.
std::string_view UnimplementedLayoutName(uint8_t tag) {
  switch (tag) {
    case 0x02:
      return "column-major";
    case 0x04:
      return "tiled";
    case 0x05:
      return "Morton";
    case 0x06:
      return "COO";
    case 0x07:
      return "CSR";
    case 0x08:
      return "CSC";
    case 0x09:
      return "CSF";
    case 0x0B:
      return "composite";
    case 0x40:
      return "Hilbert";
    default:
      return {};
  }
}

Status CheckLayoutTag(uint8_t tag) {
  if (tag == wire::kLayoutRowMajor || tag == wire::kLayoutStrided ||
      tag == wire::kLayoutBlockPaged) {
    return Status::Ok();
  }
  if (std::string_view name = UnimplementedLayoutName(tag); !name.empty()) {
    return Unsupported("layout ", name, " (", Hex(tag), ") is not supported by folio");
  }
  if (tag == 0x00 || tag == 0xFF) {
    return Invalid("layout tag ", Hex(tag), " is invalid");
  }
  if (tag >= 0x80 && tag <= 0xEF) {
    return Invalid("layout tag ", Hex(tag), " is reserved");
  }
  if (tag >= 0xF0) {
    return Unsupported("layout tag ", Hex(tag), " is a private layout; folio supports none");
  }
  return Invalid("unknown layout tag ", Hex(tag));
}

// Optional sections folio does not implement. A shard section with a
// block-paged layout is not merely unimplemented but forbidden by the spec.
Status CheckFlags(uint32_t flags, uint8_t layout_tag) {
  if ((flags & ~wire::kKnownFlags) != 0) {
    return Invalid("flags ", Hex(flags, 8), " has undefined bits ",
                   Hex(flags & ~wire::kKnownFlags, 8), " set (bits 5-31 must be 0)");
  }
  if ((flags & wire::kFlagShard) != 0) {
    if (layout_tag == wire::kLayoutBlockPaged) {
      return Invalid(
          "a shard section (flags bit1) is not allowed with the "
          "block-paged layout (0x0a)");
    }
    return Unsupported("shard section (flags bit1) is not supported by folio");
  }
  if ((flags & wire::kFlagExtensionType) != 0) {
    return Unsupported("extension type section (flags bit2) is not supported by folio");
  }
  if ((flags & wire::kFlagStatistics) != 0) {
    return Unsupported("statistics section (flags bit3) is not supported by folio");
  }
  if ((flags & wire::kFlagCompositeMember) != 0) {
    return Unsupported("composite member section (flags bit4) is not supported by folio");
  }
  return Status::Ok();
}

Status CheckBuffer(uint64_t i, const BufferHandle& b) {
  if (!std::has_single_bit(b.alignment)) {
    return Invalid("buffer ", i, " alignment ", b.alignment, " is not a power of two");
  }
  if (b.byte_size > 0 && b.alignment < wire::kMinNonEmptyAlignment) {
    return Invalid("buffer ", i, " alignment ", b.alignment, " is below 64 ",
                   "for a non-empty buffer (byte_size ", b.byte_size, ")");
  }
  if (static_cast<uint8_t>(b.device) > 0x08) {
    return Invalid("buffer ", i, " device_tag ", Hex(static_cast<uint8_t>(b.device)),
                   static_cast<uint8_t>(b.device) == 0xFF ? " is invalid" : " is unknown");
  }
  if (static_cast<uint8_t>(b.sync_mode) > 2) {
    return Invalid("buffer ", i, " sync_mode ", static_cast<int>(b.sync_mode),
                   " is unknown (0..2)");
  }
  if (static_cast<uint8_t>(b.memory_class) > 3) {
    return Invalid("buffer ", i, " memory_class ", static_cast<int>(b.memory_class),
                   " is unknown (0..3)");
  }
  if (b.device == DeviceTag::kCpu && b.sync_mode != SyncMode::kProducerSynced) {
    return Invalid("buffer ", i, " sync_mode ", static_cast<int>(b.sync_mode),
                   " must be 0 (producer-synced) for a CPU buffer");
  }
  return Status::Ok();
}

Status CheckRank(uint64_t rank) {
  if (rank > wire::kMaxRank) {
    return Invalid("rank ", rank, " exceeds the maximum of ", wire::kMaxRank);
  }
  return Status::Ok();
}

bool HasDynamicDim(std::span<const uint64_t> shape) {
  for (uint64_t d : shape) {
    if (d == wire::kDynamicDim) return true;
  }
  return false;
}
bool HasZeroDim(std::span<const uint64_t> shape) {
  for (uint64_t d : shape) {
    if (d == 0) return true;
  }
  return false;
}

// The bytes a dense tensor reaches must lie in buffer 0:
// [byte_offset - below, byte_offset + above) within [0, byte_size), where
// `below` and `above` come from the most negative and most positive element
// offsets the strides reach.
Status CheckDenseExtent(ElementType dtype, std::span<const uint64_t> shape,
                        const std::vector<int64_t>* strides, uint64_t byte_offset,
                        const BufferHandle& data) {
  if (byte_offset > data.byte_size) {
    return Invalid("byte_offset ", byte_offset, " is past the end of buffer 0 (", data.byte_size,
                   " bytes)");
  }
  if (HasZeroDim(shape) || HasDynamicDim(shape)) return Status::Ok();
  const uint64_t esize = ElementTypeBytes(dtype);
  uint64_t below = 0;      // elements before byte_offset
  uint64_t last = 0;       // offset of the furthest element after it
  uint64_t row_major = 1;  // row-major stride of dimension i
  for (size_t i = shape.size(); i-- > 0;) {
    uint64_t magnitude = row_major;
    bool negative = false;
    if (strides != nullptr) {
      const int64_t s = (*strides)[i];
      negative = s < 0;
      magnitude = negative ? 0 - static_cast<uint64_t>(s) : static_cast<uint64_t>(s);
    }
    const std::optional<uint64_t> reach = CheckedMul(magnitude, shape[i] - 1);
    const std::optional<uint64_t> sum =
        reach ? CheckedAdd(negative ? below : last, *reach) : std::nullopt;
    if (!sum) {
      return TooLarge("dimension ", i, " (", shape[i], " x stride ", negative ? "-" : "", magnitude,
                      ") reaches beyond u64 elements");
    }
    (negative ? below : last) = *sum;
    if (strides == nullptr && i > 0) {
      // No dimension is 0, so an overflow here means the tensor's extent
      // overflows.
      const std::optional<uint64_t> next = CheckedMul(row_major, shape[i]);
      if (!next) return TooLarge("shape's element count overflows u64");
      row_major = *next;
    }
  }
  const std::optional<uint64_t> below_bytes = CheckedMul(below, esize);
  if (!below_bytes || *below_bytes > byte_offset) {
    return Invalid("strides reach ", below, " elements before byte_offset ", byte_offset,
                   ", before the start of buffer 0");
  }
  const std::optional<uint64_t> elements = CheckedAdd(last, 1);
  const std::optional<uint64_t> bytes = elements ? CheckedMul(*elements, esize) : std::nullopt;
  const std::optional<uint64_t> end = bytes ? CheckedAdd(byte_offset, *bytes) : std::nullopt;
  if (!end) {
    return TooLarge("tensor extent past byte_offset ", byte_offset, " overflows u64 bytes");
  }
  if (*end > data.byte_size) {
    return Invalid("tensor needs bytes [", byte_offset - *below_bytes, ", ", *end,
                   ") of buffer 0, which has ", data.byte_size);
  }
  return Status::Ok();
}

Status CheckBufferSize(uint32_t i, std::string_view what, uint64_t actual,
                       std::optional<uint64_t> expected) {
  if (!expected) {
    return TooLarge("block_paged ", what, " (buffer ", i, ") byte size overflows u64");
  }
  if (actual != *expected) {
    return Invalid("block_paged ", what, " (buffer ", i, ") byte_size is ", actual,
                   "; the layout needs ", *expected);
  }
  return Status::Ok();
}

Status CheckBlockPaged(ElementType dtype, std::span<const uint64_t> shape, uint64_t byte_offset,
                       const BlockPagedLayout& layout, std::span<const BufferHandle> buffers,
                       const std::optional<QuantizationScheme>& quant) {
  FOLIO_RETURN_IF_ERROR(layout.ValidateAgainstShape(shape));
  if (byte_offset != 0) {
    return Invalid("block_paged byte_offset must be 0 (got ", byte_offset, ")");
  }
  // The caller checked the buffer count.
  for (uint64_t i = 1; i < buffers.size(); ++i) {
    if (buffers[i].device != buffers[0].device ||
        buffers[i].memory_class != buffers[0].memory_class) {
      return Invalid(
          "block_paged buffers share one device tag and memory "
          "class: buffer ",
          i, " has device ", Hex(static_cast<uint8_t>(buffers[i].device)), " class ",
          static_cast<int>(buffers[i].memory_class), ", buffer 0 has device ",
          Hex(static_cast<uint8_t>(buffers[0].device)), " class ",
          static_cast<int>(buffers[0].memory_class));
    }
  }
  FOLIO_ASSIGN_OR_RETURN(const uint64_t pool, layout.PoolElements(shape));
  FOLIO_RETURN_IF_ERROR(CheckBufferSize(wire::kPagePoolBuffer, "page_pool",
                                        buffers[wire::kPagePoolBuffer].byte_size,
                                        CheckedMul(pool, ElementTypeBytes(dtype))));
  const uint64_t index_bytes = IndexTypeBytes(layout.block_table_index_type());
  const uint64_t table_bytes = buffers[wire::kBlockTableBuffer].byte_size;
  if (table_bytes % index_bytes != 0) {
    return Invalid("block_paged block_table (buffer 1) byte_size ", table_bytes,
                   " is not a multiple of its ", IndexTypeName(layout.block_table_index_type()),
                   " entries");
  }
  FOLIO_RETURN_IF_ERROR(CheckBufferSize(wire::kSeqPtrBuffer, "seq_ptr",
                                        buffers[wire::kSeqPtrBuffer].byte_size,
                                        CheckedMul(uint64_t{layout.num_seqs()} + 1, index_bytes)));
  if (quant) {
    if (const auto* b = std::get_if<PerBlockAffine>(&*quant)) {
      // One scale per page slot, so a page shared by two sequences carries
      // its own scales.
      FOLIO_RETURN_IF_ERROR(CheckBufferSize(wire::kScaleBuffer, "per-block scales",
                                            buffers[wire::kScaleBuffer].byte_size,
                                            CheckedProduct({layout.num_pages(), layout.page_size(),
                                                            ElementTypeBytes(b->scale_type())})));
    }
  }
  return Status::Ok();
}

Status CheckQuantization(ElementType dtype, std::span<const uint64_t> shape, const Layout& layout,
                         const QuantizationScheme& q, uint32_t first_buffer) {
  if (!IsQuantizedStorage(dtype)) {
    return Invalid(SchemeName(q), " needs i8 or u8 storage (element type is ",
                   ElementTypeName(dtype), ")");
  }
  if (const auto* t = std::get_if<PerTensorAffine>(&q)) {
    const bool is_i8 = dtype == ElementType::kI8;
    const int32_t lo = is_i8 ? -128 : 0;
    const int32_t hi = is_i8 ? 127 : 255;
    if (t->zero_point() < lo || t->zero_point() > hi) {
      return Invalid(SchemeName(q), " zero_point ", t->zero_point(), " is outside the ",
                     ElementTypeName(dtype), " storage range [", lo, ", ", hi, "]");
    }
  }
  const std::optional<uint32_t> axis = std::visit(
      [](const auto& s) -> std::optional<uint32_t> {
        if constexpr (std::is_same_v<std::decay_t<decltype(s)>, PerTensorAffine>) {
          return std::nullopt;
        } else {
          return s.axis();
        }
      },
      q);
  if (const auto* paged = std::get_if<BlockPagedLayout>(&layout)) {
    FOLIO_RETURN_IF_ERROR(paged->ValidateQuantizationCompatibility(q));
  } else if (axis) {
    // Dense layouts size the scales from shape[axis], so it must be known.
    // (Block-paged scales follow the pool, num_pages * page_size slots, and
    // a page may hold fewer tokens than page_size: its compatibility rules
    // above govern instead.)
    if (*axis >= shape.size()) {
      return Invalid(SchemeName(q), " axis ", *axis, " is out of range for rank ", shape.size());
    }
    const uint64_t extent = shape[*axis];
    if (extent == wire::kDynamicDim) {
      return Invalid(SchemeName(q), " axis ", *axis,
                     " is a dynamic dimension; a quantized axis must be static");
    }
    const auto* block = std::get_if<PerBlockAffine>(&q);
    if (block && extent != 0 && block->block_size() > extent) {
      return Invalid(SchemeName(q), " block_size ", block->block_size(), " exceeds shape[", *axis,
                     "] = ", extent);
    }
  }
  const std::vector<uint32_t> refs = ReferencedBuffers(q);
  for (size_t i = 0; i < refs.size(); ++i) {
    const uint64_t want = uint64_t{first_buffer} + i;
    if (refs[i] != want) {
      return Invalid(SchemeName(q), i == 0 ? " scale_buffer " : " zero_point_buffer ", refs[i],
                     " must be buffer ", want, " (the buffer after the layout's data buffers",
                     i == 0 ? ")" : " and the scales)");
    }
  }
  return Status::Ok();
}

uint64_t LayoutFieldBytes(const Layout& layout, uint64_t rank) {
  if (std::holds_alternative<StridedLayout>(layout)) return 8 * rank;
  if (std::holds_alternative<BlockPagedLayout>(layout)) {
    return wire::kBlockPagedFieldBytes;
  }
  return 0;
}

Status Validate(ElementType dtype, std::span<const uint64_t> shape, uint64_t byte_offset,
                const Layout& layout, std::span<const BufferHandle> buffers,
                const std::optional<QuantizationScheme>& quant) {
  FOLIO_RETURN_IF_ERROR(ElementTypeFromTag(ElementTypeTag(dtype)).status());
  FOLIO_RETURN_IF_ERROR(CheckRank(shape.size()));
  if (buffers.size() > std::numeric_limits<uint8_t>::max()) {
    return TooLarge("buffer_count ", buffers.size(), " does not fit u8");
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    FOLIO_RETURN_IF_ERROR(CheckBuffer(i, buffers[i]));
  }
  const auto* strided = std::get_if<StridedLayout>(&layout);
  if (strided && shape.empty()) {
    return Invalid("strided layout needs rank >= 1 (got rank 0; a scalar is row-major)");
  }
  if (strided && strided->strides.size() != shape.size()) {
    return Invalid("strided layout has ", strided->strides.size(), " strides for rank ",
                   shape.size());
  }
  const bool paged = std::holds_alternative<BlockPagedLayout>(layout);
  if (paged) {
    FOLIO_RETURN_IF_ERROR(std::get<BlockPagedLayout>(layout).ValidateAgainstShape(shape));
  }
  const uint32_t data_buffers = paged ? BlockPagedLayout::buffer_count() : 1;
  uint64_t needed = data_buffers;
  if (quant) {
    FOLIO_RETURN_IF_ERROR(CheckQuantization(dtype, shape, layout, *quant, data_buffers));
    needed += ReferencedBuffers(*quant).size();
  }
  if (buffers.size() != needed) {
    return Invalid("buffer_count is ", buffers.size(), "; the ", LayoutName(layout), " layout",
                   quant ? StrCat(" with ", SchemeName(*quant)) : "", " needs ", needed);
  }
  if (paged) {
    FOLIO_RETURN_IF_ERROR(CheckBlockPaged(dtype, shape, byte_offset,
                                          std::get<BlockPagedLayout>(layout), buffers, quant));
  } else {
    FOLIO_RETURN_IF_ERROR(CheckDenseExtent(dtype, shape, strided ? &strided->strides : nullptr,
                                           byte_offset, buffers[0]));
  }
  // descriptor_length is a u32.
  const uint64_t rank = shape.size();
  const uint64_t size = wire::kFixedHeaderBytes + 8 * rank + 8 + LayoutFieldBytes(layout, rank) +
                        1 + wire::kBufferHandleBytes * buffers.size() +
                        (quant ? 4 + EncodeQuantization(*quant).size() : 0);
  if (size > std::numeric_limits<uint32_t>::max()) {
    return TooLarge("descriptor would be ", size, " bytes; descriptor_length is a u32");
  }
  return Status::Ok();
}

Result<BlockPagedLayout> ReadBlockPaged(internal::Reader& r) {
  uint32_t page_size = 0, paged_axis = 0, num_seqs = 0, layer_index = 0;
  uint64_t num_pages = 0;
  uint8_t kv_role = 0, index_type = 0;
  FOLIO_RETURN_IF_ERROR(r.Read("block_paged page_size", page_size));
  FOLIO_RETURN_IF_ERROR(r.Read("block_paged num_pages", num_pages));
  FOLIO_RETURN_IF_ERROR(r.Read("block_paged paged_axis", paged_axis));
  FOLIO_RETURN_IF_ERROR(r.Read("block_paged num_seqs", num_seqs));
  FOLIO_RETURN_IF_ERROR(r.Read("block_paged kv_role", kv_role));
  FOLIO_RETURN_IF_ERROR(r.Read("block_paged layer_index", layer_index));
  FOLIO_RETURN_IF_ERROR(r.Read("block_paged block_table_index_type", index_type));
  FOLIO_RETURN_IF_ERROR(r.ReadReserved("block_paged reserved", wire::kBlockPagedReservedBytes));
  if (kv_role > 2) {
    return Invalid("block_paged kv_role ", static_cast<int>(kv_role),
                   " is not 0 (key), 1 (value) or 2 (fused)");
  }
  if (index_type > 1) {
    return Invalid("block_paged block_table_index_type ", static_cast<int>(index_type),
                   " is not 0 (u32) or 1 (u64)");
  }
  return BlockPagedLayout::Create(
      page_size, num_pages, paged_axis, num_seqs, static_cast<KvRole>(kv_role),
      layer_index == wire::kNoLayerIndex ? std::nullopt : std::optional<uint32_t>(layer_index),
      static_cast<IndexType>(index_type));
}

Result<BufferHandle> ReadBuffer(internal::Reader& r, uint64_t i) {
  BufferHandle b;
  uint8_t device = 0, sync = 0, memory_class = 0;
  const std::string what = StrCat("buffer ", i);
  FOLIO_RETURN_IF_ERROR(r.Read(what, b.byte_size));
  FOLIO_RETURN_IF_ERROR(r.Read(what, b.alignment));
  FOLIO_RETURN_IF_ERROR(r.Read(what, device));
  FOLIO_RETURN_IF_ERROR(r.Read(what, sync));
  FOLIO_RETURN_IF_ERROR(r.Read(what, memory_class));
  FOLIO_RETURN_IF_ERROR(r.ReadReserved(StrCat(what, " reserved"), 1));
  // Range-checked here, before the casts: CheckBuffer names the value.
  if (device > 0x08) {
    return Invalid("buffer ", i, " device_tag ", Hex(device),
                   device == 0xFF ? " is invalid" : " is unknown");
  }
  if (sync > 2) {
    return Invalid("buffer ", i, " sync_mode ", static_cast<int>(sync), " is unknown (0..2)");
  }
  if (memory_class > 3) {
    return Invalid("buffer ", i, " memory_class ", static_cast<int>(memory_class),
                   " is unknown (0..3)");
  }
  b.device = static_cast<DeviceTag>(device);
  b.sync_mode = static_cast<SyncMode>(sync);
  b.memory_class = static_cast<MemoryClass>(memory_class);
  return b;
}

}  // namespace

uint8_t LayoutTag(const Layout& layout) {
  return std::visit([](const auto& l) { return l.tag(); }, layout);
}
std::string_view LayoutName(const Layout& layout) {
  return std::visit([](const auto& l) { return l.name(); }, layout);
}

Result<TensorDescriptor> TensorDescriptor::Create(ElementType dtype, std::vector<uint64_t> shape,
                                                  uint64_t byte_offset, Layout layout,
                                                  std::vector<BufferHandle> buffers,
                                                  std::optional<QuantizationScheme> quantization) {
  FOLIO_RETURN_IF_ERROR(Validate(dtype, shape, byte_offset, layout, buffers, quantization));
  return TensorDescriptor(dtype, std::move(shape), byte_offset, std::move(layout),
                          std::move(buffers), std::move(quantization));
}

Result<TensorDescriptor> TensorDescriptor::FromBytes(std::span<const std::byte> bytes) {
  internal::Reader r(bytes);
  std::span<const std::byte> magic;
  FOLIO_RETURN_IF_ERROR(r.Take("magic", 4, magic));
  if (std::memcmp(magic.data(), wire::kMagic, 4) != 0) {
    return Invalid("bad magic ", Hex(static_cast<uint8_t>(magic[0])), " ",
                   Hex(static_cast<uint8_t>(magic[1])), " ", Hex(static_cast<uint8_t>(magic[2])),
                   " ", Hex(static_cast<uint8_t>(magic[3])),
                   "; a Hurray descriptor starts with 'HRRY'");
  }
  uint8_t major = 0, minor = 0, dtype_tag = 0, layout_tag = 0;
  uint32_t length = 0, flags = 0, rank = 0;
  FOLIO_RETURN_IF_ERROR(r.Read("version_major", major));
  FOLIO_RETURN_IF_ERROR(r.Read("version_minor", minor));
  FOLIO_RETURN_IF_ERROR(r.Read("descriptor_length", length));
  FOLIO_RETURN_IF_ERROR(r.Read("flags", flags));
  FOLIO_RETURN_IF_ERROR(r.Read("element type", dtype_tag));
  FOLIO_RETURN_IF_ERROR(r.Read("layout tag", layout_tag));
  FOLIO_RETURN_IF_ERROR(r.Read("rank", rank));
  if (major != wire::kVersionMajor || minor != wire::kVersionMinor) {
    return Unsupported("descriptor version ", static_cast<int>(major), ".", static_cast<int>(minor),
                       " is not supported (folio reads 1.0)");
  }
  if (length != bytes.size()) {
    return Invalid("descriptor_length is ", length, " but the descriptor has ", bytes.size(),
                   " bytes");
  }
  FOLIO_ASSIGN_OR_RETURN(const ElementType dtype, ElementTypeFromTag(dtype_tag));
  FOLIO_RETURN_IF_ERROR(CheckLayoutTag(layout_tag));
  FOLIO_RETURN_IF_ERROR(CheckFlags(flags, layout_tag));
  FOLIO_RETURN_IF_ERROR(CheckRank(rank));

  // Bounded by the input before anything is sized from it.
  FOLIO_RETURN_IF_ERROR(r.Need(StrCat("shape of rank ", rank), 8 * uint64_t{rank}));
  std::vector<uint64_t> shape(rank);
  for (uint64_t& d : shape) FOLIO_RETURN_IF_ERROR(r.Read("shape", d));
  uint64_t byte_offset = 0;
  FOLIO_RETURN_IF_ERROR(r.Read("byte_offset", byte_offset));

  Layout layout;
  if (layout_tag == wire::kLayoutStrided) {
    FOLIO_RETURN_IF_ERROR(r.Need("strides", 8 * uint64_t{rank}));
    StridedLayout strided;
    strided.strides.resize(rank);
    for (int64_t& s : strided.strides) {
      uint64_t bits = 0;
      FOLIO_RETURN_IF_ERROR(r.Read("stride", bits));
      s = static_cast<int64_t>(bits);
    }
    layout = std::move(strided);
  } else if (layout_tag == wire::kLayoutBlockPaged) {
    FOLIO_ASSIGN_OR_RETURN(layout, ReadBlockPaged(r));
  }

  uint8_t buffer_count = 0;
  FOLIO_RETURN_IF_ERROR(r.Read("buffer_count", buffer_count));
  FOLIO_RETURN_IF_ERROR(r.Need(StrCat("buffer table of ", int{buffer_count}, " handles"),
                               wire::kBufferHandleBytes * buffer_count));
  std::vector<BufferHandle> buffers;
  buffers.reserve(buffer_count);
  for (uint64_t i = 0; i < buffer_count; ++i) {
    FOLIO_ASSIGN_OR_RETURN(BufferHandle b, ReadBuffer(r, i));
    buffers.push_back(b);
  }

  std::optional<QuantizationScheme> quant;
  if ((flags & wire::kFlagQuantization) != 0) {
    uint32_t quant_length = 0;
    FOLIO_RETURN_IF_ERROR(r.Read("quantization_length", quant_length));
    std::span<const std::byte> quant_bytes;
    FOLIO_RETURN_IF_ERROR(r.Take("quantization descriptor", quant_length, quant_bytes));
    FOLIO_ASSIGN_OR_RETURN(quant, DecodeQuantization(quant_bytes));
  }
  if (r.remaining() != 0) {
    return Invalid(r.remaining(),
                   " trailing bytes after the last section (at "
                   "byte ",
                   r.pos(), " of ", bytes.size(), ")");
  }
  return Create(dtype, std::move(shape), byte_offset, std::move(layout), std::move(buffers),
                std::move(quant));
}

uint64_t TensorDescriptor::encoded_size() const {
  return wire::kFixedHeaderBytes + 8 * rank() + 8 + LayoutFieldBytes(layout_, rank()) + 1 +
         wire::kBufferHandleBytes * buffers_.size() +
         (quantization_ ? 4 + EncodeQuantization(*quantization_).size() : 0);
}

std::vector<std::byte> TensorDescriptor::ToBytes() const {
  internal::Writer w;
  const uint64_t size = encoded_size();
  w.bytes().reserve(size);
  for (uint8_t m : wire::kMagic) w.Put(m);
  w.Put(wire::kVersionMajor);
  w.Put(wire::kVersionMinor);
  w.Put(static_cast<uint32_t>(size));  // Create checked it fits
  w.Put(quantization_ ? wire::kFlagQuantization : uint32_t{0});
  w.Put(ElementTypeTag(dtype_));
  w.Put(LayoutTag(layout_));
  w.Put(static_cast<uint32_t>(rank()));
  for (uint64_t d : shape_) w.Put(d);
  w.Put(byte_offset_);
  if (const auto* s = std::get_if<StridedLayout>(&layout_)) {
    for (int64_t stride : s->strides) w.Put(static_cast<uint64_t>(stride));
  } else if (const auto* p = std::get_if<BlockPagedLayout>(&layout_)) {
    w.Put(p->page_size());
    w.Put(p->num_pages());
    w.Put(p->paged_axis());
    w.Put(p->num_seqs());
    w.Put(static_cast<uint8_t>(p->kv_role()));
    w.Put(p->layer_index().value_or(wire::kNoLayerIndex));
    w.Put(static_cast<uint8_t>(p->block_table_index_type()));
    w.PutZeros(wire::kBlockPagedReservedBytes);
  }
  w.Put(static_cast<uint8_t>(buffers_.size()));
  for (const BufferHandle& b : buffers_) {
    w.Put(b.byte_size);
    w.Put(b.alignment);
    w.Put(static_cast<uint8_t>(b.device));
    w.Put(static_cast<uint8_t>(b.sync_mode));
    w.Put(static_cast<uint8_t>(b.memory_class));
    w.PutZeros(1);
  }
  if (quantization_) {
    const std::vector<std::byte> q = EncodeQuantization(*quantization_);
    w.Put(static_cast<uint32_t>(q.size()));
    w.PutBytes(q);
  }
  FOLIO_CHECK(w.size() == size, "encoded ", w.size(), " bytes, expected ", size);
  return std::move(w.bytes());
}

}  // namespace folio::format
