// What a Tokenizer holds, shared by its two loaders (tokenizer_json.cc,
// tokenizer_spec.cc) and the encoder/decoder (bpe_tokenizer.cc).
#ifndef FOLIO_TOKENIZER_TOKENIZER_INTERNAL_H_
#define FOLIO_TOKENIZER_TOKENIZER_INTERNAL_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "folio/core/status.h"
#include "folio/tokenizer/tokenizer.h"
#include "tokenizer/split_regex.h"

namespace folio::tokenizer {

// Limits on what a loader accepts; real tokenizers are far below them
// (Llama-3: 128256 tokens, 280147 merges, a 9 MB tokenizer.json).
inline constexpr uint64_t kMaxTokenizerFileBytes = 128ull << 20;
inline constexpr int64_t kMaxVocabSize = int64_t{1} << 21;
inline constexpr size_t kMaxTokenBytes = 64 * 1024;
inline constexpr size_t kMaxMerges = size_t{1} << 22;
inline constexpr int kMaxComponentDepth = 8;  // nested Sequence components

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;      // treated as text when !allow_special
  bool single_word = false;  // only where no word character touches it
  bool lstrip = false;       // takes the whitespace on its left
  bool rstrip = false;       // takes the whitespace on its right
  bool normalized = false;   // matched in the normalized text
};

// Leftmost-longest matching of a fixed set of strings (what `tokenizers`
// does with aho-corasick's LeftmostLongest).
class LiteralMatcher {
 public:
  struct Match {
    size_t begin, end;
    int index;  // into the patterns given to Build
  };
  void Build(const std::vector<std::string>& patterns);
  std::vector<Match> FindAll(std::string_view text) const;
  bool empty() const { return patterns_.empty(); }

 private:
  std::vector<std::string> patterns_;
  std::array<std::vector<int>, 256> by_first_byte_;  // longest first
};

struct PreSplitStep {
  enum class Kind { kRegex, kDigits };
  Kind kind = Kind::kRegex;
  SplitRegex regex;                // kRegex: matches become pieces (Isolated)
  bool individual_digits = false;  // kDigits
};

struct TokenizerImpl {
  enum class Kind { kByteLevelBpe, kSentencePiece };
  Kind kind = Kind::kByteLevelBpe;

  // Filled by a loader. vocab[id] is the raw token text, has_token marks
  // ids that have one (a tokenizer.json may leave holes).
  std::vector<std::string> vocab;
  std::vector<uint8_t> has_token;
  std::vector<uint8_t> special;  // skipped by Decode when asked
  std::vector<AddedToken> added;

  bool nfc = false;
  std::vector<PreSplitStep> pre_splits;
  bool prefix_space = false;                   // ByteLevel add_prefix_space
  std::optional<SplitRegex> byte_level_regex;  // ByteLevel use_regex

  // BPE: merges as (left id << 32 | right id) -> (rank, merged id), and the
  // model's vocabulary by the bytes each token stands for.
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;
  std::unordered_map<std::string, int32_t> model_ids_by_bytes;
  bool ignore_merges = false;
  std::optional<int32_t> unk_id;
  bool fuse_unk = false;

  // SPM: scores per id, vocabulary by text.
  std::vector<float> scores;
  std::unordered_map<std::string, int32_t> spm_ids;
  bool add_space_prefix = false;

  std::vector<int32_t> prefix, suffix;  // added by add_special_tokens
  std::optional<int32_t> bos, eos;

  // Derived by FinishTokenizer.
  std::unordered_map<std::string, int32_t> token_ids;  // TokenId()
  std::vector<std::string> piece;                      // bytes Decode emits per id
  std::array<int32_t, 256> byte_ids{};                 // token of each byte, -1 if none
  LiteralMatcher raw_matcher;                          // added tokens matched before NFC
  LiteralMatcher normalized_matcher;                   // ... and after
  std::vector<int> raw_tokens, normalized_tokens;      // matcher index -> added
  // Tokenizer::max_bytes_per_token().
  std::optional<uint64_t> max_bytes_per_token;
};

using Span = std::pair<size_t, size_t>;  // [begin, end) bytes

// A piece of the input: plain text, or an added token already decided.
struct Segment {
  Span span;
  int32_t id;  // -1 for text
};

// Added-token splitting, as tokenizers' AddedVocabulary::find_matches.
// Byte-level BPE: the words the pre-tokenizer makes of normalized text (no
// added tokens), before BPE; kResourceExhausted as Encode.
Result<std::vector<std::string>> PreTokenizedWords(const TokenizerImpl& t, std::string_view s);

std::vector<Segment> SplitOnAdded(const TokenizerImpl& t, std::string_view s,
                                  const LiteralMatcher& matcher, const std::vector<int>& token_of,
                                  bool allow_special);

// SentencePiece encoding of `text` (spm_tokenizer.cc), appended to *ids.
Status EncodeSpm(const TokenizerImpl& t, std::string_view text, bool allow_special,
                 std::vector<int32_t>* ids);

inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581

// GPT-2 byte-level form -> bytes, if every character is in the byte map.
std::optional<std::string> ByteLevelToBytes(std::string_view token);

inline bool ValidId(const TokenizerImpl& t, int32_t id) {
  return id >= 0 && static_cast<size_t>(id) < t.vocab.size() &&
         t.has_token[static_cast<size_t>(id)] != 0;
}

// Builds the derived tables and checks what loaders share: ids in range,
// added tokens. Errors: kInvalidArgument naming the token.
Status FinishTokenizer(TokenizerImpl* impl);

// Message helpers: untrusted text is clipped and quoted.
std::string QuoteToken(std::string_view s);

}  // namespace folio::tokenizer

#endif  // FOLIO_TOKENIZER_TOKENIZER_INTERNAL_H_
