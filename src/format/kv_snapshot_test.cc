#include "folio/format/kv_snapshot.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "folio/core/splitmix64.h"
#include "folio/format/descriptor.h"

namespace folio::format {
namespace {

// Two layers, three sequences; sequences 0 and 1 share page 0 (a prefix).
KvSnapshot Sample(uint64_t seed = 1, ElementType dtype = ElementType::kBF16,
                  uint64_t page_size = 4) {
  KvSnapshot s;
  s.model_id = "folio-test-model";
  s.kv_dtype = dtype;
  s.page_size = page_size;
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

// Sample's pages as i8 codes, with a positive scale per row (page, slot and
// K/V head).
KvSnapshot SampleI8(uint64_t seed = 1, uint64_t page_size = 4) {
  KvSnapshot s = Sample(seed, ElementType::kI8, page_size);
  SplitMix64 rng(seed + 100);
  for (uint64_t l = 0; l < s.num_layers; ++l) {
    for (auto* scales : {&s.key_scales, &s.value_scales}) {
      std::vector<float> layer(s.num_pages * s.page_size * s.num_kv_heads);
      for (float& x : layer) x = 0.001f + static_cast<float>(rng.NextU64() % 1000) / 4096.0f;
      scales->push_back(std::move(layer));
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
         a.values == b.values && a.key_scales == b.key_scales && a.value_scales == b.value_scales;
}

uint32_t U32At(const std::vector<std::byte>& bytes, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v |= static_cast<uint32_t>(bytes[at + i]) << (8 * i);
  return v;
}

void PutU32At(std::vector<std::byte>& bytes, size_t at, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) bytes[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xFF);
}

// One tensor of a snapshot file, found by walking the container as
// docs/spec/kv-snapshot.md describes it (independently of DecodeSnapshot).
struct FileTensor {
  size_t descriptor_at = 0;
  TensorDescriptor descriptor;
  std::vector<size_t> buffer_at;  // file offsets
};

std::vector<FileTensor> WalkTensors(const std::vector<std::byte>& bytes) {
  uint64_t manifest_length = 0;
  std::memcpy(&manifest_length, bytes.data() + 16, 8);
  size_t pos = 24 + manifest_length;
  const uint32_t count = U32At(bytes, pos);
  pos += 4;
  std::vector<FileTensor> out;
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t length = U32At(bytes, pos);
    pos += 4;
    auto desc = TensorDescriptor::FromBytes(std::span(bytes).subspan(pos, length));
    EXPECT_TRUE(desc.ok()) << desc.status().ToString();
    FileTensor t{pos, *desc, {}};
    pos += length;
    for (const BufferHandle& b : desc->buffers()) {
      pos = (pos + 63) / 64 * 64;
      t.buffer_at.push_back(pos);
      pos += b.byte_size;
    }
    out.push_back(std::move(t));
  }
  EXPECT_EQ(pos, bytes.size() - 4);
  return out;
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
  s.kv_dtype = ElementType::kU8;
  expect(s, "kv_dtype u8 is not f32, bf16, f16 or i8");
  s = Sample();
  s.values[1].pop_back();
  expect(s, "layer 1 pools");
  s = Sample();
  s.key_scales = SampleI8().key_scales;
  expect(s, "kv_dtype bf16 snapshot carries key_scales");
  s = SampleI8();
  s.key_scales.clear();
  expect(s, "0 key and 2 value scale lists for 2 layers");
  s = SampleI8();
  s.value_scales[1].pop_back();
  expect(s, "layer 1 value scales: 31, not num_pages * page_size * num_kv_heads = 32");
  expect(SampleI8(1, 3), "power of two >= 2");
  expect(SampleI8(1, 1), "page_size is 1");
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

// The encoder before i8 existed wrote exactly these files for Sample(1,
// dtype): float snapshots are byte-for-byte what they were.
TEST(KvSnapshot, FloatFilesAreByteForByteUnchanged) {
  const struct {
    ElementType dtype;
    size_t size;
    uLong crc;  // of every byte before the stored CRC
  } golden[] = {{ElementType::kF32, 2964, 3548021986u},
                {ElementType::kBF16, 2196, 3419128789u},
                {ElementType::kF16, 2196, 1850082520u}};
  for (const auto& g : golden) {
    const std::vector<std::byte> bytes = EncodeSnapshot(Sample(1, g.dtype));
    ASSERT_EQ(bytes.size(), g.size) << ElementTypeName(g.dtype);
    EXPECT_EQ(crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()),
                    static_cast<uInt>(bytes.size() - 4)),
              g.crc)
        << ElementTypeName(g.dtype);
    EXPECT_EQ(U32At(bytes, 24 + U32At(bytes, 16)), 2 * 2u);  // num_tensors
  }
}

// i8: one tensor per layer, role and K/V head, its pool that head's rows and
// its per-block scales that head's row scales, slot by slot.
TEST(KvSnapshot, I8RoundTripsExactlyWithOneTensorPerHead) {
  const KvSnapshot s = SampleI8();
  ASSERT_TRUE(s.Validate().ok()) << s.Validate().ToString();
  const std::vector<std::byte> bytes = EncodeSnapshot(s);
  auto back = DecodeSnapshot(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(Same(*back, s));
  EXPECT_EQ(back->key_scales, s.key_scales);
  EXPECT_EQ(back->value_scales, s.value_scales);
  EXPECT_EQ(EncodeSnapshot(*back), bytes);

  const std::vector<FileTensor> tensors = WalkTensors(bytes);
  const uint64_t heads = s.num_kv_heads, pages = s.num_pages, slots = s.page_size;
  ASSERT_EQ(tensors.size(), 2 * s.num_layers * heads);
  const auto scheme = *PerBlockAffine::Symmetric(0, 4, 3, ElementType::kF32);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t layer = i / (2 * heads), head = i % heads;
    const bool value = (i / heads) % 2 == 1;
    const TensorDescriptor& d = tensors[i].descriptor;
    EXPECT_EQ(d.dtype(), ElementType::kI8);
    EXPECT_EQ(std::vector<uint64_t>(d.shape().begin(), d.shape().end()),
              (std::vector<uint64_t>{15, 1, 3}));
    ASSERT_TRUE(d.quantization().has_value());
    EXPECT_EQ(*d.quantization(), QuantizationScheme(scheme));
    const auto& layout = std::get<BlockPagedLayout>(d.layout());
    EXPECT_EQ(layout.layer_index(), layer);
    EXPECT_EQ(layout.kv_role(), value ? KvRole::kValue : KvRole::kKey);
    ASSERT_EQ(d.buffers().size(), 4u);
    EXPECT_EQ(d.buffers()[3].byte_size, pages * slots * 4);
    const std::vector<std::byte>& pool = value ? s.values[layer] : s.keys[layer];
    const std::vector<float>& scales = value ? s.value_scales[layer] : s.key_scales[layer];
    for (uint64_t row = 0; row < pages * slots; ++row) {
      EXPECT_TRUE(
          std::equal(pool.begin() + static_cast<ptrdiff_t>((row * heads + head) * 3),
                     pool.begin() + static_cast<ptrdiff_t>((row * heads + head) * 3 + 3),
                     bytes.begin() + static_cast<ptrdiff_t>(tensors[i].buffer_at[0] + row * 3)))
          << "tensor " << i << " row " << row;
      EXPECT_EQ(U32At(bytes, tensors[i].buffer_at[3] + 4 * row),
                std::bit_cast<uint32_t>(scales[row * heads + head]))
          << "tensor " << i << " slot " << row;
    }
  }
  const nlohmann::json summary = SnapshotSummary(s, bytes.size());
  EXPECT_EQ(summary["kv_dtype"], "i8");
  EXPECT_EQ(summary["kv_bytes"], 2 * 2 * 4 * s.page_bytes());
  EXPECT_EQ(summary["scale_bytes"], 2 * 2 * 2 * 4 * 4 * 4);
  EXPECT_FALSE(SnapshotSummary(Sample(), 0).contains("scale_bytes"));
}

TEST(KvSnapshot, I8EmptyBatchRoundTrips) {
  KvSnapshot s = SampleI8();
  s.sequences.clear();
  s.num_pages = 0;
  for (auto* pools : {&s.keys, &s.values}) {
    for (auto& p : *pools) p.clear();
  }
  for (auto* scales : {&s.key_scales, &s.value_scales}) {
    for (auto& p : *scales) p.clear();
  }
  auto back = DecodeSnapshot(EncodeSnapshot(s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(Same(*back, s));
}

// Every slot's scale in the file is its row's: changing one changes that
// row's scale alone.
TEST(KvSnapshot, I8SlotScalesReadBackAsRowScales) {
  const KvSnapshot s = SampleI8();
  std::vector<std::byte> bytes = EncodeSnapshot(s);
  const std::vector<FileTensor> tensors = WalkTensors(bytes);
  // Layer 1 value head 1 is the last tensor; page 1, slot 2.
  const size_t row = 1 * 4 + 2;
  const float doubled = 2.0f * s.value_scales[1][row * 2 + 1];
  PutU32At(bytes, tensors[7].buffer_at[3] + 4 * row, std::bit_cast<uint32_t>(doubled));
  FixCrc(bytes);
  auto back = DecodeSnapshot(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  KvSnapshot want = s;
  want.value_scales[1][row * 2 + 1] = doubled;
  EXPECT_EQ(back->value_scales, want.value_scales);
  EXPECT_EQ(back->key_scales, s.key_scales);
}

TEST(KvSnapshot, I8ScalesMustBeFiniteAndPositive) {
  for (const float bad : {0.0f, -0.5f, std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity()}) {
    KvSnapshot s = SampleI8();
    s.key_scales[0][(2 * 4 + 1) * 2 + 1] = bad;  // page 2, slot 1, head 1
    const Status st = s.Validate();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.ToString().find("layer 0 key scale of page 2 slot 1 head 1 is"), std::string::npos)
        << st.ToString();

    // The same scale in the file (layer 0 key head 1 is the second tensor).
    std::vector<std::byte> bytes = EncodeSnapshot(SampleI8());
    const std::vector<FileTensor> tensors = WalkTensors(bytes);
    PutU32At(bytes, tensors[1].buffer_at[3] + 4 * (2 * 4 + 1), std::bit_cast<uint32_t>(bad));
    FixCrc(bytes);
    const Status decoded = DecodeSnapshot(bytes).status();
    EXPECT_EQ(decoded.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(decoded.ToString().find("layer 0 key scale of page 2 slot 1 head 1 is"),
              std::string::npos)
        << decoded.ToString();
  }
}

// Each descriptor goes through folio's Hurray decoder (block-paged
// quantization rules) and must equal the one the manifest implies.
TEST(KvSnapshot, I8DescriptorsFollowTheHurrayRulesAndTheManifest) {
  const KvSnapshot s = SampleI8();
  const std::vector<std::byte> bytes = EncodeSnapshot(s);
  const std::vector<FileTensor> tensors = WalkTensors(bytes);
  const TensorDescriptor& d = tensors[0].descriptor;
  const auto desc_bytes = d.ToBytes();

  // block_size 8 with page_size 4: refused by the Hurray rules.
  const auto q4 = EncodeQuantization(*PerBlockAffine::Symmetric(0, 4, 3, ElementType::kF32));
  const auto q8 = EncodeQuantization(*PerBlockAffine::Symmetric(0, 8, 3, ElementType::kF32));
  const auto q_at = std::search(desc_bytes.begin(), desc_bytes.end(), q4.begin(), q4.end());
  ASSERT_NE(q_at, desc_bytes.end());
  std::vector<std::byte> bad = bytes;
  std::copy(
      q8.begin(), q8.end(),
      bad.begin() + static_cast<ptrdiff_t>(tensors[0].descriptor_at) + (q_at - desc_bytes.begin()));
  FixCrc(bad);
  Status st = DecodeSnapshot(bad).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.ToString().find("block_size 8 must equal block_paged page_size 4"),
            std::string::npos)
      << st.ToString();

  // A valid descriptor of the same length with f16 scales: not what the
  // manifest implies.
  std::vector<BufferHandle> buffers(d.buffers().begin(), d.buffers().end());
  buffers[3].byte_size /= 2;
  auto f16 = TensorDescriptor::Create(
      ElementType::kI8, std::vector<uint64_t>(d.shape().begin(), d.shape().end()), 0, d.layout(),
      buffers, *PerBlockAffine::Symmetric(0, 4, 3, ElementType::kF16));
  ASSERT_TRUE(f16.ok()) << f16.status().ToString();
  const auto f16_bytes = f16->ToBytes();
  ASSERT_EQ(f16_bytes.size(), desc_bytes.size());
  bad = bytes;
  std::copy(f16_bytes.begin(), f16_bytes.end(),
            bad.begin() + static_cast<ptrdiff_t>(tensors[0].descriptor_at));
  FixCrc(bad);
  st = DecodeSnapshot(bad).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.ToString().find("layer 0 key head 0 tensor descriptor disagrees with the "
                               "manifest: quantization per_block_affine (axis 0, block_size 4, "
                               "scale buffer 3, scale type f16, symmetric), want"),
            std::string::npos)
      << st.ToString();

  // A manifest whose page size Hurray cannot express for i8.
  bad = bytes;
  std::string text(reinterpret_cast<const char*>(bad.data()), bad.size());
  const std::string key = "\"page_size\":4";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  bad[at + key.size() - 1] = static_cast<std::byte>('6');
  FixCrc(bad);
  st = DecodeSnapshot(bad).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.ToString().find("power of two >= 2"), std::string::npos) << st.ToString();
}

TEST(KvSnapshot, I8ForgedChecksumsNeverGetPastValidation) {
  const std::vector<std::byte> bytes = EncodeSnapshot(SampleI8());
  SplitMix64 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::byte> bad = bytes;
    bad[rng.NextU64() % (bad.size() - 4)] = static_cast<std::byte>(rng.NextU64());
    FixCrc(bad);
    auto r = DecodeSnapshot(bad);
    if (r.ok()) {
      EXPECT_TRUE(r->Validate().ok());
      auto again = DecodeSnapshot(EncodeSnapshot(*r));
      ASSERT_TRUE(again.ok());
      EXPECT_TRUE(Same(*again, *r));
    }
  }
}

}  // namespace
}  // namespace folio::format
