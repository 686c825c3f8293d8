// What the encoders share: added-token matching and splitting, and the
// derived tables FinishTokenizer builds for either loader.
#include <algorithm>
#include <cstdio>
#include <set>

#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/unicode.h"

namespace folio::tokenizer {

// Added-token splitting, as AddedVocabulary::find_matches: matches are
// leftmost-longest over all added tokens; a special one is skipped when
// special tokens are text, a single_word one where a word character
// touches it; lstrip / rstrip widen a match over adjacent whitespace.
std::vector<Segment> SplitOnAdded(const TokenizerImpl& t, std::string_view s,
                                  const LiteralMatcher& matcher, const std::vector<int>& token_of,
                                  bool allow_special) {
  std::vector<Segment> out;
  size_t start_offset = 0;
  if (!matcher.empty()) {
    for (const auto& m : matcher.FindAll(s)) {
      const AddedToken& tok = t.added[static_cast<size_t>(token_of[static_cast<size_t>(m.index)])];
      size_t start = m.begin, stop = m.end;
      if (tok.special && !allow_special) continue;
      if (tok.single_word) {
        size_t len = 0;
        const bool word_before =
            start > 0 && unicode::IsWordChar(unicode::DecodeBefore(s, start, &len));
        const bool word_after =
            stop < s.size() && unicode::IsWordChar(unicode::DecodeAt(s, stop, &len));
        if (word_before || word_after) continue;
      }
      if (tok.lstrip) {
        size_t new_start = start;
        while (new_start > 0) {
          size_t len = 0;
          if (!unicode::IsWhiteSpace(unicode::DecodeBefore(s, new_start, &len))) {
            break;
          }
          new_start -= len;
        }
        // An earlier match may already have taken those spaces.
        start = std::max(new_start, start_offset);
      }
      if (tok.rstrip) {
        while (stop < s.size()) {
          size_t len = 0;
          if (!unicode::IsWhiteSpace(unicode::DecodeAt(s, stop, &len))) break;
          stop += len;
        }
      }
      if (start_offset < start) out.push_back({{start_offset, start}, -1});
      out.push_back({{start, stop}, tok.id});
      start_offset = stop;
    }
  }
  if (start_offset < s.size()) out.push_back({{start_offset, s.size()}, -1});
  return out;
}

// --- LiteralMatcher ---------------------------------------------------------

void LiteralMatcher::Build(const std::vector<std::string>& patterns) {
  patterns_ = patterns;
  for (auto& bucket : by_first_byte_) bucket.clear();
  for (size_t i = 0; i < patterns_.size(); ++i) {
    if (patterns_[i].empty()) continue;
    by_first_byte_[static_cast<unsigned char>(patterns_[i][0])].push_back(static_cast<int>(i));
  }
  for (auto& bucket : by_first_byte_) {
    // Longest first; equal lengths keep the given order.
    std::stable_sort(bucket.begin(), bucket.end(), [&](int a, int b) {
      return patterns_[static_cast<size_t>(a)].size() > patterns_[static_cast<size_t>(b)].size();
    });
  }
}

std::vector<LiteralMatcher::Match> LiteralMatcher::FindAll(std::string_view text) const {
  std::vector<Match> out;
  size_t i = 0;
  while (i < text.size()) {
    const auto& bucket = by_first_byte_[static_cast<unsigned char>(text[i])];
    const int* hit = nullptr;
    for (const int& p : bucket) {
      const std::string& pat = patterns_[static_cast<size_t>(p)];
      if (text.compare(i, pat.size(), pat) == 0) {
        hit = &p;
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    const size_t len = patterns_[static_cast<size_t>(*hit)].size();
    out.push_back({i, i + len, *hit});
    i += len;
  }
  return out;
}

// --- Shared helpers ---------------------------------------------------------

std::optional<std::string> ByteLevelToBytes(std::string_view token) {
  std::string out;
  for (size_t i = 0; i < token.size();) {
    size_t len = 0;
    const int b = unicode::CharToByte(unicode::DecodeAt(token, i, &len));
    if (b < 0) return std::nullopt;
    out.push_back(static_cast<char>(b));
    i += len;
  }
  return out;
}

std::string QuoteToken(std::string_view s) {
  constexpr size_t kMax = 60;
  std::string out = "'";
  out.append(s.substr(0, kMax));
  if (s.size() > kMax) out.append("...");
  out.push_back('\'');
  return out;
}

namespace {

void BuildByteLevelPieces(TokenizerImpl* t, const std::vector<std::string>& texts) {
  const size_t n = t->vocab.size();
  for (size_t id = 0; id < n; ++id) {
    if (t->has_token[id] == 0) continue;
    // tokenizers' ByteLevel decoder: the bytes the characters stand for,
    // or the token's own text if any character is outside the map.
    auto bytes = ByteLevelToBytes(texts[id]);
    t->piece[id] = bytes.has_value() ? *std::move(bytes) : texts[id];
  }
  for (int b = 0; b < 256; ++b) {
    auto it = t->model_ids_by_bytes.find(std::string(1, static_cast<char>(b)));
    if (it != t->model_ids_by_bytes.end()) {
      t->byte_ids[static_cast<size_t>(b)] = it->second;
    }
  }
}

void BuildSpmPieces(TokenizerImpl* t) {
  const size_t n = t->vocab.size();
  for (size_t id = 0; id < n; ++id) {
    if (t->has_token[id] == 0) continue;
    const std::string& text = t->vocab[id];
    unsigned byte = 0;
    char tail = 0;
    if (text.size() == 6 && std::sscanf(text.c_str(), "<0x%2X%c", &byte, &tail) == 2 &&
        tail == '>') {
      t->piece[id] = std::string(1, static_cast<char>(byte));
      // The first <0xNN> token of a byte wins, as in llama.cpp's map.
      if (t->byte_ids[byte] < 0) t->byte_ids[byte] = static_cast<int32_t>(id);
      continue;
    }
    std::string& out = t->piece[id];
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, kSpmSpace.size(), kSpmSpace) == 0) {
        out.push_back(' ');
        i += kSpmSpace.size();
      } else {
        out.push_back(text[i++]);
      }
    }
  }
  // llama.cpp falls back to a one-character token for an ASCII byte.
  for (int b = 0; b < 0x80; ++b) {
    if (t->byte_ids[static_cast<size_t>(b)] >= 0) continue;
    auto it = t->spm_ids.find(std::string(1, static_cast<char>(b)));
    if (it != t->spm_ids.end()) {
      t->byte_ids[static_cast<size_t>(b)] = it->second;
    }
  }
}

}  // namespace

Status FinishTokenizer(TokenizerImpl* t) {
  const size_t n = t->vocab.size();
  FOLIO_CHECK(t->has_token.size() == n && t->special.size() == n);
  t->token_ids.clear();
  // Added tokens first: TokenId() prefers them, as tokenizers does.
  for (const AddedToken& a : t->added) t->token_ids.emplace(a.content, a.id);
  for (size_t id = 0; id < n; ++id) {
    if (t->has_token[id] != 0) {
      t->token_ids.emplace(t->vocab[id], static_cast<int32_t>(id));
    }
  }

  // The text each id decodes from: its vocabulary entry, or for an added
  // token matched in normalized text its normalized content (what
  // `tokenizers`' id_to_token, and so its decoder, gives).
  std::vector<std::string> texts = t->vocab;
  for (const AddedToken& a : t->added) {
    if (a.normalized) texts[static_cast<size_t>(a.id)] = Normalize(t->normalizers, a.content);
  }
  t->piece.assign(n, std::string());
  t->byte_ids.fill(-1);
  switch (t->kind) {
    case TokenizerImpl::Kind::kByteLevelBpe:
      BuildByteLevelPieces(t, texts);
      break;
    case TokenizerImpl::Kind::kSentencePiece:
      BuildSpmPieces(t);
      break;
    case TokenizerImpl::Kind::kWordPiece:
    case TokenizerImpl::Kind::kWpm: {
      BuildWordPiecePieces(t, texts);
      std::set<size_t, std::greater<>> lengths;
      for (const auto& [text, id] : t->wordpiece_ids) lengths.insert(text.size());
      t->wordpiece_lengths.assign(lengths.begin(), lengths.end());
      break;
    }
  }

  std::vector<std::string> raw, normalized;
  t->raw_tokens.clear();
  t->normalized_tokens.clear();
  for (size_t i = 0; i < t->added.size(); ++i) {
    const AddedToken& a = t->added[i];
    if (a.content.empty()) continue;  // never matches, as in tokenizers
    if (a.normalized) {
      // Matched in normalized text as the normalizers leave its content.
      std::string content = Normalize(t->normalizers, a.content);
      if (content.empty()) continue;
      normalized.push_back(std::move(content));
      t->normalized_tokens.push_back(static_cast<int>(i));
    } else {
      raw.push_back(a.content);
      t->raw_tokens.push_back(static_cast<int>(i));
    }
  }
  t->raw_matcher.Build(raw);
  t->normalized_matcher.Build(normalized);

  // The most input bytes one token stands for: a token's text (its bytes,
  // or its form in the vocabulary, the longer), an added token's content,
  // or one unknown character (4 bytes at most). NFC can shrink what it
  // composes to a third (three Hangul jamo, 9 bytes, become one syllable of
  // 3). Unbounded when runs of unknown bytes fuse into one unk token, an
  // added token takes the whitespace beside it, another normalizer may drop
  // characters, or the model is WordPiece (whitespace makes no token, and a
  // word of any length may be one unk).
  uint64_t most = 4;
  bool bounded = !(t->unk_id.has_value() && t->fuse_unk) &&
                 t->kind != TokenizerImpl::Kind::kWordPiece && t->kind != TokenizerImpl::Kind::kWpm;
  bool nfc = false;
  for (const NormalizerStep& step : t->normalizers) {
    nfc = nfc || step.kind == NormalizerStep::Kind::kNfc;
    bounded = bounded && step.kind == NormalizerStep::Kind::kNfc;
  }
  for (size_t id = 0; id < n; ++id) {
    most = std::max<uint64_t>({most, t->piece[id].size(), t->vocab[id].size()});
  }
  for (const AddedToken& a : t->added) {
    most = std::max<uint64_t>(most, a.content.size());
    if (a.lstrip || a.rstrip) bounded = false;
  }
  if (nfc) most *= 3;
  t->max_bytes_per_token = bounded ? std::optional<uint64_t>(most) : std::nullopt;
  for (int32_t id : t->prefix) FOLIO_CHECK(ValidId(*t, id));
  for (int32_t id : t->suffix) FOLIO_CHECK(ValidId(*t, id));
  if (t->pair_template.has_value()) {
    for (const TemplateItem& item : *t->pair_template) {
      FOLIO_CHECK(item.kind != TemplateItem::Kind::kToken || ValidId(*t, item.id));
    }
  }
  return Status::Ok();
}

}  // namespace folio::tokenizer
