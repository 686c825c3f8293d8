// Test support shared by the model's, the engine's and the server's tests:
// the worked example's shape with room for 96 positions, weights from seed
// 11, built once per process; a DeepSeek-style mixture's config.
#ifndef FOLIO_TESTING_TEST_MODEL_H_
#define FOLIO_TESTING_TEST_MODEL_H_

#include <cstdint>
#include <vector>

#include "folio/model/model.h"

namespace folio::test_support {

inline const model::Model& TestModel() {
  static const model::Model* m = [] {
    model::ModelConfig c = model::WorkedExampleConfig();
    c.max_positions = 96;
    return new model::Model(*model::Model::FromSeed(c, 11));
  }();
  return *m;
}

// A DeepSeek-style mixture on the worked example (dots1's router): 3
// layers, the first dense; 8 experts of width 6, 2 per token, chosen by
// sigmoid scores plus a selection bias within the best 2 of 4 groups,
// weighted times 2.5; 2 shared experts.
inline model::ModelConfig DeepSeekMixtureConfig() {
  model::ModelConfig c = model::WorkedExampleConfig();
  c.num_layers = 3;
  c.num_experts = 8;
  c.experts_per_token = 2;
  c.expert_ffn_size = 6;
  c.routing = model::Routing::kSigmoidTopK;
  c.router_selection_bias = true;
  c.expert_groups = 4;
  c.expert_groups_used = 2;
  c.routed_scale = 2.5;
  c.leading_dense_layers = 1;
  c.num_shared_experts = 2;
  return c;
}

// Four prompts of different lengths in the test model's vocabulary, for
// engine runs.
inline const std::vector<std::vector<int32_t>>& TestPrompts() {
  static const std::vector<std::vector<int32_t>> prompts = {
      {0, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110},
      {0, 7},
      {0, 50, 60, 70, 80, 90},
      {0, 200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215, 216, 217},
  };
  return prompts;
}

// TestPrompts plus three sharing a 21-token stem, so that some pages are
// shared between sequences (prefix caching, snapshots that carry a shared
// page once).
inline std::vector<std::vector<int32_t>> SharedStemPrompts() {
  std::vector<int32_t> stem;
  for (int32_t t = 0; t < 21; ++t) stem.push_back(2 + (t * 37) % 250);
  std::vector<std::vector<int32_t>> prompts = TestPrompts();
  for (int32_t tail : {3, 9, 30}) {
    std::vector<int32_t> p = stem;
    for (int32_t t = 0; t < tail; ++t) p.push_back(2 + (t * 11 + tail) % 250);
    prompts.push_back(p);
  }
  return prompts;
}

}  // namespace folio::test_support

#endif  // FOLIO_TESTING_TEST_MODEL_H_
