// `folio kv ...`: KV snapshots from the command line, so a prompt prefilled
// by one process is continued by another (format/kv_snapshot.h).
//   folio kv export   run prompts a few steps, write their pages + state
//   folio kv import   read a snapshot into a fresh engine and finish it
//   folio kv inspect  a human (or --json) summary of a snapshot file
#ifndef FOLIO_CLI_KV_COMMANDS_H_
#define FOLIO_CLI_KV_COMMANDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "folio/serving/engine_args.h"

namespace CLI {
class App;
}

namespace folio::cli {

struct KvFlags {
  // --model (the built-in one: 256 positions), --page-size, --num-pages
  // (512), --kv-dtype; AddKvCommands sets these defaults.
  serving::EngineArgs engine;
  std::vector<std::string> prompts = {"paged attention moves"};
  uint64_t max_tokens = 12;
  uint64_t decode_steps = 3;  // tokens each request generates before export
  double temperature = 0.8;
  uint64_t top_k = 40;
  uint64_t seed = 7;
  std::string file;        // export: --output; import / inspect: positional
  bool reference = false;  // export: finish here too, after exporting
  bool json = false;       // inspect: machine-readable
};

struct KvCommands {
  CLI::App* exp;
  CLI::App* imp;
  CLI::App* inspect;
};

KvCommands AddKvCommands(CLI::App& app, KvFlags& flags);
int RunKvExport(const KvFlags& flags);
int RunKvImport(const KvFlags& flags);
int RunKvInspect(const KvFlags& flags);

}  // namespace folio::cli

#endif  // FOLIO_CLI_KV_COMMANDS_H_
