#include "folio/checkpoint/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "folio/checkpoint/model_io.h"
#include "folio/checkpoint/model_tokenizer.h"

namespace folio::checkpoint {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("folio_checkpoint_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    ASSERT_TRUE(SaveModel(*model::Model::FromSeed(model::WorkedExampleConfig(), 20), dir_).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }
  void WriteTokenizerConfig(const std::string& text) {
    std::ofstream(dir_ / "tokenizer_config.json") << text;
  }

  fs::path dir_;
};

TEST_F(CheckpointTest, FolderWithoutTokenizerIsByteLevel) {
  auto c = LoadCheckpoint(dir_);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_EQ(c->model.id(), LoadModel(dir_)->id());
  EXPECT_FALSE(c->tokenizer.has_value());
  EXPECT_EQ(c->chat_template, "");
}

TEST_F(CheckpointTest, FolderTokenizerIsLoadModelTokenizers) {
  fs::copy_file(fs::path(FOLIO_SOURCE_DIR) / "tests/data/tokenizer/gpt2.tokenizer.json",
                dir_ / "tokenizer.json");
  auto c = LoadCheckpoint(dir_);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  ASSERT_TRUE(c->tokenizer.has_value());
  auto alone = *LoadModelTokenizer(dir_);
  EXPECT_EQ(*c->tokenizer->Encode("Hello, world", true), *alone->Encode("Hello, world", true));
}

TEST_F(CheckpointTest, ChatTemplateFromTokenizerConfig) {
  WriteTokenizerConfig(R"({"chat_template": "{{ messages }}"})");
  EXPECT_EQ(LoadCheckpoint(dir_)->chat_template, "{{ messages }}");
  WriteTokenizerConfig(
      R"({"chat_template": [{"name": "tool_use", "template": "T"},
                            {"name": "default", "template": "D"}]})");
  EXPECT_EQ(LoadCheckpoint(dir_)->chat_template, "D");
  WriteTokenizerConfig(R"({"chat_template": [{"name": "a", "template": "A"}, {"name": "b"}]})");
  EXPECT_EQ(LoadCheckpoint(dir_)->chat_template, "A");
  WriteTokenizerConfig("{not json");  // optional: unreadable is none
  auto c = LoadCheckpoint(dir_);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_EQ(c->chat_template, "");
}

TEST_F(CheckpointTest, ChatTemplateJinjaFileWinsOverTokenizerConfig) {
  WriteTokenizerConfig(R"({"chat_template": "{{ messages }}"})");
  std::ofstream(dir_ / "chat_template.jinja") << "<|start|>{{ x }}\n";
  EXPECT_EQ(LoadCheckpoint(dir_)->chat_template, "<|start|>{{ x }}\n");
}

TEST_F(CheckpointTest, ErrorsAreLoadModels) {
  auto r = LoadCheckpoint(dir_ / "nowhere");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().ToString(), LoadModel(dir_ / "nowhere").error().ToString());
  std::ofstream(dir_ / "config.json") << "{not json";
  r = LoadCheckpoint(dir_);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().ToString(), LoadModel(dir_).error().ToString());
}

}  // namespace
}  // namespace folio::checkpoint
