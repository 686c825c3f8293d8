#include "cli/tokenize_command.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/engine_flags.h"
#include "cli/flag_lists.h"
#include "folio/checkpoint/model_tokenizer.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::cli {
namespace {

// Errors read "folio: ...", as they always have for this command.
constexpr std::string_view kCommand = "";

}  // namespace

CLI::App* AddTokenizeCommand(CLI::App& app, TokenizeFlags& f) {
  CLI::App* cmd = app.add_subcommand(
      "tokenize", "a model's tokenizer alone: text to ids (or ids to text), as JSON");
  cmd->add_option("--model", f.model, "model folder, .gguf file or tokenizer.json")->required();
  cmd->add_option("--text", f.text, "the text (default: standard input)");
  cmd->add_flag("--decode", f.decode, "read comma-separated ids, print the text");
  cmd->add_flag("--no-special", f.no_special,
                "encode without bos/eos; decode special tokens as text");
  AddTokenizerPreOption(*cmd, f.tokenizer_pre);
  return cmd;
}

int RunTokenize(const TokenizeFlags& f) {
  Result<tokenizer::Tokenizer> tok = [&]() -> Result<tokenizer::Tokenizer> {
    if (std::filesystem::path(f.model).extension() == ".json") {
      if (f.tokenizer_pre) {
        return Status::InvalidArgument("--tokenizer-pre applies to a GGUF file; " + f.model +
                                       " is a tokenizer.json, which names its own pre-tokenizer");
      }
      return tokenizer::Tokenizer::FromTokenizerJson(f.model);
    }
    FOLIO_ASSIGN_OR_RETURN(std::optional<tokenizer::Tokenizer> t,
                           checkpoint::LoadModelTokenizer(f.model, f.tokenizer_pre));
    if (!t) return Status::NotFound(f.model + " has no tokenizer (no tokenizer.json)");
    return std::move(*t);
  }();
  if (!tok) return Fail(kCommand, tok.error());
  std::string text;
  if (f.text) {
    text = *f.text;
  } else {
    std::ostringstream in;
    in << std::cin.rdbuf();
    text = in.str();
  }
  if (f.decode) {
    Result<std::vector<uint64_t>> parsed = cli::ParseUintList("--text", text);
    if (!parsed) return Fail(kCommand, parsed.error());
    std::vector<int32_t> ids;
    for (const uint64_t id : *parsed) {
      if (id > INT32_MAX)
        return Fail(kCommand, Status::OutOfRange("token id " + std::to_string(id)));
      ids.push_back(static_cast<int32_t>(id));
    }
    Result<std::string> decoded = tok->Decode(ids, /*skip_special_tokens=*/!f.no_special);
    if (!decoded) return Fail(kCommand, decoded.error());
    std::cout << nlohmann::json{{"text", *decoded}}.dump() << "\n";
    return 0;
  }
  Result<std::vector<int32_t>> ids = tok->Encode(text, /*add_special_tokens=*/!f.no_special);
  if (!ids) return Fail(kCommand, ids.error());
  std::cout << nlohmann::json{{"ids", *ids}}.dump() << "\n";
  return 0;
}

}  // namespace folio::cli
