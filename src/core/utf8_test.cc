#include "folio/core/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace folio::utf8 {
namespace {

constexpr size_t kNone = std::string_view::npos;

TEST(Utf8, WellFormedTextHasNoInvalidByte) {
  EXPECT_EQ(FirstInvalid(""), kNone);
  EXPECT_EQ(FirstInvalid("plain ascii"), kNone);
  EXPECT_EQ(FirstInvalid("\xC3\xA9t\xC3\xA9 \xE6\x9D\xB1 \xF0\x9F\x99\x82"), kNone);
  EXPECT_EQ(FirstInvalid("\xF4\x8F\xBF\xBF"), kNone);  // U+10FFFF
}

TEST(Utf8, EachIllFormedSequenceIsFoundAtItsLeadByte) {
  EXPECT_EQ(FirstInvalid("ab\x80"), 2u);                    // a lone continuation byte
  EXPECT_EQ(FirstInvalid("a\xC0\xAF"), 1u);                 // overlong '/'
  EXPECT_EQ(FirstInvalid("a\xE0\x80\xAF"), 1u);             // overlong, three bytes
  EXPECT_EQ(FirstInvalid("\xED\xA0\x80"), 0u);              // a surrogate, U+D800
  EXPECT_EQ(FirstInvalid("xy\xF4\x90\x80\x80"), 2u);        // past U+10FFFF
  EXPECT_EQ(FirstInvalid("x\xE6\x9D"), 1u);                 // truncated
  EXPECT_EQ(FirstInvalid("\xF8\x88\x80\x80\x80"), 0u);      // five-byte form
  EXPECT_EQ(FirstInvalid(std::string("\xC3\x28", 2)), 0u);  // a bad continuation
}

}  // namespace
}  // namespace folio::utf8
