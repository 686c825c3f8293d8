// libFuzzer target: any byte string given to the safetensors reader is
// either refused with a Status or parsed into tensors whose data spans lie
// inside the input; never a crash, a hang or a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "folio/checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                               reinterpret_cast<const std::byte*>(data) + size);
  auto file = folio::checkpoint::SafetensorsFile::FromBytes(std::move(bytes), "fuzz");
  if (!file.ok()) return 0;
  for (const auto& t : file->tensors()) {
    const auto span = file->Data(t);
    volatile std::byte sink{};
    if (!span.empty()) sink = span.front() ^ span.back();
    (void)sink;
  }
  return 0;
}
