#include "reference/float64_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace folio::reference {

Status Float64PagedAttention(const attention::PagedAttentionParams& params,
                             std::span<const double> query, const kv::PagedKvView& kv,
                             const kv::PagedBatchView& batch, std::span<double> out) {
  FOLIO_RETURN_IF_ERROR(
      attention::ValidatePagedAttention(params, query.size(), out.size(), kv, batch));
  if (params.layout != attention::QueryLayout::kTokenMajor || !params.causal) {
    return Status::InvalidArgument("float64 attention takes causal, token-major queries");
  }
  if (IsQuantized(kv.dtype)) {
    return Status::InvalidArgument("float64 attention reads float K/V, not " +
                                   std::string(DTypeName(kv.dtype)));
  }
  const uint64_t d = kv.head_dim, group = params.num_q_heads / kv.num_kv_heads;
  auto load = [&](const std::byte* base, const int32_t* table, uint64_t g, uint64_t j, uint64_t f) {
    const auto page = static_cast<uint64_t>(table[j / kv.page_size]);
    return LoadElement<double>(kv.dtype, base, kv.RowIndex(page, g, j % kv.page_size) + f);
  };
  std::vector<double> weights, acc(d);
  for (uint64_t s = 0; s < batch.batch(); ++s) {
    const auto first_row = static_cast<uint64_t>(batch.query_indptr[s]);
    const auto num_rows = static_cast<uint64_t>(batch.query_indptr[s + 1]) - first_row;
    const uint64_t n = batch.context_len(s, kv.page_size);
    const int32_t* table = batch.pages(s).data();
    weights.assign(n, 0.0);
    if (n == 0) {  // no keys: zeros, as the kernel gives
      std::fill_n(out.begin() + static_cast<std::ptrdiff_t>(first_row * params.num_q_heads * d),
                  num_rows * params.num_q_heads * d, 0.0);
      continue;
    }
    for (uint64_t i = 0; i < num_rows; ++i) {
      const uint64_t pos = n - num_rows + i;
      const uint64_t lo =
          params.window > 0 && pos + 1 > params.window ? pos + 1 - params.window : 0;
      for (uint64_t h = 0; h < params.num_q_heads; ++h) {
        const uint64_t at = ((first_row + i) * params.num_q_heads + h) * d;
        const double* q = query.data() + at;
        const uint64_t g = h / group;
        // Pass 1: scores and their maximum.
        double max_score = -std::numeric_limits<double>::infinity();
        for (uint64_t j = lo; j <= pos; ++j) {
          double dot = 0;
          for (uint64_t f = 0; f < d; ++f) dot += q[f] * load(kv.key_pages, table, g, j, f);
          weights[j] = dot * params.scale;
          if (params.softcap != 0)
            weights[j] = params.softcap * std::tanh(weights[j] / params.softcap);
          max_score = std::max(max_score, weights[j]);
        }
        // Pass 2: normalised weights, then the weighted sum of values.
        double sum = 0;
        for (uint64_t j = lo; j <= pos; ++j) {
          weights[j] = std::exp(weights[j] - max_score);
          sum += weights[j];
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        for (uint64_t j = lo; j <= pos; ++j) {
          const double w = weights[j] / sum;
          for (uint64_t f = 0; f < d; ++f) acc[f] += w * load(kv.value_pages, table, g, j, f);
        }
        std::copy(acc.begin(), acc.end(), out.begin() + static_cast<std::ptrdiff_t>(at));
      }
    }
  }
  return Status::Ok();
}

}  // namespace folio::reference
