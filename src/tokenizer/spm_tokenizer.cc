// SentencePiece encoding as llama.cpp's llm_tokenizer_spm does it.
#include <cstdio>
#include <queue>

#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/unicode.h"

namespace folio::tokenizer {
namespace {

// llama.cpp's llm_tokenizer_spm: start from UTF-8 characters, repeatedly
// merge the adjacent pair whose concatenation is the best-scoring token
// (ties: leftmost), then emit each symbol as its token or as byte tokens.
Status EncodeSpmText(const TokenizerImpl& t, std::string_view text, std::vector<int32_t>* ids) {
  struct Symbol {
    size_t begin, len;  // len 0 once merged away
    int64_t prev, next;
  };
  struct Bigram {
    float score;
    int64_t left, right;
    size_t len;
    bool operator<(const Bigram& o) const {
      return score < o.score || (score == o.score && left > o.left);
    }
  };
  std::vector<Symbol> symbols;
  for (size_t i = 0; i < text.size();) {
    size_t len = 0;
    unicode::DecodeAt(text, i, &len);
    const auto index = static_cast<int64_t>(symbols.size());
    symbols.push_back({i, len, index - 1, i + len < text.size() ? index + 1 : -1});
    i += len;
  }
  std::priority_queue<Bigram> queue;
  auto try_add = [&](int64_t left, int64_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const Symbol& r = symbols[static_cast<size_t>(right)];
    const std::string piece(text.substr(l.begin, l.len + r.len));
    auto it = t.spm_ids.find(piece);
    if (it == t.spm_ids.end()) return;
    queue.push({t.scores[static_cast<size_t>(it->second)], left, right, piece.size()});
  };
  for (size_t i = 1; i < symbols.size(); ++i) {
    try_add(static_cast<int64_t>(i) - 1, static_cast<int64_t>(i));
  }
  while (!queue.empty()) {
    const Bigram top = queue.top();
    queue.pop();
    Symbol& l = symbols[static_cast<size_t>(top.left)];
    Symbol& r = symbols[static_cast<size_t>(top.right)];
    if (l.len == 0 || r.len == 0 || l.len + r.len != top.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = top.left;
    try_add(l.prev, top.left);
    try_add(top.left, l.next);
  }
  for (int64_t i = symbols.empty() ? -1 : 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& s = symbols[static_cast<size_t>(i)];
    const std::string_view piece = text.substr(s.begin, s.len);
    if (auto it = t.spm_ids.find(std::string(piece)); it != t.spm_ids.end()) {
      ids->push_back(it->second);
      continue;
    }
    for (char c : piece) {
      const int32_t id = t.byte_ids[static_cast<unsigned char>(c)];
      if (id >= 0) {
        ids->push_back(id);
      } else if (t.unk_id.has_value()) {
        ids->push_back(*t.unk_id);
      } else {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02X", static_cast<unsigned char>(c));
        return Status::NotFound(std::string("byte ") + hex +
                                " has no <0xNN> token and there is no unk token");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status EncodeSpm(const TokenizerImpl& t, std::string_view text, bool allow_special,
                 std::vector<int32_t>* ids) {
  bool after_token = true;  // the text start counts as after a token
  std::string buf;
  for (const Segment& seg : SplitOnAdded(t, text, t.raw_matcher, t.raw_tokens, allow_special)) {
    if (seg.id >= 0) {
      ids->push_back(seg.id);
      after_token = true;
      continue;
    }
    buf.clear();
    if (t.add_space_prefix && after_token) buf.append(kSpmSpace);
    for (char c : text.substr(seg.span.first, seg.span.second - seg.span.first)) {
      if (c == ' ') {
        buf.append(kSpmSpace);
      } else {
        buf.push_back(c);
      }
    }
    FOLIO_RETURN_IF_ERROR(EncodeSpmText(t, buf, ids));
    after_token = false;
  }
  return Status::Ok();
}

}  // namespace folio::tokenizer
