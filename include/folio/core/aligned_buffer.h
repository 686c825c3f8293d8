// A 64-byte aligned, zero-initialised, movable byte buffer: storage for K/V
// pages and weights (cache-line aligned so SIMD loads never split a line at
// the start of a row).
#ifndef FOLIO_CORE_ALIGNED_BUFFER_H_
#define FOLIO_CORE_ALIGNED_BUFFER_H_

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <span>

namespace folio {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size_bytes) : size_(size_bytes) {
    if (size_bytes == 0) return;
    const size_t rounded = (size_bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded);
    if (p == nullptr) throw std::bad_alloc();
    std::memset(p, 0, rounded);
    data_.reset(static_cast<std::byte*>(p));
  }

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
