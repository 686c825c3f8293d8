// Building error messages: concatenation of anything streamable, and
// clipping of untrusted text (names and values read from files) so a
// message stays readable however long the input.
#ifndef FOLIO_CORE_STR_CAT_H_
#define FOLIO_CORE_STR_CAT_H_

#include <sstream>
#include <string>
#include <string_view>

namespace folio {

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// At most 80 bytes of s, with "..." when cut.
inline std::string Clip(std::string_view s) {
  constexpr size_t kMax = 80;
  return s.size() <= kMax ? std::string(s) : StrCat(s.substr(0, kMax), "...");
}

// 'clipped s', for quoting an untrusted name in a message.
inline std::string Quote(std::string_view s) { return StrCat("'", Clip(s), "'"); }

}  // namespace folio

#endif  // FOLIO_CORE_STR_CAT_H_
