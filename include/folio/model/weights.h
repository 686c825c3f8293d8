// The decoder's parameters, by value, in one compute type T.
//
// Matrices are [out, in] row-major — one contiguous row per output, the
// nn.Linear / Hugging Face convention — so y = W x is a dot product per row.
// The embedding is [vocab, hidden]: row t is token t, and when tied it is
// also the output head (logits = E h).
#ifndef FOLIO_MODEL_WEIGHTS_H_
#define FOLIO_MODEL_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "folio/model/config.h"

namespace folio::model {

template <typename T>
struct LayerWeights {
  std::vector<T> attn_norm;  // [hidden]
  std::vector<T> wq;         // [num_heads * head_dim, hidden]
  std::vector<T> wk;         // [num_kv_heads * head_dim, hidden]
  std::vector<T> wv;         // [num_kv_heads * head_dim, hidden]
  std::vector<T> wo;         // [hidden, num_heads * head_dim]
  std::vector<T> ffn_norm;   // [hidden]
  std::vector<T> w_gate;     // [ffn, hidden]
  std::vector<T> w_up;       // [ffn, hidden]
  std::vector<T> w_down;     // [hidden, ffn]
};

template <typename T>
struct ModelWeights {
  std::vector<T> embedding;   // [vocab, hidden]
  std::vector<LayerWeights<T>> layers;
  std::vector<T> final_norm;  // [hidden]
  std::vector<T> lm_head;     // [vocab, hidden]; empty when tied
};

// Visits every tensor in the canonical order — embedding, then per layer
// attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down, then
// final_norm and (untied only) lm_head — with its Hugging Face Llama name and
// shape. Save, load, the model id and precision conversion all walk this one
// list, so they cannot disagree on names, shapes or order.
template <typename W, typename Fn>
void ForEachTensor(const ModelConfig& c, W& w, Fn&& fn) {
  const uint64_t d = c.hidden_size;
  fn(std::string("model.embed_tokens.weight"), std::vector<uint64_t>{c.vocab_size, d},
     w.embedding);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    auto& l = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    fn(p + "input_layernorm.weight", std::vector<uint64_t>{d}, l.attn_norm);
    fn(p + "self_attn.q_proj.weight", std::vector<uint64_t>{c.q_size(), d}, l.wq);
    fn(p + "self_attn.k_proj.weight", std::vector<uint64_t>{c.kv_size(), d}, l.wk);
    fn(p + "self_attn.v_proj.weight", std::vector<uint64_t>{c.kv_size(), d}, l.wv);
    fn(p + "self_attn.o_proj.weight", std::vector<uint64_t>{d, c.q_size()}, l.wo);
    fn(p + "post_attention_layernorm.weight", std::vector<uint64_t>{d}, l.ffn_norm);
    fn(p + "mlp.gate_proj.weight", std::vector<uint64_t>{c.ffn_size, d}, l.w_gate);
    fn(p + "mlp.up_proj.weight", std::vector<uint64_t>{c.ffn_size, d}, l.w_up);
    fn(p + "mlp.down_proj.weight", std::vector<uint64_t>{d, c.ffn_size}, l.w_down);
  }
  fn(std::string("model.norm.weight"), std::vector<uint64_t>{d}, w.final_norm);
  if (!c.tie_embeddings) {
    fn(std::string("lm_head.weight"), std::vector<uint64_t>{c.vocab_size, d}, w.lm_head);
  }
}

// Empty weights with every tensor sized for `config` (zeros).
template <typename T>
ModelWeights<T> AllocateWeights(const ModelConfig& config) {
  ModelWeights<T> w;
  w.layers.resize(config.num_layers);
  ForEachTensor(config, w, [](const std::string&, const std::vector<uint64_t>& shape,
                              std::vector<T>& t) {
    uint64_t n = 1;
    for (uint64_t s : shape) n *= s;
    t.assign(n, T(0));
  });
  return w;
}

// Rounds every parameter to T (from double).
template <typename T>
ModelWeights<T> ConvertWeights(const ModelConfig& config,
                               const ModelWeights<double>& from) {
  ModelWeights<T> to = AllocateWeights<T>(config);
  std::vector<const std::vector<double>*> sources;
  ForEachTensor(config, from, [&](const std::string&, const std::vector<uint64_t>&,
                                  const std::vector<double>& t) { sources.push_back(&t); });
  size_t i = 0;
  ForEachTensor(config, to, [&](const std::string&, const std::vector<uint64_t>&,
                                std::vector<T>& t) {
    const std::vector<double>& src = *sources[i++];
    for (size_t j = 0; j < t.size(); ++j) t[j] = static_cast<T>(src[j]);
  });
  return to;
}

}  // namespace folio::model

#endif  // FOLIO_MODEL_WEIGHTS_H_
