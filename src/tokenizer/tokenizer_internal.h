// What a Tokenizer holds, shared by its two loaders (tokenizer_json.cc,
// tokenizer_spec.cc), the pipeline steps (normalizer.cc, pre_tokenizer.cc),
// the models (bpe_tokenizer.cc, spm_tokenizer.cc, wordpiece_tokenizer.cc)
// and Encode / Decode (tokenizer.cc).
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

// One normalizer of `tokenizers`, applied in order (a Sequence is a list).
struct NormalizerStep {
  enum class Kind {
    kNfc,
    kNfd,
    kLowercase,     // Rust's char::to_lowercase
    kStripAccents,  // drops unicode::kCombiningMark characters (no NFD)
    kBert,          // BertNormalizer, its options below
  };
  Kind kind = Kind::kNfc;
  bool clean_text = false;            // drop controls, whitespace -> ' '
  bool handle_chinese_chars = false;  // ' ' around each CJK ideograph
  bool strip_accents = false;         // NFD, then drop nonspacing marks
  bool lowercase = false;
};

// The normalizers applied to valid UTF-8, in order.
std::string Normalize(const std::vector<NormalizerStep>& steps, std::string_view s);

// One pre-tokenizer split of every piece.
struct PreSplitStep {
  enum class Kind {
    kRegex,            // Split: matches and gaps become pieces (Isolated)
    kDigits,           // Digits: numeric runs (or characters) isolated
    kBert,             // BertPreTokenizer: whitespace removed, punctuation isolated
    kWhitespace,       // Whitespace: \w+|[^\w\s]+, whitespace removed
    kWhitespaceSplit,  // WhitespaceSplit: whitespace removed
  };
  Kind kind = Kind::kRegex;
  SplitRegex regex;                // kRegex
  bool individual_digits = false;  // kDigits
};

using Span = std::pair<size_t, size_t>;  // [begin, end) bytes

// One step on one piece of s: appends the pieces it leaves to *out.
Status SplitPiece(const PreSplitStep& step, std::string_view s, Span piece, std::vector<Span>* out);
// Applies the split steps to normalized text: *pieces (empty on entry) gets
// the non-empty pieces in order. Errors: kResourceExhausted from a regex.
Status PreSplit(const std::vector<PreSplitStep>& steps, std::string_view s,
                std::vector<Span>* pieces);

// One item of a post-processor's template: a special token or a sequence.
struct TemplateItem {
  enum class Kind { kSequenceA, kSequenceB, kToken };
  Kind kind = Kind::kToken;
  int32_t id = 0;       // kToken
  int32_t type_id = 0;  // token type id of the item's ids
};

struct TokenizerImpl {
  enum class Kind {
    kByteLevelBpe,
    kSentencePiece,
    kWordPiece,  // tokenizer.json's WordPiece, as `tokenizers`
    kWpm,        // GGUF "bert": llama.cpp's WordPiece over a phantom-space vocabulary
  };
  Kind kind = Kind::kByteLevelBpe;

  // Filled by a loader. vocab[id] is the raw token text, has_token marks
  // ids that have one (a tokenizer.json may leave holes).
  std::vector<std::string> vocab;
  std::vector<uint8_t> has_token;
  std::vector<uint8_t> special;  // skipped by Decode when asked
  std::vector<AddedToken> added;

  std::vector<NormalizerStep> normalizers;
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

  // WordPiece: the model's vocabulary by text (kWpm: every token), the
  // distinct byte lengths of its entries, longest first (the only lengths a
  // match can have), and kWordPiece's options.
  std::unordered_map<std::string, int32_t> wordpiece_ids;
  std::vector<size_t> wordpiece_lengths;
  std::string continuing_prefix;          // of a word's later pieces
  uint64_t max_input_chars_per_word = 0;  // a longer word is unk
  bool wpm_lowercase = true;              // kWpm: llama.cpp's options
  bool wpm_strip_accents = true;
  std::vector<uint8_t> unused;  // kWpm: GGUF type 5, decoded to nothing
  // kWordPiece's decoder: WordPiece (prefix, cleanup), or none (tokens
  // joined with spaces).
  bool wordpiece_decoder = false;
  std::string decoder_prefix;
  bool decoder_cleanup = false;

  std::vector<int32_t> prefix, suffix;                     // added by add_special_tokens
  std::optional<std::vector<TemplateItem>> pair_template;  // EncodePair
  std::optional<int32_t> bos, eos;

  // Derived by FinishTokenizer.
  std::unordered_map<std::string, int32_t> token_ids;  // TokenId()
  std::vector<std::string> piece;                      // bytes Decode emits per id
  std::vector<std::string> piece_first;                // kWordPiece: ... for the first id
  std::array<int32_t, 256> byte_ids{};                 // token of each byte, -1 if none
  LiteralMatcher raw_matcher;                          // added tokens matched before NFC
  LiteralMatcher normalized_matcher;                   // ... and after
  std::vector<int> raw_tokens, normalized_tokens;      // matcher index -> added
  // Tokenizer::max_bytes_per_token().
  std::optional<uint64_t> max_bytes_per_token;
};

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

// Byte-level BPE of normalized text between added tokens
// (bpe_tokenizer.cc), appended to *ids.
Status EncodeBpe(const TokenizerImpl& t, std::string_view normalized, std::vector<int32_t>* ids);

// kWordPiece: the pre-tokenizer's words of normalized text, each greedily
// split into the longest vocabulary pieces (wordpiece_tokenizer.cc).
Status EncodeWordPiece(const TokenizerImpl& t, std::string_view normalized,
                       std::vector<int32_t>* ids);
// kWpm: llama.cpp's WordPiece of raw text between added tokens.
void EncodeWpm(const TokenizerImpl& t, std::string_view text, std::vector<int32_t>* ids);

// tokenizers' WordPiece decoder cleanup of one token's text.
std::string WordPieceCleanup(std::string text);
// llama.cpp's detokenizer space cleanup (clean_spaces), streaming: appends
// to *out what `in` decides and keeps in *state what later bytes may still
// change; Finish appends the rest. Feeding text in any split gives the
// same output as feeding it whole.
void SpaceCleanupFeed(std::string_view in, SpaceCleanupState* state, std::string* out);
void SpaceCleanupFinish(SpaceCleanupState* state, std::string* out);

// The pieces Decode emits for a WordPiece vocabulary (FinishTokenizer),
// from each id's text (texts[id]: the vocabulary's, or a normalized added
// token's normalized content).
void BuildWordPiecePieces(TokenizerImpl* t, const std::vector<std::string>& texts);

inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581

// GPT-2 byte-level form -> bytes, if every character is in the byte map.
std::optional<std::string> ByteLevelToBytes(std::string_view token);

inline bool ValidId(const TokenizerImpl& t, int32_t id) {
  return id >= 0 && static_cast<size_t>(id) < t.vocab.size() &&
         t.has_token[static_cast<size_t>(id)] != 0;
}

// Builds the derived tables and checks what loaders share: ids in range,
// added tokens, the WordPiece lookup lengths. Errors: kInvalidArgument
// naming the token.
Status FinishTokenizer(TokenizerImpl* impl);

// Message helpers: untrusted text is clipped and quoted.
std::string QuoteToken(std::string_view s);

}  // namespace folio::tokenizer

#endif  // FOLIO_TOKENIZER_TOKENIZER_INTERNAL_H_
