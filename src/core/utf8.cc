#include "folio/core/utf8.h"

namespace folio::utf8 {

LeadByte ClassifyLead(unsigned char c) {
  LeadByte b;
  if (c >= 0xC2 && c <= 0xDF) {
    b.len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    b.len = 3;
    if (c == 0xE0) b.lo = 0xA0;
    if (c == 0xED) b.hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    b.len = 4;
    if (c == 0xF0) b.lo = 0x90;
    if (c == 0xF4) b.hi = 0x8F;
  }
  return b;
}

size_t FirstInvalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    const LeadByte lead = ClassifyLead(c);
    if (lead.len == 0 || s.size() - i < lead.len) return i;
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c1 < lead.lo || c1 > lead.hi) return i;
    for (size_t k = 2; k < lead.len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0u) != 0x80u) return i;
    }
    i += lead.len;
  }
  return std::string_view::npos;
}

}  // namespace folio::utf8
