#include "folio/checkpoint/gguf_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace folio::checkpoint {
namespace {

namespace fs = std::filesystem;

GgufValue Scalar(GgufValueType t, std::variant<uint64_t, int64_t, double, bool, std::string> v) {
  GgufValue out;
  out.type = t;
  std::visit([&out](auto&& x) { out.data = x; }, std::move(v));
  return out;
}
GgufValue Array(GgufValueType element, std::vector<GgufValue> items) {
  GgufValue out;
  out.type = GgufValueType::kArray;
  out.element_type = element;
  out.data = std::move(items);
  return out;
}

// Every value type, arrays of strings and of arrays, an empty array.
std::vector<GgufKeyValue> AllValueTypes() {
  using T = GgufValueType;
  return {
      {"general.architecture", GgufString("llama")},
      {"u8", Scalar(T::kU8, uint64_t{255})},
      {"i8", Scalar(T::kI8, int64_t{-128})},
      {"u16", Scalar(T::kU16, uint64_t{65535})},
      {"i16", Scalar(T::kI16, int64_t{-32768})},
      {"u32", GgufU32(4000000000u)},
      {"i32", Scalar(T::kI32, int64_t{-7})},
      {"f32", GgufF32(0.1f)},
      {"bool", Scalar(T::kBool, true)},
      {"u64", Scalar(T::kU64, uint64_t{1} << 63)},
      {"i64", Scalar(T::kI64, int64_t{-1} << 40)},
      {"f64", Scalar(T::kF64, 1e-300)},
      {"tokens", Array(T::kString, {GgufString("a"), GgufString(""), GgufString("\xff\x00z")})},
      {"nested",
       Array(T::kArray, {Array(T::kI32, {Scalar(T::kI32, int64_t{1}), Scalar(T::kI32, int64_t{2})}),
                         Array(T::kI32, {})})},
      {"empty", Array(T::kF32, {})},
  };
}

// Tensors of an element type, a legacy block and a K-quant, with dims
// that are not squares (so a swapped order would show).
std::vector<GgufTensorSpec> SomeTensors() {
  return {{"token_embd.weight", GgmlType::kF32, {3, 2}},
          {"blk.0.attn_q.weight", GgmlType::kQ8_0, {64, 3}},
          {"blk.0.ffn_down.weight", GgmlType::kQ4_K, {256, 1}},
          {"output_norm.weight", GgmlType::kF32, {5}}};
}

// Tensor i's bytes are i + 1, i + 2, ... (mod 256).
Status FillPattern(size_t index, std::span<std::byte> out) {
  for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<std::byte>((index + 1 + k) & 0xff);
  return Status::Ok();
}

std::vector<char> FileBytesOf(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class GgufWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("folio_gguf_writer_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Nothing but `expected` files in the folder (no stray .tmp).
  void ExpectFiles(size_t expected) {
    EXPECT_EQ(static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {})), expected);
  }
  fs::path dir_;
};

TEST_F(GgufWriterTest, WhatItWritesReadsBackValueForValueAndByteForByte) {
  const auto kvs = AllValueTypes();
  const auto tensors = SomeTensors();
  const fs::path path = dir_ / "a.gguf";
  ASSERT_TRUE(WriteGgufFile(path, kvs, tensors, FillPattern).ok());
  ExpectFiles(1);
  Result<GgufFile> f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.error().ToString();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  ASSERT_EQ(f->Keys().size(), kvs.size());
  for (size_t i = 0; i < kvs.size(); ++i) {
    EXPECT_EQ(f->Keys()[i], kvs[i].key);
    EXPECT_EQ(*f->Get(kvs[i].key), kvs[i].value) << kvs[i].key;
  }
  EXPECT_EQ(*f->GetFloat("f32"), static_cast<double>(0.1f));
  ASSERT_EQ(f->tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufFile::TensorInfo& t = f->tensors()[i];
    EXPECT_EQ(t.name, tensors[i].name);
    EXPECT_EQ(t.type, tensors[i].type);
    EXPECT_EQ(t.dims, tensors[i].dims);
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_EQ(t.num_bytes, GgufTensorBytes(tensors[i]));
    std::vector<std::byte> want(t.num_bytes);
    ASSERT_TRUE(FillPattern(i, want).ok());
    const auto got = f->Data(t);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end())) << t.name;
  }
  EXPECT_EQ(fs::file_size(path) % 32, 0u);  // each tensor padded, the last too

  // What the reader gives back, written again: the same file.
  Result<std::vector<GgufKeyValue>> read = ReadGgufMetadata(*f);
  ASSERT_TRUE(read.ok());
  std::vector<GgufTensorSpec> specs;
  for (const auto& t : f->tensors()) specs.push_back({t.name, t.type, t.dims});
  const fs::path again = dir_ / "b.gguf";
  ASSERT_TRUE(WriteGgufFile(again, *read, specs, [&](size_t i, std::span<std::byte> out) {
                const auto data = f->Data(f->tensors()[i]);
                std::copy(data.begin(), data.end(), out.begin());
                return Status::Ok();
              }).ok());
  EXPECT_EQ(FileBytesOf(path), FileBytesOf(again));
}

TEST_F(GgufWriterTest, TheHeaderIsLaidOutAsTheSpecSays) {
  // One u32 key and one 1-D f32 tensor, byte by byte.
  Result<std::vector<std::byte>> h =
      EncodeGgufHeader({{"k", GgufU32(7)}}, {{"t", GgmlType::kF32, {2}}});
  ASSERT_TRUE(h.ok());
  std::vector<uint8_t> want = {
      'G', 'G', 'U', 'F', 3, 0, 0, 0,       // magic, version 3
      1,   0,   0,   0,   0, 0, 0, 0,       // tensor_count
      1,   0,   0,   0,   0, 0, 0, 0,       // metadata_kv_count
      1,   0,   0,   0,   0, 0, 0, 0, 'k',  // key
      4,   0,   0,   0,   7, 0, 0, 0,       // u32 7
      1,   0,   0,   0,   0, 0, 0, 0, 't',  // name
      1,   0,   0,   0,                     // n_dims
      2,   0,   0,   0,   0, 0, 0, 0,       // dims[0]
      0,   0,   0,   0,                     // F32
      0,   0,   0,   0,   0, 0, 0, 0,       // offset
  };
  while (want.size() % 32 != 0) want.push_back(0);
  ASSERT_EQ(h->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(std::to_integer<uint8_t>((*h)[i]), want[i]) << i;
}

TEST_F(GgufWriterTest, GeneralAlignmentSetsTheAlignment) {
  auto kvs = AllValueTypes();
  SetGgufValue(kvs, kGgufAlignmentKey, GgufU32(64));
  const fs::path path = dir_ / "a.gguf";
  ASSERT_TRUE(WriteGgufFile(path, kvs, SomeTensors(), FillPattern).ok());
  Result<GgufFile> f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.error().ToString();
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  for (const auto& t : f->tensors()) EXPECT_EQ(t.offset % 64, 0u) << t.name;
  EXPECT_EQ(fs::file_size(path) % 64, 0u);
}

TEST_F(GgufWriterTest, SetGgufValueReplacesInPlaceOrAppends) {
  std::vector<GgufKeyValue> kvs = {{"a", GgufU32(1)}, {"b", GgufU32(2)}};
  SetGgufValue(kvs, "a", GgufString("x"));
  SetGgufValue(kvs, "c", GgufU32(3));
  ASSERT_EQ(kvs.size(), 3u);
  EXPECT_EQ(kvs[0].key, "a");
  EXPECT_EQ(kvs[0].value, GgufString("x"));
  EXPECT_EQ(kvs[2].key, "c");
}

// One refusal each: InvalidArgument naming the entry, and nothing written.
TEST_F(GgufWriterTest, WhatTheReaderWouldRefuseIsRefusedBeforeWriting) {
  using T = GgufValueType;
  struct Case {
    const char* what;
    std::vector<GgufKeyValue> kvs;
    std::vector<GgufTensorSpec> tensors;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"repeated key", {{"a", GgufU32(1)}, {"a", GgufU32(2)}}, {}, "repeats"},
      {"empty key", {{"", GgufU32(1)}}, {}, "empty"},
      {"u8 out of range", {{"a", Scalar(T::kU8, uint64_t{256})}}, {}, "does not fit u8"},
      {"i16 out of range", {{"a", Scalar(T::kI16, int64_t{40000})}}, {}, "does not fit i16"},
      {"wrong variant", {{"a", Scalar(T::kU32, std::string("x"))}}, {}, "uint64_t"},
      {"mixed array",
       {{"a", Array(T::kString, {GgufString("x"), GgufU32(1)})}},
       {},
       "element 1 has type u32"},
      {"deep array",
       {{"a",
         Array(T::kArray,
               {Array(T::kArray, {Array(T::kArray, {Array(T::kArray, {Array(T::kU8, {})})})})})}},
       {},
       "nest deeper"},
      {"bad alignment", {{"general.alignment", GgufU32(48)}}, {}, "power of two"},
      {"signed alignment",
       {{"general.alignment", Scalar(T::kI32, int64_t{-32})}},
       {},
       "power of two"},
      {"long name", {}, {{std::string(64, 'n'), GgmlType::kF32, {1}}}, "ggml's limit of 63"},
      {"empty name", {}, {{"", GgmlType::kF32, {1}}}, "empty"},
      {"repeated name", {}, {{"t", GgmlType::kF32, {1}}, {"t", GgmlType::kF32, {1}}}, "repeats"},
      {"no dims", {}, {{"t", GgmlType::kF32, {}}}, "0 dims"},
      {"five dims", {}, {{"t", GgmlType::kF32, {1, 1, 1, 1, 1}}}, "5 dims"},
      {"zero dim", {}, {{"t", GgmlType::kF32, {4, 0}}}, "dims[1] = 0"},
      {"partial block", {}, {{"t", GgmlType::kQ8_0, {48, 2}}}, "not whole Q8_0 blocks of 32"},
      {"unknown type", {}, {{"t", static_cast<GgmlType>(4), {32}}}, "unknown ggml type 4"},
      {"overflow", {}, {{"t", GgmlType::kF32, {uint64_t{1} << 40, uint64_t{1} << 40}}}, "overflow"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Status s = WriteGgufFile(dir_ / "x.gguf", c.kvs, c.tensors, FillPattern);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
    ExpectFiles(0);
  }
}

// A failure midway (a tensor that cannot be produced, a check that fails)
// leaves the previous file whole and no temporary behind.
TEST_F(GgufWriterTest, AFailureLeavesTheOldFileAndNoTemporary) {
  const fs::path path = dir_ / "a.gguf";
  ASSERT_TRUE(WriteGgufFile(path, AllValueTypes(), SomeTensors(), FillPattern).ok());
  const auto before = FileBytesOf(path);
  const Status fill_error =
      WriteGgufFile(path, {}, SomeTensors(), [](size_t i, std::span<std::byte>) {
        return i == 2 ? Status::InvalidArgument("element 3 is nan") : Status::Ok();
      });
  EXPECT_EQ(fill_error.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fill_error.message().find("tensor blk.0.ffn_down.weight: element 3 is nan"),
            std::string::npos)
      << fill_error.message();
  EXPECT_EQ(FileBytesOf(path), before);
  ExpectFiles(1);

  const Status check_error =
      WriteGgufFile(path, {}, SomeTensors(), FillPattern, [](const fs::path& tmp) {
        EXPECT_TRUE(fs::exists(tmp));
        EXPECT_EQ(tmp.filename(), "a.gguf.tmp");
        return Status::Corruption("does not load");
      });
  EXPECT_EQ(check_error.code(), StatusCode::kCorruption);
  EXPECT_EQ(FileBytesOf(path), before);
  ExpectFiles(1);
}

TEST_F(GgufWriterTest, AnUnwritablePathIsAnIoError) {
  const Status s = WriteGgufFile(dir_ / "no" / "such" / "dir.gguf", {}, {}, FillPattern);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("dir.gguf.tmp"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace folio::checkpoint
