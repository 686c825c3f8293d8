// The BERT encoder's block (Block::kBert), as Hugging Face's BertModel
// computes it: embeddings = LayerNorm(token + type + position); per layer
// x = LayerNorm(x + o(attention(q, k, v))), x = LayerNorm(x + down(gelu(up
// x))), every projection with its bias, attention bidirectional over the
// sequence's rows; no final norm. The sums are added in BertModel's order
// (token + type, then + position; the branch, then + x), so float32 results
// round as its do wherever the kernels agree.
#include <cstdint>
#include <string>
#include <vector>

#include "folio/model/decoder.h"
#include "model/decoder_internal.h"

namespace folio::model {

using decoder_internal::AddRowBias;
using decoder_internal::ApplyLinears;
using decoder_internal::Row;

Result<std::vector<float>> Decoder::RunBert(const RowPlan& plan, const Attend& attend,
                                            std::vector<float>* hidden) const {
  const ModelConfig& c = config_;
  const Weights& w = *weights_;
  if (!plan.logit_rows.empty()) {
    return Status::InvalidArgument(
        "an encoder has no output head: it returns hidden states, not logits");
  }
  if (hidden == nullptr) {
    return Status::InvalidArgument("hidden rows asked for without a buffer for them");
  }
  backend::Backend* const be = backend_.get();
  const uint64_t d = c.hidden_size, rows = plan.tokens.size(), f = c.ffn_size;
  const auto eps = static_cast<float>(c.norm_eps);

  // Embeddings: token + type (type 0 unless the plan says: the second text
  // of a pair is type 1), then + position.
  std::vector<float> x(rows * d), e(rows * d);  // residual stream [rows, hidden]
  w.embedding.Embed(plan.tokens, x, be);        // CheckTokens bounded the ids
  const std::vector<int32_t> zeros(plan.token_types.empty() ? rows : 0, 0);
  w.token_type_embedding->Embed(
      plan.token_types.empty() ? std::span<const int32_t>(zeros) : plan.token_types, e,
      be);  // Step bounded the types
  for (uint64_t i = 0; i < x.size(); ++i) x[i] += e[i];
  std::vector<int32_t> positions(rows);
  for (uint64_t r = 0; r < rows; ++r) {
    positions[r] = static_cast<int32_t>(plan.positions[r]);  // < max_positions (Step checked)
  }
  w.position_embedding->Embed(positions, e, be);
  for (uint64_t i = 0; i < x.size(); ++i) x[i] += e[i];
  be->LayerNorm(x, w.embedding_norm, w.embedding_norm_bias, eps, x);

  std::vector<float> q(rows * c.q_size()), k(rows * c.kv_size()), v(rows * c.kv_size());
  std::vector<float> attn(q.size()), delta(rows * d), up(rows * f);
  const bool tanh_form = c.activation == Activation::kGeluTanh;
  for (uint64_t layer = 0; layer < c.num_layers; ++layer) {
    const Weights::Layer& lw = w.layers[layer];
    FOLIO_RETURN_IF_ERROR(
        ApplyLinears<3>({&*lw.wq, &*lw.wk, &*lw.wv}, x, rows,
                        {std::span<float>(q), std::span<float>(k), std::span<float>(v)}, be));
    AddRowBias(q, lw.bq);
    AddRowBias(k, lw.bk);
    AddRowBias(v, lw.bv);
    FOLIO_RETURN_IF_ERROR(attend(layer, 0, q, k, v, attn));
    FOLIO_RETURN_IF_ERROR(lw.wo->Apply(attn, rows, delta, be));
    AddRowBias(delta, lw.bo);
    for (uint64_t i = 0; i < x.size(); ++i) x[i] = delta[i] + x[i];
    be->LayerNorm(x, lw.attn_norm, lw.attn_norm_bias, eps, x);
    FOLIO_RETURN_IF_ERROR(lw.mlp[0].Apply(x, rows, up, be));
    AddRowBias(up, lw.b_up);
    be->Gelu(up, tanh_form);
    FOLIO_RETURN_IF_ERROR(lw.mlp[1].Apply(up, rows, delta, be));
    AddRowBias(delta, lw.b_down);
    for (uint64_t i = 0; i < x.size(); ++i) x[i] = delta[i] + x[i];
    be->LayerNorm(x, lw.ffn_norm, lw.ffn_norm_bias, eps, x);
  }
  hidden->assign(plan.hidden_rows.size() * d, 0.0f);
  for (uint64_t o = 0; o < plan.hidden_rows.size(); ++o) {
    const std::span<const float> row = Row(x, plan.hidden_rows[o], d);
    std::copy(row.begin(), row.end(), Row(*hidden, o, d).begin());
  }
  return std::vector<float>();
}

}  // namespace folio::model
