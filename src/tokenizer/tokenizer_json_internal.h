// JSON reading shared by the tokenizer.json loader's files: typed field
// access with messages naming the JSON path, and the pipeline components
// (tokenizer_json_components.cc).
#ifndef FOLIO_TOKENIZER_TOKENIZER_JSON_INTERNAL_H_
#define FOLIO_TOKENIZER_TOKENIZER_JSON_INTERNAL_H_

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "folio/core/status.h"
#include "tokenizer/tokenizer_internal.h"

namespace folio::tokenizer::json_internal {

using Json = nlohmann::json;

// kCorruption / kUnimplemented with "where: what".
Status Corrupt(const std::string& where, const std::string& what);
Status Unsupported(const std::string& where, const std::string& what);
std::string Show(const Json& v);  // clipped JSON text of a value

Result<const Json*> Field(const Json& obj, const std::string& where, const char* key);
Status CheckObject(const Json& v, const std::string& where);
Result<std::string> GetString(const Json& obj, const std::string& where, const char* key);
// A missing key gives `fallback` if there is one, else an error.
Result<bool> GetBool(const Json& obj, const std::string& where, const char* key,
                     std::optional<bool> fallback = std::nullopt);
// An integer id in [0, kMaxVocabSize).
Result<int64_t> GetId(const Json& v, const std::string& where);
// Refuses keys a component does not know: an option folio would ignore
// could change the result.
Status OnlyKeys(const Json& obj, const std::string& where,
                std::initializer_list<std::string_view> known);
Result<std::string> TypeOf(const Json& v, const std::string& where);

// The pipeline components. `depth` counts nested Sequences.
Status LoadNormalizer(const Json& v, const std::string& where, int depth, TokenizerImpl* t);
// Sets *byte_level once the ByteLevel pre-tokenizer is read (it must be
// last).
Status LoadPreTokenizer(const Json& v, const std::string& where, int depth, bool* byte_level,
                        TokenizerImpl* t);
// Fills t->prefix / t->suffix and t->pair_template from a
// TemplateProcessing or BertProcessing (*seen_template: one was read).
Status LoadPostProcessor(const Json& v, const std::string& where, int depth, bool* seen_template,
                         TokenizerImpl* t);
// The decoder the model allows: ByteLevel for BPE; WordPiece or null for
// WordPiece (t->wordpiece_decoder and its options).
Status LoadDecoder(const Json& v, const std::string& where, int depth, TokenizerImpl* t);

}  // namespace folio::tokenizer::json_internal

#endif  // FOLIO_TOKENIZER_TOKENIZER_JSON_INTERNAL_H_
