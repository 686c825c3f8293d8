#include "folio/kv/layer_cache.h"

#include <cmath>
#include <limits>
#include <string>

#include "folio/core/checked_math.h"

namespace folio::kv {

Result<LayerCache> LayerCache::Create(PageTableLayout layout, LaneShape shape, DType dtype) {
  if (shape.batch == 0 || shape.num_kv_heads == 0 || shape.head_dim == 0) {
    return Status::InvalidArgument(
        "cache batch, num_kv_heads and head_dim must be > 0 (got " + std::to_string(shape.batch) +
        ", " + std::to_string(shape.num_kv_heads) + ", " + std::to_string(shape.head_dim) + ")");
  }
  if (IsQuantized(dtype)) {
    return Status::Unimplemented(
        "KV dtype " + std::string(DTypeName(dtype)) +
        " needs a scale per page, which only the engine's paged cache keeps "
        "(kv/paged_kv_cache.h)");
  }
  const auto bytes = CheckedProduct({layout.reserved_positions(), shape.batch, shape.num_kv_heads,
                                     shape.head_dim, DTypeSize(dtype)});
  if (!bytes || *bytes > std::numeric_limits<size_t>::max() / 2) {
    return Status::OutOfRange("layer cache size overflows: " +
                              std::to_string(layout.reserved_positions()) + " positions");
  }
  return LayerCache(std::move(layout), shape, dtype);
}

LayerCache::LayerCache(PageTableLayout layout, LaneShape shape, DType dtype)
    : layout_(std::move(layout)), shape_(shape), dtype_(dtype) {
  const uint64_t slots =
      layout_.reserved_positions() * shape_.batch * shape_.num_kv_heads * shape_.head_dim;
  keys_ = AlignedBuffer(slots * DTypeSize(dtype_));
  values_ = AlignedBuffer(slots * DTypeSize(dtype_));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (uint64_t i = 0; i < slots; ++i) {
    StoreElement(dtype_, keys_.data(), i, nan);
    StoreElement(dtype_, values_.data(), i, nan);
  }
}

template <typename T>
Status LayerCache::CheckRows(std::span<const T> keys, std::span<const T> values, uint64_t n) const {
  if (pending_ != 0) {
    return Status::FailedPrecondition(std::to_string(pending_) +
                                      " staged rows are neither committed nor discarded");
  }
  if (length_ + n > layout_.capacity()) {
    return Status::ResourceExhausted("appending " + std::to_string(n) + " positions to length " +
                                     std::to_string(length_) + " exceeds capacity " +
                                     std::to_string(layout_.capacity()));
  }
  const uint64_t expected = shape_.batch * shape_.num_kv_heads * n * shape_.head_dim;
  if (keys.size() != expected || values.size() != expected) {
    return Status::InvalidArgument(
        "K/V rows must be [batch=" + std::to_string(shape_.batch) +
        ", kv_heads=" + std::to_string(shape_.num_kv_heads) + ", n=" + std::to_string(n) +
        ", head_dim=" + std::to_string(shape_.head_dim) + "] = " + std::to_string(expected) +
        " values (got keys " + std::to_string(keys.size()) + ", values " +
        std::to_string(values.size()) + ")");
  }
  for (const auto* rows : {&keys, &values}) {
    for (size_t i = 0; i < rows->size(); ++i) {
      if (!std::isfinite((*rows)[i])) {
        return Status::InvalidArgument(std::string(rows == &keys ? "key" : "value") + " element " +
                                       std::to_string(i) + " is not finite");
      }
    }
  }
  return Status::Ok();
}

template <typename T>
void LayerCache::WriteRows(std::span<const T> keys, std::span<const T> values, uint64_t n) {
  const uint64_t d = shape_.head_dim;
  size_t src = 0;
  for (uint64_t b = 0; b < shape_.batch; ++b) {
    for (uint64_t h = 0; h < shape_.num_kv_heads; ++h) {
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t row = layout_.ScalarIndexOf(shape_, length_ + i, b, h, 0);
        for (uint64_t f = 0; f < d; ++f, ++src) {
          StoreElement(dtype_, keys_.data(), row + f, keys[src]);
          StoreElement(dtype_, values_.data(), row + f, values[src]);
        }
      }
    }
  }
}

template <typename T>
Status LayerCache::Append(std::span<const T> keys, std::span<const T> values, uint64_t n) {
  FOLIO_RETURN_IF_ERROR(Stage(keys, values, n));
  Commit();
  return Status::Ok();
}

template <typename T>
Status LayerCache::Stage(std::span<const T> keys, std::span<const T> values, uint64_t n) {
  FOLIO_RETURN_IF_ERROR(CheckRows(keys, values, n));
  WriteRows(keys, values, n);
  pending_ = n;
  return Status::Ok();
}

void LayerCache::Commit() {
  length_ += pending_;
  pending_ = 0;
}

void LayerCache::Discard() { pending_ = 0; }

void LayerCache::Reset() {
  length_ = 0;
  pending_ = 0;
}

template <typename T>
void LayerCache::ReadRow(KvRole role, uint64_t b, uint64_t h, uint64_t pos, T* out) const {
  FOLIO_CHECK(pos < length_ + pending_, "pos=", pos, " visible=", length_ + pending_);
  FOLIO_CHECK(b < shape_.batch && h < shape_.num_kv_heads);
  const std::byte* base = role == KvRole::kKey ? keys_.data() : values_.data();
  const uint64_t row = layout_.ScalarIndexOf(shape_, pos, b, h, 0);
  for (uint64_t f = 0; f < shape_.head_dim; ++f) {
    out[f] = LoadElement<T>(dtype_, base, row + f);
  }
}

template <typename T>
KvSnapshot<T> LayerCache::Snapshot() const {
  KvSnapshot<T> snap;
  snap.length = length_;
  const uint64_t d = shape_.head_dim;
  const size_t total = shape_.batch * shape_.num_kv_heads * length_ * d;
  snap.keys.resize(total);
  snap.values.resize(total);
  size_t dst = 0;
  for (uint64_t b = 0; b < shape_.batch; ++b) {
    for (uint64_t h = 0; h < shape_.num_kv_heads; ++h) {
      for (uint64_t pos = 0; pos < length_; ++pos, dst += d) {
        ReadRow(KvRole::kKey, b, h, pos, snap.keys.data() + dst);
        ReadRow(KvRole::kValue, b, h, pos, snap.values.data() + dst);
      }
    }
  }
  return snap;
}

KvArrayView LayerCache::View(KvRole role) const {
  return KvArrayView{role == KvRole::kKey ? keys_.data() : values_.data(),
                     dtype_,
                     layout_.table().data(),
                     layout_.num_pages(),
                     layout_.page_size(),
                     shape_,
                     length_ + pending_};
}

#define FOLIO_INSTANTIATE(T)                                                               \
  template Status LayerCache::Append<T>(std::span<const T>, std::span<const T>, uint64_t); \
  template Status LayerCache::Stage<T>(std::span<const T>, std::span<const T>, uint64_t);  \
  template void LayerCache::ReadRow<T>(KvRole, uint64_t, uint64_t, uint64_t, T*) const;    \
  template KvSnapshot<T> LayerCache::Snapshot<T>() const;
FOLIO_INSTANTIATE(float)
FOLIO_INSTANTIATE(double)
#undef FOLIO_INSTANTIATE

}  // namespace folio::kv
