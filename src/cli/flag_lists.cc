#include "cli/flag_lists.h"

#include <charconv>
#include <string>
#include <system_error>

#include "folio/core/str_cat.h"

namespace folio::cli {

Result<std::vector<uint64_t>> ParseUintList(std::string_view flag, std::string_view text) {
  std::vector<uint64_t> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    uint64_t v = 0;
    // from_chars takes no sign, space or prefix: only digits, all of them.
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
      return Status::InvalidArgument(
          StrCat(flag, " entry '", item, "' is not a non-negative integer",
                 ec == std::errc::result_out_of_range ? " below 2^64" : ""));
    }
    out.push_back(v);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace folio::cli
