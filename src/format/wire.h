// Little-endian reading and writing of the format module's wire bytes
// (descriptors and KV snapshot files; module-internal).
//
// Reader bounds every read by the bytes that remain and names the field
// and its byte offset when it runs out, so truncated input is an
// InvalidArgument that says what was being read.
#ifndef FOLIO_FORMAT_WIRE_H_
#define FOLIO_FORMAT_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <iomanip>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "folio/core/status.h"
#include "folio/core/str_cat.h"

namespace folio::format::internal {

// "0x0a": a tag or flag as it appears in the spec.
inline std::string Hex(uint64_t v, int width = 2) {
  std::ostringstream out;
  out << "0x" << std::hex << std::setw(width) << std::setfill('0') << v;
  return out.str();
}

template <typename... Args>
Status Invalid(const Args&... args) {
  return Status::InvalidArgument(StrCat(args...));
}
template <typename... Args>
Status Unsupported(const Args&... args) {
  return Status::Unimplemented(StrCat(args...));
}

class Reader {
 public:
  // `input` names what is read in errors ("descriptor", "snapshot").
  explicit Reader(std::span<const std::byte> bytes, std::string_view input = "descriptor")
      : bytes_(bytes), input_(input) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  Status Need(std::string_view what, uint64_t num_bytes) const {
    if (num_bytes <= remaining()) return Status::Ok();
    return Invalid("truncated ", input_, ": ", what, " at byte ", pos_, " needs ", num_bytes,
                   " bytes, ", remaining(), " remain");
  }

  // An unsigned little-endian integer of sizeof(T) bytes.
  template <typename T>
  Status Read(std::string_view what, T& out) {
    static_assert(std::is_unsigned_v<T>);
    FOLIO_RETURN_IF_ERROR(Need(what, sizeof(T)));
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      v |= static_cast<uint64_t>(bytes_[pos_ + i]) << (8 * i);
    }
    pos_ += sizeof(T);
    out = static_cast<T>(v);
    return Status::Ok();
  }

  // `count` bytes that must all be zero.
  Status ReadReserved(std::string_view what, uint64_t count) {
    FOLIO_RETURN_IF_ERROR(Need(what, count));
    for (uint64_t i = 0; i < count; ++i) {
      const auto b = static_cast<uint8_t>(bytes_[pos_ + i]);
      if (b != 0) {
        return Invalid(what, " byte ", i, " (", input_, " byte ", pos_ + i, ") is ", Hex(b),
                       "; reserved bytes must be zero");
      }
    }
    pos_ += count;
    return Status::Ok();
  }

  // The next `count` bytes (checked), advancing past them.
  Status Take(std::string_view what, uint64_t count, std::span<const std::byte>& out) {
    FOLIO_RETURN_IF_ERROR(Need(what, count));
    out = bytes_.subspan(pos_, count);
    pos_ += count;
    return Status::Ok();
  }

 private:
  std::span<const std::byte> bytes_;
  std::string_view input_;
  uint64_t pos_ = 0;
};

class Writer {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_unsigned_v<T>);
    for (size_t i = 0; i < sizeof(T); ++i) {
      out_.push_back(static_cast<std::byte>((static_cast<uint64_t>(v) >> (8 * i)) & 0xFFu));
    }
  }
  void Reserve(uint64_t count) { out_.reserve(count); }
  void PutZeros(uint64_t count) { out_.insert(out_.end(), count, std::byte{0}); }
  void PutBytes(std::span<const std::byte> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  uint64_t size() const { return out_.size(); }
  std::vector<std::byte>& bytes() { return out_; }

 private:
  std::vector<std::byte> out_;
};

}  // namespace folio::format::internal

#endif  // FOLIO_FORMAT_WIRE_H_
