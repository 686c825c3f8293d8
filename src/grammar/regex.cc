// Regular expressions to GBNF in two steps: a recursive-descent parser
// builds a small tree of code-point sets, sequences, alternations and
// bounded repeats, normalized as it is built (nothing that matches the
// empty string is ever repeated, since the GBNF compiler refuses that),
// and a printer writes the tree as one parenthesized GBNF expression,
// encoding each matched character as JSON would in json_string mode.
#include "folio/grammar/regex.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "folio/core/check.h"
#include "folio/core/str_cat.h"
#include "folio/core/utf8.h"

namespace folio::grammar {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr uint32_t kSurrogateFirst = 0xD800;
constexpr uint32_t kSurrogateLast = 0xDFFF;
constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();
// Groups nested deeper than this are refused (kResourceExhausted) so that
// the recursive parser and printer stay within a small stack.
constexpr int kMaxNesting = 256;

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return a > kUnbounded - b ? kUnbounded : a + b; }
uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kUnbounded / b ? kUnbounded : a * b;
}

// ---------------------------------------------------------------------------
// Code-point sets.

struct Range {
  uint32_t lo = 0;
  uint32_t hi = 0;
  bool operator==(const Range&) const = default;
};

// Code points as sorted, disjoint, non-adjacent closed ranges. A set never
// holds a surrogate: no UTF-8 text contains one.
class CharSet {
 public:
  static CharSet Of(uint32_t lo, uint32_t hi) {
    CharSet s;
    s.Add(lo, hi);
    return s;
  }
  static CharSet Single(uint32_t c) { return Of(c, c); }
  static CharSet All() { return Of(0, kMaxCodePoint); }

  // Adds [lo, hi] (lo <= hi <= kMaxCodePoint), dropping surrogates.
  void Add(uint32_t lo, uint32_t hi) {
    AddUnsorted(lo, hi);
    Normalize();
  }
  void Add(const CharSet& other) {
    for (const Range& r : other.ranges_) ranges_.push_back(r);
    Normalize();
  }
  // Many at once (sorting once, not per range).
  static CharSet Union(const std::vector<Range>& ranges) {
    CharSet s;
    for (const Range& r : ranges) s.AddUnsorted(r.lo, r.hi);
    s.Normalize();
    return s;
  }

  // Everything else within the Unicode scalar values.
  CharSet Complement() const {
    CharSet out;
    uint32_t next = 0;  // first code point not yet covered
    bool done = false;
    for (const Range& r : ranges_) {
      if (r.lo > next) out.AddUnsorted(next, r.lo - 1);
      if (r.hi == kMaxCodePoint) {
        done = true;
        break;
      }
      next = r.hi + 1;
    }
    if (!done) out.AddUnsorted(next, kMaxCodePoint);
    out.Normalize();
    return out;
  }

  CharSet Intersect(const CharSet& other) const {
    CharSet out;
    size_t i = 0;
    size_t j = 0;
    while (i < ranges_.size() && j < other.ranges_.size()) {
      const Range& a = ranges_[i];
      const Range& b = other.ranges_[j];
      const uint32_t lo = std::max(a.lo, b.lo);
      const uint32_t hi = std::min(a.hi, b.hi);
      if (lo <= hi) out.ranges_.push_back({lo, hi});
      if (a.hi < b.hi) {
        ++i;
      } else {
        ++j;
      }
    }
    return out;
  }
  CharSet Minus(const CharSet& other) const { return Intersect(other.Complement()); }

  bool empty() const { return ranges_.empty(); }
  bool IsSingle() const { return ranges_.size() == 1 && ranges_[0].lo == ranges_[0].hi; }
  uint32_t first() const { return ranges_.front().lo; }
  bool Contains(uint32_t c) const {
    for (const Range& r : ranges_) {
      if (c >= r.lo && c <= r.hi) return true;
    }
    return false;
  }
  const std::vector<Range>& ranges() const { return ranges_; }
  bool operator==(const CharSet&) const = default;

 private:
  void AddUnsorted(uint32_t lo, uint32_t hi) {
    if (lo <= kSurrogateLast && hi >= kSurrogateFirst) {
      if (lo < kSurrogateFirst) ranges_.push_back({lo, kSurrogateFirst - 1});
      if (hi > kSurrogateLast) ranges_.push_back({kSurrogateLast + 1, hi});
      return;
    }
    ranges_.push_back({lo, hi});
  }
  void Normalize() {
    std::sort(ranges_.begin(), ranges_.end(),
              [](const Range& a, const Range& b) { return a.lo < b.lo; });
    std::vector<Range> merged;
    for (const Range& r : ranges_) {
      if (!merged.empty() && r.lo <= merged.back().hi + 1) {
        merged.back().hi = std::max(merged.back().hi, r.hi);
      } else {
        merged.push_back(r);
      }
    }
    ranges_ = std::move(merged);
  }

  std::vector<Range> ranges_;
};

CharSet DigitSet() { return CharSet::Of('0', '9'); }
CharSet WordSet() {
  CharSet s = CharSet::Of('0', '9');
  s.Add('A', 'Z');
  s.Add('_', '_');
  s.Add('a', 'z');
  return s;
}
// ECMAScript's WhiteSpace and LineTerminator code points.
CharSet SpaceSet() {
  CharSet s = CharSet::Of(0x09, 0x0D);
  for (uint32_t c : {0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u, 0xFEFFu}) {
    s.Add(c, c);
  }
  s.Add(0x2000, 0x200A);
  return s;
}
// ECMAScript's "." without the s flag: anything but a line terminator.
CharSet DotSet() {
  CharSet terminators = CharSet::Single('\n');
  terminators.Add('\r', '\r');
  terminators.Add(0x2028, 0x2029);
  return terminators.Complement();
}
// What JSON requires escaped inside a string.
CharSet JsonEscapedSet() {
  CharSet s = CharSet::Of(0x00, 0x1F);
  s.Add('"', '"');
  s.Add('\\', '\\');
  return s;
}

// ---------------------------------------------------------------------------
// The tree.

enum class Kind {
  kEmpty,    // matches only the empty text
  kNothing,  // matches no text
  kChars,    // one code point from `chars` (never empty)
  kAnyText,  // any text at all (search mode's unanchored ends)
  kSeq,
  kAlt,
  kRepeat,  // children[0]{min,max}, max may be kUnbounded; never nullable inside
};

struct Node {
  Kind kind = Kind::kEmpty;
  bool nullable = false;
  CharSet chars;
  std::vector<const Node*> children;
  uint64_t min = 0;
  uint64_t max = 0;
};

// Owns the nodes (an arena, so long chains are freed without recursion) and
// builds them normalized: no kEmpty or kNothing inside another node, no
// nested kSeq in a kSeq built from parts, and no repeat of a nullable node.
class Builder {
 public:
  const Node* Empty() { return &empty_; }
  const Node* Nothing() { return &nothing_; }
  const Node* AnyText() { return &any_text_; }

  const Node* Chars(CharSet chars) {
    if (chars.empty()) return Nothing();
    Node n;
    n.kind = Kind::kChars;
    n.chars = std::move(chars);
    return New(std::move(n));
  }

  const Node* Seq(const std::vector<const Node*>& items) {
    std::vector<const Node*> out;
    for (const Node* item : items) {
      if (item->kind == Kind::kNothing) return Nothing();
      if (item->kind == Kind::kEmpty) continue;
      if (item->kind == Kind::kSeq) {
        for (const Node* c : item->children) Push(c, &out);
      } else {
        Push(item, &out);
      }
    }
    if (out.empty()) return Empty();
    if (out.size() == 1) return out[0];
    return Raw(Kind::kSeq, std::move(out));
  }

  const Node* Alt(const std::vector<const Node*>& items) {
    std::vector<const Node*> out;
    bool has_empty = false;
    std::optional<size_t> chars_at;  // the one kChars alternative, merged
    std::vector<Range> chars;
    auto add = [&](const Node* item) {
      if (item->kind == Kind::kNothing) return;
      if (item->kind == Kind::kEmpty) {
        has_empty = true;
      } else if (item->kind == Kind::kChars) {
        if (!chars_at) {
          chars_at = out.size();
          out.push_back(nullptr);
        }
        chars.insert(chars.end(), item->chars.ranges().begin(), item->chars.ranges().end());
      } else {
        out.push_back(item);
      }
    };
    for (const Node* item : items) {
      if (item->kind == Kind::kAlt) {
        for (const Node* c : item->children) add(c);
      } else {
        add(item);
      }
    }
    if (chars_at) out[*chars_at] = Chars(CharSet::Union(chars));
    if (out.empty()) return has_empty ? Empty() : Nothing();
    const Node* alt = out.size() == 1 ? out[0] : Raw(Kind::kAlt, std::move(out));
    return has_empty && !alt->nullable ? Repeat(alt, 0, 1) : alt;
  }

  const Node* Repeat(const Node* x, uint64_t min, uint64_t max) {
    if (max == 0 || x->kind == Kind::kEmpty) return Empty();
    if (x->kind == Kind::kNothing) return min == 0 ? Empty() : Nothing();
    if (x->kind == Kind::kAnyText) return x;
    if (x->nullable) {
      // L{m,n} with the empty text in L is (L minus it){0,n}: pad with
      // empty pieces to reach m.
      x = NonEmpty(x);
      min = 0;
    }
    if (min == 1 && max == 1) return x;
    Node n;
    n.kind = Kind::kRepeat;
    n.nullable = min == 0;
    n.children = {x};
    n.min = min;
    n.max = max;
    return New(std::move(n));
  }

 private:
  // The same texts but the empty one. Never kNothing for a normalized node
  // that is neither kEmpty nor kNothing (it matches some non-empty text).
  const Node* NonEmpty(const Node* x) {
    if (!x->nullable) return x;
    switch (x->kind) {
      case Kind::kEmpty:
        return Nothing();
      case Kind::kRepeat:  // nullable: min is 0 and the body is not nullable
        return Repeat(x->children[0], 1, x->max);
      case Kind::kAlt: {
        std::vector<const Node*> parts;
        for (const Node* c : x->children) parts.push_back(NonEmpty(c));
        return Alt(parts);
      }
      case Kind::kSeq: {
        // Every item is nullable: (a b c) minus the empty text is
        // a' b c | b' c | c', built from the back so that suffixes are
        // shared (the printed form is still quadratic; the printer's limit
        // bounds it).
        const std::vector<const Node*>& c = x->children;
        const Node* suffix = c.back();
        const Node* result = NonEmpty(c.back());
        for (size_t i = c.size() - 1; i-- > 0;) {
          const Node* head = Raw(Kind::kSeq, {NonEmpty(c[i]), suffix});
          result = Raw(Kind::kAlt, {head, result});
          suffix = Raw(Kind::kSeq, {c[i], suffix});
        }
        return result;
      }
      case Kind::kNothing:
      case Kind::kChars:
      case Kind::kAnyText:
        break;
    }
    FOLIO_CHECK(false, "NonEmpty of a node kind that is never nullable here");
    return Nothing();
  }

  static void Push(const Node* item, std::vector<const Node*>* out) {
    // Any text followed by any text is any text.
    if (item->kind == Kind::kAnyText && !out->empty() && out->back()->kind == Kind::kAnyText) {
      return;
    }
    out->push_back(item);
  }

  const Node* Raw(Kind kind, std::vector<const Node*> children) {
    Node n;
    n.kind = kind;
    n.nullable = kind == Kind::kSeq;
    for (const Node* c : children) {
      if (kind == Kind::kSeq) n.nullable = n.nullable && c->nullable;
      if (kind == Kind::kAlt) n.nullable = n.nullable || c->nullable;
    }
    n.children = std::move(children);
    return New(std::move(n));
  }

  const Node* New(Node n) {
    arena_.push_back(std::move(n));
    return &arena_.back();
  }

  std::deque<Node> arena_;
  const Node empty_{Kind::kEmpty, true, {}, {}, 0, 0};
  const Node nothing_{Kind::kNothing, false, {}, {}, 0, 0};
  const Node any_text_{Kind::kAnyText, true, {}, {}, 0, 0};
};

// ---------------------------------------------------------------------------
// The parser.

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAsciiAlnum(char c) { return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
bool IsSurrogate(uint32_t c) { return c >= kSurrogateFirst && c <= kSurrogateLast; }

// One class member or escape: a code point, or a set (\d and the like).
struct Atom {
  bool is_set = false;
  uint32_t code_point = 0;
  CharSet set;
};

// One top-level alternative and its anchors.
struct TopAlternative {
  const Node* node = nullptr;
  bool anchored_start = false;
  bool anchored_end = false;
};

class Parser {
 public:
  Parser(std::string_view pattern, const RegexOptions& options, Builder* builder)
      : p_(pattern), options_(options), b_(*builder) {}

  Result<std::vector<TopAlternative>> ParseTop() {
    std::vector<TopAlternative> alts;
    while (true) {
      TopAlternative alt;
      FOLIO_ASSIGN_OR_RETURN(
          alt.node, ParseAlternative(0, /*top=*/true, &alt.anchored_start, &alt.anchored_end));
      alts.push_back(alt);
      if (AtEnd()) break;
      if (Peek() == '|') {
        ++pos_;
        continue;
      }
      return Status::InvalidArgument(StrCat("regex: unbalanced ')' at offset ", pos_));
    }
    return alts;
  }

 private:
  bool AtEnd() const { return pos_ >= p_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : '\0'; }

  // A group's body.
  Result<const Node*> ParseDisjunction(int depth) {
    std::vector<const Node*> alts;
    while (true) {
      FOLIO_ASSIGN_OR_RETURN(const Node* alt, ParseAlternative(depth, false, nullptr, nullptr));
      alts.push_back(alt);
      if (Peek() != '|' || AtEnd()) break;
      ++pos_;
    }
    return b_.Alt(alts);
  }

  // Terms up to '|', ')' or the end. At the top level, leading '^'s and
  // trailing '$'s are the alternative's anchors; any other anchor is refused.
  Result<const Node*> ParseAlternative(int depth, bool top, bool* anchored_start,
                                       bool* anchored_end) {
    std::vector<const Node*> items;
    if (top) {
      while (!AtEnd() && Peek() == '^') {
        ++pos_;
        *anchored_start = true;
      }
    }
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      const char c = Peek();
      if (c == '^') return InnerAnchor();
      if (c == '$') {
        size_t end = pos_;
        while (end < p_.size() && p_[end] == '$') ++end;
        if (!top || (end < p_.size() && p_[end] != '|')) return InnerAnchor();
        pos_ = end;
        *anchored_end = true;
        break;
      }
      FOLIO_ASSIGN_OR_RETURN(const Node* atom, ParseAtom(depth));
      FOLIO_ASSIGN_OR_RETURN(const Node* term, ParseQuantifier(atom));
      items.push_back(term);
    }
    return b_.Seq(items);
  }

  Status InnerAnchor() const {
    return Status::Unimplemented(
        StrCat("regex: anchor '", Peek(), "' at offset ", pos_,
               " (only ^ at the start and $ at the end of the pattern or of a top-level "
               "alternative are supported)"));
  }

  Result<const Node*> ParseAtom(int depth) {
    const size_t start = pos_;
    const char c = Peek();
    switch (c) {
      case '(':
        return ParseGroup(depth);
      case '[': {
        FOLIO_ASSIGN_OR_RETURN(CharSet set, ParseClass());
        if (set.empty()) {
          return Status::Unimplemented(
              StrCat("regex: the class at offset ", start, " matches no character"));
        }
        return b_.Chars(std::move(set));
      }
      case '.':
        ++pos_;
        return b_.Chars(DotSet());
      case '\\': {
        FOLIO_ASSIGN_OR_RETURN(Atom atom, ParseEscape(/*in_class=*/false));
        return b_.Chars(atom.is_set ? std::move(atom.set) : CharSet::Single(atom.code_point));
      }
      case '*':
      case '+':
      case '?':
        return NothingToRepeat(start);
      case '{': {
        uint64_t min = 0;
        uint64_t max = 0;
        if (ParseBraces(&min, &max)) {
          pos_ = start;
          return NothingToRepeat(start);
        }
        return Status::InvalidArgument(
            StrCat("regex: '{' at offset ", start,
                   " does not begin a quantifier {m}, {m,} or {m,n} (write \\{ for the "
                   "character)"));
      }
      default:
        return b_.Chars(CharSet::Single(NextCodePoint()));
    }
  }

  Status NothingToRepeat(size_t at) const {
    return Status::InvalidArgument(
        StrCat("regex: quantifier '", p_[at], "' at offset ", at, " has nothing to repeat"));
  }

  // The code point at pos_ (the pattern is valid UTF-8), consumed.
  uint32_t NextCodePoint() {
    const auto lead = static_cast<unsigned char>(p_[pos_]);
    const size_t len = lead < 0x80 ? 1 : utf8::ClassifyLead(lead).len;
    uint32_t c = len == 1 ? lead : lead & (0x7Fu >> len);
    for (size_t i = 1; i < len; ++i) {
      c = (c << 6) | (static_cast<unsigned char>(p_[pos_ + i]) & 0x3Fu);
    }
    pos_ += len;
    return c;
  }

  // {m}, {m,} or {m,n} at pos_: consumed and true, or pos_ unchanged and
  // false. Numbers saturate (the caller checks them against max_repeat).
  bool ParseBraces(uint64_t* min, uint64_t* max) {
    const size_t start = pos_;
    auto number = [&](uint64_t* out) {
      if (!IsDigit(Peek())) return false;
      uint64_t v = 0;
      while (IsDigit(Peek())) {
        // Saturates below kUnbounded, which stands for a missing max.
        v = std::min(SaturatingAdd(SaturatingMul(v, 10), static_cast<uint64_t>(Peek() - '0')),
                     kUnbounded - 1);
        ++pos_;
      }
      *out = v;
      return true;
    };
    ++pos_;  // '{'
    bool ok = number(min);
    if (ok) {
      *max = *min;
      if (Peek() == ',') {
        ++pos_;
        if (!number(max)) *max = kUnbounded;
      }
      ok = Peek() == '}';
    }
    if (!ok) {
      pos_ = start;
      return false;
    }
    ++pos_;
    return true;
  }

  Result<const Node*> ParseQuantifier(const Node* atom) {
    const size_t start = pos_;
    uint64_t min = 0;
    uint64_t max = 0;
    switch (Peek()) {
      case '*':
        max = kUnbounded;
        ++pos_;
        break;
      case '+':
        min = 1;
        max = kUnbounded;
        ++pos_;
        break;
      case '?':
        max = 1;
        ++pos_;
        break;
      case '{':
        if (!ParseBraces(&min, &max)) {
          return Status::InvalidArgument(
              StrCat("regex: '{' at offset ", start,
                     " does not begin a quantifier {m}, {m,} or {m,n} (write \\{ for the "
                     "character)"));
        }
        for (uint64_t bound : {min, max}) {
          if (bound != kUnbounded && bound > options_.max_repeat) {
            return Status::OutOfRange(
                StrCat("regex: repeat bound in ", Clip(p_.substr(start, pos_ - start)),
                       " at offset ", start, " exceeds max_repeat (", options_.max_repeat, ")"));
          }
        }
        if (min > max) {
          return Status::InvalidArgument(
              StrCat("regex: quantifier at offset ", start, " has min ", min, " above max ", max));
        }
        break;
      default:
        return atom;
    }
    if (Peek() == '?') {
      ++pos_;  // lazy: the same texts match
    } else if (Peek() == '+') {
      return Status::Unimplemented(
          StrCat("regex: possessive quantifier at offset ", start, " is not supported"));
    }
    return b_.Repeat(atom, min, max);
  }

  Result<const Node*> ParseGroup(int depth) {
    const size_t start = pos_;
    ++pos_;  // '('
    if (Peek() == '?') {
      const char kind = Peek(1);
      if (kind == ':') {
        pos_ += 2;
      } else if (kind == '=' || kind == '!') {
        return Refuse("lookahead", start);
      } else if (kind == '<' && (Peek(2) == '=' || Peek(2) == '!')) {
        return Refuse("lookbehind", start);
      } else if (kind == '<' || (kind == 'P' && Peek(2) == '<')) {
        pos_ += kind == '<' ? 2 : 3;
        FOLIO_RETURN_IF_ERROR(SkipGroupName(start));
      } else if (kind == 'P' && Peek(2) == '=') {
        return Refuse("backreference", start);
      } else if (kind == '>') {
        return Refuse("atomic group", start);
      } else {
        return Refuse("group modifier or inline flag", start);
      }
    }
    if (depth + 1 > kMaxNesting) {
      return Status::ResourceExhausted(
          StrCat("regex: groups nested deeper than ", kMaxNesting, " at offset ", start));
    }
    FOLIO_ASSIGN_OR_RETURN(const Node* body, ParseDisjunction(depth + 1));
    if (Peek() != ')' || AtEnd()) {
      return Status::InvalidArgument(StrCat("regex: unbalanced '(' at offset ", start));
    }
    ++pos_;
    return body;
  }

  Status SkipGroupName(size_t group_start) {
    const size_t name_start = pos_;
    while (!AtEnd() && (IsAsciiAlnum(Peek()) || Peek() == '_' || Peek() == '$')) ++pos_;
    if (pos_ == name_start || IsDigit(p_[name_start]) || Peek() != '>') {
      return Status::InvalidArgument(
          StrCat("regex: bad group name in the group at offset ", group_start));
    }
    ++pos_;
    return Status::Ok();
  }

  Status Refuse(std::string_view what, size_t at) const {
    return Status::Unimplemented(StrCat("regex: ", what, " at offset ", at, " is not supported"));
  }

  // [...] or [^...], ECMAScript style: "[]" matches nothing, "[^]" anything.
  Result<CharSet> ParseClass() {
    const size_t start = pos_;
    ++pos_;  // '['
    const bool negated = Peek() == '^' && !AtEnd();
    if (negated) ++pos_;
    std::vector<Range> members;
    while (true) {
      if (AtEnd()) {
        return Status::InvalidArgument(StrCat("regex: unterminated class '[' at offset ", start));
      }
      if (Peek() == ']') {
        ++pos_;
        break;
      }
      if (IsPosixClass()) return Refuse("POSIX class", pos_);
      const size_t lo_at = pos_;
      FOLIO_ASSIGN_OR_RETURN(Atom lo, ParseClassAtom());
      auto add = [&members](const Atom& atom) {
        if (atom.is_set) {
          members.insert(members.end(), atom.set.ranges().begin(), atom.set.ranges().end());
        } else {
          members.push_back({atom.code_point, atom.code_point});
        }
      };
      if (Peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        FOLIO_ASSIGN_OR_RETURN(Atom hi, ParseClassAtom());
        if (lo.is_set || hi.is_set) {
          // ECMAScript (Annex B): a class escape cannot end a range, so
          // the '-' is itself a member, as in the common [\w-.].
          add(lo);
          add(Atom{false, '-', {}});
          add(hi);
          continue;
        }
        if (lo.code_point > hi.code_point) {
          return Status::InvalidArgument(StrCat("regex: class range at offset ", lo_at,
                                                " is out of order (U+", Hex(lo.code_point), " > U+",
                                                Hex(hi.code_point), ")"));
        }
        members.push_back({lo.code_point, hi.code_point});
      } else {
        add(lo);
      }
    }
    CharSet set = CharSet::Union(members);
    return negated ? set.Complement() : set;
  }

  // [:name:], [=x=] or [.x.] at pos_ (inside a class), which ECMAScript
  // would read as plain characters but whose writer meant a POSIX class.
  bool IsPosixClass() const {
    const char kind = Peek(1);
    if (Peek() != '[' || (kind != ':' && kind != '=' && kind != '.')) return false;
    size_t i = pos_ + 2;
    while (i < p_.size() && IsAsciiAlnum(p_[i])) ++i;
    return i > pos_ + 2 && i + 1 < p_.size() && p_[i] == kind && p_[i + 1] == ']';
  }

  static std::string Hex(uint32_t c) {
    static constexpr char kDigits[] = "0123456789ABCDEF";
    std::string out;
    for (int shift = c > 0xFFFF ? 20 : 12; shift >= 0; shift -= 4) {
      out += kDigits[(c >> shift) & 0xF];
    }
    return out;
  }

  Result<Atom> ParseClassAtom() {
    if (Peek() == '\\') return ParseEscape(/*in_class=*/true);
    Atom atom;
    atom.code_point = NextCodePoint();
    return atom;
  }

  Result<uint32_t> ParseHex(size_t digits, size_t escape_at) {
    uint32_t v = 0;
    for (size_t i = 0; i < digits; ++i) {
      const int d = HexValue(Peek());
      if (d < 0 || AtEnd()) {
        return Status::InvalidArgument(
            StrCat("regex: escape at offset ", escape_at, " needs ", digits, " hex digits"));
      }
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  // \u{H..} or \uHHHH (a surrogate pair written as two escapes is one code
  // point), after the 'u'.
  Result<uint32_t> ParseUnicodeEscape(size_t escape_at) {
    if (Peek() == '{') {
      ++pos_;
      uint32_t v = 0;
      size_t digits = 0;
      while (HexValue(Peek()) >= 0 && !AtEnd()) {
        v = v * 16 + static_cast<uint32_t>(HexValue(Peek()));
        ++pos_;
        if (++digits > 6 || v > kMaxCodePoint) break;
      }
      if (digits == 0 || digits > 6 || v > kMaxCodePoint || Peek() != '}') {
        return Status::InvalidArgument(StrCat("regex: bad \\u{...} escape at offset ", escape_at,
                                              " (1 to 6 hex digits up to 10FFFF)"));
      }
      ++pos_;
      if (IsSurrogate(v)) return LoneSurrogate(escape_at);
      return v;
    }
    FOLIO_ASSIGN_OR_RETURN(uint32_t v, ParseHex(4, escape_at));
    if (v >= 0xD800 && v <= 0xDBFF && Peek() == '\\' && Peek(1) == 'u') {
      const size_t save = pos_;
      pos_ += 2;
      Result<uint32_t> low = ParseHex(4, save);
      if (low.ok() && *low >= 0xDC00 && *low <= 0xDFFF) {
        return 0x10000 + ((v - 0xD800) << 10) + (*low - 0xDC00);
      }
      pos_ = save;
    }
    if (IsSurrogate(v)) return LoneSurrogate(escape_at);
    return v;
  }

  Status LoneSurrogate(size_t at) const {
    return Status::InvalidArgument(StrCat("regex: the escape at offset ", at,
                                          " is a lone surrogate, which no UTF-8 text holds"));
  }

  // After a backslash at pos_.
  Result<Atom> ParseEscape(bool in_class) {
    const size_t start = pos_;
    ++pos_;
    if (AtEnd()) {
      return Status::InvalidArgument(
          StrCat("regex: the pattern ends with a lone backslash at offset ", start));
    }
    const char c = p_[pos_++];
    Atom atom;
    auto set = [&](CharSet s) {
      atom.is_set = true;
      atom.set = std::move(s);
      return atom;
    };
    auto code_point = [&](uint32_t v) {
      atom.code_point = v;
      return atom;
    };
    switch (c) {
      case 'd':
        return set(DigitSet());
      case 'D':
        return set(DigitSet().Complement());
      case 'w':
        return set(WordSet());
      case 'W':
        return set(WordSet().Complement());
      case 's':
        return set(SpaceSet());
      case 'S':
        return set(SpaceSet().Complement());
      case 'n':
        return code_point('\n');
      case 'r':
        return code_point('\r');
      case 't':
        return code_point('\t');
      case 'f':
        return code_point('\f');
      case 'v':
        return code_point('\v');
      case 'b':
        if (in_class) return code_point('\b');
        return Refuse("word boundary \\b", start);
      case 'B':
        return Refuse("word boundary \\B", start);
      case '0':
        if (IsDigit(Peek())) return Refuse("octal escape", start);
        return code_point(0);
      case 'x': {
        FOLIO_ASSIGN_OR_RETURN(uint32_t v, ParseHex(2, start));
        return code_point(v);
      }
      case 'u': {
        FOLIO_ASSIGN_OR_RETURN(uint32_t v, ParseUnicodeEscape(start));
        return code_point(v);
      }
      case 'c':
        if ((Peek() >= 'a' && Peek() <= 'z') || (Peek() >= 'A' && Peek() <= 'Z')) {
          return code_point(static_cast<uint32_t>(p_[pos_++]) % 32);
        }
        return Status::InvalidArgument(
            StrCat("regex: \\c at offset ", start, " must be followed by a letter"));
      case 'p':
      case 'P':
        return Refuse("Unicode property escape", start);
      case 'k':
        return Refuse("named backreference", start);
      case 'A':
      case 'Z':
      case 'z':
      case 'G':
        return Refuse(StrCat("anchor \\", c), start);
      default:
        break;
    }
    if (IsDigit(c)) return Refuse(StrCat("backreference \\", c), start);
    if (c >= 0x20 && c < 0x7F && !IsAsciiAlnum(c)) {
      return code_point(static_cast<uint32_t>(c));  // an escaped metacharacter
    }
    return Status::InvalidArgument(StrCat("regex: unknown escape at offset ", start));
  }

  std::string_view p_;
  const RegexOptions& options_;
  Builder& b_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------------------
// The printer.

// Hex digits (as characters, both cases) of the nibbles in `nibbles`.
CharSet HexDigitChars(const std::vector<uint32_t>& nibbles) {
  CharSet s;
  for (uint32_t n : nibbles) {
    if (n < 10) {
      s.Add('0' + n, '0' + n);
    } else {
      s.Add('a' + n - 10, 'a' + n - 10);
      s.Add('A' + n - 10, 'A' + n - 10);
    }
  }
  return s;
}

// A code point inside a GBNF literal or class.
void AppendCodePoint(uint32_t c, bool in_class, std::string* out) {
  static constexpr char kDigits[] = "0123456789abcdef";
  auto hex = [&](char kind, int digits) {
    *out += '\\';
    *out += kind;
    for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) *out += kDigits[(c >> shift) & 0xF];
  };
  if (c == '"' || c == '\\' || (in_class && (c == ']' || c == '[' || c == '-'))) {
    *out += '\\';
    *out += static_cast<char>(c);
  } else if (c == '\n') {
    *out += "\\n";
  } else if (c == '\r') {
    *out += "\\r";
  } else if (c == '\t') {
    *out += "\\t";
  } else if (c >= 0x20 && c < 0x7F && !(in_class && c == '^')) {
    *out += static_cast<char>(c);
  } else if (c < 0x80) {
    hex('x', 2);
  } else if (c <= 0xFFFF) {
    hex('u', 4);
  } else {
    hex('U', 8);
  }
}

std::string Literal(const std::vector<uint32_t>& code_points) {
  std::string out = "\"";
  for (uint32_t c : code_points) AppendCodePoint(c, /*in_class=*/false, &out);
  return out + "\"";
}

// Rendering of one character set: a single code point as a literal, all of
// them as ".", else the shorter of [..] and [^..].
std::string ClassText(const CharSet& set) {
  if (set.IsSingle()) return Literal({set.first()});
  if (set == CharSet::All()) return ".";
  const CharSet complement = set.Complement();
  const bool negate = complement.ranges().size() < set.ranges().size();
  std::string out = negate ? "[^" : "[";
  for (const Range& r : (negate ? complement : set).ranges()) {
    AppendCodePoint(r.lo, true, &out);
    if (r.hi == r.lo) continue;
    if (r.hi > r.lo + 1) out += '-';
    AppendCodePoint(r.hi, true, &out);
  }
  return out + "]";
}

// How a printed piece may be embedded: an atom can take a quantifier, a
// sequence can stand in a sequence, an alternation only alone.
enum class Shape { kAtom, kSeq, kAlt };

struct Piece {
  std::string text;
  Shape shape = Shape::kAtom;
};

// The JSON escape letter of a code point JSON must escape and has a short
// escape for ('"' '\\' b f n r t), or 0.
char ShortEscape(uint32_t c) {
  switch (c) {
    case '"':
      return '"';
    case '\\':
      return '\\';
    case '\b':
      return 'b';
    case '\f':
      return 'f';
    case '\n':
      return 'n';
    case '\r':
      return 'r';
    case '\t':
      return 't';
    default:
      return 0;
  }
}

// The escapes (as they appear in a JSON string) of `escaped`, a subset of
// JsonEscapedSet().
Piece JsonEscapes(const CharSet& escaped) {
  CharSet letters;
  std::vector<uint32_t> low_nibbles[2];  // \u00XY for the rest, by X
  for (const Range& r : escaped.ranges()) {
    for (uint32_t c = r.lo; c <= r.hi; ++c) {
      if (const char letter = ShortEscape(c)) {
        const auto l = static_cast<uint32_t>(static_cast<unsigned char>(letter));
        letters.Add(l, l);
      } else {
        low_nibbles[c >> 4].push_back(c & 0xF);
      }
    }
  }
  if (low_nibbles[0].empty() && low_nibbles[1].empty() && letters.IsSingle()) {
    return {Literal({'\\', letters.first()}), Shape::kSeq};
  }
  std::vector<std::string> after_backslash;
  if (!letters.empty()) after_backslash.push_back(ClassText(letters));
  if (!low_nibbles[0].empty() || !low_nibbles[1].empty()) {
    std::string u = "\"u00\" ";
    if (low_nibbles[0] == low_nibbles[1]) {
      u += "[01] " + ClassText(HexDigitChars(low_nibbles[0]));
    } else {
      std::vector<std::string> by_high;
      for (uint32_t high = 0; high < 2; ++high) {
        if (low_nibbles[high].empty()) continue;
        by_high.push_back(Literal({'0' + high}) + " " +
                          ClassText(HexDigitChars(low_nibbles[high])));
      }
      u += by_high.size() == 1 ? by_high[0] : "( " + by_high[0] + " | " + by_high[1] + " )";
    }
    after_backslash.push_back(u);
  }
  std::string text = "\"\\\\\" ";
  text += after_backslash.size() == 1
              ? after_backslash[0]
              : "( " + after_backslash[0] + " | " + after_backslash[1] + " )";
  return {text, Shape::kSeq};
}

class Printer {
 public:
  explicit Printer(const RegexOptions& options) : options_(options) {}

  Result<std::string> Run(const Node* root) {
    Append("(");
    Print(root, Context::kAlt);
    Append(")");
    if (!status_.ok()) return status_;
    return std::move(out_);
  }

 private:
  // Where a node is printed: as an alternative, as an item of a sequence,
  // or as the operand of a quantifier.
  enum class Context { kAlt, kSeq, kRepeat };

  void Append(std::string_view s) {
    if (!status_.ok()) return;
    if (out_.size() + s.size() > options_.max_output_bytes) {
      status_ = Status::ResourceExhausted(
          StrCat("regex: the GBNF would pass max_output_bytes (", options_.max_output_bytes, ")"));
      return;
    }
    out_ += s;
  }

  // The text a single code point must appear as (JSON-escaped in
  // json_string mode), when that is one fixed text.
  std::optional<std::vector<uint32_t>> FixedText(const Node* n) const {
    if (n->kind != Kind::kChars || !n->chars.IsSingle()) return std::nullopt;
    const uint32_t c = n->chars.first();
    if (!options_.json_string || !JsonEscapedSet().Contains(c)) return std::vector<uint32_t>{c};
    if (const char letter = ShortEscape(c)) {
      return std::vector<uint32_t>{'\\', static_cast<unsigned char>(letter)};
    }
    if ((c & 0xF) >= 10) return std::nullopt;  // \u001a or \u001A
    return std::vector<uint32_t>{'\\', 'u', '0', '0', '0' + (c >> 4), '0' + (c & 0xF)};
  }

  Piece CharsPiece(const CharSet& set) const {
    if (!options_.json_string) {
      return {ClassText(set), Shape::kAtom};
    }
    const CharSet escaped_set = JsonEscapedSet();
    const CharSet plain = set.Minus(escaped_set);
    const CharSet escaped = set.Intersect(escaped_set);
    if (escaped.empty()) return {ClassText(plain), Shape::kAtom};
    Piece escapes = JsonEscapes(escaped);
    if (plain.empty()) return escapes;
    return {ClassText(plain) + " | " + escapes.text, Shape::kAlt};
  }

  static bool NeedsParens(Shape shape, Context context) {
    return (context == Context::kSeq && shape == Shape::kAlt) ||
           (context == Context::kRepeat && shape != Shape::kAtom);
  }

  // Appends a leaf, parenthesized if `context` needs it; its weight is its
  // length.
  uint64_t AppendPiece(const Piece& piece, Context context) {
    const bool parens = NeedsParens(piece.shape, context);
    if (parens) Append("( ");
    Append(piece.text);
    if (parens) Append(" )");
    return piece.text.size();
  }

  // Appends `n` in a form fit for `context` and returns its weight: the
  // size of its text once every bounded repeat is written out, as the
  // grammar compiler expands x{m,n} into copies of x. Errors land in
  // status_.
  uint64_t Print(const Node* n, Context context) {
    if (!status_.ok()) return 0;
    switch (n->kind) {
      case Kind::kEmpty:
        return AppendPiece({"\"\"", Shape::kAtom}, context);
      case Kind::kNothing:
        FOLIO_CHECK(false, "kNothing reached the printer");
        return 0;
      case Kind::kChars:
        return AppendPiece(CharsPiece(n->chars), context);
      case Kind::kAnyText:
        return AppendPiece({std::string(options_.json_string ? kJsonAnyText : ".*"), Shape::kSeq},
                           context);
      case Kind::kSeq:
        return PrintList(n, context);
      case Kind::kAlt:
        return PrintList(n, context);
      case Kind::kRepeat:
        return PrintRepeat(n, context);
    }
    return 0;
  }

  // A sequence (runs of fixed code points merged into one literal) or an
  // alternation. A list whose last item is a list of the same kind (the
  // chains Builder::NonEmpty makes) is continued in place, not recursed
  // into.
  uint64_t PrintList(const Node* n, Context context) {
    const Kind kind = n->kind;
    const bool parens = kind == Kind::kAlt ? context != Context::kAlt : context == Context::kRepeat;
    const std::string_view separator = kind == Kind::kAlt ? " | " : " ";
    if (parens) Append("( ");
    uint64_t weight = 0;
    bool first = true;
    std::vector<uint32_t> literal;
    auto separate = [&] {
      if (!first) Append(separator);
      first = false;
    };
    auto flush = [&] {
      if (literal.empty()) return;
      separate();
      const std::string text = Literal(literal);
      Append(text);
      weight = SaturatingAdd(weight, text.size());
      literal.clear();
    };
    for (const Node* list = n; list != nullptr && status_.ok();) {
      const Node* next = nullptr;
      for (size_t i = 0; i < list->children.size() && status_.ok(); ++i) {
        const Node* child = list->children[i];
        if (i + 1 == list->children.size() && child->kind == kind) {
          next = child;
          break;
        }
        if (kind == Kind::kSeq) {
          if (std::optional<std::vector<uint32_t>> text = FixedText(child)) {
            literal.insert(literal.end(), text->begin(), text->end());
            continue;
          }
          flush();
        }
        separate();
        const uint64_t w = Print(child, kind == Kind::kAlt ? Context::kAlt : Context::kSeq);
        weight = SaturatingAdd(weight, w);
      }
      list = next;
    }
    flush();
    if (parens) Append(" )");
    return weight;
  }

  uint64_t PrintRepeat(const Node* n, Context context) {
    const bool parens = context == Context::kRepeat;
    if (parens) Append("( ");
    const uint64_t inner = Print(n->children[0], Context::kRepeat);
    const uint64_t min = n->min;
    const uint64_t max = n->max;
    if (min == 0 && max == 1) {
      Append("?");
    } else if (min == 0 && max == kUnbounded) {
      Append("*");
    } else if (min == 1 && max == kUnbounded) {
      Append("+");
    } else if (min == max) {
      Append(StrCat("{", min, "}"));
    } else if (max == kUnbounded) {
      Append(StrCat("{", min, ",}"));
    } else {
      Append(StrCat("{", min, ",", max, "}"));
    }
    if (parens) Append(" )");
    // x{m,n} compiles to n copies of x, x{m,} to m + 1. The GBNF text
    // stays small, but the compiled grammar would not, so nested bounded
    // repeats are refused here, before the compiler sees them, when their
    // expansion passes the same byte budget as the text.
    const uint64_t copies = max == kUnbounded ? SaturatingAdd(min, 1) : max;
    const uint64_t weight = SaturatingMul(inner, copies);
    if (status_.ok() && weight > options_.max_output_bytes) {
      status_ = Status::ResourceExhausted(
          StrCat("regex: nested repetition would expand to more than max_output_bytes (",
                 options_.max_output_bytes, ")"));
    }
    return weight;
  }

  // Any sequence of JSON string characters, optional escapes included.
  static constexpr std::string_view kJsonAnyText =
      R"(( [^\"\\\x00-\x1f] | "\\" ( [\"\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )*)";

  const RegexOptions& options_;
  Status status_;
  std::string out_;
};

}  // namespace

Result<std::string> RegexToGbnf(std::string_view pattern, const RegexOptions& options) {
  if (const size_t bad = utf8::FirstInvalid(pattern); bad != std::string_view::npos) {
    return Status::InvalidArgument(StrCat("regex: the pattern is not UTF-8 at offset ", bad));
  }
  Builder builder;
  Parser parser(pattern, options, &builder);
  FOLIO_ASSIGN_OR_RETURN(std::vector<TopAlternative> alts, parser.ParseTop());

  // Full match ignores the anchors. In search mode an alternative without
  // ^ may have any text before it, one without $ any text after; when all
  // alternatives agree the any-text is written once around all of them.
  const Node* root = nullptr;
  auto with_ends = [&](const Node* body, bool anchored_start, bool anchored_end) {
    return builder.Seq({anchored_start ? builder.Empty() : builder.AnyText(), body,
                        anchored_end ? builder.Empty() : builder.AnyText()});
  };
  std::vector<const Node*> bodies;
  for (const TopAlternative& alt : alts) bodies.push_back(alt.node);
  const bool uniform = std::all_of(alts.begin(), alts.end(), [&](const TopAlternative& alt) {
    return alt.anchored_start == alts[0].anchored_start && alt.anchored_end == alts[0].anchored_end;
  });
  if (!options.search) {
    root = builder.Alt(bodies);
  } else if (uniform) {
    root = with_ends(builder.Alt(bodies), alts[0].anchored_start, alts[0].anchored_end);
  } else {
    std::vector<const Node*> parts;
    for (const TopAlternative& alt : alts) {
      parts.push_back(with_ends(alt.node, alt.anchored_start, alt.anchored_end));
    }
    root = builder.Alt(parts);
  }
  if (root->kind == Kind::kNothing) {
    return Status::Unimplemented("regex: the pattern matches no text");
  }
  return Printer(options).Run(root);
}

}  // namespace folio::grammar
