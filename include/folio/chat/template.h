// Chat templates: the Jinja source a model ships (GGUF
// tokenizer.chat_template, tokenizer_config.json chat_template) rendered
// exactly as Python's jinja2 renders it under Hugging Face's
// apply_chat_template.
//
// That environment is jinja2's ImmutableSandboxedEnvironment with
// trim_blocks=True, lstrip_blocks=True, the loopcontrols extension (break,
// continue), HF's {% generation %} tag (rendered as its body), HF's tojson
// filter (json.dumps(x, ensure_ascii=False, indent=indent,
// separators=separators, sort_keys=sort_keys): insertion order, ", " and
// ": " separators) and the globals raise_exception(msg) and
// strftime_now(fmt). folio renders the same text for the statements,
// expressions, filters, tests and methods docs/chat-templates.md
// lists; everything else is refused with kUnimplemented, never rendered
// approximately.
//
// Errors and when they come:
//   Parse   kInvalidArgument: what jinja2 refuses to compile (a syntax
//           error, an unknown tag, a filter or test jinja2 does not have);
//           kUnimplemented: what jinja2 accepts and folio does not
//           ({% include %}, {% extends %}, {% import %}, recursive loops,
//           a jinja2 filter folio lacks); kResourceExhausted: nesting too
//           deep to parse. The message starts with line:column and names
//           the construct or token.
//   Render  kInvalidArgument "chat template raised: " + msg for
//           raise_exception(msg); kInvalidArgument naming line:column for
//           what jinja2 raises while rendering (a type error, an undefined
//           value used as jinja2's Undefined forbids, a method the sandbox
//           refuses); kResourceExhausted when a TemplateLimits limit is
//           passed; kUnimplemented naming line:column for what jinja2 would
//           compute and folio cannot (a 64-bit integer overflow, a jinja2
//           filter folio lacks reached inside an if).
//
// Thread safety: a Template is immutable; Render may run concurrently on
// one Template. Copies share the parsed program.
#ifndef FOLIO_CHAT_TEMPLATE_H_
#define FOLIO_CHAT_TEMPLATE_H_

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "folio/core/status.h"

namespace folio::chat {

namespace internal {
struct Program;
}

struct TemplateLimits {
  uint64_t max_output_bytes = 1 << 20;     // rendered text; also any one string or list made
  uint64_t max_loop_iterations = 1 << 20;  // all loop iterations and macro calls of one render
  uint64_t max_call_depth = 64;            // macro / call nesting
};

struct RenderOptions {
  // strftime_now's clock (UTC) when set; else the current local time.
  std::optional<int64_t> now_epoch_seconds;
};

class Template {
 public:
  // Parses once. A syntax error is kInvalidArgument, a construct folio does
  // not support kUnimplemented; both name line:column and the
  // construct/token.
  static Result<Template> Parse(std::string_view source, TemplateLimits limits = {});

  // Renders with `variables` (a JSON object: messages, add_generation_prompt,
  // bos_token, eos_token, tools, documents, any extra keys passed through).
  // raise_exception(msg) from the template -> kInvalidArgument whose message
  // is exactly "chat template raised: " + msg; a limit exceeded ->
  // kResourceExhausted; a runtime error (type error, undefined attribute
  // access jinja2 would raise on) -> kInvalidArgument naming line:column.
  //
  // nlohmann::json keeps object keys sorted, so a template that prints a
  // whole object (tools | tojson) sees them sorted; the ordered_json
  // overload keeps the caller's order, as Python's dicts do.
  Result<std::string> Render(const nlohmann::json& variables,
                             const RenderOptions& options = {}) const;
  Result<std::string> Render(const nlohmann::ordered_json& variables,
                             const RenderOptions& options = {}) const;

  const TemplateLimits& limits() const { return limits_; }

 private:
  Template(std::shared_ptr<const internal::Program> program, TemplateLimits limits)
      : program_(std::move(program)), limits_(limits) {}
  std::shared_ptr<const internal::Program> program_;
  TemplateLimits limits_;
};

}  // namespace folio::chat

#endif  // FOLIO_CHAT_TEMPLATE_H_
