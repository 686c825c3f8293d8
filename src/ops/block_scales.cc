#include "folio/ops/block_scales.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "folio/core/str_cat.h"

namespace folio::ops {

// The scale fields of each type's block (ggml's block_* structs). An
// exhaustive switch: a new type must say where its scales are.
std::span<const BlockScaleField> BlockScaleFields(WeightType type) {
  static constexpr BlockScaleField kD[] = {{0, "d"}};
  static constexpr BlockScaleField kDM[] = {{0, "d"}, {2, "m"}};
  static constexpr BlockScaleField kDDmin[] = {{0, "d"}, {2, "dmin"}};
  static constexpr BlockScaleField kQ6K[] = {{208, "d"}};
  static constexpr BlockScaleField kQ2K[] = {{80, "d"}, {82, "dmin"}};
  static constexpr BlockScaleField kQ3K[] = {{108, "d"}};
  static constexpr BlockScaleField kE[] = {{0, "e", ScaleEncoding::kE8M0}};
  switch (type) {
    case WeightType::kF64:
    case WeightType::kF32:
    case WeightType::kF16:
    case WeightType::kBF16:
      return {};
    case WeightType::kQ8_0:
    case WeightType::kQ4_0:
    case WeightType::kQ5_0:
    case WeightType::kIQ4_NL:
    case WeightType::kIQ4_XS:
      return kD;
    case WeightType::kQ4_1:
    case WeightType::kQ5_1:
      return kDM;
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
      return kDDmin;
    case WeightType::kQ6_K:
      return kQ6K;
    case WeightType::kQ2_K:
      return kQ2K;
    case WeightType::kQ3_K:
      return kQ3K;
    case WeightType::kMXFP4:
      return kE;
  }
  return {};
}

Status CheckBlockScales(WeightType type, std::span<const std::byte> bytes) {
  const WeightTypeTraits& traits = TraitsOf(type);
  const std::span<const BlockScaleField> fields = BlockScaleFields(type);
  if (fields.empty()) return Status::Ok();
  if (bytes.size() % traits.block_bytes != 0) {
    return Status::InvalidArgument(StrCat(bytes.size(), " bytes are not whole ", traits.name,
                                          " blocks of ", traits.block_bytes, " bytes"));
  }
  const uint64_t blocks = bytes.size() / traits.block_bytes;
  for (uint64_t b = 0; b < blocks; ++b) {
    const std::byte* block = bytes.data() + b * traits.block_bytes;
    for (const BlockScaleField& f : fields) {
      if (f.encoding == ScaleEncoding::kE8M0) {
        if (std::to_integer<uint32_t>(block[f.offset]) == 0xff) {
          return Status::InvalidArgument(StrCat(traits.name, " block ", b, " of ", blocks,
                                                " has a non-finite scale ", f.name,
                                                " (E8M0 0xff, NaN in OCP MX)"));
        }
        continue;
      }
      uint16_t bits;
      std::memcpy(&bits, block + f.offset, 2);
      if ((bits & 0x7c00) == 0x7c00) {  // exponent all ones: inf or NaN
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%04x", bits);
        return Status::InvalidArgument(StrCat(traits.name, " block ", b, " of ", blocks,
                                              " has a non-finite scale ", f.name, " (f16 ", hex,
                                              (bits & 0x03ff) != 0 ? ", NaN)" : ", infinity)"));
      }
    }
  }
  return Status::Ok();
}

}  // namespace folio::ops
