#include "cli/batch_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "cli/engine_flags.h"
#include "folio/core/printable.h"
#include "folio/engine/engine.h"
#include "folio/model/model.h"
#include "folio/tokenizer/byte_tokenizer.h"

namespace folio::cli {
namespace {

// Errors read "folio: ...", as they always have for this command.
constexpr std::string_view kCommand = "";

}  // namespace

CLI::App* AddBatchCommand(CLI::App& app, BatchFlags& f) {
  CLI::App* cmd =
      app.add_subcommand("batch", "a short continuous-batching run, streamed step by step");
  cmd->add_option("--prompt", f.prompts, "repeat for several requests");
  cmd->add_option("--max-tokens", f.max_tokens);
  cmd->add_option("--page-size", f.page_size);
  cmd->add_option("--num-pages", f.num_pages);
  cmd->add_option("--max-num-batched-tokens", f.max_num_batched_tokens);
  cmd->add_option("--seed", f.seed);
  return cmd;
}

int RunBatch(const BatchFlags& f) {
  model::ModelConfig c = model::WorkedExampleConfig();
  c.max_positions = 64;
  Result<model::Model> m = model::Model::FromSeed(c, 20);
  if (!m) return Fail(kCommand, m.error());
  engine::EngineConfig ec;
  ec.page_size = f.page_size;
  ec.num_pages = f.num_pages;
  ec.max_num_batched_tokens = f.max_num_batched_tokens;
  ec.max_num_seqs = std::min<uint64_t>({f.prompts.size(), f.max_num_batched_tokens, 4});
  Result<engine::Engine> eng =
      engine::Engine::Create(*m, ec, nullptr, &tokenizer::ByteTokenizer::AsTokenizer());
  if (!eng) return Fail(kCommand, eng.error());
  std::map<engine::RequestId, size_t> index;
  for (size_t i = 0; i < f.prompts.size(); ++i) {
    engine::RequestParams p;
    p.sampling = {0.8, 40, 1.0, 0.0};
    p.max_tokens = f.max_tokens;
    p.seed = f.seed + i;
    Result<engine::RequestId> id =
        eng->AddRequest(tokenizer::ByteTokenizer::Encode(f.prompts[i], true, false), p);
    if (!id) return Fail(kCommand, id.error());
    index[*id] = i;
    std::cout << "request " << i << ": \"" << f.prompts[i] << "\" (" << f.prompts[i].size() + 1
              << " prompt tokens)\n";
  }
  std::vector<std::string> text(f.prompts.size());
  while (eng->HasUnfinished()) {
    Result<std::vector<engine::StepOutput>> step = eng->Step();
    if (!step) return Fail(kCommand, step.error());
    const kv::PoolStats stats = eng->cache().Stats();
    std::cout << "step " << eng->stats().steps << " (pages " << stats.pages_used << "/"
              << stats.pages_total << ", " << stats.pages_held_only << " only cached):";
    for (const engine::StepOutput& o : *step) {
      text[index[o.id]] += o.text;
      std::cout << "  [" << index[o.id] << "] +" << Printable(o.text);
      if (o.finish != engine::FinishReason::kNone) {
        std::cout << " (" << engine::FinishReasonName(o.finish) << ")";
      }
    }
    std::cout << "\n";
  }
  const kv::BlockPool& pool = eng->cache().pool();
  const engine::EngineStats st = eng->stats();
  // A fresh pool hands out pages 0, 1, 2, ... and reuses released ones
  // first, so the pages ever touched are exactly the peak in use; every
  // allocation beyond that reused a page another request had freed.
  std::cout << "summary: " << f.prompts.size() << " requests in " << st.steps << " steps, "
            << st.preemptions << " preemptions\n"
            << "  pages: peak " << pool.peak_used() << " of " << pool.num_pages() << ", "
            << pool.total_allocations() << " allocations of which "
            << pool.total_allocations() - pool.peak_used() << " reused freed pages\n"
            << "  prefix cache: " << st.prefix_hit_tokens << " of " << st.prefix_query_tokens
            << " cacheable prompt tokens reused ("
            << static_cast<int>(100.0 * st.prefix_hit_rate() + 0.5) << "%), " << st.prefix_evictions
            << " pages evicted, " << eng->cached_pages() << " still cached\n";
  if (Status s = eng->ClearPrefixCache(); !s.ok()) return Fail(kCommand, s);
  std::cout << "  after clearing the prefix cache: " << pool.num_used() << " pages in use, "
            << pool.num_free() << " free\n";
  return pool.num_used() == 0 ? 0 : 1;
}

}  // namespace folio::cli
