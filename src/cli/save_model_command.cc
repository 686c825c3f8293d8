#include "cli/save_model_command.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/engine_flags.h"
#include "folio/checkpoint/model_io.h"
#include "folio/model/model.h"

namespace folio::cli {
namespace {

// Errors read "folio: ...", as they always have for this command.
constexpr std::string_view kCommand = "";

}  // namespace

CLI::App* AddSaveModelCommand(CLI::App& app, SaveModelFlags& f) {
  CLI::App* cmd = app.add_subcommand("save-model", "write the built-in model to a folder");
  cmd->add_option("dir", f.dir)->required();
  cmd->add_option("--seed", f.seed);
  return cmd;
}

int RunSaveModel(const SaveModelFlags& f) {
  Result<model::Model> m = model::Model::FromSeed(model::WorkedExampleConfig(), f.seed);
  if (!m) return Fail(kCommand, m.error());
  if (Status s = checkpoint::SaveModel(*m, f.dir); !s.ok()) return Fail(kCommand, s);
  std::cout << "saved model " << m->id() << " to " << f.dir << "\n";
  return 0;
}

}  // namespace folio::cli
