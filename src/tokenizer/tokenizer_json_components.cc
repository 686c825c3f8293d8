// tokenizer.json's pipeline components: normalizer, pre-tokenizer,
// post-processor and decoder, and the typed JSON access the loader uses.
#include <algorithm>
#include <cstdint>

#include "tokenizer/tokenizer_json_internal.h"

namespace folio::tokenizer::json_internal {

Status Corrupt(const std::string& where, const std::string& what) {
  return Status::Corruption(where + ": " + what);
}
Status Unsupported(const std::string& where, const std::string& what) {
  return Status::Unimplemented(where + ": " + what + " is not supported");
}

std::string Show(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() > 60 ? s.substr(0, 60) + "..." : s;
}

// --- Typed field access -----------------------------------------------------

Result<const Json*> Field(const Json& obj, const std::string& where, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    return Corrupt(where, std::string("missing field '") + key + "'");
  }
  return &*it;
}

Status CheckObject(const Json& v, const std::string& where) {
  if (!v.is_object()) {
    return Corrupt(where, "expected an object, got " + Show(v));
  }
  return Status::Ok();
}

Result<std::string> GetString(const Json& obj, const std::string& where, const char* key) {
  FOLIO_ASSIGN_OR_RETURN(const Json* v, Field(obj, where, key));
  if (!v->is_string()) {
    return Corrupt(where + "." + key, "expected a string, got " + Show(*v));
  }
  return v->get<std::string>();
}

Result<bool> GetBool(const Json& obj, const std::string& where, const char* key,
                     std::optional<bool> fallback) {
  auto it = obj.find(key);
  if (it == obj.end() && fallback.has_value()) return *fallback;
  FOLIO_ASSIGN_OR_RETURN(const Json* v, Field(obj, where, key));
  if (!v->is_boolean()) {
    return Corrupt(where + "." + key, "expected true or false, got " + Show(*v));
  }
  return v->get<bool>();
}

Result<int64_t> GetId(const Json& v, const std::string& where) {
  if (!v.is_number_integer()) {
    return Corrupt(where, "expected an integer id, got " + Show(v));
  }
  const int64_t id = v.is_number_unsigned()
                         ? static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX))
                         : v.get<int64_t>();
  if (id < 0 || id >= kMaxVocabSize) {
    return Status::OutOfRange(where + ": id " + std::to_string(id) + " is outside [0, " +
                              std::to_string(kMaxVocabSize) + ")");
  }
  return id;
}

Status OnlyKeys(const Json& obj, const std::string& where,
                std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : obj.items()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || key == k;
    if (!ok) return Unsupported(where + "." + key, "field");
  }
  return Status::Ok();
}

Result<std::string> TypeOf(const Json& v, const std::string& where) {
  FOLIO_RETURN_IF_ERROR(CheckObject(v, where));
  return GetString(v, where, "type");
}

// --- Components -------------------------------------------------------------

Status LoadNormalizer(const Json& v, const std::string& where, int depth, TokenizerImpl* t) {
  if (v.is_null()) return Status::Ok();
  if (depth > kMaxComponentDepth) return Corrupt(where, "nested too deeply");
  FOLIO_ASSIGN_OR_RETURN(const std::string type, TypeOf(v, where));
  if (type == "NFC") {
    FOLIO_RETURN_IF_ERROR(OnlyKeys(v, where, {"type"}));
    t->nfc = true;
    return Status::Ok();
  }
  if (type == "Sequence") {
    FOLIO_RETURN_IF_ERROR(OnlyKeys(v, where, {"type", "normalizers"}));
    FOLIO_ASSIGN_OR_RETURN(const Json* list, Field(v, where, "normalizers"));
    if (!list->is_array()) {
      return Corrupt(where + ".normalizers", "expected an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      FOLIO_RETURN_IF_ERROR(LoadNormalizer(
          (*list)[i], where + ".normalizers[" + std::to_string(i) + "]", depth + 1, t));
    }
    return Status::Ok();
  }
  return Unsupported(where, "normalizer type '" + type + "'");
}

Status LoadPreTokenizer(const Json& v, const std::string& where, int depth, bool* byte_level,
                        TokenizerImpl* t) {
  if (depth > kMaxComponentDepth) return Corrupt(where, "nested too deeply");
  FOLIO_ASSIGN_OR_RETURN(const std::string type, TypeOf(v, where));
  if (*byte_level) {
    return Unsupported(where, "a pre-tokenizer after ByteLevel (ByteLevel must come last)");
  }
  if (type == "Sequence") {
    FOLIO_RETURN_IF_ERROR(OnlyKeys(v, where, {"type", "pretokenizers"}));
    FOLIO_ASSIGN_OR_RETURN(const Json* list, Field(v, where, "pretokenizers"));
    if (!list->is_array()) {
      return Corrupt(where + ".pretokenizers", "expected an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      FOLIO_RETURN_IF_ERROR(LoadPreTokenizer((*list)[i],
                                             where + ".pretokenizers[" + std::to_string(i) + "]",
                                             depth + 1, byte_level, t));
    }
    return Status::Ok();
  }
  if (type == "Split") {
    FOLIO_RETURN_IF_ERROR(OnlyKeys(v, where, {"type", "pattern", "behavior", "invert"}));
    FOLIO_ASSIGN_OR_RETURN(const std::string behavior, GetString(v, where, "behavior"));
    if (behavior != "Isolated") {
      return Unsupported(where + ".behavior", "Split behavior '" + behavior + "'");
    }
    FOLIO_ASSIGN_OR_RETURN(const bool invert, GetBool(v, where, "invert"));
    if (invert) return Unsupported(where + ".invert", "invert = true");
    FOLIO_ASSIGN_OR_RETURN(const Json* pattern, Field(v, where, "pattern"));
    FOLIO_RETURN_IF_ERROR(CheckObject(*pattern, where + ".pattern"));
    PreSplitStep step;
    if (pattern->size() == 1 && pattern->contains("Regex")) {
      FOLIO_ASSIGN_OR_RETURN(const std::string re,
                             GetString(*pattern, where + ".pattern", "Regex"));
      auto compiled = SplitRegex::Compile(re);
      if (!compiled.ok()) {
        const Status& s = compiled.error();
        return Status(s.code() == StatusCode::kUnimplemented ? s.code() : StatusCode::kCorruption,
                      where + ".pattern.Regex: " + s.message());
      }
      step.regex = *std::move(compiled);
    } else if (pattern->size() == 1 && pattern->contains("String")) {
      FOLIO_ASSIGN_OR_RETURN(std::string literal,
                             GetString(*pattern, where + ".pattern", "String"));
      if (literal.empty()) {
        return Unsupported(where + ".pattern.String", "an empty literal");
      }
      step.regex = SplitRegex::Literal(std::move(literal));
    } else {
      return Corrupt(where + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
    }
    t->pre_splits.push_back(std::move(step));
    return Status::Ok();
  }
  if (type == "Digits") {
    FOLIO_RETURN_IF_ERROR(OnlyKeys(v, where, {"type", "individual_digits"}));
    PreSplitStep step;
    step.kind = PreSplitStep::Kind::kDigits;
    FOLIO_ASSIGN_OR_RETURN(step.individual_digits, GetBool(v, where, "individual_digits"));
    t->pre_splits.push_back(std::move(step));
    return Status::Ok();
  }
  if (type == "ByteLevel") {
    FOLIO_RETURN_IF_ERROR(
        OnlyKeys(v, where, {"type", "add_prefix_space", "trim_offsets", "use_regex"}));
    FOLIO_ASSIGN_OR_RETURN(t->prefix_space, GetBool(v, where, "add_prefix_space"));
    FOLIO_RETURN_IF_ERROR(GetBool(v, where, "trim_offsets", false).status());  // offsets only
    // Files written before use_regex existed always used the regex.
    FOLIO_ASSIGN_OR_RETURN(const bool use_regex, GetBool(v, where, "use_regex", true));
    if (use_regex) {
      FOLIO_ASSIGN_OR_RETURN(
          t->byte_level_regex,
          SplitRegex::Compile(
              R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"));
    }
    *byte_level = true;
    return Status::Ok();
  }
  return Unsupported(where, "pre-tokenizer type '" + type + "'");
}

Status LoadPostProcessor(const Json& v, const std::string& where, int depth, bool* seen_template,
                         TokenizerImpl* t) {
  if (v.is_null()) return Status::Ok();
  if (depth > kMaxComponentDepth) return Corrupt(where, "nested too deeply");
  FOLIO_ASSIGN_OR_RETURN(const std::string type, TypeOf(v, where));
  if (type == "ByteLevel") {  // changes offsets only
    return OnlyKeys(v, where, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
  }
  if (type == "Sequence") {
    FOLIO_RETURN_IF_ERROR(OnlyKeys(v, where, {"type", "processors"}));
    FOLIO_ASSIGN_OR_RETURN(const Json* list, Field(v, where, "processors"));
    if (!list->is_array()) {
      return Corrupt(where + ".processors", "expected an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      FOLIO_RETURN_IF_ERROR(LoadPostProcessor((*list)[i],
                                              where + ".processors[" + std::to_string(i) + "]",
                                              depth + 1, seen_template, t));
    }
    return Status::Ok();
  }
  if (type != "TemplateProcessing") {
    return Unsupported(where, "post-processor type '" + type + "'");
  }
  if (*seen_template) return Unsupported(where, "a second TemplateProcessing");
  *seen_template = true;
  FOLIO_RETURN_IF_ERROR(OnlyKeys(v, where, {"type", "single", "pair", "special_tokens"}));
  FOLIO_ASSIGN_OR_RETURN(const Json* specials, Field(v, where, "special_tokens"));
  FOLIO_RETURN_IF_ERROR(CheckObject(*specials, where + ".special_tokens"));
  FOLIO_ASSIGN_OR_RETURN(const Json* single, Field(v, where, "single"));
  if (!single->is_array()) {
    return Corrupt(where + ".single", "expected an array");
  }
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const std::string at = where + ".single[" + std::to_string(i) + "]";
    const Json& item = (*single)[i];
    FOLIO_RETURN_IF_ERROR(CheckObject(item, at));
    if (item.size() == 1 && item.contains("Sequence")) {
      FOLIO_ASSIGN_OR_RETURN(const std::string id,
                             GetString(item["Sequence"], at + ".Sequence", "id"));
      if (id != "A" || seen_sequence) {
        return Unsupported(at, "a template other than specials around one $A");
      }
      seen_sequence = true;
      continue;
    }
    if (!(item.size() == 1 && item.contains("SpecialToken"))) {
      return Corrupt(at, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
    FOLIO_RETURN_IF_ERROR(CheckObject(item["SpecialToken"], at + ".SpecialToken"));
    FOLIO_ASSIGN_OR_RETURN(const std::string name,
                           GetString(item["SpecialToken"], at + ".SpecialToken", "id"));
    auto it = specials->find(name);
    if (it == specials->end()) {
      return Corrupt(
          at, "special token " + QuoteToken(name) + " is not in post_processor.special_tokens");
    }
    const std::string sat = where + ".special_tokens[" + QuoteToken(name) + "]";
    FOLIO_RETURN_IF_ERROR(CheckObject(*it, sat));
    FOLIO_ASSIGN_OR_RETURN(const Json* ids, Field(*it, sat, "ids"));
    if (!ids->is_array()) return Corrupt(sat + ".ids", "expected an array");
    for (const Json& id : *ids) {
      FOLIO_ASSIGN_OR_RETURN(const int64_t value, GetId(id, sat + ".ids"));
      (seen_sequence ? t->suffix : t->prefix).push_back(static_cast<int32_t>(value));
    }
  }
  if (!seen_sequence) {
    return Unsupported(where + ".single", "a template without $A");
  }
  return Status::Ok();
}

Status LoadDecoder(const Json& v, const std::string& where, int depth) {
  if (v.is_null()) {
    return Unsupported(where, "a null decoder (byte-level BPE needs ByteLevel)");
  }
  if (depth > kMaxComponentDepth) return Corrupt(where, "nested too deeply");
  FOLIO_ASSIGN_OR_RETURN(const std::string type, TypeOf(v, where));
  if (type == "ByteLevel") {
    return OnlyKeys(v, where, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
  }
  if (type == "Sequence") {
    FOLIO_RETURN_IF_ERROR(OnlyKeys(v, where, {"type", "decoders"}));
    FOLIO_ASSIGN_OR_RETURN(const Json* list, Field(v, where, "decoders"));
    if (!list->is_array() || list->size() != 1) {
      return Unsupported(where + ".decoders", "a decoder Sequence other than [ByteLevel]");
    }
    return LoadDecoder((*list)[0], where + ".decoders[0]", depth + 1);
  }
  return Unsupported(where, "decoder type '" + type + "'");
}

}  // namespace folio::tokenizer::json_internal
