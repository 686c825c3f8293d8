#include "tokenizer/unicode.h"

#include <algorithm>
#include <unordered_map>

#include "folio/core/utf8.h"

namespace folio::tokenizer::unicode {
namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;

constexpr char32_t kWhiteSpace[] = {
    0x0009, 0x000A, 0x000B, 0x000C, 0x000D, 0x0020, 0x0085, 0x00A0, 0x1680,
    0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008,
    0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
};

constexpr char32_t RunStart(uint32_t run) { return run >> 5; }
constexpr Category RunCategory(uint32_t run) { return static_cast<Category>(run & 31u); }

}  // namespace

Category CategoryOf(char32_t cp) {
  if (cp > kMaxCodePoint) return Category::kCn;
  // The last run starting at or before cp.
  const uint32_t* end = kCategoryRuns + kNumCategoryRuns;
  const uint32_t* it = std::upper_bound(kCategoryRuns, end, cp,
                                        [](char32_t c, uint32_t run) { return c < RunStart(run); });
  return RunCategory(*(it - 1));
}

CategoryMask MaskOfName(std::string_view name) {
  static constexpr std::string_view kNames[kNumCategories] = {
      "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
      "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"};
  CategoryMask mask = 0;
  for (int i = 0; i < kNumCategories; ++i) {
    const bool match = name.size() == 1 ? kNames[i][0] == name[0] : kNames[i] == name;
    if (match) mask |= CategoryMask{1} << i;
  }
  return name.empty() || name.size() > 2 ? 0 : mask;
}

Ranges RangesOf(CategoryMask mask) {
  Ranges out;
  for (size_t i = 0; i < kNumCategoryRuns; ++i) {
    if ((mask & MaskOf(RunCategory(kCategoryRuns[i]))) == 0) continue;
    const char32_t first = RunStart(kCategoryRuns[i]);
    const char32_t last =
        i + 1 < kNumCategoryRuns ? RunStart(kCategoryRuns[i + 1]) - 1 : kMaxCodePoint;
    if (!out.empty() && out.back().second + 1 == first) {
      out.back().second = last;
    } else {
      out.emplace_back(first, last);
    }
  }
  return out;
}

Ranges WhiteSpaceRanges() {
  Ranges out;
  for (char32_t cp : kWhiteSpace) {
    if (!out.empty() && out.back().second + 1 == cp) {
      out.back().second = cp;
    } else {
      out.emplace_back(cp, cp);
    }
  }
  return out;
}

Ranges Complement(const Ranges& ranges) {
  Ranges out;
  char32_t next = 0;
  for (const auto& [first, last] : ranges) {
    if (first > next) out.emplace_back(next, first - 1);
    next = last + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

bool IsWhiteSpace(char32_t cp) {
  return std::find(std::begin(kWhiteSpace), std::end(kWhiteSpace), cp) != std::end(kWhiteSpace);
}

bool IsNumeric(char32_t cp) {
  // kNumericRanges holds [first, last] pairs; find the last first <= cp.
  size_t lo = 0, hi = kNumNumericRanges / 2;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (kNumericRanges[2 * mid] <= cp) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo > 0 && cp <= kNumericRanges[2 * (lo - 1) + 1];
}

bool IsWordChar(char32_t cp) {
  constexpr CategoryMask kWord =
      MaskOf(Category::kLu) | MaskOf(Category::kLl) | MaskOf(Category::kLt) |
      MaskOf(Category::kLm) | MaskOf(Category::kLo) | MaskOf(Category::kMn) |
      MaskOf(Category::kMc) | MaskOf(Category::kMe) | MaskOf(Category::kNd) |
      MaskOf(Category::kNl) | MaskOf(Category::kPc);
  if ((MaskOf(CategoryOf(cp)) & kWord) != 0) return true;
  // Join_Control, and the Other_Alphabetic symbols (circled and squared
  // Latin letters) that no category above covers.
  return cp == 0x200C || cp == 0x200D || (cp >= 0x24B6 && cp <= 0x24E9) ||
         (cp >= 0x1F130 && cp <= 0x1F149) || (cp >= 0x1F150 && cp <= 0x1F169) ||
         (cp >= 0x1F170 && cp <= 0x1F189);
}

char32_t DecodeAt(std::string_view s, size_t i, size_t* len) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  char32_t cp = n == 1 ? c : (c & (0x7Fu >> n));
  for (size_t k = 1; k < n; ++k) {
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
  }
  *len = n;
  return cp;
}

char32_t DecodeBefore(std::string_view s, size_t end, size_t* len) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0u) == 0x80u) {
    --start;
  }
  return DecodeAt(s, start, len);
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t AppendLossy(std::string_view bytes, bool final, std::string* out) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      out->push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    const utf8::LeadByte lead = utf8::ClassifyLead(c);
    const size_t len = lead.len;
    const unsigned char lo = lead.lo, hi = lead.hi;
    if (len == 0) {  // a byte that starts nothing
      out->append(kReplacement);
      ++i;
      continue;
    }
    // The maximal subpart: the lead byte and the continuation bytes that
    // still fit a well-formed sequence.
    size_t k = 1;
    while (k < len && i + k < bytes.size()) {
      const auto b = static_cast<unsigned char>(bytes[i + k]);
      const bool fits = k == 1 ? (b >= lo && b <= hi) : (b & 0xC0u) == 0x80u;
      if (!fits) break;
      ++k;
    }
    if (k == len) {
      out->append(bytes.substr(i, len));
    } else if (i + k == bytes.size() && !final) {
      return i;  // may still complete
    } else {
      out->append(kReplacement);
    }
    i += k;
  }
  return i;
}

namespace {

// Hangul syllables compose and decompose arithmetically (Unicode 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr char32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

struct NfcTables {
  // code point -> one-step decomposition (second 0 for a singleton)
  std::unordered_map<char32_t, std::pair<char32_t, char32_t>> decompose;
  // (first << 21 | second) -> composite, for the pairs that compose
  std::unordered_map<uint64_t, char32_t> compose;
};

const NfcTables& Tables() {
  static const NfcTables tables = [] {
    NfcTables t;
    for (size_t i = 0; i + 2 < kNumDecompositions; i += 3) {
      const char32_t cp = kDecompositions[i], first = kDecompositions[i + 1];
      const char32_t second = kDecompositions[i + 2] & 0x7FFFFFFFu;
      t.decompose.emplace(cp, std::make_pair(first, second));
      if ((kDecompositions[i + 2] >> 31) != 0) {
        t.compose.emplace((uint64_t{first} << 21) | second, cp);
      }
    }
    return t;
  }();
  return tables;
}

void Decompose(char32_t cp, const NfcTables& t, std::u32string* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  auto it = t.decompose.find(cp);
  if (it == t.decompose.end()) {
    out->push_back(cp);
    return;
  }
  Decompose(it->second.first, t, out);
  if (it->second.second != 0) Decompose(it->second.second, t, out);
}

// The primary composite of a and b, or 0.
char32_t Compose(char32_t a, char32_t b, const NfcTables& t) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  auto it = t.compose.find((uint64_t{a} << 21) | b);
  return it == t.compose.end() ? 0 : it->second;
}

}  // namespace

int CombiningClass(char32_t cp) {
  if (cp < 0x300) return 0;
  const uint32_t* end = kCombiningClasses + kNumCombiningClasses;
  const uint32_t* it = std::lower_bound(
      kCombiningClasses, end, cp, [](uint32_t entry, char32_t c) { return (entry >> 8) < c; });
  return it != end && (*it >> 8) == cp ? static_cast<int>(*it & 0xFFu) : 0;
}

std::u32string NfdCodePoints(std::u32string_view cps) {
  const NfcTables& t = Tables();
  std::u32string d;
  d.reserve(cps.size());
  for (char32_t cp : cps) Decompose(cp, t, &d);
  // Canonical order: each run of non-starters sorted, stably, by class.
  for (size_t i = 0; i < d.size();) {
    if (CombiningClass(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && CombiningClass(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + static_cast<std::ptrdiff_t>(i),
                     d.begin() + static_cast<std::ptrdiff_t>(j),
                     [](char32_t a, char32_t b) { return CombiningClass(a) < CombiningClass(b); });
    i = j;
  }
  return d;
}

namespace {

bool IsAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::u32string CodePoints(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    out.push_back(DecodeAt(s, i, &len));
    i += len;
  }
  return out;
}

std::string ToUtf8(std::u32string_view cps, size_t reserve) {
  std::string out;
  out.reserve(reserve);
  for (char32_t cp : cps) AppendUtf8(cp, &out);
  return out;
}

}  // namespace

std::string Nfd(std::string_view s) {
  if (IsAscii(s)) return std::string(s);
  return ToUtf8(NfdCodePoints(CodePoints(s)), s.size());
}

std::string Nfc(std::string_view s) {
  // ASCII is its own NFC; most text takes this path.
  if (IsAscii(s)) return std::string(s);
  const NfcTables& t = Tables();
  const std::u32string d = NfdCodePoints(CodePoints(s));
  // Canonical composition, as the reference code of UAX #15: a mark joins
  // the last starter unless a starter or a mark of the same or a higher
  // class stands between them; a leading non-starter composes with nothing
  // (class 256).
  std::u32string c;
  c.reserve(d.size());
  if (!d.empty()) {
    c.push_back(d[0]);
    size_t starter_pos = 0;
    int last_class = CombiningClass(d[0]) != 0 ? 256 : 0;
    for (size_t i = 1; i < d.size(); ++i) {
      const char32_t cp = d[i];
      const int cls = CombiningClass(cp);
      const char32_t composite = Compose(c[starter_pos], cp, t);
      if (composite != 0 && (last_class < cls || last_class == 0)) {
        c[starter_pos] = composite;
        continue;
      }
      if (cls == 0) starter_pos = c.size();
      last_class = cls;
      c.push_back(cp);
    }
  }
  return ToUtf8(c, s.size());
}

// --- WordPiece (BERT) character data -----------------------------------------

uint8_t BertFlags(char32_t cp) {
  if (cp > kMaxCodePoint) return 0;
  const uint32_t* end = kBertFlagRuns + kNumBertFlagRuns;
  const uint32_t* it = std::upper_bound(kBertFlagRuns, end, cp,
                                        [](char32_t c, uint32_t run) { return c < (run >> 8); });
  return static_cast<uint8_t>(*(it - 1) & 0xFFu);
}

bool IsChineseChar(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

namespace {

// The value paired with cp in a sorted table of (code point, value) pairs,
// or cp itself.
char32_t LookUpPair(const uint32_t* table, size_t num_values, char32_t cp) {
  size_t lo = 0, hi = num_values / 2;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (table[2 * mid] < cp) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < num_values / 2 && table[2 * lo] == cp ? table[2 * lo + 1] : cp;
}

}  // namespace

void AppendLowercase(char32_t cp, std::u32string* out) {
  out->push_back(SimpleLowercase(cp));
  if (cp == 0x130) out->push_back(0x307);  // the one two-code-point mapping
}

char32_t SimpleLowercase(char32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp;
  return LookUpPair(kLowercase, kNumLowercase, cp);
}

char32_t NfdFirst(char32_t cp) {
  if (cp >= kSBase && cp < kSBase + kSCount) return kLBase + (cp - kSBase) / kNCount;
  return LookUpPair(kNfdFirst, kNumNfdFirst, cp);
}

const std::array<char32_t, 256>& ByteToChar() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      t[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

int CharToByte(char32_t cp) {
  static const std::array<int16_t, 324> table = [] {
    std::array<int16_t, 324> t{};
    t.fill(-1);
    const auto& forward = ByteToChar();
    for (int b = 0; b < 256; ++b) {
      t[forward[static_cast<size_t>(b)]] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return cp < table.size() ? table[cp] : -1;
}

}  // namespace folio::tokenizer::unicode
