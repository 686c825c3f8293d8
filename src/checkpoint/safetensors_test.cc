#include "folio/checkpoint/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

namespace folio::checkpoint {
namespace {

constexpr char kSource[] = "mem.safetensors";

std::vector<std::byte> Bytes(std::string_view s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

template <typename T>
std::vector<std::byte> AsBytes(std::initializer_list<T> values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

// A file image: the little-endian length of `header`, `header`, then
// `num_data_bytes` zero bytes.
std::vector<std::byte> Image(std::string_view header, size_t num_data_bytes = 0,
                             uint64_t header_length = UINT64_MAX) {
  if (header_length == UINT64_MAX) header_length = header.size();
  std::vector<std::byte> out(8);
  for (int i = 0; i < 8; ++i) {
    out[static_cast<size_t>(i)] = static_cast<std::byte>((header_length >> (8 * i)) & 0xFF);
  }
  const std::vector<std::byte> text = Bytes(header);
  out.insert(out.end(), text.begin(), text.end());
  out.resize(out.size() + num_data_bytes);
  return out;
}

Result<SafetensorsFile> Parse(std::string_view header, size_t num_data_bytes = 0) {
  return SafetensorsFile::FromBytes(Image(header, num_data_bytes), kSource);
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
  return ::testing::AssertionSuccess();
}
::testing::AssertionResult IsCorrupt(const Result<SafetensorsFile>& r, std::string_view needle) {
  auto result = IsError(r, StatusCode::kCorruption, needle);
  if (result && r.error().message().find(kSource) == std::string::npos) {
    return ::testing::AssertionFailure() << "source not named";
  }
  return result;
}

std::filesystem::path TempPath(std::string_view name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::filesystem::path(::testing::TempDir()) /
         (std::string(info->name()) + "." + std::to_string(::getpid()) + "." + std::string(name));
}

std::string AsString(std::span<const std::byte> bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// Several dtypes and shapes, a rank-0 scalar and a zero-sized tensor.
struct Sample {
  std::vector<std::byte> f64 = AsBytes<double>({1.5, -2.0});
  std::vector<std::byte> f32 = AsBytes<float>({0, 1, 2, 3, 4, 5});
  std::vector<std::byte> bf16 = AsBytes<uint16_t>({0x3f80, 0xc000, 0x7fc0});
  std::vector<std::byte> f16 = AsBytes<uint16_t>({0x3c00, 0xbc00});
  std::vector<std::byte> i8 = AsBytes<int8_t>({-7});
  std::vector<TensorToWrite> tensors = {
      {"model.f64", DType::kF64, {2}, f64}, {"model.f32", DType::kF32, {2, 3}, f32},
      {"bf16", DType::kBF16, {3}, bf16},    {"empty", DType::kF32, {0, 3}, {}},
      {"f16", DType::kF16, {1, 1, 2}, f16}, {"scalar", DType::kI8, {}, i8},
  };
  std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "ünïcødé"}};
};

void ExpectMatches(const SafetensorsFile& file, const Sample& sample) {
  ASSERT_EQ(file.tensors().size(), sample.tensors.size());
  for (const TensorToWrite& want : sample.tensors) {
    const TensorInfo* got = file.Find(want.name);
    ASSERT_NE(got, nullptr) << want.name;
    EXPECT_EQ(got->dtype, want.dtype) << want.name;
    EXPECT_EQ(got->shape, want.shape) << want.name;
    EXPECT_EQ(AsString(file.Data(*got)), AsString(want.data)) << want.name;
  }
  EXPECT_EQ(file.metadata(), sample.metadata);
}

TEST(Safetensors, RoundTripsSeveralDTypesShapesAndMetadata) {
  const Sample sample;
  auto bytes = EncodeSafetensors(sample.tensors, sample.metadata);
  ASSERT_TRUE(bytes.has_value()) << bytes.error().ToString();
  auto file = SafetensorsFile::FromBytes(*std::move(bytes), kSource);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  ExpectMatches(*file, sample);
  EXPECT_EQ(file->source(), kSource);
}

TEST(Safetensors, EncodesTheSpecifiedLayoutByteForByte) {
  const std::vector<std::byte> a = AsBytes<float>({1.0f, 2.0f});
  const std::vector<std::byte> b = AsBytes<int8_t>({5});
  const std::vector<TensorToWrite> tensors = {{"b", DType::kI8, {}, b}, {"a", DType::kF32, {2}, a}};
  auto bytes = EncodeSafetensors(tensors, {{"k", "v"}});
  ASSERT_TRUE(bytes.has_value()) << bytes.error().ToString();
  // 136 = 0x88 header bytes: 130 of compact JSON (keys sorted), 6 spaces.
  const std::string want = std::string("\x88\0\0\0\0\0\0\0", 8) +
                           R"({"__metadata__":{"k":"v"},"a":{"data_offsets":[1,9],"dtype":"F32",)"
                           R"("shape":[2]},"b":{"data_offsets":[0,1],"dtype":"I8","shape":[]}})"
                           "      " +
                           std::string("\x05\0\0\x80\x3f\0\0\0\x40", 9);
  EXPECT_EQ(AsString(*bytes), want);
}

TEST(Safetensors, ReadsHandWrittenFileWithAnyKeyOrderAndPadding) {
  const std::string header = R"({"b": {"dtype": "I8", "shape": [], "data_offsets": [8, 9]},)"
                             R"( "__metadata__": {"k": "v"},)"
                             R"( "a": {"shape": [2], "data_offsets": [0, 8], "dtype": "F32"}}   )";
  std::vector<std::byte> image = Image(header);
  const std::vector<std::byte> data =
      AsBytes<uint8_t>({0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x05});
  image.insert(image.end(), data.begin(), data.end());
  auto file = SafetensorsFile::FromBytes(image, kSource);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  ASSERT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->tensors()[0].name, "a");  // sorted by data offset
  EXPECT_EQ(file->tensors()[1].name, "b");
  const TensorInfo* a = file->Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(LoadElement<float>(a->dtype, file->Data(*a).data(), 1), 2.0f);
  EXPECT_EQ(file->Find("b")->shape, std::vector<uint64_t>{});
  EXPECT_EQ(file->metadata().at("k"), "v");
}

TEST(Safetensors, FindReturnsNullForAnAbsentName) {
  auto file = Parse("{}");
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ(file->Find("missing"), nullptr);
  EXPECT_TRUE(file->tensors().empty());
  EXPECT_TRUE(file->metadata().empty());
}

TEST(Safetensors, ZeroSizedTensorsMayShareAnOffsetWithANeighbour) {
  auto file = Parse(R"({"z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                    R"("x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                    8);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  EXPECT_EQ(file->tensors()[1].name, "z");
}

TEST(Safetensors, MovedFileKeepsItsData) {
  const Sample sample;
  auto bytes = EncodeSafetensors(sample.tensors, sample.metadata);
  ASSERT_TRUE(bytes.has_value());
  auto file = SafetensorsFile::FromBytes(*std::move(bytes), kSource);
  ASSERT_TRUE(file.has_value());
  SafetensorsFile moved = *std::move(file);
  SafetensorsFile assigned = *SafetensorsFile::FromBytes(Image("{}"), "x");
  assigned = std::move(moved);
  ExpectMatches(assigned, sample);
}

TEST(Safetensors, OpenReadsAFileWrittenByWriteSafetensors) {
  const Sample sample;
  const auto path = TempPath("model.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, sample.tensors, sample.metadata).ok());
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  {
    auto file = SafetensorsFile::Open(path);
    ASSERT_TRUE(file.has_value()) << file.error().ToString();
    ExpectMatches(*file, sample);
    EXPECT_EQ(file->source(), path.string());
    SafetensorsFile moved = *std::move(file);  // the mapping moves along
    ExpectMatches(moved, sample);
  }
  std::filesystem::remove(path);
}

TEST(Safetensors, WriteSafetensorsReplacesAnExistingFile) {
  const Sample sample;
  const auto path = TempPath("model.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {}, {{"old", "1"}}).ok());
  ASSERT_TRUE(WriteSafetensors(path, sample.tensors, sample.metadata).ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  ExpectMatches(*file, sample);
  std::filesystem::remove(path);
}

TEST(Safetensors, WriteSafetensorsLeavesNothingBehindOnBadInput) {
  const std::vector<std::byte> three(3);
  const std::vector<TensorToWrite> bad = {{"t", DType::kF32, {1}, three}};
  const auto path = TempPath("model.safetensors");
  EXPECT_EQ(WriteSafetensors(path, bad, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
}

TEST(Safetensors, WriteSafetensorsReportsAMissingDirectory) {
  const Status s = WriteSafetensors(TempPath("no_such_dir") / "model.safetensors", {}, {});
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("no_such_dir"), std::string::npos);
}

TEST(Safetensors, OpenReportsAMissingFileAsNotFound) {
  EXPECT_TRUE(IsError(SafetensorsFile::Open(TempPath("absent")), StatusCode::kNotFound, "absent"));
}

TEST(Safetensors, OpenRejectsADirectory) {
  EXPECT_TRUE(
      IsError(SafetensorsFile::Open(::testing::TempDir()), StatusCode::kIoError, "regular file"));
}

TEST(Safetensors, OpenRejectsAnEmptyFile) {
  const auto path = TempPath("empty");
  std::ofstream(path).close();
  EXPECT_TRUE(IsError(SafetensorsFile::Open(path), StatusCode::kCorruption, "file is 0 bytes"));
  std::filesystem::remove(path);
}

// --- One test per reader error. ---

TEST(Safetensors, RejectsAFileShorterThanTheLengthPrefix) {
  EXPECT_TRUE(IsCorrupt(SafetensorsFile::FromBytes(Bytes("{}   "), kSource), "file is 5 bytes"));
}

TEST(Safetensors, RejectsAZeroHeaderLength) {
  EXPECT_TRUE(
      IsCorrupt(SafetensorsFile::FromBytes(Image("{}", 0, 0), kSource), "header length is 0"));
}

TEST(Safetensors, RejectsAHeaderLengthAboveTheLimit) {
  const auto r =
      SafetensorsFile::FromBytes(Image("{}", 0, kMaxSafetensorsHeaderBytes + 1), kSource);
  EXPECT_TRUE(IsCorrupt(r,
                        "header length 104857601 exceeds the limit of "
                        "104857600 bytes"));
}

TEST(Safetensors, RejectsAHeaderLengthBeyondTheFile) {
  EXPECT_TRUE(IsCorrupt(SafetensorsFile::FromBytes(Image("{}", 0, 3), kSource),
                        "header length 3 exceeds the 2 bytes"));
}

TEST(Safetensors, RejectsAHeaderNotStartingWithABrace) {
  EXPECT_TRUE(IsCorrupt(Parse(" {}"), "starting with '{'"));
}

TEST(Safetensors, RejectsAHeaderThatIsNotAnObject) {
  EXPECT_TRUE(IsCorrupt(Parse("[{}]"), "starting with '{'"));
}

TEST(Safetensors, RejectsInvalidJson) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"a":})"), "not valid JSON"));
}

TEST(Safetensors, RejectsDeeplyNestedJsonWithoutBuildingIt) {
  const size_t depth = 1'000'000;
  const std::string header = R"({"t":)" + std::string(depth, '[') + std::string(depth, ']') + "}";
  EXPECT_TRUE(IsCorrupt(Parse(header), "nests deeper than 3 levels"));
}

TEST(Safetensors, RejectsTrailingGarbageAfterTheJson) {
  EXPECT_TRUE(IsCorrupt(Parse("{}  x"), "not valid JSON"));
}

TEST(Safetensors, RejectsInvalidUtf8) {
  EXPECT_TRUE(IsCorrupt(Parse("{\"\xc3\x28\":{}}"), "not valid UTF-8 at byte 2"));
}

TEST(Safetensors, RejectsATensorEntryThatIsNotAnObject) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":[1]})"), "tensor 't': entry must be a JSON object, got [1]"));
}

TEST(Safetensors, RejectsAMissingDType) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"shape":[0],"data_offsets":[0,0]}})"),
                        "tensor 't': missing field 'dtype'"));
}

TEST(Safetensors, RejectsAMissingShape) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"dtype":"F32","data_offsets":[0,0]}})"),
                        "tensor 't': missing field 'shape'"));
}

TEST(Safetensors, RejectsMissingDataOffsets) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"dtype":"F32","shape":[0]}})"),
                        "tensor 't': missing field 'data_offsets'"));
}

TEST(Safetensors, RejectsAnUnknownField) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[0,0],"x":1}})"),
                        "tensor 't': unknown field 'x'"));
}

TEST(Safetensors, RejectsANonStringDType) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"dtype":4,"shape":[0],"data_offsets":[0,0]}})"),
                        "'dtype' must be a string, got 4"));
}

TEST(Safetensors, RejectsAnUnknownDTypeAsCorruption) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"dtype":"F33","shape":[0],"data_offsets":[0,0]}})"),
                        "tensor 't': unknown dtype 'F33'"));
}

TEST(Safetensors, ReportsASubByteDTypeAsUnimplemented) {
  for (const char* dtype : {"F4", "F6_E2M3"}) {
    const std::string header =
        std::string(R"({"t":{"dtype":")") + dtype + R"(","shape":[2],"data_offsets":[0,1]}})";
    EXPECT_TRUE(IsError(Parse(header, 1), StatusCode::kUnimplemented,
                        std::string("tensor 't': dtype '") + dtype + "' is not supported"));
  }
}

// A whole-byte dtype folio does not read (BERT's I64 position ids) is
// parsed and sized, and named by TensorInfo::unread_dtype for a loader
// to refuse if it needs the tensor.
TEST(Safetensors, KeepsAWholeByteDTypeItDoesNotRead) {
  for (const auto& [dtype, size] : {std::pair{"I32", 4}, std::pair{"U8", 1}, std::pair{"BOOL", 1},
                                    std::pair{"F8_E4M3", 1}, std::pair{"I64", 8}}) {
    const std::string header = std::string(R"({"t":{"dtype":")") + dtype +
                               R"(","shape":[2],"data_offsets":[0,)" + std::to_string(2 * size) +
                               "]}}";
    auto file = Parse(header, 2 * size);
    ASSERT_TRUE(file.ok()) << dtype << ": " << file.status().ToString();
    ASSERT_EQ(file->tensors().size(), 1u);
    EXPECT_EQ(file->tensors()[0].unread_dtype, dtype);
    const std::string wrong = std::string(R"({"t":{"dtype":")") + dtype +
                              R"(","shape":[2],"data_offsets":[0,)" + std::to_string(2 * size + 1) +
                              "]}}";
    EXPECT_TRUE(IsCorrupt(Parse(wrong, 2 * size + 1), "needs"));
  }
}

TEST(Safetensors, RejectsAShapeThatIsNotAnArray) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"dtype":"F32","shape":3,"data_offsets":[0,12]}})", 12),
                        "'shape' must be an array, got 3"));
}

TEST(Safetensors, RejectsANegativeShapeEntry) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,0]}})"),
                        "shape[1] = -1 must be an integer"));
}

TEST(Safetensors, RejectsAFractionalShapeEntry) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,0]}})"),
                        "shape[0] = 1.5 must be an integer"));
}

TEST(Safetensors, RejectsAShapeEntryOf2To64) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"dtype":"I8","shape":[18446744073709551616],)"
                              R"("data_offsets":[0,0]}})"),
                        "shape[0] = 1.8446744073709552e+19 must be an integer"));
}

TEST(Safetensors, ReportsARankAboveTheLimitAsUnimplemented) {
  EXPECT_TRUE(IsError(Parse(R"({"t":{"dtype":"I8","shape":[1,1,1,1,1,1,1,1,1],)"
                            R"("data_offsets":[0,1]}})",
                            1),
                      StatusCode::kUnimplemented, "rank 9 exceeds the limit of 8"));
}

TEST(Safetensors, RejectsDataOffsetsOfTheWrongArity) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[0]}})"),
                        "'data_offsets' must be two integers in [0, 2^64), got [0]"));
}

TEST(Safetensors, RejectsNegativeDataOffsets) {
  EXPECT_TRUE(
      IsCorrupt(Parse(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[-4,0]}})"), "got [-4,0]"));
}

TEST(Safetensors, RejectsDataOffsetsWithBeginAfterEnd) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8),
                        "data_offsets [8, 4] has begin > end"));
}

TEST(Safetensors, RejectsDataOffsetsBeyondTheDataSection) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 7),
                        "data_offsets [0, 8] ends beyond the data section of 7 bytes"));
}

TEST(Safetensors, RejectsAShapeWhoseByteSizeOverflows) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"dtype":"F32","shape":[4611686018427387904,1],)"
                              R"("data_offsets":[0,0]}})"),
                        "shape [4611686018427387904,1] of F32 overflows"));
}

TEST(Safetensors, RejectsAByteSizeThatDisagreesWithTheShape) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 20),
                        "shape [2,3] of F32 needs 24 bytes but data_offsets [0, 20] spans 20"));
}

TEST(Safetensors, RejectsDuplicateTensorNames) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"dtype":"I8","shape":[1],"data_offsets":[0,1]},)"
                              R"("t":{"dtype":"I8","shape":[1],"data_offsets":[1,2]}})",
                              2),
                        "repeats the key 't'"));
}

TEST(Safetensors, RejectsADuplicateFieldWithinAnEntry) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"t":{"dtype":"I8","dtype":"F32","shape":[1],)"
                              R"("data_offsets":[0,1]}})",
                              1),
                        "repeats the key 'dtype'"));
}

TEST(Safetensors, RejectsOverlappingTensors) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                              12),
                        "tensors 'a' [0, 8) and 'b' [4, 12) overlap"));
}

TEST(Safetensors, RejectsAHoleBetweenTensors) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                              R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                              12),
                        "data bytes [4, 8) belong to no tensor"));
}

TEST(Safetensors, RejectsAHoleBeforeTheFirstTensor) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
                        "data bytes [0, 4) belong to no tensor"));
}

TEST(Safetensors, RejectsDataAfterTheLastTensor) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 5),
                        "data bytes [4, 5) at the end of the data section belong to no tensor"));
}

TEST(Safetensors, RejectsMetadataThatIsNotAnObject) {
  EXPECT_TRUE(
      IsCorrupt(Parse(R"({"__metadata__":["k","v"]})"), "'__metadata__' must be an object"));
}

TEST(Safetensors, RejectsANonStringMetadataValue) {
  EXPECT_TRUE(
      IsCorrupt(Parse(R"({"__metadata__":{"k":1}})"), "__metadata__['k'] must be a string, got 1"));
}

TEST(Safetensors, RejectsAnEmptyTensorName) {
  EXPECT_TRUE(IsCorrupt(Parse(R"({"":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})"),
                        "tensor name is empty"));
}

TEST(Safetensors, ClipsAHugeValueInTheMessage) {
  const std::string header =
      R"({"t":{"dtype":")" + std::string(10000, 'X') + R"(","shape":[0],"data_offsets":[0,0]}})";
  const auto r = Parse(header);
  EXPECT_TRUE(IsCorrupt(r, "unknown dtype"));
  EXPECT_LT(r.error().message().size(), 300u);
}

// --- Writer errors. ---

Result<std::vector<std::byte>> EncodeOne(std::string name, DType dtype, std::vector<uint64_t> shape,
                                         size_t num_bytes) {
  static const std::vector<std::byte> kZeros(64);
  const TensorToWrite t{std::move(name), dtype, std::move(shape),
                        std::span(kZeros).first(num_bytes)};
  return EncodeSafetensors(std::span(&t, 1), {});
}

TEST(Safetensors, EncodeRejectsAnEmptyName) {
  EXPECT_TRUE(IsError(EncodeOne("", DType::kI8, {}, 1), StatusCode::kInvalidArgument,
                      "name must be non-empty"));
}

TEST(Safetensors, EncodeRejectsTheReservedMetadataName) {
  EXPECT_TRUE(IsError(EncodeOne("__metadata__", DType::kI8, {}, 1), StatusCode::kInvalidArgument,
                      "other than '__metadata__'"));
}

TEST(Safetensors, EncodeRejectsAnInvalidUtf8Name) {
  EXPECT_TRUE(
      IsError(EncodeOne("bad\xff", DType::kI8, {}, 1), StatusCode::kInvalidArgument, "UTF-8"));
}

TEST(Safetensors, EncodeRejectsInvalidUtf8Metadata) {
  EXPECT_TRUE(IsError(EncodeSafetensors({}, {{"k", "\xc0\x80"}}), StatusCode::kInvalidArgument,
                      "metadata entry 'k'"));
}

TEST(Safetensors, EncodeRejectsADuplicateName) {
  const std::vector<std::byte> one(1);
  const std::vector<TensorToWrite> tensors = {{"t", DType::kI8, {1}, one},
                                              {"t", DType::kI8, {1}, one}};
  EXPECT_TRUE(IsError(EncodeSafetensors(tensors, {}), StatusCode::kInvalidArgument,
                      "tensor 1 't': name is used twice"));
}

TEST(Safetensors, EncodeRejectsADataSizeMismatch) {
  EXPECT_TRUE(IsError(EncodeOne("t", DType::kBF16, {2, 3}, 10), StatusCode::kInvalidArgument,
                      "shape [2,3] of bf16 needs 12 bytes, got 10"));
}

TEST(Safetensors, EncodeRejectsAnOverflowingShape) {
  EXPECT_TRUE(IsError(EncodeOne("t", DType::kF64, {uint64_t{1} << 61, 1}, 0),
                      StatusCode::kInvalidArgument, "overflows"));
}

TEST(Safetensors, EncodeRejectsARankAboveTheLimit) {
  EXPECT_TRUE(IsError(EncodeOne("t", DType::kI8, std::vector<uint64_t>(9, 1), 1),
                      StatusCode::kInvalidArgument, "rank 9"));
}

TEST(Safetensors, EncodePadsTheHeaderSoTheDataIs8Aligned) {
  for (size_t len = 1; len <= 16; ++len) {
    auto bytes = EncodeOne(std::string(len, 'n'), DType::kI8, {1}, 1);
    ASSERT_TRUE(bytes.has_value());
    uint64_t header_length = 0;
    std::memcpy(&header_length, bytes->data(), 8);  // little-endian host
    EXPECT_EQ(header_length % 8, 0u) << len;
    EXPECT_EQ(bytes->size(), 8 + header_length + 1);
    const std::string header = AsString(std::span(*bytes).subspan(8, header_length));
    const size_t json_end = header.find_last_not_of(' ') + 1;
    EXPECT_EQ(header[json_end - 1], '}') << len;
    EXPECT_LT(header.size() - json_end, 8u) << len;  // spaces only to pad
  }
}

// --- Sweeps: no prefix or bit flip may crash; run these under ASan. ---

std::vector<std::byte> SampleImage() {
  const Sample sample;
  return *EncodeSafetensors(sample.tensors, sample.metadata);
}

TEST(Safetensors, EveryTruncatedPrefixIsAnError) {
  const std::vector<std::byte> image = SampleImage();
  for (size_t len = 0; len < image.size(); ++len) {
    std::vector<std::byte> prefix(image.begin(), image.begin() + static_cast<ptrdiff_t>(len));
    EXPECT_FALSE(SafetensorsFile::FromBytes(std::move(prefix), kSource).ok()) << len;
  }
}

TEST(Safetensors, HeaderBitFlipsGiveAnErrorOrAConsistentFile) {
  const std::vector<std::byte> image = SampleImage();
  uint64_t header_length = 0;
  std::memcpy(&header_length, image.data(), 8);
  size_t num_ok = 0;
  for (size_t i = 0; i < 8 + header_length; ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<std::byte> flipped = image;
      flipped[i] ^= static_cast<std::byte>(1 << bit);
      auto file = SafetensorsFile::FromBytes(std::move(flipped), kSource);
      if (!file.ok()) continue;
      ++num_ok;
      uint64_t covered = 0;
      for (const TensorInfo& t : file->tensors()) {
        EXPECT_EQ(t.data_begin, covered);
        EXPECT_EQ(file->Data(t).size(), t.data_end - t.data_begin);
        EXPECT_EQ(file->Find(t.name), &t);
        covered = t.data_end;
      }
    }
  }
  // Flips inside names and metadata values stay valid; most others do not.
  EXPECT_GT(num_ok, 0u);
  EXPECT_LT(num_ok, 8 * (8 + header_length) / 2);
}

}  // namespace
}  // namespace folio::checkpoint
