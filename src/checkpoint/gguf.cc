#include "folio/checkpoint/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <iomanip>
#include <limits>
#include <numeric>
#include <optional>
#include <sstream>
#include <system_error>
#include <type_traits>
#include <utility>

#include "folio/core/checked_math.h"
#include "folio/core/dtype.h"
#include "folio/core/str_cat.h"

namespace folio::checkpoint {
namespace {

constexpr uint64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

template <typename... Args>
Status Corrupt(const Args&... args) {
  return Status::Corruption(StrCat(args...));
}
template <typename... Args>
Status Unsupported(const Args&... args) {
  return Status::Unimplemented(StrCat(args...));
}

std::string Hex(uint32_t v) {
  std::ostringstream out;
  out << "0x" << std::hex << std::setw(8) << std::setfill('0') << v;
  return out.str();
}

// ggml's type traits (ggml.c's type_traits, ggml-common.h's block structs).
// The gguf Python package agrees on every entry but Q8_1, where it still has
// the old 40-byte block of two floats; ggml's block_q8_1 has two halves (36).
struct GgmlTraits {
  GgmlType type;
  std::string_view name;
  uint32_t block_size;   // elements per block
  uint32_t block_bytes;  // bytes per block
};
constexpr GgmlTraits kGgmlTraits[] = {
    {GgmlType::kF32, "F32", 1, 4},
    {GgmlType::kF16, "F16", 1, 2},
    {GgmlType::kQ4_0, "Q4_0", 32, 2 + 16},
    {GgmlType::kQ4_1, "Q4_1", 32, 2 + 2 + 16},
    {GgmlType::kQ5_0, "Q5_0", 32, 2 + 4 + 16},
    {GgmlType::kQ5_1, "Q5_1", 32, 2 + 2 + 4 + 16},
    {GgmlType::kQ8_0, "Q8_0", 32, 2 + 32},
    {GgmlType::kQ8_1, "Q8_1", 32, 2 + 2 + 32},
    {GgmlType::kQ2_K, "Q2_K", 256, 16 + 64 + 2 + 2},
    {GgmlType::kQ3_K, "Q3_K", 256, 32 + 64 + 12 + 2},
    {GgmlType::kQ4_K, "Q4_K", 256, 2 + 2 + 12 + 128},
    {GgmlType::kQ5_K, "Q5_K", 256, 2 + 2 + 12 + 32 + 128},
    {GgmlType::kQ6_K, "Q6_K", 256, 128 + 64 + 16 + 2},
    {GgmlType::kQ8_K, "Q8_K", 256, 4 + 256 + 32},
    {GgmlType::kIQ2_XXS, "IQ2_XXS", 256, 2 + 64},
    {GgmlType::kIQ2_XS, "IQ2_XS", 256, 2 + 64 + 8},
    {GgmlType::kIQ3_XXS, "IQ3_XXS", 256, 2 + 96},
    {GgmlType::kIQ1_S, "IQ1_S", 256, 2 + 32 + 16},
    {GgmlType::kIQ4_NL, "IQ4_NL", 32, 2 + 16},
    {GgmlType::kIQ3_S, "IQ3_S", 256, 2 + 64 + 8 + 32 + 4},
    {GgmlType::kIQ2_S, "IQ2_S", 256, 2 + 64 + 8 + 8},
    {GgmlType::kIQ4_XS, "IQ4_XS", 256, 2 + 2 + 4 + 128},
    {GgmlType::kI8, "I8", 1, 1},
    {GgmlType::kI16, "I16", 1, 2},
    {GgmlType::kI32, "I32", 1, 4},
    {GgmlType::kI64, "I64", 1, 8},
    {GgmlType::kF64, "F64", 1, 8},
    {GgmlType::kIQ1_M, "IQ1_M", 256, 32 + 16 + 8},
    {GgmlType::kBF16, "BF16", 1, 2},
    {GgmlType::kTQ1_0, "TQ1_0", 256, 48 + 4 + 2},
    {GgmlType::kTQ2_0, "TQ2_0", 256, 64 + 2},
    {GgmlType::kMXFP4, "MXFP4", 32, 1 + 16},
    {GgmlType::kNVFP4, "NVFP4", 64, 4 + 32},
    {GgmlType::kQ1_0, "Q1_0", 128, 2 + 16},
};
constexpr uint32_t kLastGgmlTypeId = 41;  // the highest id in the table

// The folio weight type each ggml type is read as, nullopt where folio has
// none. One exhaustive switch with no default: a GgmlType added to the enum
// fails to compile until it is decided here; a ggml type folio learns to
// compute with moves up to the first group.
constexpr std::optional<ops::WeightType> ToWeightType(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
      return ops::WeightType::kF32;
    case GgmlType::kF16:
      return ops::WeightType::kF16;
    case GgmlType::kBF16:
      return ops::WeightType::kBF16;
    case GgmlType::kF64:
      return ops::WeightType::kF64;
    case GgmlType::kQ8_0:
      return ops::WeightType::kQ8_0;
    case GgmlType::kQ4_0:
      return ops::WeightType::kQ4_0;
    case GgmlType::kQ4_1:
      return ops::WeightType::kQ4_1;
    case GgmlType::kQ5_0:
      return ops::WeightType::kQ5_0;
    case GgmlType::kQ5_1:
      return ops::WeightType::kQ5_1;
    case GgmlType::kQ4_K:
      return ops::WeightType::kQ4_K;
    case GgmlType::kQ5_K:
      return ops::WeightType::kQ5_K;
    case GgmlType::kQ6_K:
      return ops::WeightType::kQ6_K;
    case GgmlType::kQ2_K:
      return ops::WeightType::kQ2_K;
    case GgmlType::kQ3_K:
      return ops::WeightType::kQ3_K;
    case GgmlType::kIQ4_NL:
      return ops::WeightType::kIQ4_NL;
    case GgmlType::kIQ4_XS:
      return ops::WeightType::kIQ4_XS;
    case GgmlType::kMXFP4:
      return ops::WeightType::kMXFP4;
    case GgmlType::kQ8_1:
    case GgmlType::kQ8_K:
    case GgmlType::kIQ2_XXS:
    case GgmlType::kIQ2_XS:
    case GgmlType::kIQ3_XXS:
    case GgmlType::kIQ1_S:
    case GgmlType::kIQ3_S:
    case GgmlType::kIQ2_S:
    case GgmlType::kI8:
    case GgmlType::kI16:
    case GgmlType::kI32:
    case GgmlType::kI64:
    case GgmlType::kIQ1_M:
    case GgmlType::kTQ1_0:
    case GgmlType::kTQ2_0:
    case GgmlType::kNVFP4:
    case GgmlType::kQ1_0:
      return std::nullopt;
  }
  return std::nullopt;  // a value outside the enum
}

// Where a ggml type maps to a weight type, ggml's block layout and folio's
// table agree, so the bytes the reader sizes are the bytes the kernels read.
constexpr bool GgmlAndWeightTablesAgree() {
  for (const GgmlTraits& g : kGgmlTraits) {
    const std::optional<ops::WeightType> w = ToWeightType(g.type);
    if (w && (ops::TraitsOf(*w).block_size != g.block_size ||
              ops::TraitsOf(*w).block_bytes != g.block_bytes)) {
      return false;
    }
  }
  return true;
}
static_assert(GgmlAndWeightTablesAgree(),
              "a ggml type maps to a weight type with another block layout");

const GgmlTraits* FindGgmlTraits(uint32_t id) {
  for (const GgmlTraits& t : kGgmlTraits) {
    if (static_cast<uint32_t>(t.type) == id) return &t;
  }
  return nullptr;
}
const GgmlTraits& GgmlTraitsOf(GgmlType t) {
  const GgmlTraits* traits = FindGgmlTraits(static_cast<uint32_t>(t));
  FOLIO_CHECK(traits != nullptr, "unknown GgmlType ", static_cast<uint32_t>(t));
  return *traits;
}

constexpr uint32_t kLastValueTypeId = 12;  // kF64

bool IsUnsignedInt(GgufValueType t) {
  return t == GgufValueType::kU8 || t == GgufValueType::kU16 || t == GgufValueType::kU32 ||
         t == GgufValueType::kU64;
}
bool IsSignedInt(GgufValueType t) {
  return t == GgufValueType::kI8 || t == GgufValueType::kI16 || t == GgufValueType::kI32 ||
         t == GgufValueType::kI64;
}
bool IsInt(GgufValueType t) { return IsUnsignedInt(t) || IsSignedInt(t); }
bool IsFloat(GgufValueType t) { return t == GgufValueType::kF32 || t == GgufValueType::kF64; }

// The encoded size of a fixed-size value; 0 for strings and arrays.
uint64_t FixedBytes(GgufValueType t) {
  // In id order: u8 i8 u16 i16 u32 i32 f32 bool string array u64 i64 f64.
  static constexpr uint8_t kBytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  const auto id = static_cast<uint32_t>(t);
  FOLIO_CHECK(id <= kLastValueTypeId, "unknown value type ", id);
  return kBytes[id];
}
// The fewest bytes one value can take: a string needs its u64 length, an
// array its u32 element type and u64 count.
uint64_t MinBytes(GgufValueType t) {
  if (t == GgufValueType::kString) return 8;
  if (t == GgufValueType::kArray) return 4 + 8;
  return FixedBytes(t);
}
// A key/value takes at least a u64 key length, one key byte, a u32 type and
// a one-byte value; a tensor info a u64 name length, one name byte, u32
// n_dims, one u64 dim, a u32 type and a u64 offset.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;

}  // namespace

namespace internal {

// A bounds-checked little-endian reader over an image. Read* check against
// the bytes that remain and say what was being read, where, and how much
// was left; Take* are for bytes validated before, so running out there is a
// broken invariant.
class GgufCursor {
 public:
  explicit GgufCursor(std::span<const std::byte> bytes) : bytes_(bytes) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }
  std::span<const std::byte> Span(uint64_t begin, uint64_t end) const {
    return bytes_.subspan(begin, end - begin);
  }

  Status Need(std::string_view what, uint64_t num_bytes) const {
    if (num_bytes <= remaining()) return Status::Ok();
    return Corrupt("truncated: ", what, " at byte ", pos_, " needs ", num_bytes, " bytes, ",
                   remaining(), " remain");
  }
  Status Skip(std::string_view what, uint64_t num_bytes) {
    FOLIO_RETURN_IF_ERROR(Need(what, num_bytes));
    pos_ += num_bytes;
    return Status::Ok();
  }
  // A little-endian unsigned integer of `width` <= 8 bytes.
  Status ReadBits(std::string_view what, uint64_t width, uint64_t& out) {
    FOLIO_RETURN_IF_ERROR(Need(what, width));
    out = 0;
    for (uint64_t i = 0; i < width; ++i) {
      out |= static_cast<uint64_t>(bytes_[pos_ + i]) << (8 * i);
    }
    pos_ += width;
    return Status::Ok();
  }
  template <typename T>  // an unsigned integer type
  Status Read(std::string_view what, T& out) {
    static_assert(std::is_unsigned_v<T>);
    uint64_t v = 0;
    FOLIO_RETURN_IF_ERROR(ReadBits(what, sizeof(T), v));
    out = static_cast<T>(v);
    return Status::Ok();
  }
  // A gguf string: a u64 length, then that many bytes. A length beyond the
  // remaining bytes is Corruption; above `max_bytes`, `over_limit`.
  Status ReadString(std::string_view what, uint64_t max_bytes, StatusCode over_limit,
                    std::string_view& out) {
    uint64_t length = 0;
    FOLIO_RETURN_IF_ERROR(Read(what, length));
    FOLIO_RETURN_IF_ERROR(Need(what, length));
    if (length > max_bytes) {
      return {over_limit, StrCat(what, " at byte ", pos_, " is ", length,
                                 " bytes, above the limit of ", max_bytes)};
    }
    out = std::string_view(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
    pos_ += length;
    return Status::Ok();
  }

  uint64_t TakeBits(uint64_t width) {
    uint64_t out = 0;
    const Status s = ReadBits("validated value", width, out);
    FOLIO_CHECK(s.ok(), s.ToString());
    return out;
  }
  template <typename T>
  T Take() {
    return static_cast<T>(TakeBits(sizeof(T)));
  }
  std::string_view TakeString() {
    std::string_view out;
    const Status s = ReadString("validated string", UINT64_MAX, StatusCode::kCorruption, out);
    FOLIO_CHECK(s.ok(), s.ToString());
    return out;
  }

 private:
  std::span<const std::byte> bytes_;
  uint64_t pos_ = 0;
};

}  // namespace internal

namespace {

using internal::GgufCursor;

// Validates one encoded value of `type` at the cursor and moves past it.
// `depth` is the number of arrays around it.
Status SkipValue(GgufCursor& c, GgufValueType type, int depth);

Status CheckBool(uint8_t b) {
  if (b <= 1) return Status::Ok();
  return Corrupt("bool value is ", static_cast<int>(b), ", not 0 or 1");
}

Status SkipArray(GgufCursor& c, int depth) {
  if (depth > kMaxGgufArrayDepth) {
    return Unsupported("arrays nest deeper than the limit of ", kMaxGgufArrayDepth, " levels");
  }
  uint32_t type_id = 0;
  FOLIO_RETURN_IF_ERROR(c.Read("array element type", type_id));
  if (type_id > kLastValueTypeId) {
    return Corrupt("unknown array element type ", type_id, " (value types are 0 to ",
                   kLastValueTypeId, ")");
  }
  const auto type = static_cast<GgufValueType>(type_id);
  uint64_t count = 0;
  FOLIO_RETURN_IF_ERROR(c.Read("array count", count));
  const uint64_t min_bytes = MinBytes(type);
  if (count > c.remaining() / min_bytes) {
    return Corrupt("array of ", count, " ", GgufValueTypeName(type), " at byte ", c.pos(),
                   " cannot fit in the ", c.remaining(), " bytes that remain (", min_bytes,
                   " or more each)");
  }
  if (type == GgufValueType::kBool) {
    for (uint64_t i = 0; i < count; ++i) {
      uint8_t b = 0;
      FOLIO_RETURN_IF_ERROR(c.Read("bool", b));
      if (b > 1) return CheckBool(b).WithContext(StrCat("element ", i));
    }
    return Status::Ok();
  }
  if (const uint64_t size = FixedBytes(type); size != 0) {
    return c.Skip("array elements", count * size);  // count bound above
  }
  for (uint64_t i = 0; i < count; ++i) {
    const Status s = SkipValue(c, type, depth);
    if (!s.ok()) return s.WithContext(StrCat("element ", i));
  }
  return Status::Ok();
}

Status SkipValue(GgufCursor& c, GgufValueType type, int depth) {
  switch (type) {
    case GgufValueType::kBool: {
      uint8_t b = 0;
      FOLIO_RETURN_IF_ERROR(c.Read("bool", b));
      return CheckBool(b);
    }
    case GgufValueType::kString: {
      std::string_view s;
      return c.ReadString("string value", kMaxGgufStringBytes, StatusCode::kUnimplemented, s);
    }
    case GgufValueType::kArray:
      return SkipArray(c, depth + 1);
    default:
      return c.Skip(GgufValueTypeName(type), FixedBytes(type));
  }
}

// An integer of any width, widened to 64 bits.
struct IntValue {
  bool is_signed;
  uint64_t bits;  // two's complement if is_signed

  std::optional<uint64_t> AsUint() const {
    if (is_signed && static_cast<int64_t>(bits) < 0) return std::nullopt;
    return bits;
  }
  std::optional<int64_t> AsInt() const {
    if (!is_signed && bits > kMaxInt64) return std::nullopt;
    return static_cast<int64_t>(bits);
  }
  std::string ToString() const {
    return is_signed ? std::to_string(static_cast<int64_t>(bits)) : std::to_string(bits);
  }
};

// Reads a validated integer of type `t` (an integer type).
IntValue TakeInt(GgufCursor& c, GgufValueType t) {
  FOLIO_CHECK(IsInt(t), "TakeInt of ", GgufValueTypeName(t));
  const uint64_t width = FixedBytes(t);
  uint64_t bits = c.TakeBits(width);
  if (IsSignedInt(t)) {  // sign-extend from the value's top bit
    const uint64_t shift = 64 - 8 * width;
    bits = static_cast<uint64_t>(static_cast<int64_t>(bits << shift) >> shift);
  }
  return {IsSignedInt(t), bits};
}

// Reads a validated f32 or f64.
double TakeFloat(GgufCursor& c, GgufValueType t) {
  if (t == GgufValueType::kF32) {
    return static_cast<double>(std::bit_cast<float>(c.Take<uint32_t>()));
  }
  FOLIO_CHECK(t == GgufValueType::kF64, "TakeFloat of ", GgufValueTypeName(t));
  return std::bit_cast<double>(c.Take<uint64_t>());
}

// Decodes a validated value of `type`, arrays recursively.
GgufValue TakeValue(GgufCursor& c, GgufValueType type) {
  GgufValue v;
  v.type = type;
  if (IsUnsignedInt(type)) {
    v.data = TakeInt(c, type).bits;
  } else if (IsSignedInt(type)) {
    v.data = static_cast<int64_t>(TakeInt(c, type).bits);
  } else if (IsFloat(type)) {
    v.data = TakeFloat(c, type);
  } else if (type == GgufValueType::kBool) {
    v.data = c.Take<uint8_t>() != 0;
  } else if (type == GgufValueType::kString) {
    v.data = std::string(c.TakeString());
  } else {
    v.element_type = static_cast<GgufValueType>(c.Take<uint32_t>());
    const auto count = c.Take<uint64_t>();
    std::vector<GgufValue> items;
    items.reserve(count);  // validated: the elements are in the image
    for (uint64_t i = 0; i < count; ++i) {
      items.push_back(TakeValue(c, v.element_type));
    }
    v.data = std::move(items);
  }
  return v;
}

// Reads one tensor info into `t`; errors name the tensor by index and, once
// it is read, by name.
Status ReadTensorInfo(GgufCursor& c, uint64_t idx, uint64_t alignment, GgufFile::TensorInfo& t) {
  std::string_view name;
  const Status name_status =
      c.ReadString("name", kMaxGgufTensorNameBytes, StatusCode::kCorruption, name);
  if (!name_status.ok()) return name_status.WithContext(StrCat("tensor ", idx));
  if (name.empty()) return Corrupt("tensor ", idx, ": name is empty");
  t.name = std::string(name);
  auto where = [idx, name] { return StrCat("tensor ", idx, " ", Quote(name)); };
  auto fail = [&where](const auto&... args) { return Corrupt(where(), ": ", args...); };
  auto read = [&c, &where](std::string_view what, auto& out) {
    const Status s = c.Read(what, out);
    return s.ok() ? s : s.WithContext(where());
  };

  uint32_t n_dims = 0;
  FOLIO_RETURN_IF_ERROR(read("n_dims", n_dims));
  if (n_dims == 0) {
    return Unsupported(where(), ": n_dims is 0 (a scalar); folio reads 1 to ", kMaxGgufDims,
                       " dims");
  }
  if (n_dims > kMaxGgufDims) {
    return fail("n_dims ", n_dims, " exceeds ggml's limit of ", kMaxGgufDims);
  }
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t dim = 0;
    FOLIO_RETURN_IF_ERROR(read("dim", dim));
    if (dim == 0) return fail("dims[", d, "] is 0; empty tensors are refused");
    if (dim > kMaxInt64) {
      return fail("dims[", d, "] = ", dim, " exceeds ggml's limit of 2^63 - 1");
    }
    t.dims.push_back(dim);
  }

  uint32_t type_id = 0;
  FOLIO_RETURN_IF_ERROR(read("ggml type", type_id));
  const GgmlTraits* traits = FindGgmlTraits(type_id);
  if (traits == nullptr && type_id > kLastGgmlTypeId) {
    return Unsupported(where(), ": ggml type ", type_id,
                       " is newer than folio's table, which ends at ", kLastGgmlTypeId, " (",
                       GgmlTypeName(static_cast<GgmlType>(kLastGgmlTypeId)), ")");
  }
  if (traits == nullptr) {
    return fail("unknown ggml type ", type_id, " (ids ",
                "4, 5, 31-33 and 36-38 were removed from GGUF)");
  }
  t.type = traits->type;
  FOLIO_RETURN_IF_ERROR(read("offset", t.offset));

  auto shape = [&t, traits] {  // "dims [4096, 32] of Q8_0"
    std::ostringstream out;
    out << "dims [";
    for (size_t d = 0; d < t.dims.size(); ++d) {
      out << (d > 0 ? ", " : "") << t.dims[d];
    }
    out << "] of " << traits->name;
    return out.str();
  };
  std::optional<uint64_t> num_elements = 1;
  for (uint64_t dim : t.dims) {
    if (num_elements) num_elements = CheckedMul(*num_elements, dim);
  }
  if (!num_elements || *num_elements > kMaxInt64) {
    return fail(shape(), " has more than 2^63 - 1 elements");
  }
  if (t.dims[0] % traits->block_size != 0) {
    return fail(shape(), ": dims[0] = ", t.dims[0], " is not a multiple of the block size ",
                traits->block_size);
  }
  const std::optional<uint64_t> num_bytes =
      CheckedMul(*num_elements / traits->block_size, traits->block_bytes);
  if (!num_bytes) return fail(shape(), " overflows a 64-bit byte size");
  t.num_bytes = *num_bytes;
  if (t.offset % alignment != 0) {
    return fail("offset ", t.offset, " is not a multiple of the alignment ", alignment);
  }
  return Status::Ok();
}

}  // namespace

std::string_view GgufValueTypeName(GgufValueType t) {
  static constexpr std::string_view kNames[] = {"u8",  "i8",  "u16",  "i16",    "u32",
                                                "i32", "f32", "bool", "string", "array",
                                                "u64", "i64", "f64"};
  const auto id = static_cast<uint32_t>(t);
  return id <= kLastValueTypeId ? kNames[id] : "unknown";
}

std::string_view GgmlTypeName(GgmlType t) {
  const GgmlTraits* traits = FindGgmlTraits(static_cast<uint32_t>(t));
  return traits != nullptr ? traits->name : "unknown";
}
uint64_t GgmlBlockSize(GgmlType t) { return GgmlTraitsOf(t).block_size; }
uint64_t GgmlBlockBytes(GgmlType t) { return GgmlTraitsOf(t).block_bytes; }

std::optional<ops::WeightType> WeightTypeOf(GgmlType t) { return ToWeightType(t); }

GgmlType GgmlTypeOf(ops::WeightType t) {
  switch (t) {
    case ops::WeightType::kF64:
      return GgmlType::kF64;
    case ops::WeightType::kF32:
      return GgmlType::kF32;
    case ops::WeightType::kF16:
      return GgmlType::kF16;
    case ops::WeightType::kBF16:
      return GgmlType::kBF16;
    case ops::WeightType::kQ8_0:
      return GgmlType::kQ8_0;
    case ops::WeightType::kQ4_0:
      return GgmlType::kQ4_0;
    case ops::WeightType::kQ4_1:
      return GgmlType::kQ4_1;
    case ops::WeightType::kQ5_0:
      return GgmlType::kQ5_0;
    case ops::WeightType::kQ5_1:
      return GgmlType::kQ5_1;
    case ops::WeightType::kQ4_K:
      return GgmlType::kQ4_K;
    case ops::WeightType::kQ5_K:
      return GgmlType::kQ5_K;
    case ops::WeightType::kQ6_K:
      return GgmlType::kQ6_K;
    case ops::WeightType::kQ2_K:
      return GgmlType::kQ2_K;
    case ops::WeightType::kQ3_K:
      return GgmlType::kQ3_K;
    case ops::WeightType::kIQ4_NL:
      return GgmlType::kIQ4_NL;
    case ops::WeightType::kIQ4_XS:
      return GgmlType::kIQ4_XS;
    case ops::WeightType::kMXFP4:
      return GgmlType::kMXFP4;
  }
  ops::TraitsOf(t);  // a value outside the enum: a FOLIO_CHECK failure
  __builtin_unreachable();
}

std::string GgmlTypesFolioLoads() {
  std::vector<std::string_view> names;
  for (const ops::WeightTypeTraits& w : ops::kWeightTypeTraits) {
    for (const GgmlTraits& g : kGgmlTraits) {
      if (ToWeightType(g.type) == w.type) names.push_back(g.name);
    }
  }
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += names[i];
  }
  return out;
}

Result<ops::WeightType> WeightTypeOf(const GgufFile::TensorInfo& t) {
  const std::optional<ops::WeightType> type = ToWeightType(t.type);
  if (!type) {
    return Unsupported("tensor ", t.name, " has ggml type ", GgmlTypeName(t.type), " (folio loads ",
                       GgmlTypesFolioLoads(), ")");
  }
  return *type;
}

Status GgufFile::Init(std::span<const std::byte> image, std::string source) {
  source_ = std::move(source);
  GgufCursor c(image);
  Status s = [&]() -> Status {
    uint32_t magic = 0;
    FOLIO_RETURN_IF_ERROR(c.Read("magic", magic));
    if (magic != kGgufMagic) {
      std::string text(4, '?');
      for (size_t i = 0; i < 4; ++i) {
        const auto ch = static_cast<char>((magic >> (8 * i)) & 0xFF);
        if (ch >= ' ' && ch <= '~') text[i] = ch;
      }
      return Corrupt("bad magic ", Hex(magic), " ('", text, "'), wanted 0x46554747 ('GGUF')");
    }
    FOLIO_RETURN_IF_ERROR(c.Read("version", version_));
    if (version_ != 2 && version_ != 3) {
      const uint32_t swapped = __builtin_bswap32(version_);
      if (swapped == 2 || swapped == 3) {
        return Unsupported("version ", Hex(version_), " is GGUF v", swapped,
                           " in big-endian byte order; folio reads "
                           "little-endian files only");
      }
      return Unsupported("GGUF version ", version_, version_ == 1 ? " (32-bit counts)" : "",
                         " is not supported; folio reads versions 2 and 3");
    }
    uint64_t tensor_count = 0;
    uint64_t kv_count = 0;
    FOLIO_RETURN_IF_ERROR(c.Read("tensor_count", tensor_count));
    FOLIO_RETURN_IF_ERROR(c.Read("metadata_kv_count", kv_count));
    // Neither count sizes an allocation (entries are appended as they are
    // read), but a count the file cannot hold is reported here, plainly.
    if (tensor_count > c.remaining() / kMinTensorInfoBytes) {
      return Corrupt("tensor_count ", tensor_count, " cannot fit in the ", c.remaining(),
                     " bytes after the header (", kMinTensorInfoBytes, " or more per tensor info)");
    }
    if (kv_count > c.remaining() / kMinKvBytes) {
      return Corrupt("metadata_kv_count ", kv_count, " cannot fit in the ", c.remaining(),
                     " bytes after the header (", kMinKvBytes, " or more per key/value)");
    }
    FOLIO_RETURN_IF_ERROR(ReadKvs(c, kv_count));
    FOLIO_RETURN_IF_ERROR(ReadAlignment());
    FOLIO_RETURN_IF_ERROR(ReadTensorInfos(c, tensor_count));
    // A file without tensors may end before the padding; data_ is then
    // empty. c.pos() <= image.size() < 2^63, so this cannot overflow.
    data_offset_ = c.pos() + (alignment_ - c.pos() % alignment_) % alignment_;
    if (data_offset_ <= image.size()) data_ = image.subspan(data_offset_);
    return CheckTensorLayout(image.size());
  }();
  return s.WithContext(source_);
}

Status GgufFile::ReadKvs(GgufCursor& c, uint64_t kv_count) {
  for (uint64_t i = 0; i < kv_count; ++i) {
    // Messages are built only on failure: a vocabulary file has few keys,
    // but a hostile one may claim millions.
    std::string_view key;
    Status s = c.ReadString("key", kMaxGgufKeyBytes, StatusCode::kCorruption, key);
    if (!s.ok()) return s.WithContext(StrCat("metadata entry ", i));
    if (key.empty()) return Corrupt("metadata entry ", i, ": key is empty");
    auto where = [i, key] { return StrCat("metadata entry ", i, " ", Quote(key)); };
    uint32_t type_id = 0;
    if (s = c.Read("value type", type_id); !s.ok()) return s.WithContext(where());
    if (type_id > kLastValueTypeId) {
      return Corrupt(where(), ": unknown value type ", type_id, " (value types are 0 to ",
                     kLastValueTypeId, ")");
    }
    const auto type = static_cast<GgufValueType>(type_id);
    const uint64_t begin = c.pos();
    if (s = SkipValue(c, type, 0); !s.ok()) return s.WithContext(where());
    const auto [it, inserted] = kv_index_.emplace(key, kvs_.size());
    if (!inserted) {
      return Corrupt(where(), ": the key repeats metadata entry ", it->second);
    }
    kvs_.push_back({std::string(key), type, c.Span(begin, c.pos())});
  }
  return Status::Ok();
}

Status GgufFile::ReadAlignment() {
  const auto it = kv_index_.find(kGgufAlignmentKey);
  if (it == kv_index_.end()) return Status::Ok();
  const Kv& kv = kvs_[it->second];
  if (!IsInt(kv.type)) {
    return Corrupt(kGgufAlignmentKey, " has type ", GgufValueTypeName(kv.type),
                   ", wanted an integer (u32)");
  }
  GgufCursor c(kv.value);
  const IntValue v = TakeInt(c, kv.type);
  const std::optional<uint64_t> u = v.AsUint();
  if (!u || *u == 0 || *u > UINT32_MAX || !std::has_single_bit(*u)) {
    return Corrupt(kGgufAlignmentKey, " is ", v.ToString(),
                   ", wanted a power of two from 1 to 2^31");
  }
  alignment_ = *u;
  return Status::Ok();
}

Status GgufFile::ReadTensorInfos(GgufCursor& c, uint64_t tensor_count) {
  for (uint64_t i = 0; i < tensor_count; ++i) {
    TensorInfo t{};
    FOLIO_RETURN_IF_ERROR(ReadTensorInfo(c, i, alignment_, t));
    const auto [it, inserted] = tensor_index_.emplace(t.name, tensors_.size());
    if (!inserted) {
      return Corrupt("tensor ", i, " ", Quote(t.name), ": the name repeats tensor ", it->second);
    }
    tensors_.push_back(std::move(t));
  }
  return Status::Ok();
}

Status GgufFile::CheckTensorLayout(uint64_t file_bytes) const {
  auto range = [](const TensorInfo& t) {
    return StrCat(Quote(t.name), " [", t.offset, ", ", t.offset + t.num_bytes, ")");
  };
  for (const TensorInfo& t : tensors_) {
    const std::optional<uint64_t> end = CheckedAdd(t.offset, t.num_bytes);
    if (!end || *end > data_.size()) {
      return Corrupt("tensor ", Quote(t.name), ": ", t.num_bytes, " bytes at offset ", t.offset,
                     " run past the data section of ", data_.size(), " bytes (the file is ",
                     file_bytes, " bytes, the data section starts at byte ", data_offset_, ")");
    }
  }
  // Every tensor is non-empty (dims >= 1), so sorted by offset, each must
  // end at or before the next one starts.
  std::vector<size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [this](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const TensorInfo& prev = tensors_[order[i - 1]];
    const TensorInfo& next = tensors_[order[i]];
    if (next.offset < prev.offset + prev.num_bytes) {
      return Corrupt("tensors ", range(prev), " and ", range(next), " overlap");
    }
  }
  return Status::Ok();
}

Result<GgufFile> GgufFile::Open(const std::filesystem::path& path) {
  FOLIO_ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::Map(path));
  GgufFile file;
  file.bytes_ = std::move(bytes);
  FOLIO_RETURN_IF_ERROR(file.Init(file.bytes_.bytes(), path.string()));
  return file;
}

Result<GgufFile> GgufFile::FromBytes(std::vector<std::byte> bytes, std::string source) {
  GgufFile file;
  file.bytes_ = FileBytes::Own(std::move(bytes));
  FOLIO_RETURN_IF_ERROR(file.Init(file.bytes_.bytes(), std::move(source)));
  return file;
}

// --- Metadata. ---

bool GgufFile::Has(std::string_view key) const { return kv_index_.find(key) != kv_index_.end(); }

std::vector<std::string> GgufFile::Keys() const {
  std::vector<std::string> keys;
  keys.reserve(kvs_.size());
  for (const Kv& kv : kvs_) keys.push_back(kv.key);
  return keys;
}

Result<const GgufFile::Kv*> GgufFile::Lookup(std::string_view key) const {
  const auto it = kv_index_.find(key);
  if (it == kv_index_.end()) {
    return Status::NotFound(StrCat(source_, ": metadata key ", Quote(key), " not found"));
  }
  return &kvs_[it->second];
}

Status GgufFile::WrongType(const Kv& kv, std::string_view wanted) const {
  std::string got(GgufValueTypeName(kv.type));
  if (kv.type == GgufValueType::kArray) {
    GgufCursor c(kv.value);
    got += StrCat(" of ", GgufValueTypeName(static_cast<GgufValueType>(c.Take<uint32_t>())));
  }
  return Status::InvalidArgument(
      StrCat(source_, ": metadata key ", Quote(kv.key), " has type ", got, ", wanted ", wanted));
}

Result<GgufValue> GgufFile::Get(std::string_view key) const {
  FOLIO_ASSIGN_OR_RETURN(const Kv* kv, Lookup(key));
  GgufCursor c(kv->value);
  return TakeValue(c, kv->type);
}

namespace {
constexpr std::string_view kWantedUint =
    "an unsigned integer (u8/u16/u32/u64, or a signed type holding a "
    "value >= 0)";
constexpr std::string_view kWantedInt =
    "an integer (i8/i16/i32/i64, or an unsigned type holding a value "
    "< 2^63)";
}  // namespace

Result<uint64_t> GgufFile::GetUint(std::string_view key) const {
  FOLIO_ASSIGN_OR_RETURN(const Kv* kv, Lookup(key));
  if (!IsInt(kv->type)) return WrongType(*kv, kWantedUint);
  GgufCursor c(kv->value);
  const IntValue v = TakeInt(c, kv->type);
  if (const auto u = v.AsUint()) return *u;
  return Status::OutOfRange(StrCat(source_, ": metadata key ", Quote(key), " is ", v.ToString(),
                                   " (", GgufValueTypeName(kv->type),
                                   "), wanted an unsigned integer"));
}

Result<int64_t> GgufFile::GetInt(std::string_view key) const {
  FOLIO_ASSIGN_OR_RETURN(const Kv* kv, Lookup(key));
  if (!IsInt(kv->type)) return WrongType(*kv, kWantedInt);
  GgufCursor c(kv->value);
  const IntValue v = TakeInt(c, kv->type);
  if (const auto i = v.AsInt()) return *i;
  return Status::OutOfRange(StrCat(source_, ": metadata key ", Quote(key), " is ", v.ToString(),
                                   " (", GgufValueTypeName(kv->type),
                                   "), above the int64 limit of ", kMaxInt64));
}

Result<double> GgufFile::GetFloat(std::string_view key) const {
  FOLIO_ASSIGN_OR_RETURN(const Kv* kv, Lookup(key));
  if (!IsFloat(kv->type)) return WrongType(*kv, "f32 or f64");
  GgufCursor c(kv->value);
  return TakeFloat(c, kv->type);
}

Result<bool> GgufFile::GetBool(std::string_view key) const {
  FOLIO_ASSIGN_OR_RETURN(const Kv* kv, Lookup(key));
  if (kv->type != GgufValueType::kBool) return WrongType(*kv, "bool");
  GgufCursor c(kv->value);
  return c.Take<uint8_t>() != 0;
}

Result<std::string> GgufFile::GetString(std::string_view key) const {
  FOLIO_ASSIGN_OR_RETURN(const Kv* kv, Lookup(key));
  if (kv->type != GgufValueType::kString) return WrongType(*kv, "string");
  GgufCursor c(kv->value);
  return std::string(c.TakeString());
}

namespace {
// Positions `c` at the first element of a validated array and returns its
// element type and count.
std::pair<GgufValueType, uint64_t> TakeArrayHeader(GgufCursor& c) {
  const auto type = static_cast<GgufValueType>(c.Take<uint32_t>());
  return {type, c.Take<uint64_t>()};
}
// The element type of a validated array, or nullopt for a non-array.
std::optional<GgufValueType> ElementType(GgufValueType type, std::span<const std::byte> value) {
  if (type != GgufValueType::kArray) return std::nullopt;
  GgufCursor c(value);
  return static_cast<GgufValueType>(c.Take<uint32_t>());
}
}  // namespace

Result<std::vector<std::string>> GgufFile::GetStringArray(std::string_view key) const {
  FOLIO_ASSIGN_OR_RETURN(const Kv* kv, Lookup(key));
  if (ElementType(kv->type, kv->value) != GgufValueType::kString) {
    return WrongType(*kv, "array of string");
  }
  GgufCursor c(kv->value);
  const auto [type, count] = TakeArrayHeader(c);
  std::vector<std::string> out;
  out.reserve(count);  // validated: the strings are in the image
  for (uint64_t i = 0; i < count; ++i) out.emplace_back(c.TakeString());
  return out;
}

Result<std::vector<double>> GgufFile::GetFloatArray(std::string_view key) const {
  FOLIO_ASSIGN_OR_RETURN(const Kv* kv, Lookup(key));
  const std::optional<GgufValueType> element = ElementType(kv->type, kv->value);
  if (!element || !IsFloat(*element)) {
    return WrongType(*kv, "array of f32 or f64");
  }
  GgufCursor c(kv->value);
  const auto [type, count] = TakeArrayHeader(c);
  std::vector<double> out;
  out.reserve(count);
  for (uint64_t i = 0; i < count; ++i) out.push_back(TakeFloat(c, type));
  return out;
}

Result<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  FOLIO_ASSIGN_OR_RETURN(const Kv* kv, Lookup(key));
  const std::optional<GgufValueType> element = ElementType(kv->type, kv->value);
  if (!element || !IsInt(*element)) {
    return WrongType(*kv,
                     "array of integers (i8/i16/i32/i64, or unsigned "
                     "elements < 2^63)");
  }
  GgufCursor c(kv->value);
  const auto [type, count] = TakeArrayHeader(c);
  std::vector<int64_t> out;
  out.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    const IntValue v = TakeInt(c, type);
    const std::optional<int64_t> value = v.AsInt();
    if (!value) {
      return Status::OutOfRange(StrCat(source_, ": metadata key ", Quote(key), " element ", i,
                                       " is ", v.ToString(), " (", GgufValueTypeName(type),
                                       "), above the int64 limit of ", kMaxInt64));
    }
    out.push_back(*value);
  }
  return out;
}

// --- Tensors. ---

const GgufFile::TensorInfo* GgufFile::Find(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const std::byte> GgufFile::Data(const TensorInfo& t) const {
  FOLIO_CHECK(t.offset <= data_.size() && t.num_bytes <= data_.size() - t.offset, "tensor '",
              t.name, "' is not from ", source_);
  return data_.subspan(t.offset, t.num_bytes);
}

}  // namespace folio::checkpoint
