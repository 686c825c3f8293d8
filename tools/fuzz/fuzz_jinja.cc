// libFuzzer target for chat templates (folio/chat/template.h): any bytes as
// template source are parsed and, when they parse, rendered for a fixed
// conversation under small limits. Never a crash, a hang, unbounded memory
// or a sanitizer report; errors come back with the documented codes, the
// text stays within its limit, and a second render gives the same text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "folio/chat/template.h"
#include "folio/core/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using folio::StatusCode;
  using Json = nlohmann::ordered_json;
  static const Json vars = Json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi {{ there }} é日本 🙂"},
      {"role": "assistant", "content": "  hello\n", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": {"a": 1, "b": [true, null]}}}]},
      {"role": "tool", "content": "{\"ok\": 1.5}"},
      {"role": "user", "content": ""}
    ],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "documents": null,
    "add_generation_prompt": true,
    "bos_token": "<s>",
    "eos_token": "</s>"
  })");
  folio::chat::TemplateLimits limits;
  limits.max_output_bytes = 1 << 14;
  limits.max_loop_iterations = 1 << 12;
  limits.max_call_depth = 8;
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  folio::Result<folio::chat::Template> t = folio::chat::Template::Parse(source, limits);
  if (!t) {
    const StatusCode c = t.error().code();
    FOLIO_CHECK(c == StatusCode::kInvalidArgument || c == StatusCode::kUnimplemented ||
                    c == StatusCode::kResourceExhausted,
                t.error().ToString());
    return 0;
  }
  folio::chat::RenderOptions options;
  options.now_epoch_seconds = 1700000000;
  folio::Result<std::string> first = t->Render(vars, options);
  folio::Result<std::string> second = t->Render(vars, options);
  FOLIO_CHECK(first.ok() == second.ok());
  if (!first) {
    const StatusCode c = first.error().code();
    FOLIO_CHECK(c == StatusCode::kInvalidArgument || c == StatusCode::kUnimplemented ||
                    c == StatusCode::kResourceExhausted,
                first.error().ToString());
    FOLIO_CHECK(first.error().message() == second.error().message());
    return 0;
  }
  FOLIO_CHECK(first->size() <= limits.max_output_bytes);
  FOLIO_CHECK(*first == *second);
  return 0;
}
