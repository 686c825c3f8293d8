#include "folio/format/element_type.h"

#include <string_view>

#include "wire.h"

namespace folio::format {
namespace {

struct TypeInfo {
  ElementType type;
  std::string_view name;
  std::string_view long_name;
  uint64_t bytes;
};
constexpr TypeInfo kSupported[] = {
    {ElementType::kF16, "f16", "float16", 2}, {ElementType::kBF16, "bf16", "bfloat16", 2},
    {ElementType::kF32, "f32", "float32", 4}, {ElementType::kF64, "f64", "float64", 8},
    {ElementType::kI8, "i8", "int8", 1},      {ElementType::kU8, "u8", "uint8", 1},
    {ElementType::kI32, "i32", "int32", 4},   {ElementType::kU32, "u32", "uint32", 4},
    {ElementType::kI64, "i64", "int64", 8},   {ElementType::kU64, "u64", "uint64", 8},
};

// Hurray types folio does not implement, named so a refusal says which.
struct Unsupported {
  uint8_t tag;
  std::string_view name;
};
constexpr Unsupported kUnsupported[] = {
    {0x12, "i16"},    {0x13, "u16"},    {0x20, "bool"},   {0x40, "f8e4m3"}, {0x41, "f8e5m2"},
    {0x42, "f8e8m0"}, {0x43, "f4e2m1"}, {0x44, "f6e2m3"}, {0x45, "f6e3m2"}, {0x48, "i4"},
    {0x49, "u4"},     {0x4A, "i2"},     {0x4B, "u2"},     {0x50, "c64"},    {0x51, "c128"},
};

const TypeInfo& InfoOf(ElementType t) {
  for (const TypeInfo& info : kSupported) {
    if (info.type == t) return info;
  }
  FOLIO_CHECK(false, "unknown ElementType ", static_cast<int>(t));
  return kSupported[0];
}

}  // namespace

uint64_t ElementTypeBytes(ElementType t) { return InfoOf(t).bytes; }

std::string_view ElementTypeName(ElementType t) { return InfoOf(t).name; }

Result<ElementType> ElementTypeFromTag(uint8_t tag) {
  for (const TypeInfo& info : kSupported) {
    if (ElementTypeTag(info.type) == tag) return info.type;
  }
  for (const Unsupported& u : kUnsupported) {
    if (u.tag == tag) {
      return internal::Unsupported("element type ", u.name, " (", internal::Hex(tag),
                                   ") is not supported by folio");
    }
  }
  if (tag >= 0xF0 && tag <= 0xFE) {
    return internal::Unsupported("element type ", internal::Hex(tag),
                                 " is an extension type; folio supports none");
  }
  if (tag == 0x00 || tag == 0xFF) {
    return internal::Invalid("element type tag ", internal::Hex(tag), " is invalid");
  }
  return internal::Invalid("unknown element type tag ", internal::Hex(tag));
}

Result<ElementType> ParseElementType(std::string_view name) {
  for (const TypeInfo& info : kSupported) {
    if (info.name == name || info.long_name == name) return info.type;
  }
  return internal::Invalid("unknown element type ", Quote(name));
}

}  // namespace folio::format
