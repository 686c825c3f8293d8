#include "folio/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <system_error>
#include <tuple>
#include <utility>

#include "folio/core/checked_math.h"
#include "folio/core/str_cat.h"
#include "folio/core/utf8.h"

namespace folio::checkpoint {
namespace {

using Json = nlohmann::json;
constexpr size_t kLengthPrefixBytes = 8;

template <typename... Args>
Status Corrupt(const Args&... args) {
  return Status::Corruption(StrCat(args...));
}
template <typename... Args>
Status Invalid(const Args&... args) {
  return Status::InvalidArgument(StrCat(args...));
}

std::string Show(const Json& v) {
  return Clip(v.dump(-1, ' ', false, Json::error_handler_t::replace));
}
std::string ErrnoText() { return std::error_code(errno, std::generic_category()).message(); }

bool IsUtf8(std::string_view s) { return utf8::FirstInvalid(s) == std::string_view::npos; }

// The safetensors dtype strings. Those folio supports map to a DType; the
// rest of the reference's list is recognised so it can be reported as
// Unimplemented rather than Corruption.
constexpr std::pair<std::string_view, DType> kSupportedDTypes[] = {{"F64", DType::kF64},
                                                                   {"F32", DType::kF32},
                                                                   {"BF16", DType::kBF16},
                                                                   {"F16", DType::kF16},
                                                                   {"I8", DType::kI8}};
// Whole-byte dtypes folio does not read: a file may carry them (BERT
// checkpoints store their position ids as I64), and only reading one is an
// error (TensorInfo::unread_dtype).
constexpr std::pair<std::string_view, uint64_t> kUnreadDTypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"U16", 2},     {"U32", 4},     {"U64", 8},     {"I16", 2},
    {"I32", 4},  {"I64", 8}, {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1}, {"C64", 8}};
// Sub-byte dtypes: a file with one is refused.
constexpr std::string_view kUnsupportedDTypes[] = {"F6_E2M3", "F6_E3M2", "F4"};

std::string_view SafetensorsName(DType t) {
  for (const auto& [name, dtype] : kSupportedDTypes) {
    if (dtype == t) return name;
  }
  FOLIO_CHECK(false, "no safetensors name for dtype ", DTypeName(t));
  return {};
}

// product(shape) * DTypeSize(dtype), or nullopt on overflow.
std::optional<uint64_t> ByteSize(DType dtype, std::span<const uint64_t> shape) {
  std::optional<uint64_t> bytes = DTypeSize(dtype);
  for (uint64_t d : shape) {
    if (bytes) bytes = CheckedMul(*bytes, d);
  }
  return bytes;
}

// A non-negative JSON integer, or nullptr: nlohmann stores negative,
// fractional and >= 2^64 numbers as other types.
const uint64_t* AsU64(const Json& v) { return v.get_ptr<const Json::number_unsigned_t*>(); }

Result<DType> ParseDType(const std::string& where, const Json& v) {
  const auto* s = v.get_ptr<const Json::string_t*>();
  if (s == nullptr) return Corrupt(where, "'dtype' must be a string, got ", Show(v));
  for (const auto& [str, dtype] : kSupportedDTypes) {
    if (*s == str) return dtype;
  }
  if (std::find(std::begin(kUnsupportedDTypes), std::end(kUnsupportedDTypes), *s) !=
      std::end(kUnsupportedDTypes)) {
    return Status::Unimplemented(StrCat(where, "dtype ", Quote(*s),
                                        " is not supported (folio reads F64, F32, BF16, F16, I8)"));
  }
  return Corrupt(where, "unknown dtype ", Quote(*s));
}

Result<TensorInfo> ParseTensor(const std::string& name, const Json& entry, uint64_t data_bytes) {
  const std::string where = StrCat("tensor ", Quote(name), ": ");
  const auto* fields = entry.get_ptr<const Json::object_t*>();
  if (fields == nullptr) {
    return Corrupt(where, "entry must be a JSON object, got ", Show(entry));
  }
  static constexpr const char* kFields[] = {"dtype", "shape", "data_offsets"};
  const Json* field[3] = {};  // in kFields order
  for (const auto& [key, value] : *fields) {
    const auto* it = std::find(std::begin(kFields), std::end(kFields), key);
    if (it == std::end(kFields)) {
      return Corrupt(where, "unknown field ", Quote(key), " (expected dtype, shape, data_offsets)");
    }
    field[it - kFields] = &value;
  }
  for (size_t i = 0; i < 3; ++i) {
    if (!field[i]) return Corrupt(where, "missing field '", kFields[i], "'");
  }
  TensorInfo t{name, DType::kF32, {}, 0, 0, {}};
  uint64_t unread_size = 0;
  for (const auto& [str, size] : kUnreadDTypes) {
    if (const auto* d = field[0]->get_ptr<const Json::string_t*>(); d != nullptr && *d == str) {
      t.unread_dtype = str;
      unread_size = size;
    }
  }
  if (t.unread_dtype.empty()) {
    FOLIO_ASSIGN_OR_RETURN(t.dtype, ParseDType(where, *field[0]));
  }

  const auto* dims = field[1]->get_ptr<const Json::array_t*>();
  if (dims == nullptr) return Corrupt(where, "'shape' must be an array, got ", Show(*field[1]));
  if (dims->size() > kMaxSafetensorsRank) {
    return Status::Unimplemented(
        StrCat(where, "rank ", dims->size(), " exceeds the limit of ", kMaxSafetensorsRank));
  }
  for (size_t i = 0; i < dims->size(); ++i) {
    const uint64_t* d = AsU64((*dims)[i]);
    if (d == nullptr) {
      return Corrupt(where, "shape[", i, "] = ", Show((*dims)[i]),
                     " must be an integer in [0, 2^64)");
    }
    t.shape.push_back(*d);
  }

  const auto* pair = field[2]->get_ptr<const Json::array_t*>();
  const bool is_pair = pair != nullptr && pair->size() == 2;
  const uint64_t* begin = is_pair ? AsU64((*pair)[0]) : nullptr;
  const uint64_t* end = is_pair ? AsU64((*pair)[1]) : nullptr;
  if (begin == nullptr || end == nullptr) {
    return Corrupt(where, "'data_offsets' must be two integers in [0, 2^64), got ",
                   Show(*field[2]));
  }
  const std::string offsets = StrCat("data_offsets [", *begin, ", ", *end, "]");
  if (*begin > *end) return Corrupt(where, offsets, " has begin > end");
  if (*end > data_bytes) {
    return Corrupt(where, offsets, " ends beyond the data section of ", data_bytes, " bytes");
  }
  t.data_begin = *begin;
  t.data_end = *end;
  std::optional<uint64_t> bytes = ByteSize(t.dtype, t.shape);
  if (!t.unread_dtype.empty()) {
    bytes = unread_size;
    for (uint64_t d : t.shape) {
      if (bytes) bytes = CheckedMul(*bytes, d);
    }
  }
  const std::string shape =
      StrCat("shape ", Json(t.shape).dump(), " of ",
             t.unread_dtype.empty() ? SafetensorsName(t.dtype) : t.unread_dtype);
  if (!bytes) return Corrupt(where, shape, " overflows a 64-bit byte size");
  if (*bytes != *end - *begin) {
    return Corrupt(where, shape, " needs ", *bytes, " bytes but ", offsets, " spans ",
                   *end - *begin);
  }
  return t;
}

Status ParseMetadata(const Json& v, std::map<std::string, std::string>& out) {
  const auto* fields = v.get_ptr<const Json::object_t*>();
  if (!fields) return Corrupt("'__metadata__' must be an object, got ", Show(v));
  for (const auto& [key, value] : *fields) {
    const auto* s = value.get_ptr<const Json::string_t*>();
    if (!s) {
      return Corrupt("__metadata__[", Quote(key), "] must be a string, got ", Show(value));
    }
    out.emplace(key, *s);
  }
  return Status::Ok();
}

// Parses the header JSON, rejecting a key repeated within one object
// (nlohmann alone would silently keep the last) and nesting deeper than a
// valid header's {"name": {"shape": [d]}}: nlohmann has no depth limit, and
// discarding deep values keeps a hostile header from building a huge tree.
Result<Json> ParseJson(std::string_view text) {
  constexpr int kMaxDepth = 3;
  std::vector<std::set<std::string>> open_objects;  // keys seen, innermost last
  std::optional<std::string> duplicate;
  bool too_deep = false;
  auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    using Event = Json::parse_event_t;
    if (depth > kMaxDepth) {
      too_deep = true;
      return false;  // drops the value instead of storing it
    }
    if (event == Event::object_start) open_objects.emplace_back();
    if (event == Event::object_end && !open_objects.empty()) open_objects.pop_back();
    const auto* key = parsed.get_ptr<const Json::string_t*>();
    if (event == Event::key && key != nullptr && !open_objects.empty() &&
        !open_objects.back().insert(*key).second && !duplicate) {
      duplicate = *key;
    }
    return true;
  };
  Json header = Json::parse(text.begin(), text.end(), callback,
                            /*allow_exceptions=*/false);
  if (header.is_discarded()) return Corrupt("header is not valid JSON");
  if (too_deep) {
    return Corrupt("header nests deeper than ", kMaxDepth, " levels");
  }
  if (duplicate) {
    return Corrupt("header repeats the key ", Quote(*duplicate),
                   " within one object (a duplicate tensor name or field)");
  }
  return header;
}

}  // namespace

Status SafetensorsFile::Init(std::span<const std::byte> image, std::string source) {
  source_ = std::move(source);
  auto fail = [this](const auto&... args) { return Corrupt(source_, ": ", args...); };
  if (image.size() < kLengthPrefixBytes) {
    return fail("file is ", image.size(), " bytes, shorter than the 8-byte header length prefix");
  }
  uint64_t header_bytes = 0;  // little-endian
  for (size_t i = 0; i < kLengthPrefixBytes; ++i) {
    header_bytes |= static_cast<uint64_t>(image[i]) << (8 * i);
  }
  const uint64_t available = image.size() - kLengthPrefixBytes;
  if (header_bytes == 0) return fail("header length is 0");
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    return fail("header length ", header_bytes, " exceeds the limit of ",
                kMaxSafetensorsHeaderBytes, " bytes");
  }
  if (header_bytes > available) {
    return fail("header length ", header_bytes, " exceeds the ", available,
                " bytes after the length prefix");
  }
  const std::string_view text(reinterpret_cast<const char*>(image.data()) + kLengthPrefixBytes,
                              header_bytes);
  if (text.front() != '{') {
    return fail("header must be a JSON object starting with '{', got byte ",
                static_cast<int>(static_cast<unsigned char>(text.front())));
  }
  const size_t bad_utf8 = utf8::FirstInvalid(text);
  if (bad_utf8 != text.npos) {
    return fail("header is not valid UTF-8 at byte ", bad_utf8);
  }
  Result<Json> header = ParseJson(text);
  if (!header) return header.error().WithContext(source_);
  const auto* entries = header->get_ptr<const Json::object_t*>();
  if (entries == nullptr) return fail("header is not a JSON object");
  data_ = image.subspan(kLengthPrefixBytes + header_bytes);

  for (const auto& [name, value] : *entries) {
    Status s;
    if (name == "__metadata__") {
      s = ParseMetadata(value, metadata_);
    } else if (name.empty()) {
      s = Corrupt("tensor name is empty");
    } else {
      Result<TensorInfo> t = ParseTensor(name, value, data_.size());
      if (t) tensors_.push_back(std::move(*t));
      s = t.status();
    }
    if (!s.ok()) return s.WithContext(source_);
  }

  // Zero-sized tensors sort before a tensor that starts at the same offset,
  // so they do not read as overlapping it.
  std::sort(tensors_.begin(), tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.data_begin, a.data_end, a.name) < std::tie(b.data_begin, b.data_end, b.name);
  });
  auto range = [](const TensorInfo& t) {
    return StrCat(Quote(t.name), " [", t.data_begin, ", ", t.data_end, ")");
  };
  uint64_t covered = 0;              // bytes [0, covered) belong to tensors
  const TensorInfo* last = nullptr;  // the tensor that ends at `covered`
  for (const TensorInfo& t : tensors_) {
    if (t.data_begin < covered) {
      return fail("tensors ", range(*last), " and ", range(t), " overlap");
    }
    if (t.data_begin > covered) {
      return fail("data bytes [", covered, ", ", t.data_begin,
                  ") belong to no tensor (a hole before ", range(t), ")");
    }
    covered = t.data_end;
    last = &t;
  }
  if (covered != data_.size()) {
    return fail("data bytes [", covered, ", ", data_.size(),
                ") at the end of the data section belong to no tensor");
  }
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
  return Status::Ok();
}

Result<SafetensorsFile> SafetensorsFile::Open(const std::filesystem::path& path) {
  FOLIO_ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::Map(path));
  SafetensorsFile file;
  file.bytes_ = std::move(bytes);
  FOLIO_RETURN_IF_ERROR(file.Init(file.bytes_.bytes(), path.string()));
  return file;
}

Result<SafetensorsFile> SafetensorsFile::FromBytes(std::vector<std::byte> bytes,
                                                   std::string source) {
  SafetensorsFile file;
  file.bytes_ = FileBytes::Own(std::move(bytes));
  FOLIO_RETURN_IF_ERROR(file.Init(file.bytes_.bytes(), std::move(source)));
  return file;
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const std::byte> SafetensorsFile::Data(const TensorInfo& t) const {
  FOLIO_CHECK(t.data_begin <= t.data_end && t.data_end <= data_.size(), "tensor '", t.name,
              "' is not from ", source_);
  return data_.subspan(t.data_begin, t.data_end - t.data_begin);
}

namespace {

// The length prefix and the padded header: everything before the data.
Result<std::string> EncodePrefix(std::span<const TensorToWrite> tensors,
                                 const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  for (const auto& [key, value] : metadata) {
    if (!IsUtf8(key) || !IsUtf8(value)) {
      return Invalid("metadata entry ", Quote(key), " is not valid UTF-8");
    }
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorToWrite& t = tensors[i];
    const std::string where = StrCat("tensor ", i, " ", Quote(t.name), ": ");
    if (t.name.empty() || t.name == "__metadata__" || !IsUtf8(t.name)) {
      return Invalid(where, "name must be non-empty UTF-8 other than '__metadata__'");
    }
    if (header.contains(t.name)) return Invalid(where, "name is used twice");
    if (t.shape.size() > kMaxSafetensorsRank) {
      return Invalid(where, "rank ", t.shape.size(), " exceeds the limit of ", kMaxSafetensorsRank);
    }
    const std::optional<uint64_t> bytes = ByteSize(t.dtype, t.shape);
    const std::string shape = StrCat("shape ", Json(t.shape).dump(), " of ", DTypeName(t.dtype));
    if (!bytes) return Invalid(where, shape, " overflows a 64-bit byte size");
    if (*bytes != t.data.size()) {
      return Invalid(where, shape, " needs ", *bytes, " bytes, got ", t.data.size());
    }
    const std::optional<uint64_t> end = CheckedAdd(offset, *bytes);
    if (!end) return Invalid(where, "total data size overflows 64 bits");
    header[t.name] = {{"dtype", SafetensorsName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", Json::array({offset, *end})}};
    offset = *end;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // 8-aligns the data section
  if (text.size() > kMaxSafetensorsHeaderBytes) {
    return Invalid("header of ", text.size(), " bytes exceeds the limit of ",
                   kMaxSafetensorsHeaderBytes);
  }
  std::string out(kLengthPrefixBytes, '\0');
  for (size_t i = 0; i < kLengthPrefixBytes; ++i) {
    out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  }
  return out + text;
}

}  // namespace

Result<std::vector<std::byte>> EncodeSafetensors(
    std::span<const TensorToWrite> tensors, const std::map<std::string, std::string>& metadata) {
  FOLIO_ASSIGN_OR_RETURN(const std::string prefix, EncodePrefix(tensors, metadata));
  size_t num_bytes = prefix.size();  // EncodePrefix checked the data sum
  for (const TensorToWrite& t : tensors) num_bytes += t.data.size();
  std::vector<std::byte> out(prefix.size());
  out.reserve(num_bytes);
  std::memcpy(out.data(), prefix.data(), prefix.size());
  for (const TensorToWrite& t : tensors) {
    out.insert(out.end(), t.data.begin(), t.data.end());
  }
  return out;
}

Status WriteSafetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                        const std::map<std::string, std::string>& metadata) {
  FOLIO_ASSIGN_OR_RETURN(const std::string prefix, EncodePrefix(tensors, metadata));
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError(StrCat(tmp.string(), ": cannot create: ", ErrnoText()));
  auto write_all = [fd](const void* p, size_t n) {
    const auto* bytes = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t done = ::write(fd, bytes, n);
      if (done < 0 && errno == EINTR) continue;
      if (done <= 0) return false;
      bytes += done;
      n -= static_cast<size_t>(done);
    }
    return true;
  };
  std::string error;  // the first step that failed, with its reason
  auto check = [&error](bool ok, const char* step) {
    if (!ok && error.empty()) error = StrCat(step, ": ", ErrnoText());
  };
  check(write_all(prefix.data(), prefix.size()), "write");
  for (const TensorToWrite& t : tensors) {
    if (error.empty()) check(write_all(t.data.data(), t.data.size()), "write");
  }
  if (error.empty()) check(::fsync(fd) == 0, "fsync");
  check(::close(fd) == 0, "close");
  if (error.empty()) check(::rename(tmp.c_str(), path.c_str()) == 0, "rename");
  if (error.empty()) return Status::Ok();
  ::unlink(tmp.c_str());
  return Status::IoError(StrCat(tmp.string(), ": cannot ", error));
}

}  // namespace folio::checkpoint
