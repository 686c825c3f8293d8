// Comma-separated integer lists given on the command line
// (`--page-table 1,3,0,2`, `--tokens 1,2,3`).
#ifndef FOLIO_CLI_FLAG_LISTS_H_
#define FOLIO_CLI_FLAG_LISTS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "folio/core/status.h"

namespace folio::cli {

// Parses `text` as comma-separated non-negative decimal integers, each
// below 2^64. An entry that is empty, signed or not a number is
// InvalidArgument naming `flag` (e.g. "--tokens") and the entry. An empty
// text is the empty list.
Result<std::vector<uint64_t>> ParseUintList(std::string_view flag, std::string_view text);

}  // namespace folio::cli

#endif  // FOLIO_CLI_FLAG_LISTS_H_
