// Status and Result<T>: how folio reports expected failures.
//
// A programming error inside folio (a broken invariant) is a FOLIO_CHECK
// (check.h). Everything a caller can cause — a bad file, a bad shape, an
// out-of-range position — comes back as a Status with a message that names
// the field, the value and the limit. g++ 12 lacks std::expected, so
// Result<T> is a small type with std::expected-like method names.
#ifndef FOLIO_CORE_STATUS_H_
#define FOLIO_CORE_STATUS_H_

#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "folio/core/check.h"

namespace folio {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller passed something malformed
  kOutOfRange,          // a valid kind of value beyond a limit
  kFailedPrecondition,  // the object is not in a state that allows this
  kResourceExhausted,   // a capacity is full
  kCorruption,          // a file or buffer does not follow its format
  kNotFound,            // a named thing (file, tensor, key) is absent
  kIoError,             // the operating system refused a read or write
  kUnimplemented,       // a valid input that folio does not support
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
  static Status FailedPrecondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }
  static Status ResourceExhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: page_size must be > 0 (got 0)"
  std::string ToString() const;

  // Prefixes the message with context, keeping the code: "loading x: ...".
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Either a T or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {  // NOLINT
    FOLIO_CHECK(!std::get<Status>(data_).ok());
  }

  bool has_value() const { return data_.index() == 0; }
  bool ok() const { return has_value(); }
  explicit operator bool() const { return has_value(); }

  T& value() & {
    CheckHasValue();
    return std::get<0>(data_);
  }
  const T& value() const& {
    CheckHasValue();
    return std::get<0>(data_);
  }
  T&& value() && {
    CheckHasValue();
    return std::get<0>(std::move(data_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The error; Status::Ok() when a value is held.
  Status status() const { return has_value() ? Status::Ok() : std::get<1>(data_); }
  const Status& error() const& {
    FOLIO_CHECK(!has_value());
    return std::get<1>(data_);
  }

 private:
  void CheckHasValue() const {
    FOLIO_CHECK(has_value(), "Result holds an error: ", std::get<1>(data_).ToString());
  }
  std::variant<T, Status> data_;
};

}  // namespace folio

#define FOLIO_STATUS_CONCAT_INNER(a, b) a##b
#define FOLIO_STATUS_CONCAT(a, b) FOLIO_STATUS_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function if it is not ok.
#define FOLIO_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::folio::Status folio_status_ = (expr);        \
    if (!folio_status_.ok()) return folio_status_; \
  } while (false)

// Declares or assigns `lhs` from a Result, returning its error if any.
#define FOLIO_ASSIGN_OR_RETURN(lhs, expr) \
  FOLIO_ASSIGN_OR_RETURN_IMPL(FOLIO_STATUS_CONCAT(folio_result_, __LINE__), lhs, expr)
#define FOLIO_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.has_value()) return tmp.error();         \
  lhs = std::move(tmp).value()

#endif  // FOLIO_CORE_STATUS_H_
