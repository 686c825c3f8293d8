// The flags of every subcommand that runs a model, bound to one
// serving::EngineArgs: a command sets its own defaults in the struct, adds
// the flags it takes, and hands the struct to serving (which names a bad
// value by its flag, serving::ArgNames::Flag()).
#ifndef FOLIO_CLI_ENGINE_FLAGS_H_
#define FOLIO_CLI_ENGINE_FLAGS_H_

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "folio/core/status.h"
#include "folio/engine/request.h"
#include "folio/serving/engine_args.h"

namespace folio::cli {

// Which flags a command takes beyond --model, --page-size and --kv-dtype,
// which every one does.
struct EngineFlagSet {
  bool tokenizer_pre = true;       // --tokenizer-pre
  bool num_pages = false;          // --num-pages
  bool scheduling = false;         // --max-num-seqs, --max-num-batched-tokens
  bool builtin_context = false;    // --builtin-context
  bool threads = true;             // --threads
  bool backend = true;             // --backend
  bool matmul_activations = true;  // --matmul-activations
  // --speculative-tokens, --draft-model, --speculative-acceptance
  bool speculative = false;
};

void AddEngineFlags(CLI::App& cmd, serving::EngineArgs& args, const EngineFlagSet& set);

// A flag for every declared request parameter (engine/request_params.h),
// named after it in kebab case (--min-p, --stop-token-ids 5,7,
// --ignore-eos), bound to `params`; the engine checks the values.
void AddRequestParamFlags(CLI::App& cmd, engine::RequestParams& params);

// An engine for one request at a time over `capacity` positions: the
// prompt prefilled in one step, no prefix caching (one request shares
// nothing), the pool just large enough for a model of shape `mc` (its
// sliding-window layers hold only their windows; generate and logits, the
// path serving uses).
void SizeForOneRequest(const model::ModelConfig& mc, uint64_t capacity, uint64_t prompt_tokens,
                       serving::EngineArgs& args);

// --chat-template FILE (serve, chat).
void AddChatTemplateOption(CLI::App& cmd, std::optional<std::string>& value);
// --tokenizer-pre NAME (tokenize, which runs no engine).
void AddTokenizerPreOption(CLI::App& cmd, std::optional<std::string>& value);

// The contents of the file a flag names; errors carry the flag.
Result<std::string> ReadFlagFile(const std::string& path, std::string_view flag);

// Prints "folio COMMAND: <status>" ("folio: <status>" for an empty
// command) to standard error; returns 1, the exit code of a command that
// failed.
int Fail(std::string_view command, const Status& s);

}  // namespace folio::cli

#endif  // FOLIO_CLI_ENGINE_FLAGS_H_
