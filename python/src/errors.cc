// Status -> Python exception, the one place bindings raise on a Status.
#include <Python.h>

#include "bindings.h"

namespace folio::python {

void ThrowIfError(const Status& status) {
  if (status.ok()) return;
  PyObject* type = PyExc_RuntimeError;
  switch (status.code()) {
    case StatusCode::kOk:
      return;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kCorruption:
    case StatusCode::kFailedPrecondition:
      type = PyExc_ValueError;
      break;
    case StatusCode::kUnimplemented:
      type = PyExc_NotImplementedError;
      break;
    case StatusCode::kNotFound:
      type = PyExc_KeyError;
      break;
    case StatusCode::kIoError:
      type = PyExc_OSError;
      break;
    case StatusCode::kResourceExhausted:
      type = PyExc_RuntimeError;
      break;
  }
  // nanobind's python_error picks up the error indicator set here.
  PyErr_SetString(type, status.message().c_str());
  throw nanobind::python_error();
}

}  // namespace folio::python
