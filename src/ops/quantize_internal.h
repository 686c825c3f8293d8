// What QuantizeRow's dispatch (quantize.cc) shares with the K-quant
// encoders (quantize_k.cc): ggml's rounding helper, the f16 scale store,
// and the encoders themselves. Each encoder takes whole blocks of finite
// values (QuantizeRow has checked both) and writes them at `out`.
#ifndef FOLIO_OPS_QUANTIZE_INTERNAL_H_
#define FOLIO_OPS_QUANTIZE_INTERNAL_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "folio/core/status.h"

namespace folio::ops::internal {

// ggml's GROUP_MAX_EPS: a group whose largest magnitude is below it is all
// zeros (Q3_K, Q6_K, the IQ4 types).
inline constexpr float kGroupMaxEps = 1e-15f;

// ggml's nearest_int, bit for bit for every float: f + 1.5 * 2^23 rounds f
// to an integer (half to even) in the low 23 bits when |f| <= 2^22. Beyond
// that ggml asserts in debug builds and, in the release builds
// llama-quantize runs, returns those low bits anyway; Q3_K's level search
// can get there (an element moved against a near-zero sum), so folio
// returns the same bits rather than clamping.
inline int NearestInt(float f) {
  const float shifted = f + 12582912.0f;
  return static_cast<int>(std::bit_cast<uint32_t>(shifted) & 0x007fffff) - 0x00400000;
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
