// The SIMD element-wise operators (elementwise.h), compiled once per
// Highway target.
#include <algorithm>
#include <cstddef>

#include "folio/core/check.h"
#include "folio/ops/elementwise.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/elementwise_kernel.cc"
// foreach_target.h re-includes this file once per target: it comes first.
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace folio::ops::internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void SwiGluImpl(float* HWY_RESTRICT gate, const float* HWY_RESTRICT up, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto one = hn::Set(d, 1.0f);
  const auto lo = hn::Set(d, -88.0f), hi = hn::Set(d, 88.0f);
  const auto silu_times = [&](auto g, auto u) {
    const auto e = hn::Exp(d, hn::Min(hn::Max(hn::Neg(g), lo), hi));
    return hn::Mul(hn::Div(g, hn::Add(one, e)), u);
  };
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(silu_times(hn::LoadU(d, gate + i), hn::LoadU(d, up + i)), d, gate + i);
  }
  if (i == n) return;
  // The tail through the same vector code, padded with zeros.
  HWY_ALIGN float g[hn::MaxLanes(d)] = {}, u[hn::MaxLanes(d)] = {};
  std::copy(gate + i, gate + n, g);
  std::copy(up + i, up + n, u);
  hn::Store(silu_times(hn::Load(d, g), hn::Load(d, u)), d, g);
  std::copy(g, g + (n - i), gate + i);
}

void GeGluImpl(float* HWY_RESTRICT gate, const float* HWY_RESTRICT up, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto one = hn::Set(d, 1.0f);
  const auto lo = hn::Set(d, -88.0f), hi = hn::Set(d, 88.0f);
  const auto minus_2k = hn::Set(d, -2.0f * 0.79788456080286535588f);  // -2 sqrt(2/pi)
  const auto cubic = hn::Set(d, 0.044715f);
  const auto gelu_times = [&](auto g, auto u) {
    // -2u = -2 sqrt(2/pi) (g + 0.044715 g^3) = -2 sqrt(2/pi) g (1 + 0.044715 g^2)
    const auto inner = hn::Mul(g, hn::MulAdd(cubic, hn::Mul(g, g), one));
    const auto e = hn::Exp(d, hn::Min(hn::Max(hn::Mul(minus_2k, inner), lo), hi));
    return hn::Mul(hn::Div(g, hn::Add(one, e)), u);
  };
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(gelu_times(hn::LoadU(d, gate + i), hn::LoadU(d, up + i)), d, gate + i);
  }
  if (i == n) return;
  HWY_ALIGN float g[hn::MaxLanes(d)] = {}, u[hn::MaxLanes(d)] = {};
  std::copy(gate + i, gate + n, g);
  std::copy(up + i, up + n, u);
  hn::Store(gelu_times(hn::Load(d, g), hn::Load(d, u)), d, g);
  std::copy(g, g + (n - i), gate + i);
}

const char* ElementwiseTargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace folio::ops::internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace folio::ops {
namespace internal {
HWY_EXPORT(SwiGluImpl);
HWY_EXPORT(GeGluImpl);
HWY_EXPORT(ElementwiseTargetNameImpl);
}  // namespace internal

void SwiGluSimd(std::span<float> gate, std::span<const float> up) {
  FOLIO_CHECK(gate.size() == up.size(), "SwiGlu: ", gate.size(), " gates, ", up.size(), " ups");
  HWY_DYNAMIC_DISPATCH(internal::SwiGluImpl)(gate.data(), up.data(), gate.size());
}
void GeGluSimd(std::span<float> gate, std::span<const float> up) {
  FOLIO_CHECK(gate.size() == up.size(), "GeGlu: ", gate.size(), " gates, ", up.size(), " ups");
  HWY_DYNAMIC_DISPATCH(internal::GeGluImpl)(gate.data(), up.data(), gate.size());
}
const char* ElementwiseTargetName() {
  return HWY_DYNAMIC_DISPATCH(internal::ElementwiseTargetNameImpl)();
}
}  // namespace folio::ops
#endif
