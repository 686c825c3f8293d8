// The normalizers of `tokenizers`: NFC, NFD, Lowercase, StripAccents and
// BertNormalizer, each over the whole text, in order.
#include <algorithm>

#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/unicode.h"

namespace folio::tokenizer {
namespace {

std::u32string CodePoints(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    out.push_back(unicode::DecodeAt(s, i, &len));
    i += len;
  }
  return out;
}

std::string Utf8(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) unicode::AppendUtf8(cp, &out);
  return out;
}

std::u32string Lowercase(std::u32string_view cps) {
  std::u32string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) unicode::AppendLowercase(cp, &out);
  return out;
}

// Drops the code points that have `flag`.
std::u32string DropFlagged(std::u32string_view cps, uint8_t flag) {
  std::u32string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) {
    if ((unicode::BertFlags(cp) & flag) == 0) out.push_back(cp);
  }
  return out;
}

// BertNormalizer, its steps in `tokenizers`' order: clean_text,
// handle_chinese_chars, strip_accents, lowercase.
std::u32string Bert(const NormalizerStep& step, std::u32string cps) {
  if (step.clean_text) {
    // U+0000 and U+FFFD are in kBertControl; a control that is also
    // whitespace (U+000B, U+000C, U+0085) is dropped.
    std::u32string out;
    out.reserve(cps.size());
    for (char32_t cp : cps) {
      if ((unicode::BertFlags(cp) & unicode::kBertControl) != 0) continue;
      out.push_back(unicode::IsWhiteSpace(cp) ? U' ' : cp);
    }
    cps = std::move(out);
  }
  if (step.handle_chinese_chars) {
    std::u32string out;
    out.reserve(cps.size());
    for (char32_t cp : cps) {
      if (unicode::IsChineseChar(cp)) {
        out.append({U' ', cp, U' '});
      } else {
        out.push_back(cp);
      }
    }
    cps = std::move(out);
  }
  if (step.strip_accents) {
    cps = DropFlagged(unicode::NfdCodePoints(cps), unicode::kBertNonspacingMark);
  }
  if (step.lowercase) cps = Lowercase(cps);
  return cps;
}

}  // namespace

std::string Normalize(const std::vector<NormalizerStep>& steps, std::string_view s) {
  std::string text(s);
  for (const NormalizerStep& step : steps) {
    switch (step.kind) {
      case NormalizerStep::Kind::kNfc:
        text = unicode::Nfc(text);
        break;
      case NormalizerStep::Kind::kNfd:
        text = unicode::Nfd(text);
        break;
      case NormalizerStep::Kind::kLowercase:
        text = Utf8(Lowercase(CodePoints(text)));
        break;
      case NormalizerStep::Kind::kStripAccents:
        text = Utf8(DropFlagged(CodePoints(text), unicode::kCombiningMark));
        break;
      case NormalizerStep::Kind::kBert:
        text = Utf8(Bert(step, CodePoints(text)));
        break;
    }
  }
  return text;
}

}  // namespace folio::tokenizer
