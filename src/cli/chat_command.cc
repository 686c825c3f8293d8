#include "cli/chat_command.h"

#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/served_model.h"
#include "folio/core/dtype.h"
#include "folio/core/thread_pool.h"
#include "folio/engine/engine.h"

namespace folio::cli {
namespace {

int Fail(const Status& s) {
  std::cerr << "folio chat: " << s.ToString() << "\n";
  return 1;
}

}  // namespace

CLI::App* AddChatCommand(CLI::App& app, ChatFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "chat", "chat with a model in the terminal (its own chat template; /reset, Ctrl-D exits)");
  cmd->add_option("--model", f.model, "model folder, .gguf file, or 'builtin' (default)");
  AddChatTemplateOption(*cmd, f.chat_template);
  AddTokenizerPreOption(*cmd, f.tokenizer_pre);
  cmd->add_option("--system", f.system, "a system message to start every conversation with");
  cmd->add_option("--max-tokens", f.max_tokens, "tokens per reply at most");
  cmd->add_option("--temperature", f.temperature, "0 = greedy (default)");
  cmd->add_option("--top-k", f.top_k, "0 = all");
  cmd->add_option("--top-p", f.top_p, "nucleus mass in (0, 1]");
  cmd->add_option("--seed", f.seed, "sampling seed");
  cmd->add_option("--threads", f.threads, "0 = all cores");
  cmd->add_option("--max-context", f.max_context, "positions the conversation may fill");
  cmd->add_option("--page-size", f.page_size, "KV tokens per page");
  cmd->add_option("--kv-dtype", f.kv_dtype, "f32, bf16, f16, i8, f8e4m3 or f64");
  AddMatMulActivationsOption(*cmd, f.matmul_activations);
  return cmd;
}

int RunChat(const ChatFlags& f) {
  Result<ServedModel> served = LoadServedModel(f.model, 4096, f.tokenizer_pre);
  if (!served) return Fail(served.error());
  Result<server::ChatFormat> format = served->MakeChatFormat(f.chat_template);
  if (!format) return Fail(format.error());
  Result<DType> kv_dtype = ParseDType(f.kv_dtype);
  if (!kv_dtype) return Fail(kv_dtype.error().WithContext("--kv-dtype"));
  Result<ops::MatMulActivations> activations = ops::ParseMatMulActivations(f.matmul_activations);
  if (!activations) return Fail(activations.error().WithContext("--matmul-activations"));
  const model::Model& m = *served->model;
  const tokenizer::Tokenizer& tok = served->tokenizer();
  const uint64_t context = std::min<uint64_t>(m.config().max_positions, f.max_context);

  // One engine for the whole conversation, with prefix caching: each turn
  // sends the whole conversation again, and every page of it that an
  // earlier turn filled is found in the cache instead of recomputed.
  engine::EngineConfig ec;
  ec.page_size = f.page_size;
  ec.num_pages = (context + f.page_size - 1) / f.page_size + 1;
  ec.kv_dtype = *kv_dtype;
  ec.matmul_activations = *activations;
  ec.max_num_seqs = 1;
  ec.max_num_batched_tokens = context;
  ec.prefix_caching = true;
  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::Create(f.threads);
  if (!pool) return Fail(pool.error());
  Result<engine::Engine> eng = engine::Engine::Create(m, ec, pool->get(), &tok);
  if (!eng) return Fail(eng.error());

  std::vector<int32_t> stops;
  if (!served->byte_level() && tok.eos_id()) stops.push_back(*tok.eos_id());
  for (int32_t id : format->end_of_turn_ids()) stops.push_back(id);

  const bool interactive = isatty(STDIN_FILENO) != 0;
  std::cerr << "folio chat: " << (served->builtin ? "builtin" : f.model) << ", chat template "
            << server::ChatFormatSourceName(format->source()) << "; /reset starts over, "
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
    Result<server::RenderedChat> rendered = format->Render(messages, true);
    if (!rendered) {
      messages.erase(messages.end() - 1);
      std::cerr << "folio chat: " << rendered.error().ToString() << "\n";
      continue;
    }
    Result<std::vector<int32_t>> ids =
        served->byte_level() ? served->EncodePrompt(rendered->text)
                             : tok.Encode(rendered->text, rendered->add_special_tokens);
    if (!ids) return Fail(ids.error());
    const std::vector<int32_t> prompt = std::move(*ids);
    if (prompt.size() + 1 > context) {
      messages.erase(messages.end() - 1);
      std::cerr << "folio chat: the conversation has " << prompt.size()
                << " tokens, beyond the context of " << context << "; /reset starts over\n";
      continue;
    }
    engine::RequestParams params;
    params.max_tokens = std::min(f.max_tokens, context - prompt.size() + 1);
    params.sampling.temperature = f.temperature;
    params.sampling.top_k = f.top_k;
    params.sampling.top_p = f.top_p;
    params.seed = f.seed + turn++;
    params.stop_token_ids = stops;
    Result<engine::RequestId> id = eng->AddRequest(prompt, params);
    if (!id) return Fail(id.error());
    std::string reply;
    while (eng->HasUnfinished()) {
      Result<std::vector<engine::StepOutput>> step = eng->Step();
      if (!step) return Fail(step.error());
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
