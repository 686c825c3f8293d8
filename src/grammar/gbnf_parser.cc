#include "grammar/gbnf_parser.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "folio/core/utf8.h"
#include "grammar/utf8_ranges.h"

namespace folio::grammar {

namespace {

// Parenthesis nesting deeper than this is refused (the parser recurses
// once per level).
constexpr int kMaxNesting = 256;

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

// One symbol of a sequence: a byte set, a token or a rule (never kEnd).
struct Sym {
  Element::Kind kind = Element::Kind::kBytes;
  uint32_t arg = 0;
  bool is_rule() const { return kind == Element::Kind::kRule; }
};
Sym RuleSym(uint32_t rule) { return Sym{Element::Kind::kRule, rule}; }
using Seq = std::vector<Sym>;

struct Rule {
  std::string name;
  std::vector<Seq> alts;
  bool defined = false;
  size_t first_use = 0;  // source offset of the first reference
};

// An unbounded repetition, checked once nullability is known.
struct Repeat {
  Sym unit;
  size_t offset = 0;
};

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  Parser(std::string_view src, const GrammarLimits& limits, const TokenVocabulary& vocabulary)
      : src_(src), limits_(limits), vocabulary_(vocabulary) {}

  Result<std::unique_ptr<CompiledGrammar>> Run() {
    if (src_.size() > limits_.max_source_bytes) {
      return Status::ResourceExhausted("grammar: " + std::to_string(src_.size()) +
                                       " bytes of GBNF, over the limit of " +
                                       std::to_string(limits_.max_source_bytes));
    }
    if (const size_t bad = utf8::FirstInvalid(src_); bad != std::string_view::npos) {
      return Error(bad, "the grammar is not valid UTF-8");
    }
    SkipSpace(true);
    while (pos_ < src_.size()) {
      FOLIO_RETURN_IF_ERROR(ParseRule());
      SkipSpace(true);
    }
    FOLIO_RETURN_IF_ERROR(Check());
    return Lower();
  }

 private:
  // --- errors and positions ---

  Status Error(size_t offset, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < offset && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else if ((static_cast<unsigned char>(src_[i]) & 0xC0) != 0x80) {
        ++col;
      }
    }
    return Status::InvalidArgument("grammar:" + std::to_string(line) + ":" + std::to_string(col) +
                                   ": " + what);
  }
  Status ErrorHere(const std::string& what) const { return Error(pos_, what); }

  bool AtEnd() const { return pos_ >= src_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }

  // Spaces, tabs and comments; newlines too when newline_ok.
  void SkipSpace(bool newline_ok) {
    while (!AtEnd()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && src_[pos_] != '\n') ++pos_;
      } else if (c == '\n' && newline_ok) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  // --- rules, byte sets and limits ---

  Result<uint32_t> RuleId(const std::string& name, size_t offset) {
    if (auto it = rule_ids_.find(name); it != rule_ids_.end()) return it->second;
    FOLIO_ASSIGN_OR_RETURN(const uint32_t id, NewRule(name));
    rules_[id].first_use = offset;
    rule_ids_.emplace(name, id);
    return id;
  }

  // A rule with no entry in rule_ids_ (a helper) or a named one's slot.
  Result<uint32_t> NewRule(std::string name) {
    if (rules_.size() >= limits_.max_rules) {
      return Status::ResourceExhausted("grammar: more than " + std::to_string(limits_.max_rules) +
                                       " rules (helper rules for groups, classes and "
                                       "repetition included)");
    }
    rules_.push_back(Rule{std::move(name), {}, false, pos_});
    return static_cast<uint32_t>(rules_.size() - 1);
  }

  Result<uint32_t> HelperRule(std::vector<Seq> alts) {
    FOLIO_ASSIGN_OR_RETURN(const uint32_t id,
                           NewRule(current_rule_ + "_" + std::to_string(++helper_count_)));
    rules_[id].alts = std::move(alts);
    rules_[id].defined = true;
    return id;
  }

  // Every symbol the parser builds passes here, so a grammar that would
  // compile to too many elements is refused before it is built (groups
  // inlined into their sequence count twice; Lower checks the exact
  // count).
  Status Grow(uint64_t n) {
    built_ += n;
    if (built_ > 2 * limits_.max_elements + 64) return TooManyElements();
    return Status::Ok();
  }
  Status TooManyElements() const {
    return Status::ResourceExhausted("grammar: more than " + std::to_string(limits_.max_elements) +
                                     " compiled elements");
  }

  uint32_t SetId(const ByteSet& set) {
    auto [it, fresh] = set_ids_.emplace(set.words, static_cast<uint32_t>(sets_.size()));
    if (fresh) sets_.push_back(set);
    return it->second;
  }
  Sym ByteSym(uint8_t lo, uint8_t hi) {
    ByteSet s;
    s.AddRange(lo, hi);
    return Sym{Element::Kind::kBytes, SetId(s)};
  }

  // --- syntax ---

  Status ParseRule() {
    const size_t start = pos_;
    std::string name;
    while (!AtEnd() && IsNameChar(Peek())) name += src_[pos_++];
    if (name.empty()) return ErrorHere("expected a rule name");
    SkipSpace(false);
    if (src_.substr(pos_, 3) != "::=") return ErrorHere("expected ::= after rule name " + name);
    pos_ += 3;
    SkipSpace(true);
    FOLIO_ASSIGN_OR_RETURN(const uint32_t id, RuleId(name, start));
    if (rules_[id].defined) return Error(start, "rule " + name + " is defined twice");
    rules_[id].defined = true;  // before the body, so a self-reference is fine
    current_rule_ = name;
    helper_count_ = 0;
    FOLIO_ASSIGN_OR_RETURN(std::vector<Seq> alts, ParseAlternatives(false, 0));
    rules_[id].alts = std::move(alts);
    if (!AtEnd() && Peek() != '\n') {
      return ErrorHere(Peek() == ')' ? "unbalanced )" : "expected the end of the rule");
    }
    return Status::Ok();
  }

  Result<std::vector<Seq>> ParseAlternatives(bool nested, int depth) {
    std::vector<Seq> alts;
    while (true) {
      FOLIO_ASSIGN_OR_RETURN(Seq seq, ParseSequence(nested, depth));
      alts.push_back(std::move(seq));
      if (Peek() != '|' || AtEnd()) break;
      ++pos_;
      SkipSpace(true);
    }
    return alts;
  }

  Result<Seq> ParseSequence(bool nested, int depth) {
    Seq seq;
    while (!AtEnd()) {
      const char c = Peek();
      if (c == '|' || c == ')' || c == '\n') break;
      const size_t item_start = pos_;
      FOLIO_ASSIGN_OR_RETURN(Seq unit, ParseItem(depth));
      SkipSpace(nested);
      while (!AtEnd() && (Peek() == '*' || Peek() == '+' || Peek() == '?' || Peek() == '{')) {
        FOLIO_ASSIGN_OR_RETURN(unit, ParseQuantifier(std::move(unit), item_start));
        SkipSpace(nested);
      }
      FOLIO_RETURN_IF_ERROR(Grow(unit.size()));
      seq.insert(seq.end(), unit.begin(), unit.end());
    }
    return seq;
  }

  Result<Seq> ParseItem(int depth) {
    const char c = Peek();
    if (c == '"') return ParseLiteral();
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++pos_;
      FOLIO_ASSIGN_OR_RETURN(const Sym any, ClassSym({{0, kMaxCodePoint}}));
      return Seq{any};
    }
    if (c == '(') {
      const size_t open = pos_;
      if (depth + 1 > kMaxNesting) {
        return Status::ResourceExhausted("grammar: parentheses nested deeper than " +
                                         std::to_string(kMaxNesting));
      }
      ++pos_;
      SkipSpace(true);
      FOLIO_ASSIGN_OR_RETURN(std::vector<Seq> alts, ParseAlternatives(true, depth + 1));
      if (Peek() != ')' || AtEnd()) return Error(open, "unbalanced (: expected )");
      ++pos_;
      if (alts.size() == 1) return std::move(alts[0]);
      FOLIO_ASSIGN_OR_RETURN(const uint32_t id, HelperRule(std::move(alts)));
      return Seq{RuleSym(id)};
    }
    if (c == '<') return ParseToken();
    if (c == '!' && Peek(1) == '<') {
      return ErrorHere("negated token references (!<...>) are not supported");
    }
    if (IsNameChar(c)) {
      const size_t start = pos_;
      std::string name;
      while (!AtEnd() && IsNameChar(Peek())) name += src_[pos_++];
      // A name followed by ::= starts the next rule: the previous one
      // lacked its line break.
      size_t after = pos_;
      while (after < src_.size() && (src_[after] == ' ' || src_[after] == '\t')) ++after;
      if (src_.substr(after, 3) == "::=") {
        return Error(start, "expected a line break before the definition of " + name);
      }
      FOLIO_ASSIGN_OR_RETURN(const uint32_t id, RuleId(name, start));
      return Seq{RuleSym(id)};
    }
    if (c == ']') return ErrorHere("unbalanced ]");
    return ErrorHere(std::string("expected a literal, a class, a rule name or a group, not '") + c +
                     "'");
  }

  // A token reference: <[id]>, or <text> up to the first > (no blanks),
  // the token whose vocabulary string that is.
  Result<Seq> ParseToken() {
    const size_t open = pos_;
    if (Peek(1) == '[') {
      pos_ += 2;
      uint64_t id = 0;
      size_t digits = 0;
      while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
        id = id * 10 + static_cast<uint64_t>(Peek() - '0');
        if (id > uint64_t{INT32_MAX}) return Error(open, "token id is over 2^31 - 1");
        ++pos_;
        ++digits;
      }
      if (digits == 0 || Peek() != ']' || Peek(1) != '>') {
        return Error(open, "expected a token id, written <[123]>");
      }
      pos_ += 2;
      if (vocabulary_.size != 0 && id >= vocabulary_.size) {
        return Error(open, "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                               std::to_string(vocabulary_.size) + ")");
      }
      return Seq{Sym{Element::Kind::kToken, static_cast<uint32_t>(id)}};
    }
    size_t end = pos_ + 1;
    while (end < src_.size() && src_[end] != '>' && src_[end] != ' ' && src_[end] != '\t' &&
           src_[end] != '\r' && src_[end] != '\n') {
      ++end;
    }
    if (end >= src_.size() || src_[end] != '>' || end == pos_ + 1) {
      return Error(open,
                   "unterminated token reference: expected > (a token is written <[123]> or as "
                   "its vocabulary string, <|end|>, without blanks)");
    }
    const std::string text(src_.substr(pos_, end + 1 - pos_));
    if (!vocabulary_.find) {
      return Error(open, "token " + text +
                             " is named by its text, which needs the model's vocabulary; name "
                             "it by id (<[123]>)");
    }
    const std::optional<int32_t> id = vocabulary_.find(text);
    if (!id || *id < 0 ||
        (vocabulary_.size != 0 && static_cast<uint64_t>(*id) >= vocabulary_.size)) {
      return Error(open, "no token of the model's vocabulary is " + text);
    }
    pos_ = end + 1;
    return Seq{Sym{Element::Kind::kToken, static_cast<uint32_t>(*id)}};
  }

  // One code point of a literal or class: an escape or a UTF-8 character.
  Result<uint32_t> ParseChar() {
    const size_t start = pos_;
    const unsigned char c = static_cast<unsigned char>(src_[pos_]);
    if (c != '\\') {
      if (c < 0x80) {
        ++pos_;
        return uint32_t{c};
      }
      const utf8::LeadByte lead = utf8::ClassifyLead(c);  // the source is valid UTF-8
      uint32_t cp = c & (0x7Fu >> lead.len);
      for (size_t i = 1; i < lead.len; ++i) {
        cp = (cp << 6) | (static_cast<unsigned char>(src_[pos_ + i]) & 0x3Fu);
      }
      pos_ += lead.len;
      return cp;
    }
    if (pos_ + 1 >= src_.size()) return ErrorHere("unterminated escape");
    const char e = src_[pos_ + 1];
    pos_ += 2;
    switch (e) {
      case 'n':
        return uint32_t{'\n'};
      case 'r':
        return uint32_t{'\r'};
      case 't':
        return uint32_t{'\t'};
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '/':
        return static_cast<uint32_t>(e);
      case 'x':
      case 'u':
      case 'U': {
        const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t i = 0; i < digits; ++i) {
          const int h = HexValue(Peek());
          if (h < 0) {
            return Error(
                start, std::string("\\") + e + " needs " + std::to_string(digits) + " hex digits");
          }
          cp = cp * 16 + static_cast<uint32_t>(h);
          ++pos_;
        }
        if (cp > kMaxCodePoint || (cp >= kSurrogateLo && cp <= kSurrogateHi)) {
          return Error(start, "escape names no Unicode scalar value");
        }
        return cp;
      }
      default:
        return Error(start, std::string("unknown escape \\") + e);
    }
  }

  Result<Seq> ParseLiteral() {
    const size_t open = pos_;
    ++pos_;
    Seq seq;
    while (true) {
      if (AtEnd() || Peek() == '\n') return Error(open, "unterminated literal");
      if (Peek() == '"') break;
      FOLIO_ASSIGN_OR_RETURN(const uint32_t cp, ParseChar());
      FOLIO_RETURN_IF_ERROR(Grow(4));
      for (const char b : EncodeUtf8(cp)) {
        const auto u = static_cast<uint8_t>(b);
        seq.push_back(ByteSym(u, u));
      }
    }
    ++pos_;
    return seq;
  }

  Result<Seq> ParseClass() {
    const size_t open = pos_;
    ++pos_;
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodePointRange> ranges;
    while (true) {
      if (AtEnd() || Peek() == '\n') return Error(open, "unterminated class: expected ]");
      if (Peek() == ']') break;
      const size_t at = pos_;
      FOLIO_ASSIGN_OR_RETURN(const uint32_t lo, ParseChar());
      uint32_t hi = lo;
      if (Peek() == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] != ']') {
        ++pos_;
        FOLIO_ASSIGN_OR_RETURN(hi, ParseChar());
        if (hi < lo) return Error(at, "class range is reversed");
      }
      ranges.emplace_back(lo, hi);
    }
    ++pos_;
    ranges = NormalizeRanges(std::move(ranges));
    if (negated) ranges = ComplementRanges(ranges);
    if (ranges.empty()) return Error(open, "class matches no character");
    FOLIO_ASSIGN_OR_RETURN(const Sym sym, ClassSym(ranges));
    return Seq{sym};
  }

  // One code point from normalized ranges: one byte set when all are
  // ASCII, else a helper rule with an alternative per UTF-8 shape.
  Result<Sym> ClassSym(const std::vector<CodePointRange>& ranges) {
    if (auto it = class_rules_.find(ranges); it != class_rules_.end()) return it->second;
    ByteSet ascii;
    bool has_ascii = false;
    std::vector<Seq> alts;
    for (auto [lo, hi] : ranges) {
      if (lo < 0x80) {
        ascii.AddRange(static_cast<uint8_t>(lo),
                       static_cast<uint8_t>(std::min<uint32_t>(hi, 0x7F)));
        has_ascii = true;
        if (hi < 0x80) continue;
        lo = 0x80;
      }
      for (const Utf8Sequence& s : Utf8Sequences(lo, hi)) {
        FOLIO_RETURN_IF_ERROR(Grow(s.size() + 1));
        Seq seq;
        for (const ByteRange& r : s) seq.push_back(ByteSym(r.lo, r.hi));
        alts.push_back(std::move(seq));
      }
    }
    Sym sym;
    if (alts.empty()) {
      sym = Sym{Element::Kind::kBytes, SetId(ascii)};
    } else {
      std::vector<Seq> all;
      if (has_ascii) all.push_back(Seq{Sym{Element::Kind::kBytes, SetId(ascii)}});
      for (Seq& seq : alts) all.push_back(std::move(seq));
      FOLIO_ASSIGN_OR_RETURN(const uint32_t id, HelperRule(std::move(all)));
      sym = RuleSym(id);
    }
    class_rules_.emplace(ranges, sym);
    return sym;
  }

  Result<size_t> ParseInt() {
    const size_t start = pos_;
    uint64_t v = 0;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(Peek() - '0');
      if (v > limits_.max_repeat) {
        return Status::ResourceExhausted("grammar: repetition count over the limit of " +
                                         std::to_string(limits_.max_repeat));
      }
      ++pos_;
    }
    if (pos_ == start) return ErrorHere("expected a number in {m,n}");
    return static_cast<size_t>(v);
  }

  Result<Sym> Single(Seq unit) {
    if (unit.size() == 1) return unit[0];
    FOLIO_ASSIGN_OR_RETURN(const uint32_t id, HelperRule({std::move(unit)}));
    return RuleSym(id);
  }

  // S ::= unit S | (empty)
  Result<Sym> Star(Sym unit, size_t offset) {
    FOLIO_ASSIGN_OR_RETURN(const uint32_t id,
                           NewRule(current_rule_ + "_" + std::to_string(++helper_count_)));
    rules_[id].alts = {Seq{unit, RuleSym(id)}, Seq{}};
    rules_[id].defined = true;
    FOLIO_RETURN_IF_ERROR(Grow(4));
    repeats_.push_back(Repeat{unit, offset});
    return RuleSym(id);
  }

  Result<Seq> ParseQuantifier(Seq unit_seq, size_t item_start) {
    const char q = Peek();
    ++pos_;
    FOLIO_ASSIGN_OR_RETURN(const Sym unit, Single(std::move(unit_seq)));
    if (q == '*') {
      FOLIO_ASSIGN_OR_RETURN(const Sym s, Star(unit, item_start));
      return Seq{s};
    }
    if (q == '+') {
      FOLIO_ASSIGN_OR_RETURN(const Sym s, Star(unit, item_start));
      return Seq{unit, s};
    }
    if (q == '?') {
      FOLIO_ASSIGN_OR_RETURN(const uint32_t id, HelperRule({Seq{unit}, Seq{}}));
      return Seq{RuleSym(id)};
    }
    // {m}, {m,}, {m,n}
    SkipSpace(true);
    FOLIO_ASSIGN_OR_RETURN(const size_t m, ParseInt());
    SkipSpace(true);
    size_t n = m;
    bool unbounded = false;
    if (Peek() == ',') {
      ++pos_;
      SkipSpace(true);
      if (Peek() == '}') {
        unbounded = true;
      } else {
        FOLIO_ASSIGN_OR_RETURN(n, ParseInt());
        SkipSpace(true);
        if (n < m) return Error(item_start, "repetition {m,n} with n < m");
      }
    }
    if (Peek() != '}') return ErrorHere("expected } to close {m,n}");
    ++pos_;
    FOLIO_RETURN_IF_ERROR(Grow(m + 3 * (n - m)));
    Seq out(m, unit);
    if (unbounded) {
      FOLIO_ASSIGN_OR_RETURN(const Sym s, Star(unit, item_start));
      out.push_back(s);
    } else if (n > m) {
      // R1 ::= unit | (empty);  Rk ::= unit R(k-1) | (empty)
      FOLIO_ASSIGN_OR_RETURN(uint32_t tail, HelperRule({Seq{unit}, Seq{}}));
      for (size_t k = m + 1; k < n; ++k) {
        FOLIO_ASSIGN_OR_RETURN(tail, HelperRule({Seq{unit, RuleSym(tail)}, Seq{}}));
      }
      out.push_back(RuleSym(tail));
    }
    return out;
  }

  // --- checks ---

  Status Check() {
    const auto root = rule_ids_.find("root");
    if (root == rule_ids_.end() || !rules_[root->second].defined) {
      return Status::InvalidArgument("grammar: no root rule (the grammar starts at `root ::=`)");
    }
    for (const Rule& r : rules_) {
      if (!r.defined) return Error(r.first_use, "rule " + r.name + " is used but not defined");
    }
    // Nullable rules, to a fixed point.
    nullable_.assign(rules_.size(), false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < rules_.size(); ++i) {
        if (nullable_[i]) continue;
        for (const Seq& alt : rules_[i].alts) {
          if (std::all_of(alt.begin(), alt.end(), [&](Sym s) { return IsNullable(s); })) {
            nullable_[i] = true;
            changed = true;
            break;
          }
        }
      }
    }
    for (const Repeat& r : repeats_) {
      if (IsNullable(r.unit)) {
        return Error(r.offset,
                     "repetition of an expression that can match the empty string (it would "
                     "repeat without end)");
      }
    }
    // Left recursion: a cycle in "may begin with" (through nullable
    // prefixes). Iterative depth-first search.
    std::vector<std::vector<uint32_t>> begins(rules_.size());
    for (size_t i = 0; i < rules_.size(); ++i) {
      for (const Seq& alt : rules_[i].alts) {
        for (const Sym s : alt) {
          if (s.is_rule()) begins[i].push_back(s.arg);
          if (!IsNullable(s)) break;
        }
      }
    }
    enum : uint8_t { kWhite, kGrey, kBlack };
    std::vector<uint8_t> color(rules_.size(), kWhite);
    std::vector<std::pair<uint32_t, size_t>> stack;
    for (uint32_t start = 0; start < rules_.size(); ++start) {
      if (color[start] != kWhite) continue;
      stack.emplace_back(start, 0);
      color[start] = kGrey;
      while (!stack.empty()) {
        auto& [rule, next] = stack.back();
        if (next == begins[rule].size()) {
          color[rule] = kBlack;
          stack.pop_back();
          continue;
        }
        const uint32_t to = begins[rule][next++];
        if (color[to] == kGrey) {
          return Error(rules_[to].first_use, "rule " + NamedRule(to) +
                                                 " is left-recursive (it can begin with "
                                                 "itself); rewrite it with repetition");
        }
        if (color[to] == kWhite) {
          color[to] = kGrey;
          stack.emplace_back(to, 0);
        }
      }
    }
    return Status::Ok();
  }

  bool IsNullable(Sym s) const { return s.is_rule() && nullable_[s.arg]; }

  // A helper rule's name is derived from the rule it lies in; report that.
  std::string NamedRule(uint32_t id) const {
    const std::string& n = rules_[id].name;
    if (rule_ids_.count(n) != 0) return n;
    return n.substr(0, n.rfind('_'));
  }

  // --- lowering ---

  Result<std::unique_ptr<CompiledGrammar>> Lower() {
    uint64_t elements = 0;
    for (const Rule& r : rules_) {
      for (const Seq& alt : r.alts) elements += alt.size() + 1;
    }
    if (elements > limits_.max_elements) return TooManyElements();
    auto g = std::make_unique<CompiledGrammar>();
    g->byte_sets = std::move(sets_);
    g->rule_alternatives.resize(rules_.size());
    g->rule_names.reserve(rules_.size());
    g->elements.reserve(elements);
    for (size_t i = 0; i < rules_.size(); ++i) {
      g->rule_names.push_back(rules_[i].name);
      for (const Seq& alt : rules_[i].alts) {
        g->rule_alternatives[i].push_back(static_cast<uint32_t>(g->elements.size()));
        for (const Sym s : alt) {
          g->elements.push_back(Element{s.kind, s.arg});
        }
        g->elements.push_back(Element{Element::Kind::kEnd, 0});
      }
    }
    g->root = rule_ids_.at("root");
    return g;
  }

  std::string_view src_;
  const GrammarLimits& limits_;
  const TokenVocabulary& vocabulary_;
  size_t pos_ = 0;
  std::vector<Rule> rules_;
  std::map<std::string, uint32_t> rule_ids_;
  std::vector<ByteSet> sets_;
  std::map<std::array<uint64_t, 4>, uint32_t> set_ids_;
  std::map<std::vector<CodePointRange>, Sym> class_rules_;
  std::vector<Repeat> repeats_;
  std::vector<bool> nullable_;
  uint64_t built_ = 0;
  std::string current_rule_;
  uint32_t helper_count_ = 0;
};

}  // namespace

Result<std::unique_ptr<CompiledGrammar>> CompileGbnf(std::string_view gbnf,
                                                     const GrammarLimits& limits,
                                                     const TokenVocabulary& vocabulary) {
  return Parser(gbnf, limits, vocabulary).Run();
}

}  // namespace folio::grammar
