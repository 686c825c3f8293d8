// Test support: readable names for value-parameterized cases, so that ctest
// lists what each case checks instead of the parameter's raw bytes.
#ifndef FOLIO_TESTING_CASE_NAMES_H_
#define FOLIO_TESTING_CASE_NAMES_H_

#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>

namespace folio::test_support {

// "i_label" for case i (gtest wants names unique within the suite, made of
// letters, digits and '_'): every other character of the label becomes '_'.
inline std::string CaseName(size_t index, std::string_view label) {
  std::string name = std::to_string(index) + "_" + std::string(label);
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

}  // namespace folio::test_support

#endif  // FOLIO_TESTING_CASE_NAMES_H_
