// The worked example's byte tokenizer: id 0 = begin, id 1 = end, byte b ->
// b + 2, vocabulary 258. "abcde" encodes (framed) to [0, 99, 100, 101, 102,
// 103, 1].
#ifndef FOLIO_TOKENIZER_BYTE_TOKENIZER_H_
#define FOLIO_TOKENIZER_BYTE_TOKENIZER_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/status.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::tokenizer {

class ByteTokenizer {
 public:
  static constexpr int32_t kBegin = 0;
  static constexpr int32_t kEnd = 1;
  static constexpr int32_t kVocabSize = 258;

  // Bytes -> ids, with begin/end framing when asked.
  static std::vector<int32_t> Encode(std::string_view text, bool add_begin, bool add_end);
  // Ids -> bytes; begin and end ids produce nothing. Errors: an id outside
  // [0, 258).
  static Result<std::string> Decode(std::span<const int32_t> ids);

  // The same vocabulary as a Tokenizer (byte-level BPE without merges:
  // ids 0 and 1 special, byte b -> id b + 2), so everything that takes a
  // Tokenizer (the engine's text and stop strings, the server) serves the
  // built-in models too. Encode adds no framing; Decode skips 0 and 1 when
  // asked to skip special tokens.
  static const Tokenizer& AsTokenizer();
};

}  // namespace folio::tokenizer

#endif  // FOLIO_TOKENIZER_BYTE_TOKENIZER_H_
