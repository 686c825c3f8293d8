// The OpenAI-compatible request layer: one HTTP body -> a typed request the
// engine can run, or an OpenAI-style error naming the offending field.
//
// A pure function: no sockets, no engine, no clock. Everything a request
// can get wrong is caught here, before it reaches the engine thread:
// malformed JSON, a field of the wrong type, a value out of range, a prompt
// that does not tokenize, token ids outside the vocabulary, prompt +
// max_tokens beyond the model's context or the KV pool. JSON null counts as
// an absent field (clients send nulls for unset options). A field the
// endpoint does not act on is refused by name ("unknown field"), except
// user, metadata, store and service_tier, which cannot change a reply and
// are accepted and ignored (their type checked; docs/server.md). Known
// fields folio cannot honour are refused by name unless they carry their
// neutral value.
//
// Fields (both endpoints unless marked):
//   model        string; must name the served model or an alias (404
//                otherwise)
//   prompt       completions: a string, a one-string array, or token ids
//   messages     chat: non-empty array of {role, content, ...}; role one
//                of system/user/assistant/tool/developer; content a string
//                or an array of {"type": "text", "text": ...} parts (joined);
//                an assistant message may carry tool_calls (content null),
//                a tool message needs tool_call_id; other keys reach the
//                chat template as given. Rendered by ModelInfo::chat_format;
//                what the template raises is a 400 naming messages and
//                quoting it. With tools, tool_choice, parallel_tool_calls,
//                chat_template_kwargs, reasoning_effort and split_reasoning:
//                serving/chat_request.h (ModelInfo::chat_parsers says how
//                the reply is read)
//   max_tokens   integer >= 1 (chat also accepts max_completion_tokens);
//                default 16 (completions) or, for chat, the rest of the
//                context capped at ModelInfo::default_max_tokens
//   temperature  number in [0, 2]; default 1
//   top_p        number in (0, 1];  top_k integer >= -1 (-1 and 0: off);
//   min_p, typical_p, top_n_sigma, the penalties, logit_bias ({"id":
//                bias}), allowed_token_ids, bad_words, min_tokens,
//                stop_token_ids, ignore_eos, include_stop_str_in_output,
//                dry_*, xtc_*: every parameter declared in
//                engine/request_params.h (docs/request-params.md), by its
//                row's type and range, also under its aliases
//                (repeat_penalty, repeat_last_n); the model's end ids (eos,
//                and for chat the template's end-of-turn ids) go into
//                RequestParams::eos_token_ids
//   seed         integer (two's complement for negatives); when absent the
//                server draws one (seed_given false) and reports it
//   stop         a non-empty string or an array of up to 16 of them
//   n            1 (larger is refused)
//   logprobs     completions: integer 0..20 (alternatives per token);
//                chat: boolean, with top_logprobs integer 0..20
//   stream       boolean;  stream_options {include_usage: bool}: the usage
//                chunk (choices []) before [DONE] only when true
//   user, metadata, store, service_tier: accepted and ignored
//   n            integer 1..64: parallel samples, choices 0..n-1 (sample i
//                seeded engine::SampleSeed(seed, i); the engine's
//                max_num_seqs bounds it too);
//   echo: only false;
//   best_of      completions: integer n..64 (default n): samples generated,
//                the n with the highest cumulative log-probability
//                returned, best first; more than n cannot stream; suffix: only null or "";
//   response_format, structured_outputs, guided_*, grammar, json_schema:
//                an output constraint (docs/structured-output.md); not with
//                a tool_choice that forces a call;
//   functions: only [] (legacy; use tools);  completions: tools only [],
//                tool_choice only "none" or "auto";
//   num_draft_tokens (folio's own): integer 0..8, draft tokens per step
//                for speculative decoding (0: off; absent: the server's
//                default); never changes the output.
#ifndef FOLIO_SERVER_REQUEST_H_
#define FOLIO_SERVER_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "folio/engine/engine.h"
#include "folio/grammar/structured_output.h"
#include "folio/serving/chat_format.h"
#include "folio/serving/chat_request.h"
#include "folio/serving/served_model.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::server {

// An OpenAI error body: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string param;  // the field at fault; empty = null
  std::string type = "invalid_request_error";
  std::string code;          // empty = null
  std::string Body() const;  // the JSON text
};

ApiError InvalidField(std::string param, std::string message);

enum class Endpoint { kCompletions, kChat };

// What validation needs to know about the served model.
struct ModelInfo {
  std::string name;                  // the served model's name, used in replies
  std::vector<std::string> aliases;  // more accepted "model" values
  uint64_t vocab_size = 0;
  uint64_t max_positions = 0;  // the model's context
  uint64_t hidden_size = 0;    // an embedding's features
  // What the server answers (folio serve --task): completions and chat
  // (generate), embeddings (embed); a request for the other is a 400.
  bool generate = true, embed = true;
  // An embedding request's pooling when it names none (ServedModel::DefaultPooling).
  engine::Pooling default_pooling = engine::Pooling::kLast;
  // /v1/rerank and /v1/score: the model is a cross-encoder with one
  // relevance logit (ModelConfig::num_labels == 1); token_types: its pairs
  // carry token types (an encoder's; a decoder's pair is its two texts'
  // ids one after the other).
  bool score = false;
  bool token_types = false;
  uint64_t pool_positions = 0;                      // token slots in the whole KV pool
  const tokenizer::Tokenizer* tokenizer = nullptr;  // required
  // Text prompts: the tokenizer's own special tokens (bos, eos as its
  // post-processor says), and an id put before them (the built-in byte
  // models' begin token, which their tokenizer does not add).
  bool add_special_tokens = true;
  std::optional<int32_t> prepend_id;
  // Every request's RequestParams::eos_token_ids (the tokenizer's eos).
  std::vector<int32_t> eos_token_ids;
  // Chat requests: how messages become the prompt (required for chat);
  // its end_of_turn_ids() join a chat request's eos_token_ids.
  const serving::ChatFormat* chat_format = nullptr;
  // Chat's max_tokens when the request has none: the rest of the context,
  // but at most this (0: no cap), so a client that leaves a non-streamed
  // request cannot hold a sequence for the whole pool.
  uint64_t default_max_tokens = 0;
  // Compiles structured-output constraints (response_format, vLLM's
  // structured_outputs and guided_*, llama.cpp's grammar and json_schema);
  // null: such requests are refused.
  grammar::GrammarCache* grammars = nullptr;
  // How chat replies are read: tool calls and reasoning
  // (--tool-call-parser, --reasoning-parser).
  serving::ChatParsers chat_parsers;

  // True for name and every alias.
  bool Serves(std::string_view model) const;
};

// What the request layer needs of a served model: its tokenizer, special
// tokens and stop ids (byte-level: the begin token first, no stop token,
// as `folio generate`), shape and name. served and chat_format (required)
// must outlive the result. The caller sets aliases, pool_positions and
// default_max_tokens.
ModelInfo MakeModelInfo(const serving::ServedModel& served, const serving::ChatFormat* chat_format,
                        std::string name);

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::vector<int32_t> prompt;
  engine::RequestParams params;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // return log-probs (params carries top_logprobs)
  bool seed_given = false;     // false: params.seed is 0, the server draws one
  // The field that gave params.grammar, the output constraint (empty: none).
  std::string grammar_field;
  // Choices returned; params.n samples are generated (best_of), and when
  // there are more the n with the highest cumulative log-probability win.
  uint64_t n = 1;
  // Chat: how the reply is read (reasoning, tool calls); call_id_seed is
  // set by the caller once the seed is known.
  serving::ChatOutputOptions chat_output;
};

using ParseResult = std::variant<ParsedRequest, ApiError>;

// body is the raw HTTP body. Never throws; every failure is an ApiError
// (400, or 404 for an unknown model) naming the field.
ParseResult ParseRequest(Endpoint endpoint, std::string_view body, const ModelInfo& model);

// POST /v1/embeddings (OpenAI's shape, with vLLM's and folio's extras):
//   model            as above
//   input            a string, an array of strings, an array of token ids,
//                    or an array of such arrays; at most kMaxEmbeddingInputs
//                    inputs, none empty; text is tokenized as a completion
//                    prompt is
//   encoding_format  "float" (default) or "base64" (little-endian float32)
//   dimensions       an integer >= 1, at most the model's hidden size: the
//                    first that many features (then normalized)
//   pooling          folio's: "last" (default), "mean" or "cls"
//   normalize        vLLM's: L2-normalize (default true)
//   truncate_prompt_tokens  vLLM's: an integer >= 1; an input longer than
//                    that keeps its last that many tokens (otherwise an
//                    input beyond the context is refused, naming input)
//   user             accepted and ignored (its type checked)
// Anything else is refused by name.
inline constexpr uint64_t kMaxEmbeddingInputs = 2048;
struct ParsedEmbeddings {
  std::vector<std::vector<int32_t>> inputs;
  engine::RequestParams params;  // pooling, normalize, dimensions
  bool base64 = false;
};
std::variant<ParsedEmbeddings, ApiError> ParseEmbeddings(std::string_view body,
                                                         const ModelInfo& model);

// POST /v1/rerank (Jina's, Cohere's and llama.cpp's shape) and POST
// /v1/score (vLLM's): a cross-encoder's relevance of text pairs, each pair
// encoded as the tokenizer pairs texts ([CLS] a [SEP] b [SEP], the second
// text of token type 1) and scored sigmoid(logit) in (0, 1).
//   rerank: model; query (a non-empty string); documents (an array of 1 to
//     kMaxEmbeddingInputs non-empty strings or {"text": string} objects);
//     top_n (>= 1; default every document); return_documents (default
//     true). Results sorted by score, highest first (ties by index).
//   score: model; text_1 and text_2, each a non-empty string or an array
//     of them: a string pairs with every text of the other side, two arrays
//     pair by index (equal lengths).
// A pair too long for the context is refused naming its field
// (documents[i], text_2[i]); anything else unknown is refused by name.
struct ParsedScores {
  std::vector<std::vector<int32_t>> inputs;       // each pair's ids
  std::vector<std::vector<int32_t>> token_types;  // and its token types
  std::vector<std::string> documents;             // rerank: the documents' texts
  uint64_t top_n = 0;                             // rerank: results returned
  bool return_documents = true;
};
std::variant<ParsedScores, ApiError> ParseRerank(std::string_view body, const ModelInfo& model);
std::variant<ParsedScores, ApiError> ParseScore(std::string_view body, const ModelInfo& model);

// POST /tokenize, as vLLM's: {"prompt": string, "add_special_tokens":
// bool = true} or {"messages": [...]} (rendered as a chat request's, with
// the template's own special tokens); "model" as above; other fields
// ignored. The prompt's ids, or an ApiError naming the field.
std::variant<std::vector<int32_t>, ApiError> ParseTokenize(std::string_view body,
                                                           const ModelInfo& model);
// POST /detokenize: {"tokens": [ids]} -> the text (special tokens kept).
std::variant<std::string, ApiError> ParseDetokenize(std::string_view body, const ModelInfo& model);

// Limits checked here.
inline constexpr uint64_t kMaxChoices = 64;  // n
inline constexpr uint64_t kMaxStopStrings = 16;
inline constexpr uint64_t kMaxStopBytes = 256;
inline constexpr uint64_t kMaxMessages = serving::kMaxChatMessages;
inline constexpr double kMaxTemperature = 2.0;

}  // namespace folio::server

#endif  // FOLIO_SERVER_REQUEST_H_
