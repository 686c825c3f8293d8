// Tokenizer::FromTokenizerJson: Hugging Face tokenizer.json, byte-level BPE
// or WordPiece.
//
// Every field is checked for presence and type; anything the encoder would
// not reproduce exactly is refused as kUnimplemented naming the JSON path.
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_set>

#include "folio/core/utf8.h"
#include "folio/tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/tokenizer_json_internal.h"
#include "tokenizer/unicode.h"

namespace folio::tokenizer {
namespace {

using json_internal::CheckObject;
using json_internal::Corrupt;
using json_internal::Field;
using json_internal::GetBool;
using json_internal::GetId;
using json_internal::GetString;
using json_internal::Json;
using json_internal::OnlyKeys;
using json_internal::Show;
using json_internal::TypeOf;
using json_internal::Unsupported;

Result<std::string> ReadFile(const std::filesystem::path& path) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return Status::IoError(path.string() + ": " + ec.message());
  if (size > kMaxTokenizerFileBytes) {
    return Status::ResourceExhausted(path.string() + " is " + std::to_string(size) +
                                     " bytes, limit " + std::to_string(kMaxTokenizerFileBytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError(path.string() + ": cannot open");
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (in.gcount() != static_cast<std::streamsize>(size)) {
    return Status::IoError(path.string() + ": short read");
  }
  return text;
}

// Parses JSON, refusing an object with a repeated key (nlohmann would keep
// the last one silently).
Result<Json> ParseJson(const std::string& text) {
  std::vector<std::unordered_set<std::string>> keys;
  std::string repeated;
  auto callback = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case Json::parse_event_t::key:
        if (!keys.back().insert(parsed.get<std::string>()).second && repeated.empty()) {
          repeated = parsed.get<std::string>();
        }
        break;
      case Json::parse_event_t::object_end:
        keys.pop_back();
        break;
      default:
        break;
    }
    return true;
  };
  Json root;
  try {
    root = Json::parse(text, callback);
  } catch (const Json::exception& e) {
    // nlohmann reports errors only this way: a syntax error, or a number
    // past double's range (out_of_range.406).
    return Status::Corruption(std::string("malformed JSON: ") + e.what());
  }
  if (!repeated.empty()) {
    return Status::Corruption("JSON object repeats the key " + QuoteToken(repeated));
  }
  return root;
}

// A model's "vocab": token -> id, into t->vocab and *model_ids.
Status LoadVocab(const Json& m, const std::string& where, TokenizerImpl* t,
                 std::unordered_map<std::string, int32_t>* model_ids) {
  FOLIO_ASSIGN_OR_RETURN(const Json* vocab, Field(m, where, "vocab"));
  FOLIO_RETURN_IF_ERROR(CheckObject(*vocab, where + ".vocab"));
  if (vocab->size() > static_cast<size_t>(kMaxVocabSize)) {
    return Status::ResourceExhausted(where + ".vocab has " + std::to_string(vocab->size()) +
                                     " entries, limit " + std::to_string(kMaxVocabSize));
  }
  for (const auto& [text, value] : vocab->items()) {
    const std::string at = where + ".vocab[" + QuoteToken(text) + "]";
    if (text.size() > kMaxTokenBytes) {
      return Status::ResourceExhausted(at + " is " + std::to_string(text.size()) +
                                       " bytes, limit " + std::to_string(kMaxTokenBytes));
    }
    FOLIO_ASSIGN_OR_RETURN(const int64_t id, GetId(value, at));
    const auto index = static_cast<size_t>(id);
    if (index >= t->vocab.size()) {
      t->vocab.resize(index + 1);
      t->has_token.resize(index + 1, 0);
    }
    if (t->has_token[index] != 0) {
      return Corrupt(
          at, "id " + std::to_string(id) + " is also given to " + QuoteToken(t->vocab[index]));
    }
    t->vocab[index] = text;
    t->has_token[index] = 1;
    model_ids->emplace(text, static_cast<int32_t>(id));
  }
  return Status::Ok();
}

// The WordPiece model: vocabulary, unk token, the prefix of a word's later
// pieces and the longest word it splits. Every field is required, as in
// `tokenizers`.
Status LoadWordPieceModel(const Json& m, TokenizerImpl* t,
                          std::unordered_map<std::string, int32_t>* model_ids) {
  const std::string where = "model";
  FOLIO_RETURN_IF_ERROR(OnlyKeys(
      m, where,
      {"type", "unk_token", "continuing_subword_prefix", "max_input_chars_per_word", "vocab"}));
  t->kind = TokenizerImpl::Kind::kWordPiece;
  FOLIO_RETURN_IF_ERROR(LoadVocab(m, where, t, model_ids));
  FOLIO_ASSIGN_OR_RETURN(const std::string unk, GetString(m, where, "unk_token"));
  auto it = model_ids->find(unk);
  if (it == model_ids->end()) {
    return Corrupt(where + ".unk_token", QuoteToken(unk) + " is not in the vocabulary");
  }
  t->unk_id = it->second;
  FOLIO_ASSIGN_OR_RETURN(t->continuing_prefix, GetString(m, where, "continuing_subword_prefix"));
  FOLIO_ASSIGN_OR_RETURN(const Json* max_chars, Field(m, where, "max_input_chars_per_word"));
  if (!max_chars->is_number_unsigned()) {
    return Corrupt(where + ".max_input_chars_per_word",
                   "expected a non-negative integer, got " + Show(*max_chars));
  }
  t->max_input_chars_per_word = max_chars->get<uint64_t>();
  t->wordpiece_ids = *model_ids;
  return Status::Ok();
}

// The BPE model: vocabulary and merges.
Status LoadBpeModel(const Json& m, TokenizerImpl* t,
                    std::unordered_map<std::string, int32_t>* model_ids) {
  const std::string where = "model";
  FOLIO_RETURN_IF_ERROR(
      OnlyKeys(m, where,
               {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges"}));
  if (auto it = m.find("dropout"); it != m.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() != 0.0) {
      return Unsupported(where + ".dropout", "BPE dropout " + Show(*it));
    }
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = m.find(key);
    if (it == m.end() || it->is_null()) continue;
    if (!it->is_string()) {
      return Corrupt(where + "." + key, "expected a string or null");
    }
    if (!it->get<std::string>().empty()) {
      return Unsupported(where + "." + key, std::string(key) + " " + Show(*it));
    }
  }
  FOLIO_ASSIGN_OR_RETURN(const bool byte_fallback, GetBool(m, where, "byte_fallback", false));
  if (byte_fallback) {
    return Unsupported(where + ".byte_fallback", "byte_fallback = true");
  }
  FOLIO_ASSIGN_OR_RETURN(t->fuse_unk, GetBool(m, where, "fuse_unk", false));
  FOLIO_ASSIGN_OR_RETURN(t->ignore_merges, GetBool(m, where, "ignore_merges", false));
  FOLIO_RETURN_IF_ERROR(LoadVocab(m, where, t, model_ids));
  for (const auto& [text, id] : *model_ids) {
    if (auto bytes = ByteLevelToBytes(text)) {
      t->model_ids_by_bytes.emplace(*std::move(bytes), id);
    }
  }

  if (auto it = m.find("unk_token"); it != m.end() && !it->is_null()) {
    if (!it->is_string()) {
      return Corrupt(where + ".unk_token", "expected a string or null");
    }
    auto unk = model_ids->find(it->get<std::string>());
    if (unk == model_ids->end()) {
      return Corrupt(where + ".unk_token",
                     QuoteToken(it->get<std::string>()) + " is not in the vocabulary");
    }
    t->unk_id = unk->second;
  }

  FOLIO_ASSIGN_OR_RETURN(const Json* merges, Field(m, where, "merges"));
  if (!merges->is_array()) {
    return Corrupt(where + ".merges", "expected an array");
  }
  if (merges->size() > kMaxMerges) {
    return Status::ResourceExhausted(where + ".merges has " + std::to_string(merges->size()) +
                                     " entries, limit " + std::to_string(kMaxMerges));
  }
  t->merges.reserve(merges->size());
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const std::string at = where + ".merges[" + std::to_string(rank) + "]";
    const Json& item = (*merges)[rank];
    std::string left, right;
    if (item.is_string()) {  // the legacy "a b" form
      const std::string s = item.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return Corrupt(at, QuoteToken(s) + " is not two tokens separated by one space");
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (item.is_array() && item.size() == 2 && item[0].is_string() && item[1].is_string()) {
      left = item[0].get<std::string>();
      right = item[1].get<std::string>();
    } else {
      return Corrupt(at, "expected \"a b\" or [\"a\", \"b\"], got " + Show(item));
    }
    auto l = model_ids->find(left), r = model_ids->find(right);
    auto merged = model_ids->find(left + right);
    if (l == model_ids->end() || r == model_ids->end()) {
      return Corrupt(at, "names " + QuoteToken(l == model_ids->end() ? left : right) +
                             ", which is not in the vocabulary");
    }
    if (merged == model_ids->end()) {
      return Corrupt(
          at, "merges into " + QuoteToken(left + right) + ", which is not in the vocabulary");
    }
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(l->second)) << 32) |
                         static_cast<uint32_t>(r->second);
    auto [pos, inserted] =
        t->merges.emplace(key, std::make_pair(static_cast<int32_t>(rank), merged->second));
    if (!inserted) {
      return Corrupt(at, "repeats merge " + std::to_string(pos->second.first));
    }
  }
  return Status::Ok();
}

Status LoadModel(const Json& m, TokenizerImpl* t,
                 std::unordered_map<std::string, int32_t>* model_ids) {
  FOLIO_ASSIGN_OR_RETURN(const std::string type, TypeOf(m, "model"));
  if (type == "BPE") return LoadBpeModel(m, t, model_ids);
  if (type == "WordPiece") return LoadWordPieceModel(m, t, model_ids);
  return Unsupported("model.type", "model type '" + type + "'");
}

Status LoadAddedTokens(const Json& list, const std::unordered_map<std::string, int32_t>& model_ids,
                       TokenizerImpl* t) {
  const std::string where = "added_tokens";
  if (!list.is_array()) return Corrupt(where, "expected an array");
  if (list.size() > static_cast<size_t>(kMaxVocabSize)) {
    return Status::ResourceExhausted(where + " has " + std::to_string(list.size()) +
                                     " entries, limit " + std::to_string(kMaxVocabSize));
  }
  std::set<int64_t> ids;
  std::unordered_set<std::string> contents;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const Json& v = list[i];
    FOLIO_RETURN_IF_ERROR(CheckObject(v, at));
    FOLIO_RETURN_IF_ERROR(OnlyKeys(
        v, at, {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"}));
    AddedToken a;
    FOLIO_ASSIGN_OR_RETURN(const Json* id_field, Field(v, at, "id"));
    FOLIO_ASSIGN_OR_RETURN(const int64_t id, GetId(*id_field, at + ".id"));
    a.id = static_cast<int32_t>(id);
    FOLIO_ASSIGN_OR_RETURN(a.content, GetString(v, at, "content"));
    FOLIO_ASSIGN_OR_RETURN(a.single_word, GetBool(v, at, "single_word"));
    FOLIO_ASSIGN_OR_RETURN(a.lstrip, GetBool(v, at, "lstrip"));
    FOLIO_ASSIGN_OR_RETURN(a.rstrip, GetBool(v, at, "rstrip"));
    FOLIO_ASSIGN_OR_RETURN(a.normalized, GetBool(v, at, "normalized"));
    FOLIO_ASSIGN_OR_RETURN(a.special, GetBool(v, at, "special"));
    if (a.content.empty()) return Corrupt(at + ".content", "empty");
    if (a.content.size() > kMaxTokenBytes) {
      return Status::ResourceExhausted(at + ".content is " + std::to_string(a.content.size()) +
                                       " bytes, limit " + std::to_string(kMaxTokenBytes));
    }
    if (utf8::FirstInvalid(a.content) != std::string_view::npos) {
      return Corrupt(at + ".content", "not valid UTF-8");
    }
    if (!ids.insert(id).second) {
      return Corrupt(at + ".id", "id " + std::to_string(id) + " repeats");
    }
    if (!contents.insert(a.content).second) {
      return Corrupt(at + ".content", QuoteToken(a.content) + " repeats");
    }
    const auto index = static_cast<size_t>(id);
    if (auto it = model_ids.find(a.content); it != model_ids.end()) {
      if (it->second != id) {
        return Corrupt(at, QuoteToken(a.content) + " has id " + std::to_string(id) +
                               " but the vocabulary gives it " + std::to_string(it->second));
      }
    } else {
      if (index < t->vocab.size() && t->has_token[index] != 0) {
        return Corrupt(at, "id " + std::to_string(id) + " of " + QuoteToken(a.content) +
                               " belongs to " + QuoteToken(t->vocab[index]));
      }
      if (index >= t->vocab.size()) {
        t->vocab.resize(index + 1);
        t->has_token.resize(index + 1, 0);
      }
      t->vocab[index] = a.content;
      t->has_token[index] = 1;
    }
    t->added.push_back(std::move(a));
  }
  return Status::Ok();
}

// bos_token / eos_token of a tokenizer_config.json: a string, an AddedToken
// object with "content", or null.
Result<std::optional<int32_t>> ConfigToken(const Json& config, const char* key,
                                           const TokenizerImpl& t) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::optional<int32_t>();
  const Json* content = &*it;
  if (it->is_object()) {
    auto c = it->find("content");
    if (c == it->end()) return Corrupt(key, "object without 'content'");
    content = &*c;
  }
  if (!content->is_string()) {
    return Corrupt(key, "expected a string, got " + Show(*content));
  }
  auto id = t.token_ids.find(content->get<std::string>());
  if (id == t.token_ids.end()) {
    return Corrupt(key, QuoteToken(content->get<std::string>()) + " is not a token");
  }
  return std::optional<int32_t>(id->second);
}

// Reads bos / eos from the tokenizer_config.json next to a tokenizer.json.
Status LoadSiblingConfig(const std::filesystem::path& path, TokenizerImpl* t) {
  if (path.filename() != "tokenizer.json") return Status::Ok();
  const std::filesystem::path config_path = path.parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(config_path, ec)) return Status::Ok();
  const std::string name = config_path.string();
  FOLIO_ASSIGN_OR_RETURN(const std::string text, ReadFile(config_path));
  auto config = ParseJson(text);
  if (!config.ok()) return config.error().WithContext(name);
  if (!config->is_object()) {
    return Status::Corruption(name + ": top level: expected an object");
  }
  auto bos = ConfigToken(*config, "bos_token", *t);
  if (!bos.ok()) return bos.error().WithContext(name);
  auto eos = ConfigToken(*config, "eos_token", *t);
  if (!eos.ok()) return eos.error().WithContext(name);
  if (bos->has_value()) t->bos = **bos;
  if (eos->has_value()) t->eos = **eos;
  return Status::Ok();
}

Status LoadRoot(const Json& root, TokenizerImpl* t) {
  FOLIO_RETURN_IF_ERROR(CheckObject(root, "top level"));
  FOLIO_RETURN_IF_ERROR(OnlyKeys(root, "top level",
                                 {"version", "truncation", "padding", "added_tokens", "normalizer",
                                  "pre_tokenizer", "post_processor", "decoder", "model"}));
  FOLIO_ASSIGN_OR_RETURN(const std::string version, GetString(root, "top level", "version"));
  if (version != "1.0") {
    return Unsupported("version", "version '" + version + "'");
  }
  // Batch shaping (a length limit, pad ids), not tokenization: read as
  // objects or null and otherwise ignored.
  for (const char* key : {"truncation", "padding"}) {
    auto it = root.find(key);
    if (it != root.end() && !it->is_null()) {
      FOLIO_RETURN_IF_ERROR(CheckObject(*it, key));
    }
  }
  FOLIO_ASSIGN_OR_RETURN(const Json* model, Field(root, "top level", "model"));
  std::unordered_map<std::string, int32_t> model_ids;
  FOLIO_RETURN_IF_ERROR(LoadModel(*model, t, &model_ids));
  FOLIO_ASSIGN_OR_RETURN(const Json* added, Field(root, "top level", "added_tokens"));
  FOLIO_RETURN_IF_ERROR(LoadAddedTokens(*added, model_ids, t));
  t->special.assign(t->vocab.size(), 0);
  for (const AddedToken& a : t->added) {
    if (a.special) t->special[static_cast<size_t>(a.id)] = 1;
  }

  FOLIO_ASSIGN_OR_RETURN(const Json* normalizer, Field(root, "top level", "normalizer"));
  FOLIO_RETURN_IF_ERROR(json_internal::LoadNormalizer(*normalizer, "normalizer", 0, t));
  FOLIO_ASSIGN_OR_RETURN(const Json* pre, Field(root, "top level", "pre_tokenizer"));
  bool byte_level = false;
  if (!pre->is_null()) {
    FOLIO_RETURN_IF_ERROR(
        json_internal::LoadPreTokenizer(*pre, "pre_tokenizer", 0, &byte_level, t));
  }
  const bool wordpiece = t->kind == TokenizerImpl::Kind::kWordPiece;
  if (!byte_level && !wordpiece) {
    return Unsupported("pre_tokenizer",
                       "a BPE model without a ByteLevel pre-tokenizer (only byte-level BPE "
                       "is)");
  }
  if (byte_level && wordpiece) {
    return Unsupported("pre_tokenizer", "a ByteLevel pre-tokenizer with a WordPiece model");
  }
  FOLIO_ASSIGN_OR_RETURN(const Json* post, Field(root, "top level", "post_processor"));
  bool seen_template = false;
  FOLIO_RETURN_IF_ERROR(
      json_internal::LoadPostProcessor(*post, "post_processor", 0, &seen_template, t));
  if (!seen_template) {
    // No template: a pair is a then b, b as segment 1.
    t->pair_template = {{TemplateItem::Kind::kSequenceA, 0, 0},
                        {TemplateItem::Kind::kSequenceB, 0, 1}};
  }
  std::vector<int32_t> template_ids = t->prefix;
  template_ids.insert(template_ids.end(), t->suffix.begin(), t->suffix.end());
  if (t->pair_template.has_value()) {
    for (const TemplateItem& item : *t->pair_template) {
      if (item.kind == TemplateItem::Kind::kToken) template_ids.push_back(item.id);
    }
  }
  for (int32_t id : template_ids) {
    if (!ValidId(*t, id)) {
      return Corrupt("post_processor", "special token id " + std::to_string(id) + " has no token");
    }
  }
  if (t->prefix.size() == 1) t->bos = t->prefix[0];
  if (t->suffix.size() == 1) t->eos = t->suffix[0];
  FOLIO_ASSIGN_OR_RETURN(const Json* decoder, Field(root, "top level", "decoder"));
  FOLIO_RETURN_IF_ERROR(json_internal::LoadDecoder(*decoder, "decoder", 0, t));
  return FinishTokenizer(t);
}

}  // namespace

Result<Tokenizer> Tokenizer::FromTokenizerJson(const std::filesystem::path& path) {
  const std::string name = path.string();
  FOLIO_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  auto root = ParseJson(text);
  if (!root.ok()) return root.error().WithContext(name);
  auto t = std::make_shared<TokenizerImpl>();
  t->kind = TokenizerImpl::Kind::kByteLevelBpe;
  if (Status s = LoadRoot(*root, t.get()); !s.ok()) return s.WithContext(name);
  FOLIO_RETURN_IF_ERROR(LoadSiblingConfig(path, t.get()));
  return Tokenizer(std::move(t));
}

}  // namespace folio::tokenizer
