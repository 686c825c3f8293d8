// Checks that a quantized tensor's block scales are finite: the one value
// check a loader makes on quantized weights, since a NaN or infinite f16
// scale silently makes every element of its block NaN or infinite (and
// MXFP4's E8M0 scale byte 0xff is the OCP MX encoding of NaN).
#ifndef FOLIO_OPS_BLOCK_SCALES_H_
#define FOLIO_OPS_BLOCK_SCALES_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "folio/core/status.h"
#include "folio/ops/weight_type.h"

namespace folio::ops {

// How a scale field is stored: an IEEE f16 (2 bytes; bad when its
// exponent bits are all ones) or an E8M0 byte (OCP MX: 2^(e - 127); bad
// when 0xff, the format's NaN).
enum class ScaleEncoding : uint8_t { kF16, kE8M0 };

// A scale field of a quantized block: its byte offset in the block, ggml's
// name for it ("d", "m", "dmin", "e") and its encoding.
struct BlockScaleField {
  uint32_t offset;
  const char* name;
  ScaleEncoding encoding = ScaleEncoding::kF16;
};

// The scale fields of `type`'s blocks (ggml's block_* structs); empty for
// the element types.
std::span<const BlockScaleField> BlockScaleFields(WeightType type);

// For a quantized type, reads every block's scale fields (d, and dmin or m
// where the type has one; MXFP4's e: ggml's block layouts, weight_type.h)
// and returns InvalidArgument naming the first block whose scale is NaN or
// infinite, the field and its bits. ggml itself reads an E8M0 0xff as
// 2^128 (DequantizeRow does too), but no quantizer writes it and OCP MX
// calls it NaN, so a file holding one is refused rather than guessed at.
// `bytes` must be whole blocks (else InvalidArgument). Element types (f32,
// f16, ...) carry no scales: Ok. Reads 1 to 4 bytes per block, nothing
// past `bytes`.
Status CheckBlockScales(WeightType type, std::span<const std::byte> bytes);

}  // namespace folio::ops

#endif  // FOLIO_OPS_BLOCK_SCALES_H_
