#include "folio/core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace folio {
namespace {

TEST(ThreadPool, RunsEveryIndexExactlyOnce) {
  for (size_t threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (size_t n : {0, 1, 3, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](size_t i) { hits[i].fetch_add(1); });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << i;
    }
  }
}

TEST(ThreadPool, ReusableAcrossManyCalls) {
  ThreadPool pool(3);
  std::atomic<size_t> total{0};
  for (int round = 0; round < 500; ++round) {
    pool.ParallelFor(7, [&](size_t i) { total.fetch_add(i); });
  }
  EXPECT_EQ(total.load(), 500u * 21u);
}

// Workers spin for a while after each loop, then sleep: a loop must reach
// them in either state (every index runs exactly once), and the pool is
// destroyed at the end while they sleep (a hang there fails the test by
// ctest's timeout).
TEST(ThreadPool, WakesSleepingAndSpinningWorkers) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(9);
  for (int round = 0; round < 6; ++round) {
    pool.ParallelFor(hits.size(), [&](size_t i) { hits[i].fetch_add(1); });
    if (round % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  for (size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i].load(), 6) << i;
}

}  // namespace
}  // namespace folio
