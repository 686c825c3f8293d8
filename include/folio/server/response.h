// OpenAI response bodies from engine events: whole responses, streamed
// chunks, usage, log-probs. Pure formatting; no sockets.
#ifndef FOLIO_SERVER_RESPONSE_H_
#define FOLIO_SERVER_RESPONSE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "folio/server/channel.h"
#include "folio/server/request.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::server {

struct ResponseContext {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;       // "cmpl-7" / "chatcmpl-7"
  int64_t created = 0;  // unix seconds
  std::string model;
  bool logprobs = false;
  const tokenizer::Tokenizer* tokenizer = nullptr;  // token strings for log-probs
};

// "stop", "length", "abort"; null while unfinished.
std::string FinishReasonJson(engine::FinishReason r);

// Builds one request's response from its events, in order: `samples`
// parallel samples, each event naming its own by Event::index. The whole
// response returns `returned` of them (at most samples): all in index
// order, or, when fewer, the ones with the highest cumulative
// log-probability, best first (best_of; ties to the lower index).
class ResponseBuilder {
 public:
  explicit ResponseBuilder(ResponseContext ctx, uint64_t samples = 1, uint64_t returned = 0);
  // Folds an output event in. Streaming: returns the chunk's JSON text, or
  // "" when the event adds nothing a client would see.
  std::string Add(const Event& e);
  // Every choice has its finish.
  bool done() const { return finished_ == choices_.size(); }
  // The whole non-streaming response.
  std::string Body(uint64_t prompt_tokens) const;
  // The usage chunk streamed before [DONE] when the request asked for it
  // (stream_options.include_usage): choices [] and usage, as OpenAI sends.
  std::string UsageChunk(uint64_t prompt_tokens) const;
  uint64_t completion_tokens() const { return completion_tokens_; }

 private:
  struct Choice {
    std::string text;
    uint64_t text_offset = 0;  // completions' text_offset, in bytes
    std::vector<sampling::TokenLogprobs> logprobs;
    engine::FinishReason finish = engine::FinishReason::kNone;
    bool sent_first = false;
    std::optional<double> beam_score;
  };
  std::string TokenString(int32_t id) const;
  std::string ChunkJson(const Event& e, const Choice& c) const;
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
