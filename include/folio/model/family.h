// The block shapes that differ between model families: the MLP's
// activation and where the norms sit. The architecture table fixes them per
// family; ModelConfig carries them.
#ifndef FOLIO_MODEL_FAMILY_H_
#define FOLIO_MODEL_FAMILY_H_

#include <cstdint>

#include "folio/ops/router.h"

namespace folio::model {

// The MLP's activation: SwiGLU (silu) or GeGLU with GELU's tanh
// approximation (Gemma's gelu_pytorch_tanh) in a gated MLP; in BERT's plain
// MLP, GELU itself (erf; Hugging Face's "gelu") or its tanh form.
enum class Activation : uint8_t { kSilu, kGeluTanh, kGelu };

// How a mixture's router turns logits into expert weights (ops/router.h).
using ops::Routing;

// Where the norms sit. kPre: a norm before attention and one before the
// MLP. kSandwich (Gemma 2 and 3): also one after attention and one after
// the MLP, applied to the branch before it joins the residual.
enum class NormLayout : uint8_t { kPre, kSandwich };

// The layer's whole shape. kDecoder: the causal pre-norm decoder with RoPE
// that every generative family shares (NormLayout, Activation and the
// config's options vary it). kBert: the BERT encoder — learned absolute
// position and token-type embeddings added to the token's, a LayerNorm
// (with bias) over their sum; per layer, bidirectional attention with
// biased q/k/v/o projections, then LayerNorm(x + attention), then a plain
// MLP (up, GELU, down, each projection biased), then LayerNorm(x + MLP);
// no final norm and no output head. An encoder embeds: it never generates.
enum class Block : uint8_t { kDecoder, kBert };

}  // namespace folio::model

#endif  // FOLIO_MODEL_FAMILY_H_
