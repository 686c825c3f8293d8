#include "cli/flag_lists.h"

#include <gtest/gtest.h>

#include <string>

namespace folio::cli {
namespace {

void ExpectRefused(std::string_view flag, std::string_view text, const std::string& message) {
  Result<std::vector<uint64_t>> r = ParseUintList(flag, text);
  ASSERT_FALSE(r.ok()) << "accepted '" << text << "'";
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.error().message(), message);
}

TEST(ParseUintList, ParsesCommaSeparatedIntegers) {
  EXPECT_EQ(*ParseUintList("--tokens", "1,22,333"), (std::vector<uint64_t>{1, 22, 333}));
  EXPECT_EQ(*ParseUintList("--tokens", "0"), (std::vector<uint64_t>{0}));
  EXPECT_EQ(*ParseUintList("--tokens", "18446744073709551615"),
            (std::vector<uint64_t>{UINT64_MAX}));
  EXPECT_TRUE(ParseUintList("--tokens", "")->empty());
}

// Before the fix every refusal named --page-table, whichever flag it was.
TEST(ParseUintList, ErrorsNameTheFlagTheListCameFrom) {
  ExpectRefused("--tokens", "abc", "--tokens entry 'abc' is not a non-negative integer");
  ExpectRefused("--tokens", "-1", "--tokens entry '-1' is not a non-negative integer");
  ExpectRefused("--tokens", "1,,2", "--tokens entry '' is not a non-negative integer");
  ExpectRefused("--page-table", "1,x", "--page-table entry 'x' is not a non-negative integer");
}

TEST(ParseUintList, RefusesSignsSpacesTrailingCommasAndOverflow) {
  ExpectRefused("--tokens", "+1", "--tokens entry '+1' is not a non-negative integer");
  ExpectRefused("--tokens", " 1", "--tokens entry ' 1' is not a non-negative integer");
  ExpectRefused("--tokens", "1,", "--tokens entry '' is not a non-negative integer");
  ExpectRefused("--tokens", "2x", "--tokens entry '2x' is not a non-negative integer");
  ExpectRefused("--tokens", "18446744073709551616",
                "--tokens entry '18446744073709551616' is not a non-negative integer below 2^64");
}

}  // namespace
}  // namespace folio::cli
