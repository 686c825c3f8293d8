#include "folio/core/aligned_buffer.h"

#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace folio {

AlignedBuffer::AlignedBuffer(size_t size_bytes) : size_(size_bytes) {
  if (size_bytes == 0) return;
  const size_t rounded = (size_bytes + kAlignment - 1) / kAlignment * kAlignment;
  const bool huge = rounded >= kHugePageMinBytes;
  void* p = nullptr;
  if (posix_memalign(&p, huge ? kHugePageBytes : kAlignment, rounded) != 0) {
    throw std::bad_alloc();
  }
#if defined(MADV_HUGEPAGE)
  // A hint: where transparent huge pages are off the call fails or does
  // nothing, and the buffer simply stays on small pages.
  if (huge) (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
  std::memset(p, 0, rounded);  // the first touch, after the hint
  data_.reset(static_cast<std::byte*>(p));
}

}  // namespace folio
