// Scalar reference operators of the decoder: the forms a reader can check
// against the paper in a minute. T is float (production) or double (the
// worked example). Every reduction runs in increasing index order from zero
// in T, so an output element's bits depend only on its own inputs, never on
// how many rows a call holds (../shared/ARCHITECTURE.md, contract 3).
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
void RmsNorm(std::span<const T> x, std::span<const T> gain, T eps,
             std::span<T> y) {
  FOLIO_DCHECK(gain.size() == x.size() && y.size() == x.size());
  T sum_sq = 0;
  for (T v : x) sum_sq += v * v;
  const T mean = sum_sq / static_cast<T>(x.size());
  const T inv = std::exp(T(-0.5) * std::log(mean + eps));
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * gain[i];
}

// Rotates interleaved pairs (2p, 2p+1) of every head in x: [num_heads,
// head_dim] by theta_p = pos * base^(-2p / head_dim). head_dim is even.
template <typename T>
void RopeInterleaved(std::span<T> x, size_t head_dim, size_t pos, double base) {
  FOLIO_DCHECK(head_dim % 2 == 0 && x.size() % head_dim == 0);
  for (size_t p = 0; p < head_dim / 2; ++p) {
    // The angle is computed in double for both precisions so that float and
    // double decoders rotate by the same angle, rounded once.
    const double inv_freq =
        std::pow(base, -2.0 * static_cast<double>(p) / static_cast<double>(head_dim));
    const double theta = static_cast<double>(pos) * inv_freq;
    const T c = static_cast<T>(std::cos(theta));
    const T s = static_cast<T>(std::sin(theta));
    for (size_t h = 0; h < x.size(); h += head_dim) {
      const T a = x[h + 2 * p];
      const T b = x[h + 2 * p + 1];
      x[h + 2 * p] = a * c - b * s;
      x[h + 2 * p + 1] = a * s + b * c;
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

}  // namespace folio::ops

#endif  // FOLIO_OPS_OPS_H_
