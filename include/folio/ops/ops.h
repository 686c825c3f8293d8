// Scalar reference operators of the decoder: the forms a reader can check
// against the paper in a minute. T is float (production) or double (the
// worked example). Every reduction runs in increasing index order from zero
// in T, so an output element's bits depend only on its own inputs, never on
// how many rows a call holds (docs/design.md, contract 3).
#ifndef FOLIO_OPS_OPS_H_
#define FOLIO_OPS_OPS_H_

#include <cmath>
#include <cstddef>
#include <span>

#include "folio/core/check.h"

namespace folio::ops {

// y[j] = sum_i w[j][i] * x[i], w: [out, in] row-major (one contiguous row
// per output, as Hugging Face stores nn.Linear weights).
template <typename T>
void MatVec(std::span<const T> w, std::span<const T> x, std::span<T> y) {
  const size_t in = x.size();
  FOLIO_DCHECK(w.size() == in * y.size());
  for (size_t j = 0; j < y.size(); ++j) {
    const T* row = w.data() + j * in;
    T acc = 0;
    for (size_t i = 0; i < in; ++i) acc += row[i] * x[i];
    y[j] = acc;
  }
}

// y = x * exp(-0.5 * ln(mean(x^2) + eps)) * gain. The exp/ln form (rather
// than 1/sqrt) is the worked example's; it differs from 1/sqrt only in the
// last bits.
template <typename T>
void RmsNorm(std::span<const T> x, std::span<const T> gain, T eps, std::span<T> y) {
  FOLIO_DCHECK(gain.size() == x.size() && y.size() == x.size());
  T sum_sq = 0;
  for (T v : x) sum_sq += v * v;
  const T mean = sum_sq / static_cast<T>(x.size());
  const T inv = std::exp(T(-0.5) * std::log(mean + eps));
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * gain[i];
}

// LayerNorm with bias: y = (x - mean) / sqrt(var + eps) * gain + bias, the
// mean and the (biased) variance summed in T in index order, as two passes
// over x (PyTorch's LayerNorm also centres before squaring; its CPU kernel
// differs only in the order of those sums).
template <typename T>
void LayerNorm(std::span<const T> x, std::span<const T> gain, std::span<const T> bias, T eps,
               std::span<T> y) {
  FOLIO_DCHECK(gain.size() == x.size() && bias.size() == x.size() && y.size() == x.size());
  const auto n = static_cast<T>(x.size());
  T sum = 0;
  for (T v : x) sum += v;
  const T mean = sum / n;
  T sum_sq = 0;
  for (T v : x) sum_sq += (v - mean) * (v - mean);
  const T inv = T(1) / std::sqrt(sum_sq / n + eps);
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) * inv * gain[i] + bias[i];
}

// Rotates every head of x: [num_heads, head_dim] by the angles whose cosines
// and sines are given per pair. The first 2 * cos.size() features of a head
// rotate (all of them, or fewer: partial rotary embeddings, as Phi-4-mini's),
// the rest pass through. Interleaved pairs are (2p, 2p+1); NeoX pairs are
// (p, p + half) with half = cos.size(), Hugging Face's rotate_half on the
// rotated part.
template <typename T>
void Rope(std::span<T> x, size_t head_dim, std::span<const T> cos, std::span<const T> sin,
          bool neox) {
  const size_t half = cos.size();
  FOLIO_DCHECK(2 * half <= head_dim && sin.size() == half && x.size() % head_dim == 0);
  for (size_t h = 0; h < x.size(); h += head_dim) {
    for (size_t p = 0; p < half; ++p) {
      const size_t i = h + (neox ? p : 2 * p);
      const size_t j = h + (neox ? p + half : 2 * p + 1);
      const T a = x[i];
      const T b = x[j];
      x[i] = a * cos[p] - b * sin[p];
      x[j] = a * sin[p] + b * cos[p];
    }
  }
}

template <typename T>
T Silu(T z) {
  return z / (T(1) + std::exp(-z));
}

// out[i] = silu(gate[i]) * up[i], in place on gate.
template <typename T>
void SwiGlu(std::span<T> gate, std::span<const T> up) {
  FOLIO_DCHECK(gate.size() == up.size());
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = Silu(gate[i]) * up[i];
}

// GELU with the tanh approximation (PyTorch's approximate="tanh", Hugging
// Face's gelu_pytorch_tanh): z/2 (1 + tanh(u)), u = sqrt(2/pi) (z +
// 0.044715 z^3), computed as the same function's better-conditioned form
// z / (1 + exp(-2u)): for negative z, 1 + tanh(u) cancels (at z = -7 it
// keeps two correct digits even in double), the exponential does not.
template <typename T>
T GeluTanh(T z) {
  const T k = T(0.79788456080286535588);  // sqrt(2 / pi)
  return z / (T(1) + std::exp(T(-2) * k * (z + T(0.044715) * z * z * z)));
}

// GELU itself: z/2 (1 + erf(z / sqrt 2)) (PyTorch's default, Hugging
// Face's "gelu"; BERT's MLP).
template <typename T>
T Gelu(T z) {
  return T(0.5) * z * (T(1) + std::erf(z * T(0.70710678118654752440)));
}

// out[i] = gelu_tanh(gate[i]) * up[i], in place on gate (GeGLU).
template <typename T>
void GeGlu(std::span<T> gate, std::span<const T> up) {
  FOLIO_DCHECK(gate.size() == up.size());
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = GeluTanh(gate[i]) * up[i];
}

}  // namespace folio::ops

#endif  // FOLIO_OPS_OPS_H_
