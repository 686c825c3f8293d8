// The decoder's hyperparameters.
//
// A Llama-family decoder: token embedding; per layer RMSNorm -> Q/K/V
// projections with grouped-query attention -> RoPE (interleaved pairs) on
// logical positions -> causal attention with an optional local window ->
// output projection -> RMSNorm -> SwiGLU MLP; a final norm; an output head
// that may be tied to the embedding.
#ifndef FOLIO_MODEL_CONFIG_H_
#define FOLIO_MODEL_CONFIG_H_

#include <cstdint>

#include "folio/core/status.h"

namespace folio::model {

struct ModelConfig {
  uint64_t hidden_size = 8;        // model width D
  uint64_t num_heads = 4;          // query heads H_q
  uint64_t num_kv_heads = 2;       // shared K/V heads H_kv
  uint64_t ffn_size = 12;          // SwiGLU inner width F
  uint64_t num_layers = 2;
  uint64_t max_positions = 12;     // context capacity
  uint64_t vocab_size = 258;
  double rope_theta = 10000.0;
  double norm_eps = 1e-6;
  bool tie_embeddings = true;      // output head = embedding table
  uint64_t window = 0;             // sliding window; 0 = full context

  uint64_t head_dim() const { return hidden_size / num_heads; }
  uint64_t q_size() const { return num_heads * head_dim(); }
  uint64_t kv_size() const { return num_kv_heads * head_dim(); }

  // Errors: a zero size; hidden_size not divisible by num_heads; an odd head
  // dim (RoPE rotates pairs); num_heads not a multiple of num_kv_heads;
  // rope_theta or norm_eps not finite and > 0; vocab beyond int32; sizes so
  // large the parameter count overflows.
  Status Validate() const;

  // The number of parameters (norm gains included).
  uint64_t ParameterCount() const;

  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

// The page-table chapter's worked example (../shared/reference/course-fixture.md):
// width 8, 4 query heads, 2 K/V heads, ffn 12, 2 layers, 12 positions,
// vocabulary 258, tied embedding, no window.
ModelConfig WorkedExampleConfig();

}  // namespace folio::model

#endif  // FOLIO_MODEL_CONFIG_H_
