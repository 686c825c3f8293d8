// libFuzzer target for the chat reply reader (folio/serving/chat_output.h):
// any model text, in any format and with any options, read whole and read
// in pieces cut where the input says, must give the same message; every
// call's arguments must be the JSON text of an object. Built by `make fuzz`.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "folio/core/check.h"
#include "folio/serving/chat_output.h"

namespace {

folio::serving::ChatDelta Read(const folio::serving::ChatOutputOptions& o, std::string_view text,
                               const std::vector<size_t>& cuts) {
  folio::serving::ChatOutputParser p(o);
  folio::serving::ChatDelta all;
  size_t at = 0;
  for (size_t cut : cuts) {
    all.Append(p.Feed(text.substr(at, cut - at)));
    at = cut;
  }
  all.Append(p.Feed(text.substr(at)));
  all.Append(p.Finish());
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using folio::serving::ToolCallFormat;
  if (size < 2) return 0;
  // Byte 0: the options; byte 1: how often to cut; the rest: the text.
  const uint8_t flags = data[0];
  const uint8_t every = static_cast<uint8_t>(data[1] % 7 + 1);
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  folio::serving::ChatOutputOptions o;
  o.reasoning = (flags & 1) != 0;
  o.starts_in_reasoning = (flags & 2) != 0;
  o.parallel_tool_calls = (flags & 4) != 0;
  switch ((flags >> 3) % 4) {
    case 0:
      break;
    case 1:
      o.tool_format = ToolCallFormat::kHermes;
      break;
    case 2:
      o.tool_format = ToolCallFormat::kLlama3Json;
      break;
    case 3:
      o.tool_format = ToolCallFormat::kMistral;
      break;
  }
  // Bit 5: the harmony reading (gpt-oss), bit 6 with its calls read.
  if ((flags & 32) != 0) {
    o.harmony = true;
    o.tool_format.reset();
    if ((flags & 64) != 0) o.tool_format = ToolCallFormat::kHarmony;
  }
  o.tool_names = {"f", "get_weather"};
  std::vector<size_t> cuts;
  for (size_t i = every; i < text.size(); i += every) cuts.push_back(i);
  const folio::serving::ChatDelta whole = Read(o, text, {});
  const folio::serving::ChatDelta pieces = Read(o, text, cuts);
  FOLIO_CHECK(whole.content == pieces.content);
  FOLIO_CHECK(whole.reasoning == pieces.reasoning);
  FOLIO_CHECK(whole.calls.size() == pieces.calls.size());
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    FOLIO_CHECK(whole.calls[i].name == pieces.calls[i].name);
    FOLIO_CHECK(whole.calls[i].arguments == pieces.calls[i].arguments);
    FOLIO_CHECK(nlohmann::json::parse(whole.calls[i].arguments, nullptr, false).is_object());
  }
  if (!o.harmony && !o.tool_format && !o.reasoning) FOLIO_CHECK(whole.content == text);
  return 0;
}
