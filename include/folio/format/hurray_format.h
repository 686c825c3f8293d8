// Wire constants of the Hurray tensor descriptor
// (docs/spec/hurray-descriptor.md).
//
// One place for every number the encoding uses: offsets and sizes of the
// fixed parts, flag bits, and the tags folio reads and writes. All integers
// on the wire are little-endian with no padding.
#ifndef FOLIO_FORMAT_HURRAY_FORMAT_H_
#define FOLIO_FORMAT_HURRAY_FORMAT_H_

#include <cstdint>

namespace folio::format::wire {

// Fixed header (20 bytes):
//   0 magic "HRRY" | 4 version_major u8 | 5 version_minor u8 |
//   6 descriptor_length u32 | 10 flags u32 | 14 element type u8 |
//   15 layout tag u8 | 16 rank u32
inline constexpr uint8_t kMagic[4] = {0x48, 0x52, 0x52, 0x59};  // "HRRY"
inline constexpr uint8_t kVersionMajor = 1;
inline constexpr uint8_t kVersionMinor = 0;
inline constexpr uint64_t kFixedHeaderBytes = 20;

// Header flags: which optional sections follow the buffer table.
inline constexpr uint32_t kFlagQuantization = 1u << 0;
inline constexpr uint32_t kFlagShard = 1u << 1;
inline constexpr uint32_t kFlagExtensionType = 1u << 2;
inline constexpr uint32_t kFlagStatistics = 1u << 3;
inline constexpr uint32_t kFlagCompositeMember = 1u << 4;
inline constexpr uint32_t kKnownFlags = 0x1Fu;  // bits 5..31 must be zero

// Writers MUST NOT emit, and readers MUST refuse, a rank above this.
inline constexpr uint32_t kMaxRank = 64;

// shape: u64[rank]; this value marks a dynamic dimension.
inline constexpr uint64_t kDynamicDim = UINT64_MAX;

// Buffer table: u8 buffer_count, then per buffer
//   byte_size u64 | alignment u32 | device_tag u8 | sync_mode u8 |
//   memory_class u8 | reserved u8
inline constexpr uint64_t kBufferHandleBytes = 16;
inline constexpr uint32_t kMinNonEmptyAlignment = 64;

// Block-paged layout fields (32 bytes):
//   page_size u32 | num_pages u64 | paged_axis u32 | num_seqs u32 |
//   kv_role u8 | layer_index u32 | block_table_index_type u8 | reserved[6]
inline constexpr uint64_t kBlockPagedFieldBytes = 32;
inline constexpr uint64_t kBlockPagedReservedBytes = 6;
inline constexpr uint32_t kNoLayerIndex = 0xFFFFFFFFu;
inline constexpr uint32_t kBlockPagedRank = 3;
// Buffer indices of a block-paged tensor.
inline constexpr uint32_t kPagePoolBuffer = 0;
inline constexpr uint32_t kBlockTableBuffer = 1;
inline constexpr uint32_t kSeqPtrBuffer = 2;
inline constexpr uint32_t kScaleBuffer = 3;
inline constexpr uint32_t kZeroPointBuffer = 4;

// Quantization section: u32 quantization_length, then the scheme:
//   scheme_tag u8 | scheme_version u8 | flags u16 | fields
inline constexpr uint64_t kQuantHeaderBytes = 4;
inline constexpr uint8_t kQuantSchemeVersion = 1;
inline constexpr uint16_t kQuantFlagSymmetric = 1u << 0;
inline constexpr uint32_t kNoZeroPointBuffer = 0xFFFFFFFFu;
inline constexpr uint8_t kSchemePerTensorAffine = 0x01;
inline constexpr uint8_t kSchemePerChannelAffine = 0x02;
inline constexpr uint8_t kSchemePerBlockAffine = 0x03;
// Total bytes of each scheme, header included.
inline constexpr uint64_t kPerTensorAffineBytes = 16;
inline constexpr uint64_t kPerChannelAffineBytes = 20;
inline constexpr uint64_t kPerBlockAffineBytes = 24;

// Layout tags.
inline constexpr uint8_t kLayoutRowMajor = 0x01;
inline constexpr uint8_t kLayoutColumnMajor = 0x02;
inline constexpr uint8_t kLayoutStrided = 0x03;
inline constexpr uint8_t kLayoutBlockPaged = 0x0A;

}  // namespace folio::format::wire

#endif  // FOLIO_FORMAT_HURRAY_FORMAT_H_
