#include "folio/checkpoint/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <system_error>
#include <utility>

#include "folio/core/checked_math.h"
#include "folio/core/str_cat.h"

namespace folio::checkpoint {
namespace {

constexpr uint32_t kGgufVersion = 3;
constexpr uint64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

Status Invalid(const std::string& where, const std::string& what) {
  return Status::InvalidArgument(StrCat(where, ": ", what));
}

// Appends little-endian values to a byte buffer.
class ByteSink {
 public:
  explicit ByteSink(std::vector<std::byte>& out) : out_(out) {}
  void Bits(uint64_t v, size_t width) {
    for (size_t i = 0; i < width; ++i)
      out_.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
  }
  void U32(uint32_t v) { Bits(v, 4); }
  void U64(uint64_t v) { Bits(v, 8); }
  void String(std::string_view s) {
    U64(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    out_.insert(out_.end(), p, p + s.size());
  }
  void PadTo(uint64_t alignment) {
    while (out_.size() % alignment != 0) out_.push_back(std::byte{0});
  }

 private:
  std::vector<std::byte>& out_;
};

// The encoded width of a fixed-size type; 0 for strings and arrays.
size_t FixedWidth(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16:
      return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32:
      return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

bool IsUnsigned(GgufValueType t) {
  return t == GgufValueType::kU8 || t == GgufValueType::kU16 || t == GgufValueType::kU32 ||
         t == GgufValueType::kU64;
}
bool IsSigned(GgufValueType t) {
  return t == GgufValueType::kI8 || t == GgufValueType::kI16 || t == GgufValueType::kI32 ||
         t == GgufValueType::kI64;
}
bool IsKnown(GgufValueType t) { return GgufValueTypeName(t) != "unknown"; }

// Checks that `v` holds what its type says (recursively, arrays to `depth`
// levels deep) and appends its encoding; `where` names it in errors.
Status EncodeValue(const GgufValue& v, int depth, const std::string& where, ByteSink& sink) {
  const size_t width = FixedWidth(v.type);
  if (!IsKnown(v.type)) {
    return Invalid(where, StrCat("unknown value type ", static_cast<uint32_t>(v.type)));
  }
  if (IsUnsigned(v.type)) {
    const auto* u = std::get_if<uint64_t>(&v.data);
    if (u == nullptr) return Invalid(where, "an unsigned type must hold a uint64_t");
    if (width < 8 && *u >> (8 * width) != 0) {
      return Invalid(where, StrCat(*u, " does not fit ", GgufValueTypeName(v.type)));
    }
    sink.Bits(*u, width);
  } else if (IsSigned(v.type)) {
    const auto* i = std::get_if<int64_t>(&v.data);
    if (i == nullptr) return Invalid(where, "a signed type must hold an int64_t");
    const int64_t lim = width < 8 ? int64_t{1} << (8 * width - 1) : 0;
    if (width < 8 && (*i < -lim || *i >= lim)) {
      return Invalid(where, StrCat(*i, " does not fit ", GgufValueTypeName(v.type)));
    }
    sink.Bits(static_cast<uint64_t>(*i), width);
  } else if (v.type == GgufValueType::kF32 || v.type == GgufValueType::kF64) {
    const auto* d = std::get_if<double>(&v.data);
    if (d == nullptr) return Invalid(where, "a float type must hold a double");
    if (v.type == GgufValueType::kF32) {
      sink.U32(std::bit_cast<uint32_t>(static_cast<float>(*d)));
    } else {
      sink.U64(std::bit_cast<uint64_t>(*d));
    }
  } else if (v.type == GgufValueType::kBool) {
    const auto* b = std::get_if<bool>(&v.data);
    if (b == nullptr) return Invalid(where, "a bool must hold a bool");
    sink.Bits(*b ? 1 : 0, 1);
  } else if (v.type == GgufValueType::kString) {
    const auto* s = std::get_if<std::string>(&v.data);
    if (s == nullptr) return Invalid(where, "a string must hold a std::string");
    if (s->size() > kMaxGgufStringBytes) {
      return Invalid(where, StrCat("a string of ", s->size(), " bytes exceeds the limit of ",
                                   kMaxGgufStringBytes));
    }
    sink.String(*s);
  } else {
    const auto* items = std::get_if<std::vector<GgufValue>>(&v.data);
    if (items == nullptr) return Invalid(where, "an array must hold a vector of values");
    if (depth + 1 > kMaxGgufArrayDepth) {
      return Invalid(where, StrCat("arrays nest deeper than ", kMaxGgufArrayDepth, " levels"));
    }
    if (!IsKnown(v.element_type)) {
      return Invalid(where, StrCat("unknown element type ", static_cast<uint32_t>(v.element_type)));
    }
    sink.U32(static_cast<uint32_t>(v.element_type));
    sink.U64(items->size());
    for (size_t i = 0; i < items->size(); ++i) {
      const GgufValue& item = (*items)[i];
      if (item.type != v.element_type) {
        return Invalid(where,
                       StrCat("element ", i, " has type ", GgufValueTypeName(item.type),
                              ", the array's elements are ", GgufValueTypeName(v.element_type)));
      }
      FOLIO_RETURN_IF_ERROR(EncodeValue(item, depth + 1, StrCat(where, " element ", i), sink));
    }
  }
  return Status::Ok();
}

// general.alignment of `kvs`, or the default; InvalidArgument if present
// but not an integer power of two below 2^32.
Result<uint64_t> AlignmentOf(const std::vector<GgufKeyValue>& kvs) {
  for (const GgufKeyValue& kv : kvs) {
    if (kv.key != kGgufAlignmentKey) continue;
    const auto* u = std::get_if<uint64_t>(&kv.value.data);
    const auto* i = std::get_if<int64_t>(&kv.value.data);
    uint64_t a = 0;
    if (u != nullptr && IsUnsigned(kv.value.type)) a = *u;
    if (i != nullptr && IsSigned(kv.value.type) && *i > 0) a = static_cast<uint64_t>(*i);
    if (a == 0 || a > UINT32_MAX || !std::has_single_bit(a)) {
      return Status::InvalidArgument(
          StrCat(kGgufAlignmentKey, " must be an integer power of two from 1 to 2^31"));
    }
    return a;
  }
  return kGgufDefaultAlignment;
}

Status CheckTensor(const GgufTensorSpec& t, size_t idx) {
  const std::string where = StrCat("tensor ", idx, " ", Quote(t.name));
  if (t.name.empty()) return Invalid(StrCat("tensor ", idx), "the name is empty");
  if (t.name.size() > kMaxGgufTensorNameBytes) {
    return Invalid(where, StrCat("the name is ", t.name.size(), " bytes, above ggml's limit of ",
                                 kMaxGgufTensorNameBytes));
  }
  if (GgmlTypeName(t.type) == "unknown") {
    return Invalid(where, StrCat("unknown ggml type ", static_cast<uint32_t>(t.type)));
  }
  if (t.dims.empty() || t.dims.size() > kMaxGgufDims) {
    return Invalid(where, StrCat(t.dims.size(), " dims; GGUF tensors have 1 to ", kMaxGgufDims));
  }
  for (size_t d = 0; d < t.dims.size(); ++d) {
    if (t.dims[d] == 0 || t.dims[d] > kMaxInt64) {
      return Invalid(where, StrCat("dims[", d, "] = ", t.dims[d], " is not in [1, 2^63)"));
    }
  }
  if (t.dims[0] % GgmlBlockSize(t.type) != 0) {
    return Invalid(where, StrCat("dims[0] = ", t.dims[0], " is not whole ", GgmlTypeName(t.type),
                                 " blocks of ", GgmlBlockSize(t.type)));
  }
  if (GgufTensorBytes(t) == 0) return Invalid(where, "its size overflows");
  return Status::Ok();
}

// The file descriptor of a temporary file, closed (and the file removed
// unless Keep() was called) on destruction.
class TempFile {
 public:
  explicit TempFile(std::filesystem::path path) : path_(std::move(path)) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!kept_) {
      std::error_code ec;
      std::filesystem::remove(path_, ec);
    }
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  Status Open() {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    return fd_ >= 0 ? Status::Ok() : Error("cannot create");
  }
  Status Write(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Error("cannot write");
      bytes = bytes.subspan(static_cast<size_t>(n));
    }
    return Status::Ok();
  }
  // Flushes to disk and closes.
  Status Finish() {
    if (::fsync(fd_) != 0) return Error("cannot flush");
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) return Error("cannot close");
    return Status::Ok();
  }
  void Keep() { kept_ = true; }
  const std::filesystem::path& path() const { return path_; }

 private:
  Status Error(std::string_view what) const {
    return Status::IoError(StrCat(what, " ", path_.string(), ": ", std::strerror(errno)));
  }
  std::filesystem::path path_;
  int fd_ = -1;
  bool kept_ = false;
};

}  // namespace

uint64_t GgufTensorBytes(const GgufTensorSpec& spec) {
  if (GgmlTypeName(spec.type) == "unknown" || spec.dims.empty()) return 0;
  std::optional<uint64_t> elements = 1;
  for (uint64_t d : spec.dims) {
    if (d == 0) return 0;
    if (elements) elements = CheckedMul(*elements, d);
  }
  const uint64_t block = GgmlBlockSize(spec.type);
  if (!elements || *elements > kMaxInt64 || spec.dims[0] % block != 0) return 0;
  return CheckedMul(*elements / block, GgmlBlockBytes(spec.type)).value_or(0);
}

Result<std::vector<GgufKeyValue>> ReadGgufMetadata(const GgufFile& file) {
  std::vector<GgufKeyValue> kvs;
  for (const std::string& key : file.Keys()) {
    FOLIO_ASSIGN_OR_RETURN(GgufValue v, file.Get(key));
    kvs.push_back({key, std::move(v)});
  }
  return kvs;
}

void SetGgufValue(std::vector<GgufKeyValue>& kvs, std::string_view key, GgufValue value) {
  for (GgufKeyValue& kv : kvs) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  kvs.push_back({std::string(key), std::move(value)});
}

GgufValue GgufU32(uint32_t v) { return {GgufValueType::kU32, GgufValueType::kU8, uint64_t{v}}; }
GgufValue GgufF32(float v) {
  return {GgufValueType::kF32, GgufValueType::kU8, static_cast<double>(v)};
}
GgufValue GgufBool(bool v) { return {GgufValueType::kBool, GgufValueType::kU8, v}; }
GgufValue GgufString(std::string v) {
  return {GgufValueType::kString, GgufValueType::kU8, std::move(v)};
}

Result<std::vector<std::byte>> EncodeGgufHeader(const std::vector<GgufKeyValue>& kvs,
                                                const std::vector<GgufTensorSpec>& tensors,
                                                std::vector<uint64_t>* offsets) {
  FOLIO_ASSIGN_OR_RETURN(const uint64_t alignment, AlignmentOf(kvs));
  std::vector<std::byte> out;
  ByteSink sink(out);
  sink.U32(kGgufMagic);
  sink.U32(kGgufVersion);
  sink.U64(tensors.size());
  sink.U64(kvs.size());
  std::set<std::string_view> keys;
  for (size_t i = 0; i < kvs.size(); ++i) {
    const GgufKeyValue& kv = kvs[i];
    const std::string where = StrCat("metadata entry ", i, " ", Quote(kv.key));
    if (kv.key.empty()) return Invalid(StrCat("metadata entry ", i), "the key is empty");
    if (kv.key.size() > kMaxGgufKeyBytes) {
      return Invalid(where, StrCat("the key is ", kv.key.size(), " bytes, above the limit of ",
                                   kMaxGgufKeyBytes));
    }
    if (!keys.insert(kv.key).second) return Invalid(where, "the key repeats");
    sink.String(kv.key);
    sink.U32(static_cast<uint32_t>(kv.value.type));
    FOLIO_RETURN_IF_ERROR(EncodeValue(kv.value, 0, where, sink));
  }
  std::set<std::string_view> names;
  uint64_t offset = 0;
  if (offsets != nullptr) offsets->clear();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorSpec& t = tensors[i];
    FOLIO_RETURN_IF_ERROR(CheckTensor(t, i));
    if (!names.insert(t.name).second) {
      return Invalid(StrCat("tensor ", i, " ", Quote(t.name)), "the name repeats");
    }
    sink.String(t.name);
    sink.U32(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) sink.U64(d);
    sink.U32(static_cast<uint32_t>(t.type));
    sink.U64(offset);
    if (offsets != nullptr) offsets->push_back(offset);
    const std::optional<uint64_t> end = CheckedAdd(offset, GgufTensorBytes(t));
    if (!end || *end > kMaxInt64) {
      return Invalid(StrCat("tensor ", i, " ", Quote(t.name)), "the data section overflows");
    }
    offset = *end + (alignment - *end % alignment) % alignment;
  }
  sink.PadTo(alignment);
  return out;
}

Status WriteGgufFile(const std::filesystem::path& path, const std::vector<GgufKeyValue>& kvs,
                     const std::vector<GgufTensorSpec>& tensors, const GgufTensorFill& fill,
                     const GgufFileCheck& check) {
  FOLIO_ASSIGN_OR_RETURN(const std::vector<std::byte> header, EncodeGgufHeader(kvs, tensors));
  FOLIO_ASSIGN_OR_RETURN(const uint64_t alignment, AlignmentOf(kvs));
  TempFile tmp(path.string() + ".tmp");
  FOLIO_RETURN_IF_ERROR(tmp.Open());
  FOLIO_RETURN_IF_ERROR(tmp.Write(header));
  std::vector<std::byte> data;
  const std::vector<std::byte> padding(alignment, std::byte{0});
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t num_bytes = GgufTensorBytes(tensors[i]);
    data.assign(num_bytes, std::byte{0});
    const Status s = fill(i, data);
    if (!s.ok()) return s.WithContext(StrCat("tensor ", tensors[i].name));
    FOLIO_RETURN_IF_ERROR(tmp.Write(data));
    FOLIO_RETURN_IF_ERROR(
        tmp.Write(std::span(padding).first((alignment - num_bytes % alignment) % alignment)));
  }
  FOLIO_RETURN_IF_ERROR(tmp.Finish());
  if (check) FOLIO_RETURN_IF_ERROR(check(tmp.path()));
  std::error_code ec;
  std::filesystem::rename(tmp.path(), path, ec);
  if (ec) {
    return Status::IoError(
        StrCat("cannot rename ", tmp.path().string(), " to ", path.string(), ": ", ec.message()));
  }
  tmp.Keep();
  return Status::Ok();
}

}  // namespace folio::checkpoint
