#include "folio/serving/engine_args.h"

#include <gtest/gtest.h>

#include "folio/model/model.h"

namespace folio::serving {
namespace {

bool Mentions(const Status& s, std::string_view text) {
  return s.message().find(text) != std::string::npos;
}

TEST(EngineArgs, DefaultsValidate) { EXPECT_TRUE(EngineArgs{}.Validate().ok()); }

// Quantized weights take the packed integer path unless a front end asks
// for the exact mode (issue 48): the engine's default and every front
// end's (they all start from EngineArgs) agree.
TEST(EngineArgs, TheIntegerPathIsTheDefault) {
  EXPECT_EQ(engine::EngineConfig{}.matmul_activations, ops::MatMulActivations::kQ8);
  Result<engine::EngineConfig> ec = EngineArgs{}.ToEngineConfig(model::WorkedExampleConfig());
  ASSERT_TRUE(ec.ok()) << ec.status().ToString();
  EXPECT_EQ(ec->matmul_activations, ops::MatMulActivations::kQ8);
  EngineArgs exact;
  exact.matmul_activations = "f32";
  ec = exact.ToEngineConfig(model::WorkedExampleConfig());
  ASSERT_TRUE(ec.ok()) << ec.status().ToString();
  EXPECT_EQ(ec->matmul_activations, ops::MatMulActivations::kF32);
}

TEST(EngineArgs, ErrorsNameTheFieldAsTheFrontEndSpellsIt) {
  EngineArgs a;
  a.kv_dtype = "f7";
  EXPECT_TRUE(Mentions(a.Validate(), "kv_dtype"));
  EXPECT_TRUE(Mentions(a.Validate(ArgNames::Flag()), "--kv-dtype"));
  a = {};
  a.matmul_activations = "q3";
  EXPECT_TRUE(Mentions(a.Validate(ArgNames::Flag()), "--matmul-activations"));
  a = {};
  a.backend = "tpu";
  EXPECT_TRUE(Mentions(a.Validate(), "backend"));
  a = {};
  a.speculative_acceptance = "maybe";
  EXPECT_TRUE(Mentions(a.Validate(ArgNames::Flag()), "--speculative-acceptance"));
  ArgNames python;
  python.renamed["draft_model"] = "speculative_config model";
  EXPECT_EQ(python("draft_model"), "speculative_config model");
  EXPECT_EQ(python("page_size"), "page_size");
}

TEST(EngineArgs, EachBadFieldIsInvalidArgument) {
  const auto refused = [](auto mutate, std::string_view field) {
    EngineArgs a;
    mutate(a);
    const Status s = a.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << field;
    EXPECT_TRUE(Mentions(s, field)) << s.ToString();
  };
  refused([](EngineArgs& a) { a.page_size = 0; }, "page_size");
  refused([](EngineArgs& a) { a.num_pages = 0; }, "num_pages");
  refused(
      [](EngineArgs& a) {
        a.num_pages = 4;
        a.kv_bytes = 1 << 20;
      },
      "num_pages or kv_bytes");
  refused([](EngineArgs& a) { a.speculative_tokens = engine::kMaxDraftTokens + 1; },
          "speculative_tokens");
}

TEST(EngineArgs, PoolSizeFromPagesBytesOrTheDefault) {
  const model::ModelConfig mc = model::WorkedExampleConfig();
  EngineArgs a;
  a.page_size = 4;
  a.max_num_seqs = 2;
  const uint64_t page_bytes = PageBytes(mc, 4, DType::kF32);
  ASSERT_GT(page_bytes, 0u);
  // The default: every sequence's whole context.
  Result<engine::EngineConfig> ec = a.ToEngineConfig(mc);
  ASSERT_TRUE(ec.ok());
  EXPECT_EQ(ec->num_pages, 2 * ((mc.max_positions + 3) / 4));
  a.num_pages = 5;
  EXPECT_EQ(a.ToEngineConfig(mc)->num_pages, 5u);
  a.num_pages.reset();
  a.kv_bytes = 3 * page_bytes + 1;
  EXPECT_EQ(a.ToEngineConfig(mc)->num_pages, 3u);
  a.kv_bytes = page_bytes - 1;
  Result<engine::EngineConfig> none = a.ToEngineConfig(mc);
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(Mentions(none.error(), "holds no page"));
}

TEST(EngineArgs, EveryFieldReachesTheEngineConfig) {
  EngineArgs a;
  a.kv_dtype = "bf16";
  a.page_size = 8;
  a.num_pages = 40;
  a.max_num_seqs = 3;
  a.max_num_batched_tokens = 99;
  a.prefix_caching = false;
  a.watermark = 0.25;
  a.backend = "reference";
  a.matmul_activations = "f32";
  a.speculative_tokens = 5;
  a.prompt_lookup_min = 1;
  a.prompt_lookup_max = 3;
  a.speculative_acceptance = "rejection";
  Result<engine::EngineConfig> ec = a.ToEngineConfig(model::WorkedExampleConfig());
  ASSERT_TRUE(ec.ok());
  EXPECT_EQ(ec->kv_dtype, DType::kBF16);
  EXPECT_EQ(ec->page_size, 8u);
  EXPECT_EQ(ec->num_pages, 40u);
  EXPECT_EQ(ec->max_num_seqs, 3u);
  EXPECT_EQ(ec->max_num_batched_tokens, 99u);
  EXPECT_FALSE(ec->prefix_caching);
  EXPECT_EQ(ec->watermark, 0.25);
  EXPECT_EQ(ec->backend, backend::BackendKind::kReference);
  EXPECT_EQ(ec->matmul_activations, ops::MatMulActivations::kF32);
  EXPECT_EQ(ec->speculative.num_draft_tokens, 5u);
  EXPECT_EQ(ec->speculative.ngram_min, 1u);
  EXPECT_EQ(ec->speculative.ngram_max, 3u);
  EXPECT_EQ(ec->speculative.acceptance, engine::DraftAcceptance::kRejection);
  EXPECT_EQ(ec->speculative.draft_model, nullptr);
}

TEST(ServingEngine, LoadsTheBuiltinModelWithItsDraftModel) {
  EngineArgs a;
  a.builtin_positions = 64;
  a.num_pages = 16;
  a.page_size = 4;
  a.threads = 1;
  a.speculative_tokens = 2;
  a.draft_model = "builtin";
  Result<std::unique_ptr<ServingEngine>> s = ServingEngine::Load(a);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_TRUE((*s)->served().builtin);
  EXPECT_EQ((*s)->served().model->config().max_positions, 64u);
  EXPECT_NE((*s)->config().speculative.draft_model, nullptr);
  EXPECT_EQ((*s)->engine().cache().pool().num_pages(), 16u);
  EXPECT_EQ((*s)->page_bytes(), PageBytes((*s)->served().model->config(), 4, DType::kF32));
}

TEST(ServingEngine, AMissingDraftModelIsNamed) {
  EngineArgs a;
  a.num_pages = 4;
  a.draft_model = "/nonexistent/draft.gguf";
  ArgNames python;
  python.renamed["draft_model"] = "speculative_config model";
  Result<std::unique_ptr<ServingEngine>> s = ServingEngine::Load(a, python);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Mentions(s.error(), "speculative_config model")) << s.error().ToString();
}

}  // namespace
}  // namespace folio::serving
