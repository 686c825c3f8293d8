// UTF-8 well-formedness (Unicode Table 3-7), shared by every parser that
// checks text: tokenizers, the safetensors header, chat templates.
#ifndef FOLIO_CORE_UTF8_H_
#define FOLIO_CORE_UTF8_H_

#include <cstddef>
#include <string_view>

namespace folio::utf8 {

// A lead byte's sequence length (0: it starts no sequence) and the allowed
// range of the second byte, which excludes overlongs, surrogates and code
// points past U+10FFFF.
struct LeadByte {
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;
};
LeadByte ClassifyLead(unsigned char c);

// Offset of the first byte that does not start a well-formed UTF-8
// sequence (overlong forms, surrogates and code points above U+10FFFF are
// ill-formed), or npos.
size_t FirstInvalid(std::string_view s);

}  // namespace folio::utf8

#endif  // FOLIO_CORE_UTF8_H_
