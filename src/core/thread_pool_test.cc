#include "folio/core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <system_error>
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

// A worker whose core is taken (here: one that is held back before it
// looks for work) must not hold the caller up: the caller runs every index
// itself and returns. Before the caller stole the rest, ParallelFor waited
// for every worker to run, so this test hung until the release below,
// which only comes after it returned (the future's guard turns a hang into
// a failure instead of ctest's timeout).
TEST(ThreadPool, CallerDoesNotWaitForAWorkerThatIsNotScheduled) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto pool = ThreadPool::Create(2, [released](std::function<void()> body) {
    return std::thread([released, body = std::move(body)] {
      released.wait();
      body();
    });
  });
  ASSERT_TRUE(pool.ok());
  std::vector<std::atomic<int>> hits(16);
  auto done = std::async(std::launch::async, [&] {
    for (int round = 0; round < 3; ++round) {
      (*pool)->ParallelFor(hits.size(), [&](size_t i) { hits[i].fetch_add(1); });
    }
  });
  const bool returned = done.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  release.set_value();
  done.wait();
  EXPECT_TRUE(returned);
  for (size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i].load(), 3) << i;
  // The late worker joins in from now on without taking a stale index.
  for (int round = 0; round < 200; ++round) {
    (*pool)->ParallelFor(hits.size(), [&](size_t i) { hits[i].fetch_add(1); });
  }
  for (size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i].load(), 203) << i;
}

// Many short loops back to back on 4 threads: a worker still leaving one
// loop while the next starts must never run an index twice or skip one.
TEST(ThreadPool, BackToBackLoopsNeverShareAnIndex) {
  ThreadPool pool(4);
  for (size_t n : {1, 2, 3, 5, 8}) {
    std::vector<std::atomic<int>> hits(n);
    for (int round = 0; round < 2000; ++round) {
      pool.ParallelFor(n, [&](size_t i) { hits[i].fetch_add(1); });
    }
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 2000) << n << " " << i;
  }
}

// Starts threads as std::thread does, except that the `fail_at`-th start
// (1-based) throws as std::thread does when the system refuses a thread.
// Counts the threads that started and the ones whose body has returned.
struct FailingStarter {
  size_t fail_at;
  std::atomic<size_t> started{0};
  std::atomic<size_t> finished{0};

  ThreadPool::StartThread Get() {
    return [this](std::function<void()> body) {
      if (started.load() + 1 == fail_at) {
        throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                                "injected");
      }
      started.fetch_add(1);
      return std::thread([this, body = std::move(body)] {
        body();
        finished.fetch_add(1);
      });
    };
  }
};

// Before the fix the started workers were neither stopped nor joined, and
// the pool's destruction hung in pthread_cond_destroy (ctest's timeout).
TEST(ThreadPool, CreateStopsAndJoinsStartedWorkersWhenOneFailsToStart) {
  FailingStarter starter{3};
  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::Create(5, starter.Get());
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.error().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(pool.error().message().find("worker thread 3 of 4 could not start"), std::string::npos)
      << pool.error().ToString();
  // Joined before Create returned: every started worker has finished.
  EXPECT_EQ(starter.started.load(), 2u);
  EXPECT_EQ(starter.finished.load(), 2u);
}

TEST(ThreadPool, ConstructorThrowsAfterJoiningWhenOneFailsToStart) {
  FailingStarter starter{2};
  try {
    ThreadPool pool(4, starter.Get());
    FAIL() << "constructed a pool whose second worker could not start";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("worker thread 2 of 3 could not start"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(starter.started.load(), 1u);
  EXPECT_EQ(starter.finished.load(), 1u);
}

TEST(ThreadPool, CreateWithAStarterThatNeverFailsRuns) {
  FailingStarter starter{0};
  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::Create(3, starter.Get());
  ASSERT_TRUE(pool.ok()) << pool.error().ToString();
  EXPECT_EQ((*pool)->num_threads(), 3u);
  std::atomic<int> sum{0};
  (*pool)->ParallelFor(10, [&](size_t i) { sum.fetch_add(static_cast<int>(i)); });
  EXPECT_EQ(sum.load(), 45);
  pool->reset();
  EXPECT_EQ(starter.finished.load(), 2u);
}

}  // namespace
}  // namespace folio
