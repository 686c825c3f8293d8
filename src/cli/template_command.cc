#include "cli/template_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "cli/engine_flags.h"
#include "folio/chat/template.h"
#include "folio/checkpoint/checkpoint.h"
#include "folio/core/str_cat.h"

namespace folio::cli {
namespace {

// Errors read "folio: ...", as the other subcommands of main.cc.
constexpr std::string_view kCommand = "";

}  // namespace

Result<nlohmann::ordered_json> TemplateVariables(std::string_view messages_json,
                                                 const TemplateFlags& flags,
                                                 const std::string& default_bos,
                                                 const std::string& default_eos) {
  nlohmann::ordered_json data = nlohmann::ordered_json::parse(messages_json, nullptr, false);
  if (data.is_discarded()) {
    return Status::InvalidArgument(flags.messages + " is not valid JSON");
  }
  if (!data.is_array() && !data.is_object()) {
    return Status::InvalidArgument(StrCat(flags.messages,
                                          " must hold a JSON array of messages or an object, not ",
                                          data.type_name()));
  }
  if (data.is_object() && !data.contains("messages")) {
    return Status::InvalidArgument(flags.messages + " is an object without \"messages\"");
  }
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  vars["messages"] = data.is_array() ? data : data["messages"];
  vars["tools"] = nullptr;
  vars["documents"] = nullptr;
  vars["add_generation_prompt"] = !flags.no_generation_prompt;
  vars["bos_token"] = flags.bos_token.value_or(default_bos);
  vars["eos_token"] = flags.eos_token.value_or(default_eos);
  if (data.is_object()) {
    for (auto it = data.begin(); it != data.end(); ++it) vars[it.key()] = it.value();
  }
  return vars;
}

CLI::App* AddTemplateCommand(CLI::App& app, TemplateFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "template", "render a chat template for a conversation, as apply_chat_template does");
  CLI::Option* model =
      cmd->add_option("--model", f.model, "model folder or .gguf file: its chat template");
  CLI::Option* tmpl = cmd->add_option("--template", f.template_path, "a Jinja template file");
  model->excludes(tmpl);
  cmd->add_option("--messages", f.messages,
                  "JSON file: an array of messages, or an object of template variables")
      ->required();
  cmd->add_flag("--no-generation-prompt", f.no_generation_prompt, "add_generation_prompt = false");
  cmd->add_option("--bos-token", f.bos_token, "bos_token (default: the model's, else empty)");
  cmd->add_option("--eos-token", f.eos_token, "eos_token (default: the model's, else empty)");
  cmd->add_option("--strftime-now", f.strftime_now,
                  "seconds since the epoch: strftime_now's clock, in UTC (default: local now)");
  cmd->add_flag("--ids", f.ids, "print the text's token ids (JSON) instead; needs --model");
  return cmd;
}

int RunTemplate(const TemplateFlags& f) {
  if (f.model.empty() == f.template_path.empty()) {
    return Fail(kCommand, Status::InvalidArgument("give one of --model and --template"));
  }
  if (f.ids && f.model.empty())
    return Fail(kCommand, Status::InvalidArgument("--ids needs --model"));
  Result<std::string> messages = ReadFlagFile(f.messages, "--messages");
  if (!messages) return Fail(kCommand, messages.error());

  std::string source, bos, eos;
  std::optional<checkpoint::Checkpoint> checkpoint;
  if (!f.model.empty()) {
    Result<checkpoint::Checkpoint> c = checkpoint::LoadCheckpoint(f.model);
    if (!c) return Fail(kCommand, c.error());
    checkpoint = std::move(*c);
    if (checkpoint->chat_template.empty()) {
      return Fail(kCommand, Status::NotFound(f.model + " has no chat template"));
    }
    source = checkpoint->chat_template;
    if (const auto& tok = checkpoint->tokenizer) {
      if (tok->bos_id()) bos = tok->TokenText(*tok->bos_id());
      if (tok->eos_id()) eos = tok->TokenText(*tok->eos_id());
    }
  } else {
    Result<std::string> text = ReadFlagFile(f.template_path, "--template");
    if (!text) return Fail(kCommand, text.error());
    source = std::move(*text);
  }

  Result<nlohmann::ordered_json> vars = TemplateVariables(*messages, f, bos, eos);
  if (!vars) return Fail(kCommand, vars.error());
  Result<chat::Template> t = chat::Template::Parse(source);
  if (!t) return Fail(kCommand, t.error());
  chat::RenderOptions options;
  options.now_epoch_seconds = f.strftime_now;
  Result<std::string> text = t->Render(*vars, options);
  if (!text) return Fail(kCommand, text.error());

  if (f.ids) {
    if (!checkpoint->tokenizer) {
      return Fail(kCommand, Status::NotFound(f.model + " has no tokenizer to give ids with"));
    }
    // The template wrote any special tokens (bos included) as text.
    Result<std::vector<int32_t>> ids =
        checkpoint->tokenizer->Encode(*text, /*add_special_tokens=*/false);
    if (!ids) return Fail(kCommand, ids.error());
    std::cout << nlohmann::json(*ids).dump() << "\n";
    return 0;
  }
  std::fwrite(text->data(), 1, text->size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace folio::cli
