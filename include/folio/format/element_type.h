// Element types of a Hurray tensor descriptor, as folio supports them.
//
// The enum values are the wire tags. Hurray defines more types (i16, u16,
// bool, the f8/f6/f4 families, the sub-byte integers, complex, extension
// types); folio refuses those with Unimplemented, naming the type, rather
// than misreading their bytes (docs/spec/hurray-descriptor.md).
#ifndef FOLIO_FORMAT_ELEMENT_TYPE_H_
#define FOLIO_FORMAT_ELEMENT_TYPE_H_

#include <cstdint>
#include <string_view>

#include "folio/core/status.h"

namespace folio::format {

enum class ElementType : uint8_t {
  kF16 = 0x01,
  kBF16 = 0x02,
  kF32 = 0x03,
  kF64 = 0x04,
  kI8 = 0x10,
  kU8 = 0x11,
  kI32 = 0x14,
  kU32 = 0x15,
  kI64 = 0x16,
  kU64 = 0x17,
};

constexpr uint8_t ElementTypeTag(ElementType t) { return static_cast<uint8_t>(t); }

// Bytes per element: 1, 2, 4 or 8.
uint64_t ElementTypeBytes(ElementType t);

// "f16", "bf16", "f32", "f64", "i8", "u8", "i32", "u32", "i64", "u64".
std::string_view ElementTypeName(ElementType t);

// The type of a wire tag. Errors: InvalidArgument for 0x00, 0xFF and tags
// Hurray does not define; Unimplemented, naming the type, for Hurray types
// folio does not support.
Result<ElementType> ElementTypeFromTag(uint8_t tag);

// Accepts the names above and the long forms "float16", "bfloat16",
// "float32", "float64", "int8", "uint8", "int32", "uint32", "int64",
// "uint64". InvalidArgument otherwise.
Result<ElementType> ParseElementType(std::string_view name);

// True for i8 and u8, the storage types folio accepts under quantization.
constexpr bool IsQuantizedStorage(ElementType t) {
  return t == ElementType::kI8 || t == ElementType::kU8;
}

}  // namespace folio::format

#endif  // FOLIO_FORMAT_ELEMENT_TYPE_H_
