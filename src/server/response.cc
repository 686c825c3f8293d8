#include "folio/server/response.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "folio/core/check.h"

namespace folio::server {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json Usage(uint64_t prompt, uint64_t completion, uint64_t cached) {
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

json Bytes(const std::string& s) {
  json b = json::array();
  for (char c : s) b.push_back(static_cast<unsigned char>(c));
  return b;
}

// A chat choice's finish_reason: "tool_calls" for a reply that stopped
// after calling.
std::string ChatFinish(engine::FinishReason r, bool called) {
  if (r == engine::FinishReason::kStop && called) return "tool_calls";
  return FinishReasonJson(r);
}

}  // namespace

std::string FinishReasonJson(engine::FinishReason r) {
  return r == engine::FinishReason::kNone ? "" : std::string(engine::FinishReasonName(r));
}

ResponseBuilder::ResponseBuilder(ResponseContext ctx, uint64_t samples, uint64_t returned)
    : ctx_(std::move(ctx)),
      choices_(std::max<uint64_t>(samples, 1)),
      returned_(returned == 0 ? choices_.size() : std::min<uint64_t>(returned, choices_.size())) {
  if (ctx_.endpoint == Endpoint::kChat && ctx_.chat_output.active()) {
    for (size_t i = 0; i < choices_.size(); ++i) {
      serving::ChatOutputOptions options = ctx_.chat_output;
      options.call_id_seed += i;
      choices_[i].parser.emplace(std::move(options));
    }
  }
}

std::string ResponseBuilder::TokenString(int32_t id) const {
  Result<std::string> s = ctx_.tokenizer->Decode(std::span<const int32_t>(&id, 1), false);
  return s ? *s : std::string();
}

json ResponseBuilder::LogprobsJson(const std::vector<sampling::TokenLogprobs>& lps,
                                   uint64_t* offset) const {
  json out;
  if (ctx_.endpoint == Endpoint::kChat) {
    json content = json::array();
    for (const sampling::TokenLogprobs& lp : lps) {
      // "bytes" are the token's own bytes (OpenAI: for tokens that are
      // part of a character), not those of the U+FFFD its text shows.
      json top = json::array();
      for (const auto& [id, logprob] : lp.top) {
        top.push_back({{"token", TokenString(id)},
                       {"logprob", logprob},
                       {"bytes", Bytes(ctx_.tokenizer->TokenBytes(id))}});
      }
      content.push_back({{"token", TokenString(lp.token)},
                         {"logprob", lp.logprob},
                         {"bytes", Bytes(ctx_.tokenizer->TokenBytes(lp.token))},
                         {"top_logprobs", top}});
    }
    out = {{"content", content}};
  } else {
    json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
         offsets = json::array();
    for (const sampling::TokenLogprobs& lp : lps) {
      const std::string tok = TokenString(lp.token);
      tokens.push_back(tok);
      token_logprobs.push_back(lp.logprob);
      json alternatives = json::object();
      for (const auto& [id, logprob] : lp.top) alternatives[TokenString(id)] = logprob;
      top.push_back(alternatives);
      offsets.push_back(*offset);
      *offset += tok.size();
    }
    out = {{"tokens", tokens},
           {"token_logprobs", token_logprobs},
           {"top_logprobs", top},
           {"text_offset", offsets}};
  }
  return out;
}

std::string ResponseBuilder::ChunkJson(const Event& e, const Choice& c) const {
  const bool chat = ctx_.endpoint == Endpoint::kChat;
  const bool first = !c.sent_first;
  json choice = {{"index", e.index}};
  if (chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!e.text.empty() || first) delta["content"] = e.text;
    choice["delta"] = delta;
  } else {
    choice["text"] = e.text;
  }
  if (ctx_.logprobs && !e.logprobs.empty()) {
    uint64_t offset = c.text_offset;
    choice["logprobs"] = LogprobsJson(e.logprobs, &offset);
  } else {
    choice["logprobs"] = nullptr;
  }
  const std::string finish = FinishReasonJson(e.finish);
  choice["finish_reason"] = finish.empty() ? json(nullptr) : json(finish);
  return Dump({{"id", ctx_.id},
               {"object", chat ? "chat.completion.chunk" : "text_completion"},
               {"created", ctx_.created},
               {"model", ctx_.model},
               {"choices", json::array({choice})}});
}

std::string ResponseBuilder::Chunk(uint64_t index, json delta, json logprobs,
                                   const std::string& finish) const {
  json choice = {{"index", index},
                 {"delta", std::move(delta)},
                 {"logprobs", std::move(logprobs)},
                 {"finish_reason", finish.empty() ? json(nullptr) : json(finish)}};
  return Dump({{"id", ctx_.id},
               {"object", "chat.completion.chunk"},
               {"created", ctx_.created},
               {"model", ctx_.model},
               {"choices", json::array({std::move(choice)})}});
}

std::vector<std::string> ResponseBuilder::ParsedChunks(const Event& e, Choice& c,
                                                       serving::ChatDelta delta) {
  const bool first = !c.sent_first;
  const bool finishing = e.finish != engine::FinishReason::kNone;
  const uint64_t first_call = c.message.calls.size();
  c.message.reasoning += delta.reasoning;
  c.message.content += delta.content;
  for (const serving::ToolCall& call : delta.calls) c.message.calls.push_back(call);
  std::string finish;
  if (finishing) finish = ChatFinish(e.finish, !c.message.calls.empty());
  json logprobs = nullptr;
  if (ctx_.logprobs && !e.logprobs.empty()) {
    uint64_t offset = c.text_offset;
    logprobs = LogprobsJson(e.logprobs, &offset);
  }
  std::vector<std::pair<json, json>> deltas;  // (delta, logprobs)
  json main = json::object();
  if (first) main["role"] = "assistant";
  if (!delta.content.empty()) main["content"] = delta.content;
  // A reply with neither content nor calls has content "", as the whole
  // reply says.
  if (finishing && c.message.content.empty() && c.message.calls.empty()) main["content"] = "";
  if (!delta.reasoning.empty()) main["reasoning_content"] = delta.reasoning;
  if (!main.empty() || !logprobs.is_null() || (finishing && delta.calls.empty())) {
    deltas.emplace_back(std::move(main), std::move(logprobs));
  }
  for (size_t k = 0; k < delta.calls.size(); ++k) {
    const serving::ToolCall& call = delta.calls[k];
    const uint64_t index = first_call + k;
    json head = {{"index", index},
                 {"id", call.id},
                 {"type", "function"},
                 {"function", {{"name", call.name}, {"arguments", ""}}}};
    json args = {{"index", index}, {"function", {{"arguments", call.arguments}}}};
    deltas.emplace_back(json{{"tool_calls", json::array({std::move(head)})}}, nullptr);
    deltas.emplace_back(json{{"tool_calls", json::array({std::move(args)})}}, nullptr);
  }
  std::vector<std::string> chunks;
  for (size_t i = 0; i < deltas.size(); ++i) {
    chunks.push_back(Chunk(e.index, std::move(deltas[i].first), std::move(deltas[i].second),
                           i + 1 == deltas.size() ? finish : std::string()));
  }
  if (!chunks.empty()) c.sent_first = true;
  return chunks;
}

std::vector<std::string> ResponseBuilder::Add(const Event& e) {
  FOLIO_CHECK(e.index < choices_.size(), "choice ", e.index, " of ", choices_.size());
  Choice& c = choices_[e.index];
  std::vector<std::string> chunks;
  if (c.parser) {
    serving::ChatDelta delta = c.parser->Feed(e.text);
    if (e.finish != engine::FinishReason::kNone && c.finish == engine::FinishReason::kNone) {
      delta.Append(c.parser->Finish());
    }
    chunks = ParsedChunks(e, c, std::move(delta));
  } else if (!c.sent_first || !e.text.empty() || !e.logprobs.empty() ||
             e.finish != engine::FinishReason::kNone) {
    chunks.push_back(ChunkJson(e, c));
    c.sent_first = true;
  }
  c.text += e.text;
  if (e.beam_score) c.beam_score = e.beam_score;
  completion_tokens_ += e.tokens.size();
  for (const sampling::TokenLogprobs& lp : e.logprobs) {
    c.text_offset += TokenString(lp.token).size();
    c.logprobs.push_back(lp);
  }
  if (e.finish != engine::FinishReason::kNone && c.finish == engine::FinishReason::kNone) {
    c.finish = e.finish;
    ++finished_;
  }
  return chunks;
}

std::string ResponseBuilder::Body(uint64_t prompt_tokens, uint64_t cached_tokens) const {
  const bool chat = ctx_.endpoint == Endpoint::kChat;
  std::vector<size_t> order(choices_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (returned_ < choices_.size()) {
    std::vector<double> score(choices_.size(), 0.0);
    for (size_t i = 0; i < choices_.size(); ++i) {
      for (const sampling::TokenLogprobs& lp : choices_[i].logprobs)
        score[i] += static_cast<double>(lp.logprob);
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return score[a] > score[b]; });
    order.resize(returned_);
  }
  json choices = json::array();
  for (size_t i = 0; i < order.size(); ++i) {
    const Choice& c = choices_[order[i]];
    json choice = {{"index", i}};
    if (chat && c.parser) {
      const serving::ChatDelta& m = c.message;
      json message = {
          {"role", "assistant"},
          {"content", m.content.empty() && !m.calls.empty() ? json(nullptr) : json(m.content)}};
      if (ctx_.chat_output.reasoning) {
        message["reasoning_content"] = m.reasoning.empty() ? json(nullptr) : json(m.reasoning);
      }
      if (!m.calls.empty()) {
        json calls = json::array();
        for (const serving::ToolCall& call : m.calls) {
          calls.push_back({{"id", call.id},
                           {"type", "function"},
                           {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        }
        message["tool_calls"] = std::move(calls);
      }
      choice["message"] = std::move(message);
    } else if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
    }
    uint64_t offset = 0;
    choice["logprobs"] = ctx_.logprobs ? LogprobsJson(c.logprobs, &offset) : json(nullptr);
    const std::string finish = ChatFinish(c.finish, !c.message.calls.empty());
    choice["finish_reason"] = finish.empty() ? json(nullptr) : json(finish);
    if (c.beam_score) choice["beam_score"] = *c.beam_score;  // folio's beam_search extension
    choices.push_back(std::move(choice));
  }
  return Dump({{"id", ctx_.id},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"created", ctx_.created},
               {"model", ctx_.model},
               {"choices", choices},
               {"usage", Usage(prompt_tokens, completion_tokens_, cached_tokens)}});
}

std::string ResponseBuilder::UsageChunk(uint64_t prompt_tokens, uint64_t cached_tokens) const {
  const bool chat = ctx_.endpoint == Endpoint::kChat;
  return Dump({{"id", ctx_.id},
               {"object", chat ? "chat.completion.chunk" : "text_completion"},
               {"created", ctx_.created},
               {"model", ctx_.model},
               {"choices", json::array()},
               {"usage", Usage(prompt_tokens, completion_tokens_, cached_tokens)}});
}

}  // namespace folio::server
