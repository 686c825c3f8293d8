// libFuzzer target: any byte string given to the KV snapshot decoder is
// either refused with a Status or decoded into a snapshot that validates and
// survives another encode / decode; never a crash, a hang, an oversized
// allocation or a sanitizer report. The trailing CRC-32 is recomputed
// before decoding, so mutations reach the parser instead of stopping at the
// checksum.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "folio/format/kv_snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                               reinterpret_cast<const std::byte*>(data) + size);
  if (bytes.size() >= 4) {
    const uLong crc = crc32(0L, data, static_cast<uInt>(size - 4));
    for (size_t i = 0; i < 4; ++i) {
      bytes[size - 4 + i] = static_cast<std::byte>((crc >> (8 * i)) & 0xFF);
    }
  }
  auto s = folio::format::DecodeSnapshot(bytes);
  if (s.ok()) {
    if (!s->Validate().ok()) {
      std::fprintf(stderr, "fuzz_snapshot: decoded snapshot does not validate\n");
      std::abort();
    }
    if (!folio::format::DecodeSnapshot(folio::format::EncodeSnapshot(*s)).ok()) {
      std::fprintf(stderr, "fuzz_snapshot: re-encoded snapshot does not decode\n");
      std::abort();
    }
  }
  return 0;
}
