// What every front end asks of an engine, in one struct (vLLM's EngineArgs):
// the model, the KV pool, scheduling limits, compute and speculative
// decoding. `folio serve`, `folio generate`, `folio chat`, `folio logits`,
// `folio kv` and folio.LLM fill one in (the CLI's flags and Python's keyword
// arguments bind to its fields) and get their engine::EngineConfig from
// ToEngineConfig, the one place it is assembled.
//
//   EngineArgs args;                       // defaults, then flags / kwargs
//   FOLIO_RETURN_IF_ERROR(args.Validate()); // before a slow load
//   FOLIO_ASSIGN_OR_RETURN(auto served, ServingEngine::Load(args));
//
// Errors name the field as the caller spells it (ArgNames): Python's
// keyword (kv_dtype) or the command line's flag (--kv-dtype).
#ifndef FOLIO_SERVING_ENGINE_ARGS_H_
#define FOLIO_SERVING_ENGINE_ARGS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "folio/core/status.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"
#include "folio/model/config.h"
#include "folio/model/model.h"
#include "folio/serving/served_model.h"

namespace folio::serving {

// How an error names a field: by its keyword (kv_dtype), as a command-line
// flag (--kv-dtype), or by a front end's own name for it (Python's
// speculative_config model for draft_model).
struct ArgNames {
  enum class Style { kKeyword, kFlag };
  Style style = Style::kKeyword;
  std::map<std::string, std::string, std::less<>> renamed;  // field -> its name here

  static ArgNames Keyword() { return {}; }
  static ArgNames Flag() { return {Style::kFlag, {}}; }
  // `field` (EngineArgs' member name) as this front end spells it.
  std::string operator()(std::string_view field) const;
};

// The KV pool when neither num_pages nor kv_bytes is given: room for
// max_num_seqs sequences of the model's whole context, but at most this
// many bytes.
inline constexpr uint64_t kDefaultKvBytes = uint64_t{512} << 20;

struct EngineArgs {
  // The model: a folder, a .gguf file, or "builtin" ("" too).
  std::string model = "builtin";
  uint64_t builtin_positions = 512;          // the built-in model's context
  std::optional<std::string> tokenizer_pre;  // replaces a GGUF's tokenizer.ggml.pre

  // The KV pool: pages of page_size token slots holding kv_dtype codes
  // (DType names: f32, bf16, f16, i8, f8e4m3, f64). Its size: num_pages,
  // else as many pages as kv_bytes holds, else the default above (not both).
  std::string kv_dtype = "f32";
  uint64_t page_size = 16;
  std::optional<uint64_t> num_pages;
  std::optional<uint64_t> kv_bytes;

  // Scheduling (engine::EngineConfig's fields of the same names).
  uint64_t max_num_seqs = 8;
  uint64_t max_num_batched_tokens = 256;
  bool prefix_caching = true;
  double watermark = 0.01;

  // Compute: backend cpu | reference, matmul activations f32 | q8, and
  // threads (0 = every core).
  std::string backend = "cpu";
  std::string matmul_activations = "q8";
  uint64_t threads = 0;

  // Speculative decoding (engine::SpeculativeConfig): the default draft
  // tokens per step (0: off), prompt lookup's n-gram range, or a draft
  // model ("" for none; a path or "builtin", loaded with builtin_positions)
  // and the acceptance rule (exact | rejection).
  uint64_t speculative_tokens = 0;
  uint64_t prompt_lookup_min = 2;
  uint64_t prompt_lookup_max = 4;
  std::string draft_model;
  std::string speculative_acceptance = "exact";

  // The checks that need no model: every name parses, page_size and the
  // pool size are positive, num_pages and kv_bytes are not both given,
  // speculative_tokens <= engine::kMaxDraftTokens. InvalidArgument naming
  // the field.
  Status Validate(const ArgNames& names = ArgNames::Keyword()) const;
  // Validate's checks, then the engine configuration for a model of shape
  // `mc` (the pool size from num_pages, kv_bytes or the default). The draft
  // model is not loaded: speculative.draft_model stays null.
  Result<engine::EngineConfig> ToEngineConfig(const model::ModelConfig& mc,
                                              const ArgNames& names = ArgNames::Keyword()) const;
};

// One page of K and V over a layer group of a model of shape `mc` (every
// layer when the model has no sliding window).
uint64_t PageBytes(const model::ModelConfig& mc, uint64_t page_size, DType kv_dtype);

// A served model and the engine over it, owned together: the model, its
// tokenizer and chat template, the draft model, the thread pool and the
// engine, which outlives none of them.
class ServingEngine {
 public:
  // Validate, LoadServedModel(args.model, ...), then Create.
  static Result<std::unique_ptr<ServingEngine>> Load(const EngineArgs& args,
                                                     const ArgNames& names = ArgNames::Keyword());
  // The engine over an already loaded model: loads the draft model (errors
  // prefixed with its field name), makes the thread pool and the engine.
  static Result<std::unique_ptr<ServingEngine>> Create(ServedModel served, const EngineArgs& args,
                                                       const ArgNames& names = ArgNames::Keyword());
  ServingEngine(const ServingEngine&) = delete;
  ServingEngine& operator=(const ServingEngine&) = delete;

  const ServedModel& served() const { return served_; }
  engine::Engine& engine() { return *engine_; }
  const engine::Engine& engine() const { return *engine_; }
  const engine::EngineConfig& config() const { return config_; }
  // One page of K and V, every layer.
  uint64_t page_bytes() const {
    return PageBytes(served_.model->config(), config_.page_size, config_.kv_dtype);
  }

 private:
  ServingEngine() = default;

  ServedModel served_;
  std::unique_ptr<model::Model> draft_;  // speculative decoding's model, if any
  std::unique_ptr<ThreadPool> pool_;
  engine::EngineConfig config_;
  std::unique_ptr<engine::Engine> engine_;  // last: destroyed first
};

}  // namespace folio::serving

#endif  // FOLIO_SERVING_ENGINE_ARGS_H_
