// Text <-> token ids for real checkpoints: byte-level BPE (GPT-2, Llama-3,
// Qwen2/Qwen3) and llama-style SentencePiece, exact against Hugging Face
// `tokenizers` for the configurations listed below.
//
// Two ways in:
//   * FromTokenizerJson: a Hugging Face tokenizer.json (model "BPE" with
//     byte-level pre-tokenizer and decoder).
//   * FromSpec: plain data, as the GGUF loader reads it from the
//     tokenizer.ggml.* metadata; no file format is parsed here.
//
// What is supported (everything else is refused with kUnimplemented naming
// the component, never read approximately):
//   normalizer      null, NFC, Sequence of those
//   pre_tokenizer   Sequence of Split (Regex or String pattern, behavior
//                   Isolated, invert false) and Digits, ending in ByteLevel
//                   (add_prefix_space, use_regex with the GPT-2 pattern)
//   model           BPE: vocab, merges ("a b" strings or ["a", "b"] pairs),
//                   ignore_merges, unk_token / fuse_unk; no dropout,
//                   continuing_subword_prefix, end_of_word_suffix or
//                   byte_fallback
//   added_tokens    special, single_word, lstrip, rstrip, normalized
//   post_processor  null, ByteLevel, TemplateProcessing (the "single"
//                   template: special tokens around one $A), Sequence
//   decoder         ByteLevel
// Split patterns are Oniguruma syntax (what `tokenizers` uses); folio runs
// them with PCRE2 after writing \s, \p{..} and \d out as explicit Unicode
// 16.0 ranges, the tables `tokenizers` 0.23 has; src/tokenizer/split_regex.h
// lists the accepted syntax. NFC, the Digits pre-tokenizer and single_word
// follow the Unicode data `tokenizers` itself uses (tools/
// gen_unicode_tables.py reads it off the library), so they agree with it on
// every code point.
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
  };
  Model model = Model::kBpe;
  std::vector<std::string> tokens;  // id -> token string
  std::vector<float> scores;        // SPM merge scores; required for SPM
  // GGUF token types: 1 normal, 2 unknown, 3 control, 4 user defined,
  // 5 unused, 6 byte. Empty means all normal. Control and unknown tokens
  // are special (matched in text only when allow_special, skipped by
  // Decode when asked); user-defined tokens are always matched in text.
  std::vector<int32_t> token_types;
  std::vector<std::string> merges;  // "a b" pairs, BPE only, rank = index
  // tokenizer.ggml.pre, BPE only: one of Tokenizer::KnownPreTokenizers(),
  // the names llama.cpp's vocabulary loader maps to split regexes (e.g.
  // "llama-bpe" / "llama3": Llama-3 pattern and ignore_merges; "qwen2":
  // Qwen2 pattern and NFC; "gpt-2" / "default": GPT-2 pattern).
  std::string pre_tokenizer;
  std::optional<int32_t> bos_id, eos_id, unk_id, pad_id;
  bool add_bos = false, add_eos = false;
  // tokenizer.ggml.add_space_prefix, SPM only: a ▁ before the text and
  // after every matched special / user-defined token, and one leading space
  // dropped again by Decode.
  bool add_space_prefix = true;
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
  // value), kResourceExhausted, kUnimplemented (unknown pre_tokenizer).
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

  // Concatenates the tokens' bytes and replaces each ill-formed UTF-8
  // sequence with U+FFFD (maximal subparts, as `tokenizers` and Python do).
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
  // is its raw bytes); empty for an id with no token.
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
// and Flush() turns a held-back partial sequence into U+FFFD. The
// concatenation of every Push and the final Flush equals Decode of all ids.
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
  bool at_start_ = true;  // nothing emitted yet (SPM drops one space there)
  std::string pending_;   // bytes of an incomplete UTF-8 sequence
};

}  // namespace folio::tokenizer

#endif  // FOLIO_TOKENIZER_TOKENIZER_H_
