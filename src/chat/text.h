// Text as Python sees it: UTF-8 decoding into code points, Python's
// whitespace set, case mapping, and the repr() of strings and floats.
//
// folio's strings are UTF-8 bytes; Python's are code points. Lengths,
// indexes and slices count code points. Bytes that are not valid UTF-8 are
// taken one code point each (U+0080..U+00FF by their value), so no input
// stops a render, though Python would have refused such text earlier.
//
// Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic;
// other letters are left as they are (Python maps every cased letter).
#ifndef FOLIO_CHAT_TEXT_H_
#define FOLIO_CHAT_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace folio::chat::internal {

// The code point at s[*pos], advancing *pos past it (1 byte for an
// ill-formed sequence).
char32_t DecodeUtf8(std::string_view s, size_t* pos);
void AppendUtf8(std::string& out, char32_t cp);

bool IsAscii(std::string_view s);
// Code points in s.
size_t CountCodePoints(std::string_view s);
// Byte offset of code point `index` (index <= CountCodePoints(s)).
size_t CodePointOffset(std::string_view s, size_t index);

// str.isspace(): Python's whitespace, Unicode included.
bool IsPySpace(char32_t cp);
// Length of the Python-whitespace run at the end of s / the start of s.
size_t TrailingSpaceBytes(std::string_view s);
size_t LeadingSpaceBytes(std::string_view s);
// s without leading / trailing Python whitespace (str.strip()).
std::string_view StripSpace(std::string_view s, bool left, bool right);

enum class CaseMap { kUpper, kLower };
bool IsUpperCp(char32_t cp);
bool IsLowerCp(char32_t cp);
bool IsCasedCp(char32_t cp);
bool IsAlphaCp(char32_t cp);
bool IsDigitCp(char32_t cp);
// Appends cp mapped to upper or lower case (U+00DF upper-cases to "SS").
void AppendCase(std::string& out, char32_t cp, CaseMap map);
std::string ToCase(std::string_view s, CaseMap map);
// str.title(), str.capitalize().
std::string PyTitle(std::string_view s);
std::string PyCapitalize(std::string_view s);

// repr(str): quoted with ' unless the text holds ' and no ", escapes as
// Python writes them.
void AppendPyRepr(std::string& out, std::string_view s);
// repr(float): the shortest text that reads back as d ('1.0', '1e-05',
// 'inf', 'nan').
void AppendPyFloat(std::string& out, double d);
void AppendInt(std::string& out, int64_t i);

}  // namespace folio::chat::internal

#endif  // FOLIO_CHAT_TEXT_H_
