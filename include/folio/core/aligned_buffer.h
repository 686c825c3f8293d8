// A 64-byte aligned, zero-initialised, movable byte buffer: storage for K/V
// pages and weights (cache-line aligned so SIMD loads never split a line at
// the start of a row). Buffers of kHugePageMinBytes or more are aligned to
// 2 MiB and asked to be backed by transparent huge pages before they are
// first touched: a paged K/V walk jumps between small blocks all over the
// pool, and with 4 KiB pages nearly every block costs a TLB miss.
#ifndef FOLIO_CORE_ALIGNED_BUFFER_H_
#define FOLIO_CORE_ALIGNED_BUFFER_H_

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>

namespace folio {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kHugePageBytes = size_t{2} << 20;
  static constexpr size_t kHugePageMinBytes = 2 * kHugePageBytes;

  AlignedBuffer() = default;
  // Throws std::bad_alloc when the memory is not there.
  explicit AlignedBuffer(size_t size_bytes);

  AlignedBuffer(AlignedBuffer&&) noexcept = default;
  AlignedBuffer& operator=(AlignedBuffer&&) noexcept = default;

  AlignedBuffer Clone() const {
    AlignedBuffer copy(size_);
    if (size_ != 0) std::memcpy(copy.data(), data(), size_);
    return copy;
  }

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }
  std::span<std::byte> bytes() { return {data(), size_}; }
  std::span<const std::byte> bytes() const { return {data(), size_}; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte[], Free> data_;
  size_t size_ = 0;
};

}  // namespace folio

#endif  // FOLIO_CORE_ALIGNED_BUFFER_H_
