// libFuzzer target: any byte string given to the Hurray descriptor decoder
// is either refused with a Status or decoded into a descriptor that
// re-encodes to exactly the same bytes; never a crash, a hang, an
// oversized allocation or a sanitizer report. The same holds for a bare
// quantization descriptor.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "folio/format/descriptor.h"
#include "folio/format/quantization.h"

namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "fuzz_descriptor: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);

  auto d = folio::format::TensorDescriptor::FromBytes(bytes);
  if (d.ok()) {
    const std::vector<std::byte> again = d->ToBytes();
    if (again.size() != size || d->encoded_size() != size ||
        !std::equal(again.begin(), again.end(), bytes.begin())) {
      Fail("accepted descriptor re-encodes differently");
    }
    auto twice = folio::format::TensorDescriptor::FromBytes(again);
    if (!twice.ok() || !(*twice == *d)) Fail("re-decode differs");
  } else if (d.error().message().empty()) {
    Fail("error without a message");
  }

  auto q = folio::format::DecodeQuantization(bytes);
  if (q.ok()) {
    const std::vector<std::byte> again = folio::format::EncodeQuantization(*q);
    if (again.size() != size || !std::equal(again.begin(), again.end(), bytes.begin())) {
      Fail("accepted quantization descriptor re-encodes differently");
    }
  }
  return 0;
}
