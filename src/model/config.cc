#include "folio/model/config.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "folio/core/checked_math.h"

namespace folio::model {

namespace {
Status Positive(const char* name, uint64_t v) {
  if (v == 0) return Status::InvalidArgument(std::string(name) + " must be > 0 (got 0)");
  return Status::Ok();
}
}  // namespace

Status ModelConfig::Validate() const {
  FOLIO_RETURN_IF_ERROR(Positive("hidden_size", hidden_size));
  FOLIO_RETURN_IF_ERROR(Positive("num_heads", num_heads));
  FOLIO_RETURN_IF_ERROR(Positive("num_kv_heads", num_kv_heads));
  FOLIO_RETURN_IF_ERROR(Positive("ffn_size", ffn_size));
  FOLIO_RETURN_IF_ERROR(Positive("num_layers", num_layers));
  FOLIO_RETURN_IF_ERROR(Positive("max_positions", max_positions));
  FOLIO_RETURN_IF_ERROR(Positive("vocab_size", vocab_size));
  if (hidden_size % num_heads != 0) {
    return Status::InvalidArgument("hidden_size " + std::to_string(hidden_size) +
                                   " is not divisible by num_heads " +
                                   std::to_string(num_heads));
  }
  if (head_dim() % 2 != 0) {
    return Status::InvalidArgument("head_dim " + std::to_string(head_dim()) +
                                   " must be even (RoPE rotates pairs)");
  }
  if (num_heads % num_kv_heads != 0) {
    return Status::InvalidArgument("num_heads " + std::to_string(num_heads) +
                                   " is not a multiple of num_kv_heads " +
                                   std::to_string(num_kv_heads));
  }
  if (!std::isfinite(rope_theta) || rope_theta <= 0) {
    return Status::InvalidArgument("rope_theta must be finite and > 0 (got " +
                                   std::to_string(rope_theta) + ")");
  }
  if (!std::isfinite(norm_eps) || norm_eps <= 0) {
    return Status::InvalidArgument("norm_eps must be finite and > 0 (got " +
                                   std::to_string(norm_eps) + ")");
  }
  if (vocab_size > INT32_MAX) {
    return Status::OutOfRange("vocab_size " + std::to_string(vocab_size) +
                              " exceeds int32 token ids");
  }
  // Every tensor is at most vocab*hidden, hidden*ffn or hidden*hidden; the
  // whole count must fit comfortably in size_t arithmetic.
  const auto per_layer = CheckedProduct({hidden_size, 2 * q_size() + 2 * kv_size() + 3 * ffn_size});
  const auto layers = per_layer ? CheckedMul(*per_layer, num_layers) : std::nullopt;
  const auto embed = CheckedProduct({2, vocab_size, hidden_size});
  if (!layers || !embed || !CheckedAdd(*layers, *embed) ||
      *CheckedAdd(*layers, *embed) > (uint64_t{1} << 40)) {
    return Status::OutOfRange("parameter count exceeds 2^40");
  }
  return Status::Ok();
}

uint64_t ModelConfig::ParameterCount() const {
  const uint64_t d = hidden_size;
  const uint64_t per_layer =
      2 * d + d * q_size() + 2 * d * kv_size() + q_size() * d + 3 * d * ffn_size;
  return vocab_size * d * (tie_embeddings ? 1 : 2) + num_layers * per_layer + d;
}

ModelConfig WorkedExampleConfig() { return ModelConfig{}; }

}  // namespace folio::model
