// Tokenizer::Encode / EncodePair / Decode and StreamingDecoder: what every
// model shares (added tokens, normalizers, post-processor templates, UTF-8
// repair), dispatching to the model's encoder by kind.
#include <memory>

#include "folio/core/utf8.h"
#include "folio/tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/unicode.h"

namespace folio::tokenizer {
namespace {

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// Encodes text without the post-processor's special tokens.
Status EncodeText(const TokenizerImpl& t, std::string_view text, bool allow_special,
                  std::vector<int32_t>* ids) {
  switch (t.kind) {
    case TokenizerImpl::Kind::kSentencePiece:
      return EncodeSpm(t, text, allow_special, ids);
    case TokenizerImpl::Kind::kWpm:
      for (const Segment& seg : SplitOnAdded(t, text, t.raw_matcher, t.raw_tokens, allow_special)) {
        if (seg.id >= 0) {
          ids->push_back(seg.id);
        } else {
          EncodeWpm(t, text.substr(seg.span.first, seg.span.second - seg.span.first), ids);
        }
      }
      return Status::Ok();
    case TokenizerImpl::Kind::kByteLevelBpe:
    case TokenizerImpl::Kind::kWordPiece:
      break;
  }
  // `tokenizers`' pipeline: added tokens matched in the raw text, the rest
  // normalized, added tokens matched again in that, the rest to the model.
  for (const Segment& seg : SplitOnAdded(t, text, t.raw_matcher, t.raw_tokens, allow_special)) {
    if (seg.id >= 0) {
      ids->push_back(seg.id);
      continue;
    }
    const std::string normalized =
        Normalize(t.normalizers, text.substr(seg.span.first, seg.span.second - seg.span.first));
    const std::string_view piece = normalized;
    for (const Segment& inner :
         SplitOnAdded(t, piece, t.normalized_matcher, t.normalized_tokens, allow_special)) {
      if (inner.id >= 0) {
        ids->push_back(inner.id);
        continue;
      }
      const std::string_view part =
          piece.substr(inner.span.first, inner.span.second - inner.span.first);
      if (t.kind == TokenizerImpl::Kind::kWordPiece) {
        FOLIO_RETURN_IF_ERROR(EncodeWordPiece(t, part, ids));
      } else {
        FOLIO_RETURN_IF_ERROR(EncodeBpe(t, part, ids));
      }
    }
  }
  return Status::Ok();
}

Status CheckUtf8(std::string_view text, const char* what) {
  if (const size_t bad = utf8::FirstInvalid(text); bad != std::string_view::npos) {
    return Status::InvalidArgument(std::string(what) + " is not valid UTF-8 at byte " +
                                   std::to_string(bad) + " of " + std::to_string(text.size()));
  }
  return Status::Ok();
}

}  // namespace

// --- Tokenizer --------------------------------------------------------------

Tokenizer::Tokenizer(std::shared_ptr<const TokenizerImpl> impl) : impl_(std::move(impl)) {}

Result<std::vector<int32_t>> Tokenizer::Encode(std::string_view text, bool add_special_tokens,
                                               bool allow_special) const {
  const TokenizerImpl& t = *impl_;
  FOLIO_RETURN_IF_ERROR(CheckUtf8(text, "text"));
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = t.prefix;
  FOLIO_RETURN_IF_ERROR(EncodeText(t, text, allow_special, &ids));
  if (add_special_tokens) {
    ids.insert(ids.end(), t.suffix.begin(), t.suffix.end());
  }
  return ids;
}

Result<Encoding> Tokenizer::EncodePair(std::string_view a, std::string_view b,
                                       bool allow_special) const {
  const TokenizerImpl& t = *impl_;
  if (!t.pair_template.has_value()) {
    return Status::Unimplemented("EncodePair: the tokenizer's post-processor has no pair template");
  }
  FOLIO_RETURN_IF_ERROR(CheckUtf8(a, "the first text"));
  FOLIO_RETURN_IF_ERROR(CheckUtf8(b, "the second text"));
  std::vector<int32_t> ids_a, ids_b;
  FOLIO_RETURN_IF_ERROR(EncodeText(t, a, allow_special, &ids_a));
  FOLIO_RETURN_IF_ERROR(EncodeText(t, b, allow_special, &ids_b));
  Encoding out;
  for (const TemplateItem& item : *t.pair_template) {
    if (item.kind == TemplateItem::Kind::kToken) {
      out.ids.push_back(item.id);
      out.type_ids.push_back(item.type_id);
      continue;
    }
    const std::vector<int32_t>& part = item.kind == TemplateItem::Kind::kSequenceA ? ids_a : ids_b;
    out.ids.insert(out.ids.end(), part.begin(), part.end());
    out.type_ids.insert(out.type_ids.end(), part.size(), item.type_id);
  }
  return out;
}

Result<std::string> Tokenizer::Decode(std::span<const int32_t> ids,
                                      bool skip_special_tokens) const {
  const TokenizerImpl& t = *impl_;
  std::string bytes;
  bool first = true;
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
    const auto index = static_cast<size_t>(id);
    // WordPiece's first token has no space before it.
    bytes.append(first && t.kind == TokenizerImpl::Kind::kWordPiece ? t.piece_first[index]
                                                                    : t.piece[index]);
    first = false;
  }
  size_t from = 0;
  switch (t.kind) {
    case TokenizerImpl::Kind::kSentencePiece:
      // SentencePiece's leading ▁ comes back as one space that is not text.
      if (t.add_space_prefix && !bytes.empty() && bytes[0] == ' ') from = 1;
      break;
    case TokenizerImpl::Kind::kWpm: {
      std::string cleaned;
      SpaceCleanupState state;
      SpaceCleanupFeed(bytes, &state, &cleaned);
      SpaceCleanupFinish(&state, &cleaned);
      bytes = std::move(cleaned);
      break;
    }
    case TokenizerImpl::Kind::kByteLevelBpe:
    case TokenizerImpl::Kind::kWordPiece:
      break;
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
  } else if (t.kind == TokenizerImpl::Kind::kWordPiece) {
    // Decode's first token is the first one not skipped, whatever its text.
    piece = at_start_ ? t.piece_first[static_cast<size_t>(id)] : t.piece[static_cast<size_t>(id)];
    at_start_ = false;
  } else {
    piece = t.piece[static_cast<size_t>(id)];
  }
  if (piece.empty()) return {};
  if (at_start_ && t.kind == TokenizerImpl::Kind::kSentencePiece && t.add_space_prefix &&
      piece[0] == ' ') {
    piece.remove_prefix(1);
  }
  at_start_ = false;
  if (t.kind == TokenizerImpl::Kind::kWpm) {
    SpaceCleanupFeed(piece, &cleanup_, &pending_);
  } else {
    pending_.append(piece);
  }
  std::string out;
  const size_t used = unicode::AppendLossy(pending_, /*final=*/false, &out);
  pending_.erase(0, used);
  return out;
}

std::string StreamingDecoder::Flush() {
  SpaceCleanupFinish(&cleanup_, &pending_);
  std::string out;
  unicode::AppendLossy(pending_, /*final=*/true, &out);
  pending_.clear();
  return out;
}

}  // namespace folio::tokenizer
