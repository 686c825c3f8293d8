// The memo tables behind Matcher: interned parse-stack frames, interned
// states (sets of stacks), each state's byte transitions and token mask.
// One session serves a matcher and its copies, from one thread at a time.
#ifndef FOLIO_GRAMMAR_MATCHER_SESSION_H_
#define FOLIO_GRAMMAR_MATCHER_SESSION_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "folio/grammar/grammar.h"
#include "grammar/compiled.h"

namespace folio::grammar {

class MatcherSession {
 public:
  static constexpr uint32_t kDead = UINT32_MAX;  // no stack survives

  // `grammar` (may be null) and `trie` (may be null: no masks) keep what
  // `compiled` lives in alive.
  MatcherSession(const CompiledGrammar& compiled, std::shared_ptr<const Grammar> grammar,
                 std::shared_ptr<const TokenTrie> trie);

  // The state before any byte.
  uint32_t Start() const { return start_; }
  // The state after `byte`, or kDead.
  uint32_t Step(uint32_t state, uint8_t byte);
  uint32_t StepBytes(uint32_t state, std::string_view bytes);
  // The state after token `token` (in the trie's vocabulary): the union of
  // its bytes' step and its reference's; kDead when neither survives.
  uint32_t StepToken(uint32_t state, int32_t token);
  // Whether a stack of `state` names `token` next (a token reference).
  bool NamesNext(uint32_t state, int32_t token) const;
  bool Accepting(uint32_t state) const { return states_[state].accepting; }
  bool Done(uint32_t state) const {
    return states_[state].accepting && states_[state].heads.empty();
  }
  // The allowed-token bitset of `state` (needs a trie).
  void FillMask(uint32_t state, std::span<uint64_t> allowed);
  const TokenTrie* trie() const { return trie_.get(); }

  Matcher::Stats stats() const;

 private:
  // A parse stack: a position to match next (an element index) and the
  // frame to return to when its alternative ends (kNone: the root's end).
  struct Frame {
    uint32_t pos = 0;
    uint32_t parent = 0;
  };
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr uint32_t kUnknown = UINT32_MAX - 1;  // in a transition table

  struct State {
    std::vector<uint32_t> heads;  // sorted frame ids, each at a kBytes or kToken element
    bool accepting = false;
    bool names_tokens = false;                        // a head is at a kToken element
    std::unique_ptr<std::array<uint32_t, 256>> next;  // lazily: kUnknown, kDead or a state
    // Steps by token reference, as taken: (token, state or kDead).
    std::vector<std::pair<int32_t, uint32_t>> token_next;
    int32_t mask = -1;  // index into masks_, or -1
  };

  uint32_t InternFrame(uint32_t pos, uint32_t parent);
  // Adds the stacks reachable from (pos, parent) without consuming a byte.
  void Close(uint32_t pos, uint32_t parent);
  // The state of the heads and accepting flag built by Close (consumed).
  uint32_t InternState();
  uint32_t ComputeStep(uint32_t state, uint8_t byte);
  // The state after a reference to `token` (kDead when no stack names it).
  uint32_t StepReference(uint32_t state, int32_t token);
  // The state whose stacks are those of a and b (either may be kDead).
  uint32_t Union(uint32_t a, uint32_t b);

  const CompiledGrammar& g_;
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;

  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, uint32_t> frame_ids_;
  std::vector<State> states_;
  std::unordered_map<std::string, uint32_t> state_ids_;
  uint32_t start_ = 0;

  // Scratch for Close.
  std::vector<uint64_t> work_;
  std::unordered_set<uint64_t> visited_;
  std::vector<uint32_t> heads_;
  bool accepting_ = false;

  // Masks, up to a memory cap; past it masks are computed every time.
  std::vector<std::vector<uint64_t>> masks_;
  uint64_t mask_bytes_ = 0;
  std::vector<uint32_t> walk_;  // per trie depth
  uint64_t mask_hits_ = 0;
  uint64_t mask_misses_ = 0;
};

}  // namespace folio::grammar

#endif  // FOLIO_GRAMMAR_MATCHER_SESSION_H_
