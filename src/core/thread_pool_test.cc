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
// them in either state, and the pool must shut down from either.
TEST(ThreadPool, WakesSleepingAndSpinningWorkers) {
  ThreadPool pool(3);
  std::atomic<size_t> total{0};
  for (int round = 0; round < 6; ++round) {
    pool.ParallelFor(9, [&](size_t i) { total.fetch_add(i + 1); });
    if (round % 2 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  EXPECT_EQ(total.load(), 6u * 45u);
}

TEST(ThreadPool, ShutsDownWhileWorkersSleep) {
  ThreadPool pool(2);
  pool.ParallelFor(2, [](size_t) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
}

}  // namespace
}  // namespace folio
