// Status -> Python exception, the one place bindings raise on a Status.
#include <Python.h>

#include "bindings.h"

namespace folio::python {
namespace {

PyObject* ExceptionType(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return nullptr;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kCorruption:
    case StatusCode::kFailedPrecondition:
      return PyExc_ValueError;
    case StatusCode::kUnimplemented:
      return PyExc_NotImplementedError;
    case StatusCode::kNotFound:
      return PyExc_KeyError;
    case StatusCode::kIoError:
      return PyExc_OSError;
    case StatusCode::kResourceExhausted:
      return PyExc_RuntimeError;
  }
  return PyExc_RuntimeError;
}

[[noreturn]] void Raise(PyObject* type, const Status& status) {
  // nanobind's python_error picks up the error indicator set here.
  PyErr_SetString(type, status.message().c_str());
  throw nanobind::python_error();
}

}  // namespace

void ThrowIfError(const Status& status) {
  if (status.ok()) return;
  Raise(ExceptionType(status), status);
}

void ThrowIfModelError(const Status& status) {
  if (status.ok()) return;
  Raise(status.code() == StatusCode::kNotFound ? PyExc_FileNotFoundError : ExceptionType(status),
        status);
}

void ThrowIfRequestError(const Status& status) {
  if (status.ok()) return;
  Raise(status.code() == StatusCode::kUnimplemented ? PyExc_NotImplementedError : PyExc_ValueError,
        status);
}

}  // namespace folio::python
