#include "folio/core/splitmix64.h"

#include <gtest/gtest.h>

namespace folio {
namespace {

// Published SplitMix64 outputs for seed 0 (the generator's reference
// implementation by Vigna).
TEST(SplitMix64, MatchesReferenceStreamForSeedZero) {
  SplitMix64 rng(0);
  EXPECT_EQ(rng.NextU64(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(rng.NextU64(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(rng.NextU64(), 0x06c45d188009454fULL);
}

TEST(SplitMix64, PeekDoesNotAdvance) {
  SplitMix64 rng(20);
  const uint64_t peek = rng.PeekU64();
  EXPECT_EQ(rng.state(), 20u);
  EXPECT_EQ(rng.NextU64(), peek);
}

TEST(SplitMix64, UnitIsInHalfOpenInterval) {
  SplitMix64 rng(7);
  for (int i = 0; i < 10000; ++i) {
    const double u = rng.NextUnit();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

}  // namespace
}  // namespace folio
