// The model a benchmark runs: a checkpoint (a folder or .gguf file) or,
// with no path, the built-in worked-example model (seed 20) with the
// byte-level tokenizer, for smoke runs that need no download.
#ifndef FOLIO_BENCH_BENCH_MODEL_H_
#define FOLIO_BENCH_BENCH_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "folio/checkpoint/checkpoint.h"
#include "folio/core/status.h"
#include "folio/model/model.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::bench {

class BenchModel {
 public:
  // path "" = the built-in model with `builtin_positions` positions.
  // Errors: LoadCheckpoint's, or the built-in model's config.
  static Result<BenchModel> Load(const std::string& path, uint64_t builtin_positions);

  const model::Model& model() const { return ckpt_ ? ckpt_->model : *builtin_; }
  // The checkpoint's tokenizer, else the byte-level one.
  const tokenizer::Tokenizer& tokenizer() const;
  bool builtin() const { return ckpt_ == nullptr; }

 private:
  std::unique_ptr<checkpoint::Checkpoint> ckpt_;
  std::unique_ptr<model::Model> builtin_;
};

}  // namespace folio::bench

#endif  // FOLIO_BENCH_BENCH_MODEL_H_
