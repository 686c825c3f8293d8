#include "folio/core/aligned_buffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

namespace folio {
namespace {

bool AllZero(const AlignedBuffer& b) {
  return std::all_of(b.bytes().begin(), b.bytes().end(),
                     [](std::byte x) { return x == std::byte{0}; });
}

TEST(AlignedBuffer, SmallBufferIsZeroedAndLineAligned) {
  AlignedBuffer b(100);
  ASSERT_EQ(b.size(), 100u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % AlignedBuffer::kAlignment, 0u);
  EXPECT_TRUE(AllZero(b));
}

// Large buffers start on a 2 MiB boundary so that the huge-page hint can
// cover them from their first byte.
TEST(AlignedBuffer, LargeBufferIsZeroedAndHugePageAligned) {
  AlignedBuffer b(AlignedBuffer::kHugePageMinBytes + 12345);
  ASSERT_EQ(b.size(), AlignedBuffer::kHugePageMinBytes + 12345);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % AlignedBuffer::kHugePageBytes, 0u);
  EXPECT_TRUE(AllZero(b));
}

TEST(AlignedBuffer, EmptyBufferHoldsNothing) {
  AlignedBuffer b(0);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_TRUE(AlignedBuffer().bytes().empty());
}

TEST(AlignedBuffer, CloneCopiesAndMoveTransfers) {
  AlignedBuffer a(AlignedBuffer::kHugePageMinBytes);
  a.data()[0] = std::byte{7};
  a.data()[a.size() - 1] = std::byte{9};
  const AlignedBuffer c = a.Clone();
  ASSERT_EQ(c.size(), a.size());
  EXPECT_NE(c.data(), a.data());
  EXPECT_EQ(c.data()[0], std::byte{7});
  EXPECT_EQ(c.data()[c.size() - 1], std::byte{9});
  const std::byte* at = a.data();
  AlignedBuffer moved = std::move(a);
  EXPECT_EQ(moved.data(), at);
  EXPECT_EQ(moved.size(), c.size());
}

}  // namespace
}  // namespace folio
