// The machine's streaming read bandwidth, measured the way a decode kernel
// reads K/V: every thread of the pool sums the 64-bit words of its own slice
// of one buffer far larger than the last-level cache, with SIMD loads (the
// best Highway target this CPU has, as the attention kernel uses).
#ifndef FOLIO_BENCH_MEMORY_BANDWIDTH_H_
#define FOLIO_BENCH_MEMORY_BANDWIDTH_H_

#include <cstdint>
#include <string>
#include <vector>

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

// Allocates and fills buffer_bytes (rounded down to a multiple of
// 64 * threads), runs one untimed pass and then `passes` timed passes
// (>= 1), each a ParallelFor over the pool's threads with one equal slice
// per thread, and frees the buffer before returning.
Result<BandwidthResult> MeasureReadBandwidth(uint64_t buffer_bytes,
                                             uint64_t passes, ThreadPool& pool);

// The Highway target the SIMD code of this binary dispatches to ("AVX3",
// "AVX2", ...): the kernel's target too, since both are built the same way.
std::string DispatchedSimdTarget();

}  // namespace folio::bench

#endif  // FOLIO_BENCH_MEMORY_BANDWIDTH_H_
