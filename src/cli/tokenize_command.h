// `folio tokenize`: a model's tokenizer alone (a model folder, a GGUF file
// with or without tensors, or a bare tokenizer.json), so its ids can be
// checked against another tool's. Text comes from --text or standard
// input; ids go out as JSON. --decode reads comma-separated ids instead.
#ifndef FOLIO_CLI_TOKENIZE_COMMAND_H_
#define FOLIO_CLI_TOKENIZE_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace folio::cli {

struct TokenizeFlags {
  std::string model;
  std::optional<std::string> text;
  bool decode = false;
  bool no_special = false;  // encode: no bos/eos; decode: keep special tokens' text
  std::optional<std::string> tokenizer_pre;  // replaces the GGUF's tokenizer.ggml.pre
};

CLI::App* AddTokenizeCommand(CLI::App& app, TokenizeFlags& flags);
int RunTokenize(const TokenizeFlags& flags);

}  // namespace folio::cli

#endif  // FOLIO_CLI_TOKENIZE_COMMAND_H_
