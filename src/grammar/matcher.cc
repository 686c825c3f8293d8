#include <algorithm>
#include <cstring>
#include <utility>

#include "folio/core/check.h"
#include "folio/grammar/grammar.h"
#include "grammar/matcher_session.h"

namespace folio::grammar {

namespace {

// Masks kept per session, in bytes; past this they are recomputed.
constexpr uint64_t kMaxMaskBytes = uint64_t{64} << 20;

uint64_t Key(uint32_t a, uint32_t b) { return (uint64_t{a} << 32) | b; }

}  // namespace

MatcherSession::MatcherSession(const CompiledGrammar& compiled,
                               std::shared_ptr<const Grammar> grammar,
                               std::shared_ptr<const TokenTrie> trie)
    : g_(compiled), grammar_(std::move(grammar)), trie_(std::move(trie)) {
  for (const uint32_t alt : g_.rule_alternatives[g_.root]) Close(alt, kNone);
  start_ = InternState();
  FOLIO_CHECK(start_ != kDead);  // every rule has an alternative
}

uint32_t MatcherSession::InternFrame(uint32_t pos, uint32_t parent) {
  auto [it, fresh] = frame_ids_.emplace(Key(pos, parent), static_cast<uint32_t>(frames_.size()));
  if (fresh) frames_.push_back(Frame{pos, parent});
  return it->second;
}

void MatcherSession::Close(uint32_t pos, uint32_t parent) {
  work_.push_back(Key(pos, parent));
  while (!work_.empty()) {
    const uint64_t key = work_.back();
    work_.pop_back();
    if (!visited_.insert(key).second) continue;
    const auto p = static_cast<uint32_t>(key >> 32);
    const auto cont = static_cast<uint32_t>(key);
    const Element e = g_.elements[p];
    switch (e.kind) {
      case Element::Kind::kBytes:
      case Element::Kind::kToken:
        heads_.push_back(InternFrame(p, cont));
        break;
      case Element::Kind::kRule: {
        // A rule in tail position returns straight to our continuation.
        const uint32_t next =
            g_.elements[p + 1].kind == Element::Kind::kEnd ? cont : InternFrame(p + 1, cont);
        for (const uint32_t alt : g_.rule_alternatives[e.arg]) work_.push_back(Key(alt, next));
        break;
      }
      case Element::Kind::kEnd:
        if (cont == kNone) {
          accepting_ = true;
        } else {
          work_.push_back(Key(frames_[cont].pos, frames_[cont].parent));
        }
        break;
    }
  }
}

uint32_t MatcherSession::InternState() {
  std::sort(heads_.begin(), heads_.end());
  heads_.erase(std::unique(heads_.begin(), heads_.end()), heads_.end());
  uint32_t result = kDead;
  if (!heads_.empty() || accepting_) {
    std::string key(heads_.size() * sizeof(uint32_t) + 1, '\0');
    if (!heads_.empty()) std::memcpy(key.data(), heads_.data(), heads_.size() * sizeof(uint32_t));
    key.back() = accepting_ ? '\1' : '\0';
    auto [it, fresh] = state_ids_.emplace(std::move(key), static_cast<uint32_t>(states_.size()));
    if (fresh) {
      State s;
      s.heads = heads_;
      s.accepting = accepting_;
      s.names_tokens = std::any_of(heads_.begin(), heads_.end(), [&](uint32_t f) {
        return g_.elements[frames_[f].pos].kind == Element::Kind::kToken;
      });
      states_.push_back(std::move(s));
    }
    result = it->second;
  }
  heads_.clear();
  accepting_ = false;
  visited_.clear();
  return result;
}

uint32_t MatcherSession::ComputeStep(uint32_t state, uint8_t byte) {
  // Close may add frames and states; copy the heads first.
  const std::vector<uint32_t> heads = states_[state].heads;
  for (const uint32_t f : heads) {
    const Frame fr = frames_[f];
    const Element e = g_.elements[fr.pos];
    if (e.kind == Element::Kind::kBytes && g_.byte_sets[e.arg].Has(byte)) {
      Close(fr.pos + 1, fr.parent);
    }
  }
  return InternState();
}

uint32_t MatcherSession::StepReference(uint32_t state, int32_t token) {
  if (!states_[state].names_tokens) return kDead;
  for (const auto& [t, to] : states_[state].token_next) {
    if (t == token) return to;
  }
  const std::vector<uint32_t> heads = states_[state].heads;
  for (const uint32_t f : heads) {
    const Frame fr = frames_[f];
    const Element e = g_.elements[fr.pos];
    if (e.kind == Element::Kind::kToken && e.arg == static_cast<uint32_t>(token)) {
      Close(fr.pos + 1, fr.parent);
    }
  }
  const uint32_t to = InternState();
  states_[state].token_next.emplace_back(token, to);  // states_ may have grown; index again
  return to;
}

uint32_t MatcherSession::Union(uint32_t a, uint32_t b) {
  if (a == kDead || a == b) return b;
  if (b == kDead) return a;
  heads_ = states_[a].heads;
  heads_.insert(heads_.end(), states_[b].heads.begin(), states_[b].heads.end());
  accepting_ = states_[a].accepting || states_[b].accepting;
  return InternState();
}

uint32_t MatcherSession::StepToken(uint32_t state, int32_t token) {
  const std::string_view bytes = trie_ != nullptr ? trie_->token_bytes(token) : "";
  const uint32_t by_bytes = bytes.empty() ? kDead : StepBytes(state, bytes);
  return Union(by_bytes, StepReference(state, token));
}

bool MatcherSession::NamesNext(uint32_t state, int32_t token) const {
  if (!states_[state].names_tokens) return false;
  for (const uint32_t f : states_[state].heads) {
    const Element e = g_.elements[frames_[f].pos];
    if (e.kind == Element::Kind::kToken && e.arg == static_cast<uint32_t>(token)) return true;
  }
  return false;
}

uint32_t MatcherSession::Step(uint32_t state, uint8_t byte) {
  if (states_[state].heads.empty()) return kDead;
  if (!states_[state].next) {
    states_[state].next = std::make_unique<std::array<uint32_t, 256>>();
    states_[state].next->fill(kUnknown);
  }
  uint32_t to = (*states_[state].next)[byte];
  if (to == kUnknown) {
    to = ComputeStep(state, byte);
    (*states_[state].next)[byte] = to;  // states_ may have grown; index again
  }
  return to;
}

uint32_t MatcherSession::StepBytes(uint32_t state, std::string_view bytes) {
  for (const char c : bytes) {
    state = Step(state, static_cast<uint8_t>(c));
    if (state == kDead) return kDead;
  }
  return state;
}

void MatcherSession::FillMask(uint32_t state, std::span<uint64_t> allowed) {
  FOLIO_CHECK(trie_ != nullptr, "a mask needs a token trie");
  const size_t words = (trie_->vocab_size() + 63) / 64;
  FOLIO_CHECK(allowed.size() == words, "mask of ", allowed.size(), " words for a vocabulary of ",
              trie_->vocab_size());
  if (const int32_t m = states_[state].mask; m >= 0) {
    ++mask_hits_;
    const std::vector<uint64_t>& cached = masks_[static_cast<size_t>(m)];
    std::copy(cached.begin(), cached.end(), allowed.begin());
    return;
  }
  ++mask_misses_;
  std::fill(allowed.begin(), allowed.end(), 0);
  const std::span<const TokenTrie::Node> nodes = trie_->nodes();
  walk_.resize(1);
  walk_[0] = state;
  for (size_t i = 1; i < nodes.size();) {
    const TokenTrie::Node& n = nodes[i];
    const uint32_t to = Step(walk_[n.depth - 1], n.byte);
    if (to == kDead) {
      i += n.subtree_size;
      continue;
    }
    if (walk_.size() <= n.depth) walk_.resize(n.depth + 1);
    walk_[n.depth] = to;
    for (const int32_t t : trie_->tokens(n)) {
      const auto u = static_cast<uint32_t>(t);
      allowed[u >> 6] |= uint64_t{1} << (u & 63);
    }
    ++i;
  }
  if (states_[state].names_tokens) {
    for (const uint32_t f : states_[state].heads) {
      const Element e = g_.elements[frames_[f].pos];
      if (e.kind != Element::Kind::kToken || e.arg >= trie_->vocab_size()) continue;
      allowed[e.arg >> 6] |= uint64_t{1} << (e.arg & 63);
    }
  }
  if (mask_bytes_ + words * sizeof(uint64_t) <= kMaxMaskBytes) {
    mask_bytes_ += words * sizeof(uint64_t);
    states_[state].mask = static_cast<int32_t>(masks_.size());
    masks_.emplace_back(allowed.begin(), allowed.end());
  }
}

Matcher::Stats MatcherSession::stats() const {
  return Matcher::Stats{frames_.size(), masks_.size(), mask_hits_, mask_misses_};
}

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie) {
  FOLIO_CHECK(grammar != nullptr && trie != nullptr);
  const CompiledGrammar& compiled = grammar->compiled();
  session_ = std::make_shared<MatcherSession>(compiled, std::move(grammar), std::move(trie));
  state_ = session_->Start();
}

bool Matcher::AcceptToken(int32_t token) {
  const TokenTrie& trie = *session_->trie();
  if (token < 0 || static_cast<uint64_t>(token) >= trie.vocab_size()) return false;
  const uint32_t to = session_->StepToken(state_, token);
  if (to == MatcherSession::kDead) return false;
  state_ = to;
  return true;
}

bool Matcher::AcceptBytes(std::string_view bytes) {
  const uint32_t to = session_->StepBytes(state_, bytes);
  if (to == MatcherSession::kDead) return false;
  state_ = to;
  return true;
}

bool Matcher::CanFinish() const { return session_->Accepting(state_); }
bool Matcher::IsDone() const { return session_->Done(state_); }
void Matcher::FillMask(std::span<uint64_t> allowed) const { session_->FillMask(state_, allowed); }
bool Matcher::NamesNext(int32_t token) const { return session_->NamesNext(state_, token); }
Matcher::Stats Matcher::stats() const { return session_->stats(); }

}  // namespace folio::grammar
