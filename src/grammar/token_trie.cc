#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "folio/core/check.h"
#include "folio/grammar/grammar.h"

namespace folio::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes)
    : vocab_size_(token_bytes.size()), bytes_(token_bytes) {
  FOLIO_CHECK(token_bytes.size() < (uint64_t{1} << 31), "vocabulary too large for a token trie");
  // Tokens in byte order: a node's tokens are then adjacent, and each
  // token shares with the previous one exactly the path of their common
  // prefix.
  std::vector<int32_t> order;
  order.reserve(token_bytes.size());
  for (size_t i = 0; i < token_bytes.size(); ++i) {
    if (!token_bytes[i].empty()) order.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return token_bytes[static_cast<size_t>(a)] < token_bytes[static_cast<size_t>(b)];
  });
  nodes_.push_back(Node{});
  std::vector<uint32_t> path = {0};  // node indices from the root to the last token's node
  const std::string* prev = nullptr;
  auto close_deeper_than = [&](size_t depth) {
    while (path.size() > depth + 1) {
      Node& n = nodes_[path.back()];
      n.subtree_size = static_cast<uint32_t>(nodes_.size() - path.back());
      path.pop_back();
    }
  };
  for (const int32_t id : order) {
    const std::string& b = token_bytes[static_cast<size_t>(id)];
    size_t common = 0;
    if (prev != nullptr) {
      const size_t limit = std::min(prev->size(), b.size());
      while (common < limit && (*prev)[common] == b[common]) ++common;
    }
    close_deeper_than(common);
    for (size_t d = common; d < b.size(); ++d) {
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      Node n;
      n.byte = static_cast<uint8_t>(b[d]);
      n.depth = static_cast<uint32_t>(d + 1);
      n.tokens_begin = n.tokens_end = static_cast<uint32_t>(tokens_.size());
      nodes_.push_back(n);
    }
    Node& leaf = nodes_[path.back()];
    if (leaf.tokens_begin == leaf.tokens_end) {
      leaf.tokens_begin = static_cast<uint32_t>(tokens_.size());
    }
    tokens_.push_back(id);
    leaf.tokens_end = static_cast<uint32_t>(tokens_.size());
    prev = &b;
  }
  close_deeper_than(0);
  nodes_[0].subtree_size = static_cast<uint32_t>(nodes_.size());
}

std::string_view TokenTrie::token_bytes(int32_t id) const {
  FOLIO_CHECK(id >= 0 && static_cast<uint64_t>(id) < vocab_size_, "token ", id);
  return bytes_[static_cast<size_t>(id)];
}

}  // namespace folio::grammar
