// `folio save-model DIR`: the built-in model (the worked example's shape,
// weights from --seed) written as config.json + safetensors.
#ifndef FOLIO_CLI_SAVE_MODEL_COMMAND_H_
#define FOLIO_CLI_SAVE_MODEL_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace folio::cli {

struct SaveModelFlags {
  std::string dir;
  uint64_t seed = 20;
};

CLI::App* AddSaveModelCommand(CLI::App& app, SaveModelFlags& flags);
int RunSaveModel(const SaveModelFlags& flags);

}  // namespace folio::cli

#endif  // FOLIO_CLI_SAVE_MODEL_COMMAND_H_
