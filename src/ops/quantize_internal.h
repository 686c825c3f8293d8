// What QuantizeRow's dispatch (quantize.cc) shares with the K-quant
// encoders (quantize_k.cc): ggml's rounding helper, the f16 scale store,
// and the encoders themselves. Each encoder takes whole blocks of finite
// values (QuantizeRow has checked both) and writes them at `out`.
#ifndef FOLIO_OPS_QUANTIZE_INTERNAL_H_
#define FOLIO_OPS_QUANTIZE_INTERNAL_H_

#include <cmath>
#include <cstddef>
#include <span>
#include <string_view>

#include "folio/core/status.h"

namespace folio::ops::internal {

// ggml's GROUP_MAX_EPS: a group whose largest magnitude is below it is all
// zeros (Q3_K, Q6_K, the IQ4 types).
inline constexpr float kGroupMaxEps = 1e-15f;

// ggml's nearest_int: round half to even (its magic-number trick is exact
// below 2^22 in magnitude). Arguments are bounded by construction; the
// clamp only keeps a conversion defined.
inline int NearestInt(float f) {
  constexpr float kLimit = 4194303.0f;
  if (!(std::fabs(f) <= kLimit)) return f > 0.0f ? 4194303 : -4194303;
  return static_cast<int>(std::nearbyint(f));
}

// Stores `v` as f16 at `p`; OutOfRange (naming `what` and the block) when it
// rounds to infinity, which no decoder could turn back into a weight.
Status StoreF16Scale(std::byte* p, float v, std::string_view what, size_t block);

// The K-quants: ggml's quantize_row_q{2,3,4,5,6}_K_ref (quantize_k.cc).
Status EncodeQ2K(std::span<const float> in, std::byte* out);
Status EncodeQ3K(std::span<const float> in, std::byte* out);
Status EncodeQ4K(std::span<const float> in, std::byte* out);
Status EncodeQ5K(std::span<const float> in, std::byte* out);
Status EncodeQ6K(std::span<const float> in, std::byte* out);

}  // namespace folio::ops::internal

#endif  // FOLIO_OPS_QUANTIZE_INTERNAL_H_
