// Tokenizer::FromSpec: a tokenizer from GGUF-style plain data.
#include <memory>

#include "folio/tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"

namespace folio::tokenizer {
namespace {

// The split patterns llama.cpp and `tokenizers` use for these models.
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

Status Invalid(const std::string& m) { return Status::InvalidArgument("tokenizer spec: " + m); }

Status CheckOptionalId(const char* field, const std::optional<int32_t>& id, size_t n) {
  if (id.has_value() && (*id < 0 || static_cast<size_t>(*id) >= n)) {
    return Invalid(std::string(field) + " " + std::to_string(*id) +
                   " is outside the vocabulary of " + std::to_string(n));
  }
  return Status::Ok();
}

// A GGUF pre-tokenizer name's splitting, as llama.cpp's vocabulary loader
// and the model's tokenizer.json do it: the split patterns in order (a
// digits step first for the families whose tokenizer.json starts with
// Digits(individual_digits)), whether merges are skipped for words in the
// vocabulary, and NFC normalization. An empty `patterns` means unknown.
struct PreTokenizerSplits {
  bool individual_digits = false;  // a Digits step before the regex
  std::string_view pattern;
  bool ignore_merges = false;
  bool nfc = false;
};

PreTokenizerSplits SplitsForPreTokenizer(std::string_view name) {
  if (name == "llama-bpe" || name == "llama3") {
    return {false, kLlama3Pattern, true, false};  // llama.cpp and tokenizer.json both ignore merges
  }
  if (name == "qwen2") return {false, kQwen2Pattern, false, true};  // tokenizer.json: NFC
  if (name == "gpt-2" || name == "default") return {false, kGpt2Pattern, false, false};
  // SmolLM's tokenizer.json: Digits(individual_digits) then ByteLevel.
  if (name == "smollm") return {true, kGpt2Pattern, false, false};
  return {};
}

}  // namespace

Result<Tokenizer> Tokenizer::FromSpec(TokenizerSpec spec) {
  const size_t n = spec.tokens.size();
  if (n == 0) return Invalid("tokens is empty");
  if (n > static_cast<size_t>(kMaxVocabSize)) {
    return Status::ResourceExhausted("tokenizer spec: " + std::to_string(n) + " tokens, limit " +
                                     std::to_string(kMaxVocabSize));
  }
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    return Invalid("token_types has " + std::to_string(spec.token_types.size()) + " entries for " +
                   std::to_string(n) + " tokens");
  }
  if (spec.merges.size() > kMaxMerges) {
    return Status::ResourceExhausted("tokenizer spec: " + std::to_string(spec.merges.size()) +
                                     " merges, limit " + std::to_string(kMaxMerges));
  }
  FOLIO_RETURN_IF_ERROR(CheckOptionalId("bos_id", spec.bos_id, n));
  FOLIO_RETURN_IF_ERROR(CheckOptionalId("eos_id", spec.eos_id, n));
  FOLIO_RETURN_IF_ERROR(CheckOptionalId("unk_id", spec.unk_id, n));
  FOLIO_RETURN_IF_ERROR(CheckOptionalId("pad_id", spec.pad_id, n));
  if (spec.add_bos && !spec.bos_id.has_value()) {
    return Invalid("add_bos without bos_id");
  }
  if (spec.add_eos && !spec.eos_id.has_value()) {
    return Invalid("add_eos without eos_id");
  }

  auto t = std::make_shared<TokenizerImpl>();
  t->vocab = std::move(spec.tokens);
  t->has_token.assign(n, 1);
  t->special.assign(n, 0);
  std::unordered_map<std::string, int32_t> ids;
  ids.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    const std::string& text = t->vocab[id];
    if (text.size() > kMaxTokenBytes) {
      return Status::ResourceExhausted("tokenizer spec: token " + std::to_string(id) + " is " +
                                       std::to_string(text.size()) + " bytes, limit " +
                                       std::to_string(kMaxTokenBytes));
    }
    auto [it, inserted] = ids.emplace(text, static_cast<int32_t>(id));
    if (!inserted) {
      return Invalid("token " + std::to_string(id) + " " + QuoteToken(text) + " repeats token " +
                     std::to_string(it->second));
    }
    const int32_t type = spec.token_types.empty() ? kNormal : spec.token_types[id];
    if (type < kNormal || type > kByte) {
      return Invalid("token " + std::to_string(id) + " has type " + std::to_string(type) +
                     " (types are 1..6)");
    }
    if (type == kUnknown || type == kControl || type == kUserDefined) {
      AddedToken a;
      a.content = text;
      a.id = static_cast<int32_t>(id);
      a.special = type != kUserDefined;
      t->added.push_back(std::move(a));
      t->special[id] = type != kUserDefined ? 1 : 0;
    }
  }
  t->unk_id = spec.unk_id;
  t->bos = spec.bos_id;
  t->eos = spec.eos_id;
  if (spec.add_bos) t->prefix.push_back(*spec.bos_id);
  if (spec.add_eos) t->suffix.push_back(*spec.eos_id);

  if (spec.model == TokenizerSpec::Model::kSentencePiece) {
    if (spec.scores.size() != n) {
      return Invalid("scores has " + std::to_string(spec.scores.size()) + " entries for " +
                     std::to_string(n) + " tokens");
    }
    if (!spec.merges.empty()) {
      return Invalid("merges given for a SentencePiece model");
    }
    t->kind = TokenizerImpl::Kind::kSentencePiece;
    t->scores = std::move(spec.scores);
    t->spm_ids = std::move(ids);
    t->add_space_prefix = spec.add_space_prefix;
    for (size_t id = 0; id < n; ++id) {
      const int32_t type = spec.token_types.empty() ? kNormal : spec.token_types[id];
      const std::string& text = t->vocab[id];
      unsigned byte = 0;
      char tail = 0;
      if (type == kByte &&
          !(text.size() == 6 && std::sscanf(text.c_str(), "<0x%2X%c", &byte, &tail) == 2 &&
            tail == '>')) {
        return Invalid("byte token " + std::to_string(id) + " " + QuoteToken(text) +
                       " is not of the form <0xNN>");
      }
    }
  } else {
    t->kind = TokenizerImpl::Kind::kByteLevelBpe;
    const PreTokenizerSplits splits = SplitsForPreTokenizer(spec.pre_tokenizer);
    if (splits.pattern.empty()) {
      return Status::Unimplemented("tokenizer spec: pre_tokenizer " +
                                   QuoteToken(spec.pre_tokenizer) +
                                   " is not supported (llama-bpe, llama3, qwen2, "
                                   "smollm, gpt-2, default are)");
    }
    t->ignore_merges = splits.ignore_merges;
    t->nfc = splits.nfc;
    if (splits.individual_digits) {
      PreSplitStep digits;
      digits.kind = PreSplitStep::Kind::kDigits;
      digits.individual_digits = true;
      t->pre_splits.push_back(std::move(digits));
    }
    PreSplitStep step;
    FOLIO_ASSIGN_OR_RETURN(step.regex, SplitRegex::Compile(splits.pattern));
    t->pre_splits.push_back(std::move(step));
    for (size_t id = 0; id < n; ++id) {
      if (auto bytes = ByteLevelToBytes(t->vocab[id])) {
        t->model_ids_by_bytes.emplace(*std::move(bytes), static_cast<int32_t>(id));
      }
    }
    t->merges.reserve(spec.merges.size());
    for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
      const std::string& m = spec.merges[rank];
      const size_t space = m.find(' ');
      if (space == std::string::npos || m.find(' ', space + 1) != std::string::npos) {
        return Invalid("merge " + std::to_string(rank) + " " + QuoteToken(m) +
                       " is not two tokens separated by one space");
      }
      const std::string left = m.substr(0, space), right = m.substr(space + 1);
      auto l = ids.find(left), r = ids.find(right), merged = ids.find(left + right);
      if (l == ids.end() || r == ids.end() || merged == ids.end()) {
        return Invalid("merge " + std::to_string(rank) + " " + QuoteToken(m) +
                       " names a token that is not in the vocabulary");
      }
      const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(l->second)) << 32) |
                           static_cast<uint32_t>(r->second);
      if (!t->merges.emplace(key, std::make_pair(static_cast<int32_t>(rank), merged->second))
               .second) {
        return Invalid("merge " + std::to_string(rank) + " " + QuoteToken(m) +
                       " repeats an earlier merge");
      }
    }
  }
  FOLIO_RETURN_IF_ERROR(FinishTokenizer(t.get()));
  return Tokenizer(std::move(t));
}

}  // namespace folio::tokenizer
