#include "folio/model/model.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <bit>
#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "testing/test_model.h"

namespace folio::model {
namespace {

// The stream and draw order of docs/design.md, "The worked example".
TEST(InitializeWeights, ReproducesCourseStream) {
  const ModelConfig c = WorkedExampleConfig();
  SplitMix64 rng(20);
  const ModelWeights w = InitializeWeights(c, rng);
  EXPECT_EQ(rng.state(), 0xef4ddf2f9fd9b824ULL);  // after 3024 draws
  EXPECT_EQ(c.ParameterCount(), 3064u);
  const auto embedding = w.embedding.ToDoubles();
  EXPECT_EQ(embedding[0 * 8 + 0], -0.08666991401775771);
  EXPECT_EQ(embedding[257 * 8 + 7], 0.06196705142080968);
  // Stored [out, in]: query[in=0][out=0], key[7][3] is wk[3 * 8 + 7].
  EXPECT_EQ(w.layers[0].wq.ToDoubles()[0], 0.07292608385746767);
  EXPECT_EQ(w.layers[0].wk.ToDoubles()[0], -0.26631366389626404);
  EXPECT_EQ(w.layers[0].wk.ToDoubles()[3 * 8 + 7], -0.5015157807107713);
  EXPECT_EQ(w.layers[0].wq.shape, (std::vector<uint64_t>{8, 8}));
  // ffn down [in=12, out=8]: [11][7] is w_down[7 * 12 + 11].
  EXPECT_EQ(w.layers[1].w_down.ToDoubles()[7 * 12 + 11], -0.4413944345852733);
}

// The fixture's digest of all parameters as float64 little-endian in
// declaration order (embedding; per layer attention norm, q, k, v, o in
// [in, out] order, ffn norm, gate, up, down; final norm).
TEST(InitializeWeights, ParameterDigestMatchesFixture) {
  const ModelConfig c = WorkedExampleConfig();
  SplitMix64 rng(20);
  const ModelWeights w = InitializeWeights(c, rng);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ASSERT_EQ(EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr), 1);
  auto put = [&](const Tensor& t) {
    for (double x : t.ToDoubles()) EVP_DigestUpdate(ctx, &x, 8);
  };
  auto put_transposed = [&](const Tensor& tensor, uint64_t out, uint64_t in) {
    const std::vector<double> t = tensor.ToDoubles();
    for (uint64_t i = 0; i < in; ++i)
      for (uint64_t o = 0; o < out; ++o) EVP_DigestUpdate(ctx, &t[o * in + i], 8);
  };
  put(w.embedding);
  for (const auto& l : w.layers) {
    put(l.attn_norm);
    put_transposed(l.wq, 8, 8);
    put_transposed(l.wk, 4, 8);
    put_transposed(l.wv, 4, 8);
    put_transposed(l.wo, 8, 8);
    put(l.ffn_norm);
    put_transposed(l.w_gate, 12, 8);
    put_transposed(l.w_up, 12, 8);
    put_transposed(l.w_down, 8, 12);
  }
  put(w.final_norm);
  unsigned char md[32];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  std::string hex;
  for (unsigned char ch : md) {
    static const char* digits = "0123456789abcdef";
    hex += digits[ch >> 4];
    hex += digits[ch & 15];
  }
  EXPECT_EQ(hex, "183498fa4d3b25b789527b0f6800f2a445c7276f3ba77757a668248396da0948");
}

TEST(Model, IdIsStableAndSensitive) {
  const ModelConfig c = WorkedExampleConfig();
  auto a = *Model::FromSeed(c, 20);
  auto b = *Model::FromSeed(c, 20);
  auto other = *Model::FromSeed(c, 21);
  EXPECT_EQ(a.id().size(), 64u);
  EXPECT_EQ(a.id(), b.id());
  EXPECT_NE(a.id(), other.id());
  ModelConfig windowed = c;
  windowed.window = 4;
  EXPECT_NE(Model::FromSeed(windowed, 20)->id(), a.id());
}

// A yarn scaling as the loaders settle it (factor 4, HF's attention factor).
RopeScaling Yarn() {
  RopeScaling s;
  s.type = RopeScaling::Type::kYarn;
  s.factor = 4.0;
  s.original_max_positions = 4096;
  s.attention_factor = 0;
  SettleYarn(0, 0, s);
  return s;
}

TEST(Model, YarnParametersEnterTheId) {
  ModelConfig c = WorkedExampleConfig();
  c.rope_scaling = Yarn();
  ASSERT_TRUE(c.Validate().ok());
  const std::string id = Model::FromSeed(c, 20)->id();
  EXPECT_NE(id, Model::FromSeed(WorkedExampleConfig(), 20)->id());
  for (auto change :
       {+[](RopeScaling& s) { s.truncate = false; }, +[](RopeScaling& s) { s.beta_fast = 16; },
        +[](RopeScaling& s) { s.beta_slow = 2; },
        +[](RopeScaling& s) { s.attention_factor = 1.5; }}) {
    ModelConfig other = c;
    change(other.rope_scaling);
    EXPECT_NE(Model::FromSeed(other, 20)->id(), id);
  }
}

TEST(RopeScaling, YarnKeepsFastPairsAndSlowsSlowOnes) {
  // 16 features at base 10000 over an original 4096 positions: pairs up
  // to 2 turn more than 32 times (kept), pairs from 6 fewer than once
  // (divided by 4), the ones between blend linearly.
  const RopeScaling s = Yarn();
  EXPECT_DOUBLE_EQ(s.attention_factor, 1.0 + 0.1 * std::log(4.0));
  EXPECT_DOUBLE_EQ(RopeAttentionFactor(s), s.attention_factor);
  const std::vector<double> plain = RopeInverseFrequencies(16, 10000.0, RopeScaling{});
  const std::vector<double> yarn = RopeInverseFrequencies(16, 10000.0, s);
  ASSERT_EQ(yarn.size(), 8u);
  for (size_t p = 0; p <= 2; ++p) EXPECT_EQ(yarn[p], plain[p]) << p;
  for (size_t p = 3; p < 6; ++p) {
    const double ramp = (static_cast<double>(p) - 2.0) / 4.0;
    EXPECT_DOUBLE_EQ(yarn[p], plain[p] / 4.0 * ramp + plain[p] * (1 - ramp)) << p;
  }
  for (size_t p = 6; p < 8; ++p) EXPECT_DOUBLE_EQ(yarn[p], plain[p] / 4.0) << p;
  // mscale / mscale_all_dim (DeepSeek's form) and a given factor.
  RopeScaling m = Yarn();
  m.attention_factor = 0;
  SettleYarn(1.0, 0.5, m);
  EXPECT_DOUBLE_EQ(m.attention_factor, (1 + 0.1 * std::log(4.0)) / (1 + 0.05 * std::log(4.0)));
  SettleYarn(1.0, 0.5, m);  // settled once: a given factor stays
  RopeScaling given = Yarn();
  given.attention_factor = 0.7;
  SettleYarn(0, 0, given);
  EXPECT_EQ(given.attention_factor, 0.7);
}

TEST(ModelConfig, RejectsBadYarn) {
  for (auto change : {+[](RopeScaling& s) { s.beta_slow = 0; },
                      +[](RopeScaling& s) { s.beta_fast = std::nan(""); },
                      +[](RopeScaling& s) { s.original_max_positions = 0; },
                      +[](RopeScaling& s) { s.attention_factor = 0; }}) {
    ModelConfig c = WorkedExampleConfig();
    c.rope_scaling = Yarn();
    change(c.rope_scaling);
    EXPECT_NE(c.Validate().message().find("yarn rope_scaling needs"), std::string::npos);
  }
}

TEST(Model, RejectsNonFiniteParameter) {
  const ModelConfig c = WorkedExampleConfig();
  SplitMix64 rng(20);
  auto w = InitializeWeights(c, rng);
  auto wv = w.layers[1].wv.ToDoubles();
  wv[5] = std::nan("");
  w.layers[1].wv = Tensor::FromDoubles({4, 8}, wv);
  auto m = Model::Create(c, std::move(w));
  ASSERT_FALSE(m.has_value());
  EXPECT_NE(m.error().message().find("model.layers.1.self_attn.v_proj.weight value 5"),
            std::string::npos);
}

TEST(Model, RejectsWrongTensorSize) {
  const ModelConfig c = WorkedExampleConfig();
  SplitMix64 rng(20);
  auto w = InitializeWeights(c, rng);
  auto up = w.layers[0].w_up.ToDoubles();
  up.pop_back();
  w.layers[0].w_up = Tensor::FromDoubles({12, 8}, up);
  auto m = Model::Create(c, std::move(w));
  ASSERT_FALSE(m.has_value());
  EXPECT_NE(m.error().message().find("mlp.up_proj"), std::string::npos);
}

TEST(ModelConfig, RejectsInvalidShapes) {
  ModelConfig c = WorkedExampleConfig();
  c.num_kv_heads = 3;
  EXPECT_NE(c.Validate().message().find("not a multiple of num_kv_heads 3"), std::string::npos);
  c = WorkedExampleConfig();
  c.hidden_size = 12;  // head_dim 3: odd
  EXPECT_NE(c.Validate().message().find("even"), std::string::npos);
  c = WorkedExampleConfig();
  c.rope_theta = -1;
  EXPECT_FALSE(c.Validate().ok());
  c = WorkedExampleConfig();
  c.vocab_size = 0;
  EXPECT_NE(c.Validate().message().find("vocab_size"), std::string::npos);
}

// dots1's mixture: sigmoid routing with a selection bias, 4 groups of 2
// experts, a routed scale, a leading dense layer and 2 shared experts.
ModelConfig DeepSeekMixture() { return test_support::DeepSeekMixtureConfig(); }

TEST(ModelConfig, ParameterCountCountsEveryTensorOfADeepSeekMixture) {
  const Model m = *Model::FromSeed(DeepSeekMixture(), 3);
  uint64_t elements = 0;
  ForEachTensor(m.config(), m.weights(),
                [&](const std::string&, const std::vector<uint64_t>&, const Tensor& t) {
                  elements += t.num_elements();
                });
  EXPECT_EQ(m.config().ParameterCount(), elements);
  // The dense layer has no router; the mixtures have a bias and ungated
  // shared experts of 2 x 6.
  EXPECT_TRUE(m.weights().layers[0].router.empty());
  EXPECT_EQ(m.weights().layers[0].w_gate.shape, (std::vector<uint64_t>{12, 8}));
  EXPECT_EQ(m.weights().layers[1].router_selection_bias.shape, (std::vector<uint64_t>{8}));
  EXPECT_EQ(m.weights().layers[2].shared_gate.shape, (std::vector<uint64_t>{12, 8}));
  EXPECT_TRUE(m.weights().layers[2].shared_expert_gate.empty());
}

// Each router option is hashed, and a model without them keeps the id
// its options never entered.
TEST(Model, RouterOptionsEnterTheId) {
  const std::string id = Model::FromSeed(DeepSeekMixture(), 20)->id();
  using Change = void (*)(ModelConfig&);
  for (const Change change :
       std::initializer_list<Change>{[](ModelConfig& c) { c.routing = Routing::kSoftmaxTopK; },
                                     [](ModelConfig& c) { c.expert_groups_used = 1; },
                                     [](ModelConfig& c) { c.expert_groups = 2; },
                                     [](ModelConfig& c) { c.routed_scale = 1.0; }}) {
    ModelConfig other = DeepSeekMixture();
    change(other);
    ASSERT_TRUE(other.Validate().ok());
    EXPECT_NE(Model::FromSeed(other, 20)->id(), id);
  }
}

TEST(ModelConfig, RejectsBadRouterOptions) {
  using Change = void (*)(ModelConfig&);
  const std::pair<Change, const char*> cases[] = {
      {[](ModelConfig& c) { c.expert_groups = 3; }, "must divide num_experts 8"},
      {[](ModelConfig& c) { c.expert_groups = 8; }, "a group's score sums its two best"},
      {[](ModelConfig& c) { c.expert_groups_used = 5; }, "expert_groups_used 5"},
      {[](ModelConfig& c) { c.expert_groups_used = 0; }, "expert_groups_used 0"},
      {[](ModelConfig& c) {
         c.expert_groups_used = 1;
         c.experts_per_token = 3;
       },
       "exceeds the 2 experts of the 1 groups"},
      {[](ModelConfig& c) { c.routed_scale = 0; }, "routed_scale"},
      {[](ModelConfig& c) { c.routed_scale = INFINITY; }, "routed_scale"},
      {[](ModelConfig& c) { c.leading_dense_layers = 4; }, "leading_dense_layers 4"},
      {[](ModelConfig& c) { c.shared_expert_ffn_size = 4; }, "both a gated shared expert"},
      {[](ModelConfig& c) {
         c.num_experts = 0;
         c.experts_per_token = 0;
         c.expert_ffn_size = 0;
       },
       "without experts"},
  };
  ASSERT_TRUE(DeepSeekMixture().Validate().ok());
  for (const auto& [change, named] : cases) {
    ModelConfig c = DeepSeekMixture();
    change(c);
    EXPECT_NE(c.Validate().message().find(named), std::string::npos)
        << named << ": " << c.Validate().ToString();
  }
}

}  // namespace
}  // namespace folio::model
