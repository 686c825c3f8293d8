#include "folio/format/kv_snapshot.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>

#include "folio/core/splitmix64.h"
#include "folio/format/json_fields.h"

namespace folio::format {
namespace {

// Two layers, three sequences; sequences 0 and 1 share page 0 (a prefix).
KvSnapshot Sample(uint64_t seed = 1) {
  KvSnapshot s;
  s.model_id = "folio-test-model";
  s.kv_dtype = ElementType::kBF16;
  s.page_size = 4;
  s.num_layers = 2;
  s.num_kv_heads = 2;
  s.head_dim = 3;
  s.num_pages = 4;
  s.sequences = {{{0, 1}, 6, {{"prompt", {1, 2, 3}}}},
                 {{0, 2}, 8, {{"prompt", {4}}}},
                 {{3}, 1, nlohmann::json::object()}};
  SplitMix64 rng(seed);
  for (uint64_t l = 0; l < s.num_layers; ++l) {
    for (auto* pools : {&s.keys, &s.values}) {
      std::vector<std::byte> pool(s.num_pages * s.page_bytes());
      for (std::byte& b : pool) b = static_cast<std::byte>(rng.NextU64());
      pools->push_back(std::move(pool));
    }
  }
  return s;
}

bool Same(const KvSnapshot& a, const KvSnapshot& b) {
  if (a.sequences.size() != b.sequences.size()) return false;
  for (size_t i = 0; i < a.sequences.size(); ++i) {
    if (a.sequences[i].block_table != b.sequences[i].block_table ||
        a.sequences[i].num_tokens != b.sequences[i].num_tokens ||
        a.sequences[i].request != b.sequences[i].request) {
      return false;
    }
  }
  return a.model_id == b.model_id && a.kv_dtype == b.kv_dtype && a.page_size == b.page_size &&
         a.num_layers == b.num_layers && a.num_kv_heads == b.num_kv_heads &&
         a.head_dim == b.head_dim && a.num_pages == b.num_pages && a.keys == b.keys &&
         a.values == b.values;
}

// Rewrites the trailing CRC so a mutation reaches the parser.
void FixCrc(std::vector<std::byte>& bytes) {
  const uLong crc =
      crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size() - 4));
  for (int i = 0; i < 4; ++i) {
    bytes[bytes.size() - 4 + static_cast<size_t>(i)] =
        static_cast<std::byte>((crc >> (8 * i)) & 0xFF);
  }
}

TEST(KvSnapshot, RoundTripsExactly) {
  const KvSnapshot s = Sample();
  ASSERT_TRUE(s.Validate().ok()) << s.Validate().ToString();
  const std::vector<std::byte> bytes = EncodeSnapshot(s);
  EXPECT_EQ(std::memcmp(bytes.data(), "FOLIOKVS", 8), 0);
  auto back = DecodeSnapshot(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(Same(*back, s));
  EXPECT_EQ(EncodeSnapshot(*back), bytes);
  const nlohmann::json summary = SnapshotSummary(s, bytes.size());
  EXPECT_EQ(summary["shared_page_references"], 1);
  EXPECT_EQ(summary["kv_bytes"], 2 * 2 * 4 * s.page_bytes());
}

TEST(KvSnapshot, EmptyBatchIsValid) {
  KvSnapshot s = Sample();
  s.sequences.clear();
  s.num_pages = 0;
  for (auto& p : s.keys) p.clear();
  for (auto& p : s.values) p.clear();
  auto back = DecodeSnapshot(EncodeSnapshot(s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(Same(*back, s));
}

TEST(KvSnapshot, ValidateNamesTheProblem) {
  auto expect = [](KvSnapshot s, const std::string& needle) {
    const Status st = s.Validate();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << needle;
    EXPECT_NE(st.ToString().find(needle), std::string::npos) << st.ToString();
  };
  KvSnapshot s = Sample();
  s.sequences[2].num_tokens = 5;
  expect(s, "do not fill exactly");
  s = Sample();
  s.sequences[1].block_table = {0, 4};
  expect(s, "names page 4");
  s = Sample();
  s.sequences.pop_back();  // page 3 now unused
  expect(s, "page 3 is used by no sequence");
  s = Sample();
  s.kv_dtype = ElementType::kI8;
  expect(s, "not f32, bf16 or f16");
  s = Sample();
  s.values[1].pop_back();
  expect(s, "layer 1 pools");
}

TEST(KvSnapshot, DetectsCorruptionAndTruncation) {
  const std::vector<std::byte> bytes = EncodeSnapshot(Sample());
  for (size_t i = 0; i < bytes.size(); i += 7) {
    std::vector<std::byte> bad = bytes;
    bad[i] ^= std::byte{0x10};
    const auto r = DecodeSnapshot(bad);
    EXPECT_FALSE(r.ok()) << "flip at " << i;
  }
  for (size_t n : {size_t{0}, size_t{10}, size_t{27}, bytes.size() / 2, bytes.size() - 1}) {
    EXPECT_FALSE(DecodeSnapshot(std::span(bytes).first(n)).ok()) << n;
  }
  std::vector<std::byte> bad = bytes;
  bad[bytes.size() - 1] ^= std::byte{1};
  EXPECT_EQ(DecodeSnapshot(bad).status().code(), StatusCode::kCorruption);
}

// Mutations with a valid checksum reach the parser: each is refused or
// decodes to a snapshot that validates and round-trips (the manifest's JSON
// text may differ from the canonical one folio writes).
TEST(KvSnapshot, ForgedChecksumsNeverGetPastValidation) {
  const std::vector<std::byte> bytes = EncodeSnapshot(Sample());
  SplitMix64 rng(99);
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::byte> bad = bytes;
    const int flips = 1 + static_cast<int>(rng.NextU64() % 3);
    for (int f = 0; f < flips; ++f) {
      bad[rng.NextU64() % (bad.size() - 4)] = static_cast<std::byte>(rng.NextU64());
    }
    FixCrc(bad);
    auto r = DecodeSnapshot(bad);
    if (r.ok()) {
      ++accepted;
      EXPECT_TRUE(r->Validate().ok());
      auto again = DecodeSnapshot(EncodeSnapshot(*r));
      ASSERT_TRUE(again.ok());
      EXPECT_TRUE(Same(*again, *r));
    }
  }
  // Most flips land in the pools, whose bytes are free.
  EXPECT_GT(accepted, 0);
}

TEST(KvSnapshot, RefusesDescriptorsThatDisagreeWithTheManifest) {
  const KvSnapshot s = Sample();
  std::vector<std::byte> bytes = EncodeSnapshot(s);
  // The manifest's page_size 4 -> 2 changes what the descriptors must say.
  const std::string manifest_key = "\"page_size\":4";
  std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const size_t at = text.find(manifest_key);
  ASSERT_NE(at, std::string::npos);
  bytes[at + manifest_key.size() - 1] = static_cast<std::byte>('2');
  FixCrc(bytes);
  const Status st = DecodeSnapshot(bytes).status();
  EXPECT_FALSE(st.ok());
}

TEST(KvSnapshot, FileRoundTripAndAtomicWrite) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("folio_snapshot_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const KvSnapshot s = Sample(5);
  ASSERT_TRUE(WriteSnapshotFile(s, dir / "a.kvs").ok());
  auto back = ReadSnapshotFile(dir / "a.kvs");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(Same(*back, s));
  KvSnapshot invalid = s;
  invalid.num_pages = 9;
  EXPECT_FALSE(WriteSnapshotFile(invalid, dir / "b.kvs").ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "b.kvs"));
  EXPECT_EQ(ReadSnapshotFile(dir / "missing.kvs").status().code(), StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

TEST(JsonFields, NamesWhereTheFieldAndWhatItShouldBe) {
  const nlohmann::json j = {{"n", 5},    {"neg", -1},   {"x", 1.5},         {"b", true},
                            {"s", "hi"}, {"t", {1, 2}}, {"bad_t", {1, -2}}, {"ss", {"a", 3}}};
  const JsonFields f(j, "sequence 2");
  EXPECT_EQ(*f.U64("n"), 5u);
  EXPECT_EQ(*f.Double("x"), 1.5);
  EXPECT_TRUE(*f.Bool("b"));
  EXPECT_EQ(*f.String("s"), "hi");
  EXPECT_EQ(*f.Tokens("t"), (std::vector<int32_t>{1, 2}));
  auto message = [](const Status& st) { return st.ToString(); };
  EXPECT_NE(message(f.U64("neg").status()).find("sequence 2: neg is missing or not an unsigned"),
            std::string::npos);
  EXPECT_NE(message(f.U64("n", 4).status()).find("n = 5 exceeds 4"), std::string::npos);
  EXPECT_NE(message(f.Bool("missing").status()).find("missing is missing or not a boolean"),
            std::string::npos);
  EXPECT_NE(message(f.Tokens("bad_t").status()).find("-2, not a token id"), std::string::npos);
  EXPECT_NE(message(f.Strings("ss").status()).find("3, not a string"), std::string::npos);
  EXPECT_EQ(f.String("n").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace folio::format
