// Checks that a quantized tensor's block scales are finite: the one value
// check a loader makes on quantized weights, since a NaN or infinite f16
// scale silently makes every element of its block NaN or infinite.
#ifndef FOLIO_OPS_BLOCK_SCALES_H_
#define FOLIO_OPS_BLOCK_SCALES_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "folio/core/status.h"
#include "folio/ops/weight_type.h"

namespace folio::ops {

// An f16 scale field of a quantized block: its byte offset in the block and
// ggml's name for it ("d", "m", "dmin").
struct BlockScaleField {
  uint32_t offset;
  const char* name;
};

// The scale fields of `type`'s blocks (ggml's block_* structs); empty for
// the element types.
std::span<const BlockScaleField> BlockScaleFields(WeightType type);

// For a quantized type, reads every block's f16 scale fields (d, and dmin
// or m where the type has one: ggml's block layouts, weight_type.h) and
// returns InvalidArgument naming the first block whose scale is NaN or
// infinite, the field and its bits. `bytes` must be whole blocks (else
// InvalidArgument). Element types (f32, f16, ...) carry no scales: Ok.
// Reads 2 or 4 bytes per block, nothing past `bytes`.
Status CheckBlockScales(WeightType type, std::span<const std::byte> bytes);

}  // namespace folio::ops

#endif  // FOLIO_OPS_BLOCK_SCALES_H_
