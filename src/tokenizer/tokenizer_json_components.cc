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
  using Kind = NormalizerStep::Kind;
  for (const auto& [name, kind] : {std::pair<const char*, Kind>("NFC", Kind::kNfc),
                                   {"NFD", Kind::kNfd},
                                   {"Lowercase", Kind::kLowercase},
                                   {"StripAccents", Kind::kStripAccents}}) {
    if (type != name) continue;
    FOLIO_RETURN_IF_ERROR(OnlyKeys(v, where, {"type"}));
    t->normalizers.push_back({kind});
    return Status::Ok();
  }
  if (type == "BertNormalizer") {
    FOLIO_RETURN_IF_ERROR(OnlyKeys(
        v, where, {"type", "clean_text", "handle_chinese_chars", "strip_accents", "lowercase"}));
    NormalizerStep step{Kind::kBert};
    FOLIO_ASSIGN_OR_RETURN(step.clean_text, GetBool(v, where, "clean_text"));
    FOLIO_ASSIGN_OR_RETURN(step.handle_chinese_chars, GetBool(v, where, "handle_chinese_chars"));
    FOLIO_ASSIGN_OR_RETURN(step.lowercase, GetBool(v, where, "lowercase"));
    // strip_accents null (or absent) follows lowercase, as in `tokenizers`.
    auto strip = v.find("strip_accents");
    if (strip == v.end() || strip->is_null()) {
      step.strip_accents = step.lowercase;
    } else {
      FOLIO_ASSIGN_OR_RETURN(step.strip_accents, GetBool(v, where, "strip_accents"));
    }
    t->normalizers.push_back(step);
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
  using Kind = PreSplitStep::Kind;
  for (const auto& [name, kind] : {std::pair<const char*, Kind>("BertPreTokenizer", Kind::kBert),
                                   {"Whitespace", Kind::kWhitespace},
                                   {"WhitespaceSplit", Kind::kWhitespaceSplit}}) {
    if (type != name) continue;
    FOLIO_RETURN_IF_ERROR(OnlyKeys(v, where, {"type"}));
    PreSplitStep step;
    step.kind = kind;
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

namespace {

// A template item's type_id: an integer in [0, 2^31).
Result<int32_t> GetTypeId(const Json& item, const std::string& where) {
  FOLIO_ASSIGN_OR_RETURN(const Json* v, Field(item, where, "type_id"));
  if (!v->is_number_unsigned() || v->get<uint64_t>() > static_cast<uint64_t>(INT32_MAX)) {
    return Corrupt(where + ".type_id", "expected a non-negative integer, got " + Show(*v));
  }
  return static_cast<int32_t>(v->get<uint64_t>());
}

// TemplateProcessing's "single" (specials around one $A, which sets
// t->prefix / t->suffix) or "pair" ($A and $B once each, *pair).
Status LoadTemplate(const Json& v, const std::string& where, const char* key, const Json& specials,
                    TokenizerImpl* t, std::vector<TemplateItem>* pair) {
  const bool is_pair = pair != nullptr;
  FOLIO_ASSIGN_OR_RETURN(const Json* list, Field(v, where, key));
  if (!list->is_array()) {
    return Corrupt(where + "." + key, "expected an array");
  }
  const char* shape = is_pair
                          ? "a pair template other than $A and $B once each, with special tokens"
                          : "a template other than specials around one $A";
  bool seen_a = false, seen_b = false;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string at = where + "." + key + "[" + std::to_string(i) + "]";
    const Json& item = (*list)[i];
    FOLIO_RETURN_IF_ERROR(CheckObject(item, at));
    if (item.size() == 1 && item.contains("Sequence")) {
      const Json& seq = item["Sequence"];
      FOLIO_ASSIGN_OR_RETURN(const std::string id, GetString(seq, at + ".Sequence", "id"));
      bool& seen = id == "B" ? seen_b : seen_a;
      if ((id != "A" && id != "B") || seen || (!is_pair && id == "B")) {
        return Unsupported(at, shape);
      }
      seen = true;
      if (is_pair) {
        FOLIO_ASSIGN_OR_RETURN(const int32_t type_id, GetTypeId(seq, at + ".Sequence"));
        pair->push_back(
            {id == "A" ? TemplateItem::Kind::kSequenceA : TemplateItem::Kind::kSequenceB, 0,
             type_id});
      }
      continue;
    }
    if (!(item.size() == 1 && item.contains("SpecialToken"))) {
      return Corrupt(at, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
    const Json& special = item["SpecialToken"];
    FOLIO_RETURN_IF_ERROR(CheckObject(special, at + ".SpecialToken"));
    FOLIO_ASSIGN_OR_RETURN(const std::string name, GetString(special, at + ".SpecialToken", "id"));
    int32_t type_id = 0;
    if (is_pair) {
      FOLIO_ASSIGN_OR_RETURN(type_id, GetTypeId(special, at + ".SpecialToken"));
    }
    auto it = specials.find(name);
    if (it == specials.end()) {
      return Corrupt(
          at, "special token " + QuoteToken(name) + " is not in post_processor.special_tokens");
    }
    const std::string sat = where + ".special_tokens[" + QuoteToken(name) + "]";
    FOLIO_RETURN_IF_ERROR(CheckObject(*it, sat));
    FOLIO_ASSIGN_OR_RETURN(const Json* ids, Field(*it, sat, "ids"));
    if (!ids->is_array()) return Corrupt(sat + ".ids", "expected an array");
    for (const Json& id : *ids) {
      FOLIO_ASSIGN_OR_RETURN(const int64_t value, GetId(id, sat + ".ids"));
      if (is_pair) {
        pair->push_back({TemplateItem::Kind::kToken, static_cast<int32_t>(value), type_id});
      } else {
        (seen_a ? t->suffix : t->prefix).push_back(static_cast<int32_t>(value));
      }
    }
  }
  if (is_pair && !list->empty() && !(seen_a && seen_b)) {
    return Unsupported(where + "." + key, shape);
  }
  if (!is_pair && !seen_a) {
    return Unsupported(where + ".single", "a template without $A");
  }
  return Status::Ok();
}

// BertProcessing's "cls" / "sep": ["[CLS]", 101].
Result<int32_t> GetBertSpecial(const Json& v, const std::string& where, const char* key) {
  FOLIO_ASSIGN_OR_RETURN(const Json* field, Field(v, where, key));
  if (!field->is_array() || field->size() != 2 || !(*field)[0].is_string()) {
    return Corrupt(where + "." + key, "expected [\"token\", id], got " + Show(*field));
  }
  FOLIO_ASSIGN_OR_RETURN(const int64_t id, GetId((*field)[1], where + "." + key + "[1]"));
  return static_cast<int32_t>(id);
}

}  // namespace

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
  if (type != "TemplateProcessing" && type != "BertProcessing") {
    return Unsupported(where, "post-processor type '" + type + "'");
  }
  if (*seen_template) return Unsupported(where, "a second " + type);
  *seen_template = true;
  if (type == "BertProcessing") {
    FOLIO_RETURN_IF_ERROR(OnlyKeys(v, where, {"type", "sep", "cls"}));
    FOLIO_ASSIGN_OR_RETURN(const int32_t sep, GetBertSpecial(v, where, "sep"));
    FOLIO_ASSIGN_OR_RETURN(const int32_t cls, GetBertSpecial(v, where, "cls"));
    using Item = TemplateItem;
    t->prefix = {cls};
    t->suffix = {sep};
    t->pair_template = {{Item::Kind::kToken, cls, 0},
                        {Item::Kind::kSequenceA, 0, 0},
                        {Item::Kind::kToken, sep, 0},
                        {Item::Kind::kSequenceB, 0, 1},
                        {Item::Kind::kToken, sep, 1}};
    return Status::Ok();
  }
  FOLIO_RETURN_IF_ERROR(OnlyKeys(v, where, {"type", "single", "pair", "special_tokens"}));
  FOLIO_ASSIGN_OR_RETURN(const Json* specials, Field(v, where, "special_tokens"));
  FOLIO_RETURN_IF_ERROR(CheckObject(*specials, where + ".special_tokens"));
  FOLIO_RETURN_IF_ERROR(LoadTemplate(v, where, "single", *specials, t, nullptr));
  std::vector<TemplateItem> pair;
  FOLIO_RETURN_IF_ERROR(LoadTemplate(v, where, "pair", *specials, t, &pair));
  // An empty pair template leaves EncodePair nothing to follow.
  t->pair_template.reset();
  if (!pair.empty()) t->pair_template = std::move(pair);
  return Status::Ok();
}

Status LoadDecoder(const Json& v, const std::string& where, int depth, TokenizerImpl* t) {
  const bool wordpiece = t->kind == TokenizerImpl::Kind::kWordPiece;
  if (v.is_null()) {
    if (wordpiece) return Status::Ok();  // tokens joined with spaces
    return Unsupported(where, "a null decoder (byte-level BPE needs ByteLevel)");
  }
  if (depth > kMaxComponentDepth) return Corrupt(where, "nested too deeply");
  FOLIO_ASSIGN_OR_RETURN(const std::string type, TypeOf(v, where));
  if (type == "ByteLevel" && !wordpiece) {
    return OnlyKeys(v, where, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
  }
  if (type == "WordPiece" && wordpiece) {
    FOLIO_RETURN_IF_ERROR(OnlyKeys(v, where, {"type", "prefix", "cleanup"}));
    FOLIO_ASSIGN_OR_RETURN(t->decoder_prefix, GetString(v, where, "prefix"));
    FOLIO_ASSIGN_OR_RETURN(t->decoder_cleanup, GetBool(v, where, "cleanup"));
    t->wordpiece_decoder = true;
    return Status::Ok();
  }
  if (type == "Sequence") {
    FOLIO_RETURN_IF_ERROR(OnlyKeys(v, where, {"type", "decoders"}));
    FOLIO_ASSIGN_OR_RETURN(const Json* list, Field(v, where, "decoders"));
    if (!list->is_array() || list->size() != 1) {
      return Unsupported(where + ".decoders", "a decoder Sequence of other than one decoder");
    }
    return LoadDecoder((*list)[0], where + ".decoders[0]", depth + 1, t);
  }
  return Unsupported(
      where, "decoder type '" + type + "' for a " + (wordpiece ? "WordPiece" : "BPE") + " model");
}

}  // namespace folio::tokenizer::json_internal
