// SIMD forms of ops.h's element-wise operators in f32, dispatched at run
// time to the CPU's best Highway target. Each element's result depends on
// that element alone (a tail shorter than a vector goes through the same
// vector code), so neither the length of a call nor how a caller splits
// it changes a bit. Each is tested against its scalar form in ops.h.
#ifndef FOLIO_OPS_ELEMENTWISE_H_
#define FOLIO_OPS_ELEMENTWISE_H_

#include <span>

namespace folio::ops {

// gate[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i],
// ops::SwiGlu's formula and order with Highway's vector exp (within 1 ulp
// of std::exp) on -gate[i] clamped to [-88, 88]: beyond that the exact
// result is 0 or gate[i] * up[i] to within f32 rounding (exp(88) is 1.6e38,
// exp(-88) 6e-39), and the clamp keeps exp in its valid range. NaN stays NaN.
void SwiGluSimd(std::span<float> gate, std::span<const float> up);

// gate[i] = gelu_tanh(gate[i]) * up[i] (ops::GeGlu), computed as
// gate[i] / (1 + exp(-2u)) * up[i] with u = sqrt(2/pi) (g + 0.044715 g^3):
// z/2 (1 + tanh(u)) and z / (1 + exp(-2u)) are the same function, and the
// second needs only the vector exp, on -2u clamped to [-88, 88] as in
// SwiGluSimd. It is also the better-conditioned form for negative z, where
// 1 + tanh(u) cancels. NaN stays NaN.
void GeGluSimd(std::span<float> gate, std::span<const float> up);

// The Highway target SwiGluSimd runs ("AVX3", "AVX2", ...), for tests.
const char* ElementwiseTargetName();

}  // namespace folio::ops

#endif  // FOLIO_OPS_ELEMENTWISE_H_
