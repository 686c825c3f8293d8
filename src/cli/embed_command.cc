#include "cli/embed_command.h"

#include <algorithm>
#include <charconv>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/engine_flags.h"
#include "cli/flag_lists.h"
#include "folio/core/str_cat.h"
#include "folio/engine/engine.h"

namespace folio::cli {
namespace {

constexpr std::string_view kCommand = "embed";

}  // namespace

CLI::App* AddEmbedCommand(CLI::App& app, EmbedFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "embed", "pooled embeddings of texts or token ids, as JSON (/v1/embeddings' shape)");
  f.engine.builtin_positions = 4096;
  AddEngineFlags(*cmd, f.engine, {.backend = false});
  cmd->add_option("--text", f.texts, "a text to embed (repeatable)");
  cmd->add_option("--tokens", f.tokens, "token ids to embed, e.g. 1,2,3 (repeatable)");
  cmd->add_option("--pooling", f.pooling,
                  "last, mean or cls (default: the model's own; else cls for an encoder, last "
                  "for a decoder)")
      ->check(CLI::IsMember({"last", "mean", "cls"}));
  cmd->add_option("--dimensions", f.dimensions, "keep the first N features (0 = all)");
  cmd->add_flag("--no-normalize", f.no_normalize, "leave the vector unnormalized");
  return cmd;
}

int RunEmbed(const EmbedFlags& f) {
  if (f.texts.empty() && f.tokens.empty()) {
    return Fail(kCommand, Status::InvalidArgument("give --text or --tokens (repeatable)"));
  }
  serving::EngineArgs args = f.engine;
  if (Status s = args.Validate(serving::ArgNames::Flag()); !s.ok()) return Fail(kCommand, s);
  Result<serving::ServedModel> loaded =
      serving::LoadServedModel(args.model, args.builtin_positions, args.tokenizer_pre);
  if (!loaded) return Fail(kCommand, loaded.error());
  std::vector<std::vector<int32_t>> inputs;
  for (const std::string& text : f.texts) {
    Result<std::vector<int32_t>> ids = loaded->EncodePrompt(text);
    if (!ids) return Fail(kCommand, ids.error().WithContext("--text"));
    inputs.push_back(std::move(*ids));
  }
  for (const std::string& list : f.tokens) {
    Result<std::vector<uint64_t>> ids = ParseUintList("--tokens", list);
    if (!ids) return Fail(kCommand, ids.error());
    std::vector<int32_t> tokens;
    for (const uint64_t t : *ids) {
      if (t > INT32_MAX) return Fail(kCommand, Status::OutOfRange(StrCat("token id ", t)));
      tokens.push_back(static_cast<int32_t>(t));
    }
    inputs.push_back(std::move(tokens));
  }
  // Room for every input at once, no prefix cache (each is computed whole).
  uint64_t pages = 1, tokens = 0, longest = 0;
  for (const std::vector<int32_t>& input : inputs) {
    if (input.empty()) return Fail(kCommand, Status::InvalidArgument("an input has no tokens"));
    pages += (input.size() + args.page_size - 1) / args.page_size;
    tokens += input.size();
    longest = std::max<uint64_t>(longest, input.size());
  }
  args.num_pages = pages;
  args.prefix_caching = false;
  // An encoder computes an input in one step: a step holds the longest.
  if (loaded->model->config().IsEncoder()) {
    args.max_num_batched_tokens = std::max(args.max_num_batched_tokens, longest);
  }
  const std::string model_name = loaded->builtin ? "builtin" : args.model;
  const engine::Pooling pooling =
      f.pooling.empty() ? loaded->DefaultPooling() : *engine::PoolingFromName(f.pooling);
  Result<std::unique_ptr<serving::ServingEngine>> built =
      serving::ServingEngine::Create(std::move(*loaded), args, serving::ArgNames::Flag());
  if (!built) return Fail(kCommand, built.error());
  engine::Engine& eng = (*built)->engine();
  engine::RequestParams params;
  params.pooling = pooling;
  params.normalize = !f.no_normalize;
  params.dimensions = f.dimensions;
  std::map<engine::RequestId, size_t> index;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Result<engine::RequestId> id = eng.AddRequest(inputs[i], params);
    if (!id) return Fail(kCommand, id.error().WithContext(StrCat("input ", i)));
    index[*id] = i;
  }
  std::vector<std::vector<float>> vectors(inputs.size());
  while (eng.HasUnfinished()) {
    Result<std::vector<engine::StepOutput>> step = eng.Step();
    if (!step) return Fail(kCommand, step.error());
    for (engine::StepOutput& o : *step) {
      if (!o.embedding.empty()) vectors[index.at(o.id)] = std::move(o.embedding);
    }
  }
  // Floats in their shortest exact form, as the server writes them.
  std::string out = "{\"object\": \"list\", \"data\": [";
  char text[32];
  for (size_t i = 0; i < vectors.size(); ++i) {
    out += StrCat(i == 0 ? "" : ", ", "{\"object\": \"embedding\", \"index\": ", i,
                  ", \"embedding\": [");
    for (size_t j = 0; j < vectors[i].size(); ++j) {
      const std::to_chars_result r = std::to_chars(text, text + sizeof text, vectors[i][j]);
      out += j == 0 ? "" : ", ";
      out.append(text, r.ptr);
    }
    out += "]}";
  }
  out += StrCat("], \"model\": ", nlohmann::json(model_name).dump(),
                ", \"pooling\": ", nlohmann::json(engine::PoolingName(pooling)).dump(),
                ", \"usage\": {\"prompt_tokens\": ", tokens, ", \"total_tokens\": ", tokens, "}}");
  std::cout << out << "\n";
  return 0;
}

}  // namespace folio::cli
