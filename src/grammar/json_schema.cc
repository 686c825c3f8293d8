// JSON Schema to GBNF: a walk over the schema that emits one rule per
// schema node that needs one (named from its JSON pointer), $refs as rule
// references (so recursive schemas work), and the shared primitive rules
// (value, object, string, ..., and the format rules) only when used.
// Numbers, strings, objects and arrays are in json_schema_types.cc.
#include "folio/grammar/json_schema.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "folio/core/check.h"
#include "grammar/json_schema_converter.h"

namespace folio::grammar::json_schema_internal {

std::string Literal(std::string_view bytes) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out = "\"";
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (b < 0x20 || b == 0x7F) {
          out += "\\x";
          out += kHex[b >> 4];
          out += kHex[b & 15];
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string JsonText(const Json& v) {
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string EscapeToken(std::string_view token) {
  std::string out;
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string NameFromPointer(std::string_view ptr) {
  std::string out;
  size_t pos = ptr.find('/');
  while (pos != std::string_view::npos) {
    size_t next = ptr.find('/', pos + 1);
    std::string_view token = ptr.substr(
        pos + 1, next == std::string_view::npos ? std::string_view::npos : next - pos - 1);
    pos = next;
    if (token == "properties" || token == "$defs" || token == "definitions") continue;
    if (!out.empty()) out += '-';
    for (char c : token) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      if (ok) {
        out += c;
      } else if (!out.empty() && out.back() != '-') {
        out += '-';
      }
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  if (out.size() > 48) out = out.substr(out.size() - 48);
  while (!out.empty() && out.front() == '-') out.erase(0, 1);
  return out.empty() ? "root" : out;
}

std::string Repeat(uint64_t lo, std::optional<uint64_t> hi) {
  if (!hi) return lo == 0 ? "*" : (lo == 1 ? "+" : "{" + std::to_string(lo) + ",}");
  if (lo == 0 && *hi == 1) return "?";
  if (lo == *hi) return "{" + std::to_string(lo) + "}";
  return "{" + std::to_string(lo) + "," + std::to_string(*hi) + "}";
}

std::string RepeatedGroup(const std::string& piece, uint64_t lo, std::optional<uint64_t> hi) {
  if (hi && *hi == 0) return "";
  return "( " + piece + " )" + Repeat(lo, hi);
}

std::string Alternatives(const std::vector<std::string>& alts) {
  std::string out;
  for (const std::string& a : alts) {
    if (!out.empty()) out += " | ";
    out += a;
  }
  return out;
}

Result<std::string> Converter::Run() {
  ref_rules_["#"] = "root";
  in_progress_.insert("#");
  unguarded_.insert("#");
  FOLIO_ASSIGN_OR_RETURN(Expr root, Visit(root_, "#", 0));
  if (!root) return Status::Unimplemented("the schema at # matches no instance");
  std::string out = Render(*root == "root" && root_body_ ? *root_body_ : *root);
  if (out.size() > options_.max_output_bytes) {
    return Status::ResourceExhausted("the grammar for the schema is " + std::to_string(out.size()) +
                                     " bytes, more than max_output_bytes (" +
                                     std::to_string(options_.max_output_bytes) + ")");
  }
  return out;
}

std::string Converter::AddRule(const std::string& hint, const std::string& body) {
  std::string name = hint;
  for (int n = 2;; ++n) {
    auto it = rule_index_.find(name);
    if (it == rule_index_.end() && reserved_.count(name) == 0) break;
    if (it != rule_index_.end() && rules_[it->second].second == body) return name;
    name = hint + "-" + std::to_string(n);
  }
  rule_index_[name] = rules_.size();
  rules_.emplace_back(name, body);
  bytes_ += name.size() + body.size() + 6;
  return name;
}

std::string Converter::NodeRule(const std::string& ptr, const std::string& body) {
  if (ptr == "#" && !root_body_) {
    root_body_ = body;
    return "root";
  }
  auto it = ref_rules_.find(ptr);
  if (it != ref_rules_.end() && in_progress_.count(ptr) > 0 && it->second != "root") {
    std::string& slot = rules_[rule_index_.at(it->second)].second;
    if (slot.empty()) {
      slot = body;
      bytes_ += body.size();
      return it->second;
    }
  }
  return AddRule(NameFromPointer(ptr), body);
}

std::string Converter::Render(const std::string& root_body) {
  std::string out = "root ::= " + root_body + "\n";
  for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
  // Library rules the output names, and the ones they name.
  std::map<std::string, LibraryRule> library = LibraryRules();
  std::set<std::string> needed;
  std::vector<std::string> stack(used_.begin(), used_.end());
  while (!stack.empty()) {
    std::string name = stack.back();
    stack.pop_back();
    if (!needed.insert(name).second) continue;
    for (const std::string& dep : library.at(name).deps) stack.push_back(dep);
  }
  for (const auto& [name, rule] : library) {
    if (needed.count(name) > 0) out += name + " ::= " + rule.body + "\n";
  }
  return out;
}

std::map<std::string, LibraryRule> Converter::LibraryRules() const {
  std::map<std::string, LibraryRule> lib;
  const bool flex = options_.whitespace_flexible;
  const std::string ws = flex ? "ws" : "";
  std::vector<std::string> ws_dep;
  if (flex) ws_dep.push_back("ws");
  const std::string comma =
      flex ? "ws \",\" ws"
           : (options_.item_separator.empty() ? "" : Literal(options_.item_separator));
  const std::string colon =
      flex ? "ws \":\" ws"
           : (options_.key_separator.empty() ? "" : Literal(options_.key_separator));
  auto add = [&lib](std::string name, std::string body, std::vector<std::string> deps) {
    lib[name] = LibraryRule{name, std::move(body), std::move(deps)};
  };
  if (options_.max_indent == 0) {
    add("ws", "( \" \" | \"\\n\" )?", {});
  } else {
    add("ws", "( \" \" | \"\\n\" [ \\t]{0," + std::to_string(options_.max_indent) + "} )?", {});
  }
  add("value", "object | array | string | number | boolean | null",
      {"object", "array", "string", "number", "boolean", "null"});
  std::vector<std::string> deps = ws_dep;
  deps.push_back("member");
  add("object", Seq({"\"{\"", ws, "( member ( " + Seq({comma, "member"}) + " )*", ws, ")? \"}\""}),
      deps);
  deps = ws_dep;
  deps.insert(deps.end(), {"string", "value"});
  add("member", Seq({"string", colon, "value"}), deps);
  deps = ws_dep;
  deps.push_back("value");
  add("array", Seq({"\"[\"", ws, "( value ( " + Seq({comma, "value"}) + " )*", ws, ")? \"]\""}),
      deps);
  add("string", "\"\\\"\" char* \"\\\"\"", {"char"});
  add("char", R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))", {});
  add("key-char", R"([^"\\\x00-\x1F])", {});
  add("number", R"("-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [+\-]? [0-9]+ )?)", {});
  add("integer", R"("-"? ( "0" | [1-9] [0-9]* ))", {});
  add("boolean", R"("true" | "false")", {});
  add("null", R"("null")", {});
  for (const LibraryRule& r : FormatRules()) lib[r.name] = r;
  return lib;
}

Status Converter::CheckKeywords(const Json& s, const std::string& ptr) {
  for (const auto& [key, value] : s.items()) {
    if (IsIgnoredKeyword(key) || IsEnforcedKeyword(key)) continue;
    return Status::Unimplemented("unsupported keyword \"" + key + "\" at " + ptr);
  }
  return Status::Ok();
}

Result<Expr> Converter::Visit(const Json& s, const std::string& ptr, uint64_t depth) {
  if (depth > options_.max_depth) {
    return Status::ResourceExhausted("schema nested deeper than max_depth (" +
                                     std::to_string(options_.max_depth) + ") at " + ptr);
  }
  if (bytes_ > options_.max_output_bytes) {
    return Status::ResourceExhausted("the grammar passed max_output_bytes (" +
                                     std::to_string(options_.max_output_bytes) + ") at " + ptr);
  }
  if (s.is_boolean()) return s.get<bool>() ? Expr(Use("value")) : Expr();
  if (!s.is_object()) {
    return Status::InvalidArgument("a schema must be an object or a boolean at " + ptr);
  }
  FOLIO_RETURN_IF_ERROR(CheckKeywords(s, ptr));
  if (s.contains("$ref")) {
    if (!HasConstraints(s, {"$ref"})) return VisitRef(s["$ref"], ptr, depth);
    // Draft 2019+: the target and the siblings both apply.
    FOLIO_ASSIGN_OR_RETURN(Json merged, MergeSchemas(root_, Json::object(), s, ptr));
    return Visit(merged, ptr, depth + 1);
  }
  if (s.contains("allOf")) return VisitAllOf(s, ptr, depth);
  if (s.contains("anyOf") || s.contains("oneOf")) return VisitAnyOf(s, ptr, depth);
  if (s.contains("enum") || s.contains("const")) return VisitEnum(s, ptr);
  return VisitTypes(s, ptr, depth);
}

Result<Expr> Converter::VisitRef(const Json& ref, const std::string& ptr, uint64_t depth) {
  FOLIO_ASSIGN_OR_RETURN(ResolvedRef r, ResolveRef(root_, ref, ptr + "/$ref"));
  auto it = ref_rules_.find(r.pointer);
  if (it != ref_rules_.end()) {
    if (in_progress_.count(r.pointer) > 0 && unguarded_.count(r.pointer) > 0) {
      return Status::InvalidArgument("$ref at " + ptr + " to " + r.pointer +
                                     " is a cycle that matches nothing before recursing");
    }
    return Expr(it->second);
  }
  const std::string name = AddRule(NameFromPointer(r.pointer), "");
  ref_rules_[r.pointer] = name;
  in_progress_.insert(r.pointer);
  unguarded_.insert(r.pointer);
  FOLIO_ASSIGN_OR_RETURN(Expr target, Visit(*r.target, r.pointer, depth + 1));
  unguarded_.erase(r.pointer);
  in_progress_.erase(r.pointer);
  if (!target) {
    return Status::Unimplemented("$ref at " + ptr + " to " + r.pointer +
                                 " matches no instance (a false schema)");
  }
  std::string& slot = rules_[rule_index_.at(name)].second;
  if (slot.empty()) {
    slot = *target;
    bytes_ += target->size();
  } else {
    FOLIO_CHECK(*target == name, "rule for ", r.pointer, " claimed twice");
  }
  return Expr(name);
}

Result<Expr> Converter::VisitAllOf(const Json& s, const std::string& ptr, uint64_t depth) {
  const Json& parts = s["allOf"];
  if (!parts.is_array() || parts.empty()) {
    return Status::InvalidArgument("allOf must be a non-empty array at " + ptr);
  }
  if (parts.size() == 1 && !HasConstraints(s, {"allOf"})) {
    return Visit(parts[0], ptr + "/allOf/0", depth + 1);
  }
  Json merged = WithoutKey(s, "allOf");
  for (size_t i = 0; i < parts.size(); ++i) {
    FOLIO_ASSIGN_OR_RETURN(
        merged, MergeSchemas(root_, merged, parts[i], ptr + "/allOf/" + std::to_string(i)));
    if (merged.is_boolean() && !merged.get<bool>()) return Expr();
  }
  return Visit(merged, ptr, depth + 1);
}

Result<Expr> Converter::VisitAnyOf(const Json& s, const std::string& ptr, uint64_t depth) {
  if (s.contains("anyOf") && s.contains("oneOf")) {
    return Status::Unimplemented("anyOf together with oneOf at " + ptr);
  }
  const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
  const Json& alts = s[key];
  if (!alts.is_array() || alts.empty()) {
    return Status::InvalidArgument(std::string(key) + " must be a non-empty array at " + ptr);
  }
  const Json siblings = WithoutKey(s, key);
  const bool merge = HasConstraints(siblings, {});
  if (std::string_view(key) == "oneOf") {
    FOLIO_ASSIGN_OR_RETURN(std::optional<std::vector<Json>> variants,
                           OneOfOfRequiredSets(alts, siblings, ptr));
    if (variants) return VisitAlternatives(*variants, ptr, key, depth);
  }
  std::vector<Json> merged;
  for (size_t i = 0; i < alts.size(); ++i) {
    const std::string at = ptr + "/" + key + "/" + std::to_string(i);
    if (merge) {
      FOLIO_ASSIGN_OR_RETURN(Json m, MergeSchemas(root_, siblings, alts[i], at));
      merged.push_back(std::move(m));
    } else {
      merged.push_back(alts[i]);
    }
  }
  if (std::string_view(key) == "oneOf") {
    for (size_t i = 0; i < merged.size(); ++i) {
      for (size_t j = i + 1; j < merged.size(); ++j) {
        if (!ProvablyDisjoint(root_, merged[i], merged[j])) {
          return Status::Unimplemented(
              "oneOf at " + ptr + ": alternatives " + std::to_string(i) + " and " +
              std::to_string(j) +
              " are not provably disjoint (different types, different const/enum values, a "
              "required property with different const/enum values, or a key one requires and "
              "the other forbids), so a grammar cannot enforce 'exactly one'");
        }
      }
    }
  }
  return VisitAlternatives(merged, ptr, key, depth);
}

Result<Expr> Converter::VisitAlternatives(const std::vector<Json>& alts, const std::string& ptr,
                                          const char* key, uint64_t depth) {
  std::vector<std::string> out;
  for (size_t i = 0; i < alts.size(); ++i) {
    FOLIO_ASSIGN_OR_RETURN(Expr e,
                           Visit(alts[i], ptr + "/" + key + "/" + std::to_string(i), depth + 1));
    if (e && std::find(out.begin(), out.end(), *e) == out.end()) out.push_back(*e);
  }
  if (out.empty()) return Expr();
  if (out.size() == 1) return Expr(out[0]);
  return Expr(NodeRule(ptr, Alternatives(out)));
}

Result<std::optional<std::vector<Json>>> Converter::OneOfOfRequiredSets(const Json& alts,
                                                                        const Json& siblings,
                                                                        const std::string& ptr) {
  constexpr size_t kMaxOneOfVariants = 64;
  if (alts.size() < 2) return std::optional<std::vector<Json>>();
  std::vector<std::vector<std::string>> required;
  for (const Json& alt : alts) {
    if (!alt.is_object() || !alt.contains("required") || !alt["required"].is_array() ||
        HasConstraints(alt, {"required"})) {
      return std::optional<std::vector<Json>>();
    }
    std::vector<std::string> keys;
    for (const Json& k : alt["required"]) {
      if (!k.is_string()) return std::optional<std::vector<Json>>();
      keys.push_back(k.get<std::string>());
    }
    required.push_back(std::move(keys));
  }
  auto has = [](const std::vector<std::string>& v, const std::string& k) {
    return std::find(v.begin(), v.end(), k) != v.end();
  };
  std::vector<Json> variants;
  for (size_t i = 0; i < alts.size(); ++i) {
    // For each other alternative, the keys it requires that i does not: one
    // of them must be absent. An empty set: every instance of i is also one
    // of j, so i contributes nothing.
    std::vector<std::vector<std::string>> choices;
    bool empty = false;
    for (size_t j = 0; j < alts.size() && !empty; ++j) {
      if (j == i) continue;
      std::vector<std::string> d;
      for (const std::string& k : required[j]) {
        if (!has(required[i], k)) d.push_back(k);
      }
      empty = d.empty();
      choices.push_back(std::move(d));
    }
    if (empty) continue;
    // Every pick of one key per set, as the set of keys forbidden.
    std::vector<std::vector<std::string>> picks = {{}};
    for (const std::vector<std::string>& d : choices) {
      std::vector<std::vector<std::string>> next;
      for (const std::vector<std::string>& p : picks) {
        for (const std::string& k : d) {
          std::vector<std::string> q = p;
          if (!has(q, k)) q.push_back(k);
          std::sort(q.begin(), q.end());
          if (std::find(next.begin(), next.end(), q) == next.end()) next.push_back(std::move(q));
        }
      }
      picks = std::move(next);
      if (variants.size() + picks.size() > kMaxOneOfVariants) {
        return std::optional<std::vector<Json>>();
      }
    }
    for (const std::vector<std::string>& forbidden : picks) {
      Json part = Json::object();
      part["required"] = alts[i]["required"];
      part["properties"] = Json::object();
      for (const std::string& k : forbidden) part["properties"][k] = false;
      FOLIO_ASSIGN_OR_RETURN(
          Json m, MergeSchemas(root_, siblings, part, ptr + "/oneOf/" + std::to_string(i)));
      variants.push_back(std::move(m));
    }
  }
  return std::optional<std::vector<Json>>(std::move(variants));
}

Result<uint32_t> Converter::Types(const Json& s, const std::string& ptr) {
  if (!s.contains("type")) {
    const uint32_t implied = ImpliedTypes(s);
    return implied != 0 ? implied : kAllTypes;
  }
  const Json& t = s["type"];
  const Json list = t.is_array() ? t : Json::array({t});
  uint32_t bits = 0;
  for (const Json& name : list) {
    const uint32_t b = name.is_string() ? TypeBitsForName(name.get<std::string>()) : 0;
    if (b == 0) return Status::InvalidArgument("unknown type " + JsonText(name) + " at " + ptr);
    bits |= b;
  }
  return bits;
}

void Converter::AppendValue(const Json& v, std::string* lit, std::vector<std::string>* pieces) {
  auto ws = [&]() {
    if (!options_.whitespace_flexible) return;
    if (!lit->empty()) pieces->push_back(Literal(*lit));
    lit->clear();
    pieces->push_back(Use("ws"));
  };
  auto sep = [&](const std::string& strict, const char* flex) {
    if (options_.whitespace_flexible) {
      ws();
      *lit += flex;
      ws();
    } else {
      *lit += strict;
    }
  };
  if (v.is_object() || v.is_array()) {
    const bool obj = v.is_object();
    *lit += obj ? "{" : "[";
    if (!v.empty()) ws();
    bool first = true;
    for (const auto& [key, item] : v.items()) {
      if (!first) sep(options_.item_separator, ",");
      first = false;
      if (obj) {
        *lit += JsonText(Json(key));
        sep(options_.key_separator, ":");
      }
      AppendValue(item, lit, pieces);
    }
    if (!v.empty()) ws();
    *lit += obj ? "}" : "]";
    return;
  }
  *lit += JsonText(v);
}

std::string Converter::ValueExpr(const Json& v) {
  std::string lit;
  std::vector<std::string> pieces;
  AppendValue(v, &lit, &pieces);
  if (!lit.empty()) pieces.push_back(Literal(lit));
  std::string out;
  for (const std::string& p : pieces) out = Seq({out, p});
  return out;
}

uint32_t Converter::ValueTypeBits(const Json& v) {
  if (v.is_null()) return kNull;
  if (v.is_boolean()) return kBoolean;
  if (v.is_object()) return kObject;
  if (v.is_array()) return kArray;
  if (v.is_string()) return kString;
  if (v.is_number_float()) {
    const double d = v.get<double>();
    return d == static_cast<double>(static_cast<int64_t>(d)) ? kInteger : kNonInteger;
  }
  return kInteger;
}

Result<Expr> Converter::VisitEnum(const Json& s, const std::string& ptr) {
  if (HasConstraints(s, {"enum", "const", "type"})) {
    for (const auto& [key, value] : s.items()) {
      if (!IsAnnotation(key, value) && key != "enum" && key != "const" && key != "type") {
        return Status::Unimplemented("enum/const together with \"" + key + "\" at " + ptr);
      }
    }
  }
  std::vector<Json> values;
  if (s.contains("enum")) {
    if (!s["enum"].is_array()) return Status::InvalidArgument("enum must be an array at " + ptr);
    for (const Json& v : s["enum"]) {
      if (s.contains("const") && v != s["const"]) continue;
      values.push_back(v);
    }
  } else {
    values.push_back(s["const"]);
  }
  FOLIO_ASSIGN_OR_RETURN(uint32_t types, Types(s, ptr));
  std::vector<std::string> alts;
  for (const Json& v : values) {
    if ((ValueTypeBits(v) & types) == 0) continue;
    std::string e = ValueExpr(v);
    if (std::find(alts.begin(), alts.end(), e) == alts.end()) alts.push_back(e);
    bytes_ += e.size();
    if (bytes_ > options_.max_output_bytes) {
      return Status::ResourceExhausted("the grammar passed max_output_bytes (" +
                                       std::to_string(options_.max_output_bytes) +
                                       ") in the enum at " + ptr);
    }
  }
  if (alts.empty()) return Expr();
  const bool single_literal =
      alts.size() == 1 && (!options_.whitespace_flexible ||
                           !(values[0].is_object() || values[0].is_array()) || values[0].empty());
  if (single_literal) return Expr(alts[0]);
  return Expr(NodeRule(ptr, Alternatives(alts)));
}

Result<Expr> Converter::VisitTypes(const Json& s, const std::string& ptr, uint64_t depth) {
  FOLIO_ASSIGN_OR_RETURN(uint32_t types, Types(s, ptr));
  if (types == kAllTypes && !s.contains("type")) return Expr(Use("value"));
  std::vector<std::string> alts;
  const bool several = (types & (types - 1)) != 0 && types != (kInteger | kNonInteger);
  auto at = [&](const char* type) { return several ? ptr + "/" + type : ptr; };
  auto add = [&](const Expr& e) {
    if (e) alts.push_back(*e);
  };
  if (types & kNull) alts.push_back(Use("null"));
  if (types & kBoolean) alts.push_back(Use("boolean"));
  if (types & (kInteger | kNonInteger)) {
    FOLIO_ASSIGN_OR_RETURN(Expr e, VisitNumber(s, at("number"), (types & kNonInteger) == 0));
    add(e);
  }
  if (types & kString) {
    FOLIO_ASSIGN_OR_RETURN(Expr e, VisitString(s, at("string")));
    add(e);
  }
  if (types & kObject) {
    FOLIO_ASSIGN_OR_RETURN(Expr e, VisitObject(s, at("object"), depth));
    add(e);
  }
  if (types & kArray) {
    FOLIO_ASSIGN_OR_RETURN(Expr e, VisitArray(s, at("array"), depth));
    add(e);
  }
  if (alts.empty()) return Expr();
  if (alts.size() == 1) return Expr(alts[0]);
  return Expr(NodeRule(ptr, Alternatives(alts)));
}

Result<std::optional<uint64_t>> Converter::Count(const Json& s, const char* key,
                                                 const std::string& ptr) {
  if (!s.contains(key)) return std::optional<uint64_t>();
  const Json& v = s[key];
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) {
    return std::optional<uint64_t>(v.get<uint64_t>());
  }
  if (v.is_number_float() && v.get<double>() >= 0 && v.get<double>() < 1e18 &&
      v.get<double>() == static_cast<double>(static_cast<uint64_t>(v.get<double>()))) {
    return std::optional<uint64_t>(static_cast<uint64_t>(v.get<double>()));
  }
  return Status::InvalidArgument(std::string(key) + " must be a non-negative integer at " + ptr);
}

}  // namespace folio::grammar::json_schema_internal

namespace folio::grammar {

Result<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema,
                                     const JsonSchemaOptions& options) {
  json_schema_internal::Converter converter(schema, options);
  return converter.Run();
}

std::string JsonObjectGbnf(const JsonSchemaOptions& options) {
  const json_schema_internal::Json empty = json_schema_internal::Json::object();
  json_schema_internal::Converter converter(empty, options);
  return converter.ObjectOnly();
}

}  // namespace folio::grammar
