// What the decoder's block files share (decoder.cc: the decoder block;
// bert_block.cc: the BERT encoder): the weights as uploaded to the backend
// and the small helpers over them. Internal to the model module.
#ifndef FOLIO_MODEL_DECODER_INTERNAL_H_
#define FOLIO_MODEL_DECODER_INTERNAL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "folio/backend/backend.h"
#include "folio/core/check.h"
#include "folio/model/decoder.h"
#include "folio/model/model.h"
#include "folio/ops/matmul.h"

namespace folio::model {

namespace decoder_internal {

using backend::DeviceBuffer;
using backend::DeviceSpan;

// A linear layer, y = W x per row: weights stay as stored, uploaded once to the backend, whose
// kernels widen them as they read; a type without a matmul kernel (f64) is
// decoded to f32 once first.
class Linear {
 public:
  Linear(const Tensor& t, backend::Backend* backend) : owner_(t.owner) {
    const uint64_t rows = t.shape.at(0), cols = t.shape.at(1);
    ops::WeightView view{t.bytes.data(), t.type, rows, cols};
    if (!ops::TraitsOf(t.type).has_matmul) {
      converted_.resize(rows * cols);
      ops::DequantizeRow(t.type, t.bytes.data(), converted_);
      view = {reinterpret_cast<const std::byte*>(converted_.data()), ops::WeightType::kF32, rows,
              cols};
    }
    Result<backend::Weight> w = backend->Upload(view);
    FOLIO_CHECK(w.ok(), w.status().ToString());  // the model validated its tensors
    weight_ = *w;
  }
  Status Apply(DeviceSpan<const float> x, uint64_t num_rows, DeviceSpan<float> y,
               backend::Backend* backend) const {
    const ops::WeightView& v = weight_.host;
    return backend->MatMul(weight_, x.first(num_rows * v.cols), num_rows,
                           y.first(num_rows * v.rows));
  }
  void Embed(DeviceSpan<const int32_t> ids, DeviceSpan<float> out,
             backend::Backend* backend) const {
    backend->Embed(weight_, ids, out);
  }
  const backend::Weight& weight() const { return weight_; }

 private:
  std::shared_ptr<const void> owner_;  // keeps a mapped file alive
  std::vector<float> converted_;
  backend::Weight weight_{};
};

// y[r, i] += bias[i] for every row of y; nothing for an absent (empty) bias.
inline void AddRowBias(DeviceSpan<float> y, const DeviceBuffer<float>& bias,
                       backend::Backend* backend) {
  if (!bias.empty()) backend->AddBias(y, bias);
}

inline std::vector<float> Values(const Tensor& t) {
  if (t.empty()) return {};
  const std::vector<double> wide = t.ToDoubles();
  return std::vector<float>(wide.begin(), wide.end());
}

// A small parameter (a bias, the attention sinks) as f32 in the backend's
// memory; empty for an absent tensor.
inline DeviceBuffer<float> Param(const Tensor& t, backend::Backend* backend) {
  return backend->ToDevice<float>(Values(t));
}

// Several linear layers on one input (q/k/v, gate/up): one backend call, so that
// the backend can share the work on x (Backend::MatMuls).
template <size_t N>
Status ApplyLinears(const std::array<const Linear*, N>& ls, DeviceSpan<const float> x,
                    uint64_t rows, const std::array<DeviceSpan<float>, N>& ys,
                    backend::Backend* backend) {
  std::array<const backend::Weight*, N> ws;
  std::array<DeviceSpan<float>, N> outs;
  for (size_t i = 0; i < N; ++i) {
    ws[i] = &ls[i]->weight();
    outs[i] = ys[i].first(rows * ws[i]->host.rows);
  }
  return backend->MatMuls(ws, x.first(rows * ws[0]->host.cols), rows, outs);
}

}  // namespace decoder_internal

using backend::DeviceBuffer;
using decoder_internal::Linear;
using decoder_internal::Param;
using decoder_internal::Values;

struct Decoder::Weights {
  struct Layer {
    DeviceBuffer<float> attn_norm, post_attn_norm, ffn_norm, post_ffn_norm, bq, bk, bv, q_norm,
        k_norm;
    std::optional<Linear> wq, wk, wv, wo;
    uint64_t window = 0;  // the layer's sliding window; 0 = global
    size_t rope = 0;      // its table in `ropes`
    // A dense MLP (gate, up, down; a BERT block's: up, down), or a router
    // and experts (one entry each).
    std::vector<Linear> mlp, router, expert_gate, expert_up, expert_down;
    // A shared expert: gate, up, down and, when gated, its one-row gate
    // (empty: none).
    std::vector<Linear> shared_expert;
    // gpt-oss (and BERT): the output projection's bias; gpt-oss: the
    // attention sinks, and the router's and experts' biases (one entry per
    // expert).
    DeviceBuffer<float> bo, sinks, router_bias;
    std::vector<DeviceBuffer<float>> expert_gate_bias, expert_up_bias, expert_down_bias;
    // The router's selection bias (dots1) [num_experts].
    DeviceBuffer<float> selection_bias;
    // The routed experts as Backend::Experts takes them (pointers into
    // expert_gate / up / down and their biases).
    std::vector<backend::Expert> experts;
    // BERT: the LayerNorms' biases, and the MLP's (up, down).
    DeviceBuffer<float> attn_norm_bias, ffn_norm_bias, b_up, b_down;
  };
  Linear embedding;
  std::vector<Layer> layers;
  DeviceBuffer<float> final_norm;  // empty in a BERT block
  // The embedding again when tied; none in a BERT block or a sequence
  // classifier.
  std::optional<Linear> head;
  // RoPE's inverse frequencies, one table per distinct (base, scaling) of
  // the layers (two for Gemma 3's local and global layers), one per pair,
  // and what each table's cos and sin are multiplied by (longrope). None in
  // a BERT block.
  std::vector<std::vector<double>> ropes;
  std::vector<double> rope_scales;
  // BERT: the position and token-type tables and the embeddings' LayerNorm;
  // with a classification head, its pooler and classifier (a decoder's
  // score head is `classifier` alone).
  std::optional<Linear> position_embedding, token_type_embedding, pooler, classifier;
  DeviceBuffer<float> embedding_norm, embedding_norm_bias, pooler_bias, classifier_bias;

  Weights(const Model& m, backend::Backend* b) : embedding(m.weights().embedding, b) {
    const ModelConfig& c = m.config();
    const ModelWeights& mw = m.weights();
    final_norm = Norm(c, mw.final_norm, b);
    if (c.IsEncoder()) {
      position_embedding.emplace(mw.position_embedding, b);
      token_type_embedding.emplace(mw.token_type_embedding, b);
      embedding_norm = Param(mw.embedding_norm, b);
      embedding_norm_bias = Param(mw.embedding_norm_bias, b);
      if (c.num_labels != 0) {
        pooler.emplace(mw.pooler, b);
        classifier.emplace(mw.classifier, b);
        pooler_bias = Param(mw.pooler_bias, b);
        classifier_bias = Param(mw.classifier_bias, b);
      }
    } else if (c.num_labels != 0) {
      classifier.emplace(mw.classifier, b);  // the score head
    } else {
      head.emplace(c.tie_embeddings ? mw.embedding : mw.lm_head, b);
    }
    std::vector<LayerConfig> rope_of;  // the layer settings whose RoPE each table holds
    for (uint64_t i = 0; i < c.num_layers; ++i) {
      const LayerWeights& l = mw.layers[i];
      const LayerConfig lc = c.Layer(i);
      Layer& layer = layers.emplace_back();
      layer.attn_norm = Norm(c, l.attn_norm, b);
      layer.post_attn_norm = Norm(c, l.post_attn_norm, b);
      layer.ffn_norm = Norm(c, l.ffn_norm, b);
      layer.post_ffn_norm = Norm(c, l.post_ffn_norm, b);
      layer.bq = Param(l.bq, b);
      layer.bk = Param(l.bk, b);
      layer.bv = Param(l.bv, b);
      layer.q_norm = Norm(c, l.q_norm, b);
      layer.k_norm = Norm(c, l.k_norm, b);
      layer.wq.emplace(l.wq, b);
      layer.wk.emplace(l.wk, b);
      layer.wv.emplace(l.wv, b);
      layer.wo.emplace(l.wo, b);
      layer.window = lc.window;
      layer.bo = Param(l.bo, b);
      layer.sinks = Param(l.sinks, b);
      layer.router_bias = Param(l.router_bias, b);
      layer.selection_bias = Param(l.router_selection_bias, b);
      for (const Tensor& t : l.expert_gate_bias) layer.expert_gate_bias.push_back(Param(t, b));
      for (const Tensor& t : l.expert_up_bias) layer.expert_up_bias.push_back(Param(t, b));
      for (const Tensor& t : l.expert_down_bias) layer.expert_down_bias.push_back(Param(t, b));
      if (c.IsEncoder()) {
        layer.attn_norm_bias = Param(l.attn_norm_bias, b);
        layer.ffn_norm_bias = Param(l.ffn_norm_bias, b);
        layer.b_up = Param(l.b_up, b);
        layer.b_down = Param(l.b_down, b);
        for (const Tensor* t : {&l.w_up, &l.w_down}) layer.mlp.emplace_back(*t, b);
        continue;  // no RoPE, no experts
      }
      size_t rope = 0;
      while (rope < rope_of.size() && !(rope_of[rope].rope_theta == lc.rope_theta &&
                                        rope_of[rope].rope_scaling == lc.rope_scaling)) {
        ++rope;
      }
      if (rope == rope_of.size()) {
        rope_of.push_back(lc);
        ropes.push_back(RopeInverseFrequencies(c.RotaryDim(), lc.rope_theta, lc.rope_scaling));
        rope_scales.push_back(RopeAttentionFactor(lc.rope_scaling));
      }
      layer.rope = rope;
      if (c.IsMoeLayer(i)) {
        layer.router.emplace_back(l.router, b);
        for (uint64_t e = 0; e < c.num_experts; ++e) {
          layer.expert_gate.emplace_back(l.expert_gate[e], b);
          layer.expert_up.emplace_back(l.expert_up[e], b);
          layer.expert_down.emplace_back(l.expert_down[e], b);
        }
        for (uint64_t e = 0; e < c.num_experts; ++e) {
          backend::Expert& x = layer.experts.emplace_back();
          x.gate = &layer.expert_gate[e].weight();
          x.up = &layer.expert_up[e].weight();
          x.down = &layer.expert_down[e].weight();
          if (!layer.expert_gate_bias.empty()) {
            x.gate_bias = layer.expert_gate_bias[e];
            x.up_bias = layer.expert_up_bias[e];
            x.down_bias = layer.expert_down_bias[e];
          }
        }
        if (c.SharedExpertFfnSize() != 0) {
          for (const Tensor* t :
               {&l.shared_gate, &l.shared_up, &l.shared_down, &l.shared_expert_gate}) {
            if (!t->empty()) layer.shared_expert.emplace_back(*t, b);  // the gate when gated
          }
        }
      } else {
        for (const Tensor* t : {&l.w_gate, &l.w_up, &l.w_down}) layer.mlp.emplace_back(*t, b);
      }
    }
  }

 private:
  // A norm's gains as they multiply: the stored values, plus 1 where the
  // family stores the offset from 1 (computed in f32, as Hugging Face's
  // Gemma does: 1.0 + weight.float()).
  static DeviceBuffer<float> Norm(const ModelConfig& c, const Tensor& t, backend::Backend* b) {
    std::vector<float> g = Values(t);
    if (c.norm_unit_offset) {
      for (float& x : g) x = 1.0f + x;
    }
    return b->ToDevice<float>(g);
  }
};

}  // namespace folio::model

#endif  // FOLIO_MODEL_DECODER_INTERNAL_H_
