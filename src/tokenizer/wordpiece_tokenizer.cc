// WordPiece, two ways: `tokenizers`' model over a tokenizer.json's
// normalized, pre-tokenized text (kWordPiece), and llama.cpp's WPM over a
// GGUF's phantom-space vocabulary (kWpm), each with its decoder.
#include <algorithm>

#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/unicode.h"

namespace folio::tokenizer {
namespace {

constexpr std::string_view kPhantomSpace = kSpmSpace;  // U+2581

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0u) == 0x80u; }

size_t CountChars(std::string_view s) {
  return static_cast<size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return !IsContinuationByte(c); }));
}

// `tokenizers`' WordPiece::tokenize of one word: from the start, the
// longest vocabulary entry (a later piece spelt with the prefix) that the
// word begins with, again and again; a word with a piece that matches
// nothing, or longer than max_input_chars_per_word, is one unk.
void EncodeWord(const TokenizerImpl& t, std::string_view word, std::vector<int32_t>* ids) {
  if (word.empty()) return;
  const int32_t unk = *t.unk_id;
  if (CountChars(word) > t.max_input_chars_per_word) {
    ids->push_back(unk);
    return;
  }
  const size_t mark = ids->size();
  std::string candidate;
  size_t start = 0;
  while (start < word.size()) {
    const std::string_view prefix =
        start > 0 ? std::string_view(t.continuing_prefix) : std::string_view();
    bool found = false;
    // The vocabulary's lengths, longest first: the first hit is the longest
    // match, as `tokenizers`' scan from the word's end finds it.
    for (const size_t len : t.wordpiece_lengths) {
      if (len <= prefix.size() || len - prefix.size() > word.size() - start) continue;
      const size_t end = start + len - prefix.size();
      if (end < word.size() && IsContinuationByte(word[end])) continue;
      candidate.assign(prefix);
      candidate.append(word.substr(start, end - start));
      auto it = t.wordpiece_ids.find(candidate);
      if (it == t.wordpiece_ids.end()) continue;
      ids->push_back(it->second);
      start = end;
      found = true;
      break;
    }
    if (!found) {
      ids->resize(mark);
      ids->push_back(unk);
      return;
    }
  }
}

// llama.cpp's character classes, from the Unicode 16 categories.
bool WpmIsControl(unicode::Category c) {
  using unicode::Category;
  return c == Category::kCc || c == Category::kCf || c == Category::kCo || c == Category::kCs;
}
bool WpmIsMark(unicode::Category c) {
  using unicode::Category;
  return c == Category::kMn || c == Category::kMc || c == Category::kMe;
}
bool WpmIsPunctuation(unicode::Category c) {
  using unicode::Category;
  return c == Category::kPc || c == Category::kPd || c == Category::kPs || c == Category::kPe ||
         c == Category::kPi || c == Category::kPf || c == Category::kPo;
}
bool WpmIsSymbol(unicode::Category c) {
  using unicode::Category;
  return c == Category::kSm || c == Category::kSc || c == Category::kSk || c == Category::kSo;
}

// llm_tokenizer_wpm_session::preprocess: words split at whitespace (which
// goes) and around each punctuation mark, ASCII symbol and CJK ideograph
// (each a word of its own), controls dropped, and with the options, marks
// dropped after a one-code-point "NFD" and the rest lowercased.
std::vector<std::string> WpmWords(const TokenizerImpl& t, std::string_view text) {
  std::vector<std::string> words(1);
  for (size_t i = 0; i < text.size();) {
    size_t len = 0;
    char32_t cp = unicode::DecodeAt(text, i, &len);
    i += len;
    if (t.wpm_strip_accents) cp = unicode::NfdFirst(cp);
    if (unicode::IsWhiteSpace(cp)) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    const unicode::Category category = unicode::CategoryOf(cp);
    if (cp == 0 || cp == 0xFFFD || WpmIsControl(category)) continue;
    if (t.wpm_strip_accents && WpmIsMark(category)) continue;
    std::string s;
    unicode::AppendUtf8(t.wpm_lowercase ? unicode::SimpleLowercase(cp) : cp, &s);
    if (WpmIsPunctuation(category) || (cp < 0x7F && WpmIsSymbol(category)) ||
        unicode::IsChineseChar(cp)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = std::move(s);
      words.emplace_back();
    } else {
      words.back() += s;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

// `tokenizers`' decoders::wordpiece::cleanup: each replacement over the
// whole text, in this order.
void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  for (size_t hit = s->find(from); hit != std::string::npos; hit = s->find(from, pos)) {
    out.append(*s, pos, hit - pos);
    out.append(to);
    pos = hit + from.size();
  }
  if (pos == 0) return;
  out.append(*s, pos);
  *s = std::move(out);
}

// llama.cpp's clean_spaces, pass by pass, one byte at a time: each pass
// holds back the bytes whose fate the next byte decides.
// Pass 1: a space before ? ! . , goes.
void CleanupPass1(char c, std::string* held, std::string* out) {
  if (!held->empty()) {
    if (c != '?' && c != '!' && c != '.' && c != ',') out->append(*held);
    held->clear();
  }
  if (c == ' ') {
    held->assign(1, ' ');
  } else {
    out->push_back(c);
  }
}

// What passes 2 and 3 do once their own held bytes are settled: a held
// lone space waits to see whether an apostrophe follows (" '" is held
// then); otherwise it goes out, and c is held if a space, else emitted.
void HoldSpaceApostrophe(char c, std::string* held, std::string* out) {
  if (*held == " ") {
    if (c == '\'') {
      held->push_back('\'');  // " '"
      return;
    }
    out->push_back(' ');
    held->clear();
  }
  if (c == ' ') {
    held->assign(1, ' ');
  } else {
    out->push_back(c);
  }
}

// Pass 2: " ' " becomes "'"; the space it consumed ends the match, so the
// next byte starts afresh.
void CleanupPass2(char c, std::string* held, std::string* out) {
  if (*held == " '") {
    held->clear();
    if (c == ' ') {
      out->push_back('\'');
      return;
    }
    out->append(" '");
  }
  HoldSpaceApostrophe(c, held, out);
}

// Pass 3: the space before 's 'm 're 've goes.
void CleanupPass3(char c, std::string* held, std::string* out) {
  if (held->size() == 3) {  // " 'r" or " 'v"
    const char x1 = (*held)[2];
    held->clear();
    if (c == 'e') {
      out->append({'\'', x1, 'e'});
      return;
    }
    out->append({' ', '\'', x1});
  } else if (*held == " '") {
    if (c == 'r' || c == 'v') {
      held->push_back(c);  // " 'r" or " 'v"
      return;
    }
    held->clear();
    if (c == 's' || c == 'm') {
      out->append({'\'', c});
      return;
    }
    out->append(" '");
  }
  HoldSpaceApostrophe(c, held, out);
}

}  // namespace

Status EncodeWordPiece(const TokenizerImpl& t, std::string_view normalized,
                       std::vector<int32_t>* ids) {
  std::vector<Span> words;
  FOLIO_RETURN_IF_ERROR(PreSplit(t.pre_splits, normalized, &words));
  for (const auto& [b, e] : words) EncodeWord(t, normalized.substr(b, e - b), ids);
  return Status::Ok();
}

// llm_tokenizer_wpm_session::tokenize: each word, after a phantom space,
// split greedily into the longest tokens from the left; a word with a
// position nothing matches is one unk. Lookups run over every token,
// special ones included, byte by byte (as llama.cpp's).
void EncodeWpm(const TokenizerImpl& t, std::string_view text, std::vector<int32_t>* ids) {
  std::string word1, candidate;
  for (const std::string& word : WpmWords(t, text)) {
    word1.assign(kPhantomSpace);
    word1.append(word);
    const size_t mark = ids->size();
    for (size_t i = 0; i < word1.size();) {
      bool found = false;
      for (const size_t len : t.wordpiece_lengths) {
        if (len == 0 || len > word1.size() - i) continue;
        candidate.assign(word1, i, len);
        auto it = t.wordpiece_ids.find(candidate);
        if (it == t.wordpiece_ids.end()) continue;
        ids->push_back(it->second);
        i += len;
        found = true;
        break;
      }
      if (!found) {
        ids->resize(mark);
        break;
      }
    }
    if (ids->size() == mark) ids->push_back(*t.unk_id);
  }
}

std::string WordPieceCleanup(std::string text) {
  static constexpr std::pair<std::string_view, std::string_view> kReplacements[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},     {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},   {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
  };
  for (const auto& [from, to] : kReplacements) ReplaceAll(&text, from, to);
  return text;
}

void SpaceCleanupFeed(std::string_view in, SpaceCleanupState* state, std::string* out) {
  std::string after1, after2;
  for (char c : in) CleanupPass1(c, &state->held[0], &after1);
  for (char c : after1) CleanupPass2(c, &state->held[1], &after2);
  for (char c : after2) CleanupPass3(c, &state->held[2], out);
}

void SpaceCleanupFinish(SpaceCleanupState* state, std::string* out) {
  std::string after2;
  for (char c : state->held[0]) CleanupPass2(c, &state->held[1], &after2);
  after2.append(state->held[1]);
  for (char c : after2) CleanupPass3(c, &state->held[2], out);
  out->append(state->held[2]);
  for (std::string& held : state->held) held.clear();
}

void BuildWordPiecePieces(TokenizerImpl* t, const std::vector<std::string>& texts) {
  const size_t n = t->vocab.size();
  t->piece.assign(n, std::string());
  t->piece_first.assign(n, std::string());
  std::vector<uint8_t> added(n, 0);
  for (const AddedToken& a : t->added) added[static_cast<size_t>(a.id)] = 1;
  for (size_t id = 0; id < n; ++id) {
    if (t->has_token[id] == 0) continue;
    const std::string& text = texts[id];
    if (t->kind == TokenizerImpl::Kind::kWpm) {
      // llama.cpp's token_to_piece: special and user-defined tokens as they
      // are, unused ones as nothing, the rest with ▁ as a space.
      if (added[id] != 0) {
        t->piece[id] = text;
      } else if (id >= t->unused.size() || t->unused[id] == 0) {
        std::string& out = t->piece[id];
        for (size_t i = 0; i < text.size();) {
          if (text.compare(i, kPhantomSpace.size(), kPhantomSpace) == 0) {
            out.push_back(' ');
            i += kPhantomSpace.size();
          } else {
            out.push_back(text[i++]);
          }
        }
      }
      continue;
    }
    // `tokenizers`' WordPiece decoder: a later token loses the prefix or
    // gains a space, then each token is cleaned up alone. Without a decoder
    // the tokens are joined with spaces.
    if (!t->wordpiece_decoder) {
      t->piece_first[id] = text;
      t->piece[id] = " " + text;
      continue;
    }
    std::string next =
        text.starts_with(t->decoder_prefix) ? text.substr(t->decoder_prefix.size()) : " " + text;
    t->piece_first[id] = t->decoder_cleanup ? WordPieceCleanup(text) : text;
    t->piece[id] = t->decoder_cleanup ? WordPieceCleanup(std::move(next)) : std::move(next);
  }
}

}  // namespace folio::tokenizer
