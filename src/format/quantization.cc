#include "folio/format/quantization.h"

#include <bit>
#include <cmath>

#include "folio/format/hurray_format.h"
#include "wire.h"

namespace folio::format {
namespace {

using internal::Hex;
using internal::Invalid;

Status CheckScale(float scale) {
  if (!std::isfinite(scale) || scale == 0.0f) {
    return Invalid("per_tensor_affine scale must be finite and non-zero (got ", scale, ", bits ",
                   Hex(std::bit_cast<uint32_t>(scale), 8), ")");
  }
  return Status::Ok();
}

Status CheckBuffers(std::string_view scheme, uint32_t scale_buffer,
                    std::optional<uint32_t> zero_point_buffer) {
  if (scale_buffer == wire::kNoZeroPointBuffer) {
    return Invalid(scheme, " scale_buffer ", Hex(scale_buffer, 8), " is not a buffer index");
  }
  if (zero_point_buffer.has_value()) {
    if (*zero_point_buffer == wire::kNoZeroPointBuffer) {
      return Invalid(scheme,
                     " asymmetric scheme needs a zero_point_buffer (got "
                     "0xffffffff, the symmetric marker)");
    }
    if (*zero_point_buffer == scale_buffer) {
      return Invalid(scheme, " zero_point_buffer ", *zero_point_buffer,
                     " is also the scale_buffer");
    }
  }
  return Status::Ok();
}

Status CheckPerBlock(uint32_t block_size, uint32_t scale_buffer,
                     std::optional<uint32_t> zero_point_buffer, ElementType scale_type) {
  if (block_size < 2 || !std::has_single_bit(block_size)) {
    return Invalid("per_block_affine block_size must be a power of two >= 2 (got ", block_size,
                   ")");
  }
  if (scale_type != ElementType::kF16 && scale_type != ElementType::kBF16 &&
      scale_type != ElementType::kF32) {
    return Invalid("per_block_affine scale_type must be f16, bf16 or f32 (got ",
                   ElementTypeName(scale_type), ")");
  }
  return CheckBuffers(PerBlockAffine::name(), scale_buffer, zero_point_buffer);
}

}  // namespace

Result<PerTensorAffine> PerTensorAffine::Create(float scale, int32_t zero_point) {
  FOLIO_RETURN_IF_ERROR(CheckScale(scale));
  return PerTensorAffine(scale, zero_point);
}

Result<PerTensorAffine> PerTensorAffine::Symmetric(float scale) { return Create(scale, 0); }

Result<PerChannelAffine> PerChannelAffine::Symmetric(uint32_t axis, uint32_t scale_buffer_index) {
  FOLIO_RETURN_IF_ERROR(CheckBuffers(name(), scale_buffer_index, std::nullopt));
  return PerChannelAffine(axis, scale_buffer_index, std::nullopt);
}

Result<PerChannelAffine> PerChannelAffine::Asymmetric(uint32_t axis, uint32_t scale_buffer_index,
                                                      uint32_t zero_point_buffer_index) {
  FOLIO_RETURN_IF_ERROR(CheckBuffers(name(), scale_buffer_index, zero_point_buffer_index));
  return PerChannelAffine(axis, scale_buffer_index, zero_point_buffer_index);
}

Result<PerBlockAffine> PerBlockAffine::Symmetric(uint32_t axis, uint32_t block_size,
                                                 uint32_t scale_buffer_index,
                                                 ElementType scale_type) {
  FOLIO_RETURN_IF_ERROR(CheckPerBlock(block_size, scale_buffer_index, std::nullopt, scale_type));
  return PerBlockAffine(axis, block_size, scale_buffer_index, std::nullopt, scale_type);
}

Result<PerBlockAffine> PerBlockAffine::Asymmetric(uint32_t axis, uint32_t block_size,
                                                  uint32_t scale_buffer_index,
                                                  uint32_t zero_point_buffer_index,
                                                  ElementType scale_type) {
  FOLIO_RETURN_IF_ERROR(
      CheckPerBlock(block_size, scale_buffer_index, zero_point_buffer_index, scale_type));
  return PerBlockAffine(axis, block_size, scale_buffer_index, zero_point_buffer_index, scale_type);
}

std::string_view SchemeName(const QuantizationScheme& scheme) {
  return std::visit([](const auto& s) { return s.name(); }, scheme);
}

std::vector<uint32_t> ReferencedBuffers(const QuantizationScheme& scheme) {
  std::vector<uint32_t> out;
  std::visit(
      [&out](const auto& s) {
        using S = std::decay_t<decltype(s)>;
        if constexpr (!std::is_same_v<S, PerTensorAffine>) {
          out.push_back(s.scale_buffer_index());
          if (s.zero_point_buffer_index()) {
            out.push_back(*s.zero_point_buffer_index());
          }
        }
      },
      scheme);
  return out;
}

std::vector<std::byte> EncodeQuantization(const QuantizationScheme& scheme) {
  internal::Writer w;
  std::visit(
      [&w](const auto& s) {
        using S = std::decay_t<decltype(s)>;
        w.Put(S::tag());
        w.Put(wire::kQuantSchemeVersion);
        if constexpr (std::is_same_v<S, PerTensorAffine>) {
          w.Put(uint16_t{0});  // per-tensor flags MUST be 0
          w.Put(std::bit_cast<uint32_t>(s.scale()));
          w.Put(static_cast<uint32_t>(s.zero_point()));
          w.PutZeros(4);
        } else {
          w.Put(static_cast<uint16_t>(s.symmetric() ? wire::kQuantFlagSymmetric : 0));
          w.Put(s.axis());
          if constexpr (std::is_same_v<S, PerBlockAffine>) {
            w.Put(s.block_size());
          }
          w.Put(s.scale_buffer_index());
          w.Put(s.zero_point_buffer_index().value_or(wire::kNoZeroPointBuffer));
          w.Put(ElementTypeTag(s.scale_type()));
          w.PutZeros(3);
        }
      },
      scheme);
  return std::move(w.bytes());
}

Result<QuantizationScheme> DecodeQuantization(std::span<const std::byte> bytes) {
  internal::Reader r(bytes);
  uint8_t tag = 0, version = 0;
  uint16_t flags = 0;
  FOLIO_RETURN_IF_ERROR(r.Read("quantization scheme_tag", tag));
  FOLIO_RETURN_IF_ERROR(r.Read("quantization scheme_version", version));
  FOLIO_RETURN_IF_ERROR(r.Read("quantization flags", flags));

  uint64_t expected = 0;
  std::string_view name;
  switch (tag) {
    case wire::kSchemePerTensorAffine:
      expected = wire::kPerTensorAffineBytes;
      name = PerTensorAffine::name();
      break;
    case wire::kSchemePerChannelAffine:
      expected = wire::kPerChannelAffineBytes;
      name = PerChannelAffine::name();
      break;
    case wire::kSchemePerBlockAffine:
      expected = wire::kPerBlockAffineBytes;
      name = PerBlockAffine::name();
      break;
    default:
      return Invalid("unknown quantization scheme_tag ", Hex(tag));
  }
  if (version != wire::kQuantSchemeVersion) {
    return Invalid(name, " scheme_version ", static_cast<int>(version),
                   " is not supported (expected 1)");
  }
  if (tag == wire::kSchemePerTensorAffine && flags != 0) {
    // The symmetric flag belongs to the buffer-based schemes; a per-tensor
    // scheme carries its zero point inline, so every flag bit is reserved.
    return Invalid(name, " flags ", Hex(flags, 4), " must be 0 (per-tensor flags are reserved)");
  }
  if ((flags & ~wire::kQuantFlagSymmetric) != 0) {
    return Invalid(name, " flags ", Hex(flags, 4),
                   " has unknown bits set (only bit0, symmetric, is defined)");
  }
  if (bytes.size() != expected) {
    return Invalid(name, " quantization_length is ", bytes.size(), " bytes; the scheme is exactly ",
                   expected);
  }
  const bool symmetric = (flags & wire::kQuantFlagSymmetric) != 0;

  if (tag == wire::kSchemePerTensorAffine) {
    uint32_t scale_bits = 0, zero_point_bits = 0;
    FOLIO_RETURN_IF_ERROR(r.Read("per_tensor_affine scale", scale_bits));
    FOLIO_RETURN_IF_ERROR(r.Read("per_tensor_affine zero_point", zero_point_bits));
    FOLIO_RETURN_IF_ERROR(r.ReadReserved("per_tensor_affine reserved", 4));
    const float scale = std::bit_cast<float>(scale_bits);
    const auto zero_point = static_cast<int32_t>(zero_point_bits);
    FOLIO_ASSIGN_OR_RETURN(auto s, PerTensorAffine::Create(scale, zero_point));
    return QuantizationScheme(s);
  }

  uint32_t axis = 0, block_size = 0, scale_buffer = 0, zero_point_buffer = 0;
  uint8_t scale_type_tag = 0;
  FOLIO_RETURN_IF_ERROR(r.Read("quantization axis", axis));
  if (tag == wire::kSchemePerBlockAffine) {
    FOLIO_RETURN_IF_ERROR(r.Read("per_block_affine block_size", block_size));
  }
  FOLIO_RETURN_IF_ERROR(r.Read("quantization scale_buffer", scale_buffer));
  FOLIO_RETURN_IF_ERROR(r.Read("quantization zero_point_buffer", zero_point_buffer));
  FOLIO_RETURN_IF_ERROR(r.Read("quantization scale_type", scale_type_tag));
  FOLIO_RETURN_IF_ERROR(r.ReadReserved("quantization reserved", 3));

  if (symmetric != (zero_point_buffer == wire::kNoZeroPointBuffer)) {
    return Invalid(
        name, " zero_point_buffer ", Hex(zero_point_buffer, 8),
        symmetric ? " must be 0xffffffff when symmetric" : " must name a buffer when asymmetric");
  }
  Result<ElementType> scale_type = ElementTypeFromTag(scale_type_tag);
  if (!scale_type.ok()) {
    return Invalid(name, " scale_type: ", scale_type.error().message());
  }
  if (tag == wire::kSchemePerChannelAffine) {
    if (*scale_type != ElementType::kF32) {
      return Invalid("per_channel_affine scale_type must be f32 (got ",
                     ElementTypeName(*scale_type), ")");
    }
    if (symmetric) {
      FOLIO_ASSIGN_OR_RETURN(auto s, PerChannelAffine::Symmetric(axis, scale_buffer));
      return QuantizationScheme(s);
    }
    FOLIO_ASSIGN_OR_RETURN(auto s,
                           PerChannelAffine::Asymmetric(axis, scale_buffer, zero_point_buffer));
    return QuantizationScheme(s);
  }
  if (symmetric) {
    FOLIO_ASSIGN_OR_RETURN(auto s,
                           PerBlockAffine::Symmetric(axis, block_size, scale_buffer, *scale_type));
    return QuantizationScheme(s);
  }
  FOLIO_ASSIGN_OR_RETURN(auto s, PerBlockAffine::Asymmetric(axis, block_size, scale_buffer,
                                                            zero_point_buffer, *scale_type));
  return QuantizationScheme(s);
}

}  // namespace folio::format
