#include "cli/chat_command.h"

#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/engine_flags.h"
#include "folio/engine/engine.h"
#include "folio/serving/engine_args.h"

namespace folio::cli {
namespace {

constexpr std::string_view kCommand = "chat";

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
  AddRequestParamFlags(*cmd, f.request);
  return cmd;
}

int RunChat(const ChatFlags& f) {
  serving::EngineArgs args = f.engine;
  if (Status s = args.Validate(serving::ArgNames::Flag()); !s.ok()) return Fail(kCommand, s);
  Result<serving::ServedModel> loaded =
      serving::LoadServedModel(args.model, args.builtin_positions, args.tokenizer_pre);
  if (!loaded) return Fail(kCommand, loaded.error());
  Result<serving::ChatFormat> format = loaded->MakeChatFormat(f.chat_template);
  if (!format) return Fail(kCommand, format.error());
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
  const serving::ServedModel* served = &(*built)->served();
  engine::Engine* eng = &(*built)->engine();
  const tokenizer::Tokenizer& tok = served->tokenizer();

  std::vector<int32_t> eos = served->StopTokenIds();
  for (int32_t id : format->end_of_turn_ids()) eos.push_back(id);

  const bool interactive = isatty(STDIN_FILENO) != 0;
  std::cerr << "folio chat: " << (served->builtin ? "builtin" : args.model) << ", chat template "
            << serving::ChatFormatSourceName(format->source()) << "; /reset starts over, "
            << "Ctrl-D exits\n";
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  const auto reset = [&] {
    messages = nlohmann::ordered_json::array();
    if (f.system) messages.push_back({{"role", "system"}, {"content", *f.system}});
  };
  reset();
  uint64_t turn = 0;
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
    Result<serving::RenderedChat> rendered = format->Render(messages, true);
    if (!rendered) {
      messages.erase(messages.end() - 1);
      std::cerr << "folio chat: " << rendered.error().ToString() << "\n";
      continue;
    }
    Result<std::vector<int32_t>> ids =
        served->byte_level() ? served->EncodePrompt(rendered->text)
                             : tok.Encode(rendered->text, rendered->add_special_tokens);
    if (!ids) return Fail(kCommand, ids.error());
    const std::vector<int32_t> prompt = std::move(*ids);
    if (prompt.size() + 1 > context) {
      messages.erase(messages.end() - 1);
      std::cerr << "folio chat: the conversation has " << prompt.size()
                << " tokens, beyond the context of " << context << "; /reset starts over\n";
      continue;
    }
    engine::RequestParams params = f.request;
    params.max_tokens = std::min(f.max_tokens, context - prompt.size() + 1);
    params.sampling.temperature = f.temperature;
    params.sampling.top_k = f.top_k;
    params.sampling.top_p = f.top_p;
    params.seed = f.seed + turn++;
    params.eos_token_ids = eos;
    Result<engine::RequestId> id = eng->AddRequest(prompt, params);
    if (!id) return Fail(kCommand, id.error());
    std::string reply;
    while (eng->HasUnfinished()) {
      Result<std::vector<engine::StepOutput>> step = eng->Step();
      if (!step) return Fail(kCommand, step.error());
      for (const engine::StepOutput& o : *step) {
        std::cout << o.text << std::flush;
        reply += o.text;
      }
    }
    std::cout << "\n" << std::flush;
    messages.push_back({{"role", "assistant"}, {"content", reply}});
  }
  if (interactive) std::cerr << "\n";
  return 0;
}

}  // namespace folio::cli
