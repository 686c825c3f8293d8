// Text <-> token ids for real checkpoints: byte-level BPE (GPT-2, Llama-3,
// Qwen2/Qwen3), llama-style SentencePiece and WordPiece (BERT, MiniLM,
// BGE), exact against Hugging Face `tokenizers` 0.23.3 for the
// configurations listed below, and against llama.cpp for GGUF files.
//
// Two ways in:
//   * FromTokenizerJson: a Hugging Face tokenizer.json (model "BPE" with
//     byte-level pre-tokenizer and decoder, or model "WordPiece").
//   * FromSpec: plain data, as the GGUF loader reads it from the
//     tokenizer.ggml.* metadata; no file format is parsed here.
//
// What is supported (everything else is refused with kUnimplemented naming
// the component, never read approximately):
//   normalizer      null, NFC, NFD, Lowercase, StripAccents,
//                   BertNormalizer (clean_text, handle_chinese_chars,
//                   strip_accents true / false / null = follow lowercase,
//                   lowercase), Sequence of those
//   pre_tokenizer   Sequence of Split (Regex or String pattern, behavior
//                   Isolated, invert false), Digits, BertPreTokenizer,
//                   Whitespace and WhitespaceSplit; for BPE ending in
//                   ByteLevel (add_prefix_space, use_regex with the GPT-2
//                   pattern), for WordPiece without ByteLevel (or null)
//   model           BPE: vocab, merges ("a b" strings or ["a", "b"] pairs),
//                   ignore_merges, unk_token / fuse_unk; no dropout,
//                   continuing_subword_prefix, end_of_word_suffix or
//                   byte_fallback.
//                   WordPiece: vocab, unk_token (must be in vocab),
//                   continuing_subword_prefix, max_input_chars_per_word
//   added_tokens    special, single_word, lstrip, rstrip, normalized
//   post_processor  null, ByteLevel, TemplateProcessing (the "single"
//                   template: special tokens around one $A; the "pair"
//                   template, for EncodePair: $A and $B once each),
//                   BertProcessing, Sequence
//   decoder         ByteLevel (BPE); WordPiece (prefix, cleanup) or null
//                   (tokens joined with spaces) for WordPiece
//   truncation, padding  read and ignored: they shape batches, and Encode
//                   returns every id of the text unpadded
// Split patterns are Oniguruma syntax (what `tokenizers` uses); folio runs
// them with PCRE2 after writing \s, \p{..} and \d out as explicit Unicode
// 16.0 ranges, the tables `tokenizers` 0.23 has; src/tokenizer/split_regex.h
// lists the accepted syntax. NFC, NFD, the Digits pre-tokenizer,
// single_word and the BERT components (which character is a control, a
// punctuation, a nonspacing mark, a word character, what it lowercases
// to) follow the Unicode data `tokenizers` itself uses (tools/
// gen_unicode_tables.py reads it off the library), so they agree with it
// on every code point.
//
// WordPiece in GGUF ("bert", TokenizerSpec::Model::kWordPiece) follows
// llama.cpp's WPM tokenizer, which reads a vocabulary its converter
// rewrote: "##x" became "x", a control token ([CLS]) stayed as it was, any
// other "x" became "▁x" (U+2581). It differs from `tokenizers` on the same
// model:
//   * no BertNormalizer options but tokenizer.ggml.normalizer.lowercase
//     (default true) and .strip_accents (default: as lowercase); clean_text
//     and handle_chinese_chars are always on;
//   * "NFD" keeps only the first code point of a character's canonical
//     decomposition (Unicode 16 data here; a Hangul syllable becomes its
//     leading consonant jamo), and accents stripped are all marks (Mn, Mc,
//     Me) of Unicode 16, not `tokenizers`' older Mn;
//   * lowercase is Unicode's simple mapping (U+0130 -> i, where
//     `tokenizers` gives i + U+0307);
//   * controls are the Unicode 16 Cc, Cf, Co, Cs (unassigned code points
//     stay), and U+000B, U+000C, U+0085 split words as whitespace where
//     `tokenizers` drops them;
//   * punctuation is Unicode 16 P* plus the ASCII symbols $ + < = > ^ ` | ~;
//   * no max_input_chars_per_word: a word of any length is split;
//   * Encode(add_special_tokens) adds bos (CLS) and the separator (SEP)
//     whatever tokenizer.ggml.add_bos_token / add_eos_token say;
//   * Decode writes each word-initial token with its leading space (so the
//     text starts with one) and then applies llama.cpp's clean_spaces to
//     the whole text (" ." -> ".", " ' " -> "'", " 's" -> "'s", ...), where
//     `tokenizers` cleans each token alone;
//   * added tokens are matched longest-leftmost, as for the other GGUF
//     vocabularies (llama.cpp matches the longest special token first
//     everywhere, which differs only for overlapping special tokens).
// llama.cpp generates its Unicode tables from the UCD of its last
// regeneration, so code points assigned or changed after Unicode 16 may
// differ.
//
// Deliberate differences from `tokenizers`: Decode refuses an unknown id
// (tokenizers drops it), and Encode refuses a byte with no token and no unk
// token (tokenizers drops it).
//
// Thread safety: a Tokenizer is immutable after construction; Encode and
// Decode may run concurrently. Copies share the same tables.
#ifndef FOLIO_TOKENIZER_TOKENIZER_H_
#define FOLIO_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/status.h"

namespace folio::tokenizer {

// What the GGUF loader passes (from tokenizer.ggml.* metadata).
struct TokenizerSpec {
  enum class Model {
    kBpe,            // gpt2-style byte-level BPE ("gpt2" in GGUF)
    kSentencePiece,  // llama SPM: ▁ spaces, <0xNN> byte fallback, scores
    kWordPiece,      // llama.cpp's WPM ("bert" in GGUF): phantom-space vocabulary
  };
  Model model = Model::kBpe;
  std::vector<std::string> tokens;  // id -> token string
  std::vector<float> scores;        // SPM merge scores; required for SPM
  // GGUF token types: 1 normal, 2 unknown, 3 control, 4 user defined,
  // 5 unused, 6 byte. Empty means all normal. Control and unknown tokens
  // are special (matched in text only when allow_special, skipped by
  // Decode when asked); user-defined tokens are always matched in text.
  // WordPiece: an unused token decodes to nothing (llama.cpp's
  // token_to_piece), and byte tokens are refused.
  std::vector<int32_t> token_types;
  std::vector<std::string> merges;  // "a b" pairs, BPE only, rank = index
  // tokenizer.ggml.pre, BPE only: one of Tokenizer::KnownPreTokenizers(),
  // the names llama.cpp's vocabulary loader maps to split regexes (e.g.
  // "llama-bpe" / "llama3": Llama-3 pattern and ignore_merges; "qwen2":
  // Qwen2 pattern and NFC; "gpt-2" / "default": GPT-2 pattern).
  std::string pre_tokenizer;
  std::optional<int32_t> bos_id, eos_id, unk_id, pad_id;
  // tokenizer.ggml.seperator_token_id (sic).
  std::optional<int32_t> sep_id;
  // add_bos / add_eos: Encode's bos before and eos after the text. A
  // WordPiece spec ignores them there and always adds bos (CLS) and sep, as
  // llama.cpp does. EncodePair follows llama.cpp's reranker input: bos if
  // add_bos, A, eos (sep where there is no eos) if add_eos, sep if add_sep,
  // B, eos again if add_eos.
  bool add_bos = false, add_eos = false, add_sep = false;
  // tokenizer.ggml.add_space_prefix, SPM only: a ▁ before the text and
  // after every matched special / user-defined token, and one leading space
  // dropped again by Decode.
  bool add_space_prefix = true;
  // tokenizer.ggml.normalizer.lowercase / .strip_accents, WordPiece only.
  bool lowercase = true;
  bool strip_accents = true;
};

// Ids of an encoded pair of texts and the token type id (segment) of each.
struct Encoding {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;  // same length as ids
};

// What llama.cpp's detokenizer space cleanup (GGUF WordPiece) holds back
// until later text decides it; StreamingDecoder's state.
struct SpaceCleanupState {
  std::string held[3];  // per pass, at most three bytes each
};

struct TokenizerImpl;  // src/tokenizer/tokenizer_internal.h

class Tokenizer {
 public:
  // Reads a Hugging Face tokenizer.json. If a tokenizer_config.json sits
  // beside it, its "bos_token" / "eos_token" name bos_id() / eos_id();
  // otherwise they come from the post-processor's template (a single
  // special token before / after $A), or stay empty.
  // Errors: kIoError (unreadable), kCorruption (malformed JSON, a field of
  // the wrong type, duplicated keys or ids, ids out of range, merges naming
  // unknown tokens, an invalid regex), kResourceExhausted (a size past
  // the limits in tokenizer_internal.h), kUnimplemented (a component or
  // option folio does not support, named in the message).
  static Result<Tokenizer> FromTokenizerJson(const std::filesystem::path& path);
  // Errors: kInvalidArgument (inconsistent spec, naming the field and
  // value; a WordPiece spec needs unk_id, bos_id and sep_id),
  // kResourceExhausted, kUnimplemented (unknown pre_tokenizer, or one given
  // for a WordPiece model).
  static Result<Tokenizer> FromSpec(TokenizerSpec spec);
  // The TokenizerSpec::pre_tokenizer names FromSpec accepts, grouped by
  // family (names that split alike are adjacent).
  static std::vector<std::string> KnownPreTokenizers();

  // The spec a GGUF file would carry for this byte-level BPE tokenizer
  // (read from a tokenizer.json): its tokens, types (special added tokens
  // control, other added tokens user-defined), merges in rank order,
  // bos/eos/unk and whether bos/eos are added, and the pre-tokenizer name.
  // The name is the first of KnownPreTokenizers() whose family has this
  // tokenizer's NFC and ignore_merges settings and whose tokenizer, built
  // from the same vocabulary, splits a set of awkward probe texts (digits,
  // CJK, emoji, contractions, whitespace runs, code, combining marks) into
  // the same words before BPE (llama.cpp's converter compares the ids of a
  // probe text, which a vocabulary with few merges can leave equal). Added tokens'
  // lstrip/rstrip/single_word have no GGUF key and are dropped. Errors: kUnimplemented for a
  // SentencePiece tokenizer, a vocabulary with holes, a prefix or suffix
  // other than one bos / eos, or when no known name splits alike (naming
  // how many were tried).
  Result<TokenizerSpec> ToGgufSpec() const;

  // Encodes UTF-8 text. Added/special tokens that appear literally in the
  // text are matched leftmost-longest first; with allow_special false the
  // special ones are treated as plain text (non-special added tokens are
  // still matched, as in `tokenizers`' encode_special_tokens).
  // add_special_tokens adds the post-processor's / spec's bos and eos.
  // Errors: kInvalidArgument (text is not valid UTF-8, naming the byte
  // offset), kNotFound (a byte with no token and no unk token),
  // kResourceExhausted (the split regex hit its backtracking limit).
  Result<std::vector<int32_t>> Encode(std::string_view text, bool add_special_tokens,
                                      bool allow_special = true) const;

  // Encodes a pair of texts (a cross-encoder's query and document) into the
  // post-processor's "pair" template, special tokens included: for BERT
  // [CLS] a [SEP] b [SEP], type ids 0 up to the first [SEP], 1 after. With
  // no post-processor the pair is a then b (type ids 0, then 1). A GGUF
  // vocabulary uses llama.cpp's reranker layout (TokenizerSpec), type 1
  // from b on. Errors: as Encode, and kUnimplemented when the tokenizer.json's
  // post-processor has no pair template.
  Result<Encoding> EncodePair(std::string_view a, std::string_view b,
                              bool allow_special = true) const;

  // Concatenates the tokens' bytes and replaces each ill-formed UTF-8
  // sequence with U+FFFD (maximal subparts, as `tokenizers` and Python do).
  // WordPiece: as `tokenizers`' WordPiece decoder, a token after the first
  // loses its "##" prefix or gains a leading space, and each token is
  // cleaned up (" ." -> ".", " n't" -> "n't", ...) when the decoder says
  // so; GGUF WordPiece as llama.cpp (see the top of this file). An added
  // token matched in normalized text decodes as its normalized content, as
  // `tokenizers`' id_to_token gives it.
  // Errors: kOutOfRange (an id outside [0, vocab_size()) or with no token,
  // naming its position; `tokenizers` drops such ids silently).
  Result<std::string> Decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // The most bytes of input text one token of Encode's output can stand
  // for, where that is bounded: text of N bytes then encodes to at least
  // ceil(N / bound) tokens, so a prompt too long for a context can be
  // refused before it is tokenized. Unset where one token can swallow any
  // run of bytes (unk fusing, an added token with lstrip or rstrip).
  std::optional<uint64_t> max_bytes_per_token() const;

  uint64_t vocab_size() const;  // largest id + 1, added tokens included
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> TokenId(std::string_view token) const;
  // Raw vocabulary string (byte-level or ▁ form); empty for an id with no
  // token or outside the vocabulary.
  const std::string& TokenText(int32_t id) const;
  // The bytes the token stands for, as Decode concatenates them before it
  // replaces ill-formed UTF-8 (a byte-fallback or partial-character token
  // is its raw bytes; a WordPiece token as it decodes after another token,
  // before llama.cpp's space cleanup); empty for an id with no token.
  const std::string& TokenBytes(int32_t id) const;
  bool IsSpecial(int32_t id) const;  // skipped by Decode when asked

 private:
  friend class StreamingDecoder;
  explicit Tokenizer(std::shared_ptr<const TokenizerImpl> impl);
  std::shared_ptr<const TokenizerImpl> impl_;
};

// Streaming-safe detokenization: feed ids one at a time; each call returns
// only complete UTF-8. A partial multi-byte sequence is held back until it
// completes; bytes that can never complete one come out as U+FFFD at once,
// and Flush() turns a held-back partial sequence into U+FFFD. GGUF
// WordPiece also holds back the few bytes llama.cpp's space cleanup may
// still change. The concatenation of every Push and the final Flush equals
// Decode of all ids.
// An id outside the vocabulary yields U+FFFD (Push cannot fail). The
// tokenizer must outlive the decoder.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& t, bool skip_special_tokens = true);
  std::string Push(int32_t id);
  std::string Flush();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  bool at_start_ = true;       // nothing emitted yet (SPM drops one space there;
                               // WordPiece's first token has no space)
  std::string pending_;        // bytes of an incomplete UTF-8 sequence
  SpaceCleanupState cleanup_;  // GGUF WordPiece
};

}  // namespace folio::tokenizer

#endif  // FOLIO_TOKENIZER_TOKENIZER_H_
