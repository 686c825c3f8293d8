// Test support shared by the engine's and the server's tests: the worked
// example's shape with room for 96 positions, weights from seed 11, built
// once per process.
#ifndef FOLIO_TESTING_TEST_MODEL_H_
#define FOLIO_TESTING_TEST_MODEL_H_

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

}  // namespace folio::test_support

#endif  // FOLIO_TESTING_TEST_MODEL_H_
