// Float64 paged attention for the float64 reference decoder: the worked
// example's attention, read through the engine's block tables.
//
// query: [num_rows, num_q_heads, head_dim] token-major, float64; sequence s
// owns rows [query_indptr[s], query_indptr[s + 1]) at logical positions
// n_s - L_s + i, n_s the context its CSR pages hold
// (attention/paged_attention.h). kv: one layer's
// pools of the engine's paged cache, any float dtype (f64 keeps the rows
// exactly; f32, bf16 and f16 widen exactly). out has the query's shape.
//
// Per row, the stable two-pass softmax in float64 over its visible keys in
// increasing logical order (causal, and position - j < window when window
// > 0): scores q·k in feature order, times scale; weights exp(score - max)
// summed in key order; out = sum over keys of (weight / sum) · v. The
// result depends only on logical content, never on page size or placement.
#ifndef FOLIO_TOOLS_REFERENCE_FLOAT64_ATTENTION_H_
#define FOLIO_TOOLS_REFERENCE_FLOAT64_ATTENTION_H_

#include <span>

#include "folio/attention/paged_attention.h"
#include "folio/core/status.h"
#include "folio/kv/paged_view.h"

namespace folio::reference {

// Errors: ValidatePagedAttention's; a head-major query or no causal mask
// (not needed by a decoder); a quantized K/V dtype.
Status Float64PagedAttention(const attention::PagedAttentionParams& params,
                             std::span<const double> query, const kv::PagedKvView& kv,
                             const kv::PagedBatchView& batch, std::span<double> out);

}  // namespace folio::reference

#endif  // FOLIO_TOOLS_REFERENCE_FLOAT64_ATTENTION_H_
