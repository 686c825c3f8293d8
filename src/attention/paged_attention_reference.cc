// The scalar reference for paged attention: per row, a two-pass softmax over
// its visible keys in float64, every element read through the view's
// strides (PagedKvView::RowIndex).
#include <cmath>
#include <limits>
#include <vector>

#include "attention/paged_attention_internal.h"

namespace folio::attention {

Status PagedAttentionReference(const PagedAttentionParams& params, std::span<const float> query,
                               const kv::PagedKvView& kv, const kv::PagedBatchView& batch,
                               std::span<float> out) {
  FOLIO_RETURN_IF_ERROR(ValidatePagedAttention(params, query.size(), out.size(), kv, batch));
  const uint64_t d = kv.head_dim, group = params.num_q_heads / kv.num_kv_heads;
  // Quantized K/V: the code's value times its row's scale, in float64.
  auto load = [&](const std::byte* base, const float* scales, const int32_t* table, uint64_t g,
                  uint64_t j, uint64_t f) {
    const auto phys = static_cast<uint64_t>(table[j / kv.page_size]);
    const uint64_t row = kv.RowIndex(phys, g, j % kv.page_size);
    const double x = LoadElement<double>(kv.dtype, base, row + f);
    return scales == nullptr ? x : x * double{scales[row / kv.head_dim]};
  };
  std::vector<double> weights, acc(d);
  for (uint64_t s = 0; s < batch.batch(); ++s) {
    const internal::SeqRows seq = internal::RowsOf(batch, kv.page_size, s);
    const int32_t* table = batch.pages(s).data();
    for (uint64_t i = 0; i < seq.num_rows; ++i) {
      const auto [lo, hi] = internal::VisibleKeys(params, seq, i);
      for (uint64_t h = 0; h < params.num_q_heads; ++h) {
        const uint64_t at = internal::RowOffset(params, d, s, seq, i, h);
        const float* q = query.data() + at;
        const uint64_t g = h / group;
        weights.assign(hi > lo ? hi - lo : 0, 0.0);
        double max_score = -std::numeric_limits<double>::infinity();
        for (uint64_t j = lo; j < hi; ++j) {
          double dot = 0;
          for (uint64_t f = 0; f < d; ++f)
            dot += double{q[f]} * load(kv.key_pages, kv.key_scales, table, g, j, f);
          weights[j - lo] = dot * params.scale;
          if (params.softcap != 0) {
            weights[j - lo] = params.softcap * std::tanh(weights[j - lo] / params.softcap);
          }
          max_score = std::max(max_score, weights[j - lo]);
        }
        double sum = 0;
        const bool sink = !params.sinks.empty() && hi > lo;  // (no key: zeros either way)
        if (sink) {
          max_score = std::max(max_score, double{params.sinks[h]});
          sum += std::exp(double{params.sinks[h]} - max_score);
        }
        for (double& w : weights) sum += (w = std::exp(w - max_score));
        std::fill(acc.begin(), acc.end(), 0.0);
        for (uint64_t j = lo; j < hi; ++j) {
          for (uint64_t f = 0; f < d; ++f) {
            acc[f] += weights[j - lo] / sum * load(kv.value_pages, kv.value_scales, table, g, j, f);
          }
        }
        for (uint64_t f = 0; f < d; ++f) out[at + f] = static_cast<float>(acc[f]);
      }
    }
  }
  return Status::Ok();
}

}  // namespace folio::attention
