// What a PagedKvCacheConfig implies before any cache exists: its layer
// groups, whether it is valid, the storage it needs and what its pages
// cost. Kept apart from paged_kv_cache.cc, which holds the tables'
// mechanism.
#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "folio/core/checked_math.h"
#include "folio/kv/paged_kv_cache.h"

namespace folio::kv {
namespace {

constexpr uint64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr uint64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

std::string Str(uint64_t v) { return std::to_string(v); }

// S: the layers of a group, the fewest any window has (every layer when
// there is no window), without listing the layers.
uint64_t GroupSize(const PagedKvCacheConfig& c) {
  if (c.layer_windows.empty()) return c.num_layers;
  std::map<uint64_t, uint64_t> count;
  for (const uint64_t w : c.layer_windows) ++count[w];
  uint64_t size = c.num_layers;
  for (const auto& [window, n] : count) size = std::min(size, n);
  return size;
}

}  // namespace

std::vector<LayerGroup> GroupLayers(const PagedKvCacheConfig& c) {
  FOLIO_CHECK(c.layer_windows.empty() || c.layer_windows.size() == c.num_layers,
              "layer_windows has ", c.layer_windows.size(), " entries for ", c.num_layers,
              " layers");
  // Layers by window, global first (0 sorts first), each in layer order.
  std::map<uint64_t, std::vector<uint64_t>> by_window;
  for (uint64_t l = 0; l < c.num_layers; ++l) {
    by_window[c.layer_windows.empty() ? 0 : c.layer_windows[l]].push_back(l);
  }
  const uint64_t size = GroupSize(c);
  std::vector<LayerGroup> groups;
  for (const auto& [window, layers] : by_window) {
    for (size_t i = 0; i < layers.size(); i += size) {
      LayerGroup g;
      g.window = window;
      g.layers.assign(
          layers.begin() + static_cast<std::ptrdiff_t>(i),
          layers.begin() + static_cast<std::ptrdiff_t>(std::min(i + size, layers.size())));
      groups.push_back(std::move(g));
    }
  }
  return groups;
}

Status PagedKvCache::ValidateConfig(const PagedKvCacheConfig& c) {
  if (c.num_layers == 0 || c.num_kv_heads == 0 || c.head_dim == 0 || c.page_size == 0 ||
      c.num_pages == 0) {
    return Status::InvalidArgument(
        "num_layers, num_kv_heads, head_dim, page_size and num_pages must be "
        "> 0 (got " +
        Str(c.num_layers) + ", " + Str(c.num_kv_heads) + ", " + Str(c.head_dim) + ", " +
        Str(c.page_size) + ", " + Str(c.num_pages) + ")");
  }
  if (c.num_pages > kMaxInt32 || c.page_size > kMaxInt32) {
    return Status::OutOfRange("num_pages " + Str(c.num_pages) + " and page_size " +
                              Str(c.page_size) +
                              " must be <= INT32_MAX (page "
                              "ids and last_page_len are int32)");
  }
  if (!c.layer_windows.empty() && c.layer_windows.size() != c.num_layers) {
    return Status::InvalidArgument("layer_windows has " + Str(c.layer_windows.size()) +
                                   " entries; the cache has " + Str(c.num_layers) + " layers");
  }
  const auto slots = CheckedMul(c.num_pages, c.page_size);
  if (!slots || *slots > kMaxInt64) {
    return Status::OutOfRange("num_pages * page_size overflows int64 slot ids");
  }
  const auto page_bytes =
      CheckedProduct({c.num_kv_heads, c.page_size, c.head_dim, DTypeSize(c.dtype)});
  const auto total =
      page_bytes ? CheckedProduct({*page_bytes, c.num_pages, GroupSize(c), 2}) : std::nullopt;
  if (!total || *total > std::numeric_limits<size_t>::max() / 2) {
    return Status::OutOfRange("KV pool size overflows: " + Str(c.num_layers) + " layers x 2 x " +
                              Str(c.num_pages) + " pages x [" + Str(c.num_kv_heads) + ", " +
                              Str(c.page_size) + ", " + Str(c.head_dim) + "]");
  }
  return Status::Ok();
}

KvStorageShape PagedKvCache::StorageShape(const PagedKvCacheConfig& c) {
  return {GroupSize(c), c.num_pages, c.num_kv_heads, c.page_size, c.head_dim, c.dtype};
}

uint64_t PagedKvCache::BytesPerPage(const PagedKvCacheConfig& c) {
  const uint64_t scales = IsQuantized(c.dtype) ? c.num_kv_heads * c.page_size * sizeof(float) : 0;
  return (c.num_kv_heads * c.page_size * c.head_dim * DTypeSize(c.dtype) + scales) * GroupSize(c) *
         2;
}

uint64_t PagedKvCache::MaxPagesHeld(const PagedKvCacheConfig& c, uint64_t length,
                                    uint64_t max_step_tokens) {
  const uint64_t all = CeilDiv(length, c.page_size);
  uint64_t total = 0;
  for (const LayerGroup& g : GroupLayers(c)) {
    total +=
        g.window == 0
            ? all
            : std::min(all,
                       CeilDiv(2 * max_step_tokens + g.window + c.window_margin, c.page_size) + 2);
  }
  return total;
}

}  // namespace folio::kv
