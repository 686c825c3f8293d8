// Python values -> folio::format values, for the descriptor bindings
// (format.cc), and the one error type those bindings raise.
//
// Every converter names the field it converts in its error, so a refusal
// reads "page_size must be in [0, 4294967295] (got -1)". A value outside
// the C++ field's range is refused, never wrapped or truncated. Wrong
// Python types raise TypeError; wrong values folio.InvalidDescriptorError.
#ifndef FOLIO_PYTHON_FORMAT_CONVERT_H_
#define FOLIO_PYTHON_FORMAT_CONVERT_H_

#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "folio/core/status.h"
#include "folio/core/str_cat.h"
#include "folio/format/descriptor.h"
#include "folio/format/element_type.h"
#include "folio/format/hurray_format.h"

namespace folio::python {

// Creates folio.InvalidDescriptorError (a ValueError) in `m`; call once,
// before anything below can raise it.
void RegisterDescriptorError(nanobind::module_& m);

// Raise folio.InvalidDescriptorError / TypeError with `message`.
[[noreturn]] void RaiseDescriptorError(const std::string& message);
[[noreturn]] void RaiseTypeError(const std::string& message);

// Every non-ok Status of the format module raises InvalidDescriptorError
// with its message, whatever its code (Unimplemented included).
void ThrowIfFormatError(const Status& status);
template <typename T>
T Unwrap(Result<T> result) {
  if (!result.ok()) RaiseDescriptorError(result.error().message());
  return std::move(result).value();
}

// The Python type name of `h` ("int", "str"), and repr(h).
std::string TypeName(nanobind::handle h);
std::string Repr(nanobind::handle h);

// ------------------------------------------------------------ names

// Python spells element types by NumPy's long names and the buffer-table
// enums in snake case.
template <typename E>
using NameTable = std::span<const std::pair<std::string_view, E>>;

inline constexpr std::pair<std::string_view, format::ElementType> kElementTypes[] = {
    {"float16", format::ElementType::kF16}, {"bfloat16", format::ElementType::kBF16},
    {"float32", format::ElementType::kF32}, {"float64", format::ElementType::kF64},
    {"int8", format::ElementType::kI8},     {"uint8", format::ElementType::kU8},
    {"int32", format::ElementType::kI32},   {"uint32", format::ElementType::kU32},
    {"int64", format::ElementType::kI64},   {"uint64", format::ElementType::kU64},
};
inline constexpr std::pair<std::string_view, format::DeviceTag> kDevices[] = {
    {"cpu", format::DeviceTag::kCpu},         {"cuda", format::DeviceTag::kCuda},
    {"rocm", format::DeviceTag::kRocm},       {"metal", format::DeviceTag::kMetal},
    {"vulkan", format::DeviceTag::kVulkan},   {"webgpu", format::DeviceTag::kWebGpu},
    {"hexagon", format::DeviceTag::kHexagon}, {"level_zero", format::DeviceTag::kLevelZero},
    {"opencl", format::DeviceTag::kOpenCl},
};
inline constexpr std::pair<std::string_view, format::SyncMode> kSyncModes[] = {
    {"producer_synced", format::SyncMode::kProducerSynced},
    {"event", format::SyncMode::kEvent},
    {"consumer_stream", format::SyncMode::kConsumerStream},
};
inline constexpr std::pair<std::string_view, format::MemoryClass> kMemoryClasses[] = {
    {"standard", format::MemoryClass::kStandard},
    {"host_pinned", format::MemoryClass::kHostPinned},
    {"unified", format::MemoryClass::kUnified},
    {"peer", format::MemoryClass::kPeer},
};

template <typename E>
std::string_view NameOf(NameTable<E> table, E value) {
  for (const auto& [name, v] : table) {
    if (v == value) return name;
  }
  return "?";
}

// InvalidDescriptorError naming the field, the value and the choices.
template <typename E>
E ParseName(NameTable<E> table, std::string_view value, std::string_view field) {
  std::string choices;
  for (const auto& [name, v] : table) {
    if (name == value) return v;
    choices += StrCat(choices.empty() ? "" : ", ", Quote(name));
  }
  RaiseDescriptorError(StrCat(field, " must be one of ", choices, " (got ", Quote(value), ")"));
}

// "float32" for format::ElementType::kF32.
std::string_view ElementTypeLongName(format::ElementType t);

// An ElementType member, or a name ParseElementType knows ("float32", "f32").
format::ElementType ToElementType(nanobind::handle h, std::string_view field);

// ------------------------------------------------------------ integers

// A Python int (or anything with __index__, such as a NumPy integer) as T.
// A value outside T's range is refused, naming the field and the range.
template <typename T>
T ToInt(nanobind::handle h, std::string_view field) {
  PyObject* index = PyNumber_Index(h.ptr());
  if (index == nullptr) {
    PyErr_Clear();
    RaiseTypeError(StrCat(field, " must be an integer, got ", TypeName(h)));
  }
  const nanobind::object owned = nanobind::steal(index);
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
  if (overflow == 0 && std::in_range<T>(v)) return static_cast<T>(v);
  if (overflow > 0) {
    const unsigned long long u = PyLong_AsUnsignedLongLong(index);
    if (PyErr_Occurred() != nullptr) {
      PyErr_Clear();
    } else if (std::in_range<T>(u)) {
      return static_cast<T>(u);
    }
  }
  RaiseDescriptorError(StrCat(field, " must be in [", std::numeric_limits<T>::min(), ", ",
                              std::numeric_limits<T>::max(), "] (got ", Repr(owned), ")"));
}

template <typename T, typename Src>
void AppendChecked(const std::byte* data, size_t n, std::string_view field, std::vector<T>& out) {
  for (size_t i = 0; i < n; ++i) {
    Src v;
    std::memcpy(&v, data + i * sizeof(Src), sizeof(Src));
    if (!std::in_range<T>(v)) {
      RaiseDescriptorError(StrCat(field, "[", i, "] must be in [", std::numeric_limits<T>::min(),
                                  ", ", std::numeric_limits<T>::max(), "] (got ", +v, ")"));
    }
    out.push_back(static_cast<T>(v));
  }
}

using AnyArray = nanobind::ndarray<nanobind::ro, nanobind::c_contig, nanobind::device::cpu>;

// A 1-D NumPy integer array (any integer dtype) as T values.
template <typename T>
std::vector<T> ArrayToInts(const AnyArray& a, std::string_view field) {
  using Code = nanobind::dlpack::dtype_code;
  if (a.ndim() != 1) {
    RaiseDescriptorError(StrCat(field, " must be 1-D, got a ", a.ndim(), "-D array"));
  }
  const nanobind::dlpack::dtype t = a.dtype();
  const bool is_signed = t.code == static_cast<uint8_t>(Code::Int);
  const bool is_unsigned = t.code == static_cast<uint8_t>(Code::UInt);
  const auto* data = static_cast<const std::byte*>(a.data());
  std::vector<T> out;
  out.reserve(a.size());
  if (t.lanes == 1 && (is_signed || is_unsigned)) {
    switch (t.bits) {
      case 8:
        is_signed ? AppendChecked<T, int8_t>(data, a.size(), field, out)
                  : AppendChecked<T, uint8_t>(data, a.size(), field, out);
        return out;
      case 16:
        is_signed ? AppendChecked<T, int16_t>(data, a.size(), field, out)
                  : AppendChecked<T, uint16_t>(data, a.size(), field, out);
        return out;
      case 32:
        is_signed ? AppendChecked<T, int32_t>(data, a.size(), field, out)
                  : AppendChecked<T, uint32_t>(data, a.size(), field, out);
        return out;
      case 64:
        is_signed ? AppendChecked<T, int64_t>(data, a.size(), field, out)
                  : AppendChecked<T, uint64_t>(data, a.size(), field, out);
        return out;
      default:
        break;
    }
  }
  RaiseTypeError(StrCat(field, " must hold integers, got an array of dtype code ", int{t.code},
                        " with ", int{t.bits}, " bits"));
}

// A list or tuple of integers, or a 1-D NumPy integer array, as T values.
// With `none_is_dynamic`, None stands for a dynamic dimension (UINT64_MAX).
template <typename T>
std::vector<T> ToInts(nanobind::handle h, std::string_view field, bool none_is_dynamic = false) {
  if (!PyList_Check(h.ptr()) && !PyTuple_Check(h.ptr())) {
    AnyArray array;
    if (nanobind::try_cast(h, array)) return ArrayToInts<T>(array, field);
    if (!PySequence_Check(h.ptr()) || nanobind::isinstance<nanobind::str>(h)) {
      RaiseTypeError(StrCat(field,
                            " must be a list of integers or a 1-D NumPy integer array, "
                            "got ",
                            TypeName(h)));
    }
  }
  std::vector<T> out;
  for (nanobind::handle item : nanobind::cast<nanobind::sequence>(h)) {
    const std::string item_field = StrCat(field, "[", out.size(), "]");
    if (none_is_dynamic && item.is_none()) {
      out.push_back(static_cast<T>(format::wire::kDynamicDim));
    } else {
      out.push_back(ToInt<T>(item, item_field));
    }
  }
  return out;
}

// A shape: a list of ints, None for a dynamic dimension (UINT64_MAX).
std::vector<uint64_t> ToShape(nanobind::handle h, std::string_view field);
// A shape as Python sees it: a list, None for a dynamic dimension.
nanobind::list ShapeToPython(std::span<const uint64_t> shape);
// "[12, 2, 8]", "[None, 7]": how a shape is written in a repr.
std::string ShapeRepr(std::span<const uint64_t> shape);

}  // namespace folio::python

#endif  // FOLIO_PYTHON_FORMAT_CONVERT_H_
