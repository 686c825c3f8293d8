// Test helpers for chat output parsers (chat_output_test.cc,
// harmony_output_test.cc): a reply fed in pieces, and two readings
// compared field by field.
#ifndef FOLIO_SERVING_CHAT_OUTPUT_TESTING_H_
#define FOLIO_SERVING_CHAT_OUTPUT_TESTING_H_

#include <gtest/gtest.h>

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

}  // namespace folio::serving::chat_output_testing

#endif  // FOLIO_SERVING_CHAT_OUTPUT_TESTING_H_
