// A GGUF writer: the inverse of GgufFile (gguf.h), for `folio quantize`.
//
// It writes version 3, little-endian, in the layout gguf.h describes: the
// header, the key/values in the order given, the tensor infos in the order
// given, zero padding to the alignment, then each tensor's bytes at an
// offset that is a multiple of the alignment, each followed by zero padding
// to the next multiple (as ggml's gguf.cpp and the gguf Python package
// write, so a file ends on an aligned size). The alignment is the
// metadata's general.alignment when it has one, else 32.
//
// What it writes always reads back: everything GgufFile would refuse is
// refused before a byte is written (InvalidArgument naming the key or
// tensor), so GgufFile::Open of the result succeeds and gives back the same
// key/values (GgufValue ==) and tensor infos. Writing what GgufFile read
// (ReadGgufMetadata, the infos and Data) reproduces a file written this way
// byte for byte.
#ifndef FOLIO_CHECKPOINT_GGUF_WRITER_H_
#define FOLIO_CHECKPOINT_GGUF_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "folio/checkpoint/gguf.h"
#include "folio/core/status.h"

namespace folio::checkpoint {

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

struct GgufTensorSpec {
  std::string name;  // 1 to kMaxGgufTensorNameBytes bytes, unique
  GgmlType type;
  // ggml order, innermost first (gguf.h): 1 to 4 dims, each >= 1, dims[0]
  // a multiple of GgmlBlockSize(type).
  std::vector<uint64_t> dims;
};

// GgmlBlockBytes(type) * product(dims) / GgmlBlockSize(type); 0 when the
// spec is one the writer would refuse (an unknown type, a dim of 0, not
// whole blocks, overflow).
uint64_t GgufTensorBytes(const GgufTensorSpec& spec);

// Every key/value of `file`, in file order.
Result<std::vector<GgufKeyValue>> ReadGgufMetadata(const GgufFile& file);

// Sets `key` to `value`: in place if the key is present (keeping its
// position), else appended.
void SetGgufValue(std::vector<GgufKeyValue>& kvs, std::string_view key, GgufValue value);

// GgufValue constructors for the types llama.cpp writes its keys with.
GgufValue GgufU32(uint32_t v);
GgufValue GgufF32(float v);
GgufValue GgufString(std::string v);
GgufValue GgufBool(bool v);

// The bytes before the data section (header, key/values, tensor infos,
// padding to the alignment), and in `offsets` each tensor's offset in the
// data section. InvalidArgument, naming the key or tensor, for: an empty,
// over-long (kMaxGgufKeyBytes) or repeated key; a value whose data does not
// hold its type (an integer out of its type's range, an array element whose
// type differs from the array's element type), a string value longer than
// kMaxGgufStringBytes, arrays nested deeper than kMaxGgufArrayDepth; a
// general.alignment that is not an integer power of two below 2^32; an
// empty, over-long or repeated tensor name; 0 or more than 4 dims, a dim of
// 0 or above 2^63 - 1, a dims[0] that is not whole blocks, a size that
// overflows; a ggml type outside the enum.
Result<std::vector<std::byte>> EncodeGgufHeader(const std::vector<GgufKeyValue>& kvs,
                                                const std::vector<GgufTensorSpec>& tensors,
                                                std::vector<uint64_t>* offsets = nullptr);

// Fills `out` (exactly GgufTensorBytes(tensors[index]) bytes, zeroed) with
// tensor `index`'s data, or returns why it cannot.
using GgufTensorFill = std::function<Status(size_t index, std::span<std::byte> out)>;
// Runs on the finished temporary file before it is renamed into place (a
// check that it reads back, say); an error keeps `path` as it was.
using GgufFileCheck = std::function<Status(const std::filesystem::path& tmp)>;

// Writes a GGUF file to `path` atomically: everything is encoded and
// checked first (EncodeGgufHeader's errors), then written to `path` +
// ".tmp", tensor by tensor as `fill` (called once per tensor, in order)
// produces them, flushed to disk, checked by `check` if given, and renamed
// over `path`. Any failure (a refusal, fill's error, a write the operating
// system refuses: IoError naming the file) removes the temporary file and
// leaves `path` as it was, absent or whole.
Status WriteGgufFile(const std::filesystem::path& path, const std::vector<GgufKeyValue>& kvs,
                     const std::vector<GgufTensorSpec>& tensors, const GgufTensorFill& fill,
                     const GgufFileCheck& check = {});

}  // namespace folio::checkpoint

#endif  // FOLIO_CHECKPOINT_GGUF_WRITER_H_
