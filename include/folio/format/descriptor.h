// TensorDescriptor: a self-describing Hurray tensor descriptor
// (docs/spec/hurray-descriptor.md), the unit of folio's interchange format.
//
// A descriptor names a tensor's element type, shape, layout and the buffers
// that hold it, and optionally how it is quantized; it does not hold the
// buffers' bytes. folio reads and writes the parts of Hurray listed in the
// spec page: fixed header, shape, byte_offset, the row-major (0x01),
// strided (0x03) and block-paged (0x0A) layouts, the buffer table and the
// quantization section. Anything else (another layout or element type, a
// shard, statistics, extension-type or composite-member section) is
// refused with an error naming it, never skipped.
//
// Every TensorDescriptor that exists is valid: Create and FromBytes run the
// same checks, so ToBytes cannot fail and FromBytes(x)->ToBytes() == x for
// every x that FromBytes accepts.
#ifndef FOLIO_FORMAT_DESCRIPTOR_H_
#define FOLIO_FORMAT_DESCRIPTOR_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "folio/core/status.h"
#include "folio/format/block_paged_layout.h"
#include "folio/format/element_type.h"
#include "folio/format/quantization.h"

namespace folio::format {

// Where a buffer lives. Values are the wire tags.
enum class DeviceTag : uint8_t {
  kCpu = 0x00,
  kCuda = 0x01,
  kRocm = 0x02,
  kMetal = 0x03,
  kVulkan = 0x04,
  kWebGpu = 0x05,
  kHexagon = 0x06,
  kLevelZero = 0x07,
  kOpenCl = 0x08,
};
enum class SyncMode : uint8_t {
  kProducerSynced = 0,
  kEvent = 1,
  kConsumerStream = 2,
};
enum class MemoryClass : uint8_t {
  kStandard = 0,
  kHostPinned = 1,
  kUnified = 2,
  kPeer = 3,
};

// One entry of the buffer table (16 bytes on the wire).
struct BufferHandle {
  uint64_t byte_size = 0;
  // A power of two; >= 64 when byte_size > 0.
  uint32_t alignment = 64;
  DeviceTag device = DeviceTag::kCpu;
  SyncMode sync_mode = SyncMode::kProducerSynced;
  MemoryClass memory_class = MemoryClass::kStandard;
  friend bool operator==(const BufferHandle&, const BufferHandle&) = default;
};

// Dense layouts. Row-major has no fields; strided has one stride per
// dimension, in elements (may be negative or zero).
struct RowMajorLayout {
  static constexpr uint8_t tag() { return 0x01; }
  static constexpr std::string_view name() { return "row_major"; }
  friend bool operator==(const RowMajorLayout&, const RowMajorLayout&) = default;
};
struct StridedLayout {
  static constexpr uint8_t tag() { return 0x03; }
  static constexpr std::string_view name() { return "strided"; }
  std::vector<int64_t> strides;  // [rank]
  friend bool operator==(const StridedLayout&, const StridedLayout&) = default;
};

using Layout = std::variant<RowMajorLayout, StridedLayout, BlockPagedLayout>;
uint8_t LayoutTag(const Layout& layout);
std::string_view LayoutName(const Layout& layout);

class TensorDescriptor {
 public:
  // Validates and builds a descriptor. The rules (each failure names the
  // field and value; docs/spec/hurray-descriptor.md lists them):
  //  - rank <= 64;
  //  - dense layouts: buffer 0 holds the data; byte_offset plus the extent
  //    the shape and strides reach, in bytes, lies inside buffer 0 (not
  //    checked where a dimension is dynamic); a strided layout has rank >= 1,
  //    `rank` strides and never reaches below the buffer's start;
  //  - block-paged: rank 3 (BlockPagedLayout::ValidateAgainstShape),
  //    byte_offset 0, buffer sizes as the layout's formula, one device tag
  //    and memory class for all buffers;
  //  - quantization: i8/u8 storage; a per-tensor zero point inside the
  //    storage type's range; axis < rank; with a dense layout shape[axis]
  //    static and a per-block block_size <= shape[axis] unless that is 0;
  //    the scheme's buffers exist and follow the data buffers in order
  //    (scales, then zero points); with block-paged, the compatibility rules
  //    and scales at 3, zero points at 4;
  //  - the buffer count is exactly what layout and scheme need; every
  //    buffer's alignment is a power of two, >= 64 when non-empty; a CPU
  //    buffer is producer-synced (sync_mode 0);
  //  - the encoding fits in u32 descriptor_length.
  static Result<TensorDescriptor> Create(
      ElementType dtype, std::vector<uint64_t> shape, uint64_t byte_offset, Layout layout,
      std::vector<BufferHandle> buffers,
      std::optional<QuantizationScheme> quantization = std::nullopt);

  // Decodes one descriptor that fills `bytes` exactly. The input is
  // untrusted: every length, count and offset is bounded by the bytes that
  // remain before it is used, and no allocation is sized from an unchecked
  // field. Errors: InvalidArgument for a malformed or invalid descriptor
  // (truncated, bad magic or version, length mismatch, unknown tag or flag,
  // non-zero reserved bytes, any rule of Create), Unimplemented for a valid
  // Hurray feature folio does not support, OutOfRange where a size or
  // offset exceeds a limit. Messages name the field, its byte offset where
  // it has one, and the value.
  static Result<TensorDescriptor> FromBytes(std::span<const std::byte> bytes);

  std::vector<std::byte> ToBytes() const;
  // Size of ToBytes(), descriptor_length on the wire.
  uint64_t encoded_size() const;

  ElementType dtype() const { return dtype_; }
  std::span<const uint64_t> shape() const { return shape_; }
  uint64_t rank() const { return shape_.size(); }
  uint64_t byte_offset() const { return byte_offset_; }
  const Layout& layout() const { return layout_; }
  std::span<const BufferHandle> buffers() const { return buffers_; }
  const std::optional<QuantizationScheme>& quantization() const { return quantization_; }

  friend bool operator==(const TensorDescriptor&, const TensorDescriptor&) = default;

 private:
  TensorDescriptor(ElementType dtype, std::vector<uint64_t> shape, uint64_t byte_offset,
                   Layout layout, std::vector<BufferHandle> buffers,
                   std::optional<QuantizationScheme> quantization)
      : dtype_(dtype),
        shape_(std::move(shape)),
        byte_offset_(byte_offset),
        layout_(std::move(layout)),
        buffers_(std::move(buffers)),
        quantization_(std::move(quantization)) {}

  ElementType dtype_;
  std::vector<uint64_t> shape_;  // [rank]; kDynamicDim = dynamic
  uint64_t byte_offset_;
  Layout layout_;
  std::vector<BufferHandle> buffers_;  // [buffer_count]
  std::optional<QuantizationScheme> quantization_;
};

}  // namespace folio::format

#endif  // FOLIO_FORMAT_DESCRIPTOR_H_
