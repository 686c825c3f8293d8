#include "folio/format/block_paged_layout.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace folio::format {
namespace {

using U32s = std::vector<uint32_t>;
using U64s = std::vector<uint64_t>;

void ExpectError(const Status& s, StatusCode code, std::string_view needle) {
  ASSERT_FALSE(s.ok()) << "succeeded; wanted " << needle;
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
}

BlockPagedLayout Layout(uint32_t page_size, uint64_t num_pages, uint32_t num_seqs,
                        IndexType index_type = IndexType::kU32) {
  auto l = BlockPagedLayout::Create(page_size, num_pages, 0, num_seqs, KvRole::kKey, std::nullopt,
                                    index_type);
  FOLIO_CHECK(l.ok(), l.status().ToString());
  return *l;
}

TEST(BlockPagedLayout, GettersAndDefaults) {
  auto l = BlockPagedLayout::Create(16, 100, 0, 3);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->page_size(), 16u);
  EXPECT_EQ(l->num_pages(), 100u);
  EXPECT_EQ(l->paged_axis(), 0u);
  EXPECT_EQ(l->num_seqs(), 3u);
  EXPECT_EQ(l->kv_role(), KvRole::kKey);
  EXPECT_FALSE(l->layer_index().has_value());
  EXPECT_EQ(l->block_table_index_type(), IndexType::kU32);
  EXPECT_EQ(BlockPagedLayout::tag(), 0x0A);
  EXPECT_EQ(BlockPagedLayout::name(), "block_paged");
  EXPECT_EQ(BlockPagedLayout::buffer_count(), 3u);
}

TEST(BlockPagedLayout, KeepsRoleLayerAndIndexType) {
  auto l = BlockPagedLayout::Create(8, 4, 0, 0, KvRole::kFused, 31, IndexType::kU64);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->kv_role(), KvRole::kFused);
  EXPECT_EQ(l->layer_index(), 31u);
  EXPECT_EQ(l->block_table_index_type(), IndexType::kU64);
}

TEST(BlockPagedLayout, BufferCountWithQuantization) {
  EXPECT_EQ(BlockPagedLayout::BufferCountWith(*PerTensorAffine::Create(1, 2)), 3u);
  EXPECT_EQ(
      BlockPagedLayout::BufferCountWith(*PerBlockAffine::Symmetric(0, 4, 3, ElementType::kF32)),
      4u);
  EXPECT_EQ(BlockPagedLayout::BufferCountWith(*PerChannelAffine::Asymmetric(1, 3, 4)), 5u);
}

TEST(BlockPagedLayout, RefusesZeroPageSize) {
  ExpectError(BlockPagedLayout::Create(0, 4, 0, 1).status(), StatusCode::kInvalidArgument,
              "page_size must be >= 1 (got 0)");
}

TEST(BlockPagedLayout, RefusesPagedAxisOtherThanZero) {
  ExpectError(BlockPagedLayout::Create(4, 4, 1, 1).status(), StatusCode::kInvalidArgument,
              "paged_axis must be 0 (got 1)");
}

TEST(BlockPagedLayout, RefusesTheNoneLayerIndexAsAValue) {
  ExpectError(BlockPagedLayout::Create(4, 4, 0, 1, KvRole::kKey, 0xFFFFFFFFu).status(),
              StatusCode::kInvalidArgument, "layer_index 0xffffffff");
}

TEST(BlockPagedLayout, ParsesRoleAndIndexTypeNames) {
  EXPECT_EQ(*ParseKvRole("key"), KvRole::kKey);
  EXPECT_EQ(*ParseKvRole("value"), KvRole::kValue);
  EXPECT_EQ(*ParseKvRole("fused"), KvRole::kFused);
  ExpectError(ParseKvRole("query").status(), StatusCode::kInvalidArgument, "'query'");
  EXPECT_EQ(*ParseIndexType("uint32"), IndexType::kU32);
  EXPECT_EQ(*ParseIndexType("uint64"), IndexType::kU64);
  ExpectError(ParseIndexType("int64").status(), StatusCode::kInvalidArgument, "'int64'");
}

TEST(BlockPagedLayout, ShapeMustBeRankThree) {
  const BlockPagedLayout l = Layout(4, 5, 2);
  EXPECT_TRUE(l.ValidateAgainstShape(U64s{12, 2, 8}).ok());
  ExpectError(l.ValidateAgainstShape(U64s{12, 16}), StatusCode::kInvalidArgument, "rank 3");
  ExpectError(l.ValidateAgainstShape(U64s{1, 12, 2, 8}), StatusCode::kInvalidArgument,
              "got rank 4");
}

TEST(BlockPagedLayout, TotalTokensMayBeDynamicHeadsMayNot) {
  const BlockPagedLayout l = Layout(4, 5, 2);
  EXPECT_TRUE(l.ValidateAgainstShape(U64s{UINT64_MAX, 2, 8}).ok());
  ExpectError(l.ValidateAgainstShape(U64s{12, UINT64_MAX, 8}), StatusCode::kInvalidArgument,
              "num_heads (shape[1])");
  ExpectError(l.ValidateAgainstShape(U64s{12, 2, UINT64_MAX}), StatusCode::kInvalidArgument,
              "head_dim (shape[2])");
}

TEST(BlockPagedLayout, RefusesAPoolThatOverflows) {
  const BlockPagedLayout l = Layout(1u << 20, uint64_t{1} << 40, 1);
  ExpectError(l.ValidateAgainstShape(U64s{1, 64, 128}), StatusCode::kOutOfRange, "overflows u64");
}

// --- Index buffers ---

TEST(BlockPagedLayout, ValidIndexBuffers) {
  EXPECT_TRUE(Layout(4, 5, 2).ValidateIndexBuffers(U32s{0, 2, 3}, U32s{3, 1, 4}).ok());
  EXPECT_TRUE(
      Layout(4, 5, 2, IndexType::kU64).ValidateIndexBuffers(U64s{0, 2, 3}, U64s{3, 1, 4}).ok());
}

TEST(BlockPagedLayout, EmptyBatchIsValid) {
  EXPECT_TRUE(Layout(4, 0, 0).ValidateIndexBuffers(U32s{0}, U32s{}).ok());
  EXPECT_TRUE(Layout(4, 0, 0, IndexType::kU64).ValidateIndexBuffers(U64s{0}, U64s{}).ok());
}

TEST(BlockPagedLayout, SequencesSharingAPageIsValid) {
  // Both sequences start with physical page 0 (a shared prefix).
  EXPECT_TRUE(Layout(4, 5, 2).ValidateIndexBuffers(U32s{0, 2, 3}, U32s{0, 1, 0}).ok());
}

TEST(BlockPagedLayout, EmptySequencesAreValid) {
  EXPECT_TRUE(Layout(4, 5, 3).ValidateIndexBuffers(U32s{0, 0, 1, 1}, U32s{2}).ok());
}

TEST(BlockPagedLayout, SeqPtrNeedsNumSeqsPlusOneEntries) {
  ExpectError(Layout(4, 5, 2).ValidateIndexBuffers(U32s{0, 3}, U32s{0, 1, 0}),
              StatusCode::kInvalidArgument, "seq_ptr has 2 entries; num_seqs 2 needs 3");
  ExpectError(Layout(4, 5, 0).ValidateIndexBuffers(U32s{}, U32s{}), StatusCode::kInvalidArgument,
              "seq_ptr has 0 entries");
}

TEST(BlockPagedLayout, SeqPtrMustStartAtZero) {
  ExpectError(Layout(4, 5, 2, IndexType::kU64).ValidateIndexBuffers(U64s{1, 2, 3}, U64s{0, 1, 0}),
              StatusCode::kInvalidArgument, "seq_ptr[0] is 1");
}

TEST(BlockPagedLayout, SeqPtrMustNotDecrease) {
  ExpectError(Layout(4, 5, 3).ValidateIndexBuffers(U32s{0, 3, 2, 3}, U32s{0, 1, 0}),
              StatusCode::kInvalidArgument, "seq_ptr[2] = 2 < seq_ptr[1] = 3");
}

TEST(BlockPagedLayout, SeqPtrMustEndAtTheBlockTableLength) {
  ExpectError(Layout(4, 5, 2).ValidateIndexBuffers(U32s{0, 2, 2}, U32s{0, 1, 0}),
              StatusCode::kInvalidArgument,
              "seq_ptr[2] is 2; it must equal the block_table length 3");
}

TEST(BlockPagedLayout, BlockTableEntriesMustNameAPoolPage) {
  ExpectError(Layout(4, 5, 2).ValidateIndexBuffers(U32s{0, 2, 3}, U32s{0, 5, 0}),
              StatusCode::kOutOfRange, "block_table[1] is page 5; num_pages is 5");
  ExpectError(Layout(4, 5, 1, IndexType::kU64).ValidateIndexBuffers(U64s{0, 1}, U64s{UINT64_MAX}),
              StatusCode::kOutOfRange, "block_table[0] is page 18446744073709551615");
}

TEST(BlockPagedLayout, IndexBuffersMustMatchTheDeclaredType) {
  ExpectError(Layout(4, 5, 1).ValidateIndexBuffers(U64s{0, 1}, U64s{0}),
              StatusCode::kInvalidArgument,
              "index buffers are uint64 but the layout's "
              "block_table_index_type is uint32");
}

// --- Addressing: the spec's published checks ---
// page_size 4, num_pages 5, 2 heads, head_dim 8, seq_ptr [0,2,3],
// block_table [0,1,0].

class PublishedAddressing : public ::testing::Test {
 protected:
  const BlockPagedLayout layout_ = Layout(4, 5, 2);
  const U64s shape_{12, 2, 8};
  const U32s seq_ptr_{0, 2, 3};
  const U32s block_table_{0, 1, 0};

  Result<uint64_t> At(uint64_t s, uint64_t t, uint64_t h, uint64_t d) const {
    return layout_.ElementOffset(shape_, seq_ptr_, block_table_, {s, t, h, d});
  }
};

TEST_F(PublishedAddressing, FirstElementOfSequenceZero) { EXPECT_EQ(*At(0, 0, 0, 0), 0u); }
TEST_F(PublishedAddressing, SecondPageOfSequenceZero) { EXPECT_EQ(*At(0, 4, 0, 0), 64u); }
TEST_F(PublishedAddressing, LastHeadAndFeatureOfToken5) { EXPECT_EQ(*At(0, 5, 1, 7), 95u); }
TEST_F(PublishedAddressing, SequenceOneSharesPageZero) { EXPECT_EQ(*At(1, 0, 0, 0), 0u); }
TEST_F(PublishedAddressing, TokenPastTheSequencesPagesIsOutOfRange) {
  ExpectError(At(1, 4, 0, 0).status(), StatusCode::kOutOfRange,
              "token 4 of sequence 1 is out of range");
}
TEST_F(PublishedAddressing, HeadOutOfRange) {
  ExpectError(At(0, 0, 2, 0).status(), StatusCode::kOutOfRange,
              "head 2 is out of range; num_heads is 2");
}
TEST_F(PublishedAddressing, DimOutOfRange) {
  ExpectError(At(0, 0, 0, 8).status(), StatusCode::kOutOfRange,
              "dim 8 is out of range; head_dim is 8");
}
TEST_F(PublishedAddressing, SequenceOutOfRange) {
  ExpectError(At(2, 0, 0, 0).status(), StatusCode::kOutOfRange,
              "sequence 2 is out of range; num_seqs is 2");
}

TEST(BlockPagedAddressing, SinglePageFour) {
  const BlockPagedLayout l = Layout(4, 5, 1);
  auto r = l.ElementOffset(U64s{4, 2, 8}, U32s{0, 1}, U32s{4}, {0, 3, 1, 7});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(*r, 319u);
  // The same with u64 index buffers.
  const BlockPagedLayout l64 = Layout(4, 5, 1, IndexType::kU64);
  EXPECT_EQ(*l64.ElementOffset(U64s{4, 2, 8}, U64s{0, 1}, U64s{4}, {0, 3, 1, 7}), 319u);
}

TEST(BlockPagedAddressing, NonMonotoneSeqPtrIsAnError) {
  const BlockPagedLayout l = Layout(4, 5, 2);
  ExpectError(l.ElementOffset(U64s{12, 2, 8}, U32s{0, 3, 2}, U32s{0, 1, 0}, {1, 0, 0, 0}).status(),
              StatusCode::kInvalidArgument, "seq_ptr[2] = 2 < seq_ptr[1] = 3");
}

TEST(BlockPagedAddressing, SeqPtrPastTheBlockTableIsAnError) {
  const BlockPagedLayout l = Layout(4, 5, 1);
  ExpectError(l.ElementOffset(U64s{4, 2, 8}, U32s{0, 9}, U32s{0}, {0, 20, 0, 0}).status(),
              StatusCode::kInvalidArgument, "past the block_table length 1");
}

TEST(BlockPagedAddressing, PageIdPastThePoolIsAnError) {
  const BlockPagedLayout l = Layout(4, 5, 1);
  ExpectError(l.ElementOffset(U64s{4, 2, 8}, U32s{0, 1}, U32s{7}, {0, 0, 0, 0}).status(),
              StatusCode::kOutOfRange, "block_table[0] is page 7");
}

TEST(BlockPagedAddressing, HugeTokenDoesNotOverflow) {
  const BlockPagedLayout l = Layout(4, 5, 1);
  ExpectError(l.ElementOffset(U64s{4, 2, 8}, U32s{0, 1}, U32s{0}, {0, UINT64_MAX, 0, 0}).status(),
              StatusCode::kOutOfRange, "out of range");
}

TEST(BlockPagedAddressing, ChecksTheShape) {
  const BlockPagedLayout l = Layout(4, 5, 1);
  ExpectError(l.ElementOffset(U64s{4, 16}, U32s{0, 1}, U32s{0}, {0, 0, 0, 0}).status(),
              StatusCode::kInvalidArgument, "rank 3");
}

// --- Quantization compatibility ---

TEST(BlockPagedQuantization, PerTensorIsAlwaysAllowed) {
  EXPECT_TRUE(
      Layout(4, 5, 1).ValidateQuantizationCompatibility(*PerTensorAffine::Create(0.25f, 3)).ok());
}

TEST(BlockPagedQuantization, PerChannelOnHeadsOrFeatures) {
  const BlockPagedLayout l = Layout(4, 5, 1);
  EXPECT_TRUE(l.ValidateQuantizationCompatibility(*PerChannelAffine::Symmetric(1, 3)).ok());
  EXPECT_TRUE(l.ValidateQuantizationCompatibility(*PerChannelAffine::Asymmetric(2, 3, 4)).ok());
}

TEST(BlockPagedQuantization, PerChannelOnThePagedAxisIsRefused) {
  ExpectError(Layout(4, 5, 1).ValidateQuantizationCompatibility(*PerChannelAffine::Symmetric(0, 3)),
              StatusCode::kInvalidArgument, "axis 0 is the paged axis");
}

TEST(BlockPagedQuantization, PerChannelAxisPastRankIsRefused) {
  ExpectError(Layout(4, 5, 1).ValidateQuantizationCompatibility(*PerChannelAffine::Symmetric(3, 3)),
              StatusCode::kInvalidArgument, "axis 3 is out of range");
}

TEST(BlockPagedQuantization, PerBlockOnAxisZeroWithPageSizedBlocks) {
  EXPECT_TRUE(
      Layout(4, 5, 1)
          .ValidateQuantizationCompatibility(*PerBlockAffine::Symmetric(0, 4, 3, ElementType::kF16))
          .ok());
}

TEST(BlockPagedQuantization, PerBlockOnAnotherAxisIsRefused) {
  ExpectError(Layout(4, 5, 1).ValidateQuantizationCompatibility(
                  *PerBlockAffine::Symmetric(1, 4, 3, ElementType::kF16)),
              StatusCode::kInvalidArgument, "must be on axis 0 (got axis 1)");
}

TEST(BlockPagedQuantization, PerBlockWithAnotherBlockSizeIsRefused) {
  ExpectError(Layout(4, 5, 1).ValidateQuantizationCompatibility(
                  *PerBlockAffine::Symmetric(0, 8, 3, ElementType::kF16)),
              StatusCode::kInvalidArgument, "block_size 8 must equal block_paged page_size 4");
}

}  // namespace
}  // namespace folio::format
