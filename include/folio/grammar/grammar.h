// A context-free grammar over bytes, and a matcher that turns it into a
// per-step token mask over a model's vocabulary.
//
// Grammars are written in GBNF, the notation of llama.cpp's `grammar`
// field, so its example grammars work unchanged:
//
//   root   ::= object                       # a rule: name ::= alternatives
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"
//   pair   ::= string ":" ws value
//   ws     ::= [ \t\n]{0,20}
//
//   "text"        a literal (UTF-8); escapes \n \r \t \\ \" \' \[ \] \-
//                 \/ \xHH \uHHHH \UHHHHHHHH
//   [a-z_\u00e9]  one code point from a class; [^...] its complement
//                 within Unicode scalar values (U+0000..U+10FFFF minus the
//                 surrogates); the same escapes as literals
//   .             any one code point
//   name          a rule, defined anywhere in the grammar ([a-zA-Z0-9-_]+)
//   <[123]>       the token with id 123, as one token (a token reference)
//   <|end|>       the token whose vocabulary string is exactly the text
//                 from < to the first > (no blanks): llama.cpp's syntax,
//                 as `<think>` or `<|channel|>` (needs a TokenVocabulary)
//   ( ... )       grouping;  a | b  alternation; juxtaposition is sequence
//   x* x+ x?      repetition; x{m} x{m,} x{m,n} bounded repetition
//   # ...         a comment to the end of the line
// A rule may span lines while a parenthesis is open or after a "|". The
// grammar must define `root`; every referenced rule must be defined; a
// left-recursive rule (one that can begin with itself) is refused, as is
// repetition of something that matches the empty string. Code points are
// matched as their UTF-8 bytes, so the matcher works on bytes and a token
// may end inside a multi-byte character.
//
// Token references are terminals of their own: a reference matches that
// one token id, whole, and never its text spelled by other tokens, so a
// grammar can require a special token (which has no bytes: TokenTrie)
// where a literal could only match text. They compose with byte terminals
// in any rule (`<|channel|> "analysis" <|message|>`); a token reference
// may only come where the bytes before it end a token. A token with bytes
// that the grammar both names and spells is allowed either way. Negated
// references (llama.cpp's `!<[id]>`) and id ranges are refused.
//
// How matching works: the grammar is compiled into flat rule alternatives
// over 256-bit byte sets. A matcher state is a set of parse stacks (as
// llama.cpp's grammar engine keeps them), each stack a chain of
// hash-consed frames, so equal stacks are one id and a state is a short
// sorted list of ids, itself interned. Advancing a state by a byte is
// memoized in a per-state 256-entry table.
// A token mask walks the vocabulary's byte trie once, advancing the state
// along each path and skipping a subtree as soon as no stack survives,
// then adds the tokens that the state's stacks name; masks are memoized
// per state. A token's step is the union of its bytes' step and its
// reference's (memoized per state and token).
#ifndef FOLIO_GRAMMAR_GRAMMAR_H_
#define FOLIO_GRAMMAR_GRAMMAR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/status.h"

namespace folio::grammar {

// Bounds on what a grammar may compile into, so a hostile schema or
// grammar is refused quickly instead of exhausting memory or time.
struct GrammarLimits {
  uint64_t max_source_bytes = uint64_t{1} << 20;  // GBNF text
  uint64_t max_elements = uint64_t{1} << 20;      // compiled rule elements
  uint64_t max_rules = uint64_t{1} << 16;         // rules, helper rules included
  uint64_t max_repeat = 10000;                    // m and n in x{m,n}
};

// The vocabulary a grammar's token references name: ids [0, size) (size
// 0: any id), and `find`, the id of a token by its vocabulary string
// (null: tokens can only be named by id). A compiled grammar holds ids, so
// it belongs to the vocabulary it was compiled against.
struct TokenVocabulary {
  uint64_t size = 0;
  std::function<std::optional<int32_t>(std::string_view)> find;
};

struct CompiledGrammar;  // src/grammar/compiled.h

// An immutable compiled grammar; share it between requests.
class Grammar {
 public:
  // Parses and compiles GBNF. Errors: kInvalidArgument naming the line and
  // column and what was expected (a syntax error, an undefined rule, a
  // missing root, left recursion, a repeated empty match, a token
  // reference outside `vocabulary` or named by text without one),
  // kResourceExhausted when a limit is passed (naming it).
  static Result<std::shared_ptr<const Grammar>> FromGbnf(std::string_view gbnf,
                                                         const GrammarLimits& limits = {},
                                                         const TokenVocabulary& vocabulary = {});

  // Whether `text` is a complete sentence of the grammar (for tests and
  // tools; matching goes through a Matcher). Bytes only: a grammar that
  // needs a token reference matches no text.
  bool Matches(std::string_view text) const;

  uint64_t num_rules() const;
  uint64_t num_elements() const;
  const CompiledGrammar& compiled() const { return *compiled_; }

 private:
  explicit Grammar(std::unique_ptr<const CompiledGrammar> compiled);
  std::unique_ptr<const CompiledGrammar> compiled_;
};

// A vocabulary as the matcher sees it: each token's bytes, in a byte trie.
// Tokens with no bytes (special tokens, holes) are allowed by a grammar
// only where it names them (a token reference); the caller decides about
// end-of-sequence tokens. Immutable; share it between matchers (build it
// once per tokenizer).
class TokenTrie {
 public:
  // token_bytes[id]: the bytes token id stands for (empty: never allowed).
  explicit TokenTrie(const std::vector<std::string>& token_bytes);
  uint64_t vocab_size() const { return vocab_size_; }
  uint64_t num_nodes() const { return nodes_.size(); }

  // Preorder nodes: node 0 is the root (no byte); a node's subtree is the
  // nodes [i, i + subtree_size).
  struct Node {
    uint8_t byte = 0;
    uint32_t depth = 0;
    uint32_t subtree_size = 1;
    uint32_t tokens_begin = 0;  // tokens ending here: tokens_[begin, end)
    uint32_t tokens_end = 0;
  };
  std::span<const Node> nodes() const { return nodes_; }
  std::span<const int32_t> tokens(const Node& n) const {
    return std::span<const int32_t>(tokens_).subspan(n.tokens_begin, n.tokens_end - n.tokens_begin);
  }
  std::string_view token_bytes(int32_t id) const;

 private:
  uint64_t vocab_size_ = 0;
  std::vector<Node> nodes_;
  std::vector<int32_t> tokens_;
  std::vector<std::string> bytes_;
};

class MatcherSession;  // src/grammar/matcher_session.h

// Where a request stands in its grammar. A value: copying it (a fork of
// n samples) is cheap, and copies share their memo tables, so they must
// be used from one thread at a time.
class Matcher {
 public:
  // A matcher at the grammar's start. Both must outlive nothing: they are
  // held by shared_ptr.
  Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie);

  // Consumes a token: its bytes (as TokenTrie::token_bytes gives them) or
  // a reference to it; false, with the state unchanged, if the grammar
  // allows neither.
  bool AcceptToken(int32_t token);
  // Consumes bytes (never a token reference).
  bool AcceptBytes(std::string_view bytes);
  // Whether the text so far is a complete sentence (an end of sequence
  // may come now).
  bool CanFinish() const;
  // Whether nothing may follow: complete and no byte can extend it.
  bool IsDone() const;
  // Sets bit t of `allowed` ([ceil(vocab / 64)] words, bit t % 64 of word
  // t / 64) for every token whose bytes, or a reference to which, the
  // grammar allows next, and clears the others. End-of-sequence tokens are
  // the caller's, except where the grammar names them.
  void FillMask(std::span<uint64_t> allowed) const;
  // Whether the grammar names `token` (a token reference) as one that may
  // come next: an end-of-sequence token the grammar asks for is allowed
  // before the grammar is complete.
  bool NamesNext(int32_t token) const;

  // Memo table sizes (for benchmarks and the docs' cost table).
  struct Stats {
    uint64_t frames = 0;
    uint64_t masks_cached = 0;
    uint64_t mask_hits = 0;
    uint64_t mask_misses = 0;
  };
  Stats stats() const;

 private:
  std::shared_ptr<MatcherSession> session_;
  uint32_t state_ = 0;  // the session's id for the set of live stacks
};

}  // namespace folio::grammar

#endif  // FOLIO_GRAMMAR_GRAMMAR_H_
