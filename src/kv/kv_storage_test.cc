#include "folio/kv/kv_storage.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "folio/core/splitmix64.h"
#include "folio/kv/host_kv_storage.h"
#include "folio/kv/paged_kv_cache.h"

namespace folio::kv {
namespace {

constexpr uint64_t kHeads = 2, kDim = 5, kPage = 4, kPages = 6;

KvStorageShape Shape(DType dtype, uint64_t storage_slots = 2) {
  return {storage_slots, kPages, kHeads, kPage, kDim, dtype};
}

std::unique_ptr<KvStorage> Make(const KvStorageShape& shape) {
  Result<std::unique_ptr<KvStorage>> s = MakeHostKvStorage(shape);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(*s);
}

// n rows of [kHeads, kDim] floats in [-2, 2), seeded.
std::vector<float> Rows(uint64_t n, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> out(n * kHeads * kDim);
  for (float& x : out) x = static_cast<float>(rng.NextUnit() * 4.0 - 2.0);
  return out;
}

// What a row of `dtype` reads back as, by the rules of kv_storage.h: float
// dtypes round each element to nearest even; i8 / f8e4m3 scale the row by
// its largest magnitude over the largest code first.
std::vector<float> Expected(DType dtype, std::span<const float> row) {
  std::vector<float> out(row.size());
  if (!IsQuantized(dtype)) {
    std::vector<std::byte> one(DTypeSize(dtype));
    for (size_t f = 0; f < row.size(); ++f) {
      StoreElement(dtype, one.data(), 0, row[f]);
      out[f] = LoadElement<float>(dtype, one.data(), 0);
    }
    return out;
  }
  float amax = 0.0f;
  for (const float x : row) amax = std::max(amax, std::abs(x));
  const float scale = amax / (dtype == DType::kI8 ? 127.0f : 448.0f);
  for (size_t f = 0; f < row.size(); ++f) {
    const float code = dtype == DType::kI8 ? std::nearbyint(row[f] / scale)
                                           : E4M3BitsToF32(F32ToE4M3Bits(row[f] / scale));
    out[f] = code * scale;
  }
  return out;
}

TEST(KvStorage, StartsPoisoned) {
  for (const DType dtype : {DType::kF32, DType::kBF16, DType::kI8}) {
    auto s = Make(Shape(dtype));
    float row[kDim];
    s->ReadRow(1, KvRole::kValue, kPages - 1, kPage - 1, kHeads - 1, row);
    for (const float x : row) EXPECT_TRUE(std::isnan(x)) << DTypeName(dtype);
  }
}

// Rows at shuffled token slots of one storage slot read back by the
// dtype's rules, through ReadRow and through the view; the other storage
// slot stays untouched.
TEST(KvStorage, RowsReadBackPerDtype) {
  const std::vector<int64_t> slots = {13, 2, 7, 22, 0};
  for (const DType dtype :
       {DType::kF32, DType::kBF16, DType::kF16, DType::kI8, DType::kF8E4M3, DType::kF64}) {
    SCOPED_TRACE(DTypeName(dtype));
    auto s = Make(Shape(dtype));
    const std::vector<float> keys = Rows(slots.size(), 1), values = Rows(slots.size(), 2);
    ASSERT_TRUE(s->WriteRows(1, slots, keys, values).ok());
    const PagedKvView view = s->View(1);
    for (size_t t = 0; t < slots.size(); ++t) {
      const uint64_t page = slots[t] / kPage, offset = slots[t] % kPage;
      for (uint64_t h = 0; h < kHeads; ++h) {
        for (const KvRole role : {KvRole::kKey, KvRole::kValue}) {
          const bool key = role == KvRole::kKey;
          const std::span<const float> row =
              std::span(key ? keys : values).subspan((t * kHeads + h) * kDim, kDim);
          const std::vector<float> want = Expected(dtype, row);
          float got[kDim];
          s->ReadRow(1, role, static_cast<PageId>(page), offset, h, got);
          const uint64_t at = view.RowIndex(page, h, offset);
          const float* scales = key ? view.key_scales : view.value_scales;
          const float scale = scales == nullptr ? 1.0f : scales[at / kDim];
          for (uint64_t f = 0; f < kDim; ++f) {
            EXPECT_EQ(got[f], want[f]);
            EXPECT_EQ(
                LoadElement<float>(dtype, key ? view.key_pages : view.value_pages, at + f) * scale,
                want[f]);
          }
        }
        float other[kDim];
        s->ReadRow(0, KvRole::kKey, static_cast<PageId>(page), offset, h, other);
        EXPECT_TRUE(std::isnan(other[0]));
      }
    }
  }
}

TEST(KvStorage, Float64RowsAreKeptExactly) {
  auto s = Make(Shape(DType::kF64));
  std::vector<double> row(kHeads * kDim, 1.0 / 3.0);
  ASSERT_TRUE(s->WriteRows(0, std::vector<int64_t>{5}, std::span<const double>(row),
                           std::span<const double>(row))
                  .ok());
  const uint64_t at = ScalarIndex({1, kHeads, kDim}, kPage, 5 / kPage, 5 % kPage, 0, 1, kDim - 1);
  EXPECT_EQ(LoadElement<double>(DType::kF64, s->View(0).key_pages, at), 1.0 / 3.0);
}

TEST(KvStorage, WriteRowsValidatesEveryRowBeforeWriting) {
  auto s = Make(Shape(DType::kF32));
  std::vector<float> k = Rows(2, 3), v = Rows(2, 4);
  v.back() = std::numeric_limits<float>::infinity();
  const std::vector<int64_t> slots = {0, 1};
  const Status bad = s->WriteRows(0, slots, k, v);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("value element"), std::string::npos) << bad.ToString();
  float row[kDim];
  s->ReadRow(0, KvRole::kKey, 0, 0, 0, row);
  EXPECT_TRUE(std::isnan(row[0]));  // the finite keys were not written either
  k.pop_back();
  EXPECT_EQ(s->WriteRows(0, slots, k, Rows(2, 4)).code(), StatusCode::kInvalidArgument);

  auto q = Make(Shape(DType::kI8));
  const std::vector<double> d(kHeads * kDim, 0.5);
  EXPECT_EQ(q->WriteRows(0, std::vector<int64_t>{0}, std::span<const double>(d),
                         std::span<const double>(d))
                .code(),
            StatusCode::kInvalidArgument);
}

// Copy-on-write copies the page in every storage slot and both roles, the
// row scales with it, and nothing else.
TEST(KvStorage, CopyPageCopiesEverySlotRoleAndScale) {
  const KvStorageShape shape = Shape(DType::kI8, 3);
  auto s = Make(shape);
  std::vector<int64_t> page1;
  for (uint64_t t = 0; t < kPage; ++t) page1.push_back(static_cast<int64_t>(kPage + t));
  for (uint64_t slot = 0; slot < 3; ++slot) {
    ASSERT_TRUE(s->WriteRows(slot, page1, Rows(kPage, 10 + slot), Rows(kPage, 20 + slot)).ok());
  }
  s->CopyPage(1, 4);
  const uint64_t bytes = shape.page_bytes(), rows = shape.scales_per_page();
  for (uint64_t slot = 0; slot < 3; ++slot) {
    const PagedKvView v = s->View(slot);
    for (const std::byte* pool : {v.key_pages, v.value_pages}) {
      EXPECT_EQ(std::memcmp(pool + 4 * bytes, pool + 1 * bytes, bytes), 0) << "slot " << slot;
    }
    for (const float* scales : {v.key_scales, v.value_scales}) {
      EXPECT_TRUE(std::equal(scales + 4 * rows, scales + 5 * rows, scales + 1 * rows));
      EXPECT_TRUE(std::isnan(scales[3 * rows]));  // neighbours untouched
      EXPECT_TRUE(std::isnan(scales[5 * rows]));
    }
  }
}

// A snapshot's page leaves token-major with the slots from live_slots on
// zeroed (scales: 1), and goes back in unchanged.
TEST(KvStorage, TokenMajorReadZeroesSlotsPastLive) {
  const KvStorageShape shape = Shape(DType::kI8);
  auto s = Make(shape);
  const std::vector<int64_t> page2 = {8, 9, 10, 11};
  ASSERT_TRUE(s->WriteRows(1, page2, Rows(kPage, 5), Rows(kPage, 6)).ok());
  const uint64_t row_bytes = kDim * DTypeSize(shape.dtype), live = 2;
  std::vector<std::byte> page(shape.page_bytes());
  s->ReadPageTokenMajor(1, KvRole::kValue, 2, live, page);
  std::vector<float> scales(shape.scales_per_page());
  s->ReadPageScales(1, KvRole::kValue, 2, live, scales);
  const PagedKvView v = s->View(1);
  for (uint64_t t = 0; t < kPage; ++t) {
    for (uint64_t h = 0; h < kHeads; ++h) {
      const std::byte* got = page.data() + (t * kHeads + h) * row_bytes;
      const uint64_t at = v.RowIndex(2, h, t);
      if (t < live) {
        EXPECT_EQ(std::memcmp(got, v.value_pages + at * DTypeSize(shape.dtype), row_bytes), 0);
        EXPECT_EQ(scales[t * kHeads + h], v.value_scales[at / kDim]);
      } else {
        EXPECT_TRUE(
            std::all_of(got, got + row_bytes, [](std::byte b) { return b == std::byte{0}; }));
        EXPECT_EQ(scales[t * kHeads + h], 1.0f);
      }
    }
  }
  // Into another page and back: the same bytes and scales.
  s->WritePageTokenMajor(0, KvRole::kKey, 5, page);
  ASSERT_TRUE(s->WritePageScales(0, KvRole::kKey, 5, scales).ok());
  std::vector<std::byte> again(page.size());
  std::vector<float> again_scales(scales.size());
  s->ReadPageTokenMajor(0, KvRole::kKey, 5, kPage, again);
  s->ReadPageScales(0, KvRole::kKey, 5, kPage, again_scales);
  EXPECT_EQ(again, page);
  EXPECT_EQ(again_scales, scales);
}

TEST(KvStorage, WritePageScalesRefusesANonPositiveScale) {
  auto s = Make(Shape(DType::kF8E4M3));
  std::vector<float> scales(kPage * kHeads, 0.5f);
  scales[3] = 0.0f;
  EXPECT_EQ(s->WritePageScales(0, KvRole::kKey, 1, scales).code(), StatusCode::kInvalidArgument);
  std::vector<float> kept(scales.size());
  s->ReadPageScales(0, KvRole::kKey, 1, kPage, kept);
  EXPECT_TRUE(std::isnan(kept[0]));  // nothing written
}

TEST(KvStorage, MakeHostKvStorageNamesAZeroField) {
  KvStorageShape shape = Shape(DType::kF32);
  shape.head_dim = 0;
  const Result<std::unique_ptr<KvStorage>> s = MakeHostKvStorage(shape);
  ASSERT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("head_dim"), std::string::npos);
}

// A storage that records what a cache asks of it and passes it on to a
// host storage.
class RecordingStorage final : public KvStorage {
 public:
  explicit RecordingStorage(std::unique_ptr<KvStorage> inner)
      : KvStorage(inner->shape()), inner_(std::move(inner)) {}
  PagedKvView View(uint64_t storage_slot) const override { return inner_->View(storage_slot); }
  Status WriteRows(uint64_t storage_slot, std::span<const int64_t> slot_mapping,
                   std::span<const float> keys, std::span<const float> values) override {
    writes.push_back({storage_slot, {slot_mapping.begin(), slot_mapping.end()}});
    return inner_->WriteRows(storage_slot, slot_mapping, keys, values);
  }
  Status WriteRows(uint64_t storage_slot, std::span<const int64_t> slot_mapping,
                   std::span<const double> keys, std::span<const double> values) override {
    writes.push_back({storage_slot, {slot_mapping.begin(), slot_mapping.end()}});
    return inner_->WriteRows(storage_slot, slot_mapping, keys, values);
  }
  void CopyPage(PageId from, PageId to) override {
    copies.emplace_back(from, to);
    inner_->CopyPage(from, to);
  }
  void ReadPageTokenMajor(uint64_t storage_slot, KvRole role, PageId page, uint64_t live_slots,
                          std::span<std::byte> out) const override {
    inner_->ReadPageTokenMajor(storage_slot, role, page, live_slots, out);
  }
  void WritePageTokenMajor(uint64_t storage_slot, KvRole role, PageId page,
                           std::span<const std::byte> in) override {
    inner_->WritePageTokenMajor(storage_slot, role, page, in);
  }
  void ReadPageScales(uint64_t storage_slot, KvRole role, PageId page, uint64_t live_slots,
                      std::span<float> out) const override {
    inner_->ReadPageScales(storage_slot, role, page, live_slots, out);
  }
  Status WritePageScales(uint64_t storage_slot, KvRole role, PageId page,
                         std::span<const float> in) override {
    return inner_->WritePageScales(storage_slot, role, page, in);
  }
  void ReadRow(uint64_t storage_slot, KvRole role, PageId page, uint64_t offset, uint64_t head,
               float* out) const override {
    inner_->ReadRow(storage_slot, role, page, offset, head, out);
  }

  std::vector<std::pair<uint64_t, std::vector<int64_t>>> writes;  // (storage slot, slots)
  std::vector<std::pair<PageId, PageId>> copies;                  // (from, to)

 private:
  std::unique_ptr<KvStorage> inner_;
};

// Two groups (a window-8 layer, a global one) of one layer each: one
// storage slot, and layers 0 and 1 in it at different groups' pages.
PagedKvCacheConfig Config() { return {2, kHeads, kDim, kPage, kPages, DType::kF32, {8, 0}, 0}; }

// One step of n tokens for seq, every layer written; the plan's slots.
void Append(PagedKvCache& c, SeqId seq, uint64_t n) {
  const std::pair<SeqId, uint64_t> req{seq, n};
  auto plan = c.PrepareAppend({&req, 1});
  ASSERT_TRUE(plan.ok() && plan->has_value());
  for (uint64_t l = 0; l < 2; ++l) {
    ASSERT_TRUE(
        c.WriteRows(l, (*plan)->slot_mapping(c.group_of(l)), Rows(n, l), Rows(n, l + 9)).ok());
  }
  c.Commit(**plan);
}

TEST(PagedKvCache, RoutesRowWritesAndCopyOnWriteToItsStorage) {
  auto owned = std::make_unique<RecordingStorage>(Make(PagedKvCache::StorageShape(Config())));
  RecordingStorage* storage = owned.get();
  Result<PagedKvCache> made = PagedKvCache::Create(Config(), std::move(owned));
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  PagedKvCache& c = *made;
  EXPECT_EQ(&c.storage(), storage);
  EXPECT_EQ(c.View(1).key_pages, storage->View(c.storage_slot(1)).key_pages);

  const SeqId a = c.AddSequence();
  Append(c, a, 2);
  ASSERT_EQ(storage->writes.size(), 2u);
  for (uint64_t l = 0; l < 2; ++l) {
    EXPECT_EQ(storage->writes[l].first, c.storage_slot(l));
    const std::span<const PageId> table = c.block_table(a, c.group_of(l));
    EXPECT_EQ(storage->writes[l].second,
              (std::vector<int64_t>{table[0] * int64_t{kPage}, table[0] * int64_t{kPage} + 1}));
  }
  EXPECT_TRUE(storage->copies.empty());

  // A fork shares the half-full tails; appending to it copies them, one
  // copy per group, from the shared tail to the fork's new one.
  const Result<SeqId> b = c.Fork(a);
  ASSERT_TRUE(b.ok());
  Append(c, *b, 1);
  ASSERT_EQ(storage->copies.size(), 2u);
  for (uint64_t g = 0; g < 2; ++g) {
    EXPECT_EQ(storage->copies[g],
              (std::pair<PageId, PageId>{c.block_table(a, g)[0], c.block_table(*b, g)[0]}));
  }
  // The copy carried a's rows: b reads them back through the storage.
  float from_a[kDim], from_b[kDim];
  c.ReadRow(1, KvRole::kValue, a, 1, 1, from_a);
  c.ReadRow(1, KvRole::kValue, *b, 1, 1, from_b);
  EXPECT_EQ(std::memcmp(from_a, from_b, sizeof(from_a)), 0);
}

TEST(PagedKvCache, CheckWritableIsTheTableHalfOfWriteRows) {
  PagedKvCache c = *PagedKvCache::Create(Config());
  const SeqId a = c.AddSequence();
  Append(c, a, 1);
  const int64_t owned = c.block_table(a, 1)[0] * int64_t{kPage} + 1;
  EXPECT_TRUE(c.CheckWritable(1, std::vector<int64_t>{owned}).ok());
  PageId free_page = 0;
  while (c.pool().refcount(free_page) != 0) ++free_page;
  const int64_t free_slot = free_page * int64_t{kPage};
  EXPECT_EQ(c.CheckWritable(0, std::vector<int64_t>{free_slot}).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.CheckWritable(0, std::vector<int64_t>{int64_t{kPages * kPage}}).code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(c.CheckWritable(2, {}).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(c.Fork(a).ok());
  EXPECT_EQ(c.CheckWritable(1, std::vector<int64_t>{owned}).code(),
            StatusCode::kFailedPrecondition);  // now shared
}

// Create refuses a storage that does not fit the config, naming the field.
TEST(PagedKvCache, RefusesAStorageOfTheWrongShape) {
  const KvStorageShape right = PagedKvCache::StorageShape(Config());
  EXPECT_EQ(right.num_storage_slots, 1u);
  const std::pair<const char*, void (*)(KvStorageShape&)> changes[] = {
      {"num_storage_slots", [](KvStorageShape& s) { ++s.num_storage_slots; }},
      {"num_pages", [](KvStorageShape& s) { ++s.num_pages; }},
      {"num_kv_heads", [](KvStorageShape& s) { ++s.num_kv_heads; }},
      {"page_size", [](KvStorageShape& s) { ++s.page_size; }},
      {"head_dim", [](KvStorageShape& s) { ++s.head_dim; }},
      {"dtype", [](KvStorageShape& s) { s.dtype = DType::kBF16; }}};
  for (const auto& [field, change] : changes) {
    KvStorageShape wrong = right;
    change(wrong);
    const Result<PagedKvCache> c = PagedKvCache::Create(Config(), Make(wrong));
    ASSERT_EQ(c.status().code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(c.status().message().find(field), std::string::npos) << c.status().ToString();
  }
  EXPECT_TRUE(PagedKvCache::Create(Config(), Make(right)).ok());
}

}  // namespace
}  // namespace folio::kv
