#include "folio/kv/host_kv_storage.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "folio/core/aligned_buffer.h"
#include "folio/core/check.h"
#include "folio/core/checked_math.h"

namespace folio::kv {
namespace {

// Every element NaN: one element written, then doubled by copying the
// filled prefix, so even a multi-GiB pool fills at memcpy speed. A
// quantized pool cannot hold NaN; its pages start as zeros and its scales
// as NaN, which poisons every row they scale just the same.
void FillNaN(AlignedBuffer& buf, DType dtype) {
  std::byte* data = buf.data();
  const size_t size = buf.size();
  if (IsQuantized(dtype)) {
    std::memset(data, 0, size);
    return;
  }
  StoreElement(dtype, data, 0, std::numeric_limits<float>::quiet_NaN());
  for (size_t done = DTypeSize(dtype); done < size;) {
    const size_t n = std::min(done, size - done);
    std::memcpy(data + done, data, n);
    done += n;
  }
}

// head_dim floats to consecutive elements of `base` from element `dst`.
void StoreRow(DType dtype, std::byte* base, uint64_t dst, const float* src, uint64_t head_dim) {
  if (dtype == DType::kF32) {
    std::memcpy(base + dst * sizeof(float), src, head_dim * sizeof(float));
    return;
  }
  for (uint64_t f = 0; f < head_dim; ++f) StoreElement(dtype, base, dst + f, src[f]);
}

// head_dim doubles (the float64 reference decoder's rows) the same way.
void StoreRow(DType dtype, std::byte* base, uint64_t dst, const double* src, uint64_t head_dim) {
  for (uint64_t f = 0; f < head_dim; ++f) StoreElement(dtype, base, dst + f, src[f]);
}

// head_dim floats quantized to consecutive elements of `base` from element
// `dst` with the row's own scale (kv_storage.h), which it returns: the
// largest magnitude maps to the largest code, every code rounds to nearest
// even. The clamp only catches the largest magnitude landing a rounding
// error past the largest code.
float QuantizeRow(DType dtype, std::byte* base, uint64_t dst, const float* src, uint64_t head_dim) {
  float amax = 0.0f;
  for (uint64_t f = 0; f < head_dim; ++f) amax = std::max(amax, std::abs(src[f]));
  const float scale = amax < 0x1p-100f ? 1.0f : amax / (dtype == DType::kI8 ? 127.0f : 448.0f);
  for (uint64_t f = 0; f < head_dim; ++f) {
    const float x = src[f] / scale;
    if (dtype == DType::kI8) {
      const float q = std::clamp(std::nearbyint(x), -127.0f, 127.0f);
      base[dst + f] = static_cast<std::byte>(static_cast<int8_t>(q));
    } else {
      base[dst + f] = static_cast<std::byte>(F32ToE4M3Bits(x));
    }
  }
  return scale;
}

class HostKvStorage final : public KvStorage {
 public:
  explicit HostKvStorage(const KvStorageShape& shape);

  PagedKvView View(uint64_t storage_slot) const override;
  Status WriteRows(uint64_t storage_slot, std::span<const int64_t> slot_mapping,
                   std::span<const float> keys, std::span<const float> values) override {
    FOLIO_RETURN_IF_ERROR(ValidateKvRows(shape(), slot_mapping.size(), keys, values));
    WriteRowsOf(storage_slot, slot_mapping, keys, values);
    return Status::Ok();
  }
  Status WriteRows(uint64_t storage_slot, std::span<const int64_t> slot_mapping,
                   std::span<const double> keys, std::span<const double> values) override {
    FOLIO_RETURN_IF_ERROR(ValidateKvRows(shape(), slot_mapping.size(), keys, values));
    WriteRowsOf(storage_slot, slot_mapping, keys, values);
    return Status::Ok();
  }
  void CopyPage(PageId from, PageId to) override;
  void ReadPageTokenMajor(uint64_t storage_slot, KvRole role, PageId page, uint64_t live_slots,
                          std::span<std::byte> out) const override;
  void WritePageTokenMajor(uint64_t storage_slot, KvRole role, PageId page,
                           std::span<const std::byte> in) override;
  void ReadPageScales(uint64_t storage_slot, KvRole role, PageId page, uint64_t live_slots,
                      std::span<float> out) const override;
  Status WritePageScales(uint64_t storage_slot, KvRole role, PageId page,
                         std::span<const float> in) override;
  void ReadRow(uint64_t storage_slot, KvRole role, PageId page, uint64_t offset, uint64_t head,
               float* out) const override;

 private:
  // Rows already validated; every slot checked here.
  template <typename T>
  void WriteRowsOf(uint64_t storage_slot, std::span<const int64_t> slot_mapping,
                   std::span<const T> keys, std::span<const T> values);
  void CheckPage(uint64_t storage_slot, PageId page) const {
    FOLIO_CHECK(storage_slot < shape().num_storage_slots && page >= 0 &&
                    static_cast<uint64_t>(page) < shape().num_pages,
                "storage_slot=", storage_slot, " page=", page);
  }
  const AlignedBuffer& Pool(uint64_t storage_slot, KvRole role) const {
    return (role == KvRole::kKey ? keys_ : values_)[storage_slot];
  }
  AlignedBuffer& Pool(uint64_t storage_slot, KvRole role) {
    return (role == KvRole::kKey ? keys_ : values_)[storage_slot];
  }
  // [num_pages, num_kv_heads, page_size] scales of a quantized storage;
  // null otherwise.
  const float* Scales(uint64_t storage_slot, KvRole role) const {
    if (!IsQuantized(shape().dtype)) return nullptr;
    return (role == KvRole::kKey ? key_scales_ : value_scales_)[storage_slot].data();
  }
  float* Scales(uint64_t storage_slot, KvRole role) {
    return const_cast<float*>(std::as_const(*this).Scales(storage_slot, role));
  }

  std::vector<AlignedBuffer> keys_;    // [slots] of [N, H_kv, P, d]
  std::vector<AlignedBuffer> values_;  // [slots] of [N, H_kv, P, d]
  // Quantized dtypes only: [slots] of [N, H_kv, P] scales, NaN until set.
  std::vector<std::vector<float>> key_scales_, value_scales_;
};

HostKvStorage::HostKvStorage(const KvStorageShape& shape) : KvStorage(shape) {
  for (uint64_t s = 0; s < shape.num_storage_slots; ++s) {
    for (auto* role : {&keys_, &values_}) {
      role->emplace_back(shape.num_pages * shape.page_bytes());
      FillNaN(role->back(), shape.dtype);
    }
    if (IsQuantized(shape.dtype)) {
      for (auto* role : {&key_scales_, &value_scales_}) {
        role->emplace_back(shape.num_pages * shape.scales_per_page(),
                           std::numeric_limits<float>::quiet_NaN());
      }
    }
  }
}

PagedKvView HostKvStorage::View(uint64_t storage_slot) const {
  const KvStorageShape& s = shape();
  FOLIO_CHECK(storage_slot < s.num_storage_slots, "storage_slot=", storage_slot);
  PagedKvView v{keys_[storage_slot].data(),
                values_[storage_slot].data(),
                s.dtype,
                s.num_pages,
                s.num_kv_heads,
                s.page_size,
                s.head_dim};
  v.key_scales = Scales(storage_slot, KvRole::kKey);
  v.value_scales = Scales(storage_slot, KvRole::kValue);
  return v;
}

template <typename T>
void HostKvStorage::WriteRowsOf(uint64_t storage_slot, std::span<const int64_t> slot_mapping,
                                std::span<const T> keys, std::span<const T> values) {
  const KvStorageShape& s = shape();
  const uint64_t heads = s.num_kv_heads, head_dim = s.head_dim, page_size = s.page_size;
  const uint64_t num_slots = s.num_pages * page_size;
  FOLIO_CHECK(storage_slot < s.num_storage_slots, "storage_slot=", storage_slot);
  for (const int64_t slot : slot_mapping) {
    FOLIO_CHECK(slot >= 0 && static_cast<uint64_t>(slot) < num_slots, "slot ", slot, " of ",
                num_slots);
  }
  std::byte* const key_pool = keys_[storage_slot].data();
  std::byte* const value_pool = values_[storage_slot].data();
  const LaneShape lane{1, heads, head_dim};
  for (size_t t = 0; t < slot_mapping.size(); ++t) {
    const auto slot = static_cast<uint64_t>(slot_mapping[t]);
    for (uint64_t h = 0; h < heads; ++h) {
      const uint64_t dst =
          ScalarIndex(lane, page_size, slot / page_size, slot % page_size, 0, h, 0);
      const uint64_t src = (t * heads + h) * head_dim;
      if constexpr (std::is_same_v<T, double>) {
        StoreRow(s.dtype, key_pool, dst, keys.data() + src, head_dim);
        StoreRow(s.dtype, value_pool, dst, values.data() + src, head_dim);
      } else if (IsQuantized(s.dtype)) {
        const uint64_t row = dst / head_dim;  // the row's scale (scales mirror the pool)
        key_scales_[storage_slot][row] =
            QuantizeRow(s.dtype, key_pool, dst, keys.data() + src, head_dim);
        value_scales_[storage_slot][row] =
            QuantizeRow(s.dtype, value_pool, dst, values.data() + src, head_dim);
      } else {
        StoreRow(s.dtype, key_pool, dst, keys.data() + src, head_dim);
        StoreRow(s.dtype, value_pool, dst, values.data() + src, head_dim);
      }
    }
  }
}

void HostKvStorage::CopyPage(PageId from, PageId to) {
  CheckPage(0, from);
  CheckPage(0, to);
  FOLIO_CHECK(from != to, "page ", from, " copied onto itself");
  const uint64_t page_bytes = shape().page_bytes();
  const uint64_t src = static_cast<uint64_t>(from) * page_bytes;
  const uint64_t dst = static_cast<uint64_t>(to) * page_bytes;
  for (uint64_t l = 0; l < keys_.size(); ++l) {  // every storage slot
    std::memcpy(keys_[l].data() + dst, keys_[l].data() + src, page_bytes);
    std::memcpy(values_[l].data() + dst, values_[l].data() + src, page_bytes);
    if (IsQuantized(shape().dtype)) {
      for (auto* scales : {&key_scales_[l], &value_scales_[l]}) {
        const uint64_t rows = shape().scales_per_page();
        const auto at = [&](PageId page) {
          return scales->begin() + static_cast<std::ptrdiff_t>(static_cast<uint64_t>(page) * rows);
        };
        std::copy_n(at(from), rows, at(to));
      }
    }
  }
}

void HostKvStorage::ReadPageTokenMajor(uint64_t storage_slot, KvRole role, PageId page,
                                       uint64_t live_slots, std::span<std::byte> out) const {
  CheckPage(storage_slot, page);
  const uint64_t page_bytes = shape().page_bytes();
  FOLIO_CHECK(out.size() == page_bytes, "out holds ", out.size(), " bytes of ", page_bytes);
  const uint64_t heads = shape().num_kv_heads, slots = shape().page_size;
  const uint64_t row = shape().head_dim * DTypeSize(shape().dtype);
  const std::byte* src = Pool(storage_slot, role).data() + static_cast<uint64_t>(page) * page_bytes;
  // Pool: [heads, slots, dim]; out: [slots, heads, dim].
  for (uint64_t t = 0; t < slots; ++t) {
    for (uint64_t h = 0; h < heads; ++h) {
      std::byte* dst = out.data() + (t * heads + h) * row;
      if (t < live_slots) {
        std::memcpy(dst, src + (h * slots + t) * row, row);
      } else {
        std::memset(dst, 0, row);
      }
    }
  }
}

void HostKvStorage::WritePageTokenMajor(uint64_t storage_slot, KvRole role, PageId page,
                                        std::span<const std::byte> in) {
  CheckPage(storage_slot, page);
  const uint64_t page_bytes = shape().page_bytes();
  FOLIO_CHECK(in.size() == page_bytes, "in holds ", in.size(), " bytes of ", page_bytes);
  const uint64_t heads = shape().num_kv_heads, slots = shape().page_size;
  const uint64_t row = shape().head_dim * DTypeSize(shape().dtype);
  std::byte* dst = Pool(storage_slot, role).data() + static_cast<uint64_t>(page) * page_bytes;
  for (uint64_t t = 0; t < slots; ++t) {
    for (uint64_t h = 0; h < heads; ++h) {
      std::memcpy(dst + (h * slots + t) * row, in.data() + (t * heads + h) * row, row);
    }
  }
}

void HostKvStorage::ReadPageScales(uint64_t storage_slot, KvRole role, PageId page,
                                   uint64_t live_slots, std::span<float> out) const {
  CheckPage(storage_slot, page);
  const uint64_t heads = shape().num_kv_heads, slots = shape().page_size;
  FOLIO_CHECK(IsQuantized(shape().dtype) && live_slots <= slots && out.size() == slots * heads,
              "page=", page, " live_slots=", live_slots, " out=", out.size());
  const float* src = Scales(storage_slot, role) + static_cast<uint64_t>(page) * heads * slots;
  for (uint64_t t = 0; t < slots; ++t) {
    for (uint64_t h = 0; h < heads; ++h) {
      out[t * heads + h] = t < live_slots ? src[h * slots + t] : 1.0f;
    }
  }
}

Status HostKvStorage::WritePageScales(uint64_t storage_slot, KvRole role, PageId page,
                                      std::span<const float> in) {
  CheckPage(storage_slot, page);
  const uint64_t heads = shape().num_kv_heads, slots = shape().page_size;
  FOLIO_CHECK(IsQuantized(shape().dtype) && in.size() == slots * heads, "page=", page,
              " in=", in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (!std::isfinite(in[i]) || !(in[i] > 0.0f)) {
      return Status::InvalidArgument("page " + std::to_string(page) + " slot " +
                                     std::to_string(i / heads) + " head " +
                                     std::to_string(i % heads) + " scale " + std::to_string(in[i]) +
                                     " is not a finite positive number");
    }
  }
  float* dst = Scales(storage_slot, role) + static_cast<uint64_t>(page) * heads * slots;
  for (uint64_t t = 0; t < slots; ++t) {
    for (uint64_t h = 0; h < heads; ++h) dst[h * slots + t] = in[t * heads + h];
  }
  return Status::Ok();
}

void HostKvStorage::ReadRow(uint64_t storage_slot, KvRole role, PageId page, uint64_t offset,
                            uint64_t head, float* out) const {
  const KvStorageShape& s = shape();
  CheckPage(storage_slot, page);
  FOLIO_CHECK(offset < s.page_size && head < s.num_kv_heads, "offset=", offset, " head=", head);
  const uint64_t row = ScalarIndex({1, s.num_kv_heads, s.head_dim}, s.page_size,
                                   static_cast<uint64_t>(page), offset, 0, head, 0);
  const std::byte* base = Pool(storage_slot, role).data();
  const float scale = IsQuantized(s.dtype) ? Scales(storage_slot, role)[row / s.head_dim] : 1.0f;
  for (uint64_t f = 0; f < s.head_dim; ++f) {
    out[f] = LoadElement<float>(s.dtype, base, row + f) * scale;
  }
}

}  // namespace

Result<std::unique_ptr<KvStorage>> MakeHostKvStorage(const KvStorageShape& s) {
  const std::pair<const char*, uint64_t> fields[] = {{"num_storage_slots", s.num_storage_slots},
                                                     {"num_pages", s.num_pages},
                                                     {"num_kv_heads", s.num_kv_heads},
                                                     {"page_size", s.page_size},
                                                     {"head_dim", s.head_dim}};
  for (const auto& [name, value] : fields) {
    if (value == 0) return Status::InvalidArgument(std::string("KV storage ") + name + " is 0");
  }
  const auto total = CheckedProduct({s.num_kv_heads, s.page_size, s.head_dim, DTypeSize(s.dtype),
                                     s.num_pages, s.num_storage_slots, 2});
  if (!total || *total > std::numeric_limits<size_t>::max() / 2) {
    return Status::OutOfRange("KV storage size overflows: " + std::to_string(s.num_storage_slots) +
                              " slots x 2 x " + std::to_string(s.num_pages) + " pages x [" +
                              std::to_string(s.num_kv_heads) + ", " + std::to_string(s.page_size) +
                              ", " + std::to_string(s.head_dim) + "]");
  }
  return std::unique_ptr<KvStorage>(std::make_unique<HostKvStorage>(s));
}

}  // namespace folio::kv
