#include "folio/core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <new>
#include <stdexcept>
#include <system_error>

#include "folio/core/check.h"
#include "folio/core/str_cat.h"

namespace folio {
namespace {

// How long a thread waits for the next step of work by spinning before it
// sleeps on a condition variable. Waking a sleeping thread costs a futex
// call and, in a VM, often a halted vCPU's wake-up: tens of microseconds per
// ParallelFor, paid by every layer of every decode step. Work usually
// follows within this window; an idle pool stops spinning after it.
constexpr auto kSpinFor = std::chrono::microseconds(200);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() holds or kSpinFor passes; true if done() held.
template <typename Done>
bool SpinUntil(const Done& done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinFor;
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

}  // namespace

Result<std::unique_ptr<ThreadPool>> ThreadPool::Create(size_t num_threads,
                                                       const StartThread& start) {
  std::unique_ptr<ThreadPool> pool(new ThreadPool());
  FOLIO_RETURN_IF_ERROR(pool->StartWorkers(num_threads, start));
  return pool;
}

ThreadPool::ThreadPool(size_t num_threads, const StartThread& start) {
  const Status status = StartWorkers(num_threads, start);
  if (!status.ok()) {
    throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                            status.message());
  }
}

Status ThreadPool::StartWorkers(size_t num_threads, const StartThread& start) {
  if (num_threads == 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  const size_t num_workers = num_threads - 1;
  try {
    // Reserved first, so adding a started thread below cannot throw (a
    // std::thread destroyed while joinable would terminate the process).
    workers_.reserve(num_workers);
  } catch (const std::exception& e) {
    return Status::ResourceExhausted(StrCat("thread pool of ", num_threads,
                                            " threads: cannot reserve ", num_workers,
                                            " workers: ", e.what()));
  }
  const auto body = [this] { WorkerLoop(); };
  for (size_t i = 0; i < num_workers; ++i) {
    try {
      workers_.push_back(start ? start(body) : std::thread(body));
    } catch (const std::exception& e) {
      // The workers already started wait on this pool's condition
      // variables: stop and join them before the pool's members go away.
      StopAndJoin();
      workers_.clear();
      stop_.store(false);
      return Status::ResourceExhausted(StrCat("thread pool of ", num_threads,
                                              " threads: worker thread ", i + 1, " of ",
                                              num_workers, " could not start: ", e.what()));
    }
  }
  return Status::Ok();
}

void ThreadPool::StopAndJoin() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadPool::~ThreadPool() { StopAndJoin(); }

namespace {
// The index part of ThreadPool::next_ once a loop's last index is claimed:
// no task count reaches it, so a stale claim attempt always stops there.
constexpr uint64_t kExhausted = 0xffffffff;
}  // namespace

void ThreadPool::RunTasks(uint32_t generation) {
  uint64_t v = next_.load(std::memory_order_acquire);
  while (true) {
    if (static_cast<uint32_t>(v >> 32) != generation) return;  // a newer loop
    const uint64_t i = v & kExhausted;
    // This loop's count while index i is unclaimed (the loop cannot end
    // before); if the loop ended meanwhile, the word has changed and the
    // swap below fails.
    const size_t n = num_tasks_.load(std::memory_order_relaxed);
    if (i >= n) return;
    const uint64_t claimed = i + 1 == n ? (v & ~kExhausted) | kExhausted : v + 1;
    if (!next_.compare_exchange_weak(v, claimed, std::memory_order_acq_rel)) continue;
    (*fn_)(i);
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
      // Under the mutex, so a caller about to sleep cannot miss it.
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
    v = next_.load(std::memory_order_acquire);
  }
}

void ThreadPool::WorkerLoop() {
  uint32_t seen = 0;
  const auto has_work = [&] { return stop_.load() || generation_.load() != seen; };
  while (true) {
    if (!SpinUntil(has_work)) {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, has_work);
    }
    if (stop_.load()) return;
    seen = generation_.load();
    RunTasks(seen);
  }
}

void ThreadPool::ParallelFor(size_t n, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  if (workers_.empty() || n == 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  FOLIO_CHECK(n < kExhausted, "ParallelFor of ", n, " tasks: at most 2^32 - 2");
  fn_ = &fn;
  num_tasks_.store(n, std::memory_order_relaxed);
  done_.store(0);
  uint32_t generation;
  {
    // Published under the mutex, so a worker about to sleep cannot miss it;
    // spinning workers see the new generation directly.
    std::lock_guard<std::mutex> lock(mu_);
    generation = generation_.load() + 1;
    next_.store(uint64_t{generation} << 32, std::memory_order_release);
    generation_.store(generation);
  }
  start_cv_.notify_all();
  RunTasks(generation);
  const auto all_done = [&] { return done_.load(std::memory_order_acquire) == n; };
  if (!SpinUntil(all_done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, all_done);
  }
  fn_ = nullptr;
}

}  // namespace folio
