// WordPiece, from a tokenizer.json (as Hugging Face `tokenizers`; the
// expected ids are that library's output for the same file) and from a
// GGUF-style spec (as llama.cpp's WPM).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "folio/tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/tokenizer_json_fixture.h"

namespace folio::tokenizer {
namespace {

using Json = nlohmann::json;
using Ids = std::vector<int32_t>;

// 0-4 [PAD] [UNK] [CLS] [SEP] [MASK], then words, pieces and punctuation.
const std::vector<std::string>& Vocab() {
  static const auto* vocab = new std::vector<std::string>{
      "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "un", "##aff", "##able",
      ",",     ".",     "!",     "'",     "s",      "a",     "##a",   "你", "héllo", "Hello",
      "do",    "##n",   "t",     "n",     "?",      "caf",   "##e",   "##,"};
  return *vocab;
}

// BERT's uncased pipeline: BertNormalizer, BertPreTokenizer, WordPiece,
// [CLS] $A [SEP] (pair [CLS] $A [SEP] $B:1 [SEP]:1), WordPiece decoder.
Json BertJson() {
  Json vocab = Json::object();
  for (size_t i = 0; i < Vocab().size(); ++i) vocab[Vocab()[i]] = i;
  Json added = Json::array();
  for (int id = 0; id < 5; ++id) {
    added.push_back({{"id", id},
                     {"content", Vocab()[static_cast<size_t>(id)]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  const auto special = [](const char* name, int type_id) {
    return Json{{"SpecialToken", {{"id", name}, {"type_id", type_id}}}};
  };
  const auto sequence = [](const char* name, int type_id) {
    return Json{{"Sequence", {{"id", name}, {"type_id", type_id}}}};
  };
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
       {{"type", "TemplateProcessing"},
        {"single", {special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0)}},
        {"pair",
         {special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0), sequence("B", 1),
          special("[SEP]", 1)}},
        {"special_tokens",
         {{"[CLS]", {{"id", "[CLS]"}, {"ids", {2}}, {"tokens", {"[CLS]"}}}},
          {"[SEP]", {{"id", "[SEP]"}, {"ids", {3}}, {"tokens", {"[SEP]"}}}}}}}},
      {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
      {"model",
       {{"type", "WordPiece"},
        {"unk_token", "[UNK]"},
        {"continuing_subword_prefix", "##"},
        {"max_input_chars_per_word", 100},
        {"vocab", vocab}}},
  };
}

class WordPiece : public TokenizerJsonFixture {
 protected:
  Json Base() const override { return BertJson(); }
  Tokenizer Load(const Json& j) {
    auto tok = TokenizerJsonFixture::Load(j);
    EXPECT_TRUE(tok.ok()) << tok.error().ToString();
    return *std::move(tok);
  }
  Ids Encode(const Json& j, std::string_view text) { return *Load(j).Encode(text, false); }
};

TEST_F(WordPiece, GreedyLongestMatchFirst) {
  EXPECT_EQ(Encode(BertJson(), "unaffable"), (Ids{7, 8, 9}));
}

TEST_F(WordPiece, WordWithAnUnmatchedPieceIsOneUnk) {
  EXPECT_EQ(Encode(BertJson(), "hello unaffablez"), (Ids{5, 1}));
}

TEST_F(WordPiece, WordLongerThanMaxInputCharsIsUnk) {
  Json j = BertJson();
  j["model"]["max_input_chars_per_word"] = 5;
  EXPECT_EQ(Encode(j, "hello helloa"), (Ids{5, 1}));
}

TEST_F(WordPiece, PunctuationIsAWordOfItsOwn) {
  EXPECT_EQ(Encode(BertJson(), "Hello, World!"), (Ids{5, 10, 6, 12}));
  EXPECT_EQ(Encode(BertJson(), "don't"), (Ids{20, 21, 13, 22}));
}

TEST_F(WordPiece, WhitespaceSeparatesAndVanishes) {
  EXPECT_EQ(Encode(BertJson(), "  hello\t\nworld  "), (Ids{5, 6}));
}

TEST_F(WordPiece, CleanTextDropsControlsAndReplacementChar) {
  EXPECT_EQ(Encode(BertJson(), "hel\x01lo\xEF\xBF\xBD"), (Ids{5}));
  // U+000B is a control before it is whitespace: the words join.
  EXPECT_EQ(Encode(BertJson(), "hello\vworld"), (Ids{1}));
}

TEST_F(WordPiece, ChineseCharactersAreWordsOfTheirOwn) {
  EXPECT_EQ(Encode(BertJson(), "你你"), (Ids{17, 17}));
}

TEST_F(WordPiece, NullStripAccentsFollowsLowercase) {
  EXPECT_EQ(Encode(BertJson(), "Héllo café,,"), (Ids{5, 25, 26, 10, 10}));
}

TEST_F(WordPiece, StripAccentsFalseKeepsThem) {
  Json j = BertJson();
  j["normalizer"]["strip_accents"] = false;
  EXPECT_EQ(Encode(j, "Héllo"), (Ids{18}));
}

TEST_F(WordPiece, CasedKeepsCase) {
  Json j = BertJson();
  j["normalizer"]["lowercase"] = false;
  EXPECT_EQ(Encode(j, "Hello hello"), (Ids{19, 5}));
}

TEST_F(WordPiece, LowercaseIsRustsFullMapping) {
  // U+0130 lowers to i + U+0307 (two code points), not in the vocabulary.
  EXPECT_EQ(Encode(BertJson(), "\xC4\xB0"), (Ids{1}));
  EXPECT_EQ(Normalize({{NormalizerStep::Kind::kLowercase}}, "\xC4\xB0"), "i\xCC\x87");
}

TEST_F(WordPiece, SequenceOfNfdLowercaseStripAccents) {
  Json j = BertJson();
  j["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers", {{{"type", "NFD"}}, {{"type", "Lowercase"}}, {{"type", "StripAccents"}}}}};
  j["pre_tokenizer"] = {{"type", "WhitespaceSplit"}};
  EXPECT_EQ(Encode(j, "HÉLLO caFÉ"), (Ids{5, 25, 26}));
}

TEST_F(WordPiece, WhitespacePreTokenizerSplitsWordAndSymbolRuns) {
  Json j = BertJson();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_EQ(Encode(j, "hello,,world !!"), (Ids{5, 10, 27, 6, 1}));
}

TEST_F(WordPiece, NoPreTokenizerMakesTheTextOneWord) {
  Json j = BertJson();
  j["pre_tokenizer"] = nullptr;
  EXPECT_EQ(Encode(j, "hello world"), (Ids{1}));
  EXPECT_EQ(Encode(j, "hello"), (Ids{5}));
}

TEST_F(WordPiece, SpecialTokensInTextAreMatched) {
  EXPECT_EQ(Encode(BertJson(), "[CLS] hello [MASK]"), (Ids{2, 5, 4}));
  EXPECT_EQ(*Load(BertJson()).Encode("[MASK]", false, /*allow_special=*/false),
            (Ids{1, 1, 1}));  // [ mask ]: unknown words
}

TEST_F(WordPiece, AddSpecialTokensFramesWithClsAndSep) {
  Tokenizer tok = Load(BertJson());
  EXPECT_EQ(*tok.Encode("hello", true), (Ids{2, 5, 3}));
  EXPECT_EQ(tok.bos_id(), 2);
  EXPECT_EQ(tok.eos_id(), 3);
  EXPECT_FALSE(tok.max_bytes_per_token().has_value());
}

TEST_F(WordPiece, EncodePairFollowsThePairTemplate) {
  auto pair = Load(BertJson()).EncodePair("Hello", "world!");
  ASSERT_TRUE(pair.ok()) << pair.error().ToString();
  EXPECT_EQ(pair->ids, (Ids{2, 5, 3, 6, 12, 3}));
  EXPECT_EQ(pair->type_ids, (Ids{0, 0, 0, 1, 1, 1}));
}

TEST_F(WordPiece, BertProcessingFramesLikeTheTemplate) {
  Json j = BertJson();
  j["post_processor"] = {{"type", "BertProcessing"}, {"sep", {"[SEP]", 3}}, {"cls", {"[CLS]", 2}}};
  Tokenizer tok = Load(j);
  EXPECT_EQ(*tok.Encode("hello", true), (Ids{2, 5, 3}));
  auto pair = tok.EncodePair("Hello", "world!");
  ASSERT_TRUE(pair.ok());
  EXPECT_EQ(pair->ids, (Ids{2, 5, 3, 6, 12, 3}));
  EXPECT_EQ(pair->type_ids, (Ids{0, 0, 0, 1, 1, 1}));
}

TEST_F(WordPiece, NoPostProcessorPairsAThenB) {
  Json j = BertJson();
  j["post_processor"] = nullptr;
  auto pair = Load(j).EncodePair("hello", "world");
  ASSERT_TRUE(pair.ok());
  EXPECT_EQ(pair->ids, (Ids{5, 6}));
  EXPECT_EQ(pair->type_ids, (Ids{0, 1}));
}

TEST_F(WordPiece, EmptyPairTemplateRefusesPairs) {
  Json j = BertJson();
  j["post_processor"]["pair"] = Json::array();
  auto pair = Load(j).EncodePair("hello", "world");
  ASSERT_FALSE(pair.ok());
  EXPECT_EQ(pair.error().code(), StatusCode::kUnimplemented);
}

// all-MiniLM-L6-v2's tokenizer.json, where tools/setup.sh puts it; the
// expected ids and type ids are `tokenizers`' encode(a, b).
TEST(MiniLm, EncodePairMatchesTokenizers) {
  const char* home = std::getenv("HOME");
  const std::filesystem::path path = std::filesystem::path(home != nullptr ? home : "") /
                                     ".cache/folio/all-MiniLM-L6-v2/tokenizer.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent (tools/setup.sh)";
  auto tok = Tokenizer::FromTokenizerJson(path);
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  auto pair = tok->EncodePair("What is the capital of France?", "Paris is the capital of France.");
  ASSERT_TRUE(pair.ok());
  EXPECT_EQ(pair->ids, (Ids{101, 2054, 2003, 1996, 3007, 1997, 2605, 1029, 102, 3000, 2003, 1996,
                            3007, 1997, 2605, 1012, 102}));
  EXPECT_EQ(pair->type_ids, (Ids{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}));
  pair = tok->EncodePair("Héllo [MASK]", "");
  ASSERT_TRUE(pair.ok());
  EXPECT_EQ(pair->ids, (Ids{101, 7592, 103, 102, 102}));
  EXPECT_EQ(pair->type_ids, (Ids{0, 0, 0, 0, 1}));
}

TEST_F(WordPiece, DecodeGluesPiecesAndSpacesWords) {
  EXPECT_EQ(*Load(BertJson()).Decode(Ids{5, 6, 7, 8, 9}, true), "hello world unaffable");
}

TEST_F(WordPiece, DecodeCleansUpEachTokenAlone) {
  Tokenizer tok = Load(BertJson());
  EXPECT_EQ(*tok.Decode(Ids{5, 10, 6, 11}, true), "hello, world.");
  // "' s" spans two tokens, so `tokenizers` leaves it.
  EXPECT_EQ(*tok.Decode(Ids{20, 21, 13, 22, 5, 13, 14}, true), "don ' t hello ' s");
}

TEST_F(WordPiece, DecodeKeepsThePrefixOfTheFirstToken) {
  EXPECT_EQ(*Load(BertJson()).Decode(Ids{8, 5}, true), "##aff hello");
}

TEST_F(WordPiece, DecodeSkipsOrSpellsSpecialTokens) {
  Tokenizer tok = Load(BertJson());
  EXPECT_EQ(*tok.Decode(Ids{2, 5, 3}, true), "hello");
  EXPECT_EQ(*tok.Decode(Ids{2, 5, 3}, false), "[CLS] hello [SEP]");
}

TEST_F(WordPiece, NoDecoderJoinsTokensWithSpaces) {
  Json j = BertJson();
  j["decoder"] = nullptr;
  EXPECT_EQ(*Load(j).Decode(Ids{5, 8, 27}, true), "hello ##aff ##,");
}

TEST_F(WordPiece, DecoderWithoutCleanupKeepsSpaces) {
  Json j = BertJson();
  j["decoder"]["cleanup"] = false;
  EXPECT_EQ(*Load(j).Decode(Ids{5, 10, 6, 11}, true), "hello , world .");
}

TEST_F(WordPiece, NormalizedAddedTokenDecodesAsItsNormalizedContent) {
  Json j = BertJson();
  j["added_tokens"].push_back({{"id", 28},
                               {"content", "Zürich"},
                               {"single_word", false},
                               {"lstrip", false},
                               {"rstrip", false},
                               {"normalized", true},
                               {"special", false}});
  Tokenizer tok = Load(j);
  EXPECT_EQ(*tok.Encode("ZÜRICH hello", false), (Ids{28, 5}));
  EXPECT_EQ(*tok.Decode(Ids{5, 28}, true), "hello zurich");
  EXPECT_EQ(tok.TokenId("Zürich"), 28);
}

TEST(WordPieceCleanup, ReplacesInTokenizersOrder) {
  EXPECT_EQ(WordPieceCleanup(" ."), ".");
  EXPECT_EQ(WordPieceCleanup("  ."), " .");
  EXPECT_EQ(WordPieceCleanup(" do not"), " don't");
  EXPECT_EQ(WordPieceCleanup(" x  ."), " x .");
}

// Every Push and the final Flush together equal Decode, whichever ids come
// first (special ones skipped or not).
void ExpectStreamingMatchesDecode(const Tokenizer& tok, int32_t vocab_size) {
  std::mt19937 rng(7);
  for (int round = 0; round < 500; ++round) {
    Ids ids(rng() % 12);
    for (int32_t& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab_size));
    for (const bool skip : {true, false}) {
      StreamingDecoder stream(tok, skip);
      std::string streamed;
      for (int32_t id : ids) streamed += stream.Push(id);
      streamed += stream.Flush();
      EXPECT_EQ(streamed, *tok.Decode(ids, skip)) << "round " << round << " skip " << skip;
    }
  }
}

TEST_F(WordPiece, StreamingMatchesDecode) {
  ExpectStreamingMatchesDecode(Load(BertJson()), static_cast<int32_t>(Vocab().size()));
}

// --- GGUF WordPiece (llama.cpp's WPM) ---------------------------------------

// Vocab() in the converter's phantom-space form: control tokens as they
// are, "##x" as "x", the rest as "▁x".
TokenizerSpec WpmSpec() {
  TokenizerSpec spec;
  spec.model = TokenizerSpec::Model::kWordPiece;
  for (size_t i = 0; i < Vocab().size(); ++i) {
    const std::string& token = Vocab()[i];
    spec.tokens.push_back(i < 5                     ? token
                          : token.starts_with("##") ? token.substr(2)
                                                    : "\xE2\x96\x81" + token);
    spec.token_types.push_back(i < 5 ? 3 : 1);
  }
  spec.bos_id = 2;
  spec.eos_id = 3;
  spec.sep_id = 3;
  spec.unk_id = 1;
  spec.add_bos = true;
  spec.add_eos = true;
  return spec;
}

Tokenizer Wpm(TokenizerSpec spec = WpmSpec()) {
  auto tok = Tokenizer::FromSpec(std::move(spec));
  EXPECT_TRUE(tok.ok()) << tok.error().ToString();
  return *std::move(tok);
}

TEST(Wpm, EncodesAfterAPhantomSpace) {
  EXPECT_EQ(*Wpm().Encode("Hello, World! unaffable", false), (Ids{5, 10, 6, 12, 7, 8, 9}));
}

TEST(Wpm, AddsClsAndSepWhateverTheAddKeysSay) {
  TokenizerSpec spec = WpmSpec();
  spec.add_bos = false;
  spec.add_eos = false;
  EXPECT_EQ(*Wpm(spec).Encode("hello", true), (Ids{2, 5, 3}));
}

TEST(Wpm, HasNoWordLengthLimit) {
  const std::string word = "un" + std::string(150, 'a');  // ▁un, then a 150 times
  Ids want = {7};
  want.insert(want.end(), 150, 16);
  EXPECT_EQ(*Wpm().Encode(word, false), want);
}

TEST(Wpm, VerticalTabSplitsWordsWhereTokenizersDropsIt) {
  EXPECT_EQ(*Wpm().Encode("hello\vworld", false), (Ids{5, 6}));
}

TEST(Wpm, LowercaseIsTheSimpleMapping) {
  TokenizerSpec spec = WpmSpec();
  spec.tokens[15] = "\xE2\x96\x81i";                           // ▁i where ▁a was
  EXPECT_EQ(*Wpm(spec).Encode("\xC4\xB0", false), (Ids{15}));  // U+0130
}

TEST(Wpm, CasedKeepsCase) {
  TokenizerSpec spec = WpmSpec();
  spec.lowercase = false;
  spec.strip_accents = true;
  EXPECT_EQ(*Wpm(spec).Encode("Hello Héllo", false), (Ids{19, 19}));
}

TEST(Wpm, DecodeKeepsTheLeadingSpaceAndCleansSpaces) {
  Tokenizer tok = Wpm();
  EXPECT_EQ(*tok.Decode(Ids{2, 5, 10, 6, 7, 8, 12, 3}, true), " hello, world unaff!");
  EXPECT_EQ(*tok.Decode(Ids{5, 13, 14}, true), " hello's");
  EXPECT_EQ(*tok.Decode(Ids{2, 5, 3}, false), "[CLS] hello[SEP]");
}

TEST(Wpm, EncodePairFollowsLlamaCppsRerankLayout) {
  auto pair = Wpm().EncodePair("hello", "world");
  ASSERT_TRUE(pair.ok());
  EXPECT_EQ(pair->ids, (Ids{2, 5, 3, 6, 3}));
  EXPECT_EQ(pair->type_ids, (Ids{0, 0, 0, 1, 1}));
}

TEST(Wpm, StreamingMatchesDecode) {
  ExpectStreamingMatchesDecode(Wpm(), static_cast<int32_t>(Vocab().size()));
}

// llama.cpp's clean_spaces as its detokenize writes it: three in-place
// passes over the text.
std::string LlamaCleanSpaces(std::string text) {
  auto total = static_cast<int32_t>(text.size());
  const int32_t total1 = total;
  total = total ? 1 : 0;
  for (int32_t i = 1; i < total1; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
    text[total++] = x;
  }
  const int32_t total2 = total;
  total = total ? 1 : 0;
  for (int32_t i = 1; i < total2; ++i) {
    const char x = text[i];
    if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
      total--;
      text[++i] = '\0';
    }
    text[total++] = x;
  }
  const int32_t total3 = total;
  total = total ? 1 : 0;
  for (int32_t i = 1; i < total3; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        total--;
      } else if (x1 != 't' && x1 != 'd' && i + 2 < total3) {
        const char x2 = text[i + 2];
        if ((x1 == 'r' || x1 == 'v') && x2 == 'e') total--;
      }
    }
    text[total++] = x;
  }
  text.resize(static_cast<size_t>(total));
  return text;
}

TEST(SpaceCleanup, StreamingMatchesLlamaCppOnRandomText) {
  static constexpr std::string_view kAlphabet = " '?!.,smrvetdlx";
  std::mt19937 rng(11);
  for (int round = 0; round < 20000; ++round) {
    std::string text(rng() % 24, ' ');
    for (char& c : text) c = kAlphabet[rng() % kAlphabet.size()];
    SpaceCleanupState state;
    std::string streamed;
    for (size_t i = 0; i < text.size();) {
      const size_t len = 1 + rng() % 4;
      SpaceCleanupFeed(std::string_view(text).substr(i, len), &state, &streamed);
      i += len;
    }
    SpaceCleanupFinish(&state, &streamed);
    ASSERT_EQ(streamed, LlamaCleanSpaces(text)) << "'" << text << "'";
  }
}

}  // namespace
}  // namespace folio::tokenizer
