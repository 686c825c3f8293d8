#include "folio/attention/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace folio::attention {
namespace {

// Reads one feature of (lane b, head h, position pos) through the table.
template <typename T>
T Load(const kv::KvArrayView& v, uint64_t b, uint64_t h, uint64_t pos, uint64_t f) {
  const uint64_t page = pos / v.page_size;
  const uint64_t index =
      kv::ScalarIndex(v.shape, v.page_size, v.table[page], pos % v.page_size, b, h, f);
  return LoadElement<T>(v.dtype, v.data, index);
}

Status Validate(const AttentionParams& p, size_t query_size, size_t out_size,
                const kv::KvArrayView& k, const kv::KvArrayView& v) {
  if (k.shape.batch != v.shape.batch || k.shape.num_kv_heads != v.shape.num_kv_heads ||
      k.shape.head_dim != v.shape.head_dim || k.visible_length != v.visible_length) {
    return Status::InvalidArgument("key and value views differ in shape or length");
  }
  const uint64_t kv_heads = k.shape.num_kv_heads;
  if (p.num_q_heads == 0 || p.num_q_heads % kv_heads != 0) {
    return Status::InvalidArgument("num_q_heads " + std::to_string(p.num_q_heads) +
                                   " is not a positive multiple of num_kv_heads " +
                                   std::to_string(kv_heads));
  }
  if (p.query_len == 0 || p.query_len > k.visible_length) {
    return Status::InvalidArgument("query_len " + std::to_string(p.query_len) +
                                   " must be in [1, context " + std::to_string(k.visible_length) +
                                   "]");
  }
  if (!std::isfinite(p.scale) || p.scale < 0) {
    return Status::InvalidArgument("scale must be finite and >= 0 (got " + std::to_string(p.scale) +
                                   ")");
  }
  const uint64_t expected = k.shape.batch * p.num_q_heads * p.query_len * k.shape.head_dim;
  if (query_size != expected || out_size != expected) {
    return Status::InvalidArgument(
        "query and out must hold batch*num_q_heads*query_len*head_dim = " +
        std::to_string(expected) + " values (got " + std::to_string(query_size) + " and " +
        std::to_string(out_size) + ")");
  }
  return Status::Ok();
}

}  // namespace

template <typename T>
Status AttendReference(const AttentionParams& params, std::span<const T> query,
                       const kv::KvArrayView& keys, const kv::KvArrayView& values,
                       std::span<T> out) {
  FOLIO_RETURN_IF_ERROR(Validate(params, query.size(), out.size(), keys, values));
  const uint64_t d = keys.shape.head_dim;
  const uint64_t n = keys.visible_length;
  const uint64_t group = params.num_q_heads / keys.shape.num_kv_heads;
  const T scale = static_cast<T>(params.scale);
  std::vector<T> weights(n);
  std::vector<T> acc(d);
  for (uint64_t b = 0; b < keys.shape.batch; ++b) {
    for (uint64_t h = 0; h < params.num_q_heads; ++h) {
      const uint64_t kv_head = h / group;
      for (uint64_t i = 0; i < params.query_len; ++i) {
        const uint64_t row = ((b * params.num_q_heads + h) * params.query_len + i) * d;
        const T* q = query.data() + row;
        const uint64_t pos = n - params.query_len + i;
        const uint64_t first =
            params.window > 0 && pos + 1 > params.window ? pos + 1 - params.window : 0;
        // Pass 1: scores and their maximum.
        T max_score = -std::numeric_limits<T>::infinity();
        for (uint64_t j = first; j <= pos; ++j) {
          T dot = 0;
          for (uint64_t f = 0; f < d; ++f) dot += q[f] * Load<T>(keys, b, kv_head, j, f);
          weights[j] = dot * scale;
          max_score = std::max(max_score, weights[j]);
        }
        // Pass 2: normalised weights, then the weighted sum of values.
        T sum = 0;
        for (uint64_t j = first; j <= pos; ++j) {
          weights[j] = std::exp(weights[j] - max_score);
          sum += weights[j];
        }
        std::fill(acc.begin(), acc.end(), T(0));
        for (uint64_t j = first; j <= pos; ++j) {
          const T w = weights[j] / sum;
          for (uint64_t f = 0; f < d; ++f) acc[f] += w * Load<T>(values, b, kv_head, j, f);
        }
        std::copy(acc.begin(), acc.end(), out.begin() + static_cast<ptrdiff_t>(row));
      }
    }
  }
  return Status::Ok();
}

template Status AttendReference<float>(const AttentionParams&, std::span<const float>,
                                       const kv::KvArrayView&, const kv::KvArrayView&,
                                       std::span<float>);
template Status AttendReference<double>(const AttentionParams&, std::span<const double>,
                                        const kv::KvArrayView&, const kv::KvArrayView&,
                                        std::span<double>);

}  // namespace folio::attention
