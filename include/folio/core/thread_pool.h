// A fixed pool of worker threads for data-parallel loops.
//
// ParallelFor(n, fn) runs fn(0..n-1) and returns when all have finished.
// Which thread runs which index is unspecified, so callers make every
// index write its own output: results then never depend on the thread count
// (docs/design.md, contract 3). The calling thread takes part, so
// a pool of 1 thread runs everything inline. Idle threads spin briefly
// before they sleep, so back-to-back loops (every layer of a decode step)
// do not pay a thread wake-up each.
//
// Indices are claimed one at a time, and ParallelFor returns as soon as
// every index has run: it waits for the tasks other threads claimed, never
// for a worker that has not been scheduled yet. So when another process
// holds a core, the caller runs the unclaimed rest itself instead of
// waiting for that core's worker to wake up.
#ifndef FOLIO_CORE_THREAD_POOL_H_
#define FOLIO_CORE_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "folio/core/status.h"

namespace folio {

class ThreadPool {
 public:
  // How the pool starts one worker thread running `body`. The default is
  // std::thread, which throws std::system_error when the system cannot
  // start another thread; tests pass a starter that does that on demand.
  using StartThread = std::function<std::thread(std::function<void()> body)>;

  // num_threads >= 1 counts the caller; 0 means std::thread::hardware_concurrency().
  // If a worker cannot start, the workers already started are stopped and
  // joined before the error is reported: ResourceExhausted naming the
  // thread and the system's reason.
  static Result<std::unique_ptr<ThreadPool>> Create(size_t num_threads,
                                                    const StartThread& start = {});
  // The same, for callers that treat a pool that cannot start as fatal:
  // after stopping and joining what started it throws std::system_error
  // with Create's message (never hangs or leaves a thread running).
  explicit ThreadPool(size_t num_threads, const StartThread& start = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t num_threads() const { return workers_.size() + 1; }

  // Not reentrant: fn must not call ParallelFor on the same pool.
  void ParallelFor(size_t n, const std::function<void(size_t)>& fn);

 private:
  ThreadPool() = default;
  // Starts num_threads - 1 workers; on failure stops and joins those that
  // started, leaving no workers.
  Status StartWorkers(size_t num_threads, const StartThread& start);
  void StopAndJoin();
  void WorkerLoop();
  // Claims and runs indices of loop `generation` until none is left or a
  // newer loop has started.
  void RunTasks(uint32_t generation);

  std::vector<std::thread> workers_;
  std::mutex mu_;  // taken only to sleep and to wake sleepers
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  std::atomic<uint32_t> generation_{0};  // bumped (under mu_) per ParallelFor
  std::atomic<bool> stop_{false};        // set under mu_
  // The loop being run: written before next_ is published with the new
  // generation, read by a thread only after it claimed an index of it.
  const std::function<void(size_t)>* fn_ = nullptr;
  std::atomic<size_t> num_tasks_{0};
  // (generation << 32) | next unclaimed index, or | kExhausted once the
  // last index is claimed: a claim is one compare-and-swap that also checks
  // the loop, so a worker that wakes late for a loop that has ended can
  // never take an index of the next one.
  std::atomic<uint64_t> next_{0};
  std::atomic<size_t> done_{0};  // indices of this loop that have run
};

}  // namespace folio

#endif  // FOLIO_CORE_THREAD_POOL_H_
