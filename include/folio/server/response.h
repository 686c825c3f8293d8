// OpenAI response bodies from engine events: whole responses, streamed
// chunks, usage, log-probs. Pure formatting; no sockets.
#ifndef FOLIO_SERVER_RESPONSE_H_
#define FOLIO_SERVER_RESPONSE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "folio/server/channel.h"
#include "folio/server/request.h"
#include "folio/serving/chat_output.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::server {

struct ResponseContext {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;       // "cmpl-7" / "chatcmpl-7"
  int64_t created = 0;  // unix seconds
  std::string model;
  bool logprobs = false;
  const tokenizer::Tokenizer* tokenizer = nullptr;  // token strings for log-probs
  // Chat: how each choice's text is read (reasoning_content, tool_calls);
  // inactive: the text is the content, as generated. Choice i's call ids
  // are drawn from call_id_seed + i.
  serving::ChatOutputOptions chat_output;
};

// "stop", "length", "abort"; null while unfinished.
std::string FinishReasonJson(engine::FinishReason r);

// Chat replies read by ResponseContext::chat_output (serving/chat_output.h):
// the message has content (null when empty and there are calls),
// reasoning_content when reasoning is split (null when there was none) and
// tool_calls when the model called; finish_reason "tool_calls" replaces
// "stop" when it did. Streamed, each event's settled text becomes a delta of
// content and reasoning_content, and each call two deltas, as OpenAI sends
// them: {index, id, type, function: {name, arguments: ""}}, then {index,
// function: {arguments}} with the arguments whole. The deltas add up to the
// whole reply exactly; nothing of a call's markup reaches content.

// Builds one request's response from its events, in order: `samples`
// parallel samples, each event naming its own by Event::index. The whole
// response returns `returned` of them (at most samples): all in index
// order, or, when fewer, the ones with the highest cumulative
// log-probability, best first (best_of; ties to the lower index).
class ResponseBuilder {
 public:
  explicit ResponseBuilder(ResponseContext ctx, uint64_t samples = 1, uint64_t returned = 0);
  // Folds an output event in. Streaming: returns the chunks' JSON texts
  // (none when the event adds nothing a client would see; several when it
  // completes tool calls).
  std::vector<std::string> Add(const Event& e);
  // Every choice has its finish.
  bool done() const { return finished_ == choices_.size(); }
  // The whole non-streaming response. usage has OpenAI's
  // prompt_tokens_details.cached_tokens: the prompt tokens whose K/V came
  // from the prefix cache.
  std::string Body(uint64_t prompt_tokens, uint64_t cached_tokens = 0) const;
  // The usage chunk streamed before [DONE] when the request asked for it
  // (stream_options.include_usage): choices [] and usage, as OpenAI sends.
  std::string UsageChunk(uint64_t prompt_tokens, uint64_t cached_tokens = 0) const;
  uint64_t completion_tokens() const { return completion_tokens_; }

 private:
  struct Choice {
    std::string text;
    uint64_t text_offset = 0;  // completions' text_offset, in bytes
    std::vector<sampling::TokenLogprobs> logprobs;
    engine::FinishReason finish = engine::FinishReason::kNone;
    bool sent_first = false;
    std::optional<double> beam_score;
    // Chat with ResponseContext::chat_output active: the reader, and the
    // message it has read so far.
    std::optional<serving::ChatOutputParser> parser;
    serving::ChatDelta message;
  };
  std::string TokenString(int32_t id) const;
  std::string ChunkJson(const Event& e, const Choice& c) const;
  // A chat chunk of the parsed fields: delta, logprobs, finish_reason.
  std::string Chunk(uint64_t index, nlohmann::json delta, nlohmann::json logprobs,
                    const std::string& finish) const;
  std::vector<std::string> ParsedChunks(const Event& e, Choice& c, serving::ChatDelta delta);
  nlohmann::json LogprobsJson(const std::vector<sampling::TokenLogprobs>& lps,
                              uint64_t* offset) const;

  ResponseContext ctx_;
  std::vector<Choice> choices_;
  uint64_t returned_;
  uint64_t finished_ = 0;
  uint64_t completion_tokens_ = 0;
};

}  // namespace folio::server

#endif  // FOLIO_SERVER_RESPONSE_H_
