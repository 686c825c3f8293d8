// The refusal matrix: one test per way a tokenizer.json or a TokenizerSpec
// is rejected, each checking the status code and that the message names
// the culprit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "folio/tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json_fixture.h"
#include "tokenizer/unicode.h"

namespace folio::tokenizer {
namespace {

using Json = nlohmann::json;
using Ids = std::vector<int32_t>;

std::string ByteChar(int b) {
  std::string s;
  unicode::AppendUtf8(unicode::ByteToChar()[static_cast<size_t>(b)], &s);
  return s;
}

// A minimal valid byte-level BPE tokenizer.json: the 256 byte tokens, "ab",
// "abc", one special token.
Json BaseJson() {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteChar(b)] = b;
  vocab["ab"] = 256;
  vocab["abc"] = 257;
  const Json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", true},
                           {"use_regex", true}};
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", Json::array({{{"id", 258},
                                     {"content", "<eos>"},
                                     {"single_word", false},
                                     {"lstrip", false},
                                     {"rstrip", false},
                                     {"normalized", false},
                                     {"special", true}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level},
      {"post_processor", nullptr},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", Json::array({Json::array({"a", "b"}), Json::array({"ab", "c"})})}}},
  };
}

class TokenizerJson : public TokenizerJsonFixture {
 protected:
  Json Base() const override { return BaseJson(); }
};

TEST_F(TokenizerJson, BaseLoadsAndEncodes) {
  auto tok = Load(BaseJson());
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  EXPECT_EQ(tok->vocab_size(), 259u);
  EXPECT_EQ(*tok->Encode("abc<eos>", false), (Ids{257, 258}));
  EXPECT_EQ(*tok->Encode("abc<eos>", false, false), (Ids{257, '<', 'e', 'o', 's', '>'}));
}

// The most input bytes a token stands for: the longest token text (here
// the added "<eos>", 5 bytes), unset where one token can swallow a run of
// any length.
TEST_F(TokenizerJson, MaxBytesPerTokenIsTheLongestTokenOrUnbounded) {
  auto tok = Load(BaseJson());
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  EXPECT_EQ(tok->max_bytes_per_token(), std::optional<uint64_t>(5));
  Json lstrip = BaseJson();
  lstrip["added_tokens"][0]["lstrip"] = true;  // "<eos>" takes the spaces on its left
  tok = Load(lstrip);
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  EXPECT_EQ(tok->max_bytes_per_token(), std::nullopt);
  EXPECT_EQ(tok->Encode(std::string(1000, ' ') + "<eos>", false)->size(), 1u);
  Json nfc = BaseJson();
  nfc["normalizer"] = {{"type", "NFC"}};
  tok = Load(nfc);
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  EXPECT_EQ(tok->max_bytes_per_token(), std::optional<uint64_t>(15));  // NFC shrinks to a third
}

TEST_F(TokenizerJson, LegacyStringMergesLoad) {
  Json j = BaseJson();
  j["model"]["merges"] = {"a b", "ab c"};
  auto tok = Load(j);
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  EXPECT_EQ(*tok->Encode("abc", false), (Ids{257}));
}

TEST_F(TokenizerJson, SiblingConfigNamesBosAndEos) {
  Json j = BaseJson();
  j["added_tokens"].push_back({{"id", 259},
                               {"content", "<bos>"},
                               {"single_word", false},
                               {"lstrip", false},
                               {"rstrip", false},
                               {"normalized", false},
                               {"special", true}});
  Write(R"({"bos_token": {"content": "<bos>"}, "eos_token": "<eos>"})", "tokenizer_config.json");
  auto tok = Load(j);
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  EXPECT_EQ(tok->bos_id(), 259);
  EXPECT_EQ(tok->eos_id(), 258);
}

TEST_F(TokenizerJson, SiblingConfigWithUnknownTokenIsCorruption) {
  Write(R"({"eos_token": "<nope>"})", "tokenizer_config.json");
  auto tok = Load(BaseJson());
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.error().code(), StatusCode::kCorruption);
  EXPECT_NE(tok.error().message().find("'<nope>' is not a token"), std::string::npos);
}

TEST_F(TokenizerJson, MissingFileIsIoError) {
  auto r = Tokenizer::FromTokenizerJson(dir_ / "absent.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kIoError);
  EXPECT_NE(r.error().message().find("absent.json"), std::string::npos);
}

TEST_F(TokenizerJson, MalformedJsonIsCorruption) {
  auto r = Tokenizer::FromTokenizerJson(Write("{\"version\": \"1.0\", "));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
  EXPECT_NE(r.error().message().find("malformed JSON"), std::string::npos);
}

// Found by fuzz_tokenizer_json: nlohmann throws out_of_range, not
// parse_error, for a number past double's range.
TEST_F(TokenizerJson, NumberOverflowIsCorruption) {
  auto r = Tokenizer::FromTokenizerJson(Write("{\"version\": 7777777777777777777E888}"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
  EXPECT_NE(r.error().message().find("malformed JSON"), std::string::npos);
}

TEST_F(TokenizerJson, RepeatedKeyIsCorruption) {
  std::string text = BaseJson().dump();
  text.replace(text.find("\"ab\":256"), 8, "\"ab\":256,\"ab\":3");
  auto r = Tokenizer::FromTokenizerJson(Write(text));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
  EXPECT_NE(r.error().message().find("repeats the key 'ab'"), std::string::npos)
      << r.error().message();
}

TEST_F(TokenizerJson, MissingModelIsCorruption) {
  ExpectRefused([](Json& j) { j.erase("model"); }, StatusCode::kCorruption,
                "missing field 'model'");
}

TEST_F(TokenizerJson, WrongFieldTypeIsCorruption) {
  ExpectRefused([](Json& j) { j["model"]["ignore_merges"] = "yes"; }, StatusCode::kCorruption,
                "model.ignore_merges: expected true or false");
}

TEST_F(TokenizerJson, NegativeVocabIdIsOutOfRange) {
  ExpectRefused([](Json& j) { j["model"]["vocab"]["ab"] = -1; }, StatusCode::kOutOfRange,
                "id -1 is outside");
}

TEST_F(TokenizerJson, HugeVocabIdIsOutOfRange) {
  ExpectRefused([](Json& j) { j["model"]["vocab"]["ab"] = 1LL << 40; }, StatusCode::kOutOfRange,
                "model.vocab['ab']");
}

TEST_F(TokenizerJson, DuplicatedVocabIdIsCorruption) {
  ExpectRefused([](Json& j) { j["model"]["vocab"]["abc"] = 256; }, StatusCode::kCorruption,
                "id 256 is also given to");
}

TEST_F(TokenizerJson, MergeNamingUnknownTokenIsCorruption) {
  ExpectRefused(
      [](Json& j) {
        j["model"]["merges"].push_back({"zz", "c"});
      },
      StatusCode::kCorruption, "model.merges[2]: names 'zz'");
}

TEST_F(TokenizerJson, MergeIntoUnknownTokenIsCorruption) {
  ExpectRefused(
      [](Json& j) {
        j["model"]["merges"].push_back({"b", "c"});
      },
      StatusCode::kCorruption, "merges into 'bc'");
}

TEST_F(TokenizerJson, MalformedLegacyMergeIsCorruption) {
  ExpectRefused([](Json& j) { j["model"]["merges"] = {"a b c"}; }, StatusCode::kCorruption,
                "not two tokens separated by one space");
}

TEST_F(TokenizerJson, RepeatedMergeIsCorruption) {
  ExpectRefused(
      [](Json& j) {
        j["model"]["merges"].push_back({"a", "b"});
      },
      StatusCode::kCorruption, "repeats merge 0");
}

TEST_F(TokenizerJson, AddedTokenWithForeignIdIsCorruption) {
  ExpectRefused([](Json& j) { j["added_tokens"][0]["id"] = 256; }, StatusCode::kCorruption,
                "belongs to 'ab'");
}

TEST_F(TokenizerJson, AddedTokenDisagreeingWithVocabIsCorruption) {
  ExpectRefused([](Json& j) { j["added_tokens"][0]["content"] = "ab"; }, StatusCode::kCorruption,
                "vocabulary gives it 256");
}

TEST_F(TokenizerJson, RepeatedAddedTokenIsCorruption) {
  ExpectRefused(
      [](Json& j) {
        Json again = j["added_tokens"][0];
        again["id"] = 300;
        j["added_tokens"].push_back(again);
      },
      StatusCode::kCorruption, "'<eos>' repeats");
}

TEST_F(TokenizerJson, AddedTokenMissingFlagIsCorruption) {
  ExpectRefused([](Json& j) { j["added_tokens"][0].erase("lstrip"); }, StatusCode::kCorruption,
                "added_tokens[0]: missing field 'lstrip'");
}

TEST_F(TokenizerJson, UnknownFieldIsUnimplemented) {
  ExpectRefused([](Json& j) { j["model"]["shiny"] = true; }, StatusCode::kUnimplemented,
                "model.shiny");
}

TEST_F(TokenizerJson, OtherVersionIsUnimplemented) {
  ExpectRefused([](Json& j) { j["version"] = "2.0"; }, StatusCode::kUnimplemented, "version '2.0'");
}

TEST_F(TokenizerJson, TruncationAndPaddingAreIgnored) {
  Json j = BaseJson();
  j["truncation"] = {{"max_length", 1}, {"strategy", "LongestFirst"}};
  j["padding"] = {{"strategy", {{"Fixed", 8}}}, {"pad_id", 258}};
  auto tok = Load(j);
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  EXPECT_EQ(*tok->Encode("abab", false), (Ids{256, 256}));
}

TEST_F(TokenizerJson, TruncationOfWrongTypeIsCorruption) {
  ExpectRefused([](Json& j) { j["truncation"] = 128; }, StatusCode::kCorruption, "truncation");
}

TEST_F(TokenizerJson, OtherModelIsUnimplemented) {
  ExpectRefused([](Json& j) { j["model"]["type"] = "Unigram"; }, StatusCode::kUnimplemented,
                "model type 'Unigram'");
}

TEST_F(TokenizerJson, ByteFallbackIsUnimplemented) {
  ExpectRefused([](Json& j) { j["model"]["byte_fallback"] = true; }, StatusCode::kUnimplemented,
                "byte_fallback");
}

TEST_F(TokenizerJson, DropoutIsUnimplemented) {
  ExpectRefused([](Json& j) { j["model"]["dropout"] = 0.1; }, StatusCode::kUnimplemented,
                "dropout");
}

TEST_F(TokenizerJson, SubwordPrefixIsUnimplemented) {
  ExpectRefused([](Json& j) { j["model"]["continuing_subword_prefix"] = "##"; },
                StatusCode::kUnimplemented, "continuing_subword_prefix");
}

TEST_F(TokenizerJson, UnknownUnkTokenIsCorruption) {
  ExpectRefused([](Json& j) { j["model"]["unk_token"] = "<unk>"; }, StatusCode::kCorruption,
                "model.unk_token: '<unk>' is not in the vocabulary");
}

TEST_F(TokenizerJson, OtherNormalizerIsUnimplemented) {
  ExpectRefused(
      [](Json& j) {
        j["normalizer"] = {{"type", "NFKC"}};
      },
      StatusCode::kUnimplemented, "normalizer type 'NFKC'");
}

TEST_F(TokenizerJson, NormalizerInSequenceIsNamed) {
  ExpectRefused(
      [](Json& j) {
        j["normalizer"] = {{"type", "Sequence"},
                           {"normalizers", {{{"type", "NFC"}}, {{"type", "NFKC"}}}}};
      },
      StatusCode::kUnimplemented, "normalizer.normalizers[1]");
}

TEST_F(TokenizerJson, OtherPreTokenizerIsUnimplemented) {
  ExpectRefused(
      [](Json& j) {
        j["pre_tokenizer"] = {{"type", "Sequence"},
                              {"pretokenizers", {{{"type", "Metaspace"}}, j["pre_tokenizer"]}}};
      },
      StatusCode::kUnimplemented, "pre-tokenizer type 'Metaspace'");
}

TEST_F(TokenizerJson, MissingByteLevelIsUnimplemented) {
  ExpectRefused([](Json& j) { j["pre_tokenizer"] = nullptr; }, StatusCode::kUnimplemented,
                "without a ByteLevel pre-tokenizer");
}

TEST_F(TokenizerJson, ByteLevelBeforeSplitIsUnimplemented) {
  ExpectRefused(
      [](Json& j) {
        j["pre_tokenizer"] = {
            {"type", "Sequence"},
            {"pretokenizers",
             {j["pre_tokenizer"], {{"type", "Digits"}, {"individual_digits", true}}}}};
      },
      StatusCode::kUnimplemented, "ByteLevel must come last");
}

Json SplitStep(const std::string& regex, const std::string& behavior = "Isolated",
               bool invert = false) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", regex}}},
          {"behavior", behavior},
          {"invert", invert}};
}

void UseSplit(Json& j, const Json& split) {
  Json byte_level = j["pre_tokenizer"];
  byte_level["use_regex"] = false;
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}};
}

TEST_F(TokenizerJson, SplitBehaviorOtherThanIsolatedIsUnimplemented) {
  ExpectRefused([](Json& j) { UseSplit(j, SplitStep("\\s+", "Removed")); },
                StatusCode::kUnimplemented, "Split behavior 'Removed'");
}

TEST_F(TokenizerJson, InvertedSplitIsUnimplemented) {
  ExpectRefused([](Json& j) { UseSplit(j, SplitStep("\\s+", "Isolated", true)); },
                StatusCode::kUnimplemented, "invert");
}

TEST_F(TokenizerJson, InvalidRegexIsCorruption) {
  ExpectRefused([](Json& j) { UseSplit(j, SplitStep("(ab")); }, StatusCode::kCorruption,
                "pre_tokenizer.pretokenizers[0].pattern.Regex");
}

TEST_F(TokenizerJson, UnsupportedRegexConstructIsUnimplemented) {
  ExpectRefused([](Json& j) { UseSplit(j, SplitStep("\\w+")); }, StatusCode::kUnimplemented,
                "escape \\w");
}

TEST_F(TokenizerJson, NullDecoderIsUnimplemented) {
  ExpectRefused([](Json& j) { j["decoder"] = nullptr; }, StatusCode::kUnimplemented,
                "null decoder");
}

TEST_F(TokenizerJson, OtherDecoderIsUnimplemented) {
  ExpectRefused(
      [](Json& j) {
        j["decoder"] = {{"type", "WordPiece"}};
      },
      StatusCode::kUnimplemented, "decoder type 'WordPiece'");
}

TEST_F(TokenizerJson, OtherPostProcessorIsUnimplemented) {
  ExpectRefused(
      [](Json& j) {
        j["post_processor"] = {{"type", "RobertaProcessing"}};
      },
      StatusCode::kUnimplemented, "post-processor type 'RobertaProcessing'");
}

Json Template(const Json& single) {
  return {
      {"type", "TemplateProcessing"},
      {"single", single},
      {"pair", Json::array()},
      {"special_tokens", {{"<eos>", {{"id", "<eos>"}, {"ids", {258}}, {"tokens", {"<eos>"}}}}}}};
}

TEST_F(TokenizerJson, TemplateFramesTheSequence) {
  Json j = BaseJson();
  j["post_processor"] = Template({{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                  {{"SpecialToken", {{"id", "<eos>"}, {"type_id", 0}}}}});
  auto tok = Load(j);
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  EXPECT_EQ(*tok->Encode("ab", true), (Ids{256, 258}));
  EXPECT_EQ(tok->eos_id(), 258);
}

TEST_F(TokenizerJson, TemplateWithUnknownSpecialIsCorruption) {
  ExpectRefused(
      [](Json& j) {
        j["post_processor"] = Template({{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                                        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}});
      },
      StatusCode::kCorruption, "'<bos>' is not in post_processor.special_tokens");
}

TEST_F(TokenizerJson, TemplateWithSecondSequenceIsUnimplemented) {
  ExpectRefused(
      [](Json& j) {
        j["post_processor"] = Template({{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                        {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}});
      },
      StatusCode::kUnimplemented, "post_processor.single[1]");
}

// Seeded byte mutations of a valid file: every one loads or is refused with
// a status, none crashes (run under ASan in the asan build).
TEST_F(TokenizerJson, RandomMutationsNeverCrash) {
  Json j = BaseJson();
  j["normalizer"] = {{"type", "NFC"}};
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"},
                           {"pattern", {{"Regex", "\\p{L}+|\\p{N}{1,3}|\\s+(?!\\S)|\\s+"}}},
                           {"behavior", "Isolated"},
                           {"invert", false}},
                          {{"type", "ByteLevel"},
                           {"add_prefix_space", true},
                           {"trim_offsets", true},
                           {"use_regex", false}}}}};
  const std::string base = j.dump();
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {  // SplitMix64
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  int loaded = 0;
  for (int round = 0; round < 300; ++round) {
    std::string text = base;
    const int edits = 1 + static_cast<int>(next() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = next() % text.size();
      switch (next() % 3) {
        case 0:
          text[at] = static_cast<char>(next() & 0xFF);
          break;
        case 1:
          text.erase(at, 1 + next() % 8);
          break;
        default:
          text.insert(at, 1, "{}[]\",:0-9e\\"[next() % 12]);
      }
    }
    auto tok = Tokenizer::FromTokenizerJson(Write(text));
    if (!tok.ok()) continue;
    ++loaded;
    for (std::string_view input : {"abc 12345 <eos>", "\xC3\xA9 x\xF0\x9F"}) {
      auto ids = tok->Encode(input, true);
      if (ids.ok()) {
        EXPECT_TRUE(tok->Decode(*ids, false).ok());
      }
    }
  }
  EXPECT_GT(loaded, 0);  // some mutations are harmless (inside strings)
}

// --- TokenizerSpec ----------------------------------------------------------

TokenizerSpec ByteSpec() {
  TokenizerSpec spec;
  spec.pre_tokenizer = "gpt-2";
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(ByteChar(b));
  spec.tokens.push_back("ab");
  spec.merges = {"a b"};
  return spec;
}

void ExpectSpecRefused(const std::function<void(TokenizerSpec&)>& mutate, StatusCode code,
                       const std::string& needle) {
  tokenizer::ExpectSpecRefused(ByteSpec(), mutate, code, needle);
}

TEST(TokenizerSpecErrors, BaseLoads) {
  auto tok = Tokenizer::FromSpec(ByteSpec());
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  EXPECT_EQ(*tok->Encode("aab", false), (Ids{'a', 256}));
}

TEST(TokenizerSpecErrors, EmptyVocabulary) {
  ExpectSpecRefused(
      [](TokenizerSpec& s) {
        s.tokens.clear();
        s.merges.clear();
      },
      StatusCode::kInvalidArgument, "tokens is empty");
}

TEST(TokenizerSpecErrors, UnknownPreTokenizer) {
  ExpectSpecRefused([](TokenizerSpec& s) { s.pre_tokenizer = "falcon-v9"; },
                    StatusCode::kUnimplemented, "pre_tokenizer 'falcon-v9'");
}

TEST(TokenizerSpecErrors, TokenTypesOfWrongLength) {
  ExpectSpecRefused(
      [](TokenizerSpec& s) {
        s.token_types = {1, 1};
      },
      StatusCode::kInvalidArgument, "token_types has 2 entries for 257 tokens");
}

TEST(TokenizerSpecErrors, UnknownTokenType) {
  ExpectSpecRefused([](TokenizerSpec& s) { s.token_types.assign(s.tokens.size(), 7); },
                    StatusCode::kInvalidArgument, "token 0 has type 7");
}

TEST(TokenizerSpecErrors, RepeatedToken) {
  ExpectSpecRefused([](TokenizerSpec& s) { s.tokens.push_back("ab"); },
                    StatusCode::kInvalidArgument, "token 257 'ab' repeats token 256");
}

TEST(TokenizerSpecErrors, MergeOfUnknownToken) {
  ExpectSpecRefused([](TokenizerSpec& s) { s.merges.push_back("ab c"); },
                    StatusCode::kInvalidArgument, "merge 1 'ab c' names a token");
}

TEST(TokenizerSpecErrors, MalformedMerge) {
  ExpectSpecRefused([](TokenizerSpec& s) { s.merges.push_back("abc"); },
                    StatusCode::kInvalidArgument, "merge 1 'abc' is not two tokens");
}

TEST(TokenizerSpecErrors, RepeatedMerge) {
  ExpectSpecRefused([](TokenizerSpec& s) { s.merges.push_back("a b"); },
                    StatusCode::kInvalidArgument, "repeats an earlier merge");
}

TEST(TokenizerSpecErrors, SpecialIdOutOfRange) {
  ExpectSpecRefused([](TokenizerSpec& s) { s.eos_id = 257; }, StatusCode::kInvalidArgument,
                    "eos_id 257 is outside the vocabulary of 257");
}

TEST(TokenizerSpecErrors, AddBosWithoutBos) {
  ExpectSpecRefused([](TokenizerSpec& s) { s.add_bos = true; }, StatusCode::kInvalidArgument,
                    "add_bos without bos_id");
}

TEST(TokenizerSpecErrors, SentencePieceWithoutScores) {
  ExpectSpecRefused(
      [](TokenizerSpec& s) {
        s.model = TokenizerSpec::Model::kSentencePiece;
        s.merges.clear();
      },
      StatusCode::kInvalidArgument, "scores has 0 entries for 257 tokens");
}

TEST(TokenizerSpecErrors, SentencePieceByteTokenOfWrongForm) {
  ExpectSpecRefused(
      [](TokenizerSpec& s) {
        s.model = TokenizerSpec::Model::kSentencePiece;
        s.merges.clear();
        s.scores.assign(s.tokens.size(), 0.0f);
        s.token_types.assign(s.tokens.size(), 1);
        s.token_types[65] = 6;
      },
      StatusCode::kInvalidArgument, "byte token 65 'A' is not of the form <0xNN>");
}

TEST(TokenizerSpecErrors, ByteWithoutTokenFailsEncode) {
  TokenizerSpec spec = ByteSpec();
  spec.tokens[0xFF] = "<not a byte>";
  auto tok = Tokenizer::FromSpec(spec);
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  auto r = tok->Encode("\xC3\xBF", false);  // ÿ = C3 BF, fine
  ASSERT_TRUE(r.ok());
  // A byte sequence needing 0xFF cannot occur in UTF-8; drop another byte.
  spec = ByteSpec();
  spec.tokens['z'] = "<no z>";
  tok = Tokenizer::FromSpec(spec);
  ASSERT_TRUE(tok.ok());
  r = tok->Encode("z", false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kNotFound);
  EXPECT_NE(r.error().message().find("byte 0x7A"), std::string::npos) << r.error().message();
}

}  // namespace
}  // namespace folio::tokenizer
