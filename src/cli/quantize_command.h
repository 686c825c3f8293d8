// `folio quantize IN OUT --type T`: a model file in, a GGUF file out with
// the chosen type for its matrices (checkpoint/quantize_model.h), and a
// JSON summary on stdout.
#ifndef FOLIO_CLI_QUANTIZE_COMMAND_H_
#define FOLIO_CLI_QUANTIZE_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "folio/checkpoint/quantize_model.h"

namespace folio::cli {

struct QuantizeFlags {
  std::string input;     // anything LoadModel reads
  std::string output;    // the GGUF file to write
  std::string type;      // a QuantizeScheme name
  uint64_t threads = 0;  // 0 = all cores
};

CLI::App* AddQuantizeCommand(CLI::App& app, QuantizeFlags& flags);
int RunQuantize(const QuantizeFlags& flags);

// The summary: the input, output, scheme and file type; per written type
// its tensors, elements, bytes, bits per weight and RMS relative error
// sqrt(sum (q - w)^2 / sum w^2) against the source weights; the same
// overall; and each fallback (tensor, shape, wanted and used type, why).
nlohmann::json QuantizeReportJson(const QuantizeFlags& flags,
                                  const checkpoint::QuantizeScheme& scheme,
                                  const checkpoint::QuantizeReport& report);

}  // namespace folio::cli

#endif  // FOLIO_CLI_QUANTIZE_COMMAND_H_
