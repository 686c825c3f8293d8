#include "bench/bench_model.h"

#include <utility>

#include "folio/tokenizer/byte_tokenizer.h"

namespace folio::bench {

Result<BenchModel> BenchModel::Load(const std::string& path, uint64_t builtin_positions) {
  BenchModel m;
  if (path.empty()) {
    model::ModelConfig c = model::WorkedExampleConfig();
    c.max_positions = builtin_positions;
    FOLIO_ASSIGN_OR_RETURN(model::Model built, model::Model::FromSeed(c, 20));
    m.builtin_ = std::make_unique<model::Model>(std::move(built));
  } else {
    FOLIO_ASSIGN_OR_RETURN(checkpoint::Checkpoint loaded, checkpoint::LoadCheckpoint(path));
    m.ckpt_ = std::make_unique<checkpoint::Checkpoint>(std::move(loaded));
  }
  return m;
}

const tokenizer::Tokenizer& BenchModel::tokenizer() const {
  if (ckpt_ && ckpt_->tokenizer) return *ckpt_->tokenizer;
  return tokenizer::ByteTokenizer::AsTokenizer();
}

}  // namespace folio::bench
