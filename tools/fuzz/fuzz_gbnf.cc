// libFuzzer target for GBNF grammars (folio/grammar/grammar.h): any bytes as
// grammar source are parsed under small limits and, when they compile, a
// matcher over a small vocabulary walks a few steps. Never a crash, a hang,
// unbounded memory or a sanitizer report; errors come back with the
// documented codes; the token mask and AcceptToken agree on every token at
// every step (a token is allowed exactly when it is accepted).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/check.h"
#include "folio/grammar/grammar.h"

namespace {

// Every single byte, and some longer tokens as real vocabularies have.
std::shared_ptr<const folio::grammar::TokenTrie> Vocabulary() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.emplace_back(1, static_cast<char>(b));
  for (const char* t : {"ab", "abc", "\"", "\":", "{\"", "true", "null", "12", " a", "\n\n",
                        "\xc3\xa9", "\xe6\x97\xa5", "\xe6\x97", "aaaa", ""}) {
    v.emplace_back(t);
  }
  return std::make_shared<const folio::grammar::TokenTrie>(v);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using folio::StatusCode;
  using folio::grammar::Grammar;
  static const std::shared_ptr<const folio::grammar::TokenTrie> trie = Vocabulary();
  folio::grammar::GrammarLimits limits;
  limits.max_source_bytes = 1 << 14;
  limits.max_elements = 1 << 14;
  limits.max_rules = 1 << 10;
  limits.max_repeat = 64;
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  folio::Result<std::shared_ptr<const Grammar>> g = Grammar::FromGbnf(source, limits);
  if (!g) {
    const StatusCode c = g.error().code();
    FOLIO_CHECK(c == StatusCode::kInvalidArgument || c == StatusCode::kResourceExhausted,
                g.error().ToString());
    return 0;
  }
  (void)(*g)->Matches(source);
  folio::grammar::Matcher m(*g, trie);
  const uint64_t vocab = trie->vocab_size();
  std::vector<uint64_t> mask((vocab + 63) / 64);
  for (int step = 0; step < 6; ++step) {
    m.FillMask(mask);
    int32_t next = -1;
    for (uint64_t t = 0; t < vocab; ++t) {
      const bool allowed = ((mask[t / 64] >> (t % 64)) & 1) != 0;
      folio::grammar::Matcher copy = m;
      FOLIO_CHECK(copy.AcceptToken(static_cast<int32_t>(t)) == allowed, "token ", t, " step ",
                  step);
      // Follow a token chosen by the input's bytes, so runs go different ways.
      if (allowed && (next < 0 || (size > 0 && data[(t + step) % size] % 7 == 0))) {
        next = static_cast<int32_t>(t);
      }
    }
    if (next < 0) {
      FOLIO_CHECK(!m.IsDone() || m.CanFinish(), "done but cannot finish");
      break;
    }
    FOLIO_CHECK(m.AcceptToken(next), "allowed token ", next, " refused");
  }
  return 0;
}
