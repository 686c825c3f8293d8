// Numbers, strings, objects and arrays for the JSON Schema walk
// (json_schema.cc).
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "folio/core/utf8.h"
#include "folio/grammar/grammar.h"
#include "folio/grammar/regex.h"
#include "grammar/json_schema_converter.h"

namespace folio::grammar::json_schema_internal {
namespace {

// One code point (its UTF-8) as a class member: \xHH, \uHHHH or
// \UHHHHHHHH.
std::string ClassMember(const std::string& utf8) {
  const auto b0 = static_cast<unsigned char>(utf8[0]);
  uint32_t cp = b0;
  if (utf8.size() > 1) {
    cp = b0 & (0xFFu >> (utf8.size() + 1));
    for (size_t i = 1; i < utf8.size(); ++i) {
      cp = (cp << 6) | (static_cast<unsigned char>(utf8[i]) & 0x3Fu);
    }
  }
  char buf[16];
  if (cp < 0x80) {
    std::snprintf(buf, sizeof(buf), "\\x%02X", cp);
  } else if (cp < 0x10000) {
    std::snprintf(buf, sizeof(buf), "\\u%04X", cp);
  } else {
    std::snprintf(buf, sizeof(buf), "\\U%08X", cp);
  }
  return buf;
}

}  // namespace

// ---- Numbers ----

Result<Expr> Converter::VisitNumber(const Json& s, const std::string& ptr, bool integer_only) {
  std::optional<Bound> lo;
  std::optional<Bound> hi;
  // The tighter of two bounds; equal values: the exclusive one.
  auto tighter = [](std::optional<Bound>& cur, Bound b, int sign) {
    if (!cur) {
      cur = b;
      return;
    }
    const int c = CompareDecimals(b.value, cur->value) * sign;
    if (c > 0 || (c == 0 && b.exclusive)) cur = b;
  };
  for (int side = 0; side < 2; ++side) {
    const char* inclusive_key = side == 0 ? "minimum" : "maximum";
    const char* exclusive_key = side == 0 ? "exclusiveMinimum" : "exclusiveMaximum";
    std::optional<Bound>& bound = side == 0 ? lo : hi;
    const int sign = side == 0 ? 1 : -1;
    bool draft4_exclusive = false;
    if (s.contains(exclusive_key)) {
      const Json& e = s[exclusive_key];
      if (e.is_boolean()) {
        draft4_exclusive = e.get<bool>();
      } else {
        Result<Decimal> d = DecimalFromJson(e);
        if (!d.ok()) return d.status().WithContext(ptr + "/" + exclusive_key);
        tighter(bound, Bound{*d, true}, sign);
      }
    }
    if (s.contains(inclusive_key)) {
      Result<Decimal> d = DecimalFromJson(s[inclusive_key]);
      if (!d.ok()) return d.status().WithContext(ptr + "/" + inclusive_key);
      tighter(bound, Bound{*d, draft4_exclusive}, sign);
    }
  }
  if (s.contains("multipleOf")) {
    Result<Decimal> m = DecimalFromJson(s["multipleOf"]);
    if (!m.ok()) return m.status().WithContext(ptr + "/multipleOf");
    if (m->negative || m->int_digits != "1" || !m->frac_digits.empty()) {
      return Status::Unimplemented("multipleOf " + JsonText(s["multipleOf"]) + " at " + ptr +
                                   " (only multipleOf 1 is supported)");
    }
    integer_only = true;
  }
  if (!lo && !hi) return Expr(Use(integer_only ? "integer" : "number"));
  Expr e = NumberRangeGbnf(lo, hi, integer_only);
  if (!e) return Expr();
  return Expr(NodeRule(ptr, *e));
}

// ---- Strings ----

Result<Expr> Converter::VisitString(const Json& s, const std::string& ptr) {
  if (s.contains("format") && IsAnnotation("format", s["format"])) {
    return VisitString(WithoutKey(s, "format"), ptr);
  }
  FOLIO_ASSIGN_OR_RETURN(std::optional<uint64_t> min_len, Count(s, "minLength", ptr));
  FOLIO_ASSIGN_OR_RETURN(std::optional<uint64_t> max_len, Count(s, "maxLength", ptr));
  const bool has_len = min_len || max_len;
  if (min_len && max_len && *min_len > *max_len) return Expr();
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) {
      return Status::InvalidArgument("pattern must be a string at " + ptr);
    }
    if (has_len || s.contains("format")) {
      return Status::Unimplemented("pattern together with " +
                                   std::string(has_len ? "minLength/maxLength" : "format") +
                                   " at " + ptr);
    }
    RegexOptions ro;
    ro.search = true;
    ro.json_string = true;
    Result<std::string> re = RegexToGbnf(s["pattern"].get<std::string>(), ro);
    if (!re.ok()) return re.status().WithContext("pattern at " + ptr + "/pattern");
    return Expr(NodeRule(ptr, Seq({kQuote, "( " + *re + " )", kQuote})));
  }
  if (s.contains("format")) {
    if (!s["format"].is_string())
      return Status::InvalidArgument("format must be a string at " + ptr);
    const std::string format = s["format"].get<std::string>();
    Result<std::string> rule = FormatRuleName(format);
    if (!rule.ok()) return rule.status().WithContext(ptr + "/format");
    if (has_len) {
      std::optional<uint64_t> fixed = FormatFixedLength(format);
      if (!fixed) {
        return Status::Unimplemented("format \"" + format +
                                     "\" together with minLength/maxLength at " + ptr);
      }
      if ((min_len && *min_len > *fixed) || (max_len && *max_len < *fixed)) return Expr();
    }
    return Expr(NodeRule(ptr, Seq({kQuote, Use(*rule), kQuote})));
  }
  if (!has_len) return Expr(Use("string"));
  FOLIO_RETURN_IF_ERROR(CheckRepeat(min_len, "minLength", ptr));
  FOLIO_RETURN_IF_ERROR(CheckRepeat(max_len, "maxLength", ptr));
  return Expr(
      NodeRule(ptr, Seq({kQuote, Use("char") + Repeat(min_len.value_or(0), max_len), kQuote})));
}

// ---- Objects ----

Result<Expr> Converter::VisitObject(const Json& s, const std::string& ptr, uint64_t depth) {
  const Json no_properties = Json::object();
  const Json& props = s.contains("properties") ? s["properties"] : no_properties;
  if (!props.is_object()) return Status::InvalidArgument("properties must be an object at " + ptr);
  std::vector<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array())
      return Status::InvalidArgument("required must be an array at " + ptr);
    for (const Json& k : s["required"]) {
      if (!k.is_string()) return Status::InvalidArgument("required must list strings at " + ptr);
      if (std::find(required.begin(), required.end(), k.get<std::string>()) == required.end()) {
        required.push_back(k.get<std::string>());
      }
    }
  }
  const Json additional =
      s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
  if (!additional.is_boolean() && !additional.is_object()) {
    return Status::InvalidArgument("additionalProperties must be a schema at " + ptr);
  }
  FOLIO_ASSIGN_OR_RETURN(std::optional<uint64_t> min_props, Count(s, "minProperties", ptr));
  FOLIO_ASSIGN_OR_RETURN(std::optional<uint64_t> max_props, Count(s, "maxProperties", ptr));

  struct Member {
    std::string kv;
    bool required = false;
  };
  std::vector<Member> members;
  Expr extra;
  {
    // Member values are inside the braces: a $ref there recurses safely.
    ClearedScope guarded(&unguarded_);
    for (const auto& [key, sub] : props.items()) {
      FOLIO_ASSIGN_OR_RETURN(Expr v,
                             Visit(sub, ptr + "/properties/" + EscapeToken(key), depth + 1));
      const bool req = std::find(required.begin(), required.end(), key) != required.end();
      if (!v) {
        if (req) return Expr();
        continue;
      }
      members.push_back({Seq({Literal(JsonText(Json(key))), Colon(), *v}), req});
    }
    if (additional.is_boolean()) {
      if (additional.get<bool>()) extra = Use("value");
    } else {
      FOLIO_ASSIGN_OR_RETURN(extra, Visit(additional, ptr + "/additionalProperties", depth + 1));
    }
  }
  std::vector<std::string> declared;
  for (const auto& [key, sub] : props.items()) declared.push_back(key);
  for (const std::string& key : required) {
    if (!props.contains(key)) declared.push_back(key);
  }
  std::optional<PatternMembers> patterned;
  if (s.contains("patternProperties")) {
    ClearedScope guarded(&unguarded_);
    const bool closed = additional.is_boolean() && !additional.get<bool>();
    FOLIO_ASSIGN_OR_RETURN(patterned, VisitPatternProperties(s, declared, closed, ptr, depth));
    if (patterned) extra = patterned->value;
  }
  // Required keys that are not declared are additional properties, placed
  // after the declared ones (a key no pattern matches, with patterns, has
  // no schema left: additionalProperties is false).
  for (const std::string& key : required) {
    if (props.contains(key)) continue;
    if (!extra || patterned) return Expr();
    members.push_back({Seq({Literal(JsonText(Json(key))), Colon(), *extra}), true});
  }
  const uint64_t n = members.size();
  const uint64_t n_required = static_cast<uint64_t>(
      std::count_if(members.begin(), members.end(), [](const Member& m) { return m.required; }));
  std::string extra_kv;
  if (extra) {
    extra_kv = Seq({patterned ? patterned->key : AdditionalKey(declared, ptr), Colon(), *extra});
  }
  if (max_props && *max_props < n_required) return Expr();
  if (min_props && *min_props > n && !extra) return Expr();
  if (min_props && max_props && *min_props > *max_props) return Expr();
  const bool counts_hold =
      (!min_props || *min_props <= n_required) && (!max_props || (!extra && *max_props >= n));
  if (!counts_hold && n > 0) {
    std::vector<std::string> kvs;
    std::vector<bool> req;
    for (const Member& m : members) {
      kvs.push_back(m.kv);
      req.push_back(m.required);
    }
    // At least max(1, minProperties) members, then the empty object if
    // minProperties allows it.
    FOLIO_ASSIGN_OR_RETURN(
        Expr counted, CountedMembers(kvs, req, extra_kv,
                                     std::max<uint64_t>(min_props.value_or(0), 1), max_props, ptr));
    const bool empty_ok = min_props.value_or(0) == 0 && n_required == 0;
    if (!counted) {
      if (!empty_ok) return Expr();
      return Expr(NodeRule(ptr, Seq({"\"{\"", Ws(), "\"}\""})));
    }
    if (!empty_ok) return Expr(NodeRule(ptr, Seq({"\"{\"", Ws(), *counted, Ws(), "\"}\""})));
    return Expr(NodeRule(ptr, Seq({"\"{\"", Ws(), "(", *counted, Ws(), ")? \"}\""})));
  }
  if (!counts_hold) {
    // Only additional properties: a bounded repetition.
    FOLIO_RETURN_IF_ERROR(CheckRepeat(max_props, "maxProperties", ptr));
    FOLIO_RETURN_IF_ERROR(CheckRepeat(min_props, "minProperties", ptr));
    const uint64_t lo = min_props.value_or(0);
    if (max_props && *max_props == 0) return Expr(NodeRule(ptr, Seq({"\"{\"", Ws(), "\"}\""})));
    std::optional<uint64_t> rest_hi;
    if (max_props) rest_hi = *max_props - 1;
    const std::string inner =
        Seq({extra_kv, RepeatedGroup(Seq({Comma(), extra_kv}), lo > 0 ? lo - 1 : 0, rest_hi)});
    if (lo > 0) return Expr(NodeRule(ptr, Seq({"\"{\"", Ws(), inner, Ws(), "\"}\""})));
    return Expr(NodeRule(ptr, Seq({"\"{\"", Ws(), "(", inner, Ws(), ")? \"}\""})));
  }
  // Members in declared order, any subset of the optional ones: tail[i] is
  // the members from i on after some member was written (so each starts
  // with a comma); the first member written is one of the optional ones
  // before the first required one, or that required one.
  uint64_t first_required = n;
  for (uint64_t i = 0; i < n; ++i) {
    if (members[i].required) {
      first_required = i;
      break;
    }
  }
  std::vector<std::string> tail(n + 1);
  tail[n] = extra ? "( " + Seq({Comma(), extra_kv}) + " )*" : "";
  for (uint64_t i = n; i-- > 1;) {
    const std::string piece = Seq({Comma(), members[i].kv});
    std::string body =
        members[i].required ? Seq({piece, tail[i + 1]}) : Seq({"( " + piece + " )?", tail[i + 1]});
    // Named by both tail[i - 1] and the first-member alternatives.
    if (i >= 2 && i <= first_required + 1) {
      body = AddRule(NameFromPointer(ptr) + "-tail-" + std::to_string(i), body);
    }
    tail[i] = body;
  }
  std::vector<std::string> firsts;
  for (uint64_t j = 0; j < n && j <= first_required; ++j) {
    firsts.push_back(Seq({members[j].kv, tail[j + 1]}));
  }
  if (first_required == n && extra) firsts.push_back(Seq({extra_kv, tail[n]}));
  if (firsts.empty()) return Expr(NodeRule(ptr, Seq({"\"{\"", Ws(), "\"}\""})));
  const std::string inner = firsts.size() == 1 ? firsts[0] : "( " + Alternatives(firsts) + " )";
  if (first_required < n) return Expr(NodeRule(ptr, Seq({"\"{\"", Ws(), inner, Ws(), "\"}\""})));
  return Expr(NodeRule(ptr, Seq({"\"{\"", Ws(), "(", inner, Ws(), ")? \"}\""})));
}

// Members in declared order (kvs, required where req) and then
// additional ones (extra_kv, "" for none), at least `lo` (>= 1) and at most
// `hi` of them in all. R(i, c): the members from i on when c were written
// before (c counts exactly up to hi; without hi it saturates at lo), so a
// member after the first starts with a comma.
Result<Expr> Converter::CountedMembers(const std::vector<std::string>& kvs,
                                       const std::vector<bool>& req, const std::string& extra_kv,
                                       uint64_t lo, std::optional<uint64_t> hi,
                                       const std::string& ptr) {
  constexpr uint64_t kMaxCount = 64;
  const uint64_t cap = hi ? *hi : lo;
  if (cap > kMaxCount) {
    return Status::Unimplemented("minProperties/maxProperties above " + std::to_string(kMaxCount) +
                                 " together with properties or required at " + ptr);
  }
  const size_t n = kvs.size();
  // r[i][c]: nullopt = impossible; "" = only the empty sequence.
  std::vector<std::vector<Expr>> r(n + 1, std::vector<Expr>(cap + 1));
  for (uint64_t c = 0; c <= cap; ++c) {
    const uint64_t need = lo > c ? lo - c : 0;
    std::optional<uint64_t> room;
    if (hi) room = *hi - c;
    if (extra_kv.empty()) {
      if (need == 0) r[n][c] = "";
      continue;
    }
    if (room && *room == 0) {
      if (need == 0) r[n][c] = "";
      continue;
    }
    if (c > 0) {
      r[n][c] = RepeatedGroup(Seq({Comma(), extra_kv}), need, room);
      continue;
    }
    std::optional<uint64_t> more;
    if (room) more = *room - 1;
    std::string e =
        Seq({extra_kv, RepeatedGroup(Seq({Comma(), extra_kv}), need > 0 ? need - 1 : 0, more)});
    r[n][c] = need > 0 ? e : "( " + e + " )?";
  }
  const std::string base = NameFromPointer(ptr) + "-count";
  for (size_t i = n; i-- > 0;) {
    for (uint64_t c = 0; c <= cap; ++c) {
      std::vector<std::string> alts;
      bool empty_alt = false;
      if (!hi || c + 1 <= *hi) {
        const uint64_t next = hi ? c + 1 : std::min(c + 1, lo);
        if (const Expr& t = r[i + 1][next]; t) {
          alts.push_back(Seq({c > 0 ? Comma() : "", kvs[i], *t}));
        }
      }
      if (!req[i] && r[i + 1][c]) {
        if (r[i + 1][c]->empty()) {
          empty_alt = true;
        } else {
          alts.push_back(*r[i + 1][c]);
        }
      }
      if (alts.empty()) {
        if (empty_alt) r[i][c] = "";
        continue;
      }
      std::string body = alts.size() == 1 ? alts[0] : "( " + Alternatives(alts) + " )";
      if (empty_alt) body = "( " + body + " )?";
      r[i][c] =
          i == 0 ? body : AddRule(base + "-" + std::to_string(i) + "-" + std::to_string(c), body);
    }
  }
  if (!r[0][0] || r[0][0]->empty()) return Expr();
  return r[0][0];
}

Result<std::optional<Converter::PatternMembers>> Converter::VisitPatternProperties(
    const Json& s, const std::vector<std::string>& declared, bool closed, const std::string& ptr,
    uint64_t depth) {
  const Json& pp = s["patternProperties"];
  const std::string at = ptr + "/patternProperties";
  if (!pp.is_object())
    return Status::InvalidArgument("patternProperties must be an object at " + ptr);
  std::vector<std::pair<std::string, const Json*>> entries;
  for (const auto& [pattern, sub] : pp.items()) {
    // Other keys take any value: a pattern whose schema does too adds nothing.
    const bool any_value =
        (sub.is_boolean() && sub.get<bool>()) || (sub.is_object() && !HasConstraints(sub, {}));
    if (!closed && any_value) continue;
    entries.emplace_back(pattern, &sub);
  }
  if (entries.empty()) return std::optional<PatternMembers>();
  if (!closed) {
    return Status::Unimplemented("patternProperties at " + ptr +
                                 " (supported with additionalProperties false, or where each "
                                 "pattern's schema takes any value)");
  }
  std::vector<std::string> keys;
  for (const auto& [pattern, sub] : entries) {
    if (*sub != *entries[0].second) {
      return Status::Unimplemented("patternProperties with differing schemas at " + ptr);
    }
    RegexOptions ro;
    ro.search = true;
    ro.json_string = true;
    Result<std::string> re = RegexToGbnf(pattern, ro);
    if (!re.ok()) return re.status().WithContext("patternProperties at " + at);
    // Each declared key's content (as JSON writes it, between the quotes)
    // against the pattern, compiled once.
    FOLIO_ASSIGN_OR_RETURN(std::shared_ptr<const Grammar> matcher,
                           Grammar::FromGbnf("root ::= " + *re));
    for (const std::string& key : declared) {
      const std::string text = JsonText(Json(key));
      if (matcher->Matches(text.substr(1, text.size() - 2))) {
        return Status::Unimplemented("patternProperties at " + ptr + ": the declared key " + text +
                                     " matches the pattern " + JsonText(Json(pattern)) +
                                     " (a key under both is not supported)");
      }
    }
    keys.push_back("( " + *re + " )");
  }
  FOLIO_ASSIGN_OR_RETURN(
      Expr value, Visit(*entries[0].second, at + "/" + EscapeToken(entries[0].first), depth + 1));
  return std::optional<PatternMembers>(
      PatternMembers{Seq({kQuote, "( " + Alternatives(keys) + " )", kQuote}), value});
}

// The key of an additional property: a JSON string that is none of the
// declared keys (so a declared property cannot come back as an additional
// one with another value), written without escapes when there are
// declared keys (an escape could spell a declared key). A trie of the
// declared keys: at each node the string may end (unless the node spells
// a declared key), go on with a child's character, or leave the trie with
// any other character.
std::string Converter::AdditionalKey(const std::vector<std::string>& declared,
                                     const std::string& ptr) {
  if (declared.empty()) return Use("string");
  struct Node {
    std::map<std::string, size_t> children;  // a code point's UTF-8 -> node
    bool terminal = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& key : declared) {
    const bool needs_escape = std::any_of(key.begin(), key.end(), [](char c) {
      return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20;
    });
    if (needs_escape) continue;  // no unescaped key can equal it
    size_t node = 0;
    for (size_t i = 0; i < key.size();) {
      size_t len = utf8::ClassifyLead(static_cast<unsigned char>(key[i])).len;
      if (len == 0 || i + len > key.size()) len = 1;
      const std::string cp = key.substr(i, len);
      i += len;
      auto it = trie[node].children.find(cp);
      if (it == trie[node].children.end()) {
        trie.push_back({});
        it = trie[node].children.emplace(cp, trie.size() - 1).first;
      }
      node = it->second;
    }
    trie[node].terminal = true;
  }
  const std::string base = NameFromPointer(ptr) + "-key";
  Use("key-char");
  // Rules from the leaves up, so each names rules already made.
  std::vector<std::string> names(trie.size());
  for (size_t i = trie.size(); i-- > 0;) {
    std::vector<std::string> alts;
    if (!trie[i].terminal) alts.push_back(kQuote);
    std::string others = "[^\"\\\\\\x00-\\x1F";
    for (const auto& [cp, child] : trie[i].children) {
      alts.push_back(Seq({Literal(cp), names[child]}));
      others += ClassMember(cp);
    }
    alts.push_back(others + "] key-char* " + kQuote);
    names[i] = AddRule(base + "-" + std::to_string(i), Alternatives(alts));
  }
  return AddRule(base, Seq({kQuote, names[0]}));
}

// ---- Arrays ----

Result<Expr> Converter::VisitArray(const Json& s, const std::string& ptr, uint64_t depth) {
  std::vector<std::pair<const Json*, std::string>> prefix;
  const Json any = Json(true);
  const Json* rest = &any;
  std::string rest_ptr = ptr + "/items";
  const bool items_list = s.contains("items") && s["items"].is_array();
  if (items_list) {
    if (s.contains("prefixItems")) {
      return Status::InvalidArgument("items as an array together with prefixItems at " + ptr);
    }
    for (size_t i = 0; i < s["items"].size(); ++i) {
      prefix.emplace_back(&s["items"][i], ptr + "/items/" + std::to_string(i));
    }
    if (s.contains("additionalItems")) rest = &s["additionalItems"];
    rest_ptr = ptr + "/additionalItems";
  } else {
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) {
        return Status::InvalidArgument("prefixItems must be an array at " + ptr);
      }
      for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
        prefix.emplace_back(&s["prefixItems"][i], ptr + "/prefixItems/" + std::to_string(i));
      }
    }
    if (s.contains("items")) rest = &s["items"];
  }
  if (s.contains("uniqueItems")) {
    if (!s["uniqueItems"].is_boolean()) {
      return Status::InvalidArgument("uniqueItems must be a boolean at " + ptr);
    }
    if (s["uniqueItems"].get<bool>()) {
      return Status::Unimplemented("uniqueItems true at " + ptr +
                                   " (a grammar cannot compare items)");
    }
  }
  FOLIO_ASSIGN_OR_RETURN(std::optional<uint64_t> min_items, Count(s, "minItems", ptr));
  FOLIO_ASSIGN_OR_RETURN(std::optional<uint64_t> max_items, Count(s, "maxItems", ptr));
  const uint64_t lo = min_items.value_or(0);

  std::vector<std::string> items;
  Expr rest_expr;
  {
    ClearedScope guarded(&unguarded_);  // items are inside the brackets
    for (const auto& [schema, at] : prefix) {
      if (max_items && items.size() >= *max_items) break;
      FOLIO_ASSIGN_OR_RETURN(Expr e, Visit(*schema, at, depth + 1));
      if (!e) break;  // no item can stand here: the array ends before it
      items.push_back(*e);
    }
    if (items.size() == prefix.size() && (!max_items || *max_items > items.size())) {
      FOLIO_ASSIGN_OR_RETURN(rest_expr, Visit(*rest, rest_ptr, depth + 1));
    }
  }
  const uint64_t k = items.size();
  std::optional<uint64_t> max_len = rest_expr ? max_items : std::optional<uint64_t>(k);
  if (max_len && lo > *max_len) return Expr();
  if (max_len && *max_len == 0) return Expr(NodeRule(ptr, Seq({"\"[\"", Ws(), "\"]\""})));
  FOLIO_RETURN_IF_ERROR(CheckRepeat(max_items, "maxItems", ptr));
  FOLIO_RETURN_IF_ERROR(CheckRepeat(min_items, "minItems", ptr));
  // The items, at least one (the empty array is handled outside).
  std::string elements;
  if (k == 0) {
    std::optional<uint64_t> more_hi;
    if (max_len) more_hi = *max_len - 1;
    elements =
        Seq({*rest_expr, RepeatedGroup(Seq({Comma(), *rest_expr}), lo > 0 ? lo - 1 : 0, more_hi)});
  } else {
    std::string cur;
    if (rest_expr && (!max_len || *max_len > k)) {
      std::optional<uint64_t> more_hi;
      if (max_len) more_hi = *max_len - k;
      cur = RepeatedGroup(Seq({Comma(), *rest_expr}), lo > k ? lo - k : 0, more_hi);
    }
    for (uint64_t i = k; i-- > 0;) {
      cur = Seq({i > 0 ? Comma() : "", items[i], cur});
      if (i >= std::max<uint64_t>(lo, 1)) cur = "( " + cur + " )?";
    }
    elements = cur;
  }
  if (lo > 0) return Expr(NodeRule(ptr, Seq({"\"[\"", Ws(), elements, Ws(), "\"]\""})));
  return Expr(NodeRule(ptr, Seq({"\"[\"", Ws(), "(", elements, Ws(), ")? \"]\""})));
}

}  // namespace folio::grammar::json_schema_internal
