// The machine's streaming read bandwidth, measured the way a decode kernel
// reads K/V: every thread of the pool sums the 64-bit words of its own slice
// of one buffer far larger than the last-level cache, with SIMD loads (the
// best Highway target this CPU has, as the attention kernel uses).
#ifndef FOLIO_BENCH_MEMORY_BANDWIDTH_H_
#define FOLIO_BENCH_MEMORY_BANDWIDTH_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "folio/core/aligned_buffer.h"
#include "folio/core/status.h"
#include "folio/core/thread_pool.h"

namespace folio::bench {

struct BandwidthResult {
  uint64_t buffer_bytes = 0;
  uint64_t threads = 0;
  std::vector<double> pass_gbps;  // one per timed pass, GB = 1e9 bytes
  double best_gbps = 0.0;         // max of pass_gbps
  uint64_t checksum = 0;          // the sum read, so no pass can be elided
};

// A buffer to stream-read, kept so that passes can be interleaved with
// other work (a kernel timed beside it, round by round).
class ReadProbe {
 public:
  // Allocates buffer_bytes, rounded down to a multiple of 64 * threads (an
  // error if that leaves nothing), and fills word i of thread t's slice with
  // i * 0x9e3779b97f4a7c15 + t, written by thread t.
  static Result<ReadProbe> Create(uint64_t buffer_bytes, ThreadPool& pool);

  // One read of the whole buffer: a ParallelFor over the pool's threads,
  // one equal slice per thread. Returns the sum read, so that no pass can
  // be elided.
  uint64_t Pass() const;

  uint64_t bytes() const { return bytes_; }
  uint64_t threads() const { return pool_->num_threads(); }

 private:
  ReadProbe(AlignedBuffer buffer, uint64_t bytes, ThreadPool& pool)
      : buffer_(std::move(buffer)), bytes_(bytes), pool_(&pool) {}

  AlignedBuffer buffer_;  // [threads, bytes / 8 / threads] uint64
  uint64_t bytes_;
  ThreadPool* pool_;
};

// One untimed pass of `probe`, then `passes` timed passes (>= 1).
Result<BandwidthResult> MeasureReadBandwidth(const ReadProbe& probe, uint64_t passes);

// The same over a ReadProbe of its own, freed before returning.
Result<BandwidthResult> MeasureReadBandwidth(uint64_t buffer_bytes, uint64_t passes,
                                             ThreadPool& pool);

// The best Highway target the SIMD code of this binary dispatches to
// ("AVX3_DL", "AVX3", "AVX2", ...): the attention and packed matmul
// kernels' (built with AVX3_DL, for VNNI); the float matmul kernels stop at
// AVX3.
std::string DispatchedSimdTarget();

}  // namespace folio::bench

#endif  // FOLIO_BENCH_MEMORY_BANDWIDTH_H_
