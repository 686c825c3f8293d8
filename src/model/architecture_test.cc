#include "folio/model/architecture.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace folio::model {
namespace {

// The names model ids hash (docs/spec/model-id.md), in enum order.
TEST(Architecture, NamesAreTheModelIdSpecs) {
  std::vector<std::string> names;
  for (const ArchitectureTraits& t : kArchitectureTraits) names.emplace_back(t.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"folio", "llama", "mistral", "qwen2", "qwen3", "gemma3",
                                      "gemma2", "phi3", "qwen3moe", "mixtral", "gpt-oss", "bert",
                                      "bert-classifier", "qwen3-classifier", "qwen2moe", "dots1"}));
}

TEST(Architecture, EveryRowIsFoundByEachOfItsNames) {
  for (const ArchitectureTraits& t : kArchitectureTraits) {
    EXPECT_EQ(&TraitsOf(t.architecture), &t);
    EXPECT_EQ(ArchitectureName(t.architecture), t.name);
    EXPECT_EQ(ArchitectureFromName(t.name), t.architecture) << t.name;
    EXPECT_EQ(ArchitectureFromHfClass(t.hf_class), t.architecture) << t.hf_class;
    if (!t.gguf_name.empty()) {
      EXPECT_EQ(ArchitectureFromGgufName(t.gguf_name), t.architecture);
    }
  }
}

TEST(Architecture, UnknownNamesAreNotFound) {
  EXPECT_EQ(ArchitectureFromName("gpt2"), std::nullopt);
  EXPECT_EQ(ArchitectureFromName(""), std::nullopt);
  EXPECT_EQ(ArchitectureFromName("Llama"), std::nullopt);  // case matters
  EXPECT_EQ(ArchitectureFromHfClass("GPT2LMHeadModel"), std::nullopt);
  EXPECT_EQ(ArchitectureFromHfClass("llama"), std::nullopt);
  EXPECT_EQ(ArchitectureFromGgufName(""), std::nullopt);
  EXPECT_EQ(ArchitectureFromGgufName("mistral"), std::nullopt);  // GGUF says llama
  EXPECT_EQ(ArchitectureFromGgufName("folio"), std::nullopt);
}

TEST(Architecture, FamiliesFixWhatTheyFix) {
  EXPECT_EQ(TraitsOf(Architecture::kQwen2).attention_bias, Fixed::kAlways);
  EXPECT_EQ(TraitsOf(Architecture::kQwen3).qk_norm, Fixed::kAlways);
  EXPECT_EQ(TraitsOf(Architecture::kLlama).gguf_rope_style, RopeStyle::kInterleaved);
  EXPECT_EQ(TraitsOf(Architecture::kQwen2).gguf_rope_style, RopeStyle::kNeox);
  EXPECT_FALSE(TraitsOf(Architecture::kFolio).hf_native);
  EXPECT_EQ(TraitsOf(Architecture::kGptOss).routing, Routing::kTopKSoftmax);
  EXPECT_EQ(TraitsOf(Architecture::kDots1).routing, Routing::kSigmoidTopK);
  EXPECT_TRUE(TraitsOf(Architecture::kDots1).deepseek_moe);
  EXPECT_EQ(TraitsOf(Architecture::kDots1).qk_norm, Fixed::kAlways);
}

}  // namespace
}  // namespace folio::model
