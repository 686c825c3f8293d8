// `folio info MODEL`: what a model is and what it costs to run, as JSON.
#ifndef FOLIO_CLI_INFO_COMMAND_H_
#define FOLIO_CLI_INFO_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace folio::cli {

struct InfoFlags {
  std::string path;  // a model folder or .gguf file
};

CLI::App* AddInfoCommand(CLI::App& app, InfoFlags& flags);
int RunInfo(const InfoFlags& flags);

}  // namespace folio::cli

#endif  // FOLIO_CLI_INFO_COMMAND_H_
