// Scalar reference attention over K/V read through a page table.
//
// query: [batch, num_q_heads, query_len, head_dim], compute type T.
// keys/values: views of one layer's K and V (kv/layer_cache.h); all lanes
//   share one context length n = keys.visible_length.
// out:   [batch, num_q_heads, query_len, head_dim].
//
// Query row i sits at logical position n - query_len + i and sees key j iff
// j <= its position (causal) and, with window w > 0, position - j < w.
// Query head h reads K/V head h / (num_q_heads / num_kv_heads) (grouped-query
// attention). Keys are visited in increasing logical order and softmax is the
// stable two-pass form, so the result depends only on logical content, never
// on where pages sit.
#ifndef FOLIO_ATTENTION_REFERENCE_H_
#define FOLIO_ATTENTION_REFERENCE_H_

#include <cstdint>
#include <span>

#include "folio/core/status.h"
#include "folio/kv/layer_cache.h"

namespace folio::attention {

struct AttentionParams {
  uint64_t num_q_heads = 1;
  uint64_t query_len = 1;
  double scale = 1.0;   // usually 1 / sqrt(head_dim)
  uint64_t window = 0;  // 0 = unlimited
};

// Errors: num_q_heads not a multiple of num_kv_heads, query_len > context or
// 0, sizes that do not match the shapes, a non-finite or negative scale, key
// and value views of different shape or length.
template <typename T>
Status AttendReference(const AttentionParams& params, std::span<const T> query,
                       const kv::KvArrayView& keys, const kv::KvArrayView& values,
                       std::span<T> out);

}  // namespace folio::attention

#endif  // FOLIO_ATTENTION_REFERENCE_H_
