#include "folio/tokenizer/byte_tokenizer.h"

#include "folio/core/status.h"
#include "tokenizer/unicode.h"

namespace folio::tokenizer {

std::vector<int32_t> ByteTokenizer::Encode(std::string_view text, bool add_begin, bool add_end) {
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
      return Status::OutOfRange("token " + std::to_string(i) + " has id " + std::to_string(id) +
                                " outside [0, 258)");
    }
    if (id >= 2) out += static_cast<char>(id - 2);
  }
  return out;
}

const Tokenizer& ByteTokenizer::AsTokenizer() {
  static const Tokenizer* const tokenizer = [] {
    TokenizerSpec spec;
    spec.model = TokenizerSpec::Model::kBpe;
    spec.pre_tokenizer = "gpt-2";
    spec.tokens = {"<s>", "</s>"};
    spec.token_types = {3, 3};
    for (const char32_t c : unicode::ByteToChar()) {
      unicode::AppendUtf8(c, &spec.tokens.emplace_back());
      spec.token_types.push_back(1);
    }
    spec.bos_id = kBegin;
    spec.eos_id = kEnd;
    Result<Tokenizer> t = Tokenizer::FromSpec(std::move(spec));
    FOLIO_CHECK(t.ok(), t.status().ToString());
    return new Tokenizer(std::move(*t));
  }();
  return *tokenizer;
}

}  // namespace folio::tokenizer
