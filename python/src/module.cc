// folio._folio: the compiled half of the `folio` Python package. The
// package's __init__.py re-exports what is bound here.
#include <nanobind/nanobind.h>

#include "bindings.h"

#ifndef FOLIO_VERSION
#error "FOLIO_VERSION must be defined by the build (python/CMakeLists.txt)"
#endif

NB_MODULE(_folio, m) {
  m.doc() = "folio's engine, its C++ kernels over NumPy arrays, and its Hurray tensor descriptors";
  m.attr("__version__") = FOLIO_VERSION;
  folio::python::BindAttention(m);
  folio::python::BindFormat(m);
  folio::python::BindSnapshot(m);
  folio::python::BindLlm(m);
  folio::python::BindChat(m);
  folio::python::BindFrontEnd(m);
  folio::python::BindSampling(m);
}
