// Test helpers for chat output parsers (chat_output_test.cc,
// harmony_output_test.cc): a reply fed in pieces, and two readings
// compared field by field.
#ifndef FOLIO_SERVING_CHAT_OUTPUT_TESTING_H_
#define FOLIO_SERVING_CHAT_OUTPUT_TESTING_H_

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "folio/serving/chat_output.h"

namespace folio::serving::chat_output_testing {

// The whole reply: the text fed in pieces cut at `cuts` (sorted offsets).
inline ChatDelta Parse(const ChatOutputOptions& o, std::string_view text,
                       std::vector<size_t> cuts = {}) {
  ChatOutputParser p(o);
  ChatDelta all;
  size_t at = 0;
  cuts.push_back(text.size());
  for (size_t cut : cuts) {
    all.Append(p.Feed(text.substr(at, cut - at)));
    at = cut;
  }
  all.Append(p.Finish());
  return all;
}

inline void ExpectSame(const ChatDelta& a, const ChatDelta& b, const std::string& where) {
  EXPECT_EQ(a.reasoning, b.reasoning) << where;
  EXPECT_EQ(a.content, b.content) << where;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << where;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].id, b.calls[i].id) << where;
    EXPECT_EQ(a.calls[i].name, b.calls[i].name) << where;
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << where;
  }
}

// Whatever the pieces (one byte at a time, every cut into two, with
// three_pieces every cut into three, random cuts), the reply reads the
// same as when fed whole.
inline void ExpectSplitIndependent(const ChatOutputOptions& o, std::string_view text,
                                   bool three_pieces = false) {
  const ChatDelta whole = Parse(o, text);
  std::vector<size_t> bytes;
  for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
  ExpectSame(whole, Parse(o, text, bytes), "byte at a time");
  for (size_t i = 1; i < text.size(); ++i) {
    ExpectSame(whole, Parse(o, text, {i}), "cut at " + std::to_string(i));
    for (size_t j = i + 1; three_pieces && j < text.size(); ++j) {
      ExpectSame(whole, Parse(o, text, {i, j}),
                 "cut at " + std::to_string(i) + " and " + std::to_string(j));
      if (::testing::Test::HasFailure()) return;
    }
  }
  std::mt19937 rng(static_cast<uint32_t>(text.size()));
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < text.size(); ++i) {
      if (rng() % 4 == 0) cuts.push_back(i);
    }
    ExpectSame(whole, Parse(o, text, cuts), "random cuts, trial " + std::to_string(trial));
  }
}

}  // namespace folio::serving::chat_output_testing

#endif  // FOLIO_SERVING_CHAT_OUTPUT_TESTING_H_
