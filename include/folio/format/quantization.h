// Quantization schemes of a Hurray tensor descriptor: how stored integers
// (i8 / u8) map back to real values, x = s * (q - z) computed in f32.
//
//   PerTensorAffine   one scale and zero point, inline in the descriptor
//   PerChannelAffine  one f32 scale (and zero point) per index along `axis`,
//                     in separate buffers named by index
//   PerBlockAffine    one scale (f16, bf16 or f32) per `block_size` run
//                     along `axis`, in separate buffers named by index
//
// A symmetric scheme has z = 0 and no zero-point buffer (its index is
// 0xFFFFFFFF on the wire). Every object is valid by construction: the
// factories check the rules of the scheme itself. Rules that need the
// tensor (axis < rank, buffer indices inside the buffer table, the
// block-paged compatibility rules) are checked by TensorDescriptor and
// BlockPagedLayout::ValidateQuantizationCompatibility.
#ifndef FOLIO_FORMAT_QUANTIZATION_H_
#define FOLIO_FORMAT_QUANTIZATION_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "folio/core/status.h"
#include "folio/format/element_type.h"

namespace folio::format {

class PerTensorAffine {
 public:
  // Any zero point; scale must be finite and != 0. Mirrors Python's
  // PerTensorAffine(scale, zero_point). The zero point must also fit the
  // storage type (i8 or u8), which TensorDescriptor checks.
  static Result<PerTensorAffine> Create(float scale, int32_t zero_point);
  // Shorthand for Create(scale, 0). Per-tensor has no symmetric flag on the
  // wire (the spec's per-tensor flags MUST be 0): symmetric means z = 0.
  static Result<PerTensorAffine> Symmetric(float scale);

  static constexpr uint8_t tag() { return 0x01; }
  static constexpr std::string_view name() { return "per_tensor_affine"; }
  float scale() const { return scale_; }
  int32_t zero_point() const { return zero_point_; }
  bool symmetric() const { return zero_point_ == 0; }

  friend bool operator==(const PerTensorAffine&, const PerTensorAffine&) = default;

 private:
  PerTensorAffine(float scale, int32_t zero_point) : scale_(scale), zero_point_(zero_point) {}
  float scale_;
  int32_t zero_point_;
};

class PerChannelAffine {
 public:
  // Scales are f32, one per index along `axis`, in buffer
  // `scale_buffer_index`; the asymmetric form adds a zero-point buffer,
  // which must differ from the scale buffer. 0xFFFFFFFF is never a valid
  // buffer index.
  static Result<PerChannelAffine> Symmetric(uint32_t axis, uint32_t scale_buffer_index);
  static Result<PerChannelAffine> Asymmetric(uint32_t axis, uint32_t scale_buffer_index,
                                             uint32_t zero_point_buffer_index);

  static constexpr uint8_t tag() { return 0x02; }
  static constexpr std::string_view name() { return "per_channel_affine"; }
  uint32_t axis() const { return axis_; }
  uint32_t scale_buffer_index() const { return scale_buffer_; }
  // nullopt when symmetric.
  std::optional<uint32_t> zero_point_buffer_index() const { return zero_point_buffer_; }
  bool symmetric() const { return !zero_point_buffer_.has_value(); }
  ElementType scale_type() const { return ElementType::kF32; }

  friend bool operator==(const PerChannelAffine&, const PerChannelAffine&) = default;

 private:
  PerChannelAffine(uint32_t axis, uint32_t scale_buffer, std::optional<uint32_t> zero_point_buffer)
      : axis_(axis), scale_buffer_(scale_buffer), zero_point_buffer_(zero_point_buffer) {}
  uint32_t axis_;
  uint32_t scale_buffer_;
  std::optional<uint32_t> zero_point_buffer_;
};

class PerBlockAffine {
 public:
  // block_size must be a power of two >= 2; scale_type f16, bf16 or f32.
  // Buffer indices as for PerChannelAffine.
  static Result<PerBlockAffine> Symmetric(uint32_t axis, uint32_t block_size,
                                          uint32_t scale_buffer_index, ElementType scale_type);
  static Result<PerBlockAffine> Asymmetric(uint32_t axis, uint32_t block_size,
                                           uint32_t scale_buffer_index,
                                           uint32_t zero_point_buffer_index,
                                           ElementType scale_type);

  static constexpr uint8_t tag() { return 0x03; }
  static constexpr std::string_view name() { return "per_block_affine"; }
  uint32_t axis() const { return axis_; }
  uint32_t block_size() const { return block_size_; }
  uint32_t scale_buffer_index() const { return scale_buffer_; }
  std::optional<uint32_t> zero_point_buffer_index() const { return zero_point_buffer_; }
  bool symmetric() const { return !zero_point_buffer_.has_value(); }
  ElementType scale_type() const { return scale_type_; }

  friend bool operator==(const PerBlockAffine&, const PerBlockAffine&) = default;

 private:
  PerBlockAffine(uint32_t axis, uint32_t block_size, uint32_t scale_buffer,
                 std::optional<uint32_t> zero_point_buffer, ElementType scale_type)
      : axis_(axis),
        block_size_(block_size),
        scale_buffer_(scale_buffer),
        zero_point_buffer_(zero_point_buffer),
        scale_type_(scale_type) {}
  uint32_t axis_;
  uint32_t block_size_;
  uint32_t scale_buffer_;
  std::optional<uint32_t> zero_point_buffer_;
  ElementType scale_type_;
};

using QuantizationScheme = std::variant<PerTensorAffine, PerChannelAffine, PerBlockAffine>;

std::string_view SchemeName(const QuantizationScheme& scheme);

// The buffer indices a scheme refers to: none for per-tensor, the scale
// buffer and (asymmetric) the zero-point buffer otherwise.
std::vector<uint32_t> ReferencedBuffers(const QuantizationScheme& scheme);

// The quantization descriptor (header and fields; without the u32 length
// that precedes it inside a tensor descriptor): 16, 20 or 24 bytes.
std::vector<std::byte> EncodeQuantization(const QuantizationScheme& scheme);

// Decodes exactly one quantization descriptor; `bytes` must be exactly its
// size. Errors are InvalidArgument, each naming field and value: too
// short, an unknown scheme tag, scheme_version != 1, unknown flag bits, any
// flag bit on a per-tensor scheme, a length other than the scheme's,
// non-zero reserved bytes, a zero or non-finite scale, a zero-point buffer
// index that disagrees with the symmetric flag, a bad block size or scale
// type.
Result<QuantizationScheme> DecodeQuantization(std::span<const std::byte> bytes);

}  // namespace folio::format

#endif  // FOLIO_FORMAT_QUANTIZATION_H_
