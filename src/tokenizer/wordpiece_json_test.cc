// The refusal matrix of the WordPiece parts of tokenizer.json and of a
// WordPiece TokenizerSpec: one test per way they are rejected, each
// checking the status code and that the message names the culprit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "folio/tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json_fixture.h"

namespace folio::tokenizer {
namespace {

using Json = nlohmann::json;

// A small valid BERT-style tokenizer.json.
Json BaseJson() {
  const std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "##s"};
  Json vocab = Json::object();
  Json added = Json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    vocab[tokens[i]] = i;
    if (i < 4) {
      added.push_back({{"id", i},
                       {"content", tokens[i]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", true}});
    }
  }
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer",
       {{"type", "BertNormalizer"},
        {"clean_text", true},
        {"handle_chinese_chars", true},
        {"strip_accents", nullptr},
        {"lowercase", true}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor",
       {{"type", "BertProcessing"}, {"sep", {"[SEP]", 3}}, {"cls", {"[CLS]", 2}}}},
      {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
      {"model",
       {{"type", "WordPiece"},
        {"unk_token", "[UNK]"},
        {"continuing_subword_prefix", "##"},
        {"max_input_chars_per_word", 100},
        {"vocab", vocab}}},
  };
}

class WordPieceJson : public TokenizerJsonFixture {
 protected:
  Json Base() const override { return BaseJson(); }
};

TEST_F(WordPieceJson, BaseLoadsAndEncodes) {
  auto tok = Load(BaseJson());
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  EXPECT_EQ(*tok->Encode("Hellos", true), (std::vector<int32_t>{2, 4, 5, 3}));
}

TEST_F(WordPieceJson, MissingVocabIsCorruption) {
  ExpectRefused([](Json& j) { j["model"].erase("vocab"); }, StatusCode::kCorruption,
                "model: missing field 'vocab'");
}

TEST_F(WordPieceJson, VocabOfWrongTypeIsCorruption) {
  ExpectRefused([](Json& j) { j["model"]["vocab"] = Json::array(); }, StatusCode::kCorruption,
                "model.vocab: expected an object");
}

TEST_F(WordPieceJson, UnkNotInVocabIsCorruption) {
  ExpectRefused([](Json& j) { j["model"]["unk_token"] = "<unk>"; }, StatusCode::kCorruption,
                "model.unk_token: '<unk>' is not in the vocabulary");
}

TEST_F(WordPieceJson, MissingUnkIsCorruption) {
  ExpectRefused([](Json& j) { j["model"].erase("unk_token"); }, StatusCode::kCorruption,
                "missing field 'unk_token'");
}

TEST_F(WordPieceJson, NullUnkIsCorruption) {
  ExpectRefused([](Json& j) { j["model"]["unk_token"] = nullptr; }, StatusCode::kCorruption,
                "model.unk_token: expected a string");
}

TEST_F(WordPieceJson, MissingPrefixIsCorruption) {
  ExpectRefused([](Json& j) { j["model"].erase("continuing_subword_prefix"); },
                StatusCode::kCorruption, "missing field 'continuing_subword_prefix'");
}

TEST_F(WordPieceJson, NegativeMaxInputCharsIsCorruption) {
  ExpectRefused([](Json& j) { j["model"]["max_input_chars_per_word"] = -1; },
                StatusCode::kCorruption, "model.max_input_chars_per_word");
}

TEST_F(WordPieceJson, MaxInputCharsAsStringIsCorruption) {
  ExpectRefused([](Json& j) { j["model"]["max_input_chars_per_word"] = "100"; },
                StatusCode::kCorruption, "model.max_input_chars_per_word");
}

TEST_F(WordPieceJson, UnknownModelFieldIsUnimplemented) {
  ExpectRefused([](Json& j) { j["model"]["dropout"] = nullptr; }, StatusCode::kUnimplemented,
                "model.dropout");
}

TEST_F(WordPieceJson, BertNormalizerWithoutLowercaseIsCorruption) {
  ExpectRefused([](Json& j) { j["normalizer"].erase("lowercase"); }, StatusCode::kCorruption,
                "normalizer: missing field 'lowercase'");
}

TEST_F(WordPieceJson, StripAccentsOfWrongTypeIsCorruption) {
  ExpectRefused([](Json& j) { j["normalizer"]["strip_accents"] = "yes"; }, StatusCode::kCorruption,
                "normalizer.strip_accents");
}

TEST_F(WordPieceJson, UnknownBertNormalizerFieldIsUnimplemented) {
  ExpectRefused([](Json& j) { j["normalizer"]["nfkc"] = true; }, StatusCode::kUnimplemented,
                "normalizer.nfkc");
}

TEST_F(WordPieceJson, WhitespaceWithAnOptionIsUnimplemented) {
  ExpectRefused(
      [](Json& j) {
        j["pre_tokenizer"] = {{"type", "Whitespace"}, {"split", true}};
      },
      StatusCode::kUnimplemented, "pre_tokenizer.split");
}

TEST_F(WordPieceJson, ByteLevelPreTokenizerIsUnimplemented) {
  ExpectRefused(
      [](Json& j) {
        j["pre_tokenizer"] = {{"type", "ByteLevel"},
                              {"add_prefix_space", false},
                              {"trim_offsets", true},
                              {"use_regex", true}};
      },
      StatusCode::kUnimplemented, "ByteLevel pre-tokenizer with a WordPiece model");
}

TEST_F(WordPieceJson, ByteLevelDecoderIsUnimplemented) {
  ExpectRefused(
      [](Json& j) {
        j["decoder"] = {{"type", "ByteLevel"}};
      },
      StatusCode::kUnimplemented, "decoder type 'ByteLevel' for a WordPiece model");
}

TEST_F(WordPieceJson, DecoderWithoutCleanupIsCorruption) {
  ExpectRefused([](Json& j) { j["decoder"].erase("cleanup"); }, StatusCode::kCorruption,
                "decoder: missing field 'cleanup'");
}

TEST_F(WordPieceJson, DecoderPrefixOfWrongTypeIsCorruption) {
  ExpectRefused([](Json& j) { j["decoder"]["prefix"] = 2; }, StatusCode::kCorruption,
                "decoder.prefix");
}

TEST_F(WordPieceJson, BertProcessingOfWrongShapeIsCorruption) {
  ExpectRefused([](Json& j) { j["post_processor"]["cls"] = "[CLS]"; }, StatusCode::kCorruption,
                "post_processor.cls");
}

TEST_F(WordPieceJson, BertProcessingWithUnknownIdIsCorruption) {
  ExpectRefused(
      [](Json& j) {
        j["post_processor"]["sep"] = {"[SEP]", 99};
      },
      StatusCode::kCorruption, "special token id 99 has no token");
}

TEST_F(WordPieceJson, PairTemplateWithoutBIsUnimplemented) {
  ExpectRefused(
      [](Json& j) {
        j["post_processor"] = {{"type", "TemplateProcessing"},
                               {"single", {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                               {"pair",
                                {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                 {{"Sequence", {{"id", "A"}, {"type_id", 1}}}}}},
                               {"special_tokens", Json::object()}};
      },
      StatusCode::kUnimplemented, "post_processor.pair[1]");
}

TEST_F(WordPieceJson, PairTemplateTypeIdOfWrongTypeIsCorruption) {
  ExpectRefused(
      [](Json& j) {
        j["post_processor"] = {{"type", "TemplateProcessing"},
                               {"single", {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                               {"pair",
                                {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                 {{"Sequence", {{"id", "B"}, {"type_id", "1"}}}}}},
                               {"special_tokens", Json::object()}};
      },
      StatusCode::kCorruption, "post_processor.pair[1].Sequence.type_id");
}

TEST_F(WordPieceJson, SecondPostProcessorIsUnimplemented) {
  ExpectRefused(
      [](Json& j) {
        j["post_processor"] = {{"type", "Sequence"},
                               {"processors", {j["post_processor"], j["post_processor"]}}};
      },
      StatusCode::kUnimplemented, "a second BertProcessing");
}

// --- TokenizerSpec with Model::kWordPiece -----------------------------------

TokenizerSpec WpmSpec() {
  TokenizerSpec spec;
  spec.model = TokenizerSpec::Model::kWordPiece;
  spec.tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xE2\x96\x81hello", "s"};
  spec.token_types = {3, 2, 3, 3, 1, 1};
  spec.bos_id = 2;
  spec.sep_id = 3;
  spec.unk_id = 1;
  return spec;
}

void ExpectSpecRefused(const std::function<void(TokenizerSpec&)>& mutate, StatusCode code,
                       const std::string& needle) {
  tokenizer::ExpectSpecRefused(WpmSpec(), mutate, code, needle);
}

TEST(WordPieceSpecErrors, BaseLoads) {
  auto tok = Tokenizer::FromSpec(WpmSpec());
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  EXPECT_EQ(*tok->Encode("hellos", true), (std::vector<int32_t>{2, 4, 5, 3}));
}

TEST(WordPieceSpecErrors, WithoutUnk) {
  ExpectSpecRefused([](TokenizerSpec& s) { s.unk_id.reset(); }, StatusCode::kInvalidArgument,
                    "a WordPiece model needs unk_id");
}

TEST(WordPieceSpecErrors, WithoutSep) {
  ExpectSpecRefused([](TokenizerSpec& s) { s.sep_id.reset(); }, StatusCode::kInvalidArgument,
                    "a WordPiece model needs sep_id");
}

TEST(WordPieceSpecErrors, SepOutOfRange) {
  ExpectSpecRefused([](TokenizerSpec& s) { s.sep_id = 6; }, StatusCode::kInvalidArgument,
                    "sep_id 6 is outside the vocabulary of 6");
}

TEST(WordPieceSpecErrors, WithMerges) {
  ExpectSpecRefused([](TokenizerSpec& s) { s.merges = {"s s"}; }, StatusCode::kInvalidArgument,
                    "merges given for a WordPiece model");
}

TEST(WordPieceSpecErrors, WithPreTokenizer) {
  ExpectSpecRefused([](TokenizerSpec& s) { s.pre_tokenizer = "bert-bge"; },
                    StatusCode::kUnimplemented, "'bert-bge' given for a WordPiece model");
}

TEST(WordPieceSpecErrors, ByteToken) {
  ExpectSpecRefused([](TokenizerSpec& s) { s.token_types[5] = 6; }, StatusCode::kInvalidArgument,
                    "token 5 's' is a byte token");
}

TEST(WordPieceSpecErrors, AddSepWithoutSep) {
  TokenizerSpec spec = WpmSpec();
  spec.model = TokenizerSpec::Model::kBpe;
  spec.tokens = {"a", "b"};
  spec.token_types.clear();
  spec.bos_id.reset();
  spec.unk_id.reset();
  spec.sep_id.reset();
  spec.pre_tokenizer = "gpt-2";
  spec.add_sep = true;
  auto r = Tokenizer::FromSpec(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find("add_sep without sep_id"), std::string::npos);
}

}  // namespace
}  // namespace folio::tokenizer
