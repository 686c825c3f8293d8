// The block shapes that differ between model families: the MLP's
// activation and where the norms sit. The architecture table fixes them per
// family; ModelConfig carries them.
#ifndef FOLIO_MODEL_FAMILY_H_
#define FOLIO_MODEL_FAMILY_H_

#include <cstdint>

namespace folio::model {

// The gated MLP's activation: SwiGLU (silu) or GeGLU with GELU's tanh
// approximation (Gemma's gelu_pytorch_tanh).
enum class Activation : uint8_t { kSilu, kGeluTanh };

// How a mixture's router turns logits into expert weights. kSoftmaxTopK
// (Qwen3-MoE, Mixtral): a softmax over every expert, then the k most
// probable (renormalised when norm_topk_prob). kTopKSoftmax (gpt-oss): the
// k largest logits, then a softmax over those k alone.
enum class Routing : uint8_t { kSoftmaxTopK, kTopKSoftmax };

// Where the norms sit. kPre: a norm before attention and one before the
// MLP. kSandwich (Gemma 2 and 3): also one after attention and one after
// the MLP, applied to the branch before it joins the residual.
enum class NormLayout : uint8_t { kPre, kSandwich };

}  // namespace folio::model

#endif  // FOLIO_MODEL_FAMILY_H_
