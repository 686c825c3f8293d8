// Unicode pieces the tokenizers need: UTF-8 validation and lossy decoding,
// general categories (Unicode 16.0), White_Space, NFC and NFD as Hugging
// Face `tokenizers` computes them, GPT-2's byte <-> character map, and the
// character classes of the WordPiece (BERT) tokenizers. The data is in
// unicode_tables.cc and unicode_bert_tables.cc, written by
// tools/gen_unicode_tables.py.
#ifndef FOLIO_TOKENIZER_UNICODE_H_
#define FOLIO_TOKENIZER_UNICODE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "folio/core/status.h"

namespace folio::tokenizer::unicode {

// General categories, in the order tools/gen_unicode_tables.py writes them.
enum class Category : uint8_t {
  kLu,
  kLl,
  kLt,
  kLm,
  kLo,
  kMn,
  kMc,
  kMe,
  kNd,
  kNl,
  kNo,
  kPc,
  kPd,
  kPs,
  kPe,
  kPi,
  kPf,
  kPo,
  kSm,
  kSc,
  kSk,
  kSo,
  kZs,
  kZl,
  kZp,
  kCc,
  kCf,
  kCs,
  kCo,
  kCn,
};
inline constexpr int kNumCategories = 30;

// Generated tables; unicode_tables.cc describes their layout.
extern const uint32_t kCategoryRuns[];
extern const size_t kNumCategoryRuns;
extern const uint32_t kNumericRanges[];
extern const size_t kNumNumericRanges;
extern const uint32_t kCombiningClasses[];
extern const size_t kNumCombiningClasses;
extern const uint32_t kDecompositions[];
extern const size_t kNumDecompositions;
extern const uint32_t kBertFlagRuns[];
extern const size_t kNumBertFlagRuns;
extern const uint32_t kLowercase[];
extern const size_t kNumLowercase;
extern const uint32_t kNfdFirst[];
extern const size_t kNumNfdFirst;

Category CategoryOf(char32_t cp);

// A set of categories as a bit mask (bit = the enum value).
using CategoryMask = uint32_t;
constexpr CategoryMask MaskOf(Category c) { return CategoryMask{1} << static_cast<int>(c); }
// "L", "Lu", "N", ... (one- or two-letter general category names) -> mask;
// 0 for a name that is not a general category.
CategoryMask MaskOfName(std::string_view name);

// Inclusive, sorted, disjoint code point ranges.
using Ranges = std::vector<std::pair<char32_t, char32_t>>;
Ranges RangesOf(CategoryMask mask);
// Unicode's White_Space property (25 code points), what `\s` means in
// Oniguruma and Rust's char::is_whitespace.
Ranges WhiteSpaceRanges();
Ranges Complement(const Ranges& ranges);  // within [0, 0x10FFFF]
bool IsWhiteSpace(char32_t cp);
// Rust's char::is_numeric as `tokenizers`' Digits uses it: Nd, Nl or No,
// from Unicode 17 (a version newer than the categories above).
bool IsNumeric(char32_t cp);
// Rust regex's Unicode \w: Alphabetic, marks, Nd, Pc, Join_Control.
bool IsWordChar(char32_t cp);

// (Well-formedness itself: utf8::FirstInvalid, folio/core/utf8.h.)
// Decodes the code point at s[i] of a valid string; sets *len to its bytes.
char32_t DecodeAt(std::string_view s, size_t i, size_t* len);
// Decodes the code point that ends at s[end] of a valid string.
char32_t DecodeBefore(std::string_view s, size_t end, size_t* len);
void AppendUtf8(char32_t cp, std::string* out);

// Appends `bytes` to *out as UTF-8, each maximal ill-formed subpart
// replaced by U+FFFD (the Unicode / WHATWG practice, which Rust's
// from_utf8_lossy and Python follow). When `final` is false a trailing
// sequence that is incomplete but could still become valid is left
// unconsumed. Returns the number of bytes consumed.
size_t AppendLossy(std::string_view bytes, bool final, std::string* out);

// Canonical composition (NFC) of valid UTF-8, with the combining classes
// and decompositions `tokenizers`' normalizer knows: older than Unicode 16
// (for instance it neither reorders U+07FD nor composes U+11938), so that
// folio's NFC and Qwen2's tokenizer.json agree on every input.
std::string Nfc(std::string_view s);
int CombiningClass(char32_t cp);  // as Nfc uses it

// Canonical decomposition (NFD) with the same data as Nfc: what
// `tokenizers`' NFD normalizer and BertNormalizer's strip_accents compute.
std::string Nfd(std::string_view s);
// The same on code points: decomposed and canonically ordered.
std::u32string NfdCodePoints(std::u32string_view cps);

// The character classes of `tokenizers`' BERT components, read off the
// library code point by code point: its Rust crates carry Unicode tables
// older than 16.0 (a Unicode 16 format character or nonspacing mark may be
// missing from them), so none of these is a general category of
// CategoryOf's table.
enum BertFlag : uint8_t {
  // BertNormalizer's clean_text drops it: U+0000, U+FFFD and the other
  // (C*) characters but \t \n \r, in the unicode_categories crate's tables.
  kBertControl = 1,
  // BertPreTokenizer isolates it: ASCII punctuation and P* (its tables).
  kBertPunctuation = 2,
  // BertNormalizer's strip_accents drops it after NFD: Mn (its tables).
  kBertNonspacingMark = 4,
  // The StripAccents normalizer drops it: unicode-normalization's
  // is_combining_mark.
  kCombiningMark = 8,
  // \w of the Whitespace pre-tokenizer's \w+|[^\w\s]+ (Oniguruma).
  kOnigWord = 16,
};
uint8_t BertFlags(char32_t cp);  // BertFlag bits
// BertNormalizer's handle_chinese_chars ranges ("CJK Unified Ideographs"
// and their extensions as `tokenizers` lists them, 0x2B920 for 0x2B820
// included), which llama.cpp's WordPiece copies.
bool IsChineseChar(char32_t cp);
// Rust's char::to_lowercase, what `tokenizers`' Lowercase applies: one
// code point, or two for U+0130 (i and U+0307).
void AppendLowercase(char32_t cp, std::u32string* out);
// Its first code point: Unicode's simple lowercase mapping, llama.cpp's.
char32_t SimpleLowercase(char32_t cp);
// The first code point of cp's full canonical decomposition in Unicode
// 16.0 (cp itself if it has none; a Hangul syllable gives its leading
// consonant): the one code point llama.cpp's WordPiece "NFD" keeps.
char32_t NfdFirst(char32_t cp);

// GPT-2's reversible byte -> character map: printable Latin-1 bytes map to
// themselves, the other 68 to U+0100.. in byte order.
const std::array<char32_t, 256>& ByteToChar();
// The byte a character stands for, or -1.
int CharToByte(char32_t cp);

}  // namespace folio::tokenizer::unicode

#endif  // FOLIO_TOKENIZER_UNICODE_H_
