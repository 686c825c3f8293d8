#include "folio/engine/drafter.h"

#include <gtest/gtest.h>

#include <vector>

namespace folio::engine {
namespace {

using V = std::vector<int32_t>;

TEST(NgramDrafter, ProposesWhatFollowedTheMostRecentMatch) {
  const NgramDrafter d(1, 3);
  // "5 6" occurs at 1 and 5; the later one is followed by 9 9 (then 5 6).
  const V tokens = {4, 5, 6, 7, 8, 5, 6, 9, 9, 5, 6};
  EXPECT_EQ(d.Propose(tokens, 2), (V{9, 9}));
  EXPECT_EQ(d.Propose(tokens, 8), (V{9, 9, 5, 6}));  // up to the end
}

TEST(NgramDrafter, PrefersTheLongestMatchingSuffix) {
  const NgramDrafter d(1, 3);
  // Last 3 tokens "1 2 3" match at 0 (-> 4); the 1-gram "3" matches later (-> 9).
  const V tokens = {1, 2, 3, 4, 0, 3, 9, 1, 2, 3};
  EXPECT_EQ(d.Propose(tokens, 1), (V{4}));
  const NgramDrafter unigram(1, 1);
  EXPECT_EQ(unigram.Propose(tokens, 1), (V{9}));
}

TEST(NgramDrafter, NothingWithoutAMatchOrRoom) {
  const NgramDrafter d(2, 4);
  EXPECT_TRUE(d.Propose(V{1, 2, 3, 4, 5}, 4).empty());  // no repeated 2-gram
  EXPECT_TRUE(d.Propose(V{7, 7}, 4).empty());           // too short for n = 2
  EXPECT_TRUE(d.Propose(V{}, 4).empty());
  EXPECT_TRUE(d.Propose(V{1, 2, 1, 2}, 0).empty());
  EXPECT_EQ(d.Propose(V{1, 2, 1, 2}, 4), (V{1, 2}));
  EXPECT_EQ(d.Propose(V{7, 7, 7}, 4), (V{7}));  // the match may overlap the suffix
}

TEST(DraftLength, GrowsWhileAcceptedWholeAndFallsBackWhereARunBreaks) {
  EXPECT_EQ(NextDraftLength(4, 4, 4, 16), 8u);  // accepted whole: twice as long
  EXPECT_EQ(NextDraftLength(8, 8, 8, 16), 16u);
  EXPECT_EQ(NextDraftLength(16, 16, 16, 16), 16u);  // at most the request's limit
  EXPECT_EQ(NextDraftLength(4, 2, 2, 16), 8u);      // the drafter had only 2: still whole
  EXPECT_EQ(NextDraftLength(16, 16, 5, 16), 6u);    // in part: one past the accepted
  EXPECT_EQ(NextDraftLength(16, 16, 0, 16), kFirstDraftLength);  // none: start again
  EXPECT_EQ(NextDraftLength(1, 1, 0, 16), kFirstDraftLength);
  EXPECT_EQ(NextDraftLength(16, 16, 0, 3), 3u);  // a limit below the first length
  EXPECT_EQ(NextDraftLength(7, 0, 0, 16), 7u);   // nothing drafted: unchanged
  EXPECT_EQ(NextDraftLength(7, 0, 0, 5), 5u);
  EXPECT_EQ(NextDraftLength(0, 0, 0, 5), 1u);  // never 0
}

}  // namespace
}  // namespace folio::engine
