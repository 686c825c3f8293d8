// libFuzzer target: any bytes read as a tokenizer.json are either refused
// with a Status or make a tokenizer that encodes, encodes pairs, decodes and
// stream-decodes without a crash, a hang or a sanitizer report (byte-level
// BPE and WordPiece files both; make_seeds.py writes one of each kind).
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "folio/tokenizer/tokenizer.h"

namespace {

// FromTokenizerJson reads a file: one per fuzzing process.
const std::filesystem::path& JsonPath() {
  static const std::filesystem::path path = [] {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("folio_fuzz_tokenizer_json_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    return dir / "tokenizer.json";
  }();
  return path;
}

void Exercise(const folio::tokenizer::Tokenizer& tok, std::string_view text) {
  for (const bool special : {true, false}) {
    auto ids = tok.Encode(text, special, special);
    if (!ids.ok()) continue;
    (void)tok.Decode(*ids, special);
    folio::tokenizer::StreamingDecoder stream(tok, special);
    for (int32_t id : *ids) (void)stream.Push(id);
    (void)stream.Flush();
  }
  (void)tok.EncodePair(text, "pair: [SEP] two ##x");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream out(JsonPath(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto tok = folio::tokenizer::Tokenizer::FromTokenizerJson(JsonPath());
  if (!tok.ok()) return 0;
  static constexpr std::string_view kTexts[] = {
      "Hello, World! It's 3.14 - na\xC3\xAFve caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD "
      "\xF0\x9F\x99\x82",
      "[CLS] unaffable [MASK]\t\x0b\x01 \xC4\xB0 e\xCC\x81 don't ' s . ?",
      "",
  };
  for (std::string_view text : kTexts) Exercise(*tok, text);
  // Every id of a small vocabulary, and one past it.
  std::vector<int32_t> ids;
  const uint64_t n = std::min<uint64_t>(tok->vocab_size() + 1, 256);
  for (uint64_t id = 0; id < n; ++id) ids.push_back(static_cast<int32_t>(id));
  (void)tok->Decode(ids, false);
  folio::tokenizer::StreamingDecoder stream(*tok, false);
  for (int32_t id : ids) (void)stream.Push(id);
  (void)stream.Flush();
  return 0;
}
