#include "folio/sampling/logits_processors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>

namespace folio::sampling {
namespace {

constexpr float kBanned = -std::numeric_limits<float>::infinity();

bool InRow(int32_t t, std::span<float> logits) {
  return t >= 0 && static_cast<size_t>(t) < logits.size();
}

// The last n tokens (all of them for n = -1 or n beyond the history).
std::span<const int32_t> Last(std::span<const int32_t> tokens, int64_t n) {
  if (n < 0 || static_cast<uint64_t>(n) >= tokens.size()) return tokens;
  return tokens.last(static_cast<size_t>(n));
}

}  // namespace

bool ProcessorParams::active() const {
  return repetition_penalty != 1.0 || presence_penalty != 0.0 || frequency_penalty != 0.0 ||
         !logit_bias.empty() || !allowed_token_ids.empty() || !bad_words_ids.empty() ||
         min_tokens != 0 || dry.multiplier != 0.0;
}

std::vector<uint32_t>& ProcessorScratch::counts(size_t vocab_size) {
  if (counts_.size() < vocab_size) counts_.resize(vocab_size, 0);
  return counts_;
}

void ApplyAllowedTokens(std::span<const int32_t> allowed, std::span<float> logits) {
  if (allowed.empty()) return;
  // Keep the allowed logits aside, ban the row, put them back.
  std::vector<std::pair<int32_t, float>> kept;
  kept.reserve(allowed.size());
  for (const int32_t t : allowed) {
    if (InRow(t, logits)) kept.emplace_back(t, logits[static_cast<size_t>(t)]);
  }
  std::fill(logits.begin(), logits.end(), kBanned);
  for (const auto& [t, l] : kept) logits[static_cast<size_t>(t)] = l;
}

void ApplyBadWords(std::span<const std::vector<int32_t>> bad_words, std::span<const int32_t> tokens,
                   std::span<float> logits) {
  for (const std::vector<int32_t>& word : bad_words) {
    if (word.empty() || !InRow(word.back(), logits)) continue;
    const std::span<const int32_t> prefix = std::span(word).first(word.size() - 1);
    if (prefix.size() > tokens.size()) continue;
    if (std::equal(prefix.begin(), prefix.end(),
                   tokens.end() - static_cast<ptrdiff_t>(prefix.size()))) {
      logits[static_cast<size_t>(word.back())] = kBanned;
    }
  }
}

void ApplyMinTokens(int64_t min_tokens, uint64_t num_generated, std::span<const int32_t> end_ids,
                    std::span<float> logits) {
  if (min_tokens <= 0 || num_generated >= static_cast<uint64_t>(min_tokens)) return;
  for (const int32_t t : end_ids) {
    if (InRow(t, logits)) logits[static_cast<size_t>(t)] = kBanned;
  }
}

void ApplyLogitBias(const std::map<int32_t, double>& bias, std::span<float> logits) {
  // In float, as the logits are: Hugging Face adds a float32 bias tensor.
  for (const auto& [t, b] : bias) {
    if (InRow(t, logits)) logits[static_cast<size_t>(t)] += static_cast<float>(b);
  }
}

void ApplyRepetitionPenalty(double penalty, std::span<const int32_t> window,
                            std::span<float> logits, ProcessorScratch& scratch) {
  if (penalty == 1.0) return;
  // Each distinct token once: mark on the way in, clear when applied. The
  // arithmetic is one float operation, as Hugging Face's and llama.cpp's.
  std::vector<uint32_t>& seen = scratch.counts(logits.size());
  const auto p = static_cast<float>(penalty);
  for (const int32_t t : window) {
    if (InRow(t, logits)) seen[static_cast<size_t>(t)] = 1;
  }
  for (const int32_t t : window) {
    if (!InRow(t, logits) || seen[static_cast<size_t>(t)] == 0) continue;
    seen[static_cast<size_t>(t)] = 0;
    float& l = logits[static_cast<size_t>(t)];
    l = l < 0 ? l * p : l / p;
  }
}

void ApplyPresenceFrequency(double presence, double frequency, std::span<const int32_t> generated,
                            std::span<float> logits, ProcessorScratch& scratch) {
  if (presence == 0.0 && frequency == 0.0) return;
  std::vector<uint32_t>& counts = scratch.counts(logits.size());
  for (const int32_t t : generated) {
    if (InRow(t, logits)) ++counts[static_cast<size_t>(t)];
  }
  for (const int32_t t : generated) {
    if (!InRow(t, logits)) continue;
    uint32_t& c = counts[static_cast<size_t>(t)];
    if (c == 0) continue;  // applied already
    float& l = logits[static_cast<size_t>(t)];
    l = static_cast<float>(static_cast<double>(l) - static_cast<double>(c) * frequency - presence);
    c = 0;
  }
}

void ApplyDry(const DryParams& dry, std::span<const DryBreaker> breakers,
              std::span<const int32_t> tokens, std::span<float> logits) {
  // llama.cpp keeps its parameters in float; so do the arithmetic here.
  const auto multiplier = static_cast<float>(dry.multiplier);
  const auto base = static_cast<float>(dry.base);
  if (multiplier == 0.0f || base < 1.0f || dry.penalty_last_n == 0) return;
  const std::span<const int32_t> w = Last(tokens, dry.penalty_last_n);
  const auto n = static_cast<int64_t>(w.size());
  if (n <= dry.allowed_length) return;
  // back(i): the token i places from the end (back(0) is the last).
  const auto back = [&](int64_t i) { return w[static_cast<size_t>(n - 1 - i)]; };

  // A repeat never reaches back past the most recent breaker: the first
  // head (from the end) whose tail follows it in full; the longest such
  // tail when several start with that head.
  int64_t limit = n;
  for (int64_t i = 0; i < n; ++i) {
    int64_t longest = -1;
    for (const DryBreaker& b : breakers) {
      const auto len = static_cast<int64_t>(b.tail.size());
      if (b.head != back(i) || len <= longest || len > i) continue;
      bool match = true;
      for (int64_t o = 0; o < len && match; ++o)
        match = b.tail[static_cast<size_t>(o)] == back(i - o - 1);
      if (match) longest = len;
    }
    if (longest >= 0) {
      limit = i - longest;
      break;
    }
  }
  if (limit < dry.allowed_length) return;

  // z[k]: how many tokens ending k places before the end equal the tokens
  // ending the history, i.e. the Z-function of the reversed window (the
  // textbook linear algorithm: reuse the rightmost matching box).
  std::vector<int64_t> z(static_cast<size_t>(n), 0);
  for (int64_t k = 1, left = 0, right = 0; k < n; ++k) {
    int64_t len = 0;
    if (k < right) len = std::min(right - k, z[static_cast<size_t>(k - left)]);
    while (k + len < n && back(len) == back(k + len)) ++len;
    z[static_cast<size_t>(k)] = len;
    if (k + len > right) {
      left = k;
      right = k + len;
    }
  }
  // The longest repeat each token would extend: the token after the end of
  // each repeat (k places before the end, so w[n - k]).
  std::map<int32_t, int64_t> longest;
  for (int64_t k = 1; k < n; ++k) {
    const int64_t len = std::min(z[static_cast<size_t>(k)], limit);
    if (len < dry.allowed_length) continue;
    const int32_t next = w[static_cast<size_t>(n - k)];
    auto [it, fresh] = longest.emplace(next, len);
    if (!fresh) it->second = std::max(it->second, len);
  }
  // Cap the exponent so base^exponent stays below float's largest value.
  int64_t max_exponent = 0;
  if (base > 1.000001f) max_exponent = static_cast<int64_t>(88.7228391f / std::log(base));
  for (const auto& entry : longest) {
    const int32_t t = entry.first;
    const int64_t len = entry.second;
    if (!InRow(t, logits)) continue;
    const bool breaker = std::any_of(breakers.begin(), breakers.end(), [t](const DryBreaker& b) {
      return b.head == t && b.tail.empty();
    });
    if (breaker) continue;
    int64_t exponent = len - dry.allowed_length;
    if (max_exponent > 0) exponent = std::min(exponent, max_exponent);
    const auto penalty =
        static_cast<float>(static_cast<double>(multiplier) *
                           std::pow(static_cast<double>(base), static_cast<double>(exponent)));
    logits[static_cast<size_t>(t)] -= penalty;
  }
}

void ApplyLogitsProcessors(const ProcessorParams& p, const TokenHistory& history,
                           std::span<const int32_t> end_ids, std::span<float> logits,
                           ProcessorScratch& scratch) {
  if (!p.active()) return;
  ApplyAllowedTokens(p.allowed_token_ids, logits);
  ApplyBadWords(p.bad_words_ids, history.tokens, logits);
  ApplyMinTokens(p.min_tokens, history.num_generated(), end_ids, logits);
  ApplyLogitBias(p.logit_bias, logits);
  const std::span<const int32_t> window =
      p.penalty_last_n == 0 ? std::span<const int32_t>() : Last(history.tokens, p.penalty_last_n);
  ApplyRepetitionPenalty(p.repetition_penalty, window, logits, scratch);
  // The window's generated tokens: those after the prompt.
  const size_t prompt_in_window =
      history.num_prompt_tokens > history.tokens.size() - window.size()
          ? static_cast<size_t>(history.num_prompt_tokens - (history.tokens.size() - window.size()))
          : 0;
  ApplyPresenceFrequency(p.presence_penalty, p.frequency_penalty,
                         window.subspan(std::min(prompt_in_window, window.size())), logits,
                         scratch);
  ApplyDry(p.dry, p.dry_breakers, history.tokens, logits);
}

Result<std::vector<DryBreaker>> DryBreakersFromText(
    std::span<const std::string> breakers, std::span<const std::string> token_bytes,
    const std::function<Result<std::vector<int32_t>>(std::string_view)>& tokenize) {
  if (breakers.size() > kMaxDryBreakers) {
    return Status::InvalidArgument("dry_sequence_breakers has " + std::to_string(breakers.size()) +
                                   " strings; at most " + std::to_string(kMaxDryBreakers));
  }
  std::vector<DryBreaker> out;
  const auto add = [&out](int32_t head, std::vector<int32_t> tail) {
    for (const DryBreaker& b : out) {
      if (b.head == head && b.tail == tail) return;
    }
    out.push_back({head, std::move(tail)});
  };
  std::map<std::string, std::vector<int32_t>> tails;  // the rest of a breaker, tokenized once
  for (size_t b = 0; b < breakers.size(); ++b) {
    if (breakers[b].empty()) {
      return Status::InvalidArgument("dry_sequence_breakers[" + std::to_string(b) + "] is empty");
    }
    const std::string str = breakers[b].substr(0, kMaxDryBreakerBytes);
    for (size_t t = 0; t < token_bytes.size(); ++t) {
      const std::string& word = token_bytes[t];
      if (word.empty()) continue;
      const auto id = static_cast<int32_t>(t);
      if (word.find(str) != std::string::npos) {
        add(id, {});
        continue;
      }
      // The word ends with a proper prefix of the breaker starting at pos:
      // the breaker's rest must follow in later tokens.
      for (size_t pos = word.find(str[0]); pos != std::string::npos;
           pos = word.find(str[0], pos + 1)) {
        const size_t len = word.size() - pos;
        if (word.compare(pos, len, str, 0, len) != 0) continue;
        const std::string rest = str.substr(len);
        auto it = tails.find(rest);
        if (it == tails.end()) {
          Result<std::vector<int32_t>> ids = tokenize(rest);
          if (!ids.ok()) return ids.error().WithContext("dry_sequence_breakers");
          if (ids->size() > kMaxDryTailTokens) ids->resize(kMaxDryTailTokens);
          it = tails.emplace(rest, std::move(*ids)).first;
        }
        add(id, it->second);
      }
    }
  }
  return out;
}

}  // namespace folio::sampling
