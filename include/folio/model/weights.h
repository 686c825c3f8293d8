// The decoder's parameters as stored tensors (model/tensor.h).
//
// Matrices are [out, in] row-major — one contiguous row per output, the
// nn.Linear / Hugging Face / GGUF convention — so y = W x is a dot product
// per row. The embedding is [vocab, hidden]: row t is token t, and when tied
// it is also the output head (logits = E h).
#ifndef FOLIO_MODEL_WEIGHTS_H_
#define FOLIO_MODEL_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "folio/model/config.h"
#include "folio/model/tensor.h"

namespace folio::model {

struct LayerWeights {
  Tensor attn_norm;       // [hidden]
  Tensor wq;              // [num_heads * head_dim, hidden]
  Tensor wk;              // [num_kv_heads * head_dim, hidden]
  Tensor wv;              // [num_kv_heads * head_dim, hidden]
  Tensor bq;              // [num_heads * head_dim]     attention_bias only
  Tensor bk;              // [num_kv_heads * head_dim]  attention_bias only
  Tensor bv;              // [num_kv_heads * head_dim]  attention_bias only
  Tensor q_norm;          // [head_dim]                 qk_norm only
  Tensor k_norm;          // [head_dim]                 qk_norm only
  Tensor wo;              // [hidden, num_heads * head_dim]
  Tensor bo;              // [hidden]                   output_bias only
  Tensor sinks;           // [num_heads]                attention_sinks only
  Tensor post_attn_norm;  // [hidden]               NormLayout::kSandwich only
  Tensor ffn_norm;        // [hidden]
  Tensor w_gate;          // [ffn, hidden]
  Tensor w_up;            // [ffn, hidden]
  Tensor w_down;          // [hidden, ffn]
  Tensor post_ffn_norm;   // [hidden]                NormLayout::kSandwich only
  // A mixture of experts instead of w_gate, w_up, w_down:
  Tensor router;                    // [num_experts, hidden]
  std::vector<Tensor> expert_gate;  // num_experts x [expert_ffn, hidden]
  std::vector<Tensor> expert_up;    // num_experts x [expert_ffn, hidden]
  std::vector<Tensor> expert_down;  // num_experts x [hidden, expert_ffn]
  // moe_bias only:
  Tensor router_bias;                    // [num_experts]
  std::vector<Tensor> expert_gate_bias;  // num_experts x [expert_ffn]
  std::vector<Tensor> expert_up_bias;    // num_experts x [expert_ffn]
  std::vector<Tensor> expert_down_bias;  // num_experts x [hidden]
  // router_selection_bias only:
  Tensor router_selection_bias;  // [num_experts]
  // A shared expert (SharedExpertFfnSize() != 0; its gate only for
  // shared_expert_ffn_size):
  Tensor shared_gate;         // [shared_ffn, hidden]
  Tensor shared_up;           // [shared_ffn, hidden]
  Tensor shared_down;         // [hidden, shared_ffn]
  Tensor shared_expert_gate;  // [1, hidden]
  // Block::kBert only: the LayerNorms' biases (attn_norm and ffn_norm are
  // the norms after attention and after the MLP) and the MLP's (w_up and
  // w_down; there is no gate).
  Tensor attn_norm_bias;  // [hidden]
  Tensor ffn_norm_bias;   // [hidden]
  Tensor b_up;            // [ffn]
  Tensor b_down;          // [hidden]
};

struct ModelWeights {
  Tensor embedding;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  Tensor final_norm;  // [hidden]; none in Block::kBert
  Tensor lm_head;     // [vocab, hidden]; empty when tied
  // Block::kBert only:
  Tensor position_embedding;    // [max_positions, hidden]
  Tensor token_type_embedding;  // [type_vocab_size, hidden]
  Tensor embedding_norm;        // [hidden]
  Tensor embedding_norm_bias;   // [hidden]
  // num_labels > 0: the classification head (a decoder's score head is
  // `classifier` alone).
  Tensor pooler;           // [hidden, hidden]      kBert only
  Tensor pooler_bias;      // [hidden]              kBert only
  Tensor classifier;       // [num_labels, hidden]
  Tensor classifier_bias;  // [num_labels]          kBert only
};

// ForEachTensor's list for Block::kBert, under Hugging Face BertModel's
// names: the embeddings (token, position, type, their LayerNorm), then per
// layer q, k, v, o, the norm after attention, up, down and the norm after
// the MLP, each with its bias; then, with a classification head, the
// pooler and the classifier (BertForSequenceClassification's names, its
// encoder's "bert." prefix left out).
template <typename W, typename Fn>
void ForEachBertTensor(const ModelConfig& c, W& w, Fn&& fn) {
  using Shape = std::vector<uint64_t>;
  const uint64_t d = c.hidden_size, f = c.ffn_size;
  fn(std::string("embeddings.word_embeddings.weight"), Shape{c.vocab_size, d}, w.embedding);
  fn(std::string("embeddings.position_embeddings.weight"), Shape{c.max_positions, d},
     w.position_embedding);
  fn(std::string("embeddings.token_type_embeddings.weight"), Shape{c.type_vocab_size, d},
     w.token_type_embedding);
  fn(std::string("embeddings.LayerNorm.weight"), Shape{d}, w.embedding_norm);
  fn(std::string("embeddings.LayerNorm.bias"), Shape{d}, w.embedding_norm_bias);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    auto& l = w.layers[i];
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    fn(p + "attention.self.query.weight", Shape{c.q_size(), d}, l.wq);
    fn(p + "attention.self.query.bias", Shape{c.q_size()}, l.bq);
    fn(p + "attention.self.key.weight", Shape{c.kv_size(), d}, l.wk);
    fn(p + "attention.self.key.bias", Shape{c.kv_size()}, l.bk);
    fn(p + "attention.self.value.weight", Shape{c.kv_size(), d}, l.wv);
    fn(p + "attention.self.value.bias", Shape{c.kv_size()}, l.bv);
    fn(p + "attention.output.dense.weight", Shape{d, c.q_size()}, l.wo);
    fn(p + "attention.output.dense.bias", Shape{d}, l.bo);
    fn(p + "attention.output.LayerNorm.weight", Shape{d}, l.attn_norm);
    fn(p + "attention.output.LayerNorm.bias", Shape{d}, l.attn_norm_bias);
    fn(p + "intermediate.dense.weight", Shape{f, d}, l.w_up);
    fn(p + "intermediate.dense.bias", Shape{f}, l.b_up);
    fn(p + "output.dense.weight", Shape{d, f}, l.w_down);
    fn(p + "output.dense.bias", Shape{d}, l.b_down);
    fn(p + "output.LayerNorm.weight", Shape{d}, l.ffn_norm);
    fn(p + "output.LayerNorm.bias", Shape{d}, l.ffn_norm_bias);
  }
  if (c.num_labels != 0) {
    fn(std::string("pooler.dense.weight"), Shape{d, d}, w.pooler);
    fn(std::string("pooler.dense.bias"), Shape{d}, w.pooler_bias);
    fn(std::string("classifier.weight"), Shape{c.num_labels, d}, w.classifier);
    fn(std::string("classifier.bias"), Shape{c.num_labels}, w.classifier_bias);
  }
}

// Visits every tensor the config calls for, in the canonical order —
// embedding, then per layer attn_norm, wq, wk, wv, (bq, bk, bv), (q_norm,
// k_norm), wo, (bo), (sinks), (post_attn_norm), ffn_norm, w_gate, w_up,
// w_down (or, in a mixture layer, the router (and its bias), (its selection
// bias), each expert's gate, up, down, each with its bias under moe_bias,
// and (the shared expert's gate, up, down and (gate))), (post_ffn_norm), then final_norm and
// (untied only) lm_head, or a sequence classifier's score head instead — with its Hugging Face name
// and expected shape (a BERT block's list is ForEachBertTensor's). (The sandwich layout's names are
// Gemma's: its post_attention_layernorm is the norm after attention, and the norm before the MLP is
// pre_feedforward_layernorm.) Save, load, the model id and the decoder all walk this one list, so
// they cannot disagree on names, shapes or order. W is ModelWeights or const ModelWeights; fn(const
// std::string& name, const std::vector<uint64_t>& shape, Tensor& or const Tensor&).
template <typename W, typename Fn>
void ForEachTensor(const ModelConfig& c, W& w, Fn&& fn) {
  switch (c.block) {
    case Block::kBert:
      ForEachBertTensor(c, w, fn);
      return;
    case Block::kDecoder:
      break;
  }
  using Shape = std::vector<uint64_t>;
  const uint64_t d = c.hidden_size;
  fn(std::string("model.embed_tokens.weight"), Shape{c.vocab_size, d}, w.embedding);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    auto& l = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    fn(p + "input_layernorm.weight", Shape{d}, l.attn_norm);
    fn(p + "self_attn.q_proj.weight", Shape{c.q_size(), d}, l.wq);
    fn(p + "self_attn.k_proj.weight", Shape{c.kv_size(), d}, l.wk);
    fn(p + "self_attn.v_proj.weight", Shape{c.kv_size(), d}, l.wv);
    if (c.attention_bias) {
      fn(p + "self_attn.q_proj.bias", Shape{c.q_size()}, l.bq);
      fn(p + "self_attn.k_proj.bias", Shape{c.kv_size()}, l.bk);
      fn(p + "self_attn.v_proj.bias", Shape{c.kv_size()}, l.bv);
    }
    if (c.qk_norm) {
      fn(p + "self_attn.q_norm.weight", Shape{c.head_dim()}, l.q_norm);
      fn(p + "self_attn.k_norm.weight", Shape{c.head_dim()}, l.k_norm);
    }
    fn(p + "self_attn.o_proj.weight", Shape{d, c.q_size()}, l.wo);
    if (c.output_bias) fn(p + "self_attn.o_proj.bias", Shape{d}, l.bo);
    if (c.attention_sinks) fn(p + "self_attn.sinks", Shape{c.num_heads}, l.sinks);
    const bool sandwich = c.norm_layout == NormLayout::kSandwich;
    if (sandwich) {
      fn(p + "post_attention_layernorm.weight", Shape{d}, l.post_attn_norm);
      fn(p + "pre_feedforward_layernorm.weight", Shape{d}, l.ffn_norm);
    } else {
      fn(p + "post_attention_layernorm.weight", Shape{d}, l.ffn_norm);
    }
    if (c.IsMoeLayer(i)) {
      if constexpr (!std::is_const_v<W>) {  // a loader fills them
        for (auto* experts : {&l.expert_gate, &l.expert_up, &l.expert_down}) {
          experts->resize(c.num_experts);
        }
        for (auto* biases : {&l.expert_gate_bias, &l.expert_up_bias, &l.expert_down_bias}) {
          biases->resize(c.moe_bias ? c.num_experts : 0);
        }
      }
      const uint64_t f = c.expert_ffn_size;
      fn(p + "mlp.gate.weight", Shape{c.num_experts, d}, l.router);
      if (c.moe_bias) fn(p + "mlp.gate.bias", Shape{c.num_experts}, l.router_bias);
      if (c.router_selection_bias) {
        fn(p + "mlp.gate.e_score_correction_bias", Shape{c.num_experts}, l.router_selection_bias);
      }
      for (uint64_t e = 0; e < c.num_experts; ++e) {
        const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
        fn(x + "gate_proj.weight", Shape{f, d}, l.expert_gate.at(e));
        if (c.moe_bias) fn(x + "gate_proj.bias", Shape{f}, l.expert_gate_bias.at(e));
        fn(x + "up_proj.weight", Shape{f, d}, l.expert_up.at(e));
        if (c.moe_bias) fn(x + "up_proj.bias", Shape{f}, l.expert_up_bias.at(e));
        fn(x + "down_proj.weight", Shape{d, f}, l.expert_down.at(e));
        if (c.moe_bias) fn(x + "down_proj.bias", Shape{d}, l.expert_down_bias.at(e));
      }
      if (const uint64_t fs = c.shared_expert_ffn_size; fs != 0) {
        fn(p + "mlp.shared_expert.gate_proj.weight", Shape{fs, d}, l.shared_gate);
        fn(p + "mlp.shared_expert.up_proj.weight", Shape{fs, d}, l.shared_up);
        fn(p + "mlp.shared_expert.down_proj.weight", Shape{d, fs}, l.shared_down);
        fn(p + "mlp.shared_expert_gate.weight", Shape{1, d}, l.shared_expert_gate);
      }
      if (c.num_shared_experts != 0) {  // DeepSeek's names: no gate
        const uint64_t fs = c.SharedExpertFfnSize();
        fn(p + "mlp.shared_experts.gate_proj.weight", Shape{fs, d}, l.shared_gate);
        fn(p + "mlp.shared_experts.up_proj.weight", Shape{fs, d}, l.shared_up);
        fn(p + "mlp.shared_experts.down_proj.weight", Shape{d, fs}, l.shared_down);
      }
    } else {
      fn(p + "mlp.gate_proj.weight", Shape{c.ffn_size, d}, l.w_gate);
      fn(p + "mlp.up_proj.weight", Shape{c.ffn_size, d}, l.w_up);
      fn(p + "mlp.down_proj.weight", Shape{d, c.ffn_size}, l.w_down);
    }
    if (sandwich) fn(p + "post_feedforward_layernorm.weight", Shape{d}, l.post_ffn_norm);
  }
  fn(std::string("model.norm.weight"), Shape{d}, w.final_norm);
  if (c.num_labels != 0) {  // a sequence classifier's score head, instead of the output head
    fn(std::string("score.weight"), Shape{c.num_labels, d}, w.classifier);
  } else if (!c.tie_embeddings) {
    fn(std::string("lm_head.weight"), Shape{c.vocab_size, d}, w.lm_head);
  }
}

}  // namespace folio::model

#endif  // FOLIO_MODEL_WEIGHTS_H_
