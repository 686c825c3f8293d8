#include "folio/tokenizer/byte_tokenizer.h"

#include <gtest/gtest.h>

namespace folio::tokenizer {
namespace {

TEST(ByteTokenizer, FramesDocument) {
  EXPECT_EQ(ByteTokenizer::Encode("abcde", true, true),
            (std::vector<int32_t>{0, 99, 100, 101, 102, 103, 1}));
  EXPECT_EQ(ByteTokenizer::Encode("", true, true), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(ByteTokenizer::Encode("a", true, false), (std::vector<int32_t>{0, 99}));
}

TEST(ByteTokenizer, EveryByteRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  auto ids = ByteTokenizer::Encode(all, true, true);
  EXPECT_EQ(ids[256], 257);  // byte 255
  EXPECT_EQ(*ByteTokenizer::Decode(ids), all);
}

TEST(ByteTokenizer, DecodeRejectsOutOfVocabulary) {
  const std::vector<int32_t> ids = {0, 99, 258};
  auto r = ByteTokenizer::Decode(ids);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("token 2 has id 258"), std::string::npos);
  EXPECT_FALSE(ByteTokenizer::Decode(std::vector<int32_t>{-1}).has_value());
}

TEST(ByteTokenizer, AsTokenizerHasTheSameIds) {
  const Tokenizer& t = ByteTokenizer::AsTokenizer();
  EXPECT_EQ(t.vocab_size(), 258u);
  const std::string text = "Hello, w\xc3\xb6rld!  \n\t123 \xe2\x82\xac";
  auto ids = t.Encode(text, /*add_special_tokens=*/false);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(*ids, ByteTokenizer::Encode(text, false, false));
  std::vector<int32_t> framed = ByteTokenizer::Encode(text, true, true);
  EXPECT_EQ(*t.Decode(framed, true), text);
  StreamingDecoder stream(t);
  std::string streamed;
  for (int32_t id : framed) streamed += stream.Push(id);
  EXPECT_EQ(streamed + stream.Flush(), text);
}

}  // namespace
}  // namespace folio::tokenizer
