#include "cli/chat_command.h"

#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <variant>

#include "cli/engine_flags.h"
#include "folio/core/str_cat.h"
#include "folio/engine/engine.h"
#include "folio/grammar/structured_output.h"
#include "folio/serving/chat_request.h"
#include "folio/serving/engine_args.h"

namespace folio::cli {
namespace {

constexpr std::string_view kCommand = "chat";
using json = nlohmann::ordered_json;

// --tools and --tool-choice as a chat body's fields (none without --tools),
// checked here so a bad file fails at start.
Result<json> ToolFields(const ChatFlags& f) {
  json fields = json::object();
  if (f.tools_file.empty()) {
    if (f.tool_choice != "auto") return Status::InvalidArgument("--tool-choice needs --tools");
    return fields;
  }
  FOLIO_ASSIGN_OR_RETURN(const std::string text, ReadFlagFile(f.tools_file, "--tools"));
  fields["tools"] = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (fields["tools"].is_discarded()) {
    return Status::InvalidArgument(StrCat("--tools: ", f.tools_file, " is not JSON"));
  }
  const std::string& c = f.tool_choice;
  fields["tool_choice"] = c == "auto" || c == "none" || c == "required"
                              ? json(c)
                              : json{{"type", "function"}, {"function", {{"name", c}}}};
  const json parallel;  // absent: the default
  std::variant<serving::ChatTools, serving::FieldError> tools =
      serving::ParseChatTools(&fields["tools"], &fields["tool_choice"], &parallel);
  if (const auto* e = std::get_if<serving::FieldError>(&tools)) {
    return Status::InvalidArgument(StrCat(e->field == "tool_choice" ? "--tool-choice" : "--tools",
                                          ": ", e->field, ": ", e->message));
  }
  return fields;
}

// One conversation's engine and how its turns are prepared and read.
struct Chat {
  const ChatFlags& flags;
  const serving::ChatFormat& format;
  serving::ChatParsers parsers;
  const serving::ServedModel& served;
  engine::Engine& engine;
  std::vector<int32_t> eos;  // the model's end ids and the template's end of turn
  uint64_t context = 0;
  uint64_t turn = 0;

  // The assistant's reply to `messages` (the chat body's other fields in
  // `fields`), streamed: content to standard output, reasoning to standard
  // error, calls as lines. nullopt, with a note on standard error, when the
  // conversation cannot be rendered or no longer fits.
  Result<std::optional<json>> Reply(const json& messages, json fields);
  // Shows what a piece of the reply settled, and keeps it in `reply`.
  static void Show(const serving::ChatDelta& d, serving::ChatDelta& reply);
};

void Chat::Show(const serving::ChatDelta& d, serving::ChatDelta& reply) {
  if (!d.reasoning.empty()) std::cerr << d.reasoning << std::flush;
  std::cout << d.content;
  for (const serving::ToolCall& c : d.calls) {
    std::cout << "\n[call " << c.name << " " << c.arguments << "]";
  }
  std::cout << std::flush;
  reply.Append(d);
}

Result<std::optional<json>> Chat::Reply(const json& messages, json fields) {
  fields["messages"] = messages;
  std::variant<serving::ChatRequest, serving::FieldError> request =
      serving::ParseChatRequest(fields);
  std::variant<serving::PreparedChat, serving::FieldError> prepared =
      std::holds_alternative<serving::FieldError>(request)
          ? std::get<serving::FieldError>(request)
          : serving::PrepareChat(format, std::get<serving::ChatRequest>(request), parsers);
  if (const auto* e = std::get_if<serving::FieldError>(&prepared)) {
    std::cerr << "folio chat: " << e->field << ": " << e->message << "\n";
    return std::optional<json>();
  }
  serving::PreparedChat& chat = std::get<serving::PreparedChat>(prepared);
  Result<std::vector<int32_t>> ids =
      served.byte_level()
          ? served.EncodePrompt(chat.prompt.text)
          : served.tokenizer().Encode(chat.prompt.text, chat.prompt.add_special_tokens);
  if (!ids) return ids.error();
  const std::vector<int32_t> prompt = std::move(*ids);
  if (prompt.size() + 1 > context) {
    std::cerr << "folio chat: the conversation has " << prompt.size()
              << " tokens, beyond the context of " << context << "; /reset starts over\n";
    return std::optional<json>();
  }
  engine::RequestParams params = flags.request;
  params.max_tokens = std::min(flags.max_tokens, context - prompt.size() + 1);
  params.sampling.temperature = flags.temperature;
  params.sampling.top_k = flags.top_k;
  params.sampling.top_p = flags.top_p;
  params.seed = flags.seed + turn++;
  params.eos_token_ids = eos;
  // A harmony reply's parser reads its special tokens.
  if (chat.output.harmony) params.skip_special_tokens = false;
  if (chat.tool_grammar) {
    grammar::StructuredOutput o;
    o.kind = grammar::StructuredOutput::Kind::kGrammar;
    o.text = std::move(*chat.tool_grammar);
    Result<std::shared_ptr<const grammar::Grammar>> g = served.grammars->Get(o);
    if (!g) return g.error().WithContext("--tools");
    params.grammar = std::move(*g);
  }
  chat.output.call_id_seed = params.seed;
  serving::ChatOutputParser parser(chat.output);
  FOLIO_RETURN_IF_ERROR(engine.AddRequest(prompt, params).status());
  serving::ChatDelta reply;
  while (engine.HasUnfinished()) {
    FOLIO_ASSIGN_OR_RETURN(const std::vector<engine::StepOutput> step, engine.Step());
    for (const engine::StepOutput& o : step) {
      serving::ChatDelta d;
      if (chat.output.active()) {
        d = parser.Feed(o.text);
      } else {
        d.content = o.text;
      }
      Show(d, reply);
    }
  }
  if (chat.output.active()) Show(parser.Finish(), reply);
  std::cout << "\n" << std::flush;
  json message = {{"role", "assistant"}, {"content", reply.content}};
  if (!reply.calls.empty()) {
    if (reply.content.empty()) message["content"] = nullptr;
    json calls = json::array();
    for (const serving::ToolCall& c : reply.calls) {
      calls.push_back({{"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    message["tool_calls"] = std::move(calls);
  }
  return std::optional<json>(std::move(message));
}

}  // namespace

CLI::App* AddChatCommand(CLI::App& app, ChatFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "chat", "chat with a model in the terminal (its own chat template; /reset, Ctrl-D exits)");
  f.engine.builtin_positions = 4096;
  AddEngineFlags(*cmd, f.engine, {.backend = false});
  AddChatTemplateOption(*cmd, f.chat_template);
  cmd->add_option("--system", f.system, "a system message to start every conversation with");
  cmd->add_option("--max-tokens", f.max_tokens, "tokens per reply at most");
  cmd->add_option("--temperature", f.temperature, "0 = greedy (default)");
  cmd->add_option("--top-k", f.top_k, "0 = all");
  cmd->add_option("--top-p", f.top_p, "nucleus mass in (0, 1]");
  cmd->add_option("--seed", f.seed, "sampling seed");
  cmd->add_option("--max-context", f.max_context, "positions the conversation may fill");
  cmd->add_option("--tools", f.tools_file,
                  "a JSON file holding an array of OpenAI function tools; the model's calls are "
                  "shown and each tool's result is read from the next input line");
  cmd->add_option("--tool-choice", f.tool_choice,
                  "auto (default), none, required or a function's name, for the first reply "
                  "to each line");
  cmd->add_option("--tool-call-parser", f.tool_call_parser,
                  "auto (the template's format), none, hermes, llama3_json, mistral, generic or "
                  "harmony");
  AddRequestParamFlags(*cmd, f.request);
  return cmd;
}

int RunChat(const ChatFlags& f) {
  serving::EngineArgs args = f.engine;
  if (Status s = args.Validate(serving::ArgNames::Flag()); !s.ok()) return Fail(kCommand, s);
  Result<json> tool_fields = ToolFields(f);
  if (!tool_fields) return Fail(kCommand, tool_fields.error());
  Result<serving::ChatParsers> parsers = serving::MakeChatParsers(f.tool_call_parser, "auto");
  if (!parsers) return Fail(kCommand, parsers.error().WithContext("--tool-call-parser"));
  Result<serving::ServedModel> loaded =
      serving::LoadServedModel(args.model, args.builtin_positions, args.tokenizer_pre);
  if (!loaded) return Fail(kCommand, loaded.error());
  Result<serving::ChatFormat> format = loaded->MakeChatFormat(f.chat_template);
  if (!format) return Fail(kCommand, format.error());
  if (Status can = format->CanChat(); !can.ok()) return Fail(kCommand, can);
  const uint64_t context = std::min<uint64_t>(loaded->model->config().max_positions, f.max_context);

  // One engine for the whole conversation, with prefix caching: each turn
  // sends the whole conversation again, and every page of it that an
  // earlier turn filled is found in the cache instead of recomputed.
  args.num_pages = (context + args.page_size - 1) / args.page_size + 1;
  args.max_num_seqs = 1;
  args.max_num_batched_tokens = context;
  args.prefix_caching = true;
  Result<std::unique_ptr<serving::ServingEngine>> built =
      serving::ServingEngine::Create(std::move(*loaded), args, serving::ArgNames::Flag());
  if (!built) return Fail(kCommand, built.error());
  Chat chat{.flags = f,
            .format = *format,
            .parsers = *parsers,
            .served = (*built)->served(),
            .engine = (*built)->engine(),
            .eos = (*built)->served().StopTokenIds(),
            .context = context,
            .turn = 0};
  for (int32_t id : format->end_of_turn_ids()) chat.eos.push_back(id);

  const bool interactive = isatty(STDIN_FILENO) != 0;
  std::cerr << "folio chat: " << (chat.served.builtin ? "builtin" : args.model)
            << ", chat template " << serving::ChatFormatSourceName(format->source())
            << (f.tools_file.empty() ? "" : ", tools from " + f.tools_file)
            << "; /reset starts over, Ctrl-D exits\n";
  json messages = json::array();
  const auto reset = [&] {
    messages = json::array();
    if (f.system) messages.push_back({{"role", "system"}, {"content", *f.system}});
  };
  reset();
  std::string line;
  while (true) {
    if (interactive) std::cerr << "> " << std::flush;
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      reset();
      std::cerr << "(conversation reset)\n";
      continue;
    }
    messages.push_back({{"role", "user"}, {"content", line}});
    json fields = *tool_fields;
    for (uint64_t round = 0; round <= kMaxToolRounds; ++round) {
      Result<std::optional<json>> reply = chat.Reply(messages, fields);
      if (!reply) return Fail(kCommand, reply.error());
      if (!*reply) {
        if (round == 0) messages.erase(messages.end() - 1);  // the line was not answered
        break;
      }
      messages.push_back(std::move(**reply));
      const json* calls =
          messages.back().contains("tool_calls") ? &messages.back()["tool_calls"] : nullptr;
      if (calls == nullptr) break;
      // The user is the tools: one line of input per call is its result.
      for (const json& c : *calls) {
        std::cerr << "result of " << c["function"]["name"].get<std::string>() << "> " << std::flush;
        if (!std::getline(std::cin, line)) return 0;
        messages.push_back({{"role", "tool"}, {"tool_call_id", c["id"]}, {"content", line}});
      }
      if (fields.contains("tool_choice")) fields["tool_choice"] = "auto";
      if (round == kMaxToolRounds) {
        std::cerr << "folio chat: " << kMaxToolRounds
                  << " rounds of tool calls; type the next line\n";
      }
    }
  }
  if (interactive) std::cerr << "\n";
  return 0;
}

}  // namespace folio::cli
