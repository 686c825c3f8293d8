// `folio embed`: pooled embeddings of texts (or token ids) from a model,
// printed as JSON in the shape of /v1/embeddings' reply. Every input runs
// through one engine at once, batched as the server batches them.
#ifndef FOLIO_CLI_EMBED_COMMAND_H_
#define FOLIO_CLI_EMBED_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "folio/serving/engine_args.h"

namespace folio::cli {

struct EmbedFlags {
  serving::EngineArgs engine;
  std::vector<std::string> texts;   // --text, repeatable
  std::vector<std::string> tokens;  // --tokens "1,2,3", repeatable
  std::string pooling;              // last, mean, cls; empty: the model's default
  uint64_t dimensions = 0;          // 0: all
  bool no_normalize = false;
};

CLI::App* AddEmbedCommand(CLI::App& app, EmbedFlags& flags);
int RunEmbed(const EmbedFlags& flags);

}  // namespace folio::cli

#endif  // FOLIO_CLI_EMBED_COMMAND_H_
