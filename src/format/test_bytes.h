// Hand-built little-endian bytes for the format tests: every golden
// encoding is written field by field from the spec, never by the encoder.
#ifndef FOLIO_FORMAT_TEST_BYTES_H_
#define FOLIO_FORMAT_TEST_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace folio::format::testing {

using Bytes = std::vector<std::byte>;

template <typename T>
Bytes Le(T v) {
  Bytes out(sizeof(T));
  for (size_t i = 0; i < sizeof(T); ++i) {
    out[i] = static_cast<std::byte>((static_cast<unsigned long long>(v) >> (8 * i)) & 0xFF);
  }
  return out;
}
inline Bytes U8(uint8_t v) { return Le(v); }
inline Bytes U16(uint16_t v) { return Le(v); }
inline Bytes U32(uint32_t v) { return Le(v); }
inline Bytes U64(uint64_t v) { return Le(v); }
inline Bytes Zeros(size_t n) { return Bytes(n, std::byte{0}); }

inline Bytes Join(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// "03 01 0100 ffffffff": hex digits, spaces and '|' ignored.
inline Bytes FromHex(std::string_view hex) {
  Bytes out;
  int hi = -1;
  for (char c : hex) {
    int v;
    if (c >= '0' && c <= '9')
      v = c - '0';
    else if (c >= 'a' && c <= 'f')
      v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v = c - 'A' + 10;
    else
      continue;
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<std::byte>(hi * 16 + v));
      hi = -1;
    }
  }
  return out;
}

// The fixed header with the given fields; descriptor_length is patched by
// Finish once the whole descriptor is assembled.
inline Bytes Header(uint32_t flags, uint8_t dtype, uint8_t layout, uint32_t rank) {
  return Join(
      {FromHex("48 52 52 59"), U8(1), U8(0), U32(0), U32(flags), U8(dtype), U8(layout), U32(rank)});
}
inline Bytes Finish(Bytes b) {
  const Bytes len = U32(static_cast<uint32_t>(b.size()));
  for (size_t i = 0; i < 4; ++i) b[6 + i] = len[i];
  return b;
}
// One buffer handle: byte_size, alignment, device, sync, class, reserved.
inline Bytes Buffer(uint64_t size, uint32_t alignment = 64, uint8_t device = 0, uint8_t sync = 0,
                    uint8_t memory_class = 0, uint8_t reserved = 0) {
  return Join({U64(size), U32(alignment), U8(device), U8(sync), U8(memory_class), U8(reserved)});
}

}  // namespace folio::format::testing

#endif  // FOLIO_FORMAT_TEST_BYTES_H_
