#include "format_convert.h"

#include <nanobind/stl/string_view.h>

#include "folio/format/hurray_format.h"

namespace nb = nanobind;

namespace folio::python {
namespace {

// folio.InvalidDescriptorError; the module object keeps it alive.
PyObject* g_descriptor_error = nullptr;

}  // namespace

void RegisterDescriptorError(nb::module_& m) {
  g_descriptor_error = PyErr_NewExceptionWithDoc(
      "folio.InvalidDescriptorError",
      "A descriptor, layout, quantization scheme or index buffer that folio's format module "
      "refuses; the message names the field and the value.",
      PyExc_ValueError, nullptr);
  if (g_descriptor_error == nullptr) throw nb::python_error();
  m.attr("InvalidDescriptorError") = nb::steal(g_descriptor_error);
}

void RaiseDescriptorError(const std::string& message) {
  PyErr_SetString(g_descriptor_error, message.c_str());
  throw nb::python_error();
}
void RaiseTypeError(const std::string& message) { throw nb::type_error(message.c_str()); }

void ThrowIfFormatError(const Status& status) {
  if (!status.ok()) RaiseDescriptorError(status.message());
}

std::string TypeName(nb::handle h) { return nb::type_name(h.type()).c_str(); }
std::string Repr(nb::handle h) { return nb::repr(h).c_str(); }

std::string_view ElementTypeLongName(format::ElementType t) {
  return NameOf<format::ElementType>(kElementTypes, t);
}

format::ElementType ToElementType(nb::handle h, std::string_view field) {
  if (nb::isinstance<format::ElementType>(h)) return nb::cast<format::ElementType>(h);
  if (nb::isinstance<nb::str>(h)) {
    Result<format::ElementType> t = format::ParseElementType(nb::cast<std::string_view>(h));
    if (!t.ok()) RaiseDescriptorError(StrCat(field, ": ", t.error().message()));
    return *t;
  }
  RaiseTypeError(StrCat(field,
                        " must be a folio.ElementType (such as folio.float32) or its "
                        "name, got ",
                        TypeName(h)));
}

std::vector<uint64_t> ToShape(nb::handle h, std::string_view field) {
  return ToInts<uint64_t>(h, field, /*none_is_dynamic=*/true);
}

nb::list ShapeToPython(std::span<const uint64_t> shape) {
  nb::list out;
  for (uint64_t d : shape) {
    if (d == format::wire::kDynamicDim) {
      out.append(nb::none());
    } else {
      out.append(d);
    }
  }
  return out;
}

std::string ShapeRepr(std::span<const uint64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += StrCat(i > 0 ? ", " : "");
    s += shape[i] == format::wire::kDynamicDim ? std::string("None") : StrCat(shape[i]);
  }
  return s + "]";
}

}  // namespace folio::python
