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

using backend::DeviceBuffer;
using decoder_internal::AddRowBias;
using decoder_internal::ApplyLinears;

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
  const DeviceBuffer<float> x = be->Allocate<float>(rows * d);  // residual stream [rows, hidden]
  const DeviceBuffer<float> e = be->Allocate<float>(rows * d);
  w.embedding.Embed(be->ToDevice<int32_t>(plan.tokens), x, be);  // CheckTokens bounded the ids
  const std::vector<int32_t> zeros(plan.token_types.empty() ? rows : 0, 0);
  w.token_type_embedding->Embed(
      be->ToDevice<int32_t>(plan.token_types.empty() ? std::span<const int32_t>(zeros)
                                                     : plan.token_types),
      e, be);  // Step bounded the types
  be->Add(x, e);
  std::vector<int32_t> positions(rows);
  for (uint64_t r = 0; r < rows; ++r) {
    positions[r] = static_cast<int32_t>(plan.positions[r]);  // < max_positions (Step checked)
  }
  w.position_embedding->Embed(be->ToDevice<int32_t>(positions), e, be);
  be->Add(x, e);
  be->LayerNorm(x, w.embedding_norm, w.embedding_norm_bias, eps, x);

  const DeviceBuffer<float> q = be->Allocate<float>(rows * c.q_size());
  const DeviceBuffer<float> k = be->Allocate<float>(rows * c.kv_size());
  const DeviceBuffer<float> v = be->Allocate<float>(rows * c.kv_size());
  const DeviceBuffer<float> attn = be->Allocate<float>(rows * c.q_size());
  const DeviceBuffer<float> delta = be->Allocate<float>(rows * d);
  const DeviceBuffer<float> up = be->Allocate<float>(rows * f);
  const bool tanh_form = c.activation == Activation::kGeluTanh;
  for (uint64_t layer = 0; layer < c.num_layers; ++layer) {
    const Weights::Layer& lw = w.layers[layer];
    FOLIO_RETURN_IF_ERROR(ApplyLinears<3>({&*lw.wq, &*lw.wk, &*lw.wv}, x, rows, {q, k, v}, be));
    AddRowBias(q, lw.bq, be);
    AddRowBias(k, lw.bk, be);
    AddRowBias(v, lw.bv, be);
    FOLIO_RETURN_IF_ERROR(attend(layer, 0, q, k, v, attn));
    FOLIO_RETURN_IF_ERROR(lw.wo->Apply(attn, rows, delta, be));
    AddRowBias(delta, lw.bo, be);
    be->Add(x, delta);  // delta + x: f32 addition commutes, bit for bit
    be->LayerNorm(x, lw.attn_norm, lw.attn_norm_bias, eps, x);
    FOLIO_RETURN_IF_ERROR(lw.mlp[0].Apply(x, rows, up, be));
    AddRowBias(up, lw.b_up, be);
    be->Gelu(up, tanh_form);
    FOLIO_RETURN_IF_ERROR(lw.mlp[1].Apply(up, rows, delta, be));
    AddRowBias(delta, lw.b_down, be);
    be->Add(x, delta);
    be->LayerNorm(x, lw.ffn_norm, lw.ffn_norm_bias, eps, x);
  }
  *hidden = be->ToHost<float>(SelectRows(x, plan.hidden_rows, /*norm=*/false));
  return std::vector<float>();
}

}  // namespace folio::model
