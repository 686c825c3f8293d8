#include "folio/checkpoint/quantize_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>

#include "folio/checkpoint/model_io.h"
#include "folio/core/str_cat.h"
#include "folio/ops/quantize.h"
#include "reference/float64_decoder.h"

namespace folio::checkpoint {
namespace {

namespace fs = std::filesystem;
using ops::WeightType;

QuantizeScheme Scheme(std::string_view name) { return *ParseQuantizeScheme(name); }

// A small model whose rows fit every type (256 and 512 columns) and whose
// head dim (32) has room for the Q/K permutation to matter.
model::ModelConfig SmallConfig(model::Architecture arch, bool tied) {
  model::ModelConfig c;
  c.architecture = arch;
  c.rope_style = model::RopeStyle::kNeox;  // as Hugging Face folders are
  c.hidden_size = 256;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.ffn_size = 512;
  c.num_layers = 3;
  c.max_positions = 64;
  c.vocab_size = 300;
  c.tie_embeddings = tied;
  c.norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.attention_bias = arch == model::Architecture::kQwen2;
  c.qk_norm = arch == model::Architecture::kQwen3;
  return c;
}

std::vector<char> FileBytesOf(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(QuantizeScheme, EveryNameParsesAndOthersAreListed) {
  for (const QuantizeScheme& s : kQuantizeSchemes) {
    EXPECT_EQ(Scheme(s.name).base, s.base) << s.name;
    EXPECT_TRUE(ops::HasQuantizer(s.base)) << s.name;
  }
  const Result<QuantizeScheme> bad = ParseQuantizeScheme("q3_k_l");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.error().message().find("f32, f16, bf16, q8_0"), std::string::npos);
  EXPECT_NE(bad.error().message().find("q3_k_m, q4_k_m, q5_k_m"), std::string::npos);
}

TEST(QuantizePlan, FallbacksAreLlamaCppsThenF16) {
  EXPECT_EQ(FallbackType(WeightType::kQ4_K, 512), WeightType::kQ4_K);
  EXPECT_EQ(FallbackType(WeightType::kQ4_K, 576), WeightType::kQ5_0);
  EXPECT_EQ(FallbackType(WeightType::kQ5_K, 576), WeightType::kQ5_1);
  EXPECT_EQ(FallbackType(WeightType::kQ6_K, 576), WeightType::kQ8_0);
  EXPECT_EQ(FallbackType(WeightType::kIQ4_XS, 576), WeightType::kIQ4_NL);
  EXPECT_EQ(FallbackType(WeightType::kIQ4_XS, 48), WeightType::kF16);
  EXPECT_EQ(FallbackType(WeightType::kIQ4_NL, 48), WeightType::kF16);
  EXPECT_EQ(FallbackType(WeightType::kQ6_K, 48), WeightType::kF16);
  EXPECT_EQ(FallbackType(WeightType::kQ8_0, 48), WeightType::kF16);
  EXPECT_EQ(FallbackType(WeightType::kQ4_0, 32), WeightType::kQ4_0);
  EXPECT_EQ(FallbackType(WeightType::kBF16, 7), WeightType::kBF16);
}

TEST(QuantizePlan, MoreBitsLayersAreTheOuterEighthsAndEveryThird) {
  auto layers = [](uint64_t n) {
    std::vector<uint64_t> out;
    for (uint64_t i = 0; i < n; ++i) {
      if (MoreBitsLayer(i, n)) out.push_back(i);
    }
    return out;
  };
  // 30 layers (SmolLM2): n/8 = 3, 7n/8 = 26.
  EXPECT_EQ(layers(30), (std::vector<uint64_t>{0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29}));
  // 32 layers (Llama 7B): n/8 = 4, 7n/8 = 28.
  EXPECT_EQ(layers(32),
            (std::vector<uint64_t>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}));
  // 3 layers: n/8 = 0, 7n/8 = 2; (i - 0) % 3 == 2 adds nothing new.
  EXPECT_EQ(layers(3), (std::vector<uint64_t>{2}));
}

TEST(QuantizePlan, PureSchemesPutEveryMatrixInTheirTypeAndVectorsInF32) {
  const auto plan =
      PlanQuantization(SmallConfig(model::Architecture::kQwen2, false), Scheme("q8_0"));
  size_t matrices = 0;
  for (const TensorQuantization& t : plan) {
    EXPECT_EQ(t.type, t.shape.size() == 1 ? WeightType::kF32 : WeightType::kQ8_0) << t.name;
    EXPECT_FALSE(t.fallback());
    matrices += t.shape.size() == 2;
  }
  EXPECT_EQ(matrices, 2 + 3 * 7u);  // embedding, head; q k v o gate up down
  EXPECT_EQ(plan.front().name, "token_embd.weight");
  EXPECT_EQ(plan.back().name, "output.weight");
}

TEST(QuantizePlan, KMMixesRaiseTheHeadAndSomeAttnVAndFfnDownToQ6K) {
  for (const char* name : {"q4_k_m", "q5_k_m"}) {
    SCOPED_TRACE(name);
    const WeightType base = Scheme(name).base;
    for (bool tied : {false, true}) {
      model::ModelConfig c = SmallConfig(model::Architecture::kLlama, tied);
      c.num_layers = 8;  // MoreBitsLayer: 0, 3, 6, 7
      std::set<std::string> q6;
      for (const TensorQuantization& t : PlanQuantization(c, Scheme(name))) {
        if (t.type == WeightType::kQ6_K) q6.insert(t.name);
        if (t.shape.size() == 1) {
          EXPECT_EQ(t.type, WeightType::kF32);
        } else if (t.type != WeightType::kQ6_K) {
          EXPECT_EQ(t.type, base) << t.name;
        }
      }
      std::set<std::string> want = {tied ? "token_embd.weight" : "output.weight"};
      for (int i : {0, 3, 6, 7}) {
        want.insert("blk." + std::to_string(i) + ".attn_v.weight");
        want.insert("blk." + std::to_string(i) + ".ffn_down.weight");
      }
      EXPECT_EQ(q6, want);
    }
  }
}

// SmolLM2's shape: rows of 576 are not whole 256-blocks.
TEST(QuantizePlan, RowsThatAreNotWholeBlocksFallBack) {
  model::ModelConfig c = SmallConfig(model::Architecture::kLlama, true);
  c.hidden_size = 576;
  c.num_heads = 9;
  c.num_kv_heads = 3;
  c.ffn_size = 1536;
  c.num_layers = 8;
  for (const TensorQuantization& t : PlanQuantization(c, Scheme("q4_k_m"))) {
    if (t.shape.size() == 1) continue;
    SCOPED_TRACE(t.name);
    if (t.name.find("ffn_down") != std::string::npos) {  // rows of 1536 fit
      EXPECT_FALSE(t.fallback());
    } else if (t.wanted == WeightType::kQ6_K) {  // the tied head, attn_v
      EXPECT_EQ(t.type, WeightType::kQ8_0);
    } else {
      EXPECT_EQ(t.wanted, WeightType::kQ4_K);
      EXPECT_EQ(t.type, WeightType::kQ5_0);
    }
  }
}

TEST(GgufMetadataFor, WritesLlamaCppsKeys) {
  model::ModelConfig c = SmallConfig(model::Architecture::kMistral, false);
  c.window = 16;
  c.explicit_head_dim = 64;
  c.rope_scaling.type = model::RopeScaling::Type::kLinear;
  c.rope_scaling.factor = 2.0;
  Result<std::vector<GgufKeyValue>> kvs = GgufMetadataFor(c, "m", 15, true);
  ASSERT_TRUE(kvs.ok()) << kvs.error().ToString();
  std::map<std::string, GgufValue> got;
  for (const auto& kv : *kvs) got[kv.key] = kv.value;
  EXPECT_EQ(got.at("general.architecture"), GgufString("llama"));  // mistral files say llama
  EXPECT_EQ(got.at("general.name"), GgufString("m"));
  EXPECT_EQ(got.at("general.file_type"), GgufU32(15));
  EXPECT_EQ(got.at("general.quantization_version"), GgufU32(2));
  EXPECT_EQ(got.at("llama.embedding_length"), GgufU32(256));
  EXPECT_EQ(got.at("llama.attention.head_count_kv"), GgufU32(2));
  EXPECT_EQ(got.at("llama.attention.key_length"), GgufU32(64));
  EXPECT_EQ(got.at("llama.rope.dimension_count"), GgufU32(64));
  EXPECT_EQ(got.at("llama.attention.layer_norm_rms_epsilon"), GgufF32(1e-5f));
  EXPECT_EQ(got.at("llama.rope.scaling.type"), GgufString("linear"));
  EXPECT_EQ(got.at("llama.attention.sliding_window"), GgufU32(16));
  EXPECT_FALSE(GgufMetadataFor(c, "m", 15, false)->empty());
}

TEST(GgufMetadataFor, RefusesWhatAGgufFileCannotSay) {
  model::ModelConfig folio = model::WorkedExampleConfig();
  EXPECT_EQ(GgufMetadataFor(folio, "m", 0, false).error().code(), StatusCode::kUnimplemented);
  model::ModelConfig llama3 = SmallConfig(model::Architecture::kLlama, false);
  llama3.rope_scaling.type = model::RopeScaling::Type::kLlama3;
  EXPECT_NE(GgufMetadataFor(llama3, "m", 0, false).error().message().find("rope_freqs"),
            std::string::npos);
  model::ModelConfig biased = SmallConfig(model::Architecture::kLlama, false);
  biased.attention_bias = true;
  EXPECT_EQ(GgufMetadataFor(biased, "m", 0, false).error().code(), StatusCode::kUnimplemented);
  model::ModelConfig interleaved_qwen = SmallConfig(model::Architecture::kQwen3, false);
  interleaved_qwen.rope_style = model::RopeStyle::kInterleaved;
  EXPECT_EQ(GgufMetadataFor(interleaved_qwen, "m", 0, false).error().code(),
            StatusCode::kUnimplemented);
}

// A Qwen3-MoE (qwen2moe: with a shared expert) whose rows are whole
// 32-blocks, with `experts` experts.
model::ModelConfig MoeConfig(model::Architecture arch, uint64_t experts, bool tied) {
  model::ModelConfig c = SmallConfig(arch, tied);
  c.hidden_size = 64;
  c.num_heads = 4;
  c.ffn_size = 96;
  c.num_layers = 4;
  c.num_experts = experts;
  c.experts_per_token = 2;
  c.expert_ffn_size = 32;
  c.attention_bias = arch == model::Architecture::kQwen2Moe;
  c.qk_norm = arch == model::Architecture::kQwen3Moe;
  if (arch == model::Architecture::kQwen2Moe) {
    c.shared_expert_ffn_size = 64;
    c.norm_topk_prob = false;
  }
  return c;
}

std::map<std::string, TensorQuantization> ByName(const std::vector<TensorQuantization>& plan) {
  std::map<std::string, TensorQuantization> out;
  for (const TensorQuantization& t : plan) out.emplace(t.name, t);
  return out;
}

TEST(QuantizePlan, ExpertsAreStackedAsLlamaCppsThreeDTensors) {
  const model::ModelConfig c = MoeConfig(model::Architecture::kQwen2Moe, 8, false);
  const std::vector<TensorQuantization> plan = PlanQuantization(c, Scheme("f32"));
  const auto t = ByName(plan);
  EXPECT_EQ(t.at("blk.1.ffn_gate_inp.weight").shape, (std::vector<uint64_t>{8, 64}));
  EXPECT_EQ(t.at("blk.1.ffn_gate_exps.weight").shape, (std::vector<uint64_t>{8, 32, 64}));
  EXPECT_EQ(t.at("blk.1.ffn_up_exps.weight").shape, (std::vector<uint64_t>{8, 32, 64}));
  EXPECT_EQ(t.at("blk.1.ffn_down_exps.weight").shape, (std::vector<uint64_t>{8, 64, 32}));
  EXPECT_EQ(t.at("blk.1.ffn_gate_shexp.weight").shape, (std::vector<uint64_t>{64, 64}));
  EXPECT_EQ(t.at("blk.1.ffn_down_shexp.weight").shape, (std::vector<uint64_t>{64, 64}));
  EXPECT_EQ(t.at("blk.1.ffn_gate_inp_shexp.weight").shape, (std::vector<uint64_t>{1, 64}));
  EXPECT_EQ(t.count("blk.1.ffn_gate.weight"), 0u);
  // Per layer: norm, q k v, their biases, o, norm; router, three stacks,
  // three shared projections and their gate. Stacks sit where their first
  // expert comes.
  EXPECT_EQ(plan.size(), 1 + 4 * 17u + 2);
  std::vector<std::string> layer;
  for (const TensorQuantization& q : plan) {
    if (q.name.starts_with("blk.2.")) layer.push_back(q.name.substr(6));
  }
  EXPECT_EQ(layer,
            (std::vector<std::string>{
                "attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
                "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.weight",
                "ffn_norm.weight", "ffn_gate_inp.weight", "ffn_gate_exps.weight",
                "ffn_up_exps.weight", "ffn_down_exps.weight", "ffn_gate_shexp.weight",
                "ffn_up_shexp.weight", "ffn_down_shexp.weight", "ffn_gate_inp_shexp.weight"}));
}

// llama.cpp's MXFP4_MOE: stacks of more than one expert MXFP4, every other
// matrix Q8_0 (the head and the embedding included), routers and vectors
// f32.
TEST(QuantizePlan, Mxfp4MoePutsExpertStacksInMxfp4AndTheRestInQ8_0) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    const model::ModelConfig c = MoeConfig(model::Architecture::kQwen2Moe, 8, tied);
    size_t mxfp4 = 0;
    for (const TensorQuantization& t : PlanQuantization(c, Scheme("mxfp4_moe"))) {
      SCOPED_TRACE(t.name);
      EXPECT_FALSE(t.fallback());
      if (t.name.find("_exps.weight") != std::string::npos) {
        EXPECT_EQ(t.type, WeightType::kMXFP4);
        ++mxfp4;
      } else if (t.shape.size() == 1 || t.name.find("ffn_gate_inp") != std::string::npos) {
        EXPECT_EQ(t.type, WeightType::kF32);
      } else {
        EXPECT_EQ(t.type, WeightType::kQ8_0);
      }
    }
    EXPECT_EQ(mxfp4, 3 * 4u);
  }
  // One expert: a stack whose ne[2] is 1 is no MoE tensor to llama.cpp.
  const auto one = ByName(
      PlanQuantization(MoeConfig(model::Architecture::kQwen3Moe, 1, false), Scheme("mxfp4_moe")));
  EXPECT_EQ(one.at("blk.0.ffn_up_exps.weight").type, WeightType::kQ8_0);
  // A dense model: every matrix Q8_0, as llama-quantize writes it.
  for (const TensorQuantization& t :
       PlanQuantization(SmallConfig(model::Architecture::kLlama, false), Scheme("mxfp4_moe"))) {
    EXPECT_EQ(t.type, t.shape.size() == 1 ? WeightType::kF32 : WeightType::kQ8_0) << t.name;
  }
}

TEST(QuantizePlan, ExpertRowsThatAreNotWhole32BlocksFallBackToF16) {
  model::ModelConfig c = MoeConfig(model::Architecture::kQwen3Moe, 4, false);
  c.expert_ffn_size = 48;  // ffn_down_exps rows of 48
  const auto t = ByName(PlanQuantization(c, Scheme("mxfp4_moe")));
  EXPECT_EQ(t.at("blk.0.ffn_gate_exps.weight").type, WeightType::kMXFP4);
  EXPECT_EQ(t.at("blk.0.ffn_down_exps.weight").wanted, WeightType::kMXFP4);
  EXPECT_EQ(t.at("blk.0.ffn_down_exps.weight").type, WeightType::kF16);
}

// Pure schemes stack experts in the base type; routers stay f32 in every
// scheme (llama-quantize never quantizes them).
TEST(QuantizePlan, RoutersStayF32InEveryScheme) {
  const model::ModelConfig c = MoeConfig(model::Architecture::kQwen2Moe, 8, false);
  for (const QuantizeScheme& s : kQuantizeSchemes) {
    SCOPED_TRACE(s.name);
    const auto t = ByName(PlanQuantization(c, s));
    EXPECT_EQ(t.at("blk.3.ffn_gate_inp.weight").type, WeightType::kF32);
    EXPECT_EQ(t.at("blk.3.ffn_gate_inp_shexp.weight").type, WeightType::kF32);
    if (s.mix == QuantizeMix::kPure) {
      EXPECT_EQ(t.at("blk.3.ffn_up_exps.weight").wanted, s.base);
    }
  }
}

// The _K_M mixes on experts: every ffn_down of a MoreBitsLayer layer (the
// stack and the shared expert's) Q6_K; with exactly 8 experts attn_v and
// attn_k Q8_0 and attn_output Q5_K. Q3_K_M keeps those 8-expert rules and
// its own for the rest (ffn_down by the layer in the tensor's name).
TEST(QuantizePlan, KMMixesFollowLlamaCppsExpertRules) {
  for (uint64_t experts : {4u, 8u}) {
    SCOPED_TRACE(experts);
    model::ModelConfig c = MoeConfig(model::Architecture::kQwen2Moe, experts, false);
    c.hidden_size = c.expert_ffn_size = c.shared_expert_ffn_size = 256;
    c.num_layers = 8;  // MoreBitsLayer: 0, 3, 6, 7
    for (const TensorQuantization& t : PlanQuantization(c, Scheme("q4_k_m"))) {
      SCOPED_TRACE(t.name);
      EXPECT_FALSE(t.fallback());
      const bool more = t.name.starts_with("blk.0.") || t.name.starts_with("blk.3.") ||
                        t.name.starts_with("blk.6.") || t.name.starts_with("blk.7.");
      WeightType want = WeightType::kQ4_K;
      if (t.shape.size() == 1 || t.name.find("ffn_gate_inp") != std::string::npos) {
        want = WeightType::kF32;
      } else if (t.name == "output.weight") {
        want = WeightType::kQ6_K;
      } else if (t.name.ends_with("attn_v.weight")) {
        want = experts == 8 ? WeightType::kQ8_0 : more ? WeightType::kQ6_K : WeightType::kQ4_K;
      } else if (t.name.ends_with("attn_k.weight") && experts == 8) {
        want = WeightType::kQ8_0;
      } else if (t.name.ends_with("attn_output.weight") && experts == 8) {
        want = WeightType::kQ5_K;
      } else if (t.name.find("ffn_down") != std::string::npos && more) {
        want = WeightType::kQ6_K;
      }
      EXPECT_EQ(t.type, want);
    }
  }
}

// Q3_K_M: the head Q6_K, attn_v of layers 0 and 1 Q5_K and of the others
// Q4_K, attn_output Q4_K, ffn_down Q5_K in the first sixteenth of the
// layers and Q4_K after, the rest (the untied embedding too) Q3_K.
TEST(QuantizePlan, Q3KMRaisesAttentionAndFfnDownAsLlamaCppDoes) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied);
    model::ModelConfig c = SmallConfig(model::Architecture::kLlama, tied);
    c.num_layers = 40;  // n / 16 = 2
    for (const TensorQuantization& t : PlanQuantization(c, Scheme("q3_k_m"))) {
      SCOPED_TRACE(t.name);
      EXPECT_FALSE(t.fallback());
      const bool first_two = t.name.starts_with("blk.0.") || t.name.starts_with("blk.1.");
      WeightType want = WeightType::kQ3_K;
      if (t.shape.size() == 1) {
        want = WeightType::kF32;
      } else if (t.name == (tied ? "token_embd.weight" : "output.weight")) {
        want = WeightType::kQ6_K;
      } else if (t.name.ends_with("attn_v.weight") || t.name.ends_with("ffn_down.weight")) {
        want = first_two ? WeightType::kQ5_K : WeightType::kQ4_K;
      } else if (t.name.ends_with("attn_output.weight")) {
        want = WeightType::kQ4_K;
      }
      EXPECT_EQ(t.type, want);
    }
  }
  // 8 layers: n / 16 = 0, so every ffn_down is Q4_K; attn_v still counts
  // from layer 0.
  model::ModelConfig c = SmallConfig(model::Architecture::kLlama, false);
  c.num_layers = 8;
  const auto t = ByName(PlanQuantization(c, Scheme("q3_k_m")));
  EXPECT_EQ(t.at("blk.0.ffn_down.weight").type, WeightType::kQ4_K);
  EXPECT_EQ(t.at("blk.1.attn_v.weight").type, WeightType::kQ5_K);
  EXPECT_EQ(t.at("blk.2.attn_v.weight").type, WeightType::kQ4_K);
}

TEST(QuantizePlan, Q3KMFollowsLlamaCppsExpertRules) {
  for (uint64_t experts : {4u, 8u}) {
    SCOPED_TRACE(experts);
    model::ModelConfig c = MoeConfig(model::Architecture::kQwen2Moe, experts, false);
    c.hidden_size = c.expert_ffn_size = c.shared_expert_ffn_size = 256;
    c.num_layers = 32;  // n / 16 = 2
    for (const TensorQuantization& t : PlanQuantization(c, Scheme("q3_k_m"))) {
      SCOPED_TRACE(t.name);
      EXPECT_FALSE(t.fallback());
      const bool first_two = t.name.starts_with("blk.0.") || t.name.starts_with("blk.1.");
      WeightType want = WeightType::kQ3_K;
      if (t.shape.size() == 1 || t.name.find("ffn_gate_inp") != std::string::npos) {
        want = WeightType::kF32;
      } else if (t.name == "output.weight") {
        want = WeightType::kQ6_K;
      } else if (t.name.ends_with("attn_v.weight")) {
        want = experts == 8 ? WeightType::kQ8_0 : first_two ? WeightType::kQ5_K : WeightType::kQ4_K;
      } else if (t.name.ends_with("attn_k.weight") && experts == 8) {
        want = WeightType::kQ8_0;
      } else if (t.name.ends_with("attn_output.weight")) {
        want = experts == 8 ? WeightType::kQ5_K : WeightType::kQ4_K;
      } else if (t.name.find("ffn_down") != std::string::npos) {
        want = first_two ? WeightType::kQ5_K : WeightType::kQ4_K;
      }
      EXPECT_EQ(t.type, want);
    }
  }
}

TEST(GgufMetadataFor, WritesTheExpertKeys) {
  auto keys = [](const model::ModelConfig& c) {
    Result<std::vector<GgufKeyValue>> kvs = GgufMetadataFor(c, "m", 38, true);
    EXPECT_TRUE(kvs.ok()) << kvs.error().ToString();
    std::map<std::string, GgufValue> got;
    for (const auto& kv : *kvs) got[kv.key] = kv.value;
    return got;
  };
  auto q2 = keys(MoeConfig(model::Architecture::kQwen2Moe, 8, false));
  EXPECT_EQ(q2.at("general.architecture"), GgufString("qwen2moe"));
  EXPECT_EQ(q2.at("qwen2moe.expert_count"), GgufU32(8));
  EXPECT_EQ(q2.at("qwen2moe.expert_used_count"), GgufU32(2));
  EXPECT_EQ(q2.at("qwen2moe.feed_forward_length"), GgufU32(96));
  EXPECT_EQ(q2.at("qwen2moe.expert_feed_forward_length"), GgufU32(32));
  EXPECT_EQ(q2.at("qwen2moe.expert_shared_feed_forward_length"), GgufU32(64));
  EXPECT_EQ(q2.count("qwen2moe.expert_weights_norm"), 0u);  // off: the reader's default
  model::ModelConfig normed = MoeConfig(model::Architecture::kQwen2Moe, 8, false);
  normed.norm_topk_prob = true;
  EXPECT_EQ(keys(normed).at("qwen2moe.expert_weights_norm"), GgufBool(true));
  model::ModelConfig raw = MoeConfig(model::Architecture::kQwen3Moe, 8, false);
  raw.norm_topk_prob = false;
  EXPECT_EQ(keys(raw).at("qwen3moe.expert_weights_norm"), GgufBool(false));
  // Mixtral: llama, experts feed_forward_length wide.
  model::ModelConfig mixtral = MoeConfig(model::Architecture::kMixtral, 8, false);
  mixtral.expert_ffn_size = mixtral.ffn_size;
  auto m = keys(mixtral);
  EXPECT_EQ(m.at("general.architecture"), GgufString("llama"));
  EXPECT_EQ(m.at("llama.expert_count"), GgufU32(8));
  EXPECT_EQ(m.count("llama.expert_feed_forward_length"), 0u);
  EXPECT_EQ(m.count("llama.expert_weights_norm"), 0u);
}

TEST(GgufMetadataFor, RefusesMixturesAGgufFileCannotSay) {
  auto refusal = [](const model::ModelConfig& c) {
    Result<std::vector<GgufKeyValue>> kvs = GgufMetadataFor(c, "m", 38, true);
    EXPECT_FALSE(kvs.ok());
    return kvs.ok() ? std::string() : kvs.error().ToString();
  };
  model::ModelConfig shared = MoeConfig(model::Architecture::kQwen3Moe, 8, false);
  shared.shared_expert_ffn_size = 64;
  EXPECT_NE(refusal(shared).find("qwen3moe with a shared expert"), std::string::npos);
  model::ModelConfig unshared = MoeConfig(model::Architecture::kQwen2Moe, 8, false);
  unshared.shared_expert_ffn_size = 0;
  EXPECT_NE(refusal(unshared).find("qwen2moe without a shared expert"), std::string::npos);
  model::ModelConfig narrow = MoeConfig(model::Architecture::kMixtral, 8, false);
  EXPECT_NE(refusal(narrow).find("feed_forward_length"), std::string::npos);
  model::ModelConfig dense_qwen3 = MoeConfig(model::Architecture::kQwen3, 8, false);
  dense_qwen3.qk_norm = true;
  EXPECT_NE(refusal(dense_qwen3).find("qwen3 with experts"), std::string::npos);
  model::ModelConfig untruncated = MoeConfig(model::Architecture::kQwen3Moe, 8, false);
  untruncated.rope_scaling.type = model::RopeScaling::Type::kYarn;
  untruncated.rope_scaling.factor = 4.0;
  untruncated.rope_scaling.truncate = false;
  EXPECT_NE(refusal(untruncated).find("untruncated YaRN"), std::string::npos);
}

// gpt-oss as its files imply it: even layers slide, YaRN untruncated, the
// clamp 7 and 1.702; anything else is refused by name.
model::ModelConfig GptOssConfig() {
  model::ModelConfig c = MoeConfig(model::Architecture::kGptOss, 8, false);
  c.qk_norm = false;
  c.attention_bias = true;
  c.routing = model::Routing::kTopKSoftmax;
  c.norm_topk_prob = true;
  c.moe_bias = c.output_bias = c.attention_sinks = true;
  c.swiglu_limit = 7.0;
  c.window = 8;
  c.rope_scaling.type = model::RopeScaling::Type::kYarn;
  c.rope_scaling.factor = 4.0;
  c.rope_scaling.original_max_positions = 4096;
  c.rope_scaling.truncate = false;
  c.rope_scaling.beta_fast = 16.0;
  c.rope_scaling.attention_factor = 0;
  model::SettleYarn(0, 0, c.rope_scaling);
  for (uint64_t i = 0; i < c.num_layers; ++i) {
    c.layers.push_back({i % 2 == 0 ? c.window : 0, c.rope_theta, c.rope_scaling});
  }
  return c;
}

TEST(GgufMetadataFor, WritesGptOssAsItsFilesSayIt) {
  Result<std::vector<GgufKeyValue>> kvs = GgufMetadataFor(GptOssConfig(), "m", 38, true);
  ASSERT_TRUE(kvs.ok()) << kvs.error().ToString();
  std::map<std::string, GgufValue> got;
  for (const auto& kv : *kvs) got[kv.key] = kv.value;
  EXPECT_EQ(got.at("gpt-oss.attention.sliding_window"), GgufU32(8));
  EXPECT_EQ(got.at("gpt-oss.rope.scaling.type"), GgufString("yarn"));
  EXPECT_EQ(got.at("gpt-oss.rope.scaling.factor"), GgufF32(4.0f));
  EXPECT_EQ(got.at("gpt-oss.rope.scaling.original_context_length"), GgufU32(4096));
  EXPECT_EQ(got.at("gpt-oss.rope.scaling.yarn_beta_fast"), GgufF32(16.0f));
  EXPECT_EQ(got.count("gpt-oss.rope.scaling.yarn_beta_slow"), 0u);  // 1, the default
  EXPECT_EQ(got.count("gpt-oss.rope.scaling.yarn_attn_factor"), 0u);
  EXPECT_EQ(got.at("gpt-oss.expert_feed_forward_length"), GgufU32(32));
  model::ModelConfig scaled = GptOssConfig();
  scaled.rope_scaling.attention_factor *= 2;
  for (auto& l : scaled.layers) l.rope_scaling = scaled.rope_scaling;
  bool found = false;
  const Result<std::vector<GgufKeyValue>> scaled_kvs = GgufMetadataFor(scaled, "m", 38, true);
  ASSERT_TRUE(scaled_kvs.ok());
  for (const auto& kv : *scaled_kvs) {
    if (kv.key == "gpt-oss.rope.scaling.yarn_attn_factor") {
      EXPECT_EQ(kv.value, GgufF32(2.0f));
      found = true;
    }
  }
  EXPECT_TRUE(found);

  model::ModelConfig all_global = GptOssConfig();
  for (auto& l : all_global.layers) l.window = 0;
  EXPECT_NE(GgufMetadataFor(all_global, "m", 38, true)
                .error()
                .message()
                .find("gpt-oss layer 0 with window 0"),
            std::string::npos);
  model::ModelConfig clamp = GptOssConfig();
  clamp.swiglu_limit = 0.5;
  EXPECT_NE(GgufMetadataFor(clamp, "m", 38, true).error().message().find("swiglu_limit 0.5"),
            std::string::npos);
}

class QuantizeModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("folio_quantize_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A Hugging Face folder of a seeded model (f64 weights).
  fs::path SaveHf(const model::ModelConfig& c, const std::string& name) {
    const fs::path folder = dir_ / name;
    EXPECT_TRUE(SaveModel(*model::Model::FromSeed(c, 5), folder).ok());
    return folder;
  }
  Result<QuantizeReport> Quantize(const fs::path& in, const fs::path& out, std::string_view type,
                                  size_t threads = 2) {
    ThreadPool pool(threads);
    return QuantizeModel(in, out, Scheme(type), pool);
  }

  fs::path dir_;
};

// The float64 forward pass of the folder and of its f32 GGUF agree to f32
// rounding of the weights, for every architecture: Q/K rows are permuted
// for llama's interleaved RoPE, Qwen's biases and q/k norms come along.
TEST_F(QuantizeModelTest, AnF32GgufComputesWhatTheFolderComputes) {
  using model::Architecture;
  for (Architecture arch :
       {Architecture::kLlama, Architecture::kMistral, Architecture::kQwen2, Architecture::kQwen3}) {
    for (bool tied : {false, true}) {
      const std::string name = StrCat(model::ArchitectureName(arch), tied ? "_tied" : "");
      SCOPED_TRACE(name);
      const fs::path folder = SaveHf(SmallConfig(arch, tied), name);
      const fs::path out = dir_ / (name + ".gguf");
      Result<QuantizeReport> r = Quantize(folder, out, "f32");
      ASSERT_TRUE(r.ok()) << r.error().ToString();
      EXPECT_EQ(r->source_format, "folder");
      Result<model::Model> hf = LoadModel(folder), gguf = LoadModel(out);
      ASSERT_TRUE(gguf.ok()) << gguf.error().ToString();
      EXPECT_EQ(gguf->config().rope_style, model::TraitsOf(arch).gguf_rope_style);
      EXPECT_EQ(gguf->config().tie_embeddings, tied);
      const std::vector<int32_t> tokens = {1, 17, 250, 3, 99};
      const std::vector<double> want = *reference::Float64Decoder(*hf).Forward(tokens, 1);
      const std::vector<double> got = *reference::Float64Decoder(*gguf).Forward(tokens, 1);
      ASSERT_EQ(got.size(), want.size());
      double scale = 0.0, diff = 0.0;
      for (size_t i = 0; i < want.size(); ++i) {
        scale = std::max(scale, std::fabs(want[i]));
        diff = std::max(diff, std::fabs(got[i] - want[i]));
      }
      EXPECT_LE(diff, 1e-5 * std::max(1.0, scale));  // f32 weights: ~1e-7 relative each
      EXPECT_LT(r->total.RmsRelativeError(), 1e-7);  // f64 rounded to f32
    }
  }
}

// GGUF in, GGUF out: every key is kept (general.file_type and
// general.quantization_version updated), tensors keep their names and
// order, and each row is QuantizeRow of the source row.
TEST_F(QuantizeModelTest, AGgufSourceKeepsItsMetadataAndItsRows) {
  const fs::path f32 = dir_ / "f32.gguf";
  ASSERT_TRUE(
      Quantize(SaveHf(SmallConfig(model::Architecture::kQwen2, true), "hf"), f32, "f32").ok());
  const fs::path q8 = dir_ / "q8.gguf";
  Result<QuantizeReport> r = Quantize(f32, q8, "q8_0");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->source_format, "gguf");
  GgufFile src = *GgufFile::Open(f32), dst = *GgufFile::Open(q8);
  const std::vector<std::string> src_keys = src.Keys();
  ASSERT_EQ(dst.Keys().size(), src_keys.size() + 1);  // + general.quantization_version
  for (size_t i = 0; i < src_keys.size(); ++i) {
    ASSERT_EQ(dst.Keys()[i], src_keys[i]);
    if (src_keys[i] != "general.file_type") {
      EXPECT_EQ(*dst.Get(src_keys[i]), *src.Get(src_keys[i]));
    }
  }
  EXPECT_EQ(*dst.GetUint("general.file_type"), 7u);
  EXPECT_EQ(*dst.GetUint("general.quantization_version"), 2u);
  ASSERT_EQ(dst.tensors().size(), src.tensors().size());
  for (size_t i = 0; i < src.tensors().size(); ++i) {
    const auto& s = src.tensors()[i];
    const auto& d = dst.tensors()[i];
    EXPECT_EQ(d.name, s.name);
    EXPECT_EQ(d.dims, s.dims);
    EXPECT_EQ(d.type, s.dims.size() == 1 ? GgmlType::kF32 : GgmlType::kQ8_0);
    const auto src_bytes = src.Data(s);
    std::vector<float> values(src_bytes.size() / 4);
    std::memcpy(values.data(), src_bytes.data(), src_bytes.size());
    std::vector<std::byte> want(d.num_bytes);
    ASSERT_TRUE(ops::QuantizeRow(*WeightTypeOf(d), values, want.data()).ok());
    const auto got = dst.Data(d);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end())) << d.name;
  }
  // The report's sums are those of the written bytes.
  EXPECT_EQ(r->total.tensors, src.tensors().size());
  EXPECT_GT(r->total.RmsRelativeError(), 0.0);
  EXPECT_LT(r->total.RmsRelativeError(), 0.01);
}

// Contract 3 for the tool: the file and the report's sums do not depend on
// the thread count.
TEST_F(QuantizeModelTest, TheOutputDoesNotDependOnTheThreadCount) {
  const fs::path folder = SaveHf(SmallConfig(model::Architecture::kLlama, false), "hf");
  Result<QuantizeReport> one = Quantize(folder, dir_ / "one.gguf", "q4_k_m", 1);
  Result<QuantizeReport> three = Quantize(folder, dir_ / "three.gguf", "q4_k_m", 3);
  ASSERT_TRUE(one.ok() && three.ok());
  EXPECT_EQ(FileBytesOf(dir_ / "one.gguf"), FileBytesOf(dir_ / "three.gguf"));
  EXPECT_EQ(one->total.sum_sq_error, three->total.sum_sq_error);
  ASSERT_EQ(one->by_type.size(), 3u);  // f32, q4_k, q6_k
  EXPECT_EQ(one->by_type[0].first, WeightType::kF32);
  EXPECT_EQ(one->by_type[1].first, WeightType::kQ4_K);
  EXPECT_EQ(one->by_type[2].first, WeightType::kQ6_K);
  EXPECT_NEAR(one->by_type[1].second.BitsPerWeight(), 4.5, 1e-12);  // 144 bytes per 256
  EXPECT_NEAR(one->by_type[2].second.BitsPerWeight(), 6.5625, 1e-12);
  EXPECT_EQ(one->total.bytes + 0, one->by_type[0].second.bytes + one->by_type[1].second.bytes +
                                      one->by_type[2].second.bytes);
  EXPECT_GE(one->file_bytes, one->total.bytes);
}

// A NaN weight is refused naming the tensor and row, and an existing output
// file is left as it was.
TEST_F(QuantizeModelTest, ANonFiniteWeightIsRefusedAndLeavesTheOutputAlone) {
  const model::ModelConfig c = SmallConfig(model::Architecture::kLlama, true);
  model::ModelWeights w = model::Model::FromSeed(c, 5)->weights();
  std::vector<double> down = w.layers[1].w_down.ToDoubles();
  down[3 * c.ffn_size + 7] = std::numeric_limits<double>::quiet_NaN();
  w.layers[1].w_down = model::Tensor::FromDoubles(w.layers[1].w_down.shape, down);
  const fs::path folder = dir_ / "nan";
  ASSERT_TRUE(SaveModel(*model::Model::Create(c, w, /*check_finite=*/false), folder).ok());
  const fs::path out = dir_ / "out.gguf";
  std::ofstream(out) << "previous";
  Result<QuantizeReport> r = Quantize(folder, out, "q8_0");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find("tensor blk.1.ffn_down.weight: row 3: element 7 is nan"),
            std::string::npos)
      << r.error().message();
  EXPECT_EQ(FileBytesOf(out), (std::vector<char>{'p', 'r', 'e', 'v', 'i', 'o', 'u', 's'}));
  EXPECT_FALSE(fs::exists(dir_ / "out.gguf.tmp"));
}

// An f32 GGUF file of a model of `c`, as folio writes one from a folder
// (GgufMetadataFor's keys, PlanQuantization's tensors), its weights a
// smooth function of the tensor and element index; `nan` (a tensor name
// and element) is NaN.
void WriteF32Gguf(const model::ModelConfig& c, const fs::path& path,
                  std::pair<std::string, uint64_t> nan = {}) {
  const std::vector<TensorQuantization> plan = PlanQuantization(c, Scheme("f32"));
  std::vector<GgufTensorSpec> specs;
  for (const TensorQuantization& t : plan) {
    specs.push_back({t.name, GgmlType::kF32, {t.shape.rbegin(), t.shape.rend()}});
  }
  auto fill = [&](size_t i, std::span<std::byte> out) {
    std::vector<float> v(out.size() / 4);
    for (size_t k = 0; k < v.size(); ++k) {
      v[k] = 0.1f * static_cast<float>(std::sin(0.37 * static_cast<double>(k) + 1.3 * i));
      if (plan[i].name == nan.first && k == nan.second) v[k] = std::nanf("");
    }
    std::memcpy(out.data(), v.data(), out.size());
    return Status::Ok();
  };
  ASSERT_TRUE(WriteGgufFile(path, *GgufMetadataFor(c, "moe", 0, false), specs, fill).ok());
}

// GGUF experts in, MXFP4 stacks out: each row of each expert's stack is
// QuantizeRow of the same row of the source (the experts, read as one
// tensor each, are stacked back in order).
TEST_F(QuantizeModelTest, ExpertStacksAreWrittenRowForRow) {
  const model::ModelConfig c = MoeConfig(model::Architecture::kQwen2Moe, 4, false);
  const fs::path src_path = dir_ / "src.gguf", out_path = dir_ / "out.gguf";
  WriteF32Gguf(c, src_path);
  Result<QuantizeReport> r = Quantize(src_path, out_path, "mxfp4_moe");
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  GgufFile src = *GgufFile::Open(src_path), dst = *GgufFile::Open(out_path);
  ASSERT_EQ(dst.tensors().size(), src.tensors().size());
  size_t stacks = 0;
  for (size_t i = 0; i < src.tensors().size(); ++i) {
    const auto& s = src.tensors()[i];
    const auto& d = dst.tensors()[i];
    ASSERT_EQ(d.name, s.name);
    EXPECT_EQ(d.dims, s.dims);
    if (d.type != GgmlType::kMXFP4) continue;
    ++stacks;
    ASSERT_EQ(d.dims.size(), 3u);
    const auto src_bytes = src.Data(s);
    std::vector<float> values(src_bytes.size() / 4);
    std::memcpy(values.data(), src_bytes.data(), src_bytes.size());
    std::vector<std::byte> want(d.num_bytes);
    ASSERT_TRUE(ops::QuantizeRow(WeightType::kMXFP4, values, want.data()).ok());
    const auto got = dst.Data(d);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end())) << d.name;
  }
  EXPECT_EQ(stacks, 3 * c.num_layers);
  ASSERT_TRUE(LoadModel(out_path).ok());
}

// A NaN in an expert is named by tensor, expert and row; nothing is written.
TEST_F(QuantizeModelTest, ANonFiniteExpertWeightIsNamedByExpertAndRow) {
  const model::ModelConfig c = MoeConfig(model::Architecture::kQwen3Moe, 4, false);
  const fs::path src_path = dir_ / "src.gguf";
  // Expert 2, row 5, element 7 of a [4, 32, 64] stack.
  WriteF32Gguf(c, src_path, {"blk.1.ffn_up_exps.weight", (2 * 32 + 5) * 64 + 7});
  Result<QuantizeReport> r = Quantize(src_path, dir_ / "out.gguf", "mxfp4_moe");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(
      r.error().message().find("tensor blk.1.ffn_up_exps.weight: expert 2 row 5: element 7 is nan"),
      std::string::npos)
      << r.error().message();
  EXPECT_FALSE(fs::exists(dir_ / "out.gguf"));
  EXPECT_FALSE(fs::exists(dir_ / "out.gguf.tmp"));
}

TEST_F(QuantizeModelTest, AMissingInputIsNotFound) {
  EXPECT_EQ(Quantize(dir_ / "absent", dir_ / "out.gguf", "q8_0").error().code(),
            StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(dir_ / "out.gguf"));
}

}  // namespace
}  // namespace folio::checkpoint
