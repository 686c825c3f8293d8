// gpt-oss's harmony reply format read as OpenAI's message fields: the
// chat output parser's harmony mode (ChatOutputOptions::harmony), as
// openai-harmony's StreamableParser reads an assistant's reply.
//
// A reply is a run of messages. The prompt ends with `<|start|>assistant`,
// so the first message opens with its header; each later one with
// `<|start|>` and its role:
//
//   message  = header "<|message|>" text end
//   header   = words, where "<|channel|>" NAME names the channel, a word
//              "to=" RECIPIENT the recipient, "<|constrain|>" TYPE (or a
//              bare word) the content type, and, after <|start|>, the first
//              word the role; in any order (gpt-oss writes both
//              `<|channel|>commentary to=functions.f <|constrain|>json` and
//              ` to=functions.f<|channel|>commentary json`)
//   end      = "<|end|>" | "<|return|>" | "<|call|>" (the end of the reply
//              ends a message too: a reply cut by max_tokens)
//
// Each message's text goes, by its header:
//   to=functions.NAME   a tool call (name NAME, arguments the text, a JSON
//                       object; blank text is {}), when the request offered
//                       tools (ChatOutputOptions::tool_format is harmony);
//                       in any channel, as vLLM reads it. Text that is not
//                       a JSON object, or an empty NAME: content, as
//                       written. With parallel_tool_calls false, calls
//                       after the first are dropped.
//   any other recipient reasoning (gpt-oss's built-in browser and python
//                       tools, or functions when no tools were offered)
//   channel analysis    reasoning
//   channel final       content
//   channel commentary  content (a preamble: what the model tells the user
//                       before it calls a tool)
//   another channel, or none   content (a model's malformed header is never
//                       an error; vLLM's chat path reads every message but
//                       the last as reasoning, its Responses path refuses
//                       an unknown channel: folio shows the text)
// When ChatOutputOptions::reasoning is off (split_reasoning false),
// reasoning text is content. The role is not checked. Successive messages
// that go to the same field are joined with "\n" (as vLLM joins reasoning
// messages). Text inside a message is the model's, as written: markers
// other than the three ends are part of it.
//
// Not harmony: a header longer than kMaxHarmonyHeaderBytes (no
// <|message|> within it), a first header that the reply's end cuts off
// and that holds neither <|channel|> nor <|constrain|>, or text after a message's end that does not
// start with <|start|>: that text and the rest of the reply are content,
// exactly as written (markers included), so a model that does not write
// harmony still shows its reply. A header cut off by the reply's end that
// is harmony's (after <|start|>, or holding one of those) adds nothing.
//
// Streaming: message text is settled as it arrives, except for a possible
// start of an end marker; a header waits for its <|message|>; a call is
// emitted when its message ends. The deltas add up to the whole reply's
// reading, whatever the pieces.
#ifndef FOLIO_SERVING_HARMONY_OUTPUT_H_
#define FOLIO_SERVING_HARMONY_OUTPUT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "folio/serving/chat_output.h"

namespace folio::serving {

// The special tokens of the format (o200k_harmony's).
inline constexpr std::string_view kHarmonyStart = "<|start|>";
inline constexpr std::string_view kHarmonyChannel = "<|channel|>";
inline constexpr std::string_view kHarmonyConstrain = "<|constrain|>";
inline constexpr std::string_view kHarmonyMessage = "<|message|>";
inline constexpr std::string_view kHarmonyEnd = "<|end|>";
inline constexpr std::string_view kHarmonyReturn = "<|return|>";
inline constexpr std::string_view kHarmonyCall = "<|call|>";

// The longest header read as one (role, channel, recipient, content type).
inline constexpr uint64_t kMaxHarmonyHeaderBytes = 512;

// A message header's fields (empty when not written).
struct HarmonyHeader {
  std::string role;
  std::string channel;
  std::string recipient;
  std::string content_type;
};

// The header text between the message's start and <|message|>; has_role:
// it followed <|start|> (the first word is the role).
HarmonyHeader ParseHarmonyHeader(std::string_view text, bool has_role);

class HarmonyOutputParser {
 public:
  explicit HarmonyOutputParser(const ChatOutputOptions& options);

  ChatDelta Feed(std::string_view text);
  ChatDelta Finish();

  uint64_t num_calls() const { return num_calls_; }

 private:
  enum class Phase { kHeader, kBody, kBetween, kRaw };
  // Where the current message's text goes.
  enum class Field { kReasoning, kContent, kCall };

  void Run(bool final, ChatDelta& out);
  void StartMessage(const HarmonyHeader& header);
  // Settled text of the current message.
  void Text(std::string_view text, ChatDelta& out);
  void EndMessage(ChatDelta& out);
  // Text to a field, after "\n" when an earlier message wrote to it.
  void Emit(Field field, std::string_view text, ChatDelta& out);

  ChatOutputOptions o_;
  Phase phase_ = Phase::kHeader;
  bool has_role_ = false;  // kHeader: the message opened with <|start|>
  std::string held_;       // text not settled yet
  Field field_ = Field::kContent;
  bool message_wrote_ = false;      // the current message has written text
  std::string call_name_;           // kCall: the function
  std::string call_text_;           // kCall: the arguments so far
  bool reasoning_written_ = false;  // some message wrote reasoning
  bool content_written_ = false;    // some message wrote content
  uint64_t num_calls_ = 0;          // calls returned
};

}  // namespace folio::serving

#endif  // FOLIO_SERVING_HARMONY_OUTPUT_H_
