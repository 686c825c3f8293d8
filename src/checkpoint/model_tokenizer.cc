#include "folio/checkpoint/model_tokenizer.h"

#include "checkpoint/loaders.h"
#include "folio/checkpoint/gguf.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::checkpoint {

using tokenizer::Tokenizer;
using tokenizer::TokenizerSpec;

Result<Tokenizer> GgufTokenizer(const GgufFile& f,
                                const std::optional<std::string>& pre_tokenizer) {
  TokenizerSpec spec;
  FOLIO_ASSIGN_OR_RETURN(std::string kind, f.GetString("tokenizer.ggml.model"));
  if (kind == "gpt2") {
    spec.model = TokenizerSpec::Model::kBpe;
  } else if (kind == "llama") {
    spec.model = TokenizerSpec::Model::kSentencePiece;
  } else if (kind == "bert") {
    spec.model = TokenizerSpec::Model::kWordPiece;
  } else {
    return Status::Unimplemented("tokenizer.ggml.model \"" + kind +
                                 "\" (folio reads gpt2, llama and bert)");
  }
  const bool wordpiece = spec.model == TokenizerSpec::Model::kWordPiece;
  FOLIO_ASSIGN_OR_RETURN(spec.tokens, f.GetStringArray("tokenizer.ggml.tokens"));
  if (f.Has("tokenizer.ggml.scores")) {
    FOLIO_ASSIGN_OR_RETURN(std::vector<double> scores, f.GetFloatArray("tokenizer.ggml.scores"));
    spec.scores.assign(scores.begin(), scores.end());
  }
  if (f.Has("tokenizer.ggml.token_type")) {
    FOLIO_ASSIGN_OR_RETURN(std::vector<int64_t> types, f.GetIntArray("tokenizer.ggml.token_type"));
    for (int64_t t : types) spec.token_types.push_back(static_cast<int32_t>(t));
  }
  // llama.cpp reads neither merges nor a pre-tokenizer name for WordPiece
  // (its converter writes the name, e.g. "bert-bge", all the same).
  if (f.Has("tokenizer.ggml.merges") && !wordpiece) {
    FOLIO_ASSIGN_OR_RETURN(spec.merges, f.GetStringArray("tokenizer.ggml.merges"));
  }
  if (f.Has("tokenizer.ggml.pre") && !wordpiece) {
    FOLIO_ASSIGN_OR_RETURN(spec.pre_tokenizer, f.GetString("tokenizer.ggml.pre"));
  }
  if (pre_tokenizer) spec.pre_tokenizer = *pre_tokenizer;
  auto id = [&](const char* key, std::optional<int32_t>& out) -> Status {
    if (!f.Has(key)) return Status::Ok();
    FOLIO_ASSIGN_OR_RETURN(uint64_t v, f.GetUint(key));
    if (v > INT32_MAX) return Status::OutOfRange(std::string(key) + " " + std::to_string(v));
    out = static_cast<int32_t>(v);
    return Status::Ok();
  };
  if (wordpiece) {
    // llama.cpp's defaults for "bert" (bert-base's [CLS], [UNK], [SEP],
    // [PAD]), each kept only where the vocabulary reaches it.
    const auto fallback = [&](std::optional<int32_t>& out, int32_t value) {
      if (static_cast<size_t>(value) < spec.tokens.size()) out = value;
    };
    fallback(spec.bos_id, 101);
    fallback(spec.unk_id, 100);
    fallback(spec.sep_id, 102);
    fallback(spec.pad_id, 0);
  }
  FOLIO_RETURN_IF_ERROR(id("tokenizer.ggml.bos_token_id", spec.bos_id));
  FOLIO_RETURN_IF_ERROR(id("tokenizer.ggml.eos_token_id", spec.eos_id));
  FOLIO_RETURN_IF_ERROR(id("tokenizer.ggml.unknown_token_id", spec.unk_id));
  FOLIO_RETURN_IF_ERROR(id("tokenizer.ggml.padding_token_id", spec.pad_id));
  FOLIO_RETURN_IF_ERROR(id("tokenizer.ggml.seperator_token_id", spec.sep_id));  // (sic)
  auto flag = [&](const char* key, bool& out) -> Status {
    if (!f.Has(key)) return Status::Ok();
    FOLIO_ASSIGN_OR_RETURN(out, f.GetBool(key));
    return Status::Ok();
  };
  // llama.cpp's defaults: SentencePiece adds bos; WordPiece bos and sep.
  spec.add_bos = spec.model != TokenizerSpec::Model::kBpe;
  spec.add_sep = wordpiece;
  FOLIO_RETURN_IF_ERROR(flag("tokenizer.ggml.add_bos_token", spec.add_bos));
  FOLIO_RETURN_IF_ERROR(flag("tokenizer.ggml.add_eos_token", spec.add_eos));
  FOLIO_RETURN_IF_ERROR(flag("tokenizer.ggml.add_sep_token", spec.add_sep));
  if (!spec.sep_id.has_value()) spec.add_sep = false;  // llama.cpp only warns
  FOLIO_RETURN_IF_ERROR(flag("tokenizer.ggml.add_space_prefix", spec.add_space_prefix));
  // BertNormalizer's options; strip_accents follows lowercase unless given.
  FOLIO_RETURN_IF_ERROR(flag("tokenizer.ggml.normalizer.lowercase", spec.lowercase));
  spec.strip_accents = spec.lowercase;
  FOLIO_RETURN_IF_ERROR(flag("tokenizer.ggml.normalizer.strip_accents", spec.strip_accents));
  return Tokenizer::FromSpec(std::move(spec));
}

Result<std::optional<Tokenizer>> LoadModelTokenizer(
    const std::filesystem::path& model_path, const std::optional<std::string>& pre_tokenizer) {
  std::error_code ec;
  if (std::filesystem::is_directory(model_path, ec)) {
    if (pre_tokenizer) {
      return Status::InvalidArgument(
          "a pre-tokenizer override applies to a GGUF file's tokenizer.ggml.pre; " +
          model_path.string() + " is a folder (its tokenizer.json names its own)");
    }
    const auto path = model_path / "tokenizer.json";
    if (!std::filesystem::exists(path, ec)) return std::optional<Tokenizer>();
    FOLIO_ASSIGN_OR_RETURN(Tokenizer t, Tokenizer::FromTokenizerJson(path));
    return std::optional<Tokenizer>(std::move(t));
  }
  FOLIO_ASSIGN_OR_RETURN(GgufFile f, GgufFile::Open(model_path));
  Result<Tokenizer> t = GgufTokenizer(f, pre_tokenizer);
  if (!t) return t.error().WithContext(model_path.string());
  return std::optional<Tokenizer>(std::move(*t));
}

std::vector<GgufKeyValue> GgufTokenizerKeys(const TokenizerSpec& spec) {
  const auto array = [](GgufValueType element, std::vector<GgufValue> items) {
    return GgufValue{GgufValueType::kArray, element, std::move(items)};
  };
  const auto strings = [&](const std::vector<std::string>& v) {
    std::vector<GgufValue> items;
    items.reserve(v.size());
    for (const std::string& s : v) items.push_back(GgufString(s));
    return array(GgufValueType::kString, std::move(items));
  };
  std::vector<GgufValue> types(spec.token_types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    types[i].type = GgufValueType::kI32;
    types[i].data = int64_t{spec.token_types[i]};
  }
  std::vector<GgufKeyValue> kvs;
  const auto add = [&](const char* key, GgufValue value) {
    kvs.push_back({key, std::move(value)});
  };
  add("tokenizer.ggml.model", GgufString("gpt2"));
  add("tokenizer.ggml.pre", GgufString(spec.pre_tokenizer));
  add("tokenizer.ggml.tokens", strings(spec.tokens));
  add("tokenizer.ggml.token_type", array(GgufValueType::kI32, std::move(types)));
  add("tokenizer.ggml.merges", strings(spec.merges));
  const auto id = [&](const char* key, std::optional<int32_t> v) {
    if (v) add(key, GgufU32(static_cast<uint32_t>(*v)));
  };
  id("tokenizer.ggml.bos_token_id", spec.bos_id);
  id("tokenizer.ggml.eos_token_id", spec.eos_id);
  id("tokenizer.ggml.unknown_token_id", spec.unk_id);
  id("tokenizer.ggml.padding_token_id", spec.pad_id);
  add("tokenizer.ggml.add_bos_token", {GgufValueType::kBool, GgufValueType::kU8, spec.add_bos});
  add("tokenizer.ggml.add_eos_token", {GgufValueType::kBool, GgufValueType::kU8, spec.add_eos});
  return kvs;
}

}  // namespace folio::checkpoint
