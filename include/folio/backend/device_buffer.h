// Activations in a backend's memory: DeviceSpan<T> views count elements of
// T there, DeviceBuffer<T> owns an allocation. Code above the backend (the
// model's forward pass) holds these handles and passes them to backend ops;
// it cannot read or write the elements, because the data pointer is
// private to the backend. The only ways across are Backend::Write (host to
// backend), Backend::Read (backend to host) and Backend::HostView (a host
// backend's memory seen in place), and the backend counts each
// (Backend::transfers()), so a test can prove a forward step crosses only
// where it means to. The host backends' memory is the host's; a device
// backend's would be the device's, with the same handles.
#ifndef FOLIO_BACKEND_DEVICE_BUFFER_H_
#define FOLIO_BACKEND_DEVICE_BUFFER_H_

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "folio/core/check.h"

namespace folio::backend {

class Backend;

template <typename T>
class DeviceSpan {
 public:
  DeviceSpan() = default;
  // A span of T converts to a span of const T.
  template <typename U>
  requires(std::is_same_v<const U, T> && !std::is_same_v<U, T>)
      DeviceSpan(DeviceSpan<U> other)  // NOLINT(google-explicit-constructor)
      : data_(other.data_), size_(other.size_) {}

  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Elements [offset, offset + count), which must lie inside (checked).
  DeviceSpan subspan(uint64_t offset, uint64_t count) const {
    FOLIO_CHECK(offset <= size_ && count <= size_ - offset, "subspan [", offset, ", +", count,
                ") of ", size_);
    return DeviceSpan(data_ + offset, count);
  }
  DeviceSpan first(uint64_t count) const { return subspan(0, count); }

 private:
  friend class Backend;
  template <typename>
  friend class DeviceSpan;
  template <typename>
  friend class DeviceBuffer;
  DeviceSpan(T* data, uint64_t size) : data_(data), size_(size) {}

  T* data_ = nullptr;
  uint64_t size_ = 0;
};

// Owns `size` elements of T that a backend allocated (Backend::Allocate);
// frees them when the last copy of the handle goes (the memory is shared
// between copies, like a shared_ptr). An empty buffer is a valid "none"
// (an absent bias).
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;

  uint64_t size() const { return span_.size(); }
  bool empty() const { return span_.empty(); }
  DeviceSpan<T> span() const { return span_; }
  operator DeviceSpan<T>() const { return span_; }        // NOLINT(google-explicit-constructor)
  operator DeviceSpan<const T>() const { return span_; }  // NOLINT(google-explicit-constructor)

 private:
  friend class Backend;
  DeviceBuffer(std::shared_ptr<void> memory, T* data, uint64_t size)
      : memory_(std::move(memory)), span_(data, size) {}

  std::shared_ptr<void> memory_;  // the allocation; its deleter is the backend's
  DeviceSpan<T> span_;
};

}  // namespace folio::backend

#endif  // FOLIO_BACKEND_DEVICE_BUFFER_H_
