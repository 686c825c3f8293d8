// Tokenizer::FromSpec: a tokenizer from GGUF-style plain data.
#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "folio/tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/unicode.h"

namespace folio::tokenizer {
namespace {

// Split patterns, in the Oniguruma syntax of the models' tokenizer.json
// files (llama.cpp's llama-vocab.cpp lists them per pre-tokenizer type,
// some rewritten for its own regex engine; where it gives the original
// tokenizer.json pattern, that one is used here).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt4oPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kTekkenPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kJais2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})";
constexpr std::string_view kSeedCoderPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kBailingMoePattern =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
constexpr std::string_view kUfakzekaPattern =
    R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kExaoneMoePattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)";
constexpr std::string_view kCjkKanaPattern = "[一-龥぀-ゟ゠-ヿ]+";
constexpr std::string_view kCjkHangulPattern = "[一-龥ࠀ-一가-퟿]+";
constexpr std::string_view kDeepseekV3Pattern =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kSpark25Pattern =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)re";
// DeepSeek-LLM's letters (a subset of Lu/Ll/Lt), with escapes: some are NFC
// singletons (U+1F7D, U+2126, U+212A, ...) an editor may silently replace.
constexpr std::string_view kDeepseekLlmLetters =
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-"
    "\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-"
    "\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556"
    "\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B"
    "\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D"
    "\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE"
    "\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4"
    "\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128"
    "\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184"
    "\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B"
    "\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17"
    "\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-"
    "\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF"
    "\U0001E900-\U0001E943]+";
constexpr std::string_view kBloomPattern = R"( ?[^(\s|.,!?…。，、।۔،)]+)";
constexpr std::string_view kYoutuCjkPattern =
    R"([가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+)";
constexpr std::string_view kYoutuPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLagunaPattern =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

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

// One split step: a regex whose matches become pieces (Isolated), or,
// where the family's tokenizer.json has Digits(individual_digits), that.
struct SplitStep {
  std::string_view pattern;  // empty for the digits step
};
constexpr SplitStep kDigitsStep{};

// A family of GGUF pre-tokenizer names (tokenizer.ggml.pre) that split
// alike, as llama.cpp's vocabulary loader maps them: the steps in order,
// whether merges are skipped for words in the vocabulary, NFC.
struct PreTokenizerFamily {
  std::vector<std::string_view> names;
  std::vector<SplitStep> steps;
  bool ignore_merges = false;
  bool nfc = false;
};

const std::vector<PreTokenizerFamily>& PreTokenizerFamilies() {
  static const auto* families = new std::vector<PreTokenizerFamily>{
      // llama.cpp and the tokenizer.json files both ignore merges here.
      {{"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
        "jina-v5-nano"},
       {{kLlama3Pattern}},
       true},
      {{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {{kLlama3Pattern}}},
      {{"qwen2", "deepseek-r1-qwen"}, {{kQwen2Pattern}}, false, true},  // tokenizer.json: NFC
      {{"stablelm2", "kormo", "f2llmv2", "megrez", "hunyuan", "solar-open", "grok-2"},
       {{kQwen2Pattern}}},
      {{"qwen35"}, {{kQwen35Pattern}}},
      {{"gpt-2", "default", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
        "a.x-4.0", "mellum", "modern-bert", "mpt", "olmo", "jais", "trillion", "granite-docling",
        "exaone4"},
       {{kGpt2Pattern}}},
      // tokenizer.json: Digits(individual_digits) then ByteLevel.
      {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b",
        "mellum2"},
       {kDigitsStep, {kGpt2Pattern}}},
      {{"deepseek-llm"},
       {{R"([\r\n])"},
        {kDeepseekLlmLetters},
        {R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)"},
        {R"(\s+$)"},
        {kCjkHangulPattern},
        {R"(\p{N}+)"}}},
      {{"deepseek-coder"},
       {{R"([\r\n])"}, {R"(\s?\p{L}+)"}, {R"(\s?\p{P}+)"}, {kCjkHangulPattern}, {R"(\p{N})"}}},
      {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
       {{R"(\p{N}{1,3})"}, {kCjkKanaPattern}, {kDeepseekV3Pattern}}},
      {{"spark2_5"}, {{R"(\p{N}{1,3})"}, {kCjkKanaPattern}, {kSpark25Pattern}, {R"(\p{N})"}}},
      {{"falcon"}, {{R"([\p{P}\$\+<=>\^~\|`]+)"}, {kGpt2Pattern}, {R"([0-9][0-9][0-9])"}}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {{kBloomPattern}}},
      {{"viking"}, {{kBloomPattern}, {R"(\p{N})"}}},
      {{"tekken"}, {{kTekkenPattern}}, true},
      {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {{kGpt4oPattern}}},
      {{"chameleon"},
       {{R"(<sentinel:[0-9]+>)"},
        {R"((IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z)"},
        {"([\\t\\n]|    |  )"},
        {R"(\p{N})"},
        {R"([\p{P}!-/:-@\[-`{-~])"},
        {kGpt2Pattern}}},
      {{"jais-2"}, {{kJais2Pattern}}},
      {{"seed-coder"}, {{kSeedCoderPattern}}},
      {{"bailingmoe", "bailingmoe2", "llada-moe"}, {{kBailingMoePattern}}},
      {{"ufakzeka"}, {{kUfakzekaPattern}}},
      {{"exaone-moe"}, {{kExaoneMoePattern}}},
      {{"youtu"}, {{kYoutuCjkPattern}, {kYoutuPattern}}, true},
      {{"laguna"}, {{R"([^\n]+|[\n]+)"}, {kLagunaPattern}}},
  };
  return *families;
}

const PreTokenizerFamily* FindPreTokenizer(std::string_view name) {
  for (const PreTokenizerFamily& f : PreTokenizerFamilies()) {
    for (std::string_view n : f.names) {
      if (n == name) return &f;
    }
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> Tokenizer::KnownPreTokenizers() {
  std::vector<std::string> names;
  for (const PreTokenizerFamily& f : PreTokenizerFamilies()) {
    names.insert(names.end(), f.names.begin(), f.names.end());
  }
  return names;
}

Result<TokenizerSpec> Tokenizer::ToGgufSpec() const {
  const TokenizerImpl& t = *impl_;
  if (t.kind != TokenizerImpl::Kind::kByteLevelBpe) {
    return Status::Unimplemented(
        "GGUF tokenizer keys: only byte-level BPE tokenizers are written, not SentencePiece or "
        "WordPiece");
  }
  // GGUF names NFC (through the pre-tokenizer family) and nothing else.
  const bool nfc = t.normalizers.size() == 1 && t.normalizers[0].kind == NormalizerStep::Kind::kNfc;
  if (!t.normalizers.empty() && !nfc) {
    return Status::Unimplemented(
        "GGUF tokenizer keys: a normalizer other than NFC has no GGUF key");
  }
  TokenizerSpec spec;
  spec.model = TokenizerSpec::Model::kBpe;
  const size_t n = t.vocab.size();
  spec.tokens.resize(n);
  spec.token_types.assign(n, 1);
  for (size_t id = 0; id < n; ++id) {
    if (!t.has_token[id]) {
      return Status::Unimplemented("GGUF tokenizer keys: id " + std::to_string(id) +
                                   " has no token, and a GGUF vocabulary is dense");
    }
    spec.tokens[id] = t.vocab[id];
  }
  for (const AddedToken& a : t.added) {
    spec.token_types[static_cast<size_t>(a.id)] = a.special ? 3 : 4;
  }
  std::vector<std::pair<int32_t, uint64_t>> ranked;  // (rank, left << 32 | right)
  ranked.reserve(t.merges.size());
  for (const auto& [pair, merged] : t.merges) ranked.emplace_back(merged.first, pair);
  std::sort(ranked.begin(), ranked.end());
  spec.merges.reserve(ranked.size());
  for (const auto& [rank, pair] : ranked) {
    spec.merges.push_back(t.vocab[pair >> 32] + " " + t.vocab[pair & 0xffffffffu]);
  }
  spec.bos_id = t.bos;
  spec.eos_id = t.eos;
  spec.unk_id = t.unk_id;
  const auto one_of = [](const std::vector<int32_t>& ids, std::optional<int32_t> id) {
    return ids.size() == 1 && id == ids[0];
  };
  if (!(t.prefix.empty() || one_of(t.prefix, t.bos)) ||
      !(t.suffix.empty() || one_of(t.suffix, t.eos))) {
    return Status::Unimplemented(
        "GGUF tokenizer keys: the post-processor adds tokens other than one bos before and one "
        "eos after the text");
  }
  spec.add_bos = !t.prefix.empty();
  spec.add_eos = !t.suffix.empty();

  // The probe: text on which the known families split differently.
  static constexpr std::string_view kProbes[] = {
      "Hello world! It's 3.14159 and 1234567 apples, isn't it? I'M FINE, you'll SEE.",
      "  two  spaces\n\n\tand tabs\r\n   trailing   ",
      "def f(x):\n    return x**2 + 0x1F  # comment; a_b=c->d != e\n",
      "你好世界 こんにちは 안녕 สวัสดี 🚀😀👍🏽",
      "Cafe\u0301 cafe\u0301 naïve — “quoted” \u00a0nbsp ！？。",  // decomposed é: NFC
      "3333333333 22 1 000 12.50$ 100% #1 v2.0.1 2024-01-31 ...!!! ???",
      "\n \n\n \t\t \u3000x  y\u00a0\u00a0z",
      "I'm sure they'd've done it; 'quoted'. it'sand we'llama O'Neil WE'D'VE DONE IT'S",
      "In 2024, 1234567 paid $3.50 (+12.5%) ٣٤٥ ½². a1b22c333d4444 x1234y",
      "東京は日本の首都です。北京是中国的首都。서울은 ﾃｽﾄ Ωmega K \u212a ﬁ 🇫🇷🇩🇪",
      "HelloWorld camelCaseXMLParser snake_case __init__ <sentinel:12> a<=b&&c!=d",
      "a,b.c!d?e…f。g，h、i।j۔k،l (paren|pipe) ¿¡ «»",
  };

  // Compared as the pre-tokenizer's words (NFC applied where both use it),
  // not ids: with few merges, ids hide how the text was split.
  const auto words = [](const TokenizerImpl& impl, std::string_view probe) {
    return PreTokenizedWords(impl, Normalize(impl.normalizers, probe));
  };
  std::vector<std::vector<std::string>> want;
  for (std::string_view probe : kProbes) {
    FOLIO_ASSIGN_OR_RETURN(std::vector<std::string> w, words(t, probe));
    want.push_back(std::move(w));
  }
  size_t tried = 0;
  for (const PreTokenizerFamily& family : PreTokenizerFamilies()) {
    if (family.ignore_merges != t.ignore_merges || family.nfc != nfc) continue;
    ++tried;
    spec.pre_tokenizer = std::string(family.names.front());
    Result<Tokenizer> candidate = FromSpec(spec);
    if (!candidate.ok()) continue;
    bool same = true;
    for (size_t i = 0; same && i < std::size(kProbes); ++i) {
      Result<std::vector<std::string>> w = words(*candidate->impl_, kProbes[i]);
      same = w.ok() && *w == want[i];
    }
    if (same) return spec;
  }
  return Status::Unimplemented("GGUF tokenizer keys: the tokenizer splits text like none of the " +
                               std::to_string(tried) +
                               " known pre-tokenizer families with its NFC and ignore_merges "
                               "settings");
}

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
  FOLIO_RETURN_IF_ERROR(CheckOptionalId("sep_id", spec.sep_id, n));
  const bool wordpiece = spec.model == TokenizerSpec::Model::kWordPiece;
  if (spec.add_bos && !spec.bos_id.has_value()) {
    return Invalid("add_bos without bos_id");
  }
  // EncodePair puts sep where there is no eos, as llama.cpp's reranker.
  if (spec.add_eos && !spec.eos_id.has_value() && !(wordpiece && spec.sep_id.has_value())) {
    return Invalid("add_eos without eos_id");
  }
  if (spec.add_sep && !spec.sep_id.has_value()) {
    return Invalid("add_sep without sep_id");
  }
  if (wordpiece) {
    for (const auto& [field, id] :
         {std::pair<const char*, const std::optional<int32_t>&>("unk_id", spec.unk_id),
          {"bos_id", spec.bos_id},
          {"sep_id", spec.sep_id}}) {
      if (!id.has_value()) return Invalid(std::string("a WordPiece model needs ") + field);
    }
  }
  if (wordpiece && !spec.pre_tokenizer.empty()) {
    return Status::Unimplemented("tokenizer spec: pre_tokenizer " + QuoteToken(spec.pre_tokenizer) +
                                 " given for a WordPiece model, which has a fixed one");
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
    if (wordpiece && type == kByte) {
      return Invalid("token " + std::to_string(id) + " " + QuoteToken(text) +
                     " is a byte token, which a WordPiece vocabulary has none of");
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
  if (wordpiece) {
    // llama.cpp's WPM adds CLS (bos) and SEP whatever the add_* keys say.
    t->prefix.push_back(*spec.bos_id);
    t->suffix.push_back(*spec.sep_id);
  } else {
    if (spec.add_bos) t->prefix.push_back(*spec.bos_id);
    if (spec.add_eos) t->suffix.push_back(*spec.eos_id);
  }
  // llama.cpp's reranker input (format_rerank): bos, A, eos (or sep), sep,
  // B, eos, each as the add_* keys say; B's part is segment 1.
  {
    using Item = TemplateItem;
    const std::optional<int32_t> eos = spec.eos_id.has_value() ? spec.eos_id : spec.sep_id;
    std::vector<Item> pair;
    if (spec.add_bos) pair.push_back({Item::Kind::kToken, *spec.bos_id, 0});
    pair.push_back({Item::Kind::kSequenceA, 0, 0});
    if (spec.add_eos) pair.push_back({Item::Kind::kToken, *eos, 0});
    if (spec.add_sep) pair.push_back({Item::Kind::kToken, *spec.sep_id, 0});
    pair.push_back({Item::Kind::kSequenceB, 0, 1});
    if (spec.add_eos) pair.push_back({Item::Kind::kToken, *eos, 1});
    t->pair_template = std::move(pair);
  }

  if (wordpiece) {
    t->kind = TokenizerImpl::Kind::kWpm;
    if (!spec.merges.empty()) return Invalid("merges given for a WordPiece model");
    t->wordpiece_ids = std::move(ids);
    t->wpm_lowercase = spec.lowercase;
    t->wpm_strip_accents = spec.strip_accents;
    t->unused.assign(n, 0);
    for (size_t id = 0; id < n && !spec.token_types.empty(); ++id) {
      t->unused[id] = spec.token_types[id] == kUnused ? 1 : 0;
    }
  } else if (spec.model == TokenizerSpec::Model::kSentencePiece) {
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
    const PreTokenizerFamily* family = FindPreTokenizer(spec.pre_tokenizer);
    if (family == nullptr) {
      std::string known;
      for (const std::string& name : KnownPreTokenizers()) {
        known += (known.empty() ? "" : ", ") + name;
      }
      return Status::Unimplemented("tokenizer spec: pre_tokenizer " +
                                   QuoteToken(spec.pre_tokenizer) +
                                   " is not supported (known: " + known + ")");
    }
    t->ignore_merges = family->ignore_merges;
    if (family->nfc) t->normalizers.push_back({NormalizerStep::Kind::kNfc});
    for (const SplitStep& s : family->steps) {
      PreSplitStep step;
      if (s.pattern.empty()) {
        step.kind = PreSplitStep::Kind::kDigits;
        step.individual_digits = true;
      } else {
        FOLIO_ASSIGN_OR_RETURN(step.regex, SplitRegex::Compile(s.pattern));
      }
      t->pre_splits.push_back(std::move(step));
    }
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
