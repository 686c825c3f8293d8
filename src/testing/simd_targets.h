// Test support: run a check once per SIMD target a Highway kernel was built
// for, so that the AVX2 and baseline paths are tested on a machine whose
// best target is AVX-512, not only on the machines that would pick them.
#ifndef FOLIO_TESTING_SIMD_TARGETS_H_
#define FOLIO_TESTING_SIMD_TARGETS_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>

#include "hwy/targets.h"

namespace folio::test_support {

// Runs fn once for every target this CPU supports among those the including
// test was compiled for, with HWY_DYNAMIC_DISPATCH pinned to it. Compile the
// test with the kernel library's HWY_DISABLED_TARGETS so that the two sets
// agree. `dispatched` returns the target the kernel under test ran as; it
// must name the pinned one, or the pin did not take.
inline void ForEachSimdTarget(const char* (*dispatched)(), const std::function<void()>& fn) {
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    EXPECT_STREQ(dispatched(), hwy::TargetName(target));
    fn();
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace folio::test_support

#endif  // FOLIO_TESTING_SIMD_TARGETS_H_
