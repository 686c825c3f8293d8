// `folio template`: a chat template rendered for a conversation, as
// Hugging Face's apply_chat_template renders it (folio/chat/template.h).
//
//   folio template (--model PATH | --template FILE) --messages FILE.json
//       [--no-generation-prompt] [--bos-token S] [--eos-token S]
//       [--strftime-now EPOCH] [--ids]
//
// FILE.json is a JSON array (the messages) or an object whose keys all
// become template variables (it must hold "messages"). The variables are,
// in order of precedence: the file's own keys; bos_token and eos_token from
// the flags (default: the model tokenizer's tokens when --model is given,
// else ""); add_generation_prompt (true unless --no-generation-prompt);
// tools and documents as None, as transformers passes them when the caller
// has none. Prints exactly the rendered text, no newline added; --ids
// prints the text's token ids as a JSON array instead (special tokens
// matched, nothing added), which needs --model.
#ifndef FOLIO_CLI_TEMPLATE_COMMAND_H_
#define FOLIO_CLI_TEMPLATE_COMMAND_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "folio/core/status.h"

namespace CLI {
class App;
}

namespace folio::cli {

struct TemplateFlags {
  std::string model;          // a model folder or .gguf file, or
  std::string template_path;  // a Jinja file
  std::string messages;
  bool no_generation_prompt = false;
  std::optional<std::string> bos_token, eos_token;
  std::optional<int64_t> strftime_now;  // strftime_now's clock (UTC); default: local time
  bool ids = false;
};

// The template variables for `messages_json` (the --messages file's text).
// default_bos / default_eos stand in for flags that were not given.
// Errors: kInvalidArgument for text that is not JSON, not an array or
// object, or an object without "messages".
Result<nlohmann::ordered_json> TemplateVariables(std::string_view messages_json,
                                                 const TemplateFlags& flags,
                                                 const std::string& default_bos,
                                                 const std::string& default_eos);

CLI::App* AddTemplateCommand(CLI::App& app, TemplateFlags& flags);
int RunTemplate(const TemplateFlags& flags);

}  // namespace folio::cli

#endif  // FOLIO_CLI_TEMPLATE_COMMAND_H_
