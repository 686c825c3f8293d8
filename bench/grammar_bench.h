// `folio bench grammar`: structured output on MaskBench (github
// guidance-ai/jsonschemabench, maskbench/data): a folder of JSON files,
// each one object with `schema` (a JSON Schema), `tests` (a list of
// {description, valid, data}) and `meta`.
//
// For every file the schema is compiled as the engine compiles a
// response_format (StructuredOutput kJsonSchema -> StructuredOutputToGbnf ->
// Grammar::FromGbnf), timed; a refusal is recorded with its status and
// reason. Every test instance is written as the strict whitespace mode
// writes JSON (", " and ": ", keys in the instance's order, no escapes
// beyond those JSON requires), tokenized by the model's tokenizer (no
// special tokens) and walked token by token on a fresh Matcher over the
// engine's own token trie (engine::GrammarTokenBytes): each step times
// FillMask, checks the next token's bit and then AcceptToken (the two must
// agree). A valid instance must be accepted to the end and CanFinish; an
// invalid one must be refused at some token or not CanFinish.
//
// The report (JSON) gives per split (the file name before "---", or before
// the last "_" without one) and in total: coverage and the refusals'
// reasons, soundness (valid instances accepted, each failure listed),
// invalid instances rejected, mask time percentiles over all steps, the
// first step of a fresh matcher (cold) and the later ones (warm), compile
// time, and the matcher's memo statistics. --trace writes, per instance,
// its token ids and each step's allowed count and set hash (TokenSetHash),
// for bench/grammar_oracles.py to compare against llguidance; --dump-vocab
// writes the token bytes the trie holds, so the oracles see the same
// vocabulary. One thread; never timed assertions in tests.
#ifndef FOLIO_BENCH_GRAMMAR_BENCH_H_
#define FOLIO_BENCH_GRAMMAR_BENCH_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/status.h"

namespace CLI {
class App;
}

namespace folio::bench {

struct GrammarBenchOptions {
  std::string maskbench;  // the folder of MaskBench files
  std::string model;      // "" = the byte-level tokenizer
  std::string json_output;
  uint64_t limit = 0;                 // files per split (0: all), in name order
  std::vector<std::string> files;     // only these file names (empty: all)
  std::string whitespace = "strict";  // or "flexible"
  std::string trace;                  // JSON lines, one per instance ("" = none)
  bool trace_full = false;            // the allowed ids of every step too
  std::string dump_vocab;             // the token bytes as JSON ("" = none)
};

CLI::App* AddGrammarBenchCommand(CLI::App& bench, GrammarBenchOptions& options);
int RunGrammarBench(const GrammarBenchOptions& options, const std::string& command);

// The split a MaskBench file belongs to: "Github_easy---o1.json" ->
// "Github_easy", "JME_12.json" -> "JME", else the name without ".json".
std::string MaskBenchSplit(std::string_view file_name);

// `value` as strict mode writes JSON: item_separator between items and
// members, key_separator after keys, nothing else; keys in the object's
// order; strings and numbers as nlohmann::json dumps them (UTF-8 kept).
std::string WriteJson(const nlohmann::ordered_json& value, std::string_view item_separator,
                      std::string_view key_separator);

// A refusal's reason, for the histogram: the keyword of "unsupported
// keyword \"not\" at ..." ("not"), "format <name>" for an unsupported
// format, "merge <keyword>" for differing keywords that cannot be merged,
// else the message before " at " with quoted text and numbers elided.
std::string RefusalReason(const Status& status);

// The hash of a token set given as a mask (bit t of word t / 64): the sum,
// modulo 2^64, of SplitMix64(t).NextU64() over its tokens, so equal sets
// hash alike whatever the order (bench/grammar_oracles.py computes the same).
uint64_t TokenSetHash(std::span<const uint64_t> mask);

// Bytes as readable text: valid UTF-8 kept, other bytes as \xHH.
std::string PrintableBytes(std::string_view bytes);

}  // namespace folio::bench

#endif  // FOLIO_BENCH_GRAMMAR_BENCH_H_
