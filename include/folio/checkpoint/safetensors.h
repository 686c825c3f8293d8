// A strict reader and writer for the safetensors format
// (https://github.com/huggingface/safetensors).
//
// A safetensors file is, in order:
//   1. N, the header length in bytes, as a little-endian uint64;
//   2. N bytes of UTF-8 JSON: an object that maps each tensor name to
//        {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}
//      plus an optional "__metadata__" object of string -> string;
//      trailing spaces are allowed (writers pad so the data starts 8-aligned);
//   3. the data section: every tensor's bytes, row-major, little-endian, at
//      [begin, end) relative to the start of the data section.
//
// The reader accepts the files the reference library accepts, except for the
// dtypes folio does not support and the oddities listed under "Stricter than
// the reference" below. Every malformed input is a Status
// naming the source, the field, the offending value and the limit; no input
// crashes the reader, throws, or makes it allocate a size read from the file
// before that size has been checked against the file's length.
//
// Error codes:
//   kCorruption     the bytes do not follow the format (bad length prefix,
//                   bad JSON, a missing or mistyped field, an unknown dtype
//                   string, offsets that overlap, leave holes or run past
//                   the end, a byte size that disagrees with the shape);
//   kUnimplemented  a well-formed file folio cannot use: a valid safetensors
//                   dtype other than F64/F32/BF16/F16/I8 (e.g. I32, U8,
//                   BOOL, F8_E4M3), or a rank above kMaxSafetensorsRank;
//   kNotFound       Open() of a path that does not exist;
//   kIoError        the operating system refused to open, map or write;
//   kInvalidArgument  the writer was given a bad tensor list.
//
// Stricter than the reference (documented divergences, all rare in practice):
//   - a JSON key repeated within one object (two tensors with one name, or
//     "dtype" twice in one entry) is Corruption; the reference's JSON parser
//     would silently keep one of them;
//   - a tensor entry with a key other than dtype/shape/data_offsets is
//     Corruption (the reference ignores unknown keys);
//   - an empty tensor name and "__metadata__": null are Corruption;
//   - rank is limited to kMaxSafetensorsRank (Unimplemented above it);
//   - the header limit is kMaxSafetensorsHeaderBytes (100 MiB); the
//     reference's is 100,000,000 bytes, slightly less.
#ifndef FOLIO_CHECKPOINT_SAFETENSORS_H_
#define FOLIO_CHECKPOINT_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "folio/core/dtype.h"
#include "folio/core/file_bytes.h"
#include "folio/core/status.h"

namespace folio::checkpoint {

// The largest header (N above) the reader accepts and the writer produces.
// It bounds the memory a hostile length prefix can make the reader spend on
// JSON parsing (the parsed tree of a header near the limit can still take
// several times its size; nesting deeper than a valid header's is discarded
// unbuilt).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{100} << 20;

// The largest tensor rank either side accepts.
inline constexpr size_t kMaxSafetensorsRank = 8;

// One tensor as described by a file's header.
struct TensorInfo {
  std::string name;  // non-empty, valid UTF-8, not "__metadata__"
  DType dtype;
  std::vector<uint64_t> shape;  // empty for a rank-0 scalar; a 0 is allowed
  // Byte offsets relative to the start of the data section, [begin, end).
  // end - begin == product(shape) * DTypeSize(dtype).
  uint64_t data_begin;
  uint64_t data_end;
  // The file's dtype when it is one folio does not read (an integer buffer
  // such as BERT's I64 position ids; a float8 or U8 block): `dtype` is then
  // not the tensor's, and a loader that needs the tensor refuses it by this
  // name. Empty for the dtypes above.
  std::string_view unread_dtype;
};

// A validated safetensors image: either a read-only memory mapping of a file
// (Open) or an owned buffer (FromBytes). Everything is checked on creation:
// once an object exists, every tensor's bytes lie inside the data section,
// tensors do not overlap, and together they cover the data section exactly.
//
// Movable, not copyable. A moved-from object may only be destroyed or
// assigned to. The spans returned by Data() live as long as the object.
class SafetensorsFile {
 public:
  // Memory-maps the file at `path` read-only (MAP_PRIVATE) and validates it.
  // The source (for error messages and source()) is the path as given.
  // The file must not be truncated or rewritten in place while the object
  // lives: with any mmap, reading a page past a shrunken end raises SIGBUS.
  // WriteSafetensors replaces files by rename, which is safe.
  static Result<SafetensorsFile> Open(const std::filesystem::path& path);

  // Validates an in-memory image of a whole file and takes ownership of it.
  // `source` names the image in error messages (e.g. "<download of x>").
  static Result<SafetensorsFile> FromBytes(std::vector<std::byte> bytes, std::string source);

  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile() = default;  // unmaps (Open) or frees (FromBytes)

  // All tensors, sorted by (data_begin, data_end, name): the order of their
  // bytes in the file, which is not the order of the keys in the header.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  // The tensor called `name`, or nullptr if there is none.
  const TensorInfo* Find(std::string_view name) const;

  // The bytes of `t`, which must come from this file's tensors() or Find();
  // offsets outside the data section are a FOLIO_CHECK failure.
  // Little-endian, row-major. Alignment: the data section starts at byte
  // 8 + N of the file; files from WriteSafetensors (and the Python library)
  // pad N to a multiple of 8, but other writers need not, so callers must
  // not assume more than byte alignment (use memcpy or LoadElement).
  std::span<const std::byte> Data(const TensorInfo& t) const;

  // The "__metadata__" object; empty if the header has none.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The path given to Open or the name given to FromBytes.
  const std::string& source() const { return source_; }

 private:
  SafetensorsFile() = default;
  // Parses and validates `image` (a whole file that this object keeps
  // alive), filling every member but the storage.
  Status Init(std::span<const std::byte> image, std::string source);

  std::string source_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> tensors_ idx
  std::map<std::string, std::string> metadata_;
  // The image. Moving a FileBytes keeps its bytes in place, so data_ stays valid
  // across moves.
  FileBytes bytes_;                  // the mapped file, or an owned buffer
  std::span<const std::byte> data_;  // the data section of the image
};

// One tensor to encode; `data` must be exactly
// product(shape) * DTypeSize(dtype) bytes, row-major, little-endian.
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  std::span<const std::byte> data;
};

// Encodes a whole file: the little-endian uint64 header length N, N bytes of
// compact JSON (keys sorted; "__metadata__" present only if `metadata` is
// non-empty) padded with spaces to a multiple of 8, so the data section is
// 8-aligned, then each tensor's data in the given order, without gaps.
// InvalidArgument if a name is empty, "__metadata__", repeated or not valid
// UTF-8, if a metadata key or value is not valid UTF-8, if a rank exceeds
// kMaxSafetensorsRank, if a data size is not product(shape) * dtype size
// (overflow-checked), or if the header would exceed the reader's limit.
// Every file this produces is accepted by SafetensorsFile.
Result<std::vector<std::byte>> EncodeSafetensors(
    std::span<const TensorToWrite> tensors, const std::map<std::string, std::string>& metadata);

// Writes what EncodeSafetensors would return to `path`, atomically: the bytes
// go to "<path>.tmp", which is fsync'ed and then renamed over `path`. On any
// failure the temporary file is removed and `path` is left as it was (absent
// or the previous file); a crash mid-write can leave only "<path>.tmp".
// Tensor data is written straight from the spans, not copied.
// Errors: as EncodeSafetensors, plus IoError naming the path and the reason.
Status WriteSafetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                        const std::map<std::string, std::string>& metadata);

}  // namespace folio::checkpoint

#endif  // FOLIO_CHECKPOINT_SAFETENSORS_H_
