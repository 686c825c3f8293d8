#include "folio/checkpoint/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "folio/core/dtype.h"

namespace folio::checkpoint {
namespace {

using Bytes = std::vector<std::byte>;
using TensorInfo = GgufFile::TensorInfo;
using VT = GgufValueType;

constexpr char kSource[] = "mem.gguf";

// --- A hand-written little-endian GGUF encoder. ---

template <typename T>
Bytes Le(T v) {
  static_assert(std::is_unsigned_v<T>);
  Bytes out(sizeof(T));
  for (size_t i = 0; i < sizeof(T); ++i) {
    out[i] = static_cast<std::byte>((static_cast<uint64_t>(v) >> (8 * i)) & 0xFF);
  }
  return out;
}
Bytes U8(uint8_t v) { return Le(v); }
Bytes U32(uint32_t v) { return Le(v); }
Bytes U64(uint64_t v) { return Le(v); }
Bytes F32(float v) { return Le(std::bit_cast<uint32_t>(v)); }
Bytes F64(double v) { return Le(std::bit_cast<uint64_t>(v)); }
Bytes Raw(std::string_view s) {
  Bytes out(s.size());
  if (!s.empty()) std::memcpy(out.data(), s.data(), s.size());
  return out;
}
Bytes Join(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
// A gguf string: u64 length, then the bytes.
Bytes Str(std::string_view s) { return Join({U64(s.size()), Raw(s)}); }
Bytes Type(VT t) { return U32(static_cast<uint32_t>(t)); }
// An array value: element type, count, the encoded elements.
Bytes Array(VT element, uint64_t count, const Bytes& elements) {
  return Join({Type(element), U64(count), elements});
}
Bytes StrArray(std::initializer_list<std::string_view> items) {
  Bytes elements;
  for (std::string_view s : items) {
    const Bytes e = Str(s);
    elements.insert(elements.end(), e.begin(), e.end());
  }
  return Array(VT::kString, items.size(), elements);
}
// One metadata key/value.
Bytes Kv(std::string_view key, VT type, const Bytes& value) {
  return Join({Str(key), Type(type), value});
}

uint64_t PadTo(uint64_t x, uint64_t alignment) {
  return (x + alignment - 1) / alignment * alignment;
}

// Distinct bytes, so a wrong data span shows.
Bytes Filler(size_t n, uint8_t seed) {
  Bytes out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = static_cast<std::byte>((seed * 31 + i * 7) & 0xFF);
  }
  return out;
}

struct TestTensor {
  std::string name;
  uint32_t type;  // a GgmlType id
  std::vector<uint64_t> dims;
  Bytes data;                      // written at the offset
  std::optional<uint64_t> offset;  // default: after the previous, padded
};

// A valid tensor: its data is exactly the size the type and dims need.
TestTensor Tensor(std::string name, GgmlType type, std::vector<uint64_t> dims, uint8_t seed = 1) {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  const uint64_t bytes = n / GgmlBlockSize(type) * GgmlBlockBytes(type);
  return {std::move(name), static_cast<uint32_t>(type), std::move(dims), Filler(bytes, seed),
          std::nullopt};
}

struct TestFile {
  uint32_t magic = kGgufMagic;
  uint32_t version = 3;
  std::vector<Bytes> kvs;
  std::vector<TestTensor> tensors;
  // The alignment the layout uses; a general.alignment entry in kvs tells
  // the reader.
  uint64_t alignment = 32;
  std::optional<uint64_t> tensor_count;  // overrides tensors.size()
  std::optional<uint64_t> kv_count;      // overrides kvs.size()

  // The offsets the tensors get.
  std::vector<uint64_t> Offsets() const {
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const TestTensor& t : tensors) {
      offsets.push_back(t.offset.value_or(PadTo(next, alignment)));
      next = offsets.back() + t.data.size();
    }
    return offsets;
  }
  // Header, key/values and tensor infos.
  Bytes Header() const {
    Bytes out = Join({U32(magic), U32(version), U64(tensor_count.value_or(tensors.size())),
                      U64(kv_count.value_or(kvs.size()))});
    for (const Bytes& kv : kvs) out.insert(out.end(), kv.begin(), kv.end());
    const std::vector<uint64_t> offsets = Offsets();
    for (size_t i = 0; i < tensors.size(); ++i) {
      const TestTensor& t = tensors[i];
      Bytes info = Join({Str(t.name), U32(static_cast<uint32_t>(t.dims.size()))});
      for (uint64_t d : t.dims) info = Join({info, U64(d)});
      info = Join({info, U32(t.type), U64(offsets[i])});
      out.insert(out.end(), info.begin(), info.end());
    }
    return out;
  }
  uint64_t DataOffset() const { return PadTo(Header().size(), alignment); }
  // The whole file; it ends with the last tensor's bytes, unpadded (or
  // with the tensor infos, when there are no tensors).
  Bytes Encode() const {
    Bytes out = Header();
    if (tensors.empty()) return out;
    const uint64_t data_offset = PadTo(out.size(), alignment);
    out.resize(data_offset);
    const std::vector<uint64_t> offsets = Offsets();
    for (size_t i = 0; i < tensors.size(); ++i) {
      const uint64_t begin = data_offset + offsets[i];
      const uint64_t end = begin + tensors[i].data.size();
      if (out.size() < end) out.resize(end);
      std::copy(tensors[i].data.begin(), tensors[i].data.end(),
                out.begin() + static_cast<ptrdiff_t>(begin));
    }
    return out;
  }
};

Result<GgufFile> Parse(const TestFile& f) { return GgufFile::FromBytes(f.Encode(), kSource); }
Result<GgufFile> ParseKvs(std::initializer_list<Bytes> kvs) {
  TestFile f;
  f.kvs = kvs;
  return Parse(f);
}
Result<GgufFile> ParseTensors(std::vector<TestTensor> tensors) {
  TestFile f;
  f.tensors = std::move(tensors);
  return Parse(f);
}

// Checks the code and that the message names the source and `needle`.
template <typename T>
::testing::AssertionResult IsError(const Result<T>& r, StatusCode code, std::string_view needle) {
  if (r.has_value()) return ::testing::AssertionFailure() << "parsed fine";
  const Status& s = r.error();
  if (s.code() != code || s.message().find(needle) == std::string::npos) {
    return ::testing::AssertionFailure()
           << s.ToString() << " (wanted " << StatusCodeName(code) << " with '" << needle << "')";
  }
  if (s.message().find(kSource) == std::string::npos) {
    return ::testing::AssertionFailure() << "source not named: " << s.ToString();
  }
  return ::testing::AssertionSuccess();
}
template <typename T>
::testing::AssertionResult IsCorrupt(const Result<T>& r, std::string_view needle) {
  return IsError(r, StatusCode::kCorruption, needle);
}

std::string AsString(std::span<const std::byte> bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

std::filesystem::path TempPath(std::string_view name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::filesystem::path(::testing::TempDir()) /
         (std::string(info->name()) + "." + std::to_string(::getpid()) + "." + std::string(name));
}

// Every metadata type, string and nested arrays, and three tensors.
TestFile SampleFile() {
  TestFile f;
  f.kvs = {
      Kv("general.architecture", VT::kString, Str("llama")),
      Kv("u8", VT::kU8, U8(200)),
      Kv("i8", VT::kI8, U8(0x80)),
      Kv("u16", VT::kU16, Le<uint16_t>(60000)),
      Kv("i16", VT::kI16, Le<uint16_t>(0xFFFE)),
      Kv("u32", VT::kU32, U32(4000000000u)),
      Kv("i32", VT::kI32, U32(static_cast<uint32_t>(-7))),
      Kv("f32", VT::kF32, F32(0.25f)),
      Kv("bool", VT::kBool, U8(1)),
      Kv("u64", VT::kU64, U64(UINT64_MAX)),
      Kv("i64", VT::kI64, U64(static_cast<uint64_t>(INT64_MIN))),
      Kv("f64", VT::kF64, F64(-1.5e300)),
      Kv("tokens", VT::kArray, StrArray({"<s>", "", "hello", "\xe2\x96\x81"})),
      Kv("scores", VT::kArray, Array(VT::kF32, 3, Join({F32(-1.0f), F32(0.0f), F32(2.5f)}))),
      Kv("types", VT::kArray, Array(VT::kI32, 2, Join({U32(1), U32(static_cast<uint32_t>(-3))}))),
      Kv("flags", VT::kArray, Array(VT::kBool, 2, Join({U8(0), U8(1)}))),
      Kv("nested", VT::kArray,
         Array(VT::kArray, 2, Join({Array(VT::kU8, 2, Join({U8(1), U8(2)})), StrArray({"x"})}))),
      Kv("empty", VT::kArray, Array(VT::kU64, 0, {})),
  };
  f.tensors = {Tensor("token_embd.weight", GgmlType::kF32, {4, 2}, 1),
               Tensor("norm", GgmlType::kF16, {8}, 2),
               Tensor("blk.0.attn_q.weight", GgmlType::kQ8_0, {32, 2}, 3)};
  return f;
}

GgufValue Scalar(VT type, decltype(GgufValue::data) data) {
  GgufValue v;
  v.type = type;
  v.data = std::move(data);
  return v;
}
GgufValue ArrayValue(VT element, std::vector<GgufValue> items) {
  GgufValue v;
  v.type = VT::kArray;
  v.element_type = element;
  v.data = std::move(items);
  return v;
}

// --- Valid files. ---

TEST(Gguf, ReadsEveryScalarMetadataType) {
  auto file = Parse(SampleFile());
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  const std::pair<const char*, GgufValue> want[] = {
      {"general.architecture", Scalar(VT::kString, std::string("llama"))},
      {"u8", Scalar(VT::kU8, uint64_t{200})},
      {"i8", Scalar(VT::kI8, int64_t{-128})},
      {"u16", Scalar(VT::kU16, uint64_t{60000})},
      {"i16", Scalar(VT::kI16, int64_t{-2})},
      {"u32", Scalar(VT::kU32, uint64_t{4000000000u})},
      {"i32", Scalar(VT::kI32, int64_t{-7})},
      {"f32", Scalar(VT::kF32, 0.25)},
      {"bool", Scalar(VT::kBool, true)},
      {"u64", Scalar(VT::kU64, uint64_t{UINT64_MAX})},
      {"i64", Scalar(VT::kI64, int64_t{INT64_MIN})},
      {"f64", Scalar(VT::kF64, -1.5e300)},
  };
  for (const auto& [key, value] : want) {
    auto got = file->Get(key);
    ASSERT_TRUE(got.has_value()) << got.error().ToString();
    EXPECT_EQ(*got, value) << key;
  }
}

TEST(Gguf, ReadsArraysOfStringsNumbersAndBools) {
  auto file = Parse(SampleFile());
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto tokens = file->Get("tokens");
  ASSERT_TRUE(tokens.has_value());
  EXPECT_EQ(*tokens, ArrayValue(VT::kString, {Scalar(VT::kString, std::string("<s>")),
                                              Scalar(VT::kString, std::string()),
                                              Scalar(VT::kString, std::string("hello")),
                                              Scalar(VT::kString, std::string("\xe2\x96\x81"))}));
  EXPECT_EQ(*file->Get("flags"),
            ArrayValue(VT::kBool, {Scalar(VT::kBool, false), Scalar(VT::kBool, true)}));
  EXPECT_EQ(*file->Get("types"),
            ArrayValue(VT::kI32, {Scalar(VT::kI32, int64_t{1}), Scalar(VT::kI32, int64_t{-3})}));
  EXPECT_EQ(*file->Get("empty"), ArrayValue(VT::kU64, {}));
}

TEST(Gguf, ReadsNestedArrays) {
  auto file = Parse(SampleFile());
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  const GgufValue want =
      ArrayValue(VT::kArray,
                 {ArrayValue(VT::kU8, {Scalar(VT::kU8, uint64_t{1}), Scalar(VT::kU8, uint64_t{2})}),
                  ArrayValue(VT::kString, {Scalar(VT::kString, std::string("x"))})});
  EXPECT_EQ(*file->Get("nested"), want);
}

TEST(Gguf, AcceptsArraysNestedUpToTheLimit) {
  Bytes value = Array(VT::kU8, 1, U8(9));
  for (int depth = 1; depth < kMaxGgufArrayDepth; ++depth) {
    value = Array(VT::kArray, 1, value);
  }
  auto file = ParseKvs({Kv("deep", VT::kArray, value)});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  GgufValue v = *file->Get("deep");
  for (int depth = 1; depth < kMaxGgufArrayDepth; ++depth) {
    ASSERT_EQ(v.element_type, VT::kArray);
    GgufValue inner = std::get<std::vector<GgufValue>>(v.data).at(0);
    v = std::move(inner);
  }
  EXPECT_EQ(v, ArrayValue(VT::kU8, {Scalar(VT::kU8, uint64_t{9})}));
}

TEST(Gguf, ListsKeysInFileOrder) {
  auto file =
      ParseKvs({Kv("b", VT::kU8, U8(1)), Kv("a", VT::kU8, U8(2)), Kv("c.d", VT::kU8, U8(3))});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ(file->Keys(), (std::vector<std::string>{"b", "a", "c.d"}));
  EXPECT_TRUE(file->Has("a"));
  EXPECT_FALSE(file->Has("c"));
}

TEST(Gguf, TypedGettersReadTheirTypes) {
  auto file = Parse(SampleFile());
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ(*file->GetUint("u32"), 4000000000u);
  EXPECT_EQ(*file->GetUint("u64"), UINT64_MAX);
  EXPECT_EQ(*file->GetInt("i64"), INT64_MIN);
  EXPECT_EQ(*file->GetFloat("f32"), 0.25);
  EXPECT_EQ(*file->GetFloat("f64"), -1.5e300);
  EXPECT_EQ(*file->GetBool("bool"), true);
  EXPECT_EQ(*file->GetString("general.architecture"), "llama");
  EXPECT_EQ(*file->GetStringArray("tokens"),
            (std::vector<std::string>{"<s>", "", "hello", "\xe2\x96\x81"}));
  EXPECT_EQ(*file->GetFloatArray("scores"), (std::vector<double>{-1.0, 0.0, 2.5}));
  EXPECT_EQ(*file->GetIntArray("types"), (std::vector<int64_t>{1, -3}));
  EXPECT_EQ(*file->GetIntArray("empty"), std::vector<int64_t>{});
}

TEST(Gguf, GetUintWidensUnsignedAndNonNegativeSignedValues) {
  auto file = ParseKvs(
      {Kv("u8", VT::kU8, U8(255)), Kv("i32", VT::kI32, U32(4096)), Kv("i8", VT::kI8, U8(0))});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ(*file->GetUint("u8"), 255u);
  EXPECT_EQ(*file->GetUint("i32"), 4096u);
  EXPECT_EQ(*file->GetUint("i8"), 0u);
}

TEST(Gguf, GetIntWidensSignedAndSmallUnsignedValues) {
  auto file = ParseKvs({Kv("i16", VT::kI16, Le<uint16_t>(0x8000)),
                        Kv("u32", VT::kU32, U32(UINT32_MAX)), Kv("u64", VT::kU64, U64(INT64_MAX))});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ(*file->GetInt("i16"), -32768);
  EXPECT_EQ(*file->GetInt("u32"), int64_t{UINT32_MAX});
  EXPECT_EQ(*file->GetInt("u64"), INT64_MAX);
}

TEST(Gguf, GetUintOfANegativeValueIsOutOfRange) {
  auto file = ParseKvs({Kv("n", VT::kI32, U32(static_cast<uint32_t>(-5)))});
  ASSERT_TRUE(file.has_value());
  EXPECT_TRUE(IsError(file->GetUint("n"), StatusCode::kOutOfRange,
                      "metadata key 'n' is -5 (i32), wanted an unsigned"));
}

TEST(Gguf, GetIntOfAU64AboveInt64MaxIsOutOfRange) {
  auto file = ParseKvs({Kv("n", VT::kU64, U64(uint64_t{1} << 63))});
  ASSERT_TRUE(file.has_value());
  EXPECT_TRUE(IsError(file->GetInt("n"), StatusCode::kOutOfRange,
                      "'n' is 9223372036854775808 (u64), above the int64"));
}

TEST(Gguf, GetIntArrayOfAnElementAboveInt64MaxIsOutOfRange) {
  auto file = ParseKvs({Kv("a", VT::kArray, Array(VT::kU64, 2, Join({U64(1), U64(UINT64_MAX)})))});
  ASSERT_TRUE(file.has_value());
  EXPECT_TRUE(IsError(file->GetIntArray("a"), StatusCode::kOutOfRange,
                      "metadata key 'a' element 1 is 18446744073709551615"));
}

TEST(Gguf, GetIntArrayWidensUnsignedElements) {
  auto file = ParseKvs(
      {Kv("a", VT::kArray, Array(VT::kU16, 2, Join({Le<uint16_t>(65535), Le<uint16_t>(0)})))});
  ASSERT_TRUE(file.has_value());
  EXPECT_EQ(*file->GetIntArray("a"), (std::vector<int64_t>{65535, 0}));
}

TEST(Gguf, GetFloatArrayReadsF64Elements) {
  auto file = ParseKvs({Kv("a", VT::kArray, Array(VT::kF64, 1, F64(0.1)))});
  ASSERT_TRUE(file.has_value());
  EXPECT_EQ(*file->GetFloatArray("a"), std::vector<double>{0.1});
}

TEST(Gguf, GettersOfAnAbsentKeyAreNotFound) {
  auto file = Parse(SampleFile());
  ASSERT_TRUE(file.has_value());
  EXPECT_TRUE(
      IsError(file->GetUint("nope"), StatusCode::kNotFound, "metadata key 'nope' not found"));
  EXPECT_TRUE(IsError(file->Get("nope"), StatusCode::kNotFound, "'nope'"));
  EXPECT_TRUE(IsError(file->GetStringArray("nope"), StatusCode::kNotFound, "'nope'"));
}

TEST(Gguf, GetterOfAnotherTypeNamesTheKeyAndBothTypes) {
  auto file = Parse(SampleFile());
  ASSERT_TRUE(file.has_value());
  const StatusCode kInvalid = StatusCode::kInvalidArgument;
  EXPECT_TRUE(IsError(file->GetUint("f32"), kInvalid,
                      "metadata key 'f32' has type f32, wanted an unsigned"));
  EXPECT_TRUE(IsError(file->GetInt("bool"), kInvalid, "'bool' has type bool, wanted an integer"));
  EXPECT_TRUE(IsError(file->GetFloat("u32"), kInvalid, "'u32' has type u32, wanted f32 or f64"));
  EXPECT_TRUE(IsError(file->GetBool("u8"), kInvalid, "'u8' has type u8, wanted bool"));
  EXPECT_TRUE(IsError(file->GetString("tokens"), kInvalid,
                      "'tokens' has type array of string, wanted string"));
  EXPECT_TRUE(IsError(file->GetStringArray("general.architecture"), kInvalid,
                      "has type string, wanted array of string"));
  EXPECT_TRUE(IsError(file->GetFloatArray("types"), kInvalid,
                      "'types' has type array of i32, wanted array of f32"));
  EXPECT_TRUE(IsError(file->GetIntArray("nested"), kInvalid,
                      "'nested' has type array of array, wanted array of"));
}

TEST(Gguf, FindsTensorsAndTheirData) {
  const TestFile f = SampleFile();
  auto file = Parse(f);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  ASSERT_EQ(file->tensors().size(), 3u);
  const std::vector<uint64_t> offsets = f.Offsets();
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 32, 64}));
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const TestTensor& want = f.tensors[i];
    const TensorInfo* got = file->Find(want.name);
    ASSERT_NE(got, nullptr) << want.name;
    EXPECT_EQ(got, &file->tensors()[i]);  // file order
    EXPECT_EQ(static_cast<uint32_t>(got->type), want.type);
    EXPECT_EQ(got->dims, want.dims);
    EXPECT_EQ(got->offset, offsets[i]);
    EXPECT_EQ(got->num_bytes, want.data.size());
    EXPECT_EQ(AsString(file->Data(*got)), AsString(want.data)) << want.name;
  }
  EXPECT_EQ(file->Find("token_embd.weight")->num_bytes, 32u);    // 8 x f32
  EXPECT_EQ(file->Find("norm")->num_bytes, 16u);                 // 8 x f16
  EXPECT_EQ(file->Find("blk.0.attn_q.weight")->num_bytes, 68u);  // 2 blocks
  EXPECT_EQ(file->Find("missing"), nullptr);
  EXPECT_EQ(file->source(), kSource);
}

TEST(Gguf, UsesTheDefaultAlignmentOf32) {
  const TestFile f = SampleFile();
  auto file = Parse(f);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_EQ(file->data_offset(), f.DataOffset());
  EXPECT_EQ(file->data_offset() % 32, 0u);
  EXPECT_LT(file->data_offset() - f.Header().size(), 32u);
}

TEST(Gguf, HonoursACustomAlignmentOf64) {
  TestFile f = SampleFile();
  f.alignment = 64;
  f.kvs.push_back(Kv(kGgufAlignmentKey, VT::kU32, U32(64)));
  auto file = Parse(f);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ(file->alignment(), 64u);
  EXPECT_EQ(file->data_offset(), f.DataOffset());
  EXPECT_EQ(file->data_offset() % 64, 0u);
  EXPECT_EQ(file->Find("norm")->offset, 64u);
  EXPECT_EQ(file->Find("blk.0.attn_q.weight")->offset, 128u);
  const TestTensor& q = f.tensors[2];
  EXPECT_EQ(AsString(file->Data(*file->Find(q.name))), AsString(q.data));
}

TEST(Gguf, AcceptsAnAlignmentOfAnyIntegerType) {
  TestFile f = SampleFile();
  f.alignment = 8;
  f.kvs.push_back(Kv(kGgufAlignmentKey, VT::kI64, U64(8)));
  auto file = Parse(f);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ(file->alignment(), 8u);
}

TEST(Gguf, ReadsVersion2) {
  TestFile f = SampleFile();
  f.version = 2;
  auto file = Parse(f);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ(file->version(), 2u);
  EXPECT_EQ(*file->GetString("general.architecture"), "llama");
}

TEST(Gguf, ReadsVersion3) {
  auto file = Parse(SampleFile());
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ(file->version(), 3u);
}

TEST(Gguf, ReadsAnEmptyFileBody) {
  auto file = Parse(TestFile{});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_TRUE(file->tensors().empty());
  EXPECT_TRUE(file->Keys().empty());
  EXPECT_EQ(file->data_offset(), 32u);  // beyond the 24-byte file: no data
}

TEST(Gguf, AcceptsTensorsInAnyOrderWithGaps) {
  TestTensor a = Tensor("a", GgmlType::kF32, {8}, 1);
  TestTensor b = Tensor("b", GgmlType::kF32, {8}, 2);
  a.offset = 96;
  b.offset = 0;
  auto file = ParseTensors({a, b});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ(file->tensors()[0].name, "a");
  EXPECT_EQ(AsString(file->Data(*file->Find("a"))), AsString(a.data));
  EXPECT_EQ(AsString(file->Data(*file->Find("b"))), AsString(b.data));
}

TEST(Gguf, AcceptsPaddingAfterTheLastTensor) {
  Bytes image = SampleFile().Encode();
  image.resize(PadTo(image.size(), 32));
  EXPECT_TRUE(GgufFile::FromBytes(std::move(image), kSource).ok());
}

// ggml's block sizes and bytes, written out independently of the reader's
// table (they agree with the gguf Python package's GGML_QUANT_SIZES except
// Q8_1, where the package keeps an old 40-byte layout).
struct TypeRow {
  GgmlType type;
  const char* name;
  uint64_t block_size;
  uint64_t block_bytes;
};
constexpr TypeRow kTypeRows[] = {
    {GgmlType::kF32, "F32", 1, 4},
    {GgmlType::kF16, "F16", 1, 2},
    {GgmlType::kQ4_0, "Q4_0", 32, 18},
    {GgmlType::kQ4_1, "Q4_1", 32, 20},
    {GgmlType::kQ5_0, "Q5_0", 32, 22},
    {GgmlType::kQ5_1, "Q5_1", 32, 24},
    {GgmlType::kQ8_0, "Q8_0", 32, 34},
    {GgmlType::kQ8_1, "Q8_1", 32, 36},
    {GgmlType::kQ2_K, "Q2_K", 256, 84},
    {GgmlType::kQ3_K, "Q3_K", 256, 110},
    {GgmlType::kQ4_K, "Q4_K", 256, 144},
    {GgmlType::kQ5_K, "Q5_K", 256, 176},
    {GgmlType::kQ6_K, "Q6_K", 256, 210},
    {GgmlType::kQ8_K, "Q8_K", 256, 292},
    {GgmlType::kIQ2_XXS, "IQ2_XXS", 256, 66},
    {GgmlType::kIQ2_XS, "IQ2_XS", 256, 74},
    {GgmlType::kIQ3_XXS, "IQ3_XXS", 256, 98},
    {GgmlType::kIQ1_S, "IQ1_S", 256, 50},
    {GgmlType::kIQ4_NL, "IQ4_NL", 32, 18},
    {GgmlType::kIQ3_S, "IQ3_S", 256, 110},
    {GgmlType::kIQ2_S, "IQ2_S", 256, 82},
    {GgmlType::kIQ4_XS, "IQ4_XS", 256, 136},
    {GgmlType::kI8, "I8", 1, 1},
    {GgmlType::kI16, "I16", 1, 2},
    {GgmlType::kI32, "I32", 1, 4},
    {GgmlType::kI64, "I64", 1, 8},
    {GgmlType::kF64, "F64", 1, 8},
    {GgmlType::kIQ1_M, "IQ1_M", 256, 56},
    {GgmlType::kBF16, "BF16", 1, 2},
    {GgmlType::kTQ1_0, "TQ1_0", 256, 54},
    {GgmlType::kTQ2_0, "TQ2_0", 256, 66},
    {GgmlType::kMXFP4, "MXFP4", 32, 17},
    {GgmlType::kNVFP4, "NVFP4", 64, 36},
    {GgmlType::kQ1_0, "Q1_0", 128, 18},
};

TEST(Gguf, KnowsTheBlockLayoutOfEveryGgmlType) {
  for (const TypeRow& row : kTypeRows) {
    EXPECT_EQ(GgmlTypeName(row.type), row.name);
    EXPECT_EQ(GgmlBlockSize(row.type), row.block_size) << row.name;
    EXPECT_EQ(GgmlBlockBytes(row.type), row.block_bytes) << row.name;
  }
  EXPECT_EQ(GgmlTypeName(static_cast<GgmlType>(4)), "unknown");
}

TEST(Gguf, SizesATensorOfEveryGgmlType) {
  TestFile f;
  for (const TypeRow& row : kTypeRows) {
    f.tensors.push_back({row.name,
                         static_cast<uint32_t>(row.type),
                         {row.block_size * 2, 3},
                         Filler(row.block_bytes * 6, 5),
                         std::nullopt});
  }
  auto file = Parse(f);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  for (const TypeRow& row : kTypeRows) {
    const TensorInfo* t = file->Find(row.name);
    ASSERT_NE(t, nullptr) << row.name;
    EXPECT_EQ(t->type, row.type);
    EXPECT_EQ(t->num_bytes, row.block_bytes * 6) << row.name;
  }
}

TEST(Gguf, NamesEveryValueType) {
  EXPECT_EQ(GgufValueTypeName(VT::kU8), "u8");
  EXPECT_EQ(GgufValueTypeName(VT::kString), "string");
  EXPECT_EQ(GgufValueTypeName(VT::kF64), "f64");
  EXPECT_EQ(GgufValueTypeName(static_cast<VT>(13)), "unknown");
}

TEST(Gguf, MovedFileKeepsItsMetadataAndData) {
  const TestFile f = SampleFile();
  auto file = Parse(f);
  ASSERT_TRUE(file.has_value());
  GgufFile moved = *std::move(file);
  GgufFile assigned = *GgufFile::FromBytes(TestFile{}.Encode(), "x");
  assigned = std::move(moved);
  EXPECT_EQ(*assigned.GetStringArray("tokens"),
            (std::vector<std::string>{"<s>", "", "hello", "\xe2\x96\x81"}));
  EXPECT_EQ(AsString(assigned.Data(*assigned.Find("norm"))), AsString(f.tensors[1].data));
}

TEST(Gguf, OpenReadsAFileFromDisk) {
  const TestFile f = SampleFile();
  const auto path = TempPath("model.gguf");
  {
    const Bytes image = f.Encode();
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(image.data()),
              static_cast<std::streamsize>(image.size()));
  }
  {
    auto file = GgufFile::Open(path);
    ASSERT_TRUE(file.has_value()) << file.error().ToString();
    EXPECT_EQ(file->source(), path.string());
    EXPECT_EQ(*file->GetString("general.architecture"), "llama");
    GgufFile moved = *std::move(file);  // the mapping moves along
    const TensorInfo* q = moved.Find("blk.0.attn_q.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(AsString(moved.Data(*q)), AsString(f.tensors[2].data));
  }
  std::filesystem::remove(path);
}

TEST(Gguf, OpenReportsAMissingFileAsNotFound) {
  const auto r = GgufFile::Open(TempPath("absent"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kNotFound);
  EXPECT_NE(r.error().message().find("absent"), std::string::npos);
}

TEST(Gguf, OpenRejectsADirectory) {
  const auto r = GgufFile::Open(::testing::TempDir());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kIoError);
  EXPECT_NE(r.error().message().find("regular file"), std::string::npos);
}

TEST(Gguf, OpenRejectsAnEmptyFile) {
  const auto path = TempPath("empty");
  std::ofstream(path).close();
  const auto r = GgufFile::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
  EXPECT_NE(r.error().message().find("truncated: magic at byte 0 needs 4"), std::string::npos)
      << r.error().ToString();
  std::filesystem::remove(path);
}

// --- One test per reader error. ---

TEST(Gguf, RejectsAFileShorterThanTheMagic) {
  EXPECT_TRUE(IsCorrupt(GgufFile::FromBytes(Raw("GGU"), kSource),
                        "truncated: magic at byte 0 needs 4 bytes, 3 remain"));
}

TEST(Gguf, RejectsABadMagic) {
  TestFile f;
  f.magic = 0x4c4d4747;  // "GGML", the pre-GGUF format
  EXPECT_TRUE(IsCorrupt(Parse(f),
                        "bad magic 0x4c4d4747 ('GGML'), wanted "
                        "0x46554747 ('GGUF')"));
}

TEST(Gguf, ReportsVersion1AsUnimplemented) {
  TestFile f;
  f.version = 1;
  EXPECT_TRUE(IsError(Parse(f), StatusCode::kUnimplemented,
                      "GGUF version 1 (32-bit counts) is not supported; "
                      "folio reads versions 2 and 3"));
}

TEST(Gguf, ReportsAnUnknownVersionAsUnimplemented) {
  TestFile f;
  f.version = 4;
  EXPECT_TRUE(IsError(Parse(f), StatusCode::kUnimplemented, "GGUF version 4 is not supported"));
}

TEST(Gguf, ReportsABigEndianFileAsUnimplemented) {
  TestFile f;
  f.version = 0x03000000;  // 3, byte-swapped
  EXPECT_TRUE(IsError(Parse(f), StatusCode::kUnimplemented,
                      "version 0x03000000 is GGUF v3 in big-endian byte order"));
}

TEST(Gguf, RejectsATensorCountBeyondTheFile) {
  TestFile f;
  f.tensor_count = 1000;
  EXPECT_TRUE(IsCorrupt(Parse(f),
                        "tensor_count 1000 cannot fit in the 0 "
                        "bytes after the header (33 or more"));
}

TEST(Gguf, RejectsAKvCountBeyondTheFile) {
  TestFile f;
  f.kvs = {Kv("a", VT::kU8, U8(1))};
  f.kv_count = UINT64_MAX;
  EXPECT_TRUE(IsCorrupt(Parse(f),
                        "metadata_kv_count 18446744073709551615 "
                        "cannot fit in the 14 bytes after the "
                        "header (14 or more"));
}

TEST(Gguf, RejectsAKvCountAboveTheEntriesPresent) {
  TestFile f;
  const std::string key(20, 'k');  // long enough to pass the count bound
  f.kvs = {Kv(key + "1", VT::kU8, U8(1)), Kv(key + "2", VT::kU8, U8(1))};
  f.kv_count = 3;
  EXPECT_TRUE(IsCorrupt(Parse(f),
                        "metadata entry 2: truncated: key at byte "
                        "92 needs 8 bytes, 0 remain"));
}

TEST(Gguf, RejectsAKeyLengthBeyondTheFile) {
  TestFile f;
  f.kvs = {Join({U64(1000), Raw("abc"), Type(VT::kU8), U8(1)})};
  EXPECT_TRUE(IsCorrupt(Parse(f),
                        "metadata entry 0: truncated: key at byte "
                        "32 needs 1000 bytes, 8 remain"));
}

TEST(Gguf, RejectsAKeyAboveTheSpecLimit) {
  const std::string key(kMaxGgufKeyBytes + 1, 'k');
  EXPECT_TRUE(IsCorrupt(ParseKvs({Kv(key, VT::kU8, U8(1))}),
                        "metadata entry 0: key at byte 32 is 65536 bytes, "
                        "above the limit of 65535"));
}

TEST(Gguf, RejectsAnEmptyKey) {
  EXPECT_TRUE(IsCorrupt(ParseKvs({Kv("", VT::kU32, U32(1))}), "metadata entry 0: key is empty"));
}

TEST(Gguf, ReportsAStringValueAboveTheLimitAsUnimplemented) {
  const std::string big(kMaxGgufStringBytes + 1, 's');
  EXPECT_TRUE(IsError(ParseKvs({Kv("chat", VT::kString, Str(big))}), StatusCode::kUnimplemented,
                      "metadata entry 0 'chat': string value at byte 48 is "
                      "1048577 bytes, above the limit of 1048576"));
}

TEST(Gguf, RejectsAStringValueBeyondTheFile) {
  EXPECT_TRUE(IsCorrupt(ParseKvs({Kv("s", VT::kString, Join({U64(UINT64_MAX), Raw("xyz")}))}),
                        "metadata entry 0 's': truncated: string value at byte 45 needs "
                        "18446744073709551615 bytes, 3 remain"));
}

TEST(Gguf, RejectsAnUnknownValueType) {
  EXPECT_TRUE(IsCorrupt(ParseKvs({Kv("k", static_cast<VT>(13), U32(0))}),
                        "metadata entry 0 'k': unknown value type 13 (value "
                        "types are 0 to 12)"));
}

TEST(Gguf, RejectsAnUnknownArrayElementType) {
  EXPECT_TRUE(IsCorrupt(ParseKvs({Kv("a", VT::kArray, Array(static_cast<VT>(99), 0, {}))}),
                        "metadata entry 0 'a': unknown array element type 99"));
}

TEST(Gguf, RejectsAnArrayCountBeyondTheFile) {
  EXPECT_TRUE(IsCorrupt(ParseKvs({Kv("a", VT::kArray, Array(VT::kU32, 1000, U32(1)))}),
                        "metadata entry 0 'a': array of 1000 u32 at byte 49 cannot fit in "
                        "the 4 bytes that remain (4 or more each)"));
}

TEST(Gguf, RejectsAStringArrayCountBeyondTheFile) {
  // 2^61 strings would pass a one-byte-per-element bound; each needs 8.
  EXPECT_TRUE(
      IsCorrupt(ParseKvs({Kv("a", VT::kArray, Array(VT::kString, uint64_t{1} << 61, Str("x")))}),
                "cannot fit in the 9 bytes that remain (8 or more each)"));
}

TEST(Gguf, RejectsATruncatedArrayElement) {
  EXPECT_TRUE(IsCorrupt(
      ParseKvs({Kv("a", VT::kArray, Array(VT::kString, 2, Join({Str("ok"), U64(50), Raw("x")})))}),
      "metadata entry 0 'a': element 1: truncated: string value"));
}

TEST(Gguf, ReportsArraysNestedTooDeeplyAsUnimplemented) {
  Bytes value = Array(VT::kU8, 1, U8(9));
  for (int depth = 1; depth <= kMaxGgufArrayDepth; ++depth) {
    value = Array(VT::kArray, 1, value);
  }
  EXPECT_TRUE(IsError(ParseKvs({Kv("deep", VT::kArray, value)}), StatusCode::kUnimplemented,
                      "metadata entry 0 'deep': element 0: element 0: "
                      "element 0: element 0: arrays nest deeper than the "
                      "limit of 4 levels"));
}

TEST(Gguf, RejectsABoolOtherThan0Or1) {
  EXPECT_TRUE(IsCorrupt(ParseKvs({Kv("b", VT::kBool, U8(2))}),
                        "metadata entry 0 'b': bool value is 2, not 0 or 1"));
}

TEST(Gguf, RejectsABoolArrayElementOtherThan0Or1) {
  EXPECT_TRUE(IsCorrupt(ParseKvs({Kv("b", VT::kArray, Array(VT::kBool, 2, Join({U8(1), U8(3)})))}),
                        "metadata entry 0 'b': element 1: bool value is 3"));
}

TEST(Gguf, RejectsADuplicateKey) {
  EXPECT_TRUE(IsCorrupt(
      ParseKvs({Kv("k", VT::kU8, U8(1)), Kv("j", VT::kU8, U8(1)), Kv("k", VT::kU32, U32(2))}),
      "metadata entry 2 'k': the key repeats metadata entry 0"));
}

TEST(Gguf, RejectsAnAlignmentOfZero) {
  TestFile f;
  f.kvs = {Kv(kGgufAlignmentKey, VT::kU32, U32(0))};
  EXPECT_TRUE(IsCorrupt(Parse(f),
                        "general.alignment is 0, wanted a power of "
                        "two from 1 to 2^31"));
}

TEST(Gguf, RejectsAnAlignmentThatIsNotAPowerOfTwo) {
  TestFile f;
  f.kvs = {Kv(kGgufAlignmentKey, VT::kU32, U32(48))};
  EXPECT_TRUE(IsCorrupt(Parse(f), "general.alignment is 48, wanted a power"));
}

TEST(Gguf, RejectsANegativeAlignment) {
  TestFile f;
  f.kvs = {Kv(kGgufAlignmentKey, VT::kI32, U32(static_cast<uint32_t>(-32)))};
  EXPECT_TRUE(IsCorrupt(Parse(f), "general.alignment is -32, wanted a power"));
}

TEST(Gguf, RejectsAnAlignmentAbove2To31) {
  TestFile f;
  f.kvs = {Kv(kGgufAlignmentKey, VT::kU64, U64(uint64_t{1} << 32))};
  EXPECT_TRUE(IsCorrupt(Parse(f), "general.alignment is 4294967296, wanted"));
}

TEST(Gguf, RejectsAnAlignmentOfTheWrongType) {
  TestFile f;
  f.kvs = {Kv(kGgufAlignmentKey, VT::kString, Str("32"))};
  EXPECT_TRUE(IsCorrupt(Parse(f),
                        "general.alignment has type string, wanted "
                        "an integer (u32)"));
}

TEST(Gguf, RejectsAnEmptyTensorName) {
  EXPECT_TRUE(
      IsCorrupt(ParseTensors({Tensor("", GgmlType::kF32, {1})}), "tensor 0: name is empty"));
}

TEST(Gguf, RejectsATensorNameAboveGgmlsLimit) {
  EXPECT_TRUE(IsCorrupt(ParseTensors({Tensor(std::string(64, 'n'), GgmlType::kF32, {1})}),
                        "tensor 0: name at byte 32 is 64 bytes, above the limit of 63"));
}

TEST(Gguf, AcceptsATensorNameAtGgmlsLimit) {
  EXPECT_TRUE(ParseTensors({Tensor(std::string(63, 'n'), GgmlType::kF32, {1})}).ok());
}

TEST(Gguf, RejectsADuplicateTensorName) {
  EXPECT_TRUE(
      IsCorrupt(ParseTensors({Tensor("t", GgmlType::kF32, {1}), Tensor("t", GgmlType::kF32, {1})}),
                "tensor 1 't': the name repeats tensor 0"));
}

TEST(Gguf, ReportsARankZeroTensorAsUnimplemented) {
  EXPECT_TRUE(IsError(ParseTensors({{"s", 0, {}, Filler(4, 1), std::nullopt}}),
                      StatusCode::kUnimplemented, "tensor 0 's': n_dims is 0 (a scalar)"));
}

TEST(Gguf, RejectsMoreThanFourDims) {
  EXPECT_TRUE(IsCorrupt(ParseTensors({Tensor("t", GgmlType::kF32, {1, 1, 1, 1, 1})}),
                        "tensor 0 't': n_dims 5 exceeds ggml's limit of 4"));
}

TEST(Gguf, AcceptsFourDims) {
  auto file = ParseTensors({Tensor("t", GgmlType::kF32, {2, 3, 4, 5})});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ(file->Find("t")->num_bytes, 2u * 3 * 4 * 5 * 4);
}

TEST(Gguf, RejectsADimOfZero) {
  EXPECT_TRUE(IsCorrupt(ParseTensors({Tensor("t", GgmlType::kF32, {4, 0})}),
                        "tensor 0 't': dims[1] is 0; empty tensors are "
                        "refused"));
}

TEST(Gguf, RejectsADimAboveInt64Max) {
  EXPECT_TRUE(IsCorrupt(ParseTensors({{"t", 0, {uint64_t{1} << 63}, {}, std::nullopt}}),
                        "dims[0] = 9223372036854775808 exceeds ggml's limit of 2^63 - 1"));
}

TEST(Gguf, RejectsAnElementCountAboveInt64Max) {
  EXPECT_TRUE(
      IsCorrupt(ParseTensors({{"t", 0, {uint64_t{1} << 32, uint64_t{1} << 31}, {}, std::nullopt}}),
                "dims [4294967296, 2147483648] of F32 has more than 2^63 - 1 elements"));
}

TEST(Gguf, RejectsAnElementCountThatOverflows) {
  EXPECT_TRUE(
      IsCorrupt(ParseTensors({{"t", 0, {uint64_t{1} << 40, uint64_t{1} << 40}, {}, std::nullopt}}),
                "has more than 2^63 - 1 elements"));
}

TEST(Gguf, RejectsAByteSizeThatOverflows) {
  EXPECT_TRUE(IsCorrupt(
      ParseTensors(
          {{"t", static_cast<uint32_t>(GgmlType::kF64), {uint64_t{1} << 62}, {}, std::nullopt}}),
      "dims [4611686018427387904] of F64 overflows a 64-bit byte size"));
}

TEST(Gguf, RejectsARemovedGgmlType) {
  EXPECT_TRUE(IsCorrupt(ParseTensors({{"t", 4, {32}, {}, std::nullopt}}),
                        "tensor 0 't': unknown ggml type 4"));
}

TEST(Gguf, ReportsAGgmlTypeNewerThanFoliosTableAsUnimplemented) {
  EXPECT_TRUE(IsError(ParseTensors({{"t", 1000, {32}, {}, std::nullopt}}),
                      StatusCode::kUnimplemented,
                      "tensor 0 't': ggml type 1000 is newer than folio's "
                      "table, which ends at 41 (Q1_0)"));
}

TEST(Gguf, RejectsARowThatIsNotAMultipleOfTheBlockSize) {
  EXPECT_TRUE(IsCorrupt(
      ParseTensors(
          {{"t", static_cast<uint32_t>(GgmlType::kQ8_0), {48, 2}, Filler(68, 1), std::nullopt}}),
      "dims [48, 2] of Q8_0: dims[0] = 48 is not a multiple of the block "
      "size 32"));
}

TEST(Gguf, RejectsAMisalignedOffset) {
  TestTensor t = Tensor("t", GgmlType::kF32, {4});
  t.offset = 16;
  EXPECT_TRUE(IsCorrupt(ParseTensors({t}),
                        "tensor 0 't': offset 16 is not "
                        "a multiple of the alignment 32"));
}

TEST(Gguf, RejectsTensorDataBeyondTheFile) {
  TestTensor t = Tensor("t", GgmlType::kF32, {4});
  t.data.resize(12);  // needs 16
  auto r = ParseTensors({t});
  EXPECT_TRUE(IsCorrupt(r,
                        "tensor 't': 16 bytes at offset 0 run past the "
                        "data section of 12 bytes"));
}

TEST(Gguf, RejectsAnOffsetThatOverflows) {
  TestTensor t = Tensor("t", GgmlType::kF32, {8});
  t.offset = UINT64_MAX - 31;  // a multiple of 32
  TestFile f;
  f.tensors = {t};
  // The encoder cannot place the data; write the header and pad by hand.
  Bytes image = f.Header();
  image.resize(PadTo(image.size(), 32) + 32);
  EXPECT_TRUE(IsCorrupt(GgufFile::FromBytes(image, kSource),
                        "32 bytes at offset 18446744073709551584 run past"));
}

TEST(Gguf, RejectsTensorsWhenTheFileEndsBeforeTheDataSection) {
  TestFile f;
  f.tensors = {Tensor("t", GgmlType::kF32, {1})};
  EXPECT_TRUE(
      IsCorrupt(GgufFile::FromBytes(f.Header(), kSource), "run past the data section of 0 bytes"));
}

TEST(Gguf, RejectsOverlappingTensors) {
  TestTensor a = Tensor("a", GgmlType::kF32, {16});
  TestTensor b = Tensor("b", GgmlType::kF32, {8});
  a.offset = 0;
  b.offset = 32;
  EXPECT_TRUE(IsCorrupt(ParseTensors({b, a}), "tensors 'a' [0, 64) and 'b' [32, 64) overlap"));
}

TEST(Gguf, RejectsTensorsAtTheSameOffset) {
  TestTensor a = Tensor("a", GgmlType::kF32, {8});
  TestTensor b = Tensor("b", GgmlType::kF32, {8});
  a.offset = b.offset = 0;
  EXPECT_TRUE(IsCorrupt(ParseTensors({a, b}), "overlap"));
}

TEST(Gguf, ClipsAHugeKeyInTheMessage) {
  const std::string key(10000, 'k');
  const auto r = ParseKvs({Kv(key, VT::kBool, U8(7))});
  EXPECT_TRUE(IsCorrupt(r, "bool value is 7"));
  EXPECT_LT(r.error().message().size(), 300u);
}

// --- Sweeps: no prefix or bit flip may crash; run these under ASan. ---

TEST(Gguf, EveryTruncatedPrefixIsAnError) {
  const Bytes image = SampleFile().Encode();
  for (size_t len = 0; len < image.size(); ++len) {
    Bytes prefix(image.begin(), image.begin() + static_cast<ptrdiff_t>(len));
    EXPECT_FALSE(GgufFile::FromBytes(std::move(prefix), kSource).ok()) << len;
  }
  EXPECT_TRUE(GgufFile::FromBytes(image, kSource).ok());
}

// Checks what a successful parse promises.
void ExpectConsistent(const GgufFile& file) {
  for (const std::string& key : file.Keys()) {
    EXPECT_TRUE(file.Has(key));
    EXPECT_TRUE(file.Get(key).ok()) << key;
  }
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : file.tensors()) {
    EXPECT_EQ(file.Find(t.name), &t);
    EXPECT_EQ(t.offset % file.alignment(), 0u);
    ASSERT_GE(t.dims.size(), 1u);
    ASSERT_LE(t.dims.size(), 4u);
    uint64_t n = 1;
    for (uint64_t d : t.dims) n *= d;
    EXPECT_EQ(t.num_bytes, n / GgmlBlockSize(t.type) * GgmlBlockBytes(t.type));
    EXPECT_EQ(file.Data(t).size(), t.num_bytes);
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    EXPECT_LE(by_offset[i - 1]->offset + by_offset[i - 1]->num_bytes, by_offset[i]->offset);
  }
}

TEST(Gguf, HeaderBitFlipsGiveAnErrorOrAConsistentFile) {
  const TestFile f = SampleFile();
  const Bytes image = f.Encode();
  const uint64_t header_bytes = f.DataOffset();
  size_t num_ok = 0;
  for (size_t i = 0; i < header_bytes; ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      Bytes flipped = image;
      flipped[i] ^= static_cast<std::byte>(1 << bit);
      auto file = GgufFile::FromBytes(std::move(flipped), kSource);
      if (!file.ok()) continue;
      ++num_ok;
      ExpectConsistent(*file);
    }
  }
  // Flips inside names and values stay valid; flips in lengths, counts,
  // types and offsets do not.
  EXPECT_GT(num_ok, 0u);
  EXPECT_LT(num_ok, 8 * header_bytes);
}

// --- Weight types: which ggml types folio computes with, and Q8_0 read
// from a file through ops' one decoder. ---

TEST(Gguf, MapsSeventeenGgmlTypesToWeightTypesAndNoOthers) {
  const std::pair<GgmlType, ops::WeightType> kMapped[] = {
      {GgmlType::kF64, ops::WeightType::kF64},       {GgmlType::kF32, ops::WeightType::kF32},
      {GgmlType::kF16, ops::WeightType::kF16},       {GgmlType::kBF16, ops::WeightType::kBF16},
      {GgmlType::kQ8_0, ops::WeightType::kQ8_0},     {GgmlType::kQ4_0, ops::WeightType::kQ4_0},
      {GgmlType::kQ4_1, ops::WeightType::kQ4_1},     {GgmlType::kQ5_0, ops::WeightType::kQ5_0},
      {GgmlType::kQ5_1, ops::WeightType::kQ5_1},     {GgmlType::kQ4_K, ops::WeightType::kQ4_K},
      {GgmlType::kQ5_K, ops::WeightType::kQ5_K},     {GgmlType::kQ6_K, ops::WeightType::kQ6_K},
      {GgmlType::kQ2_K, ops::WeightType::kQ2_K},     {GgmlType::kQ3_K, ops::WeightType::kQ3_K},
      {GgmlType::kIQ4_NL, ops::WeightType::kIQ4_NL}, {GgmlType::kIQ4_XS, ops::WeightType::kIQ4_XS},
      {GgmlType::kMXFP4, ops::WeightType::kMXFP4}};
  for (const TypeRow& row : kTypeRows) {
    SCOPED_TRACE(row.name);
    const std::optional<ops::WeightType> type = WeightTypeOf(row.type);
    std::optional<ops::WeightType> want;
    for (const auto& [ggml, weight] : kMapped) {
      if (ggml == row.type) want = weight;
    }
    EXPECT_EQ(type, want);
    if (type) {
      EXPECT_EQ(ops::TraitsOf(*type).block_size, row.block_size);
      EXPECT_EQ(ops::TraitsOf(*type).block_bytes, row.block_bytes);
    }
  }
  EXPECT_EQ(WeightTypeOf(static_cast<GgmlType>(4)), std::nullopt);
  for (const auto& [ggml, weight] : kMapped) EXPECT_EQ(GgmlTypeOf(weight), ggml);  // the inverse
  EXPECT_EQ(std::size(kMapped), ops::kNumWeightTypes);
  EXPECT_EQ(GgmlTypesFolioLoads(),
            "F64, F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, "
            "Q3_K, IQ4_NL, IQ4_XS and MXFP4");
}

TEST(Gguf, RefusesATensorOfAnotherGgmlTypeByName) {
  TensorInfo info{"blk.0.attn_q.weight", GgmlType::kIQ2_XXS, {256, 2}, 0, 132};
  const Result<ops::WeightType> type = WeightTypeOf(info);
  ASSERT_FALSE(type.has_value());
  EXPECT_EQ(type.error().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(type.error().message(),
            "tensor blk.0.attn_q.weight has ggml type IQ2_XXS (folio loads F64, "
            "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, "
            "IQ4_NL, IQ4_XS and MXFP4)");
  info.type = GgmlType::kQ8_0;
  EXPECT_EQ(WeightTypeOf(info).value(), ops::WeightType::kQ8_0);
}

// The legacy 4- and 5-bit blocks (32 elements) and the K-quants (256): a
// row that is not whole blocks, or bytes short of what the shape needs, is
// refused naming the tensor, from the same table that sizes every type.
TEST(Gguf, RefusesBlockQuantTensorsOfPartialBlocksOrShortData) {
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                        GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ2_K,
                        GgmlType::kQ3_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS, GgmlType::kMXFP4}) {
    const std::string name(GgmlTypeName(type));
    SCOPED_TRACE(name);
    const uint64_t block = GgmlBlockSize(type);
    const std::string partial = std::to_string(block * 3 / 2);
    EXPECT_TRUE(IsCorrupt(ParseTensors({{"t",
                                         static_cast<uint32_t>(type),
                                         {block * 3 / 2, 2},
                                         Filler(4 * GgmlBlockBytes(type), 1),
                                         std::nullopt}}),
                          "tensor 0 't': dims [" + partial + ", 2] of " + name +
                              ": dims[0] = " + partial + " is not a multiple of the block size " +
                              std::to_string(block)));
    TestTensor t = Tensor("t", type, {2 * block, 2});
    const uint64_t want = 4 * GgmlBlockBytes(type);
    ASSERT_EQ(t.data.size(), want);
    t.data.resize(want - 1);
    EXPECT_TRUE(IsCorrupt(ParseTensors({t}), "tensor 't': " + std::to_string(want) +
                                                 " bytes at offset 0 run past the data section"));
  }
}

// One block of each legacy type read from a file: element j takes the low
// nibble of qs[j] (j < 16) or the high nibble of qs[j - 16], and for the
// 5-bit types bit j of qh as its bit 4 (ggml's dequantize_row_q4_0 etc.).
TEST(Gguf, DequantizesLegacyQuantBlocksFromAFile) {
  Bytes qs;
  for (int j = 0; j < 16; ++j) qs.push_back(static_cast<std::byte>(j | (15 - j) << 4));
  const Bytes qh = U32(0xA5A5'0F0Fu);
  const Bytes d = Le<uint16_t>(F32ToF16Bits(0.5f)), m = Le<uint16_t>(F32ToF16Bits(-3.0f));
  const std::pair<GgmlType, Bytes> kBlocks[] = {{GgmlType::kQ4_0, Join({d, qs})},
                                                {GgmlType::kQ4_1, Join({d, m, qs})},
                                                {GgmlType::kQ5_0, Join({d, qh, qs})},
                                                {GgmlType::kQ5_1, Join({d, m, qh, qs})}};
  for (const auto& [type, block] : kBlocks) {
    SCOPED_TRACE(GgmlTypeName(type));
    TestTensor t = Tensor("q", type, {32});
    ASSERT_EQ(block.size(), t.data.size());
    t.data = block;
    auto file = ParseTensors({t});
    ASSERT_TRUE(file.has_value()) << file.error().ToString();
    const TensorInfo* info = file->Find("q");
    std::vector<float> out(32);
    ops::DequantizeRow(WeightTypeOf(*info).value(), file->Data(*info).data(), out);
    const bool five = type == GgmlType::kQ5_0 || type == GgmlType::kQ5_1;
    for (int j = 0; j < 32; ++j) {
      int q = j < 16 ? j : 15 - (j - 16);
      if (five) q |= static_cast<int>((0xA5A5'0F0Fu >> j) & 1) << 4;
      float want = 0;
      switch (type) {
        case GgmlType::kQ4_0:
          want = 0.5f * static_cast<float>(q - 8);
          break;
        case GgmlType::kQ5_0:
          want = 0.5f * static_cast<float>(q - 16);
          break;
        default:  // the _1 types: exact here (halves plus -3)
          want = 0.5f * static_cast<float>(q) - 3.0f;
      }
      EXPECT_EQ(out[static_cast<size_t>(j)], want) << "element " << j;
    }
  }
}

// A K-quant tensor of two super-blocks read from a file decodes, through
// the type WeightTypeOf maps, to what ops' decoder makes of the same bytes
// (whose values ops' own tests check against ggml's formulas).
TEST(Gguf, ReadsKQuantTensorsAsTheirWeightTypes) {
  const std::pair<GgmlType, ops::WeightType> kTypes[] = {
      {GgmlType::kQ4_K, ops::WeightType::kQ4_K},     {GgmlType::kQ5_K, ops::WeightType::kQ5_K},
      {GgmlType::kQ6_K, ops::WeightType::kQ6_K},     {GgmlType::kQ2_K, ops::WeightType::kQ2_K},
      {GgmlType::kQ3_K, ops::WeightType::kQ3_K},     {GgmlType::kIQ4_NL, ops::WeightType::kIQ4_NL},
      {GgmlType::kIQ4_XS, ops::WeightType::kIQ4_XS}, {GgmlType::kMXFP4, ops::WeightType::kMXFP4}};
  for (const auto& [ggml, weight] : kTypes) {
    SCOPED_TRACE(GgmlTypeName(ggml));
    const TestTensor t = Tensor("k", ggml, {256, 2}, 7);
    ASSERT_EQ(t.data.size(),
              512 / ops::TraitsOf(weight).block_size * ops::TraitsOf(weight).block_bytes);
    auto file = ParseTensors({Tensor("a", GgmlType::kF32, {3}), t});
    ASSERT_TRUE(file.has_value()) << file.error().ToString();
    const TensorInfo* info = file->Find("k");
    ASSERT_EQ(WeightTypeOf(*info).value(), weight);
    std::vector<float> got(512), want(512);
    ops::DequantizeRow(weight, file->Data(*info).data(), got);
    ops::DequantizeRow(weight, t.data.data(), want);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
  }
}

TEST(Gguf, DequantizesQ8_0ScalingEachBlockByItsF16Scale) {
  // Block 0: d = 0.5 (f16 0x3800), q = -16..15. Block 1: d = -2 (0xc000),
  // q = 127, -128, then zeros.
  Bytes blocks = Le<uint16_t>(0x3800);
  for (int j = 0; j < 32; ++j) blocks.push_back(static_cast<std::byte>(j - 16));
  blocks = Join({blocks, Le<uint16_t>(0xc000), U8(127), U8(0x80), Bytes(30)});
  ASSERT_EQ(blocks.size(), 2 * GgmlBlockBytes(GgmlType::kQ8_0));
  std::vector<float> out(64, -999.0f);
  ops::DequantizeRow(ops::WeightType::kQ8_0, blocks.data(), out);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(out[static_cast<size_t>(j)], 0.5f * static_cast<float>(j - 16));
  }
  EXPECT_EQ(out[32], -254.0f);
  EXPECT_EQ(out[33], 256.0f);
  for (size_t j = 34; j < 64; ++j) EXPECT_EQ(out[j], 0.0f);  // -0 == 0
}

TEST(Gguf, DequantizesAQ8_0TensorFromAFile) {
  TestTensor t = Tensor("q", GgmlType::kQ8_0, {32});
  t.data = Le<uint16_t>(F32ToF16Bits(0.125f));
  for (int j = 0; j < 32; ++j) t.data.push_back(static_cast<std::byte>(j));
  auto file = ParseTensors({t});
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  const TensorInfo* q = file->Find("q");
  std::vector<float> out(32);
  ops::DequantizeRow(WeightTypeOf(*q).value(), file->Data(*q).data(), out);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(out[static_cast<size_t>(j)], 0.125f * static_cast<float>(j));
  }
}

}  // namespace
}  // namespace folio::checkpoint
