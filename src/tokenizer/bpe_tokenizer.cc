// Encoding and decoding. Byte-level BPE mirrors Hugging Face `tokenizers`:
// added tokens, normalizer, pre-tokenizer, BPE with ranked merges.
// SentencePiece encoding is in spm_tokenizer.cc, the tables both share in
// tokenizer_common.cc.
#include <algorithm>
#include <cstdio>
#include <queue>

#include "folio/core/utf8.h"
#include "folio/tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/unicode.h"

namespace folio::tokenizer {
namespace {

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// One pre-tokenizer split of `piece` (offsets into `s`), Isolated: every
// match and every gap between matches becomes a piece; empty ones vanish.
Status SplitPiece(const PreSplitStep& step, std::string_view s, Span piece,
                  std::vector<Span>* out) {
  const std::string_view text = s.substr(piece.first, piece.second - piece.first);
  std::vector<Span> matches;
  if (step.kind == PreSplitStep::Kind::kRegex) {
    FOLIO_RETURN_IF_ERROR(step.regex.FindAll(text, &matches));
  } else {
    // Digits: numeric characters, one by one or in runs.
    size_t i = 0;
    while (i < text.size()) {
      size_t len = 0;
      if (!unicode::IsNumeric(unicode::DecodeAt(text, i, &len))) {
        i += len;
        continue;
      }
      if (step.individual_digits || matches.empty() || matches.back().second != i) {
        matches.emplace_back(i, i + len);
      } else {
        matches.back().second = i + len;
      }
      i += len;
    }
  }
  size_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (prev < b) out->emplace_back(piece.first + prev, piece.first + b);
    if (b < e) out->emplace_back(piece.first + b, piece.first + e);
    prev = e;
  }
  if (prev < text.size()) out->emplace_back(piece.first + prev, piece.second);
  return Status::Ok();
}

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
  std::vector<Span> pieces = {{0, s.size()}};
  for (const PreSplitStep& step : t.pre_splits) {
    std::vector<Span> next;
    for (const Span& piece : pieces) {
      FOLIO_RETURN_IF_ERROR(SplitPiece(step, s, piece, &next));
    }
    pieces = std::move(next);
  }
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

// Normalized text between added tokens -> pre-tokenizer -> BPE.
Status EncodeText(const TokenizerImpl& t, std::string_view s, std::vector<int32_t>* ids) {
  return ForEachWord(t, s, [&](std::string_view word) { return EncodeWord(t, word, ids); });
}

}  // namespace

Result<std::vector<std::string>> PreTokenizedWords(const TokenizerImpl& t, std::string_view s) {
  std::vector<std::string> words;
  FOLIO_RETURN_IF_ERROR(ForEachWord(t, s, [&](std::string_view word) {
    words.emplace_back(word);
    return Status::Ok();
  }));
  return words;
}

// --- Tokenizer --------------------------------------------------------------

Tokenizer::Tokenizer(std::shared_ptr<const TokenizerImpl> impl) : impl_(std::move(impl)) {}

Result<std::vector<int32_t>> Tokenizer::Encode(std::string_view text, bool add_special_tokens,
                                               bool allow_special) const {
  const TokenizerImpl& t = *impl_;
  if (const size_t bad = utf8::FirstInvalid(text); bad != std::string_view::npos) {
    return Status::InvalidArgument("text is not valid UTF-8 at byte " + std::to_string(bad) +
                                   " of " + std::to_string(text.size()));
  }
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = t.prefix;
  if (t.kind == TokenizerImpl::Kind::kSentencePiece) {
    FOLIO_RETURN_IF_ERROR(EncodeSpm(t, text, allow_special, &ids));
  } else {
    for (const Segment& seg : SplitOnAdded(t, text, t.raw_matcher, t.raw_tokens, allow_special)) {
      if (seg.id >= 0) {
        ids.push_back(seg.id);
        continue;
      }
      std::string_view piece = text.substr(seg.span.first, seg.span.second - seg.span.first);
      std::string normalized;
      if (t.nfc) {
        normalized = unicode::Nfc(piece);
        piece = normalized;
      }
      for (const Segment& inner :
           SplitOnAdded(t, piece, t.normalized_matcher, t.normalized_tokens, allow_special)) {
        if (inner.id >= 0) {
          ids.push_back(inner.id);
          continue;
        }
        FOLIO_RETURN_IF_ERROR(EncodeText(
            t, piece.substr(inner.span.first, inner.span.second - inner.span.first), &ids));
      }
    }
  }
  if (add_special_tokens) {
    ids.insert(ids.end(), t.suffix.begin(), t.suffix.end());
  }
  return ids;
}

Result<std::string> Tokenizer::Decode(std::span<const int32_t> ids,
                                      bool skip_special_tokens) const {
  const TokenizerImpl& t = *impl_;
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (!ValidId(t, id)) {
      return Status::OutOfRange("token " + std::to_string(i) + " has id " + std::to_string(id) +
                                ", which has no token (vocab size " +
                                std::to_string(t.vocab.size()) + ")");
    }
    if (skip_special_tokens && t.special[static_cast<size_t>(id)] != 0) {
      continue;
    }
    bytes.append(t.piece[static_cast<size_t>(id)]);
  }
  // SentencePiece's leading ▁ comes back as one space that is not text.
  size_t from = 0;
  if (t.kind == TokenizerImpl::Kind::kSentencePiece && t.add_space_prefix && !bytes.empty() &&
      bytes[0] == ' ') {
    from = 1;
  }
  std::string out;
  unicode::AppendLossy(std::string_view(bytes).substr(from), /*final=*/true, &out);
  return out;
}

uint64_t Tokenizer::vocab_size() const { return impl_->vocab.size(); }
std::optional<uint64_t> Tokenizer::max_bytes_per_token() const {
  return impl_->max_bytes_per_token;
}
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }

std::optional<int32_t> Tokenizer::TokenId(std::string_view token) const {
  auto it = impl_->token_ids.find(std::string(token));
  if (it == impl_->token_ids.end()) return std::nullopt;
  return it->second;
}

const std::string& Tokenizer::TokenBytes(int32_t id) const {
  static const std::string kEmpty;
  return ValidId(*impl_, id) ? impl_->piece[static_cast<size_t>(id)] : kEmpty;
}

const std::string& Tokenizer::TokenText(int32_t id) const {
  static const std::string kEmpty;
  return ValidId(*impl_, id) ? impl_->vocab[static_cast<size_t>(id)] : kEmpty;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return ValidId(*impl_, id) && impl_->special[static_cast<size_t>(id)] != 0;
}

// --- StreamingDecoder -------------------------------------------------------

StreamingDecoder::StreamingDecoder(const Tokenizer& t, bool skip_special_tokens)
    : tokenizer_(&t), skip_special_tokens_(skip_special_tokens) {}

std::string StreamingDecoder::Push(int32_t id) {
  const TokenizerImpl& t = *tokenizer_->impl_;
  std::string_view piece;
  if (!ValidId(t, id)) {
    piece = kReplacementChar;
  } else if (skip_special_tokens_ && t.special[static_cast<size_t>(id)] != 0) {
    return {};
  } else {
    piece = t.piece[static_cast<size_t>(id)];
  }
  if (piece.empty()) return {};
  if (at_start_ && t.kind == TokenizerImpl::Kind::kSentencePiece && t.add_space_prefix &&
      piece[0] == ' ') {
    piece.remove_prefix(1);
  }
  at_start_ = false;
  pending_.append(piece);
  std::string out;
  const size_t used = unicode::AppendLossy(pending_, /*final=*/false, &out);
  pending_.erase(0, used);
  return out;
}

std::string StreamingDecoder::Flush() {
  std::string out;
  unicode::AppendLossy(pending_, /*final=*/true, &out);
  pending_.clear();
  return out;
}

}  // namespace folio::tokenizer
