#include "folio/format/descriptor.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "folio/format/hurray_format.h"
#include "test_bytes.h"

namespace folio::format {
namespace {

using namespace testing;  // NOLINT

void ExpectRefused(const Bytes& b, StatusCode code, std::string_view needle) {
  auto r = TensorDescriptor::FromBytes(b);
  ASSERT_FALSE(r.ok()) << "accepted; wanted an error containing " << needle;
  EXPECT_EQ(r.error().code(), code) << r.error().ToString();
  EXPECT_NE(r.error().message().find(needle), std::string::npos) << r.error().ToString();
}

Bytes Patch(Bytes b, size_t offset, const Bytes& with) {
  for (size_t i = 0; i < with.size(); ++i) b.at(offset + i) = with[i];
  return b;
}

// --- Golden encodings, written field by field from the spec ---

// The spec's worked size check: f32 [3, 4], row-major, one 192-byte CPU
// buffer, 61 bytes.
const Bytes kRowMajor = Finish(Join({
    Header(0, 0x03, 0x01, 2), U64(3), U64(4),  // shape
    U64(0),                                    // byte_offset
    U8(1), Buffer(192),                        // buffer table
}));
// Offsets into kRowMajor.
constexpr size_t kDenseByteOffset = 36;
constexpr size_t kDenseBuffer0 = 45;

// The spec's addressing geometry as a snapshot: f16, page_size 4,
// num_pages 5, 2 heads, head_dim 8, 2 sequences, values of layer 7.
const Bytes kPaged = Finish(Join({
    Header(0, 0x01, 0x0A, 3),
    U64(12),
    U64(2),
    U64(8),  // shape
    U64(0),  // byte_offset
    U32(4),
    U64(5),
    U32(0),
    U32(2),  // page_size..num_seqs
    U8(1),
    U32(7),
    U8(0),
    Zeros(6),  // role, layer, u32
    U8(3),
    Buffer(5 * 4 * 2 * 8 * 2),
    Buffer(3 * 4),
    Buffer(3 * 4),
}));
// Offsets into kPaged.
constexpr size_t kPagedByteOffset = 44;
constexpr size_t kPagedPageSize = 52;
constexpr size_t kPagedNumPages = 56;
constexpr size_t kPagedAxis = 64;
constexpr size_t kPagedRole = 72;
constexpr size_t kPagedLayer = 73;
constexpr size_t kPagedIndexType = 77;
constexpr size_t kPagedReserved = 78;
constexpr size_t kPagedBuffer0 = 85;
constexpr size_t kPagedBuffer1 = 101;
constexpr size_t kPagedBuffer2 = 117;

// i8 pool quantized per block (one f32 scale per page slot) with zero
// points: five buffers.
const Bytes kPagedQuantized = Finish(Join({
    Header(wire::kFlagQuantization, 0x10, 0x0A, 3),
    U64(12),
    U64(2),
    U64(8),
    U64(0),
    U32(4),
    U64(5),
    U32(0),
    U32(2),
    U8(0),
    U32(0xFFFFFFFFu),
    U8(1),
    Zeros(6),
    U8(5),
    Buffer(5 * 4 * 2 * 8),
    Buffer(3 * 8),
    Buffer(3 * 8),
    Buffer(5 * 4 * 4),
    Buffer(5 * 4),
    U32(24),
    FromHex("03 01 0000"),
    U32(0),
    U32(4),
    U32(3),
    U32(4),
    U8(0x03),
    Zeros(3),
}));

TEST(DescriptorGolden, RowMajorIsTheSpecs61Bytes) {
  ASSERT_EQ(kRowMajor.size(), 61u);
  auto d = TensorDescriptor::FromBytes(kRowMajor);
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  EXPECT_EQ(d->dtype(), ElementType::kF32);
  EXPECT_EQ(std::vector<uint64_t>(d->shape().begin(), d->shape().end()),
            std::vector<uint64_t>({3, 4}));
  EXPECT_TRUE(std::holds_alternative<RowMajorLayout>(d->layout()));
  ASSERT_EQ(d->buffers().size(), 1u);
  EXPECT_EQ(d->buffers()[0].byte_size, 192u);
  EXPECT_EQ(d->buffers()[0].alignment, 64u);
  EXPECT_EQ(d->buffers()[0].device, DeviceTag::kCpu);
  EXPECT_FALSE(d->quantization().has_value());
  EXPECT_EQ(d->encoded_size(), 61u);
  EXPECT_EQ(d->ToBytes(), kRowMajor);
}

TEST(DescriptorGolden, CreateEncodesTheRowMajorExample) {
  auto d =
      TensorDescriptor::Create(ElementType::kF32, {3, 4}, 0, RowMajorLayout{}, {BufferHandle{192}});
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  EXPECT_EQ(d->ToBytes(), kRowMajor);
}

TEST(DescriptorGolden, Scalar) {
  const Bytes b =
      Finish(Join({Header(0, 0x04, 0x01, 0), U64(8), U8(1), Buffer(16, 128, 0x01, 2, 1)}));
  ASSERT_EQ(b.size(), 20u + 8 + 1 + 16);
  auto d = TensorDescriptor::FromBytes(b);
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  EXPECT_EQ(d->rank(), 0u);
  EXPECT_EQ(d->byte_offset(), 8u);
  EXPECT_EQ(d->buffers()[0].device, DeviceTag::kCuda);
  EXPECT_EQ(d->buffers()[0].sync_mode, SyncMode::kConsumerStream);
  EXPECT_EQ(d->buffers()[0].memory_class, MemoryClass::kHostPinned);
  EXPECT_EQ(d->ToBytes(), b);
}

TEST(DescriptorGolden, StridedTranspose) {
  // u8 [4, 3] viewing a row-major [3, 4] buffer transposed.
  const Bytes b = Finish(
      Join({Header(0, 0x11, 0x03, 2), U64(4), U64(3), U64(0), U64(1), U64(4), U8(1), Buffer(12)}));
  auto d = TensorDescriptor::FromBytes(b);
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  EXPECT_EQ(std::get<StridedLayout>(d->layout()).strides, std::vector<int64_t>({1, 4}));
  EXPECT_EQ(d->ToBytes(), b);
}

TEST(DescriptorGolden, StridedNegativeStride) {
  // i32 [4] reversed: starts at the last element, stride -1.
  const Bytes b = Finish(Join({Header(0, 0x14, 0x03, 1), U64(4), U64(12),
                               U64(static_cast<uint64_t>(int64_t{-1})), U8(1), Buffer(16)}));
  auto d = TensorDescriptor::FromBytes(b);
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  EXPECT_EQ(std::get<StridedLayout>(d->layout()).strides[0], -1);
  EXPECT_EQ(d->ToBytes(), b);
}

TEST(DescriptorGolden, BlockPaged) {
  ASSERT_EQ(kPaged.size(), 20u + 24 + 8 + 32 + 1 + 48);
  auto d = TensorDescriptor::FromBytes(kPaged);
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  const auto& l = std::get<BlockPagedLayout>(d->layout());
  EXPECT_EQ(l.page_size(), 4u);
  EXPECT_EQ(l.num_pages(), 5u);
  EXPECT_EQ(l.num_seqs(), 2u);
  EXPECT_EQ(l.kv_role(), KvRole::kValue);
  EXPECT_EQ(l.layer_index(), 7u);
  EXPECT_EQ(l.block_table_index_type(), IndexType::kU32);
  EXPECT_EQ(d->ToBytes(), kPaged);
}

TEST(DescriptorGolden, CreateEncodesTheBlockPagedExample) {
  auto l = BlockPagedLayout::Create(4, 5, 0, 2, KvRole::kValue, 7);
  ASSERT_TRUE(l.ok());
  auto d = TensorDescriptor::Create(ElementType::kF16, {12, 2, 8}, 0, *l,
                                    {BufferHandle{640}, BufferHandle{12}, BufferHandle{12}});
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  EXPECT_EQ(d->ToBytes(), kPaged);
}

TEST(DescriptorGolden, BlockPagedQuantizedPerBlockWithZeroPoints) {
  auto d = TensorDescriptor::FromBytes(kPagedQuantized);
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  const auto& l = std::get<BlockPagedLayout>(d->layout());
  EXPECT_FALSE(l.layer_index().has_value());
  EXPECT_EQ(l.block_table_index_type(), IndexType::kU64);
  ASSERT_TRUE(d->quantization().has_value());
  const auto& q = std::get<PerBlockAffine>(*d->quantization());
  EXPECT_EQ(q.block_size(), 4u);
  EXPECT_EQ(q.zero_point_buffer_index(), 4u);
  EXPECT_EQ(d->buffers().size(), 5u);
  EXPECT_EQ(d->ToBytes(), kPagedQuantized);
}

TEST(DescriptorGolden, BlockPagedPerTensorKeepsThreeBuffers) {
  auto l = BlockPagedLayout::Create(4, 5, 0, 2);
  auto d = TensorDescriptor::Create(ElementType::kU8, {12, 2, 8}, 0, *l,
                                    {BufferHandle{320}, BufferHandle{12}, BufferHandle{12}},
                                    *PerTensorAffine::Create(0.125f, 128));
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  auto back = TensorDescriptor::FromBytes(d->ToBytes());
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_EQ(*back, *d);
}

TEST(DescriptorGolden, EmptyBatchSnapshot) {
  auto l = BlockPagedLayout::Create(16, 0, 0, 0);
  auto d = TensorDescriptor::Create(ElementType::kBF16, {0, 4, 64}, 0, *l,
                                    {BufferHandle{0, 1}, BufferHandle{0, 1}, BufferHandle{4}});
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  EXPECT_EQ(*TensorDescriptor::FromBytes(d->ToBytes()), *d);
}

// --- Header refusals ---

TEST(DescriptorRefuses, Empty) {
  ExpectRefused({}, StatusCode::kInvalidArgument,
                "truncated descriptor: magic at byte 0 needs 4 bytes, 0 remain");
}

TEST(DescriptorRefuses, BadMagic) {
  ExpectRefused(Patch(kRowMajor, 0, FromHex("48525258")), StatusCode::kInvalidArgument,
                "bad magic 0x48 0x52 0x52 0x58");
}

TEST(DescriptorRefuses, TruncatedHeader) {
  ExpectRefused(Bytes(kRowMajor.begin(), kRowMajor.begin() + 15), StatusCode::kInvalidArgument,
                "truncated descriptor: layout tag at byte 15");
}

TEST(DescriptorRefuses, OtherMajorVersion) {
  ExpectRefused(Patch(kRowMajor, 4, U8(2)), StatusCode::kUnimplemented,
                "descriptor version 2.0 is not supported");
}

TEST(DescriptorRefuses, OtherMinorVersion) {
  ExpectRefused(Patch(kRowMajor, 5, U8(1)), StatusCode::kUnimplemented, "descriptor version 1.1");
}

TEST(DescriptorRefuses, LengthShorterThanInput) {
  ExpectRefused(Patch(kRowMajor, 6, U32(60)), StatusCode::kInvalidArgument,
                "descriptor_length is 60 but the descriptor has 61 bytes");
}

TEST(DescriptorRefuses, LengthLongerThanInput) {
  ExpectRefused(Patch(kRowMajor, 6, U32(0xFFFFFFFFu)), StatusCode::kInvalidArgument,
                "descriptor_length is 4294967295");
}

TEST(DescriptorRefuses, UndefinedFlagBits) {
  ExpectRefused(Patch(kRowMajor, 10, U32(1u << 5)), StatusCode::kInvalidArgument,
                "undefined bits 0x00000020");
}

TEST(DescriptorRefuses, ShardSection) {
  ExpectRefused(Patch(kRowMajor, 10, U32(wire::kFlagShard)), StatusCode::kUnimplemented,
                "shard section (flags bit1)");
}

TEST(DescriptorRefuses, ShardSectionWithBlockPaged) {
  ExpectRefused(Patch(kPaged, 10, U32(wire::kFlagShard)), StatusCode::kInvalidArgument,
                "shard section (flags bit1) is not allowed with the "
                "block-paged layout");
}

TEST(DescriptorRefuses, ExtensionTypeSection) {
  ExpectRefused(Patch(kRowMajor, 10, U32(wire::kFlagExtensionType)), StatusCode::kUnimplemented,
                "extension type section");
}

TEST(DescriptorRefuses, StatisticsSection) {
  ExpectRefused(Patch(kRowMajor, 10, U32(wire::kFlagStatistics)), StatusCode::kUnimplemented,
                "statistics section (flags bit3)");
}

TEST(DescriptorRefuses, CompositeMemberSection) {
  ExpectRefused(Patch(kRowMajor, 10, U32(wire::kFlagCompositeMember)), StatusCode::kUnimplemented,
                "composite member section");
}

TEST(DescriptorRefuses, UnsupportedElementTypes) {
  ExpectRefused(Patch(kRowMajor, 14, U8(0x12)), StatusCode::kUnimplemented,
                "element type i16 (0x12) is not supported");
  ExpectRefused(Patch(kRowMajor, 14, U8(0x40)), StatusCode::kUnimplemented,
                "element type f8e4m3 (0x40)");
  ExpectRefused(Patch(kRowMajor, 14, U8(0x51)), StatusCode::kUnimplemented, "c128");
  ExpectRefused(Patch(kRowMajor, 14, U8(0xF3)), StatusCode::kUnimplemented,
                "element type 0xf3 is an extension type");
}

TEST(DescriptorRefuses, InvalidElementTypes) {
  ExpectRefused(Patch(kRowMajor, 14, U8(0x00)), StatusCode::kInvalidArgument,
                "element type tag 0x00 is invalid");
  ExpectRefused(Patch(kRowMajor, 14, U8(0xFF)), StatusCode::kInvalidArgument,
                "element type tag 0xff is invalid");
  ExpectRefused(Patch(kRowMajor, 14, U8(0x30)), StatusCode::kInvalidArgument,
                "unknown element type tag 0x30");
}

TEST(DescriptorRefuses, UnsupportedLayouts) {
  ExpectRefused(Patch(kRowMajor, 15, U8(0x02)), StatusCode::kUnimplemented,
                "layout column-major (0x02) is not supported");
  ExpectRefused(Patch(kRowMajor, 15, U8(0x07)), StatusCode::kUnimplemented, "layout CSR (0x07)");
  ExpectRefused(Patch(kRowMajor, 15, U8(0x0B)), StatusCode::kUnimplemented,
                "layout composite (0x0b)");
  ExpectRefused(Patch(kRowMajor, 15, U8(0x40)), StatusCode::kUnimplemented,
                "layout Hilbert (0x40)");
  ExpectRefused(Patch(kRowMajor, 15, U8(0xF0)), StatusCode::kUnimplemented,
                "layout tag 0xf0 is a private layout");
}

TEST(DescriptorRefuses, InvalidLayoutTags) {
  ExpectRefused(Patch(kRowMajor, 15, U8(0x00)), StatusCode::kInvalidArgument,
                "layout tag 0x00 is invalid");
  ExpectRefused(Patch(kRowMajor, 15, U8(0xFF)), StatusCode::kInvalidArgument,
                "layout tag 0xff is invalid");
  ExpectRefused(Patch(kRowMajor, 15, U8(0x80)), StatusCode::kInvalidArgument,
                "layout tag 0x80 is reserved");
  ExpectRefused(Patch(kRowMajor, 15, U8(0x0C)), StatusCode::kInvalidArgument,
                "unknown layout tag 0x0c");
}

TEST(DescriptorRefuses, HugeRankWithoutTheBytes) {
  // No allocation sized from the rank: the bytes are counted first.
  ExpectRefused(Patch(kRowMajor, 16, U32(64)), StatusCode::kInvalidArgument,
                "truncated descriptor: shape of rank 64 at byte 20 "
                "needs 512 bytes, 41 remain");
}

TEST(DescriptorRefuses, RankAbove64) {
  // Readers MUST refuse it, before anything is read or sized from it.
  ExpectRefused(Patch(kRowMajor, 16, U32(65)), StatusCode::kInvalidArgument,
                "rank 65 exceeds the maximum of 64");
  ExpectRefused(Patch(kRowMajor, 16, U32(0xFFFFFFFFu)), StatusCode::kInvalidArgument,
                "rank 4294967295 exceeds the maximum of 64");
  // Writers MUST NOT emit it.
  auto d = TensorDescriptor::Create(ElementType::kU8, std::vector<uint64_t>(65, 1), 0,
                                    RowMajorLayout{}, {BufferHandle{64}});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("rank 65 exceeds the maximum of 64"), std::string::npos)
      << d.error().ToString();
}

TEST(DescriptorAccepts, Rank64) {
  auto d = TensorDescriptor::Create(ElementType::kU8, std::vector<uint64_t>(64, 1), 0,
                                    RowMajorLayout{}, {BufferHandle{64}});
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  EXPECT_EQ(*TensorDescriptor::FromBytes(d->ToBytes()), *d);
}

TEST(DescriptorRefuses, TrailingBytes) {
  Bytes b = kRowMajor;
  b.push_back(std::byte{0});
  ExpectRefused(Finish(b), StatusCode::kInvalidArgument,
                "1 trailing bytes after the last section (at byte 61 of 62)");
}

TEST(DescriptorRefuses, TruncatedBufferTable) {
  Bytes b(kRowMajor.begin(), kRowMajor.end() - 1);
  ExpectRefused(Finish(b), StatusCode::kInvalidArgument,
                "truncated descriptor: buffer table of 1 handles at byte 45 "
                "needs 16 bytes, 15 remain");
}

// --- Buffer table ---

TEST(DescriptorRefuses, AlignmentNotAPowerOfTwo) {
  ExpectRefused(Patch(kRowMajor, kDenseBuffer0 + 8, U32(96)), StatusCode::kInvalidArgument,
                "buffer 0 alignment 96 is not a power of two");
  ExpectRefused(Patch(kRowMajor, kDenseBuffer0 + 8, U32(0)), StatusCode::kInvalidArgument,
                "buffer 0 alignment 0 is not a power of two");
}

TEST(DescriptorRefuses, SmallAlignmentOnANonEmptyBuffer) {
  ExpectRefused(Patch(kRowMajor, kDenseBuffer0 + 8, U32(32)), StatusCode::kInvalidArgument,
                "buffer 0 alignment 32 is below 64 for a non-empty buffer");
}

TEST(DescriptorRefuses, BadDeviceSyncOrMemoryClass) {
  ExpectRefused(Patch(kRowMajor, kDenseBuffer0 + 12, U8(0xFF)), StatusCode::kInvalidArgument,
                "buffer 0 device_tag 0xff is invalid");
  ExpectRefused(Patch(kRowMajor, kDenseBuffer0 + 12, U8(0x09)), StatusCode::kInvalidArgument,
                "buffer 0 device_tag 0x09 is unknown");
  ExpectRefused(Patch(kRowMajor, kDenseBuffer0 + 13, U8(3)), StatusCode::kInvalidArgument,
                "buffer 0 sync_mode 3");
  ExpectRefused(Patch(kRowMajor, kDenseBuffer0 + 14, U8(4)), StatusCode::kInvalidArgument,
                "buffer 0 memory_class 4");
  ExpectRefused(Patch(kRowMajor, kDenseBuffer0 + 15, U8(1)), StatusCode::kInvalidArgument,
                "buffer 0 reserved byte 0 (descriptor byte 60) is 0x01");
}

TEST(DescriptorRefuses, CpuBufferThatIsNotProducerSynced) {
  // sync_mode MUST be 0 for a CPU buffer: on read...
  ExpectRefused(Patch(kRowMajor, kDenseBuffer0 + 13, U8(1)), StatusCode::kInvalidArgument,
                "buffer 0 sync_mode 1 must be 0 (producer-synced) for a CPU "
                "buffer");
  ExpectRefused(Patch(kRowMajor, kDenseBuffer0 + 13, U8(2)), StatusCode::kInvalidArgument,
                "buffer 0 sync_mode 2 must be 0");
  // ...and on write.
  for (SyncMode mode : {SyncMode::kEvent, SyncMode::kConsumerStream}) {
    auto d = TensorDescriptor::Create(ElementType::kF32, {3, 4}, 0, RowMajorLayout{},
                                      {BufferHandle{192, 64, DeviceTag::kCpu, mode}});
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.error().message().find("must be 0 (producer-synced) for a "
                                       "CPU buffer"),
              std::string::npos)
        << d.error().ToString();
  }
}

TEST(DescriptorAccepts, DeviceBufferWithAnySyncMode) {
  auto d = TensorDescriptor::Create(ElementType::kF32, {3, 4}, 0, RowMajorLayout{},
                                    {BufferHandle{192, 64, DeviceTag::kCuda, SyncMode::kEvent}});
  ASSERT_TRUE(d.ok()) << d.error().ToString();
}

TEST(DescriptorRefuses, DenseWithoutExactlyOneBuffer) {
  Bytes b(kRowMajor.begin(), kRowMajor.begin() + kDenseBuffer0 - 1);
  b.push_back(std::byte{0});  // buffer_count 0
  ExpectRefused(Finish(b), StatusCode::kInvalidArgument,
                "buffer_count is 0; the row_major layout needs 1");
}

// --- Dense extents ---

TEST(DescriptorRefuses, DataPastTheBuffer) {
  ExpectRefused(Patch(kRowMajor, kDenseBuffer0, U64(47)), StatusCode::kInvalidArgument,
                "tensor needs bytes [0, 48) of buffer 0, which has 47");
  ExpectRefused(Patch(kRowMajor, kDenseByteOffset, U64(148)), StatusCode::kInvalidArgument,
                "tensor needs bytes [148, 196) of buffer 0");
}

TEST(DescriptorRefuses, ByteOffsetPastTheBuffer) {
  ExpectRefused(Patch(kRowMajor, kDenseByteOffset, U64(193)), StatusCode::kInvalidArgument,
                "byte_offset 193 is past the end of buffer 0 (192 bytes)");
}

TEST(DescriptorRefuses, ShapeWhoseSizeOverflows) {
  const Bytes b = Finish(Join(
      {Header(0, 0x04, 0x01, 2), U64(1ull << 40), U64(1ull << 30), U64(0), U8(1), Buffer(64)}));
  ExpectRefused(b, StatusCode::kOutOfRange,
                "dimension 0 (1099511627776 x stride 1073741824) reaches "
                "beyond u64 elements");
}

TEST(DescriptorRefuses, StridesReachingBeforeTheBuffer) {
  const Bytes b = Finish(Join({Header(0, 0x14, 0x03, 1), U64(4), U64(8),
                               U64(static_cast<uint64_t>(int64_t{-1})), U8(1), Buffer(16)}));
  ExpectRefused(b, StatusCode::kInvalidArgument, "strides reach 3 elements before byte_offset 8");
}

TEST(DescriptorRefuses, StridesWithInt64Min) {
  const Bytes b = Finish(
      Join({Header(0, 0x11, 0x03, 1), U64(3), U64(0), U64(uint64_t{1} << 63), U8(1), Buffer(16)}));
  ExpectRefused(b, StatusCode::kOutOfRange, "reaches beyond u64 elements");
}

TEST(DescriptorAccepts, DynamicDimensionsSkipTheExtentCheck) {
  const Bytes b = Finish(
      Join({Header(0, 0x03, 0x01, 2), U64(UINT64_MAX), U64(4), U64(0), U8(1), Buffer(0, 1)}));
  auto d = TensorDescriptor::FromBytes(b);
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  EXPECT_EQ(d->shape()[0], wire::kDynamicDim);
  EXPECT_EQ(d->ToBytes(), b);
}

TEST(DescriptorAccepts, ZeroSizedTensorInAnEmptyBuffer) {
  const Bytes b =
      Finish(Join({Header(0, 0x03, 0x01, 2), U64(0), U64(4), U64(0), U8(1), Buffer(0, 1)}));
  EXPECT_TRUE(TensorDescriptor::FromBytes(b).ok());
}

// --- Block-paged ---

TEST(DescriptorRefuses, BlockPagedReservedBytes) {
  ExpectRefused(Patch(kPaged, kPagedReserved + 5, U8(1)), StatusCode::kInvalidArgument,
                "block_paged reserved byte 5 (descriptor byte 83) is 0x01");
}

TEST(DescriptorRefuses, BlockPagedFields) {
  ExpectRefused(Patch(kPaged, kPagedPageSize, U32(0)), StatusCode::kInvalidArgument,
                "page_size must be >= 1");
  ExpectRefused(Patch(kPaged, kPagedAxis, U32(1)), StatusCode::kInvalidArgument,
                "paged_axis must be 0 (got 1)");
  ExpectRefused(Patch(kPaged, kPagedRole, U8(3)), StatusCode::kInvalidArgument, "kv_role 3");
  ExpectRefused(Patch(kPaged, kPagedIndexType, U8(2)), StatusCode::kInvalidArgument,
                "block_table_index_type 2");
}

TEST(DescriptorAccepts, BlockPagedNoLayerIndex) {
  auto d = TensorDescriptor::FromBytes(Patch(kPaged, kPagedLayer, U32(0xFFFFFFFFu)));
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  EXPECT_FALSE(std::get<BlockPagedLayout>(d->layout()).layer_index());
}

TEST(DescriptorRefuses, BlockPagedRankOtherThanThree) {
  const Bytes b = Finish(
      Join({Header(0, 0x01, 0x0A, 2), U64(12), U64(16), U64(0), U32(4), U64(5), U32(0), U32(2),
            U8(1), U32(7), U8(0), Zeros(6), U8(3), Buffer(640), Buffer(12), Buffer(12)}));
  ExpectRefused(b, StatusCode::kInvalidArgument, "got rank 2");
}

TEST(DescriptorRefuses, BlockPagedByteOffset) {
  ExpectRefused(Patch(kPaged, kPagedByteOffset, U64(64)), StatusCode::kInvalidArgument,
                "block_paged byte_offset must be 0 (got 64)");
}

TEST(DescriptorRefuses, BlockPagedPoolSize) {
  ExpectRefused(Patch(kPaged, kPagedBuffer0, U64(641)), StatusCode::kInvalidArgument,
                "page_pool (buffer 0) byte_size is 641; the layout needs 640");
  ExpectRefused(Patch(kPaged, kPagedNumPages, U64(uint64_t{1} << 62)), StatusCode::kOutOfRange,
                "overflows u64");
}

TEST(DescriptorRefuses, BlockPagedIndexBufferSizes) {
  ExpectRefused(Patch(kPaged, kPagedBuffer1, U64(10)), StatusCode::kInvalidArgument,
                "block_table (buffer 1) byte_size 10 is not a multiple");
  ExpectRefused(Patch(kPaged, kPagedBuffer2, U64(8)), StatusCode::kInvalidArgument,
                "seq_ptr (buffer 2) byte_size is 8; the layout needs 12");
}

TEST(DescriptorRefuses, BlockPagedBuffersOnTwoDevices) {
  ExpectRefused(Patch(kPaged, kPagedBuffer2 + 12, U8(0x01)), StatusCode::kInvalidArgument,
                "share one device tag and memory class: buffer 2 has device "
                "0x01");
  ExpectRefused(Patch(kPaged, kPagedBuffer1 + 14, U8(2)), StatusCode::kInvalidArgument,
                "buffer 1 has device 0x00 class 2");
}

TEST(DescriptorRefuses, BlockPagedWrongBufferCount) {
  auto l = BlockPagedLayout::Create(4, 5, 0, 2);
  auto d = TensorDescriptor::Create(ElementType::kF16, {12, 2, 8}, 0, *l,
                                    {BufferHandle{640}, BufferHandle{12}});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("buffer_count is 2; the block_paged layout needs 3"),
            std::string::npos)
      << d.error().ToString();
}

// --- Quantization inside a descriptor ---

// kPagedQuantized's quantization descriptor starts after its buffer table.
constexpr size_t kQuantStart = 20 + 24 + 8 + 32 + 1 + 5 * 16 + 4;

TEST(DescriptorRefuses, QuantizationLengthPastTheEnd) {
  ExpectRefused(Patch(kPagedQuantized, kQuantStart - 4, U32(0x7FFFFFFF)),
                StatusCode::kInvalidArgument, "truncated descriptor: quantization descriptor");
}

TEST(DescriptorRefuses, QuantizationLengthShort) {
  const Bytes patched = Patch(kPagedQuantized, kQuantStart - 4, U32(20));
  // Drop the last 4 bytes (erase, not resize: g++ 12 under ASan warns
  // about resize's fill on a size it cannot bound).
  const Bytes b(patched.begin(), patched.end() - 4);
  ExpectRefused(Finish(b), StatusCode::kInvalidArgument,
                "quantization_length is 20 bytes; the scheme is exactly 24");
}

TEST(DescriptorRefuses, QuantizedFloatStorage) {
  ExpectRefused(Patch(kPagedQuantized, 14, U8(0x03)), StatusCode::kInvalidArgument,
                "per_block_affine needs i8 or u8 storage (element type is f32)");
}

TEST(DescriptorRefuses, PerBlockBlockSizeOtherThanPageSize) {
  ExpectRefused(Patch(kPagedQuantized, kQuantStart + 8, U32(8)), StatusCode::kInvalidArgument,
                "block_size 8 must equal block_paged page_size 4");
}

TEST(DescriptorRefuses, PerBlockOnAxisOneWithBlockPaged) {
  ExpectRefused(Patch(kPagedQuantized, kQuantStart + 4, U32(1)), StatusCode::kInvalidArgument,
                "must be on axis 0 (got axis 1)");
}

TEST(DescriptorRefuses, PerBlockScalesOfTheWrongSize) {
  ExpectRefused(Patch(kPagedQuantized, kQuantStart - 4 - 2 * 16, U64(5 * 4 * 2)),
                StatusCode::kInvalidArgument,
                "per-block scales (buffer 3) byte_size is 40; the layout needs 80");
}

TEST(DescriptorRefuses, QuantizationBuffersOutOfOrder) {
  ExpectRefused(Patch(kPagedQuantized, kQuantStart + 12, U32(1)), StatusCode::kInvalidArgument,
                "scale_buffer 1 must be buffer 3");
  ExpectRefused(Patch(kPagedQuantized, kQuantStart + 16, U32(7)), StatusCode::kInvalidArgument,
                "zero_point_buffer 7 must be buffer 4");
}

TEST(DescriptorRefuses, PerChannelOnThePagedAxis) {
  auto l = BlockPagedLayout::Create(4, 5, 0, 2);
  auto d = TensorDescriptor::Create(
      ElementType::kI8, {12, 2, 8}, 0, *l,
      {BufferHandle{320}, BufferHandle{12}, BufferHandle{12}, BufferHandle{80}},
      *PerChannelAffine::Symmetric(0, 3));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("axis 0 is the paged axis"), std::string::npos);
}

TEST(DescriptorRefuses, QuantizationAxisPastTheRank) {
  auto d = TensorDescriptor::Create(ElementType::kI8, {3, 4}, 0, RowMajorLayout{},
                                    {BufferHandle{12}, BufferHandle{16}},
                                    *PerChannelAffine::Symmetric(2, 1));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("per_channel_affine axis 2 is out of range for rank 2"),
            std::string::npos)
      << d.error().ToString();
}

TEST(DescriptorAccepts, DensePerChannelAsymmetric) {
  auto d = TensorDescriptor::Create(ElementType::kU8, {3, 4}, 0, RowMajorLayout{},
                                    {BufferHandle{12}, BufferHandle{16}, BufferHandle{16}},
                                    *PerChannelAffine::Asymmetric(1, 1, 2));
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  const Bytes b = d->ToBytes();
  const Bytes want =
      Finish(Join({Header(wire::kFlagQuantization, 0x11, 0x01, 2), U64(3), U64(4), U64(0), U8(3),
                   Buffer(12), Buffer(16), Buffer(16), U32(20), FromHex("02 01 0000"), U32(1),
                   U32(1), U32(2), U8(0x03), Zeros(3)}));
  EXPECT_EQ(b, want);
  EXPECT_EQ(*TensorDescriptor::FromBytes(b), *d);
}

TEST(DescriptorRefuses, QuantizationFlagWithoutTheSection) {
  ExpectRefused(Finish(Patch(kRowMajor, 10, U32(wire::kFlagQuantization))),
                StatusCode::kInvalidArgument,
                "truncated descriptor: quantization_length at byte 61");
}

void ExpectCreateRefused(const Result<TensorDescriptor>& d, std::string_view needle) {
  ASSERT_FALSE(d.ok()) << "accepted; wanted an error containing " << needle;
  EXPECT_EQ(d.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(d.error().message().find(needle), std::string::npos) << d.error().ToString();
}

Result<TensorDescriptor> PerTensor(ElementType dtype, int32_t zero_point) {
  return TensorDescriptor::Create(dtype, {3, 4}, 0, RowMajorLayout{}, {BufferHandle{12}},
                                  *PerTensorAffine::Create(0.5f, zero_point));
}

TEST(DescriptorRefuses, PerTensorZeroPointOutsideTheStorageRange) {
  ExpectCreateRefused(PerTensor(ElementType::kU8, 300),
                      "per_tensor_affine zero_point 300 is outside the u8 "
                      "storage range [0, 255]");
  ExpectCreateRefused(PerTensor(ElementType::kU8, -1),
                      "zero_point -1 is outside the u8 storage range");
  ExpectCreateRefused(PerTensor(ElementType::kI8, 128),
                      "zero_point 128 is outside the i8 storage range "
                      "[-128, 127]");
  ExpectCreateRefused(PerTensor(ElementType::kI8, -129),
                      "zero_point -129 is outside the i8 storage range");
  // On read too: u8 [3, 4] with zero point -1.
  const Bytes b = Finish(Join({Header(wire::kFlagQuantization, 0x11, 0x01, 2), U64(3), U64(4),
                               U64(0), U8(1), Buffer(12), U32(16), FromHex("01 01 0000"),
                               U32(0x3F000000u), U32(0xFFFFFFFFu), Zeros(4)}));
  ExpectRefused(b, StatusCode::kInvalidArgument,
                "zero_point -1 is outside the u8 storage range [0, 255]");
}

TEST(DescriptorAccepts, PerTensorZeroPointsAtTheStorageLimits) {
  for (auto [dtype, z] : {std::pair{ElementType::kU8, 0}, std::pair{ElementType::kU8, 255},
                          std::pair{ElementType::kI8, -128}, std::pair{ElementType::kI8, 127}}) {
    auto d = PerTensor(dtype, z);
    ASSERT_TRUE(d.ok()) << d.error().ToString();
    EXPECT_EQ(*TensorDescriptor::FromBytes(d->ToBytes()), *d);
  }
}

TEST(DescriptorRefuses, DynamicQuantizedAxis) {
  ExpectCreateRefused(
      TensorDescriptor::Create(ElementType::kI8, {wire::kDynamicDim, 4}, 0, RowMajorLayout{},
                               {BufferHandle{0, 1}, BufferHandle{16}},
                               *PerChannelAffine::Symmetric(0, 1)),
      "per_channel_affine axis 0 is a dynamic dimension");
  ExpectCreateRefused(
      TensorDescriptor::Create(ElementType::kU8, {3, wire::kDynamicDim}, 0, RowMajorLayout{},
                               {BufferHandle{0, 1}, BufferHandle{16}, BufferHandle{16}},
                               *PerBlockAffine::Asymmetric(1, 2, 1, 2, ElementType::kF16)),
      "per_block_affine axis 1 is a dynamic dimension");
  // On read too: i8 [dynamic, 4], per-channel on axis 0.
  const Bytes b =
      Finish(Join({Header(wire::kFlagQuantization, 0x10, 0x01, 2), U64(UINT64_MAX), U64(4), U64(0),
                   U8(2), Buffer(0, 1), Buffer(16), U32(20), FromHex("02 01 0100"), U32(0), U32(1),
                   U32(0xFFFFFFFFu), U8(0x03), Zeros(3)}));
  ExpectRefused(b, StatusCode::kInvalidArgument,
                "per_channel_affine axis 0 is a dynamic dimension");
}

TEST(DescriptorAccepts, DynamicDimensionOffTheQuantizedAxis) {
  auto d = TensorDescriptor::Create(ElementType::kI8, {wire::kDynamicDim, 4}, 0, RowMajorLayout{},
                                    {BufferHandle{0, 1}, BufferHandle{16}},
                                    *PerChannelAffine::Symmetric(1, 1));
  ASSERT_TRUE(d.ok()) << d.error().ToString();
}

TEST(DescriptorRefuses, PerBlockSizeAboveTheAxisExtent) {
  ExpectCreateRefused(
      TensorDescriptor::Create(ElementType::kI8, {3, 4}, 0, RowMajorLayout{},
                               {BufferHandle{12}, BufferHandle{16}},
                               *PerBlockAffine::Symmetric(1, 8, 1, ElementType::kF32)),
      "per_block_affine block_size 8 exceeds shape[1] = 4");
  // On read too.
  const Bytes b =
      Finish(Join({Header(wire::kFlagQuantization, 0x10, 0x01, 2), U64(3), U64(4), U64(0), U8(2),
                   Buffer(12), Buffer(16), U32(24), FromHex("03 01 0100"), U32(0), U32(4), U32(1),
                   U32(0xFFFFFFFFu), U8(0x03), Zeros(3)}));
  ExpectRefused(b, StatusCode::kInvalidArgument,
                "per_block_affine block_size 4 exceeds shape[0] = 3");
}

TEST(DescriptorAccepts, PerBlockSizeUpToTheAxisExtentOrOnAnEmptyAxis) {
  EXPECT_TRUE(TensorDescriptor::Create(ElementType::kI8, {3, 4}, 0, RowMajorLayout{},
                                       {BufferHandle{12}, BufferHandle{16}},
                                       *PerBlockAffine::Symmetric(1, 4, 1, ElementType::kF32))
                  .ok());
  EXPECT_TRUE(TensorDescriptor::Create(ElementType::kI8, {0, 4}, 0, RowMajorLayout{},
                                       {BufferHandle{0, 1}, BufferHandle{0, 1}},
                                       *PerBlockAffine::Symmetric(0, 128, 1, ElementType::kF32))
                  .ok());
}

TEST(DescriptorAccepts, BlockPagedPerBlockPageLargerThanTheTokens) {
  // Block-paged blocks are pages: a page of 4 slots may hold 3 tokens.
  auto l = BlockPagedLayout::Create(4, 1, 0, 1);
  ASSERT_TRUE(l.ok());
  auto d = TensorDescriptor::Create(
      ElementType::kI8, {3, 2, 8}, 0, *l,
      {BufferHandle{64}, BufferHandle{4}, BufferHandle{8}, BufferHandle{16}},
      *PerBlockAffine::Symmetric(0, 4, 3, ElementType::kF32));
  ASSERT_TRUE(d.ok()) << d.error().ToString();
}

TEST(DescriptorRefuses, StridedScalar) {
  ExpectCreateRefused(
      TensorDescriptor::Create(ElementType::kF32, {}, 0, StridedLayout{}, {BufferHandle{64}}),
      "strided layout needs rank >= 1 (got rank 0");
  ExpectRefused(Finish(Join({Header(0, 0x03, 0x03, 0), U64(0), U8(1), Buffer(64)})),
                StatusCode::kInvalidArgument, "strided layout needs rank >= 1 (got rank 0");
}

TEST(DescriptorRefuses, StridedStrideCountFollowsTheRank) {
  auto d = TensorDescriptor::Create(ElementType::kF32, {3, 4}, 0, StridedLayout{{4}},
                                    {BufferHandle{48}});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("strided layout has 1 strides for rank 2"), std::string::npos);
}

}  // namespace
}  // namespace folio::format
