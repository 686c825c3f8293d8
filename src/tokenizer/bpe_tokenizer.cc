// Byte-level BPE as Hugging Face `tokenizers` does it: the pre-tokenizer's
// words, each through ByteLevel, then BPE with ranked merges.
#include <algorithm>
#include <cstdio>
#include <queue>

#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/unicode.h"

namespace folio::tokenizer {
namespace {

// The longest word BPE takes: its positions are int32 (INT32_MAX bytes).
constexpr size_t kMaxWordBytes = 0x7fffffff;

// 12 bytes: a long word holds up to three per byte at once (the first
// pairs, then two per merge), so this and Symbol set the memory one byte of
// a word costs: 16 bytes of Symbol and up to 36 of candidates.
struct MergeCandidate {
  int32_t rank;
  uint32_t pos;
  int32_t new_id;
  // std::priority_queue is a max-heap: the top is the lowest rank, then
  // the leftmost position (tokenizers' Word::merge_all).
  bool operator<(const MergeCandidate& o) const {
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

// Byte-level BPE of one pre-tokenized word (raw bytes).
Status EncodeWord(const TokenizerImpl& t, std::string_view word, std::vector<int32_t>* ids) {
  if (word.empty()) return Status::Ok();
  if (t.ignore_merges) {
    if (auto it = t.model_ids_by_bytes.find(std::string(word)); it != t.model_ids_by_bytes.end()) {
      ids->push_back(it->second);
      return Status::Ok();
    }
  }
  // Positions fit 32 bits: a word is at most kMaxWordBytes.
  if (word.size() > kMaxWordBytes) {
    return Status::InvalidArgument("a word of " + std::to_string(word.size()) +
                                   " bytes: the tokenizer takes words of at most " +
                                   std::to_string(kMaxWordBytes) + " bytes");
  }
  struct Symbol {  // 16 bytes
    int32_t id;
    int32_t prev, next;  // -1: none
    uint32_t len;        // bytes; 0 once merged into its left neighbour
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  bool last_was_unk = false;
  for (char c : word) {
    const int32_t id = t.byte_ids[static_cast<unsigned char>(c)];
    if (id >= 0) {
      symbols.push_back({id, 0, 0, 1});
      last_was_unk = false;
      continue;
    }
    if (!t.unk_id.has_value()) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02X", static_cast<unsigned char>(c));
      return Status::NotFound(std::string("byte ") + hex +
                              " has no token in the vocabulary and there is "
                              "no unk token");
    }
    if (t.fuse_unk && last_was_unk) {
      ++symbols.back().len;
    } else {
      symbols.push_back({*t.unk_id, 0, 0, 1});
    }
    last_was_unk = true;
  }
  const auto n = static_cast<int32_t>(symbols.size());
  for (int32_t i = 0; i < n; ++i) {
    symbols[static_cast<size_t>(i)].prev = i - 1;
    symbols[static_cast<size_t>(i)].next = i + 1 < n ? i + 1 : -1;
  }
  auto find_merge = [&](int32_t left, int32_t right) {
    const uint64_t key =
        (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
    auto it = t.merges.find(key);
    return it == t.merges.end() ? nullptr : &it->second;
  };
  std::priority_queue<MergeCandidate> queue;
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const auto* m = find_merge(symbols[i].id, symbols[i + 1].id)) {
      queue.push({m->first, static_cast<uint32_t>(i), m->second});
    }
  }
  while (!queue.empty()) {
    const MergeCandidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.len == 0 || left.next < 0) continue;
    const auto right_pos = static_cast<size_t>(left.next);
    const Symbol right = symbols[right_pos];
    const auto* current = find_merge(left.id, right.id);
    if (current == nullptr || current->second != top.new_id) continue;  // stale
    left.id = top.new_id;
    left.len += right.len;
    left.next = right.next;
    symbols[right_pos].len = 0;
    if (right.next >= 0) {
      symbols[static_cast<size_t>(right.next)].prev = static_cast<int32_t>(top.pos);
    }
    if (left.prev >= 0) {
      const auto prev = static_cast<size_t>(left.prev);
      if (const auto* m = find_merge(symbols[prev].id, left.id)) {
        queue.push({m->first, static_cast<uint32_t>(left.prev), m->second});
      }
    }
    if (left.next >= 0) {
      if (const auto* m = find_merge(left.id, symbols[static_cast<size_t>(left.next)].id)) {
        queue.push({m->first, top.pos, m->second});
      }
    }
  }
  for (const Symbol& s : symbols) {
    if (s.len != 0) ids->push_back(s.id);
  }
  return Status::Ok();
}

// The pre-tokenizer: fn(word) for each word of normalized text s, in order.
template <typename Fn>
Status ForEachWord(const TokenizerImpl& t, std::string_view s, Fn&& fn) {
  std::vector<Span> pieces;
  FOLIO_RETURN_IF_ERROR(PreSplit(t.pre_splits, s, &pieces));
  std::string word;
  std::vector<Span> words;
  PreSplitStep byte_level_split;
  if (t.byte_level_regex.has_value()) {
    byte_level_split.regex = *t.byte_level_regex;
  }
  for (const auto& [b, e] : pieces) {
    if (b == e) continue;
    word.clear();
    // ByteLevel's add_prefix_space applies to every piece, as in tokenizers.
    if (t.prefix_space && s[b] != ' ') word.push_back(' ');
    word.append(s.substr(b, e - b));
    if (!t.byte_level_regex.has_value()) {
      FOLIO_RETURN_IF_ERROR(fn(std::string_view(word)));
      continue;
    }
    words.clear();
    FOLIO_RETURN_IF_ERROR(SplitPiece(byte_level_split, word, {0, word.size()}, &words));
    for (const auto& [wb, we] : words) {
      FOLIO_RETURN_IF_ERROR(fn(std::string_view(word).substr(wb, we - wb)));
    }
  }
  return Status::Ok();
}

}  // namespace

Status EncodeBpe(const TokenizerImpl& t, std::string_view normalized, std::vector<int32_t>* ids) {
  return ForEachWord(t, normalized,
                     [&](std::string_view word) { return EncodeWord(t, word, ids); });
}

Result<std::vector<std::string>> PreTokenizedWords(const TokenizerImpl& t, std::string_view s) {
  std::vector<std::string> words;
  FOLIO_RETURN_IF_ERROR(ForEachWord(t, s, [&](std::string_view word) {
    words.emplace_back(word);
    return Status::Ok();
  }));
  return words;
}

}  // namespace folio::tokenizer
