// Bytes as printable ASCII: for a terminal (bytes a model produced) and
// for test failure messages.
#ifndef FOLIO_CORE_PRINTABLE_H_
#define FOLIO_CORE_PRINTABLE_H_

#include <cstdio>
#include <string>
#include <string_view>

namespace folio {

// Printable ASCII as is; every other byte as \xNN, so an untrained model's
// output stays readable on a terminal.
inline std::string Printable(std::string_view bytes) {
  std::string out;
  for (char ch : bytes) {
    const auto u = static_cast<unsigned char>(ch);
    if (u >= 0x20 && u < 0x7f) {
      out += ch;
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    }
  }
  return out;
}

}  // namespace folio

#endif  // FOLIO_CORE_PRINTABLE_H_
