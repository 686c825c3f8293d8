#include "folio/model/byte_tokenizer.h"

namespace folio::model {

std::vector<int32_t> ByteTokenizer::Encode(std::string_view text, bool add_begin,
                                           bool add_end) {
  std::vector<int32_t> ids;
  ids.reserve(text.size() + 2);
  if (add_begin) ids.push_back(kBegin);
  for (char c : text) ids.push_back(static_cast<int32_t>(static_cast<unsigned char>(c)) + 2);
  if (add_end) ids.push_back(kEnd);
  return ids;
}

Result<std::string> ByteTokenizer::Decode(std::span<const int32_t> ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= kVocabSize) {
      return Status::OutOfRange("token " + std::to_string(i) + " has id " +
                                std::to_string(id) + " outside [0, 258)");
    }
    if (id >= 2) out += static_cast<char>(id - 2);
  }
  return out;
}

}  // namespace folio::model
