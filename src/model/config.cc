#include "folio/model/config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "folio/core/check.h"
#include "folio/core/checked_math.h"

namespace folio::model {

namespace {
Status Positive(const char* name, uint64_t v) {
  if (v == 0) return Status::InvalidArgument(std::string(name) + " must be > 0 (got 0)");
  return Status::Ok();
}

// prefix: "" or "layer i ".
Status ValidateRope(const std::string& prefix, double theta, const RopeScaling& s) {
  if (!std::isfinite(theta) || theta <= 0) {
    return Status::InvalidArgument(prefix + "rope_theta must be finite and > 0 (got " +
                                   std::to_string(theta) + ")");
  }
  if (s.type != RopeScaling::Type::kNone && (!std::isfinite(s.factor) || s.factor <= 0)) {
    return Status::InvalidArgument(prefix + "rope_scaling factor must be finite and > 0");
  }
  if (s.type == RopeScaling::Type::kLongRope) {
    for (const std::vector<double>* f : {&s.short_factor, &s.long_factor}) {
      for (double x : *f) {
        if (!std::isfinite(x) || x <= 0) {
          return Status::InvalidArgument(prefix + "longrope factors must be finite and > 0");
        }
      }
    }
    if (!std::isfinite(s.attention_factor) || s.attention_factor <= 0) {
      return Status::InvalidArgument(prefix + "longrope attention_factor must be finite and > 0");
    }
  }
  if (s.type == RopeScaling::Type::kYarn &&
      (!std::isfinite(s.beta_fast) || !std::isfinite(s.beta_slow) || s.beta_slow <= 0 ||
       s.beta_fast <= 0 || s.original_max_positions == 0 || !std::isfinite(s.attention_factor) ||
       s.attention_factor <= 0)) {
    return Status::InvalidArgument(
        prefix +
        "yarn rope_scaling needs beta_fast and beta_slow finite and > 0, "
        "original_max_position_embeddings > 0 and attention_factor finite and > 0");
  }
  if (s.type == RopeScaling::Type::kLlama3 &&
      (!(s.high_freq_factor > s.low_freq_factor) || s.low_freq_factor <= 0 ||
       s.original_max_positions == 0)) {
    return Status::InvalidArgument(
        prefix +
        "llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor and "
        "original_max_position_embeddings > 0");
  }
  return Status::Ok();
}
}  // namespace

LayerConfig ModelConfig::Layer(uint64_t i) const {
  FOLIO_CHECK(i < num_layers, "layer ", i, " of ", num_layers);
  if (!layers.empty()) return layers[i];
  return LayerConfig{window, rope_theta, rope_scaling};
}

double ModelConfig::AttentionScale() const {
  return attention_scale != 0 ? attention_scale : 1.0 / std::sqrt(static_cast<double>(head_dim()));
}

bool ModelConfig::HasFamilyOptions() const {
  return !layers.empty() || activation != Activation::kSilu || norm_layout != NormLayout::kPre ||
         norm_unit_offset || scale_embedding || attention_scale != 0 || final_logit_softcap != 0 ||
         attn_logit_softcap != 0 || rotary_dim != 0 || num_experts != 0 || output_bias ||
         attention_sinks || block != Block::kDecoder || num_labels != 0;
}

namespace {
// A BERT block keeps every decoder option at its default: its own biases,
// norms and positions are implied by the block, not spelled by flags.
Status ValidateBert(const ModelConfig& c) {
  const ModelConfig d;  // the defaults
  const char* set = nullptr;
  if (c.window != 0 || !c.layers.empty()) set = "a sliding window or per-layer settings";
  if (c.attention_bias || c.output_bias || c.qk_norm || c.attention_sinks) {
    set = "attention_bias, output_bias, qk_norm or attention sinks (the block's own biases apply)";
  }
  if (c.norm_layout != NormLayout::kPre || c.norm_unit_offset || c.scale_embedding) {
    set = "a norm layout, unit-offset gains or a scaled embedding";
  }
  if (c.attention_scale != 0 || c.final_logit_softcap != 0 || c.attn_logit_softcap != 0) {
    set = "an attention scale or soft-caps";
  }
  if (c.rotary_dim != 0 || c.rope_scaling.type != RopeScaling::Type::kNone ||
      c.rope_style != d.rope_style || c.rope_theta != d.rope_theta) {
    set = "RoPE settings (positions are a learned table)";
  }
  if (c.num_experts != 0 || c.moe_bias || c.swiglu_limit != 0 ||
      c.routing != Routing::kSoftmaxTopK) {
    set = "experts";
  }
  if (set != nullptr) {
    return Status::InvalidArgument(std::string("a BERT block with ") + set);
  }
  if (c.activation != Activation::kGelu && c.activation != Activation::kGeluTanh) {
    return Status::InvalidArgument("a BERT block's MLP activation must be GELU");
  }
  if (c.num_kv_heads != c.num_heads) {
    return Status::InvalidArgument("a BERT block has as many K/V heads as query heads (" +
                                   std::to_string(c.num_kv_heads) + " vs " +
                                   std::to_string(c.num_heads) + ")");
  }
  if (c.type_vocab_size == 0) {
    return Status::InvalidArgument("a BERT block needs type_vocab_size >= 1");
  }

  return Status::Ok();
}
// The router's DeepSeek-style options on a mixture (Validate checked
// that a dense model has none).
Status ValidateRouter(const ModelConfig& c) {
  if (c.num_experts == 0) return Status::Ok();
  if (c.expert_groups == 0 || c.num_experts % c.expert_groups != 0) {
    return Status::InvalidArgument("expert_groups " + std::to_string(c.expert_groups) +
                                   " must divide num_experts " + std::to_string(c.num_experts));
  }
  const uint64_t per_group = c.num_experts / c.expert_groups;
  if (c.expert_groups > 1 && per_group < 2) {
    return Status::InvalidArgument("expert groups of " + std::to_string(per_group) +
                                   " experts: a group's score sums its two best");
  }
  if (c.expert_groups_used == 0 || c.expert_groups_used > c.expert_groups) {
    return Status::InvalidArgument("expert_groups_used " + std::to_string(c.expert_groups_used) +
                                   " must be in [1, expert_groups " +
                                   std::to_string(c.expert_groups) + "]");
  }
  if (c.experts_per_token > c.expert_groups_used * per_group) {
    return Status::InvalidArgument(
        "experts_per_token " + std::to_string(c.experts_per_token) + " exceeds the " +
        std::to_string(c.expert_groups_used * per_group) + " experts of the " +
        std::to_string(c.expert_groups_used) + " groups a token may choose from");
  }
  if (!std::isfinite(c.routed_scale) || c.routed_scale <= 0) {
    return Status::InvalidArgument("routed_scale must be finite and > 0 (got " +
                                   std::to_string(c.routed_scale) + ")");
  }
  if (c.leading_dense_layers > c.num_layers) {
    return Status::InvalidArgument("leading_dense_layers " +
                                   std::to_string(c.leading_dense_layers) + " exceeds num_layers " +
                                   std::to_string(c.num_layers));
  }
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
  if (explicit_head_dim == 0 && hidden_size % num_heads != 0) {
    return Status::InvalidArgument("hidden_size " + std::to_string(hidden_size) +
                                   " is not divisible by num_heads " + std::to_string(num_heads));
  }
  if (num_labels > (uint64_t{1} << 20)) {
    return Status::OutOfRange("num_labels " + std::to_string(num_labels) + " exceeds 2^20");
  }
  switch (block) {
    case Block::kBert:
      FOLIO_RETURN_IF_ERROR(ValidateBert(*this));
      break;
    case Block::kDecoder:
      if (type_vocab_size != 0 || activation == Activation::kGelu) {
        return Status::InvalidArgument("token types or a plain GELU MLP outside a BERT block");
      }
      if (head_dim() % 2 != 0) {
        return Status::InvalidArgument("head_dim " + std::to_string(head_dim()) +
                                       " must be even (RoPE rotates pairs)");
      }
      break;
  }
  if (num_experts == 0 &&
      (moe_bias || swiglu_limit != 0 || routing != Routing::kSoftmaxTopK || router_selection_bias ||
       expert_groups != 1 || expert_groups_used != 1 || routed_scale != 1.0 ||
       leading_dense_layers != 0 || num_shared_experts != 0)) {
    return Status::InvalidArgument(
        "expert options (biases, the clamped SwiGLU, a routing other than softmax-then-top-k, a "
        "selection bias, expert groups, a routed scale, leading dense layers, shared experts) "
        "without experts");
  }
  FOLIO_RETURN_IF_ERROR(ValidateRouter(*this));
  if (swiglu_limit != 0 &&
      (!std::isfinite(swiglu_limit) || swiglu_limit < 0 || !std::isfinite(swiglu_alpha))) {
    return Status::InvalidArgument("swiglu_limit must be finite and > 0, swiglu_alpha finite");
  }
  if (num_experts == 0 && shared_expert_ffn_size != 0) {
    return Status::InvalidArgument("a shared expert without experts");
  }
  if (shared_expert_ffn_size != 0 && num_shared_experts != 0) {
    return Status::InvalidArgument(
        "both a gated shared expert (shared_expert_ffn_size) and ungated shared experts "
        "(num_shared_experts)");
  }
  if (num_experts != 0 &&
      (experts_per_token == 0 || experts_per_token > num_experts || expert_ffn_size == 0)) {
    return Status::InvalidArgument(
        "a mixture of " + std::to_string(num_experts) + " experts needs experts_per_token in [1, " +
        std::to_string(num_experts) + "] (got " + std::to_string(experts_per_token) +
        ") and an expert width (got " + std::to_string(expert_ffn_size) + ")");
  }
  if (rotary_dim % 2 != 0 || rotary_dim > head_dim()) {
    return Status::InvalidArgument("rotary_dim " + std::to_string(rotary_dim) +
                                   " must be even and at most head_dim " +
                                   std::to_string(head_dim()));
  }
  if (num_heads % num_kv_heads != 0) {
    return Status::InvalidArgument("num_heads " + std::to_string(num_heads) +
                                   " is not a multiple of num_kv_heads " +
                                   std::to_string(num_kv_heads));
  }
  for (const RopeScaling* s : {&rope_scaling}) {
    if (s->type == RopeScaling::Type::kLongRope &&
        (s->short_factor.size() != RotaryDim() / 2 || s->long_factor.size() != RotaryDim() / 2)) {
      return Status::InvalidArgument(
          "longrope short_factor and long_factor need " + std::to_string(RotaryDim() / 2) +
          " entries, one per rotated pair (got " + std::to_string(s->short_factor.size()) +
          " and " + std::to_string(s->long_factor.size()) + ")");
    }
  }
  if (!layers.empty() && layers.size() != num_layers) {
    return Status::InvalidArgument("per-layer settings for " + std::to_string(layers.size()) +
                                   " layers; the model has " + std::to_string(num_layers));
  }
  FOLIO_RETURN_IF_ERROR(ValidateRope("", rope_theta, rope_scaling));
  for (size_t i = 0; i < layers.size(); ++i) {
    FOLIO_RETURN_IF_ERROR(ValidateRope("layer " + std::to_string(i) + " ", layers[i].rope_theta,
                                       layers[i].rope_scaling));
  }
  for (const auto& [name, v] : {std::pair{"attention_scale", attention_scale},
                                std::pair{"final_logit_softcap", final_logit_softcap},
                                std::pair{"attn_logit_softcap", attn_logit_softcap}}) {
    if (!std::isfinite(v) || v < 0) {
      return Status::InvalidArgument(std::string(name) + " must be finite and >= 0 (got " +
                                     std::to_string(v) + ")");
    }
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
  const auto dense = CheckedProduct({hidden_size, 2 * q_size() + 2 * kv_size() + 3 * ffn_size});
  const auto experts =
      CheckedProduct({hidden_size, num_experts + num_shared_experts + 1, 4, expert_ffn_size});
  const auto per_layer = dense && experts ? CheckedAdd(*dense, *experts) : std::nullopt;
  const auto all_layers = per_layer ? CheckedMul(*per_layer, num_layers) : std::nullopt;
  // The embedding and head, and an encoder's position and type tables.
  const auto positions = CheckedAdd(block == Block::kBert ? max_positions : 0, type_vocab_size);
  const auto tables = positions ? CheckedAdd(vocab_size, *positions) : std::nullopt;
  const auto embed = tables ? CheckedProduct({2, *tables, hidden_size}) : std::nullopt;
  if (!all_layers || !embed || !CheckedAdd(*all_layers, *embed) ||
      *CheckedAdd(*all_layers, *embed) > (uint64_t{1} << 40)) {
    return Status::OutOfRange("parameter count exceeds 2^40");
  }
  return Status::Ok();
}

uint64_t ModelConfig::ParameterCount() const {
  const uint64_t d = hidden_size;
  if (block == Block::kBert) {
    // Embeddings (tokens, positions, types, their norm); per layer q/k/v/o
    // with biases, two norms with biases, up and down with biases.
    const uint64_t per_layer = 4 * (d * d + d) + 4 * d + 2 * d * ffn_size + ffn_size + d;
    const uint64_t head = num_labels == 0 ? 0 : d * d + d + num_labels * (d + 1);
    return (vocab_size + max_positions + type_vocab_size) * d + 2 * d + num_layers * per_layer +
           head;
  }
  uint64_t per_layer = 2 * d + d * q_size() + 2 * d * kv_size() + q_size() * d + 3 * d * ffn_size;
  if (attention_bias) per_layer += q_size() + 2 * kv_size();
  if (qk_norm) per_layer += 2 * head_dim();
  if (norm_layout == NormLayout::kSandwich) per_layer += 2 * d;
  if (output_bias) per_layer += d;
  if (attention_sinks) per_layer += num_heads;
  uint64_t moe_layer = per_layer;
  if (num_experts != 0) {  // the router and every expert instead of one MLP
    moe_layer =
        per_layer - 3 * d * ffn_size + num_experts * d + num_experts * 3 * d * expert_ffn_size;
    if (moe_bias) moe_layer += num_experts * (1 + 2 * expert_ffn_size + d);
    if (router_selection_bias) moe_layer += num_experts;
    moe_layer += 3 * d * SharedExpertFfnSize() + (shared_expert_ffn_size != 0 ? d : 0);
  }
  // A score head replaces the output head.
  const uint64_t head = num_labels != 0 ? num_labels * d : tie_embeddings ? 0 : vocab_size * d;
  return vocab_size * d + head + (num_layers - NumMoeLayers()) * per_layer +
         NumMoeLayers() * moe_layer + d;
}

std::vector<double> RopeInverseFrequencies(const ModelConfig& c) {
  return RopeInverseFrequencies(c.RotaryDim(), c.rope_theta, c.rope_scaling);
}

std::vector<double> RopeInverseFrequencies(uint64_t rotary_dim, double rope_theta,
                                           const RopeScaling& s) {
  const uint64_t head_dim = rotary_dim;  // the exponent's denominator
  const uint64_t pairs = head_dim / 2;
  std::vector<double> inv(pairs);
  // Yarn's ramp over pair indices: 0 below `low` (the frequency kept), 1
  // above `high` (divided by factor). The pair that turns r times over the
  // original length has index dim * ln(L / (2 pi r)) / (2 ln base).
  double low = 0, high = 0;
  if (s.type == RopeScaling::Type::kYarn) {
    const auto dim = static_cast<double>(rotary_dim);
    const auto original = static_cast<double>(s.original_max_positions);
    auto pair_of = [&](double turns) {
      return dim * std::log(original / (turns * 2.0 * 3.14159265358979323846)) /
             (2.0 * std::log(rope_theta));
    };
    low = pair_of(s.beta_fast);
    high = pair_of(s.beta_slow);
    if (s.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1);
    if (low == high) high += 0.001;  // Hugging Face's guard against 0 / 0
  }
  for (uint64_t p = 0; p < pairs; ++p) {
    double f = std::pow(rope_theta, -2.0 * static_cast<double>(p) / static_cast<double>(head_dim));
    if (s.type == RopeScaling::Type::kLinear) {
      f /= s.factor;
    } else if (s.type == RopeScaling::Type::kLlama3) {
      // Hugging Face's _compute_llama3_parameters: long wavelengths are
      // slowed by `factor`, short ones kept, the band between interpolated.
      const double old_len = static_cast<double>(s.original_max_positions);
      const double wavelen = 2.0 * 3.14159265358979323846 / f;
      const double low_wavelen = old_len / s.low_freq_factor;
      const double high_wavelen = old_len / s.high_freq_factor;
      if (wavelen > low_wavelen) {
        f /= s.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth =
            (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1 - smooth) * f / s.factor + smooth * f;
      }
    }
    if (s.type == RopeScaling::Type::kLongRope) {
      f /= (s.use_long ? s.long_factor : s.short_factor).at(p);
    }
    if (s.type == RopeScaling::Type::kYarn) {
      const double ramp = std::clamp((static_cast<double>(p) - low) / (high - low), 0.0, 1.0);
      f = f / s.factor * ramp + f * (1.0 - ramp);
    }
    inv[p] = f;
  }
  return inv;
}

void SettleLongRope(uint64_t max_positions, RopeScaling& s) {
  if (s.type != RopeScaling::Type::kLongRope || s.original_max_positions == 0) return;
  const auto original = static_cast<double>(s.original_max_positions);
  s.factor = static_cast<double>(max_positions) / original;
  if (!(s.attention_factor > 0)) {
    s.attention_factor =
        s.factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(s.factor) / std::log(original));
  }
  s.use_long = max_positions > s.original_max_positions;
}

void SettleYarn(double mscale, double mscale_all_dim, RopeScaling& s) {
  if (s.type != RopeScaling::Type::kYarn || s.attention_factor > 0) return;
  auto m = [&](double k) { return s.factor <= 1.0 ? 1.0 : 0.1 * k * std::log(s.factor) + 1.0; };
  s.attention_factor = mscale > 0 && mscale_all_dim > 0 ? m(mscale) / m(mscale_all_dim) : m(1.0);
}

double RopeAttentionFactor(const RopeScaling& s) {
  return s.type == RopeScaling::Type::kLongRope || s.type == RopeScaling::Type::kYarn
             ? s.attention_factor
             : 1.0;
}

ModelConfig WorkedExampleConfig() { return ModelConfig{}; }

}  // namespace folio::model
