// $ref resolution, allOf merging and oneOf disjointness for the JSON
// Schema conversion.
#include <algorithm>
#include <string>
#include <vector>

#include "grammar/json_schema_internal.h"

namespace folio::grammar::json_schema_internal {
namespace {

constexpr int kMaxMergeDepth = 32;

std::string Quote(std::string_view s) {
  std::string out = "\"";  // not "\"" + std::string: GCC 12's -Wrestrict misfires
  out += s;
  out += '"';
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding of a URI fragment; nullopt when malformed.
std::optional<std::string> PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const int hi = HexValue(s[i + 1]);
    const int lo = HexValue(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string EscapePointerToken(std::string_view token) {
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

bool IsKeyword(const Json& s, const char* key) { return s.is_object() && s.contains(key); }

// A schema with its top-level $ref replaced by the target's keywords (the
// intersection of the target and the siblings), for merging.
Result<Json> Inline(const Json& root, const Json& s, std::string_view at, int depth) {
  if (!IsKeyword(s, "$ref")) return s;
  if (depth > kMaxMergeDepth) {
    return Status::Unimplemented("$ref chain too deep to merge at " + std::string(at));
  }
  FOLIO_ASSIGN_OR_RETURN(ResolvedRef r, ResolveRef(root, s["$ref"], at));
  Json rest = s;
  rest.erase("$ref");
  FOLIO_ASSIGN_OR_RETURN(Json target, Inline(root, *r.target, r.pointer, depth + 1));
  return MergeSchemas(root, target, rest, at, depth + 1);
}

// Drops the members that constrain nothing (IsAnnotation).
Json Strip(const Json& s) {
  if (!s.is_object()) return s;
  Json out = Json::object();
  for (const auto& [k, v] : s.items()) {
    if (!IsAnnotation(k, v)) out[k] = v;
  }
  return out;
}

Status CannotMerge(std::string_view keyword, std::string_view at) {
  return Status::Unimplemented("cannot merge differing \"" + std::string(keyword) +
                               "\" keywords (allOf or siblings of $ref/anyOf/oneOf) at " +
                               std::string(at));
}

bool IsTrueSchema(const Json& s) {
  return (s.is_boolean() && s.get<bool>()) || (s.is_object() && s.empty());
}

std::vector<std::string> TypeNames(uint32_t bits) {
  std::vector<std::string> out;
  if (bits & kNull) out.push_back("null");
  if (bits & kBoolean) out.push_back("boolean");
  if (bits & kObject) out.push_back("object");
  if (bits & kArray) out.push_back("array");
  if (bits & kString) out.push_back("string");
  if ((bits & kNonInteger) && (bits & kInteger)) {
    out.push_back("number");
  } else if (bits & kInteger) {
    out.push_back("integer");
  }
  return out;
}

Result<uint32_t> TypeKeywordBits(const Json& type, std::string_view at) {
  uint32_t bits = 0;
  const Json list = type.is_array() ? type : Json::array({type});
  for (const Json& t : list) {
    const uint32_t b = t.is_string() ? TypeBitsForName(t.get<std::string>()) : 0;
    if (b == 0)
      return Status::InvalidArgument("unknown type " + t.dump() + " at " + std::string(at));
    bits |= b;
  }
  return bits;
}

// The JSON type bits of a value.
uint32_t ValueType(const Json& v) {
  if (v.is_null()) return kNull;
  if (v.is_boolean()) return kBoolean;
  if (v.is_object()) return kObject;
  if (v.is_array()) return kArray;
  if (v.is_string()) return kString;
  return kInteger | kNonInteger;  // 1.0 is an integer too (draft 6+)
}

// The types a schema can match (an over-approximation under folio's
// reading), following $refs up to a depth.
uint32_t PossibleTypes(const Json& root, const Json& s, int depth) {
  if (s.is_boolean()) return s.get<bool>() ? kAllTypes : 0;
  if (!s.is_object() || depth > kMaxMergeDepth) return kAllTypes;
  uint32_t bits = kAllTypes;
  if (s.contains("type")) {
    Result<uint32_t> t = TypeKeywordBits(s["type"], "");
    if (t.ok()) bits &= *t;
  } else if (uint32_t implied = ImpliedTypes(s); implied != 0) {
    bits &= implied;
  }
  for (const char* key : {"enum", "const"}) {
    if (!s.contains(key)) continue;
    uint32_t vb = 0;
    if (std::string_view(key) == "const") {
      vb = ValueType(s[key]);
    } else if (s[key].is_array()) {
      for (const Json& v : s[key]) vb |= ValueType(v);
    }
    bits &= vb;
  }
  if (s.contains("$ref")) {
    Result<ResolvedRef> r = ResolveRef(root, s["$ref"], "");
    if (r.ok()) bits &= PossibleTypes(root, *r->target, depth + 1);
  }
  if (s.contains("allOf") && s["allOf"].is_array()) {
    for (const Json& part : s["allOf"]) bits &= PossibleTypes(root, part, depth + 1);
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key) || !s[key].is_array()) continue;
    uint32_t any = 0;
    for (const Json& part : s[key]) any |= PossibleTypes(root, part, depth + 1);
    bits &= any;
  }
  return bits;
}

// The values a schema allows where it lists them (enum / const at its top,
// through $refs); nullopt when it does not.
std::optional<std::vector<Json>> ListedValues(const Json& root, const Json& s, int depth) {
  if (!s.is_object() || depth > kMaxMergeDepth) return std::nullopt;
  if (s.contains("const")) return std::vector<Json>{s["const"]};
  if (s.contains("enum") && s["enum"].is_array()) {
    return std::vector<Json>(s["enum"].begin(), s["enum"].end());
  }
  if (s.contains("$ref")) {
    Result<ResolvedRef> r = ResolveRef(root, s["$ref"], "");
    if (r.ok()) return ListedValues(root, *r.value().target, depth + 1);
  }
  return std::nullopt;
}

bool ValuesDisjoint(const std::vector<Json>& a, const std::vector<Json>& b) {
  for (const Json& x : a) {
    for (const Json& y : b) {
      if (x == y) return false;
    }
  }
  return true;
}

const Json* Resolved(const Json& root, const Json& s) {
  const Json* p = &s;
  for (int i = 0; i < kMaxMergeDepth && IsKeyword(*p, "$ref"); ++i) {
    Result<ResolvedRef> r = ResolveRef(root, (*p)["$ref"], "");
    if (!r.ok()) return p;
    p = r->target;
  }
  return p;
}

bool InRequired(const Json& s, const std::string& key) {
  if (!s.contains("required") || !s["required"].is_array()) return false;
  return std::any_of(s["required"].begin(), s["required"].end(),
                     [&](const Json& k) { return k == key; });
}

// Whether an object schema lets no member have `key`: its schema is false,
// or it is undeclared where additionalProperties is false and no
// patternProperties are.
bool Forbids(const Json& s, const std::string& key) {
  const Json* props =
      s.contains("properties") && s["properties"].is_object() ? &s["properties"] : nullptr;
  if (props != nullptr && props->contains(key)) {
    const Json& v = (*props)[key];
    return v.is_boolean() && !v.get<bool>();
  }
  // (A pattern could still admit the key.)
  return !s.contains("patternProperties") && s.contains("additionalProperties") &&
         s["additionalProperties"].is_boolean() && !s["additionalProperties"].get<bool>();
}

}  // namespace

bool IsEnforcedKeyword(std::string_view key) {
  static const char* const kEnforced[] = {"$ref",
                                          "type",
                                          "enum",
                                          "const",
                                          "anyOf",
                                          "oneOf",
                                          "allOf",
                                          "minLength",
                                          "maxLength",
                                          "pattern",
                                          "format",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum",
                                          "multipleOf",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "patternProperties",
                                          "minProperties",
                                          "maxProperties",
                                          "items",
                                          "prefixItems",
                                          "additionalItems",
                                          "minItems",
                                          "maxItems",
                                          "uniqueItems"};
  return std::any_of(std::begin(kEnforced), std::end(kEnforced),
                     [key](const char* k) { return key == k; });
}

bool IsAnnotation(std::string_view key, const Json& value) {
  return IsIgnoredKeyword(key) ||
         (key == "format" && value.is_string() && !IsStandardFormat(value.get<std::string>()));
}

bool IsIgnoredKeyword(std::string_view key) {
  // Keywords of drafts 3 to 2020-12 that assert something folio does not
  // enforce: refused by name, never ignored.
  static const char* const kUnenforced[] = {"not",
                                            "if",
                                            "then",
                                            "else",
                                            "propertyNames",
                                            "dependencies",
                                            "dependentRequired",
                                            "dependentSchemas",
                                            "contains",
                                            "minContains",
                                            "maxContains",
                                            "unevaluatedItems",
                                            "unevaluatedProperties",
                                            "$dynamicRef",
                                            "$recursiveRef",
                                            "extends",
                                            "disallow",
                                            "divisibleBy"};
  if (IsEnforcedKeyword(key)) return false;
  return std::none_of(std::begin(kUnenforced), std::end(kUnenforced),
                      [key](const char* k) { return key == k; });
}

uint32_t TypeBitsForName(std::string_view name) {
  if (name == "null") return kNull;
  if (name == "boolean") return kBoolean;
  if (name == "object") return kObject;
  if (name == "array") return kArray;
  if (name == "string") return kString;
  if (name == "integer") return kInteger;
  if (name == "number") return kInteger | kNonInteger;
  return 0;
}

uint32_t ImpliedTypes(const Json& s) {
  static const std::pair<const char*, uint32_t> kFamilies[] = {
      {"minLength", kString},
      {"maxLength", kString},
      {"pattern", kString},
      {"format", kString},
      {"minimum", kInteger | kNonInteger},
      {"maximum", kInteger | kNonInteger},
      {"exclusiveMinimum", kInteger | kNonInteger},
      {"exclusiveMaximum", kInteger | kNonInteger},
      {"multipleOf", kInteger | kNonInteger},
      {"properties", kObject},
      {"required", kObject},
      {"additionalProperties", kObject},
      {"patternProperties", kObject},
      {"minProperties", kObject},
      {"maxProperties", kObject},
      {"items", kArray},
      {"prefixItems", kArray},
      {"additionalItems", kArray},
      {"minItems", kArray},
      {"maxItems", kArray},
      {"uniqueItems", kArray},
  };
  uint32_t bits = 0;
  if (!s.is_object()) return bits;
  for (const auto& [key, b] : kFamilies) {
    // An annotation (an unknown format) implies no type.
    if (s.contains(key) && !IsAnnotation(key, s[key])) bits |= b;
  }
  return bits;
}

Result<ResolvedRef> ResolveRef(const Json& root, const Json& ref, std::string_view at) {
  if (!ref.is_string()) {
    return Status::InvalidArgument("$ref must be a string at " + std::string(at));
  }
  std::string text = ref.get<std::string>();
  // A ref naming the root document by its $id is local.
  if (root.is_object() && root.contains("$id") && root["$id"].is_string()) {
    const std::string id = root["$id"].get<std::string>();
    if (!id.empty() && text.compare(0, id.size(), id) == 0 && text.size() > id.size() &&
        text[id.size()] == '#') {
      text = text.substr(id.size());
    }
  }
  if (text.empty() || text[0] != '#') {
    return Status::Unimplemented("remote $ref " + Quote(text) + " at " + std::string(at) +
                                 " (only local \"#...\" references are supported)");
  }
  std::optional<std::string> fragment = PercentDecode(std::string_view(text).substr(1));
  if (!fragment)
    return Status::InvalidArgument("malformed $ref " + Quote(text) + " at " + std::string(at));
  if (!fragment->empty() && (*fragment)[0] != '/') {
    return Status::Unimplemented("$ref to an anchor " + Quote(text) + " at " + std::string(at) +
                                 " (only JSON pointers are supported)");
  }
  const Json* node = &root;
  std::string pointer = "#";
  size_t pos = 0;
  while (pos < fragment->size()) {
    size_t next = fragment->find('/', pos + 1);
    if (next == std::string::npos) next = fragment->size();
    std::string token = fragment->substr(pos + 1, next - pos - 1);
    std::string unescaped;
    for (size_t i = 0; i < token.size(); ++i) {
      if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
        unescaped += token[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        unescaped += token[i];
      }
    }
    const Json* child = nullptr;
    if (node->is_object() && node->contains(unescaped)) {
      child = &(*node)[unescaped];
    } else if (node->is_array() && !unescaped.empty() &&
               unescaped.find_first_not_of("0123456789") == std::string::npos &&
               unescaped.size() < 10 && std::stoull(unescaped) < node->size()) {
      child = &(*node)[std::stoull(unescaped)];
    }
    if (child == nullptr) {
      return Status::InvalidArgument("$ref " + Quote(text) + " at " + std::string(at) +
                                     " resolves nowhere (no " + Quote(unescaped) + " under " +
                                     pointer + ")");
    }
    node = child;
    pointer += "/" + EscapePointerToken(unescaped);
    pos = next;
  }
  return ResolvedRef{node, pointer};
}

Result<Json> MergeSchemas(const Json& root, const Json& a_in, const Json& b_in, std::string_view at,
                          int depth) {
  if (depth > kMaxMergeDepth) {
    return Status::Unimplemented("schemas nested too deep to merge at " + std::string(at));
  }
  if (a_in.is_boolean() || b_in.is_boolean()) {
    if ((a_in.is_boolean() && !a_in.get<bool>()) || (b_in.is_boolean() && !b_in.get<bool>())) {
      return Json(false);
    }
    return a_in.is_boolean() ? Strip(b_in) : Strip(a_in);
  }
  if (!a_in.is_object() || !b_in.is_object()) {
    return Status::InvalidArgument("a schema must be an object or a boolean at " + std::string(at));
  }
  FOLIO_ASSIGN_OR_RETURN(Json a, Inline(root, Strip(a_in), at, depth));
  FOLIO_ASSIGN_OR_RETURN(Json b, Inline(root, Strip(b_in), at, depth));
  if (a.is_boolean() || b.is_boolean()) return MergeSchemas(root, a, b, at, depth + 1);
  // Nested allOf: fold its parts in.
  for (Json* s : {&a, &b}) {
    if (!s->contains("allOf")) continue;
    Json parts = (*s)["allOf"];
    s->erase("allOf");
    if (!parts.is_array())
      return Status::InvalidArgument("allOf must be an array at " + std::string(at));
    for (const Json& part : parts) {
      FOLIO_ASSIGN_OR_RETURN(*s, MergeSchemas(root, *s, part, at, depth + 1));
      if (s->is_boolean()) return Json(false);
    }
  }
  // patternProperties decide which schema a key of the other side meets:
  // merged only where the other side says nothing about members, or the
  // same.
  if (a.contains("patternProperties") || b.contains("patternProperties")) {
    auto about_members = [](const Json& s) {
      return s.contains("properties") || s.contains("additionalProperties") ||
             s.contains("patternProperties");
    };
    bool same = true;
    for (const char* k : {"properties", "additionalProperties", "patternProperties"}) {
      same = same && a.contains(k) == b.contains(k) && (!a.contains(k) || a[k] == b[k]);
    }
    if (about_members(a) && about_members(b) && !same) {
      return CannotMerge("patternProperties", at);
    }
  }
  // additionalProperties of one side applies to the other side's extra
  // properties: exact where neither side has patternProperties (above).
  auto extra = [](const Json& s) -> Json {
    return s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
  };
  const Json a_extra = extra(a);
  const Json b_extra = extra(b);
  // Draft 4's boolean exclusive bounds change what minimum / maximum
  // mean, so differing bounds then do not merge.
  bool draft4_exclusive = false;
  for (const Json* s : {&a, &b}) {
    for (const char* k : {"exclusiveMinimum", "exclusiveMaximum"}) {
      if (s->contains(k) && (*s)[k].is_boolean()) draft4_exclusive = true;
    }
  }
  // Array items: a plain "items" schema on both sides merges; any
  // positional form (prefixItems, items as a list, additionalItems) makes
  // "items" mean "the rest", so then both sides must agree exactly.
  auto positional = [](const Json& s) {
    return s.contains("prefixItems") || s.contains("additionalItems") ||
           (s.contains("items") && s["items"].is_array());
  };
  auto has_item_keywords = [](const Json& s) {
    return s.contains("items") || s.contains("prefixItems") || s.contains("additionalItems");
  };
  if ((positional(a) || positional(b)) && has_item_keywords(a) && has_item_keywords(b)) {
    for (const char* k : {"items", "prefixItems", "additionalItems"}) {
      if (a.contains(k) != b.contains(k) || (a.contains(k) && a[k] != b[k])) {
        return CannotMerge(k, at);
      }
    }
  }
  Json out = a;
  for (const auto& [key, bv] : b.items()) {
    if (!out.contains(key)) {
      out[key] = bv;
      continue;
    }
    const Json& av = a[key];
    if (av == bv) continue;
    if (key == "properties" || key == "additionalProperties" || key == "required") continue;
    if (key == "type") {
      FOLIO_ASSIGN_OR_RETURN(uint32_t ta, TypeKeywordBits(av, at));
      FOLIO_ASSIGN_OR_RETURN(uint32_t tb, TypeKeywordBits(bv, at));
      const uint32_t both = ta & tb;
      if (both == 0) return Json(false);
      std::vector<std::string> names = TypeNames(both);
      out[key] = names.size() == 1 ? Json(names[0]) : Json(names);
    } else if (key == "minLength" || key == "minItems" || key == "minProperties") {
      out[key] = std::max(av, bv);
    } else if (key == "maxLength" || key == "maxItems" || key == "maxProperties") {
      out[key] = std::min(av, bv);
    } else if ((key == "minimum" || key == "exclusiveMinimum") && av.is_number() &&
               bv.is_number() && !draft4_exclusive) {
      FOLIO_ASSIGN_OR_RETURN(Decimal da, DecimalFromJson(av));
      FOLIO_ASSIGN_OR_RETURN(Decimal db, DecimalFromJson(bv));
      out[key] = CompareDecimals(da, db) >= 0 ? av : bv;
    } else if ((key == "maximum" || key == "exclusiveMaximum") && av.is_number() &&
               bv.is_number() && !draft4_exclusive) {
      FOLIO_ASSIGN_OR_RETURN(Decimal da, DecimalFromJson(av));
      FOLIO_ASSIGN_OR_RETURN(Decimal db, DecimalFromJson(bv));
      out[key] = CompareDecimals(da, db) <= 0 ? av : bv;
    } else if (key == "enum" && av.is_array() && bv.is_array()) {
      Json both = Json::array();
      for (const Json& v : av) {
        if (std::find(bv.begin(), bv.end(), v) != bv.end()) both.push_back(v);
      }
      if (both.empty()) return Json(false);
      out[key] = both;
    } else if (key == "const") {
      return Json(false);  // two different constants
    } else if (key == "uniqueItems" && av.is_boolean() && bv.is_boolean()) {
      out[key] = av.get<bool>() || bv.get<bool>();
    } else if (key == "items" && !av.is_array() && !bv.is_array()) {
      FOLIO_ASSIGN_OR_RETURN(out[key], MergeSchemas(root, av, bv, at, depth + 1));
    } else {
      return CannotMerge(key, at);
    }
  }
  // Properties: a property on one side only meets the other side's
  // additionalProperties.
  if (a.contains("properties") || b.contains("properties")) {
    const Json ap = a.value("properties", Json::object());
    const Json bp = b.value("properties", Json::object());
    if (!ap.is_object() || !bp.is_object()) {
      return Status::InvalidArgument("properties must be an object at " + std::string(at));
    }
    Json props = Json::object();
    for (const auto& [key, av] : ap.items()) {
      const Json& other = bp.contains(key) ? bp[key] : b_extra;
      FOLIO_ASSIGN_OR_RETURN(props[key], IsTrueSchema(other)
                                             ? Result<Json>(av)
                                             : MergeSchemas(root, av, other, at, depth + 1));
    }
    for (const auto& [key, bv] : bp.items()) {
      if (ap.contains(key)) continue;
      FOLIO_ASSIGN_OR_RETURN(props[key], IsTrueSchema(a_extra)
                                             ? Result<Json>(bv)
                                             : MergeSchemas(root, bv, a_extra, at, depth + 1));
    }
    out["properties"] = props;
  }
  // A required key neither side declares is an additional property of
  // both: the walk gives it the merged additionalProperties below.
  if (a.contains("required") || b.contains("required")) {
    Json req = Json::array();
    for (const Json* s : {&a, &b}) {
      if (!s->contains("required")) continue;
      if (!(*s)["required"].is_array()) {
        return Status::InvalidArgument("required must be an array at " + std::string(at));
      }
      for (const Json& k : (*s)["required"]) {
        if (std::find(req.begin(), req.end(), k) == req.end()) req.push_back(k);
      }
    }
    out["required"] = req;
  }
  if (a.contains("additionalProperties") || b.contains("additionalProperties")) {
    FOLIO_ASSIGN_OR_RETURN(out["additionalProperties"],
                           MergeSchemas(root, a_extra, b_extra, at, depth + 1));
    if (out["additionalProperties"].is_object() && out["additionalProperties"].empty()) {
      out["additionalProperties"] = true;
    }
  }
  return out;
}

bool ProvablyDisjoint(const Json& root, const Json& a_in, const Json& b_in) {
  if ((PossibleTypes(root, a_in, 0) & PossibleTypes(root, b_in, 0)) == 0) return true;
  const std::optional<std::vector<Json>> va = ListedValues(root, a_in, 0);
  const std::optional<std::vector<Json>> vb = ListedValues(root, b_in, 0);
  if (va && vb && ValuesDisjoint(*va, *vb)) return true;
  // Objects told apart by a required property with disjoint listed values
  // (a discriminator).
  const Json& a = *Resolved(root, a_in);
  const Json& b = *Resolved(root, b_in);
  if (!a.is_object() || !b.is_object()) return false;
  if ((PossibleTypes(root, a, 0) | PossibleTypes(root, b, 0)) != kObject) return false;
  // A key one side requires and the other forbids.
  for (const auto& [x, y] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
    if (!x->contains("required") || !(*x)["required"].is_array()) continue;
    for (const Json& key : (*x)["required"]) {
      if (key.is_string() && Forbids(*y, key.get<std::string>())) return true;
    }
  }
  if (!a.contains("properties") || !b.contains("properties")) return false;
  const Json& ap = a["properties"];
  const Json& bp = b["properties"];
  if (!ap.is_object() || !bp.is_object()) return false;
  for (const auto& [key, av] : ap.items()) {
    if (!bp.contains(key) || !InRequired(a, key) || !InRequired(b, key)) continue;
    const std::optional<std::vector<Json>> pa = ListedValues(root, av, 0);
    const std::optional<std::vector<Json>> pb = ListedValues(root, bp[key], 0);
    if (pa && pb && ValuesDisjoint(*pa, *pb)) return true;
  }
  return false;
}

}  // namespace folio::grammar::json_schema_internal
