#include "folio/kv/kv_storage.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "folio/core/checked_math.h"

namespace folio::kv {
namespace {

template <typename T>
Status ValidateRows(const KvStorageShape& shape, uint64_t num_tokens, std::span<const T> keys,
                    std::span<const T> values) {
  const auto expected = CheckedProduct({num_tokens, shape.num_kv_heads, shape.head_dim});
  if (!expected || keys.size() != *expected || values.size() != *expected) {
    return Status::InvalidArgument(
        "WriteRows: keys and values must be [num_tokens=" + std::to_string(num_tokens) +
        ", num_kv_heads=" + std::to_string(shape.num_kv_heads) +
        ", head_dim=" + std::to_string(shape.head_dim) + "] floats (got keys " +
        std::to_string(keys.size()) + ", values " + std::to_string(values.size()) + ")");
  }
  for (const auto* rows : {&keys, &values}) {
    const auto bad =
        std::find_if(rows->begin(), rows->end(), [](T x) { return !std::isfinite(x); });
    if (bad != rows->end()) {
      return Status::InvalidArgument(std::string("WriteRows: ") +
                                     (rows == &keys ? "key" : "value") + " element " +
                                     std::to_string(bad - rows->begin()) + " is not finite");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateKvRows(const KvStorageShape& shape, uint64_t num_tokens, std::span<const float> keys,
                      std::span<const float> values) {
  return ValidateRows(shape, num_tokens, keys, values);
}

Status ValidateKvRows(const KvStorageShape& shape, uint64_t num_tokens,
                      std::span<const double> keys, std::span<const double> values) {
  if (IsQuantized(shape.dtype)) {
    return Status::InvalidArgument("WriteRows: a " + std::string(DTypeName(shape.dtype)) +
                                   " cache takes float rows, not double");
  }
  return ValidateRows(shape, num_tokens, keys, values);
}

}  // namespace folio::kv
