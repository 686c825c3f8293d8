// FOLIO_CHECK: invariants inside folio. Always on; on failure prints the
// file, line, condition and any values passed, then aborts. FOLIO_DCHECK is
// the same in debug builds and compiles to nothing in release (hot loops).
#ifndef FOLIO_CORE_CHECK_H_
#define FOLIO_CORE_CHECK_H_

#include <sstream>
#include <string>

namespace folio::internal {

[[noreturn]] void CheckFailed(const char* file, int line, const char* cond,
                              const std::string& detail);

template <typename... Args>
std::string CheckDetail(const Args&... args) {
  if constexpr (sizeof...(Args) == 0) {
    return {};
  } else {
    std::ostringstream out;
    (out << ... << args);
    return out.str();
  }
}

}  // namespace folio::internal

#define FOLIO_CHECK(cond, ...)                                                     \
  do {                                                                             \
    if (!(cond)) [[unlikely]] {                                                    \
      ::folio::internal::CheckFailed(__FILE__, __LINE__, #cond,                    \
                                     ::folio::internal::CheckDetail(__VA_ARGS__)); \
    }                                                                              \
  } while (false)

#ifdef NDEBUG
#define FOLIO_DCHECK(cond, ...) \
  do {                          \
  } while (false)
#else
#define FOLIO_DCHECK(cond, ...) FOLIO_CHECK(cond, __VA_ARGS__)
#endif

#endif  // FOLIO_CORE_CHECK_H_
