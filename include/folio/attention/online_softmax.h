// The online-softmax state of one query row: the running maximum score m,
// the running sum l = sum_j exp(s_j - m) and the running output
// acc = sum_j exp(s_j - m) v_j, over the keys seen so far. Softmax(s) V is
// acc / l once every key has been seen.
//
// Two states over disjoint key sets merge exactly like one state over their
// union (up to rounding): rescale both to the larger maximum and add. The
// paged kernel splits a row's keys into chunks at fixed logical positions
// and folds the chunk states left to right with MergeInto, so the rounding
// depends only on the chunk boundaries, never on which thread computed what.
#ifndef FOLIO_ATTENTION_ONLINE_SOFTMAX_H_
#define FOLIO_ATTENTION_ONLINE_SOFTMAX_H_

#include <cmath>
#include <cstddef>
#include <limits>

namespace folio::attention {

struct SoftmaxState {
  float max = -std::numeric_limits<float>::infinity();  // m
  float sum = 0.0f;                                     // l
  bool empty() const { return sum == 0.0f; }
};

// (state, acc) <- (state, acc) merged with (other, other_acc); acc arrays
// have head_dim floats. Merging an empty state changes nothing, and merging
// into an empty state copies the other exactly (no rescale by exp(0)).
inline void MergeInto(SoftmaxState& state, float* acc, const SoftmaxState& other,
                      const float* other_acc, size_t head_dim) {
  if (other.empty()) return;
  if (state.empty()) {
    state = other;
    for (size_t f = 0; f < head_dim; ++f) acc[f] = other_acc[f];
    return;
  }
  const float m = std::fmax(state.max, other.max);
  const float a = std::exp(state.max - m);
  const float b = std::exp(other.max - m);
  state.sum = state.sum * a + other.sum * b;
  state.max = m;
  for (size_t f = 0; f < head_dim; ++f) acc[f] = acc[f] * a + other_acc[f] * b;
}

// Folds an attention sink into the state: a learned logit per head that
// joins the softmax's denominator with a zero value (gpt-oss), so a row
// may attend to "nothing". It adds exp(sink - m) to the sum and leaves acc
// as it is (rescaled to the new maximum). A row that saw no key stays
// empty: its output is zero either way.
inline void AddSink(SoftmaxState& state, float* acc, float sink, size_t head_dim) {
  if (state.empty()) return;
  const float m = std::fmax(state.max, sink);
  const float a = std::exp(state.max - m);
  state.sum = state.sum * a + std::exp(sink - m);
  state.max = m;
  for (size_t f = 0; f < head_dim; ++f) acc[f] *= a;
}

// out = acc / l, or zeros for a row that saw no key.
inline void Finalize(const SoftmaxState& state, const float* acc, float* out, size_t head_dim) {
  if (state.empty()) {
    for (size_t f = 0; f < head_dim; ++f) out[f] = 0.0f;
    return;
  }
  const float inv = 1.0f / state.sum;
  for (size_t f = 0; f < head_dim; ++f) out[f] = acc[f] * inv;
}

}  // namespace folio::attention

#endif  // FOLIO_ATTENTION_ONLINE_SOFTMAX_H_
