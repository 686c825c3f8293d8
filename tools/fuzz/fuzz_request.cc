// libFuzzer target for the server's request layer (folio/server/request.h):
// any bytes as a completions or chat body must give a typed request or an
// OpenAI-style error whose body is valid JSON, never a crash, a hang or a
// request the engine would refuse. Built by `make fuzz`.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "folio/core/check.h"
#include "folio/server/request.h"
#include "folio/tokenizer/byte_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace folio::server;
  static const ModelInfo model = [] {
    ModelInfo m;
    m.name = "builtin";
    m.vocab_size = 258;
    m.max_positions = 512;
    m.pool_positions = 1024;
    m.tokenizer = &folio::tokenizer::ByteTokenizer::AsTokenizer();
    m.add_special_tokens = false;
    m.prepend_id = 0;
    // ChatML with tools in the Hermes format, so tool requests reach the
    // template and the grammar that forces a call.
    static const folio::serving::ChatFormat format = *folio::serving::ChatFormat::Create(
        "",
        std::string("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                    "<|im_end|>\n{% endfor %}{% if tools %}{{ tools | tojson }}<tool_call>"
                    "{% endif %}<|im_start|>assistant\n"),
        nullptr);
    static folio::grammar::GrammarCache grammars;
    m.chat_format = &format;
    m.grammars = &grammars;
    return m;
  }();
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (Endpoint ep : {Endpoint::kCompletions, Endpoint::kChat}) {
    ParseResult r = ParseRequest(ep, body, model);
    if (const ApiError* e = std::get_if<ApiError>(&r)) {
      FOLIO_CHECK(e->http_status == 400 || e->http_status == 404);
      FOLIO_CHECK(!nlohmann::json::parse(e->Body(), nullptr, false).is_discarded());
      continue;
    }
    const ParsedRequest& p = std::get<ParsedRequest>(r);
    // What the engine checks again at admission.
    FOLIO_CHECK(!p.prompt.empty());
    FOLIO_CHECK(p.params.max_tokens >= 1);
    FOLIO_CHECK(p.prompt.size() + p.params.max_tokens - 1 <= model.max_positions);
    for (int32_t t : p.prompt) FOLIO_CHECK(t >= 0 && static_cast<uint64_t>(t) < model.vocab_size);
    for (const auto& s : p.params.stop_strings) FOLIO_CHECK(!s.empty());
    FOLIO_CHECK(p.params.sampling.Validate().ok());
  }
  return 0;
}
