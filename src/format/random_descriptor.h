// Random valid Hurray descriptors, for the property tests and the fuzzer's
// seed corpus (module-internal; tests and tools only).
//
// Covers every layout, element type and quantization scheme folio accepts,
// with small dimensions so the encodings stay short. Every descriptor it
// returns passed TensorDescriptor::Create.
#ifndef FOLIO_FORMAT_RANDOM_DESCRIPTOR_H_
#define FOLIO_FORMAT_RANDOM_DESCRIPTOR_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "folio/core/check.h"
#include "folio/core/splitmix64.h"
#include "folio/format/descriptor.h"
#include "folio/format/hurray_format.h"

namespace folio::format::testing {

class RandomDescriptors {
 public:
  explicit RandomDescriptors(uint64_t seed) : rng_(seed) {}

  // Uniform in [0, n).
  uint64_t Below(uint64_t n) { return rng_.NextU64() % n; }
  bool OneIn(uint64_t n) { return Below(n) == 0; }

  TensorDescriptor Next() {
    switch (Below(3)) {
      case 0:
        return Dense(/*strided=*/false);
      case 1:
        return Dense(/*strided=*/true);
      default:
        return Paged();
    }
  }

 private:
  ElementType AnyType() {
    static constexpr ElementType kTypes[] = {
        ElementType::kF16, ElementType::kBF16, ElementType::kF32, ElementType::kF64,
        ElementType::kI8,  ElementType::kU8,   ElementType::kI32, ElementType::kU32,
        ElementType::kI64, ElementType::kU64};
    return kTypes[Below(std::size(kTypes))];
  }
  ElementType ScaleType() {
    static constexpr ElementType kTypes[] = {ElementType::kF16, ElementType::kBF16,
                                             ElementType::kF32};
    return kTypes[Below(3)];
  }
  float Scale() {
    const float s = static_cast<float>(rng_.NextUnit()) * 4.0f + 1e-3f;
    return OneIn(4) ? -s : s;
  }

  BufferHandle Buffer(uint64_t byte_size, DeviceTag device, MemoryClass memory_class) {
    BufferHandle b;
    b.byte_size = byte_size;
    b.alignment = byte_size > 0 ? 64u << Below(4) : 1u << Below(9);
    b.device = device;
    // A CPU buffer is always producer-synced.
    b.sync_mode =
        device == DeviceTag::kCpu ? SyncMode::kProducerSynced : static_cast<SyncMode>(Below(3));
    b.memory_class = memory_class;
    return b;
  }
  DeviceTag Device() { return static_cast<DeviceTag>(Below(9)); }
  MemoryClass Class() { return static_cast<MemoryClass>(Below(4)); }

  // A zero point inside the storage type's range.
  int32_t ZeroPoint(ElementType dtype) {
    const auto z = static_cast<int32_t>(Below(256));
    return dtype == ElementType::kI8 ? z - 128 : z;
  }

  // A scheme for `shape` whose buffers start at `first`. A quantized axis
  // must be static, so a dynamic one is made static here; a per-block
  // block_size never exceeds a non-zero shape[axis].
  QuantizationScheme Scheme(ElementType dtype, std::vector<uint64_t>& shape, uint64_t min_dim,
                            uint32_t first) {
    uint64_t kind = shape.empty() ? 0 : Below(3);
    const bool symmetric = OneIn(2);
    if (kind == 0) {
      return symmetric ? *PerTensorAffine::Symmetric(Scale())
                       : *PerTensorAffine::Create(Scale(), ZeroPoint(dtype));
    }
    const auto axis = static_cast<uint32_t>(Below(shape.size()));
    if (shape[axis] == wire::kDynamicDim) shape[axis] = min_dim + Below(6);
    auto block = static_cast<uint32_t>(2u << Below(7));
    while (shape[axis] != 0 && block > shape[axis] && block > 2) block >>= 1;
    if (shape[axis] == 1) kind = 1;  // no block_size >= 2 fits
    if (kind == 1) {
      return symmetric ? *PerChannelAffine::Symmetric(axis, first)
                       : *PerChannelAffine::Asymmetric(axis, first, first + 1);
    }
    return symmetric ? *PerBlockAffine::Symmetric(axis, block, first, ScaleType())
                     : *PerBlockAffine::Asymmetric(axis, block, first, first + 1, ScaleType());
  }

  TensorDescriptor Dense(bool strided) {
    std::optional<QuantizationScheme> quant;
    // A strided layout needs rank >= 1 (a scalar is row-major).
    const uint64_t rank = strided ? 1 + Below(4) : Below(5);
    const uint64_t min_dim = strided ? 1 : 0;
    std::vector<uint64_t> shape(rank);
    for (uint64_t& d : shape) {
      d = Below(6) + min_dim;
      if (OneIn(12)) d = wire::kDynamicDim;
    }
    ElementType dtype = AnyType();
    if (OneIn(3)) {
      dtype = OneIn(2) ? ElementType::kI8 : ElementType::kU8;
      quant = Scheme(dtype, shape, min_dim, 1);
    }
    const uint64_t esize = ElementTypeBytes(dtype);
    bool dynamic = false, empty = false;
    for (uint64_t d : shape) {
      dynamic |= d == wire::kDynamicDim;
      empty |= d == 0;
    }
    // The furthest element offsets below and above the first element.
    uint64_t below = 0, last = 0, row_major = 1;
    StridedLayout strides;
    strides.strides.resize(rank);
    for (uint64_t i = rank; i-- > 0;) {
      const uint64_t extent = shape[i] == wire::kDynamicDim ? 0 : shape[i];
      if (strided) {
        const int64_t s = static_cast<int64_t>(Below(13)) - 6;
        strides.strides[i] = s;
        const uint64_t reach = (s < 0 ? static_cast<uint64_t>(-s) : static_cast<uint64_t>(s)) *
                               (extent > 0 ? extent - 1 : 0);
        (s < 0 ? below : last) += reach;
      } else {
        last += row_major * (extent > 0 ? extent - 1 : 0);
        row_major *= extent > 0 ? extent : 1;
      }
    }
    const uint64_t byte_offset = below * esize + Below(3) * esize;
    const uint64_t needed = dynamic || empty ? byte_offset : byte_offset + (last + 1) * esize;
    const DeviceTag device = Device();
    const MemoryClass memory_class = Class();
    std::vector<BufferHandle> buffers{Buffer(needed + Below(3) * 64, device, memory_class)};
    if (quant) {
      for (size_t i = 0; i < ReferencedBuffers(*quant).size(); ++i) {
        buffers.push_back(Buffer(Below(200), Device(), Class()));
      }
    }
    Layout layout = RowMajorLayout{};
    if (strided) layout = std::move(strides);
    auto d = TensorDescriptor::Create(dtype, std::move(shape), byte_offset, std::move(layout),
                                      std::move(buffers), std::move(quant));
    FOLIO_CHECK(d.ok(), d.status().ToString());
    return *std::move(d);
  }

  TensorDescriptor Paged() {
    const auto page_size = static_cast<uint32_t>(1u << Below(5));
    const uint64_t num_pages = Below(7);
    const auto num_seqs = static_cast<uint32_t>(Below(5));
    const uint64_t heads = 1 + Below(3), head_dim = 1 + Below(8);
    const auto index_type = OneIn(2) ? IndexType::kU32 : IndexType::kU64;
    const std::optional<uint32_t> layer =
        OneIn(2) ? std::nullopt : std::optional<uint32_t>(static_cast<uint32_t>(Below(80)));
    auto layout = BlockPagedLayout::Create(page_size, num_pages, 0, num_seqs,
                                           static_cast<KvRole>(Below(3)), layer, index_type);
    FOLIO_CHECK(layout.ok(), layout.status().ToString());

    ElementType dtype = AnyType();
    std::optional<QuantizationScheme> quant;
    if (OneIn(3)) {
      dtype = OneIn(2) ? ElementType::kI8 : ElementType::kU8;
      const bool symmetric = OneIn(2);
      const uint64_t kind = page_size >= 2 ? Below(3) : Below(2);
      if (kind == 0) {
        quant = *PerTensorAffine::Create(Scale(), ZeroPoint(dtype));
      } else if (kind == 1) {
        const auto axis = static_cast<uint32_t>(1 + Below(2));
        quant = symmetric ? *PerChannelAffine::Symmetric(axis, 3)
                          : *PerChannelAffine::Asymmetric(axis, 3, 4);
      } else {
        quant = symmetric ? *PerBlockAffine::Symmetric(0, page_size, 3, ScaleType())
                          : *PerBlockAffine::Asymmetric(0, page_size, 3, 4, ScaleType());
      }
    }
    const uint64_t isize = IndexTypeBytes(index_type);
    const DeviceTag device = Device();
    const MemoryClass memory_class = Class();
    std::vector<BufferHandle> buffers{
        Buffer(num_pages * page_size * heads * head_dim * ElementTypeBytes(dtype), device,
               memory_class),
        Buffer(Below(9) * isize, device, memory_class),
        Buffer((num_seqs + 1) * isize, device, memory_class)};
    if (quant) {
      const std::vector<uint32_t> refs = ReferencedBuffers(*quant);
      for (size_t i = 0; i < refs.size(); ++i) {
        uint64_t size = Below(100);
        if (const auto* b = std::get_if<PerBlockAffine>(&*quant); b && i == 0) {
          size = num_pages * page_size * ElementTypeBytes(b->scale_type());
        }
        buffers.push_back(Buffer(size, device, memory_class));
      }
    }
    const uint64_t total_tokens = OneIn(5) ? wire::kDynamicDim : Below(num_pages * page_size + 1);
    auto d = TensorDescriptor::Create(dtype, {total_tokens, heads, head_dim}, 0, *layout,
                                      std::move(buffers), std::move(quant));
    FOLIO_CHECK(d.ok(), d.status().ToString());
    return *std::move(d);
  }

  SplitMix64 rng_;
};

}  // namespace folio::format::testing

#endif  // FOLIO_FORMAT_RANDOM_DESCRIPTOR_H_
