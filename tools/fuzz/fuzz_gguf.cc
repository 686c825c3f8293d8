// libFuzzer target: any byte string given to the GGUF reader is either
// refused with a Status or parsed into a file whose every tensor's data
// span lies inside the input; never a crash, a hang or a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "folio/checkpoint/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                               reinterpret_cast<const std::byte*>(data) + size);
  auto file = folio::checkpoint::GgufFile::FromBytes(std::move(bytes), "fuzz");
  if (!file.ok()) return 0;
  for (const std::string& key : file->Keys()) (void)file->Get(key);
  for (const auto& t : file->tensors()) {
    const auto span = file->Data(t);
    volatile std::byte sink{};
    if (!span.empty()) sink = span.front() ^ span.back();
    (void)sink;
  }
  return 0;
}
