#include "reference/float64_decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <cmath>
#include <vector>

#include "folio/core/splitmix64.h"
#include "folio/model/model.h"
#include "folio/tokenizer/byte_tokenizer.h"
#include "reference/placed_cache.h"
#include "testing/test_model.h"

namespace folio::reference {
namespace {

using model::LogitRows;
using model::Model;
using model::ModelConfig;

const Model& WorkedModel() {
  static const Model* m = new Model(*Model::FromSeed(model::WorkedExampleConfig(), 20));
  return *m;
}

std::vector<int32_t> Document() { return tokenizer::ByteTokenizer::Encode("abcde", true, true); }

PlacedCache Placed(const Model& m, uint64_t page_size, std::vector<uint64_t> table,
                   uint64_t batch = 1, DType dtype = DType::kF64) {
  return *MakePlacedCache(m.config(), page_size, table, batch, dtype);
}

std::vector<double> Append(const Float64Decoder& dec, PlacedCache& c,
                           std::span<const int32_t> tokens, LogitRows rows = LogitRows::kAll) {
  auto r = StepLanes(dec, c, tokens, rows);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<double>();
}

// Any valid page table and page size gives the same logits, bit for bit.
TEST(Float64Decoder, PagedAndContiguousLogitsAgreeBitForBit) {
  const Float64Decoder dec(WorkedModel());
  auto contiguous = Placed(WorkedModel(), 12, {0});
  const auto want = Append(dec, contiguous, Document());
  ASSERT_EQ(want.size(), 7u * 258u);
  struct Layout {
    uint64_t page_size;
    std::vector<uint64_t> table;
  };
  for (const Layout& layout :
       {Layout{3, {2, 0, 3, 1}}, Layout{3, {3, 1, 0, 2}}, Layout{5, {2, 0, 1}},
        Layout{1, {11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}}, Layout{12, {0}}}) {
    auto paged = Placed(WorkedModel(), layout.page_size, layout.table);
    EXPECT_EQ(Append(dec, paged, Document()), want) << "page_size " << layout.page_size;
  }
}

// Contract 3: token-by-token decode, chunked prefill and the cache-free
// forward pass produce the same bits.
void ExpectCachedEqualsFull(const Model& model) {
  const Float64Decoder dec(model);
  const auto doc = Document();
  const auto full = *dec.Forward(doc, 1);
  auto cache = Placed(model, 3, {2, 0, 3, 1});
  std::vector<double> stepwise;
  for (int32_t t : doc) {
    auto row = Append(dec, cache, std::span<const int32_t>(&t, 1), LogitRows::kLast);
    stepwise.insert(stepwise.end(), row.begin(), row.end());
  }
  EXPECT_EQ(stepwise, full);
  auto chunked = Placed(model, 3, {2, 0, 3, 1});
  auto first = Append(dec, chunked, std::span<const int32_t>(doc).first(3));
  auto rest = Append(dec, chunked, std::span<const int32_t>(doc).subspan(3));
  first.insert(first.end(), rest.begin(), rest.end());
  EXPECT_EQ(first, full);
  EXPECT_EQ(full.size(), doc.size() * model.config().vocab_size);
}

TEST(Float64Decoder, CachedLogitsEqualFullForward) { ExpectCachedEqualsFull(WorkedModel()); }

TEST(Float64Decoder, WindowedGqaCachedEqualsFull) {
  ModelConfig c = model::WorkedExampleConfig();
  c.num_heads = 4;
  c.num_kv_heads = 1;
  c.window = 3;
  c.tie_embeddings = false;
  ExpectCachedEqualsFull(*Model::FromSeed(c, 7));
}

TEST(Float64Decoder, BatchLanesMatchTheirSoloRuns) {
  const Float64Decoder dec(WorkedModel());
  const std::vector<int32_t> lane0 = {0, 99, 100, 5}, lane1 = {0, 7, 42, 200};
  std::vector<int32_t> both = lane0;
  both.insert(both.end(), lane1.begin(), lane1.end());
  auto batched = Placed(WorkedModel(), 3, {1, 3, 0, 2}, 2);
  const auto logits = Append(dec, batched, both);
  auto solo0 = Placed(WorkedModel(), 12, {0});
  auto solo1 = Placed(WorkedModel(), 12, {0});
  auto want = Append(dec, solo0, lane0);
  const auto b = Append(dec, solo1, lane1);
  want.insert(want.end(), b.begin(), b.end());
  EXPECT_EQ(logits, want);
  EXPECT_EQ(logits, *dec.Forward(both, 2));
}

// Narrower K/V storage rounds the rows but still never depends on placement.
TEST(Float64Decoder, RoundedKvIsStillLayoutInvariant) {
  const Float64Decoder dec(WorkedModel());
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    auto paged = Placed(WorkedModel(), 3, {2, 0, 3, 1}, 1, dtype);
    auto dense = Placed(WorkedModel(), 12, {0}, 1, dtype);
    const auto a = Append(dec, paged, Document());
    EXPECT_EQ(a, Append(dec, dense, Document())) << DTypeName(dtype);
    const auto full = *dec.Forward(Document(), 1);
    double err = 0;
    for (size_t i = 0; i < a.size(); ++i) err = std::max(err, std::fabs(a[i] - full[i]));
    EXPECT_LT(err, 0.05) << DTypeName(dtype);  // bf16 rows: 2^-9 relative each
  }
}

// After a failed step (aborted: nothing changed) the cache continues
// exactly as one that never failed.
TEST(Float64Decoder, FailedStepDoesNotPerturbLaterSteps) {
  const Float64Decoder dec(WorkedModel());
  auto a = Placed(WorkedModel(), 3, {2, 0, 3, 1});
  auto b = Placed(WorkedModel(), 3, {2, 0, 3, 1});
  Append(dec, a, Document());
  Append(dec, b, Document());
  const std::vector<int32_t> bad = {5, 6, 7, 8, 300};
  auto r = StepLanes(dec, a, bad, LogitRows::kLast);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(a.length(), 7u);
  const std::vector<int32_t> next = {42};
  EXPECT_EQ(Append(dec, a, next, LogitRows::kLast), Append(dec, b, next, LogitRows::kLast));
}

TEST(Float64Decoder, ForwardRejectsTooManyPositionsAndBadTokens) {
  const Float64Decoder dec(WorkedModel());
  EXPECT_EQ(dec.Forward(std::vector<int32_t>(13, 2), 1).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(dec.Forward(std::vector<int32_t>{258}, 1).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(dec.Forward(std::vector<int32_t>{1, 2, 3}, 2).status().code(),
            StatusCode::kInvalidArgument);
}

// The float32 production decoder stays within float32 rounding of the
// float64 reference. The bound comes from the dtype and the reduction
// length, not a constant picked to pass: a logit is the end of a chain of
// about kRoundings float32 roundings (per layer: RMSNorm, the Q/K/V,
// output, gate/up and down projections, each a dot product of at most
// max(hidden, ffn) terms; then the final norm and the vocabulary
// projection), each off by at most 2^-24 of the magnitude it carries.
void ExpectFloat32AgreesWithinRounding(const model::Model& m) {
  const model::ModelConfig& c = m.config();
  const auto want = *Float64Decoder(m).Forward(Document(), 1);
  const auto got = *model::Decoder(m).Forward(Document(), 1);
  ASSERT_EQ(got.size(), want.size());
  const double kRoundings =
      static_cast<double>((c.num_layers * 6 + 2) * std::max(c.hidden_size, c.ffn_size));
  double scale = 0;
  for (const double w : want) scale = std::max(scale, std::abs(w));
  const double tol = kRoundings * std::numeric_limits<float>::epsilon() * scale;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol) << i;
    worst = std::max(worst, std::abs(got[i] - want[i]));
  }
  ::testing::Test::RecordProperty("worst_error_over_bound", std::to_string(worst / tol));
}

TEST(Float64Decoder, Float32DecoderAgreesWithinRounding) {
  ExpectFloat32AgreesWithinRounding(WorkedModel());
}

// The same bound with every family option on (sliding and global layers
// with their own RoPE, sandwich norms as offsets from 1 with random gains,
// QK-norm, GeGLU, a scaled embedding, an attention scale and a soft-cap):
// the float64 reference implements each option independently.
// A mixture of 6 experts, 2 per token, both weightings, without and with a
// shared expert: the float64 reference routes each row on its own.
TEST(Float64Decoder, Float32DecoderAgreesWithinRoundingOnExperts) {
  for (const bool norm : {true, false}) {
    for (const uint64_t shared : {0, 12}) {
      model::ModelConfig c = model::WorkedExampleConfig();
      c.num_experts = 6;
      c.experts_per_token = 2;
      c.expert_ffn_size = 10;
      c.norm_topk_prob = norm;
      c.shared_expert_ffn_size = shared;
      ExpectFloat32AgreesWithinRounding(*model::Model::FromSeed(c, 9));
    }
  }
}

// A DeepSeek-style mixture (dots1's): sigmoid or softmax scores, a
// random selection bias, 4 groups of 2 experts with 2 used, a routed
// scale, a leading dense layer and two ungated shared experts, both
// weightings. Near-ties between a row's candidates could route the two
// decoders apart; these seeds have none.
TEST(Float64Decoder, Float32DecoderAgreesWithinRoundingOnDeepSeekExperts) {
  for (const bool norm : {true, false}) {
    for (const model::Routing routing :
         {model::Routing::kSigmoidTopK, model::Routing::kSoftmaxTopK}) {
      model::ModelConfig c = test_support::DeepSeekMixtureConfig();
      c.qk_norm = true;
      c.routing = routing;
      c.norm_topk_prob = norm;
      ExpectFloat32AgreesWithinRounding(*model::Model::FromSeed(c, 9));
    }
  }
}

TEST(Float64Decoder, Float32DecoderAgreesWithinRoundingOnFamilyOptions) {
  model::ModelConfig c = model::WorkedExampleConfig();
  c.num_layers = 3;
  c.num_kv_heads = 1;
  c.explicit_head_dim = 4;
  c.qk_norm = true;
  c.window = 3;
  c.layers = {{3, 10.0, {}}, {0, 1000.0, {}}, {3, 10.0, {}}};
  c.activation = model::Activation::kGeluTanh;
  c.norm_layout = model::NormLayout::kSandwich;
  c.norm_unit_offset = true;
  c.scale_embedding = true;
  c.attention_scale = 0.3;
  c.final_logit_softcap = 5.0;
  c.attn_logit_softcap = 0.7;
  SplitMix64 rng(5);
  model::ModelWeights w = model::InitializeWeights(c, rng);
  // Random norm gains, so that the (1 + w) offset matters.
  const auto random = [&](model::Tensor& t) {
    std::vector<double> v(t.num_elements());
    for (double& x : v) x = rng.NextUnit() - 0.5;
    t = model::Tensor::FromDoubles(t.shape, std::move(v));
  };
  for (model::LayerWeights& l : w.layers) {
    for (model::Tensor* t :
         {&l.attn_norm, &l.post_attn_norm, &l.ffn_norm, &l.post_ffn_norm, &l.q_norm, &l.k_norm}) {
      random(*t);
    }
  }
  random(w.final_norm);
  ExpectFloat32AgreesWithinRounding(*model::Model::Create(c, std::move(w)));
}

}  // namespace
}  // namespace folio::reference
