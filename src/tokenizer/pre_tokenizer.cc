// The pre-tokenizer's split steps, model-independent: Split, Digits,
// BertPreTokenizer, Whitespace and WhitespaceSplit, each applied to every
// piece the previous one left, as `tokenizers`' PreTokenizedString::split.
#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/unicode.h"

namespace folio::tokenizer {
namespace {

// The character classes the whitespace-removing steps split on.
enum class CharClass { kSpace, kPunctuation, kWord, kOther };

CharClass BertClass(char32_t cp) {
  if (unicode::IsWhiteSpace(cp)) return CharClass::kSpace;
  return (unicode::BertFlags(cp) & unicode::kBertPunctuation) != 0 ? CharClass::kPunctuation
                                                                   : CharClass::kWord;
}

// Whitespace's \w+|[^\w\s]+: runs of word characters, runs of the rest.
CharClass WhitespaceClass(char32_t cp) {
  if (unicode::IsWhiteSpace(cp)) return CharClass::kSpace;
  return (unicode::BertFlags(cp) & unicode::kOnigWord) != 0 ? CharClass::kWord : CharClass::kOther;
}

CharClass WhitespaceSplitClass(char32_t cp) {
  return unicode::IsWhiteSpace(cp) ? CharClass::kSpace : CharClass::kWord;
}

// Splits text (at offset base of the whole) into maximal runs of one class;
// spaces are removed and each punctuation character is a piece of its own.
template <typename Classify>
void SplitByClass(std::string_view text, size_t base, Classify classify, std::vector<Span>* out) {
  size_t start = 0;
  CharClass run = CharClass::kSpace;
  for (size_t i = 0; i < text.size();) {
    size_t len = 0;
    const CharClass c = classify(unicode::DecodeAt(text, i, &len));
    if (c != run || c == CharClass::kPunctuation) {
      if (run != CharClass::kSpace && start < i) out->emplace_back(base + start, base + i);
      start = i;
      run = c;
    }
    i += len;
  }
  if (run != CharClass::kSpace && start < text.size()) {
    out->emplace_back(base + start, base + text.size());
  }
}

}  // namespace

// Split and Digits are Isolated: every match and every gap between matches
// becomes a piece; empty ones vanish.
Status SplitPiece(const PreSplitStep& step, std::string_view s, Span piece,
                  std::vector<Span>* out) {
  const std::string_view text = s.substr(piece.first, piece.second - piece.first);
  std::vector<Span> matches;
  switch (step.kind) {
    case PreSplitStep::Kind::kRegex:
      FOLIO_RETURN_IF_ERROR(step.regex.FindAll(text, &matches));
      break;
    case PreSplitStep::Kind::kDigits: {
      // Numeric characters, one by one or in runs.
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
      break;
    }
    case PreSplitStep::Kind::kBert:
      SplitByClass(text, piece.first, BertClass, out);
      return Status::Ok();
    case PreSplitStep::Kind::kWhitespace:
      SplitByClass(text, piece.first, WhitespaceClass, out);
      return Status::Ok();
    case PreSplitStep::Kind::kWhitespaceSplit:
      SplitByClass(text, piece.first, WhitespaceSplitClass, out);
      return Status::Ok();
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

Status PreSplit(const std::vector<PreSplitStep>& steps, std::string_view s,
                std::vector<Span>* pieces) {
  pieces->clear();
  if (s.empty()) return Status::Ok();
  pieces->emplace_back(0, s.size());
  std::vector<Span> next;
  for (const PreSplitStep& step : steps) {
    next.clear();
    for (const Span& piece : *pieces) {
      FOLIO_RETURN_IF_ERROR(SplitPiece(step, s, piece, &next));
    }
    pieces->swap(next);
  }
  return Status::Ok();
}

}  // namespace folio::tokenizer
