// A chat reply's text as OpenAI's message fields: reasoning_content (a
// leading <think>…</think> block), content, and tool_calls in the
// family's format (tool_calls.h). One parser reads the text as it streams;
// a whole reply is the same parser fed everything at once, so the streamed
// deltas always add up to the whole reply, whatever the pieces.
//
// Reading, in order:
//   reasoning  when on, a reply that starts with <think> (after blanks), or
//              whose prompt ended with an opened <think> (a template that
//              injects it), is reasoning up to </think>; without </think>
//              the whole reply is reasoning. Blanks right after </think> are
//              dropped. Text that may be the start of </think> is held back.
//   content    everything else that is not a call. Text that may be the
//              start of a call marker is held back until it is known not to
//              be; blanks are held back until non-blank text follows, and
//              are dropped when a call follows them, and at the end of a
//              reply that made calls.
//   calls      hermes: each <tool_call>…</tool_call> block holds one JSON
//              object {"name", "arguments"} ("parameters" is read too;
//              arguments may be an object or JSON text of one; absent: {});
//              a block still open at the end is read the same way.
//              llama3_json: from <|python_tag|>, or from a reply that
//              starts with "{", to the end: objects {"name", "parameters"}
//              ("arguments" too) joined by ";". mistral: from
//              [TOOL_CALLS], or a reply that starts with "[", to the end: a
//              JSON array of {"name", "arguments"}. generic: a reply that
//              starts with "{" is one JSON object, {"tool_calls": [...]}
//              (or {"tool_call": {...}}) read as calls, {"response": text}
//              read as that text. Without a marker (the bare forms, and
//              generic) every call must name one of the request's tools.
//              A call is emitted once it is complete (its closing tag, or
//              the end of the reply for the forms that run to the end).
// Text that looks like a call but does not parse (bad JSON, no name,
// arguments that are not an object, an unknown name in a bare form) is
// content, exactly as written: a model's malformed call is never an error.
// With parallel_tool_calls false, calls after the first are dropped.
//
// harmony (gpt-oss): the reply is read as harmony messages instead, by
// channel and recipient (harmony_output.h); the reasoning and tool_format
// options apply as described there.
#ifndef FOLIO_SERVING_CHAT_OUTPUT_H_
#define FOLIO_SERVING_CHAT_OUTPUT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "folio/serving/tool_calls.h"

namespace folio::serving {

struct ToolCall {
  std::string id;         // "call_" + 24 letters and digits
  std::string name;       // the function
  std::string arguments;  // a JSON object's text (compact, keys in the model's order)
};

// What a piece of the reply adds.
struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> calls;  // calls completed in this piece, in order

  bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
  void Append(ChatDelta other);
};

struct ChatOutputOptions {
  // The reply is harmony messages (harmony_output.h): the chat template is
  // gpt-oss's, or --tool-call-parser harmony.
  bool harmony = false;
  bool reasoning = false;                     // split <think>…</think> into reasoning
  bool starts_in_reasoning = false;           // the prompt opened <think> (PromptOpensReasoning)
  std::optional<ToolCallFormat> tool_format;  // parse calls (nullopt: none)
  std::vector<std::string> tool_names;        // the request's functions
  bool parallel_tool_calls = true;
  uint64_t call_id_seed = 0;  // ToolCallId's seed

  // Whether the text needs this parser at all.
  bool active() const { return harmony || reasoning || tool_format.has_value(); }
};

// Whether the prompt's last non-blank text is <think>: the template opened
// the reasoning block for the model.
bool PromptOpensReasoning(std::string_view prompt);

// The id of a reply's call `index`: "call_" and 24 characters of
// [A-Za-z0-9] drawn from SplitMix64 seeded by seed and index, so a reply's
// ids look random, differ between its calls, and repeat with the seed.
std::string ToolCallId(uint64_t seed, uint64_t index);

class HarmonyOutputParser;

class ChatOutputParser {
 public:
  explicit ChatOutputParser(ChatOutputOptions options);

  // The next piece of the reply (any split, even inside a marker or a
  // UTF-8 character): what it settles.
  ChatDelta Feed(std::string_view text);
  // The reply ended: everything still held back.
  ChatDelta Finish();

  uint64_t num_calls() const;

 private:
  enum class Phase { kReasoningStart, kReasoning, kBody, kBlock, kToEnd };

  void Run(bool final, ChatDelta& out);
  // Content that is settled (not a call): blanks held as described above.
  void EmitContent(std::string_view text, ChatDelta& out);
  // A region that may be calls: its text and how it was written.
  void EndRegion(std::string_view body, std::string_view raw, bool bare, ChatDelta& out);

  ChatOutputOptions o_;
  Phase phase_;
  std::string held_;        // text not settled yet (the current phase's)
  std::string region_raw_;  // kBlock / kToEnd: the marker that opened it
  bool region_bare_ = false;
  std::string pending_blank_;     // content blanks held back
  bool body_started_ = false;     // any body text other than blanks seen
  bool after_reasoning_ = false;  // the body follows </think>
  bool content_emitted_ = false;
  uint64_t num_calls_ = 0;   // calls returned
  uint64_t num_parsed_ = 0;  // calls parsed (more than returned without parallel calls)

  // The harmony reader when o_.harmony (harmony_output.h), owned with value
  // semantics: a copied parser (a response builder is copied whole) carries
  // its own copy of the reading so far.
  class Harmony {
   public:
    Harmony();
    explicit Harmony(const ChatOutputOptions& options);
    Harmony(const Harmony& other);
    Harmony& operator=(const Harmony& other);
    Harmony(Harmony&&) noexcept;
    Harmony& operator=(Harmony&&) noexcept;
    ~Harmony();
    HarmonyOutputParser* get() const { return parser_.get(); }

   private:
    std::unique_ptr<HarmonyOutputParser> parser_;
  };
  Harmony harmony_;
};

}  // namespace folio::serving

#endif  // FOLIO_SERVING_CHAT_OUTPUT_H_
