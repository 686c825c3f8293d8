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
// must name the pinned one, or the pin did not take. `generated` defaults to
// the including file's HWY_TARGETS, expanded there: a kernel built with more
// targets (HWY_WANT_AVX3_DL) is enumerated by a test that defines the same
// (hwy::SupportedAndGeneratedTargets is an inline function, so the linker
// keeps one file's idea of it).
inline void ForEachSimdTarget(const char* (*dispatched)(), const std::function<void()>& fn,
                              int64_t generated = HWY_TARGETS) {
  for (int64_t left = hwy::SupportedTargets() & generated; left != 0; left &= left - 1) {
    const int64_t target = left & -left;
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    EXPECT_STREQ(dispatched(), hwy::TargetName(target));
    fn();
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace folio::test_support

#endif  // FOLIO_TESTING_SIMD_TARGETS_H_
