#include "folio/server/channel.h"

#include <gtest/gtest.h>

namespace folio::server {
namespace {

TEST(Channel, NotifyAfterEachPushAndTryTakeNeverWaits) {
  Channel ch;
  std::vector<Event> got;
  EXPECT_FALSE(ch.TryTake(got));
  ch.Push(Event{});  // before the callback: not announced
  int notified = 0;
  ch.SetNotify([&] { ++notified; });
  ch.Push(Event{});
  ch.Push(Event{});
  EXPECT_EQ(notified, 2);
  EXPECT_TRUE(ch.TryTake(got));
  EXPECT_EQ(got.size(), 3u);
  EXPECT_FALSE(ch.TryTake(got));
  ch.SetNotify(nullptr);
  ch.Push(Event{});
  EXPECT_EQ(notified, 2);
}

TEST(Channel, WaitTimesOutEmptyAndReturnsEverythingQueued) {
  Channel ch;
  std::vector<Event> got;
  EXPECT_FALSE(ch.Wait(got, std::chrono::milliseconds(1)));
  Event a;
  a.key = 1;
  Event b;
  b.key = 2;
  ch.Push(a);
  ch.Push(b);
  EXPECT_TRUE(ch.Wait(got, std::chrono::milliseconds(1)));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].key, 1u);
  EXPECT_EQ(got[1].key, 2u);
}

}  // namespace
}  // namespace folio::server
