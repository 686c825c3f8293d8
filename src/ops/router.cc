#include "folio/ops/router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace folio::ops {

void RouteRow(const RouterOptions& c, std::span<const float> l,
              std::span<const float> selection_bias, RouterScratch& s, std::span<uint32_t> experts,
              std::span<float> weights) {
  const uint64_t n = c.num_experts, k = c.experts_per_token;
  s.scores.resize(n);
  s.choice.resize(n);
  s.order.resize(n);
  std::vector<float>& score = s.scores;
  switch (c.routing) {
    case Routing::kSoftmaxTopK: {
      const float top = *std::max_element(l.begin(), l.end());
      float sum = 0;
      for (uint64_t e = 0; e < n; ++e) sum += score[e] = std::exp(l[e] - top);
      for (uint64_t e = 0; e < n; ++e) score[e] /= sum;
      break;
    }
    case Routing::kSigmoidTopK:
      for (uint64_t e = 0; e < n; ++e) score[e] = 1.0f / (1.0f + std::exp(-l[e]));
      break;
    case Routing::kTopKSoftmax:  // rank by logit; the softmax over the chosen k comes below
      std::copy(l.begin(), l.end(), score.begin());
      break;
  }
  // The selection bias moves the choice, never the weights.
  for (uint64_t e = 0; e < n; ++e) {
    s.choice[e] = selection_bias.empty() ? score[e] : score[e] + selection_bias[e];
  }
  // Larger first, ties to the lower index.
  auto better = [](const std::vector<float>& values) {
    return [v = values.data()](uint32_t a, uint32_t b) {
      return v[a] > v[b] || (v[a] == v[b] && a < b);
    };
  };
  if (c.expert_groups > 1) {
    // A group's score is the sum of its two best choices; experts outside
    // the best expert_groups_used groups cannot be chosen.
    const uint64_t groups = c.expert_groups, per = n / groups;
    s.group_scores.resize(groups);
    s.group_order.resize(groups);
    for (uint64_t g = 0; g < groups; ++g) {
      float first = -INFINITY, second = -INFINITY;
      for (uint64_t e = g * per; e < (g + 1) * per; ++e) {
        const float x = s.choice[e];
        if (x > first) {
          second = first;
          first = x;
        } else if (x > second) {
          second = x;
        }
      }
      s.group_scores[g] = first + second;
    }
    std::iota(s.group_order.begin(), s.group_order.end(), 0u);
    std::sort(s.group_order.begin(), s.group_order.end(), better(s.group_scores));
    for (uint64_t r = c.expert_groups_used; r < groups; ++r) {
      const uint64_t g = s.group_order[r];
      std::fill_n(s.choice.begin() + static_cast<ptrdiff_t>(g * per), per, -INFINITY);
    }
  }
  std::vector<uint32_t>& order = s.order;
  std::iota(order.begin(), order.end(), 0u);
  std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(k), order.end(),
                    better(s.choice));
  if (c.routing == Routing::kTopKSoftmax) {  // gpt-oss: a softmax over the chosen k logits
    float top = -INFINITY;
    for (uint64_t i = 0; i < k; ++i) top = std::max(top, score[order[i]]);
    float sum = 0;
    for (uint64_t i = 0; i < k; ++i) sum += score[order[i]] = std::exp(score[order[i]] - top);
    for (uint64_t i = 0; i < k; ++i) score[order[i]] /= sum;
  }
  // The row's experts in increasing index: the order their outputs add.
  std::sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(k));
  float total = 0;
  for (uint64_t i = 0; i < k; ++i) total += score[order[i]];
  if (c.routing == Routing::kSigmoidTopK) total += 1e-20f;
  const bool normalise = c.norm_topk_prob && c.routing != Routing::kTopKSoftmax;
  const auto scale = static_cast<float>(c.routed_scale);
  for (uint64_t i = 0; i < k; ++i) {
    experts[i] = order[i];
    weights[i] = (normalise ? score[order[i]] / total : score[order[i]]) * scale;
  }
}

}  // namespace folio::ops
