// Compiled once per Highway target, like the attention kernel, and
// dispatched at run time. AVX3_DL too, as the attention and packed matmul
// kernels are, so that DispatchedSimdTarget names the target they run.
#define HWY_WANT_AVX3_DL
#include "bench/memory_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/memory_bandwidth.cc"
// foreach_target.h re-includes this file once per target: it comes first.
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace folio::bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sum of words[0, n). Four independent accumulators keep several loads in
// flight per cycle, so the loop is limited by memory, not by the add chain.
uint64_t SumWords(const uint64_t* HWY_RESTRICT words, size_t n) {
  const hn::ScalableTag<uint64_t> d;
  const size_t lanes = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  size_t i = 0;
  for (; i + 4 * lanes <= n; i += 4 * lanes) {
    s0 = hn::Add(s0, hn::LoadU(d, words + i));
    s1 = hn::Add(s1, hn::LoadU(d, words + i + lanes));
    s2 = hn::Add(s2, hn::LoadU(d, words + i + 2 * lanes));
    s3 = hn::Add(s3, hn::LoadU(d, words + i + 3 * lanes));
  }
  HWY_ALIGN uint64_t parts[HWY_MAX_BYTES / 8];
  hn::Store(hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)), d, parts);
  uint64_t sum = 0;
  for (size_t k = 0; k < lanes; ++k) sum += parts[k];
  for (; i < n; ++i) sum += words[i];
  return sum;
}

int64_t TargetBit() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace folio::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace folio::bench {

HWY_EXPORT(SumWords);
HWY_EXPORT(TargetBit);

namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

std::string DispatchedSimdTarget() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(TargetBit)()); }

Result<ReadProbe> ReadProbe::Create(uint64_t buffer_bytes, ThreadPool& pool) {
  const uint64_t threads = pool.num_threads();
  const uint64_t bytes = buffer_bytes / (64 * threads) * (64 * threads);
  if (bytes == 0) {
    return Status::InvalidArgument("bandwidth buffer of " + std::to_string(buffer_bytes) +
                                   " bytes holds no 64-byte line per thread (" +
                                   std::to_string(threads) + " threads)");
  }
  AlignedBuffer buffer(bytes);
  const uint64_t words_per_thread = bytes / 8 / threads;
  auto* words = reinterpret_cast<uint64_t*>(buffer.data());
  // Distinct non-zero words, written by the thread that will read them.
  pool.ParallelFor(threads, [&](size_t t) {
    uint64_t* w = words + t * words_per_thread;
    for (uint64_t i = 0; i < words_per_thread; ++i) w[i] = i * 0x9e3779b97f4a7c15ULL + t;
  });
  return ReadProbe(std::move(buffer), bytes, pool);
}

uint64_t ReadProbe::Pass() const {
  const uint64_t threads = pool_->num_threads();
  const uint64_t words_per_thread = bytes_ / 8 / threads;
  const auto* words = reinterpret_cast<const uint64_t*>(buffer_.data());
  std::vector<uint64_t> sums(threads, 0);
  pool_->ParallelFor(threads, [&](size_t t) {
    sums[t] = HWY_DYNAMIC_DISPATCH(SumWords)(words + t * words_per_thread, words_per_thread);
  });
  uint64_t sum = 0;
  for (uint64_t s : sums) sum += s;
  return sum;
}

Result<BandwidthResult> MeasureReadBandwidth(const ReadProbe& probe, uint64_t passes) {
  if (passes == 0) return Status::InvalidArgument("bandwidth: 0 passes measure nothing");
  BandwidthResult result;
  result.buffer_bytes = probe.bytes();
  result.threads = probe.threads();
  for (uint64_t pass = 0; pass <= passes; ++pass) {  // pass 0 warms up
    const auto start = std::chrono::steady_clock::now();
    result.checksum += probe.Pass();
    const double seconds = Seconds(std::chrono::steady_clock::now() - start);
    if (pass == 0) continue;
    const double gbps = static_cast<double>(probe.bytes()) / seconds / 1e9;
    result.pass_gbps.push_back(gbps);
    result.best_gbps = std::max(result.best_gbps, gbps);
  }
  return result;
}

Result<BandwidthResult> MeasureReadBandwidth(uint64_t buffer_bytes, uint64_t passes,
                                             ThreadPool& pool) {
  if (passes == 0) return Status::InvalidArgument("bandwidth: 0 passes measure nothing");
  FOLIO_ASSIGN_OR_RETURN(const ReadProbe probe, ReadProbe::Create(buffer_bytes, pool));
  return MeasureReadBandwidth(probe, passes);
}

}  // namespace folio::bench
#endif  // HWY_ONCE
