// Speculative decoding's drafters: cheap guesses of the tokens a request
// will produce next, which the engine then verifies in one target step.
//
// A drafter only proposes; it never decides what is emitted. The engine
// feeds a request's pending token and its draft d1..dk in one step, then
// samples position by position exactly as plain decoding would (same
// logits bits, same random stream, one draw per emitted token), and keeps
// going only while the token it drew equals the next draft token. So the
// emitted stream is plain decoding's, token for token, whatever the
// drafter proposes; a good drafter only makes it faster.
#ifndef FOLIO_ENGINE_DRAFTER_H_
#define FOLIO_ENGINE_DRAFTER_H_

#include <cstdint>
#include <span>
#include <vector>

namespace folio::engine {

// How many tokens a request's next draft may have (its length), from its
// last draft's fate. A draft accepted whole doubles it: a copied run is
// still going, so let the next step take more of it. A draft accepted in
// part sets it to one past the accepted tokens: the run broke there, and a
// new one is likely as short. A draft accepted not at all resets it to
// kFirstDraftLength (and the engine's back-off pauses drafting). Always
// within [1, max_length]; drafted == 0 (nothing proposed) leaves it as is.
// The output never depends on it: only the cost of a step and how many
// tokens it yields do.
inline constexpr uint64_t kFirstDraftLength = 4;
uint64_t NextDraftLength(uint64_t length, uint64_t drafted, uint64_t accepted, uint64_t max_length);

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to max_tokens tokens proposed to follow `tokens` (request id's prompt
  // and output so far); possibly none. A drafter that cannot propose (out
  // of room, say) proposes nothing: drafts are never required.
  virtual std::vector<int32_t> Propose(uint64_t id, std::span<const int32_t> tokens,
                                       uint64_t max_tokens) = 0;
  // Request id finished or was aborted: drop what the drafter keeps for it.
  virtual void Forget(uint64_t /*id*/) {}
};

// Prompt lookup (n-gram matching, as vLLM's and llama.cpp's): the last n
// tokens, for n from max_n down to min_n, are looked for earlier in the
// request's tokens; at the most recent earlier match, the tokens that
// followed it are the draft. No model; strong wherever the output copies
// its input (rewrites, summaries, code edits), silent elsewhere. Cost: one
// backward scan per n, O(tokens * n).
class NgramDrafter final : public Drafter {
 public:
  // 1 <= min_n <= max_n (checked).
  NgramDrafter(uint64_t min_n, uint64_t max_n);
  std::vector<int32_t> Propose(std::span<const int32_t> tokens, uint64_t max_tokens) const;
  std::vector<int32_t> Propose(uint64_t /*id*/, std::span<const int32_t> tokens,
                               uint64_t max_tokens) override {
    return Propose(tokens, max_tokens);
  }

 private:
  uint64_t min_n_, max_n_;
};

}  // namespace folio::engine

#endif  // FOLIO_ENGINE_DRAFTER_H_
