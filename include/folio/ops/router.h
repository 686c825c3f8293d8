// A mixture of experts' router: one row's logits to the experts it runs
// and their weights, by the rules of the families folio loads (Qwen3-MoE
// and Mixtral, gpt-oss, dots1 and DeepSeek-V3). It knows no model: the
// options say which rules apply.
#ifndef FOLIO_OPS_ROUTER_H_
#define FOLIO_OPS_ROUTER_H_

#include <cstdint>
#include <span>
#include <vector>

namespace folio::ops {

// How a router turns logits into expert weights. kSoftmaxTopK
// (Qwen3-MoE, Mixtral): a softmax over every expert, then the k most
// probable (renormalised when norm_topk_prob). kTopKSoftmax (gpt-oss): the
// k largest logits, then a softmax over those k alone. kSigmoidTopK
// (dots1, DeepSeek-V3): each expert's score is the sigmoid of its own
// logit, then the k best scores (renormalised when norm_topk_prob). The
// selection bias, expert groups and routed scale refine any of them.
// Model ids hash the value: add new ones at the end.
enum class Routing : uint8_t { kSoftmaxTopK, kTopKSoftmax, kSigmoidTopK };

struct RouterOptions {
  Routing routing = Routing::kSoftmaxTopK;
  uint64_t num_experts = 0;
  uint64_t experts_per_token = 0;  // k
  bool norm_topk_prob = true;
  // Group-limited choice: experts_groups groups of consecutive experts, of
  // which the expert_groups_used with the best two-expert sums may be
  // chosen (1 group = no limit).
  uint64_t expert_groups = 1;
  uint64_t expert_groups_used = 1;
  double routed_scale = 1.0;  // times every chosen weight, last
};

// Scratch space for RouteRow, reused across rows.
struct RouterScratch {
  std::vector<float> scores, choice, group_scores;  // [num_experts], [num_experts], [groups]
  std::vector<uint32_t> order, group_order;         // [num_experts], [groups]
};

// One row's routing, in f32 as transformers computes it: from the
// router's logits [num_experts] (its bias, if any, added) the scores (a
// softmax over every expert, or each logit's sigmoid, or — kTopKSoftmax —
// the logits themselves); the choice ranks scores + selection_bias (empty:
// none), within the expert_groups_used groups of the best two-expert sums
// when the experts are grouped, ties to the lower index; experts gets the
// experts_per_token chosen in increasing index and weights their scores
// (kTopKSoftmax: a softmax over the chosen logits), divided by their sum
// when norm_topk_prob (plus 1e-20 under sigmoid scoring, as transformers
// adds), times routed_scale. Reads nothing but this row.
void RouteRow(const RouterOptions& options, std::span<const float> logits,
              std::span<const float> selection_bias, RouterScratch& scratch,
              std::span<uint32_t> experts, std::span<float> weights);

}  // namespace folio::ops

#endif  // FOLIO_OPS_ROUTER_H_
