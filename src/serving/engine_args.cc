#include "folio/serving/engine_args.h"

#include <algorithm>

#include "folio/backend/backend.h"
#include "folio/core/checked_math.h"
#include "folio/core/dtype.h"
#include "folio/engine/kv_cache_manager.h"
#include "folio/kv/paged_kv_cache.h"
#include "folio/ops/packed_matmul.h"

namespace folio::serving {

std::string ArgNames::operator()(std::string_view field) const {
  if (auto it = renamed.find(field); it != renamed.end()) return it->second;
  std::string name(field);
  if (style == Style::kKeyword) return name;
  std::replace(name.begin(), name.end(), '_', '-');
  return "--" + name;
}

uint64_t PageBytes(const model::ModelConfig& mc, uint64_t page_size, DType kv_dtype) {
  return kv::PagedKvCache::BytesPerPage(engine::KvCacheConfigFor(mc, page_size, 1, kv_dtype));
}

namespace {

// A field that must be at least 1.
Status Positive(std::string_view field, uint64_t value, const ArgNames& names) {
  if (value >= 1) return Status::Ok();
  return Status::InvalidArgument(names(field) + " must be >= 1 (got 0)");
}

// The parsed names, and what of the rest can be checked without a model.
struct Parsed {
  DType kv_dtype = DType::kF32;
  backend::BackendKind backend = backend::BackendKind::kCpu;
  ops::MatMulActivations activations = ops::MatMulActivations::kQ8;
  engine::DraftAcceptance acceptance = engine::DraftAcceptance::kExact;
};

Result<Parsed> Parse(const EngineArgs& a, const ArgNames& names) {
  Parsed p;
  const auto named = [&](std::string_view field) {
    return [field, &names](const Status& s) { return s.WithContext(names(field)); };
  };
  Result<DType> dtype = ParseDType(a.kv_dtype);
  if (!dtype) return named("kv_dtype")(dtype.error());
  p.kv_dtype = *dtype;
  Result<backend::BackendKind> backend = backend::ParseBackendKind(a.backend);
  if (!backend) return named("backend")(backend.error());
  p.backend = *backend;
  Result<ops::MatMulActivations> act = ops::ParseMatMulActivations(a.matmul_activations);
  if (!act) return named("matmul_activations")(act.error());
  p.activations = *act;
  Result<engine::DraftAcceptance> rule = engine::ParseDraftAcceptance(a.speculative_acceptance);
  if (!rule) return named("speculative_acceptance")(rule.error());
  p.acceptance = *rule;
  FOLIO_RETURN_IF_ERROR(Positive("page_size", a.page_size, names));
  if (a.num_pages && a.kv_bytes) {
    return Status::InvalidArgument("give " + names("num_pages") + " or " + names("kv_bytes") +
                                   ", not both");
  }
  if (a.num_pages) FOLIO_RETURN_IF_ERROR(Positive("num_pages", *a.num_pages, names));
  if (a.speculative_tokens > engine::kMaxDraftTokens) {
    return Status::InvalidArgument(names("speculative_tokens") +
                                   " must be <= " + std::to_string(engine::kMaxDraftTokens) +
                                   " (got " + std::to_string(a.speculative_tokens) + ")");
  }
  return p;
}

}  // namespace

Status EngineArgs::Validate(const ArgNames& names) const { return Parse(*this, names).status(); }

Result<engine::EngineConfig> EngineArgs::ToEngineConfig(const model::ModelConfig& mc,
                                                        const ArgNames& names) const {
  FOLIO_ASSIGN_OR_RETURN(const Parsed p, Parse(*this, names));
  engine::EngineConfig ec;
  ec.page_size = page_size;
  ec.kv_dtype = p.kv_dtype;
  ec.max_num_seqs = max_num_seqs;
  ec.max_num_batched_tokens = max_num_batched_tokens;
  ec.prefix_caching = prefix_caching;
  ec.watermark = watermark;
  ec.backend = p.backend;
  ec.matmul_activations = p.activations;
  ec.speculative.num_draft_tokens = speculative_tokens;
  ec.speculative.ngram_min = prompt_lookup_min;
  ec.speculative.ngram_max = prompt_lookup_max;
  ec.speculative.acceptance = p.acceptance;
  const uint64_t page_bytes = PageBytes(mc, page_size, p.kv_dtype);
  if (num_pages) {
    ec.num_pages = *num_pages;
  } else if (kv_bytes) {
    ec.num_pages = *kv_bytes / page_bytes;
    if (ec.num_pages == 0) {
      return Status::InvalidArgument(names("kv_bytes") + " " + std::to_string(*kv_bytes) +
                                     " holds no page of " + std::to_string(page_bytes) + " bytes");
    }
  } else {
    const uint64_t full =
        engine::MaxPagesHeld(mc, page_size, mc.max_positions, max_num_batched_tokens) *
        max_num_seqs;
    ec.num_pages = std::max<uint64_t>(1, std::min(full, kDefaultKvBytes / page_bytes));
  }
  return ec;
}

Result<std::unique_ptr<ServingEngine>> ServingEngine::Load(const EngineArgs& args,
                                                           const ArgNames& names) {
  FOLIO_RETURN_IF_ERROR(args.Validate(names));
  FOLIO_ASSIGN_OR_RETURN(ServedModel served,
                         LoadServedModel(args.model, args.builtin_positions, args.tokenizer_pre));
  return Create(std::move(served), args, names);
}

Result<std::unique_ptr<ServingEngine>> ServingEngine::Create(ServedModel served,
                                                             const EngineArgs& args,
                                                             const ArgNames& names) {
  std::unique_ptr<ServingEngine> s(new ServingEngine());
  s->served_ = std::move(served);
  const model::ModelConfig& mc = s->served_.model->config();
  FOLIO_ASSIGN_OR_RETURN(s->config_, args.ToEngineConfig(mc, names));
  if (!args.draft_model.empty()) {
    Result<model::Model> draft = LoadModelOrBuiltin(args.draft_model, args.builtin_positions);
    if (!draft) return draft.error().WithContext(names("draft_model"));
    s->draft_ = std::make_unique<model::Model>(std::move(*draft));
    s->config_.speculative.draft_model = s->draft_.get();
  }
  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::Create(args.threads);
  if (!pool) return pool.error().WithContext(names("threads"));
  s->pool_ = std::move(*pool);
  FOLIO_ASSIGN_OR_RETURN(engine::Engine e,
                         engine::Engine::Create(*s->served_.model, s->config_, s->pool_.get(),
                                                &s->served_.tokenizer()));
  s->engine_ = std::make_unique<engine::Engine>(std::move(e));
  return s;
}

}  // namespace folio::serving
