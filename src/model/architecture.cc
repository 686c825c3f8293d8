#include "folio/model/architecture.h"

#include "folio/core/check.h"

namespace folio::model {
namespace internal {
void BadArchitecture(Architecture a) {
  FOLIO_CHECK(false, "unknown architecture ", static_cast<int>(a));
  __builtin_unreachable();
}
}  // namespace internal

namespace {
template <typename Field>
std::optional<Architecture> Find(std::string_view value, Field field) {
  if (value.empty()) return std::nullopt;
  for (const ArchitectureTraits& t : kArchitectureTraits) {
    if (t.*field == value) return t.architecture;
  }
  return std::nullopt;
}
}  // namespace

std::optional<Architecture> ArchitectureFromName(std::string_view name) {
  return Find(name, &ArchitectureTraits::name);
}
std::optional<Architecture> ArchitectureFromHfClass(std::string_view hf_class) {
  return Find(hf_class, &ArchitectureTraits::hf_class);
}
std::optional<Architecture> ArchitectureFromGgufName(std::string_view gguf_name) {
  return Find(gguf_name, &ArchitectureTraits::gguf_name);
}

}  // namespace folio::model
