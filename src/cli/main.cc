// build/bin/folio: the command-line front end, one file per subcommand.
//   folio layout          the worked-example report, JSON (cli/layout_command.h)
//   folio generate        a continuation from the built-in or a saved model
//                         (cli/generate_command.h)
//   folio logits          prefill logits and a greedy continuation (cli/logits_command.h)
//   folio batch           a short continuous-batching run (cli/batch_command.h)
//   folio tokenize        a model's tokenizer alone (cli/tokenize_command.h)
//   folio grammar         a constraint's GBNF, or texts checked (cli/grammar_command.h)
//   folio embed           pooled embeddings of texts, JSON (cli/embed_command.h)
//   folio info            a model's shape and sizes (cli/info_command.h)
//   folio serve           OpenAI-compatible HTTP server (cli/serve_command.h)
//   folio chat            an interactive chat in the terminal (cli/chat_command.h)
//   folio template        a chat template rendered for a conversation
//                         (cli/template_command.h)
//   folio save-model      the built-in model as config.json + safetensors
//                         (cli/save_model_command.h)
//   folio quantize        a model file as GGUF with its matrices in another type
//                         (cli/quantize_command.h)
//   folio bench attention    paged vs dense attention decode timings (JSON)
//   folio bench decode       prefill / decode tokens/s vs the bandwidth floor (JSON)
//   folio bench serve        continuous batching: dense vs gather vs paged (JSON)
//   folio bench kv-transfer  export / encode / write / read / import of a KV cache (JSON)
//   folio bench template     chat template render time (JSON)
//   folio bench sampling     logits processors' cost per token (JSON)
//   folio bench grammar      structured output on MaskBench: coverage, soundness, mask time (JSON)
//   folio kv export|import|inspect  KV snapshots between processes
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <optional>

#include "bench/attention_bench.h"
#include "bench/decode_bench.h"
#include "bench/grammar_bench.h"
#include "bench/kv_accuracy_bench.h"
#include "bench/kv_transfer_bench.h"
#include "bench/parallel_bench.h"
#include "bench/sampling_bench.h"
#include "bench/serve_bench.h"
#include "bench/speculative_bench.h"
#include "bench/template_bench.h"
#include "cli/batch_command.h"
#include "cli/chat_command.h"
#include "cli/embed_command.h"
#include "cli/engine_flags.h"
#include "cli/flag_lists.h"
#include "cli/generate_command.h"
#include "cli/grammar_command.h"
#include "cli/info_command.h"
#include "cli/kv_commands.h"
#include "cli/layout_command.h"
#include "cli/layout_report.h"
#include "cli/logits_command.h"
#include "cli/quantize_command.h"
#include "cli/save_model_command.h"
#include "cli/serve_command.h"
#include "cli/template_command.h"
#include "cli/tokenize_command.h"

#ifndef FOLIO_SOURCE_DIR
#define FOLIO_SOURCE_DIR "."
#endif

int main(int argc, char** argv) {
  using namespace folio::cli;
  CLI::App app{"folio: an LLM inference engine built around a paged KV cache"};
  app.require_subcommand(1);

  LayoutFlags layout;
  CLI::App* layout_cmd = AddLayoutCommand(app, layout);

  GenerateFlags gen;
  CLI::App* gen_cmd = AddGenerateCommand(app, gen);

  SaveModelFlags save;
  CLI::App* save_cmd = AddSaveModelCommand(app, save);

  EmbedFlags embed;
  CLI::App* embed_cmd = AddEmbedCommand(app, embed);
  TokenizeFlags tokenize;
  CLI::App* tokenize_cmd = AddTokenizeCommand(app, tokenize);
  GrammarFlags grammar_flags;
  CLI::App* grammar_cmd = AddGrammarCommand(app, grammar_flags);

  LogitsFlags logits;
  CLI::App* logits_cmd = AddLogitsCommand(app, logits);

  BatchFlags batch;
  CLI::App* batch_cmd = AddBatchCommand(app, batch);

  KvFlags kv_flags;
  const KvCommands kv_cmds = AddKvCommands(app, kv_flags);

  ServeFlags serve;
  CLI::App* serve_cmd = AddServeCommand(app, serve);
  ChatFlags chat_flags;
  CLI::App* chat_cmd = AddChatCommand(app, chat_flags);

  TemplateFlags template_flags;
  CLI::App* template_cmd = AddTemplateCommand(app, template_flags);

  QuantizeFlags quantize;
  CLI::App* quantize_cmd = AddQuantizeCommand(app, quantize);

  InfoFlags info;
  CLI::App* info_cmd = AddInfoCommand(app, info);

  folio::bench::AttentionBenchOptions bench_attention;
  CLI::App* bench_cmd = app.add_subcommand("bench", "benchmarks that print JSON");
  bench_cmd->require_subcommand(1);
  CLI::App* bench_attention_cmd =
      folio::bench::AddAttentionBenchCommand(*bench_cmd, bench_attention);
  folio::bench::DecodeBenchOptions bench_decode;
  CLI::App* bench_decode_cmd = folio::bench::AddDecodeBenchCommand(*bench_cmd, bench_decode);
  folio::bench::KvTransferBenchOptions bench_kv;
  CLI::App* bench_kv_cmd = folio::bench::AddKvTransferBenchCommand(*bench_cmd, bench_kv);
  folio::bench::ServeBenchOptions bench_serve;
  CLI::App* bench_serve_cmd = folio::bench::AddServeBenchCommand(*bench_cmd, bench_serve);
  folio::bench::TemplateBenchOptions bench_template;
  CLI::App* bench_template_cmd = folio::bench::AddTemplateBenchCommand(*bench_cmd, bench_template);
  folio::bench::ParallelBenchOptions bench_parallel;
  CLI::App* bench_parallel_cmd = folio::bench::AddParallelBenchCommand(*bench_cmd, bench_parallel);
  folio::bench::SpeculativeBenchOptions bench_speculative;
  CLI::App* bench_speculative_cmd =
      folio::bench::AddSpeculativeBenchCommand(*bench_cmd, bench_speculative);
  folio::bench::SamplingBenchOptions bench_sampling;
  CLI::App* bench_sampling_cmd = folio::bench::AddSamplingBenchCommand(*bench_cmd, bench_sampling);
  folio::bench::GrammarBenchOptions bench_grammar;
  CLI::App* bench_grammar_cmd = folio::bench::AddGrammarBenchCommand(*bench_cmd, bench_grammar);
  folio::bench::KvAccuracyBenchOptions bench_kv_accuracy;
  CLI::App* bench_kv_accuracy_cmd =
      folio::bench::AddKvAccuracyBenchCommand(*bench_cmd, bench_kv_accuracy);

  CLI11_PARSE(app, argc, argv);
  if (*bench_attention_cmd) {
    return folio::bench::RunAttentionBench(bench_attention, folio::bench::CommandLine(argc, argv));
  }
  if (*bench_kv_cmd) {
    return folio::bench::RunKvTransferBench(bench_kv, folio::bench::CommandLine(argc, argv));
  }
  if (*bench_serve_cmd) {
    return folio::bench::RunServeBench(bench_serve, folio::bench::CommandLine(argc, argv));
  }
  if (*bench_template_cmd) {
    return folio::bench::RunTemplateBench(bench_template, folio::bench::CommandLine(argc, argv));
  }
  if (*bench_parallel_cmd) {
    return folio::bench::RunParallelBench(bench_parallel, folio::bench::CommandLine(argc, argv));
  }
  if (*bench_speculative_cmd) {
    return folio::bench::RunSpeculativeBench(bench_speculative,
                                             folio::bench::CommandLine(argc, argv));
  }
  if (*bench_sampling_cmd) {
    return folio::bench::RunSamplingBench(bench_sampling, folio::bench::CommandLine(argc, argv));
  }
  if (*bench_grammar_cmd) {
    return folio::bench::RunGrammarBench(bench_grammar, folio::bench::CommandLine(argc, argv));
  }
  if (*bench_kv_accuracy_cmd) {
    return folio::bench::RunKvAccuracyBench(bench_kv_accuracy,
                                            folio::bench::CommandLine(argc, argv));
  }
  if (*bench_decode_cmd) {
    return folio::bench::RunDecodeBench(bench_decode, folio::bench::CommandLine(argc, argv));
  }
  if (*serve_cmd) return RunServe(serve);
  if (*chat_cmd) return RunChat(chat_flags);
  if (*template_cmd) return RunTemplate(template_flags);
  if (*quantize_cmd) return RunQuantize(quantize);
  if (*logits_cmd) return RunLogits(logits);
  if (*tokenize_cmd) return RunTokenize(tokenize);
  if (*grammar_cmd) return RunGrammar(grammar_flags);
  if (*embed_cmd) return RunEmbed(embed);
  if (*info_cmd) return RunInfo(info);
  if (*batch_cmd) return RunBatch(batch);
  if (*kv_cmds.exp) return RunKvExport(kv_flags);
  if (*kv_cmds.imp) return RunKvImport(kv_flags);
  if (*kv_cmds.inspect) return RunKvInspect(kv_flags);
  if (*layout_cmd) return RunLayout(layout);
  if (*gen_cmd) return RunGenerate(gen);
  if (*save_cmd) return RunSaveModel(save);
  return 0;
}
