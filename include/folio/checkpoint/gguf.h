// A strict reader for GGUF, the file format of ggml and llama.cpp
// (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md), versions 2
// and 3.
//
// A GGUF file is, in order, all little-endian:
//   1. the header: the magic "GGUF" (u32 0x46554747), u32 version,
//      u64 tensor_count, u64 metadata_kv_count;
//   2. metadata_kv_count key/values: the key as a gguf string (u64 length,
//      then that many bytes, no NUL), a u32 GgufValueType, then the value;
//      an array value is a u32 element type, a u64 count, then the elements;
//   3. tensor_count tensor infos: the name (a gguf string), u32 n_dims,
//      n_dims u64 dims (ggml's ne[]: dims[0] is the innermost, contiguous
//      dimension, so a numpy array of shape (rows, cols) has dims
//      [cols, rows]), a u32 GgmlType, and a u64 offset relative to the start
//      of the data section;
//   4. zero padding up to a multiple of the alignment (the metadata key
//      "general.alignment", default 32), then the data section.
// Version 2 and 3 files are laid out alike (v1 used 32-bit counts; v3 only
// added the big-endian variant, which folio does not read).
//
// The reader describes a file (every ggml type's block layout); what folio
// computes with is WeightTypeOf's one mapping to ops::WeightType. Every malformed input
// is a Status naming the source, the field, the offending value and the
// limit; no input crashes the reader, throws, or makes it allocate a size
// read from the file: counts are checked against the bytes that remain, and
// parsing allocates only per entry actually read. Metadata values are
// validated on creation but decoded only when asked for, so a 150k-entry
// vocabulary costs one validating pass and no allocation until the
// tokenizer reads it.
//
// Error codes:
//   kCorruption     the bytes do not follow the format: a bad magic, a
//                   truncation anywhere, a count beyond what the remaining
//                   bytes could hold, an unknown value type, a bool other
//                   than 0 or 1, an empty, over-long or repeated key, a bad
//                   general.alignment, an empty, over-long or repeated tensor
//                   name, n_dims above 4, a dim of 0 or above 2^63 - 1, an
//                   element count or byte size that overflows, an unknown or
//                   removed ggml type, a row length that is not a multiple
//                   of the type's block size, an offset that is not a
//                   multiple of the alignment, tensor bytes beyond the file,
//                   tensors that overlap;
//   kUnimplemented  a well-formed file folio cannot read: a version other
//                   than 2 or 3 (including byte-swapped, big-endian files),
//                   a ggml type id above folio's table, arrays nested deeper
//                   than kMaxGgufArrayDepth, a string value longer than
//                   kMaxGgufStringBytes, a rank-0 tensor (n_dims 0);
//   kNotFound       Open() of a path that does not exist; a getter's key
//                   that the file does not have;
//   kIoError        the operating system refused to open or map the file;
//   kInvalidArgument  a getter whose key holds another type;
//   kOutOfRange     a getter whose key holds an integer the requested type
//                   cannot represent (a negative value read as unsigned).
//
// Stricter than ggml's gguf.cpp (all rare or absent in real files):
//   - a dim of 0 is Corruption (ggml accepts 0 in dims[0] and divides by the
//     others); n_dims 0 is Unimplemented (ggml reads it as one element);
//   - empty keys, empty tensor names and bool bytes other than 0/1 are
//     Corruption (ggml accepts them).
// More lenient than gguf.cpp:
//   - nested arrays are read, up to kMaxGgufArrayDepth levels (ggml refuses
//     any nesting; the gguf Python package writes and reads them);
//   - tensors may appear in any order and leave gaps, as long as each is
//     aligned, inside the file and disjoint from the others (gguf.cpp wants
//     declaration order, each tensor padded to the alignment);
//   - general.alignment may be any integer type holding a power of two below
//     2^32 (gguf.cpp wants u32);
//   - the file may end right after the last tensor's bytes, without the
//     final padding (llama.cpp's mmap loader accepts that too).
// Strings are read as bytes: GGUF says UTF-8, but neither ggml nor folio
// checks it (some vocabularies hold partial UTF-8 sequences).
#ifndef FOLIO_CHECKPOINT_GGUF_H_
#define FOLIO_CHECKPOINT_GGUF_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "folio/core/file_bytes.h"
#include "folio/core/status.h"
#include "folio/ops/weight_type.h"

namespace folio::checkpoint {
namespace internal {
class GgufCursor;  // gguf.cc's bounds-checked little-endian reader
}  // namespace internal

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as u32 LE
inline constexpr uint64_t kGgufDefaultAlignment = 32;
inline constexpr std::string_view kGgufAlignmentKey = "general.alignment";
// The spec limits keys to 2^16 - 1 bytes.
inline constexpr uint64_t kMaxGgufKeyBytes = 65535;
// ggml's GGML_MAX_NAME is 64 bytes including the terminating NUL.
inline constexpr uint64_t kMaxGgufTensorNameBytes = 63;
// ggml's GGML_MAX_DIMS.
inline constexpr uint32_t kMaxGgufDims = 4;
// folio's limit on one string value (a chat template is tens of KiB; a
// vocabulary is many short strings, each checked against this).
inline constexpr uint64_t kMaxGgufStringBytes = uint64_t{1} << 20;
// folio's limit on array nesting: a top-level array is depth 1, an array of
// arrays depth 2. It bounds the reader's recursion.
inline constexpr int kMaxGgufArrayDepth = 4;

// The metadata value types, with their on-disk ids.
enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// "u8", "i8", ..., "f32", "bool", "string", "array", "u64", "i64", "f64";
// "unknown" for a value outside the enum.
std::string_view GgufValueTypeName(GgufValueType t);

// The ggml tensor types, with their on-disk ids. Ids 4, 5, 31-33 and 36-38
// belonged to types that ggml has removed from GGUF files.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
};

// "F32", "Q8_0", "Q4_K", "IQ2_XXS", "BF16", ... (ggml's enum names, as the
// gguf Python package prints them); "unknown" for a value outside the enum.
std::string_view GgmlTypeName(GgmlType t);
// Elements per block (1 for F32, 32 for Q8_0, 256 for the K-quants) and
// bytes per block (4 for F32, 34 for Q8_0), as ggml's type traits say.
// A value outside the enum is a FOLIO_CHECK failure.
uint64_t GgmlBlockSize(GgmlType t);
uint64_t GgmlBlockBytes(GgmlType t);

// The folio weight type (ops/weight_type.h) a ggml type is read as:
// F64, F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K,
// Q2_K, Q3_K, IQ4_NL, IQ4_XS and MXFP4 map to their namesakes (with the
// same block layout, checked at compile time); every other type, and a
// value outside the enum, is nullopt. One exhaustive switch over GgmlType:
// the only place ggml ids become weight types.
std::optional<ops::WeightType> WeightTypeOf(GgmlType t);
// The ggml type a weight type is written as: the inverse of WeightTypeOf
// (every weight type has one). One exhaustive switch over WeightType.
GgmlType GgmlTypeOf(ops::WeightType t);
// The ggml names of the types WeightTypeOf maps, in WeightType order:
// "F64, F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K,
// Q2_K, Q3_K, IQ4_NL, IQ4_XS and MXFP4".
std::string GgmlTypesFolioLoads();

// A decoded metadata value. Scalars keep the type they were written with.
struct GgufValue {
  GgufValueType type = GgufValueType::kU8;
  // The element type of an array (also of an empty one); kU8 otherwise.
  GgufValueType element_type = GgufValueType::kU8;
  // u8/u16/u32/u64 -> uint64_t; i8/i16/i32/i64 -> int64_t; f32/f64 ->
  // double (f32 widens exactly); bool; string (the bytes, unchecked);
  // array -> its elements, each with type == element_type.
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<GgufValue>> data;

  bool operator==(const GgufValue&) const = default;
};

// A validated GGUF image: either a read-only memory mapping of a file (Open)
// or an owned buffer (FromBytes). Everything is checked on creation: once an
// object exists, every metadata value decodes, every tensor has a known type,
// an aligned offset and bytes inside the data section, and no two tensors
// overlap.
//
// Movable, not copyable. A moved-from object may only be destroyed or
// assigned to. The spans returned by Data() live as long as the object.
class GgufFile {
 public:
  struct TensorInfo {
    std::string name;  // 1 to kMaxGgufTensorNameBytes bytes, unique
    GgmlType type;
    // ggml order: dims[0] is the innermost (contiguous) dimension, the
    // reverse of a numpy or PyTorch shape. 1 to 4 entries, each in
    // [1, 2^63), their product below 2^63; dims[0] is a multiple of
    // GgmlBlockSize(type).
    std::vector<uint64_t> dims;
    // Relative to the start of the data section; a multiple of alignment().
    uint64_t offset;
    // product(dims) / GgmlBlockSize(type) * GgmlBlockBytes(type).
    uint64_t num_bytes;
  };

  // Memory-maps the file at `path` read-only (MAP_PRIVATE) and validates it.
  // The source (for error messages and source()) is the path as given.
  // The file must not be truncated or rewritten in place while the object
  // lives: with any mmap, reading a page past a shrunken end raises SIGBUS.
  static Result<GgufFile> Open(const std::filesystem::path& path);

  // Validates an in-memory image of a whole file and takes ownership of it.
  // `source` names the image in error messages.
  static Result<GgufFile> FromBytes(std::vector<std::byte> bytes, std::string source);

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  ~GgufFile() = default;  // unmaps (Open) or frees (FromBytes)

  uint32_t version() const { return version_; }  // 2 or 3
  // general.alignment, or kGgufDefaultAlignment without it.
  uint64_t alignment() const { return alignment_; }
  // The file offset of the data section: the end of the tensor infos,
  // rounded up to alignment().
  uint64_t data_offset() const { return data_offset_; }

  // --- Metadata. ---
  // Every getter's error names the source and the key. Absent keys are
  // NotFound; a key of another type is InvalidArgument naming both types.
  bool Has(std::string_view key) const;
  // All keys in file order.
  std::vector<std::string> Keys() const;
  // The value of `key`, decoded (arrays recursively).
  Result<GgufValue> Get(std::string_view key) const;

  // Integers widen where lossless: GetUint reads any unsigned type and any
  // signed type holding a value >= 0; GetInt reads any signed type and any
  // unsigned type holding a value < 2^63 (llama.cpp's writers mix i32, u32
  // and u64 for the same keys). An integer outside the result's range is
  // OutOfRange. Bools are not integers.
  Result<uint64_t> GetUint(std::string_view key) const;
  Result<int64_t> GetInt(std::string_view key) const;
  // f32 or f64 (integers are not read as floats).
  Result<double> GetFloat(std::string_view key) const;
  Result<bool> GetBool(std::string_view key) const;
  Result<std::string> GetString(std::string_view key) const;
  // Arrays of the respective element types, with the same widening rules;
  // an element outside the range is OutOfRange naming its index.
  Result<std::vector<std::string>> GetStringArray(std::string_view key) const;
  Result<std::vector<double>> GetFloatArray(std::string_view key) const;
  Result<std::vector<int64_t>> GetIntArray(std::string_view key) const;

  // --- Tensors. ---
  // All tensors in file (declaration) order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // The tensor called `name`, or nullptr if there is none.
  const TensorInfo* Find(std::string_view name) const;
  // The bytes of `t`, which must come from this file's tensors() or Find();
  // a range outside the data section is a FOLIO_CHECK failure.
  // Alignment: the data section starts at data_offset() of the image, so
  // with Open a tensor is aligned to min(alignment(), page size); with
  // FromBytes the buffer's own alignment (16 with new) caps it. Callers
  // that need more than byte alignment must check or copy.
  std::span<const std::byte> Data(const TensorInfo& t) const;

  // The path given to Open or the name given to FromBytes.
  const std::string& source() const { return source_; }

 private:
  // One validated key/value; `value` is the encoded value after the type id
  // (for an array: element type, count, elements), inside the image.
  struct Kv {
    std::string key;
    GgufValueType type;
    std::span<const std::byte> value;
  };

  GgufFile() = default;
  // Parses and validates `image` (a whole file that this object keeps
  // alive), filling every member but the storage.
  Status Init(std::span<const std::byte> image, std::string source);
  Status ReadKvs(internal::GgufCursor& cursor, uint64_t kv_count);
  // Sets alignment_ from general.alignment, if present.
  Status ReadAlignment();
  Status ReadTensorInfos(internal::GgufCursor& cursor, uint64_t tensor_count);
  // Checks that every tensor lies inside data_ and that none overlap.
  Status CheckTensorLayout(uint64_t file_bytes) const;
  // The entry for `key`, or NotFound naming the source and the key.
  Result<const Kv*> Lookup(std::string_view key) const;
  // InvalidArgument: "<source>: metadata key '<key>' has type <got>, wanted
  // <wanted>".
  Status WrongType(const Kv& kv, std::string_view wanted) const;

  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::string source_;
  std::vector<Kv> kvs_;                                  // file order
  std::map<std::string, size_t, std::less<>> kv_index_;  // key -> kvs_ idx
  std::vector<TensorInfo> tensors_;                      // file order
  std::map<std::string, size_t, std::less<>> tensor_index_;
  // The image. Moving a FileBytes keeps its bytes in place, so data_ and every Kv::value stay valid
  // across moves.
  FileBytes bytes_;                  // the mapped file, or an owned buffer
  std::span<const std::byte> data_;  // the data section of the image
};

// The weight type of tensor `t`, or Unimplemented naming it and its ggml
// type: "tensor blk.0.attn_q.weight has ggml type IQ2_XXS (folio loads
// F64, F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K,
// Q3_K, IQ4_NL, IQ4_XS and MXFP4)".
Result<ops::WeightType> WeightTypeOf(const GgufFile::TensorInfo& t);

}  // namespace folio::checkpoint

#endif  // FOLIO_CHECKPOINT_GGUF_H_
