#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "folio/checkpoint/model_io.h"
#include "folio/checkpoint/safetensors.h"
#include "folio/model/model.h"
#include "reference/float64_decoder.h"

namespace folio::checkpoint {
namespace {

namespace fs = std::filesystem;
using model::Decoder;
using model::Model;
using model::ModelConfig;
using model::WorkedExampleConfig;

class ModelIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("folio_model_io_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  nlohmann::json ReadConfig() {
    std::ifstream in(dir_ / "config.json");
    return nlohmann::json::parse(in);
  }
  void WriteConfig(const nlohmann::json& j) {
    std::ofstream out(dir_ / "config.json");
    out << j.dump();
  }

  fs::path dir_;
};

TEST_F(ModelIoTest, RoundTripPreservesIdAndLogits) {
  ModelConfig c = WorkedExampleConfig();
  c.tie_embeddings = false;
  c.window = 5;
  auto model = *Model::FromSeed(c, 20);
  ASSERT_TRUE(SaveModel(model, dir_).ok());
  auto loaded = LoadModel(dir_);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().ToString();
  EXPECT_EQ(loaded->id(), model.id());
  EXPECT_EQ(loaded->config(), model.config());
  const std::vector<int32_t> tokens = {0, 99, 100, 101};
  EXPECT_EQ(*reference::Float64Decoder(*loaded).Forward(tokens, 1),
            *reference::Float64Decoder(model).Forward(tokens, 1));
}

TEST_F(ModelIoTest, WritesHuggingFaceNamesAndShapes) {
  auto model = *Model::FromSeed(WorkedExampleConfig(), 20);
  ASSERT_TRUE(SaveModel(model, dir_).ok());
  auto file = *SafetensorsFile::Open(dir_ / "model.safetensors");
  const TensorInfo* q = file.Find("model.layers.1.self_attn.q_proj.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->shape, (std::vector<uint64_t>{8, 8}));
  EXPECT_EQ(file.Find("model.layers.0.mlp.down_proj.weight")->shape,
            (std::vector<uint64_t>{8, 12}));
  EXPECT_EQ(file.Find("lm_head.weight"), nullptr);  // tied
  EXPECT_EQ(file.metadata().at("folio_model_id"), model.id());
  EXPECT_EQ(ReadConfig()["num_key_value_heads"], 2);
}

TEST_F(ModelIoTest, MissingTensorIsNamed) {
  auto model = *Model::FromSeed(WorkedExampleConfig(), 20);
  ASSERT_TRUE(SaveModel(model, dir_).ok());
  auto cfg = ReadConfig();
  cfg["tie_word_embeddings"] = false;  // now lm_head.weight is required
  WriteConfig(cfg);
  auto r = LoadModel(dir_);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kNotFound);
  EXPECT_NE(r.error().message().find("missing tensor lm_head.weight"), std::string::npos);
}

TEST_F(ModelIoTest, UnexpectedTensorIsNamed) {
  ModelConfig c = WorkedExampleConfig();
  c.num_layers = 2;
  ASSERT_TRUE(SaveModel(*Model::FromSeed(c, 20), dir_).ok());
  auto cfg = ReadConfig();
  cfg["num_hidden_layers"] = 1;  // layer 1's tensors are now unexpected
  WriteConfig(cfg);
  auto r = LoadModel(dir_);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("unexpected tensor model.layers.1."), std::string::npos);
}

// A tied checkpoint that still carries its head loads, ignoring the copy.
TEST_F(ModelIoTest, TiedCheckpointMayCarryAHead) {
  ModelConfig c = WorkedExampleConfig();
  c.tie_embeddings = false;
  auto untied = *Model::FromSeed(c, 20);
  ASSERT_TRUE(SaveModel(untied, dir_).ok());
  auto cfg = ReadConfig();
  cfg["tie_word_embeddings"] = true;
  WriteConfig(cfg);
  auto r = LoadModel(dir_);
  ASSERT_TRUE(r.has_value()) << r.status().ToString();
  EXPECT_TRUE(r->config().tie_embeddings);
}

TEST_F(ModelIoTest, WrongShapeIsNamed) {
  ASSERT_TRUE(SaveModel(*Model::FromSeed(WorkedExampleConfig(), 20), dir_).ok());
  auto cfg = ReadConfig();
  cfg["intermediate_size"] = 16;
  WriteConfig(cfg);
  auto r = LoadModel(dir_);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("gate_proj.weight has shape [12,8]"), std::string::npos);
}

TEST_F(ModelIoTest, BadConfigValuesAreNamed) {
  ASSERT_TRUE(SaveModel(*Model::FromSeed(WorkedExampleConfig(), 20), dir_).ok());
  const auto good = ReadConfig();
  auto cfg = good;
  cfg["hidden_size"] = -8;
  WriteConfig(cfg);
  auto r = LoadModel(dir_);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("\"hidden_size\" must be a non-negative integer"),
            std::string::npos);
  cfg = good;
  cfg.erase("num_hidden_layers");
  WriteConfig(cfg);
  EXPECT_NE(LoadModel(dir_).status().message().find("missing key \"num_hidden_layers\""),
            std::string::npos);
  cfg = good;
  cfg["architectures"] = {"GPT2LMHeadModel"};
  WriteConfig(cfg);
  EXPECT_EQ(LoadModel(dir_).status().code(), StatusCode::kUnimplemented);
  cfg = good;
  cfg["hidden_act"] = "gelu";
  WriteConfig(cfg);
  EXPECT_NE(LoadModel(dir_).status().message().find("hidden_act"), std::string::npos);
  std::ofstream(dir_ / "config.json") << "{not json";
  EXPECT_EQ(LoadModel(dir_).status().code(), StatusCode::kCorruption);
}

// Architectures are refused by name, listing what folio runs.
TEST_F(ModelIoTest, UnknownArchitecturesAreNamed) {
  ASSERT_TRUE(SaveModel(*Model::FromSeed(WorkedExampleConfig(), 20), dir_).ok());
  const auto good = ReadConfig();
  auto cfg = good;
  cfg["architectures"] = {"GPT2LMHeadModel"};
  WriteConfig(cfg);
  EXPECT_NE(LoadModel(dir_).status().message().find(
                "architectures must be one of FolioForCausalLM, LlamaForCausalLM, "
                "MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma3ForCausalLM, "
                "Gemma2ForCausalLM, Phi3ForCausalLM, Qwen3MoeForCausalLM, MixtralForCausalLM, "
                "GptOssForCausalLM, BertModel, BertForSequenceClassification, "
                "Qwen3ForSequenceClassification, Qwen2MoeForCausalLM, Dots1ForCausalLM (got "
                "[\"GPT2LMHeadModel\"])"),
            std::string::npos);
  cfg = good;
  cfg["folio_architecture"] = "gpt2";
  WriteConfig(cfg);
  auto r = LoadModel(dir_);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.error().message().find("\"folio_architecture\" \"gpt2\""), std::string::npos);
  cfg = good;
  cfg["folio_architecture"] = "gemma3";  // its block is not the one folio's class spells out
  WriteConfig(cfg);
  r = LoadModel(dir_);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("\"folio_architecture\" \"gemma3\""), std::string::npos)
      << r.error().message();
  cfg = good;
  cfg["folio_architecture"] = "qwen2";
  WriteConfig(cfg);
  r = LoadModel(dir_);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->config().architecture, model::Architecture::kQwen2);
}

// Each architecture saves under its Hugging Face class when that class can
// express the config, and under FolioForCausalLM otherwise; both reload to
// the same config and id.
TEST_F(ModelIoTest, ArchitecturesRoundTripThroughTheirClass) {
  struct Case {
    model::Architecture arch;
    model::RopeStyle rope;
    bool bias, qk_norm;
    const char* cls;
  };
  using model::Architecture;
  using model::RopeStyle;
  const Case cases[] = {
      {Architecture::kFolio, RopeStyle::kInterleaved, false, false, "FolioForCausalLM"},
      {Architecture::kLlama, RopeStyle::kNeox, true, false, "LlamaForCausalLM"},
      {Architecture::kLlama, RopeStyle::kInterleaved, false, false, "FolioForCausalLM"},
      {Architecture::kMistral, RopeStyle::kNeox, false, false, "MistralForCausalLM"},
      {Architecture::kMistral, RopeStyle::kNeox, true, false, "FolioForCausalLM"},
      {Architecture::kQwen2, RopeStyle::kNeox, true, false, "Qwen2ForCausalLM"},
      {Architecture::kQwen2, RopeStyle::kNeox, false, false, "FolioForCausalLM"},
      {Architecture::kQwen3, RopeStyle::kNeox, false, true, "Qwen3ForCausalLM"},
      {Architecture::kQwen3, RopeStyle::kNeox, false, false, "FolioForCausalLM"},
  };
  for (const Case& k : cases) {
    ModelConfig c = WorkedExampleConfig();
    c.architecture = k.arch;
    c.rope_style = k.rope;
    c.attention_bias = k.bias;
    c.qk_norm = k.qk_norm;
    c.tie_embeddings = false;
    auto model = *Model::FromSeed(c, 20);
    fs::remove_all(dir_);
    ASSERT_TRUE(SaveModel(model, dir_).ok());
    EXPECT_EQ(ReadConfig()["architectures"][0], k.cls) << model::ArchitectureName(k.arch);
    auto loaded = LoadModel(dir_);
    ASSERT_TRUE(loaded.has_value()) << loaded.error().ToString();
    EXPECT_EQ(loaded->config(), c) << model::ArchitectureName(k.arch) << " as " << k.cls;
    EXPECT_EQ(loaded->id(), model.id());
  }
}

TEST_F(ModelIoTest, MissingFolderIsNotFound) {
  auto r = LoadModel(dir_ / "nowhere");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace folio::checkpoint
